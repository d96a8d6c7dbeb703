/**
 * Every CLI of scripts/ (plan, preflight, ingress:local, checkpoints) behaves the same way (scripts/lib/cli.ts): --help prints the usage on
 * stdout and exits 0; a bad argument prints `<cli>: <problem>` and the usage on stderr and exits 2;
 * an unknown stack is a bad argument in plan and preflight alike. Run: npx tsx --test test/tooling/cli.test.ts
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { describe, test } from "node:test";
import { REPO_ROOT } from "../../scripts/lib/plan";
import { scaled } from "../helpers/waits";

const cli = (script: string, ...args: string[]) =>
    spawnSync(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "scripts", script), ...args], {
        cwd: REPO_ROOT,
        encoding: "utf8",
        timeout: scaled(60_000),
    });

const CLIS = [
    { name: "plan", script: "plan.ts", bad: ["dev", "--bogus"], problem: /^plan: unknown option --bogus\n/ },
    { name: "preflight", script: "preflight.ts", bad: ["dev", "--bogus"], problem: /^preflight: unknown option --bogus\n/ },
    { name: "ingress:local", script: "ingress-local.ts", bad: ["--bogus"], problem: /^ingress:local: unknown argument "--bogus"/ },
    { name: "checkpoints", script: "checkpoints.ts", bad: ["dev", "--bogus"], problem: /^checkpoints: unexpected argument --bogus\n/ },
] as const;

describe("every CLI: --help, bad arguments, the same way", () => {
    for (const c of CLIS) {
        test(`${c.name} --help: the usage on stdout, exit 0`, () => {
            const r = cli(c.script, "--help");
            assert.equal(r.status, 0, r.stderr);
            assert.match(r.stdout, new RegExp(`^usage: npm run ${c.name}`));
            assert.equal(r.stderr, "");
        });
        test(`${c.name} with a bad argument: the problem and the usage on stderr, exit 2`, () => {
            const r = cli(c.script, ...c.bad);
            assert.equal(r.status, 2, r.stderr);
            assert.match(r.stderr, c.problem);
            assert.match(r.stderr, new RegExp(`\nusage: npm run ${c.name}`));
            assert.equal(r.stdout, "");
        });
    }
    test("an unknown stack: exit 2 listing every stack, cluster included, in plan and preflight alike", () => {
        for (const script of ["plan.ts", "preflight.ts"]) {
            const r = cli(script, "nosuchstack");
            assert.equal(r.status, 2, `${script}: ${r.stderr}`);
            assert.match(r.stderr, /no stack file stacks\/Pulumi\.nosuchstack\.yaml: known stacks are cluster, dev, prod, staging/);
        }
    });
    test("plan --help lists the recipes and the stacks found", () => {
        const r = cli("plan.ts", "--help");
        assert.match(r.stdout, /\nrecipes \(--recipe <name>\):\n {2}mbpp-whitebox /);
        assert.match(r.stdout, /\n {2}opencode-blackbox-32b /);
        assert.match(r.stdout, /\nstacks found in stacks\/: cluster, dev, .*\n$/);
    });
    test("no arguments: plan and preflight both name every stack, cluster included", () => {
        assert.match(cli("plan.ts").stderr, /^plan: name a stack \(cluster, dev, prod, staging\) or --recipe <name>/);
        assert.match(cli("preflight.ts").stderr, /^preflight: name a stack \(cluster, dev, prod, staging\) or a stack file/);
    });
    test("preflight of the cluster stack checks its cluster (here: none answers, a failed check, exit 1), no longer refuses it", () => {
        const r = spawnSync(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "scripts", "preflight.ts"), "cluster", "--json", "--timeout", "2"], {
            cwd: REPO_ROOT,
            encoding: "utf8",
            timeout: scaled(60_000),
            env: { ...process.env, KUBECONFIG: path.join(REPO_ROOT, "no-such-kubeconfig") },
        });
        assert.equal(r.status, 1, r.stderr);
        const out = JSON.parse(r.stdout);
        assert.equal(out.stack, "cluster");
        assert.match(out.target, /^cluster stack, kubernetes context staging-gpu-cluster/);
        assert.equal(out.findings[0].check, "API server");
        assert.equal(out.findings[0].status, "fail");
        assert.match(out.findings[0].found, /^no kubeconfig: .*no-such-kubeconfig does not exist/);
    });
});
