/**
 * docs/guides/zero-to-up.md, command by command. Its numbered commands are read from its sh blocks
 * (pageCommands, test/helpers/docs.ts); each one that can run here without a cluster, a Pulumi CLI or a
 * Docker daemon runs, as the page writes it, against the stack file the page creates (saved in a
 * temporary stacks/ directory and named by its path, so nothing is written into this repository's
 * stacks/ or images/):
 * - 2, `npm run images -- lock`, with every host it reaches (the base registries through
 *   AGENTRL_BASE_REGISTRY_MIRRORS, the Hub, the script host) a closed loopback port: exit 1, the host and
 *   the mirror setting, no stack trace, images/lock.json untouched (a machine offline gets this);
 * - 3, the registry-auth.json line, run by bash; its file is a registryAuth the config accepts;
 * - 4, `npm run images -- <stack> --to ... --registry-auth-file registry-auth.json`: with the shipped lock
 *   (unfilled) it stops before any build, naming the lock step, and leaves the stack file as it was;
 * - 5, `npm run plan -- <stack>`: plans, plan.md names the page's GPU;
 * - 9, `npm run preflight -- <stack>` against an empty kubeconfig: exit 1, naming the context and the fix.
 * Commands 2 to 5 also run for real, as the page writes them, in test/tooling/images-build.test.ts (it needs
 * root and a dockerd): the lock filled and the images built and pushed to a local registry, with stand-in
 * base images, scripts and packages served as mirrors through the documented settings, then the plan of the
 * stack file the build wrote, naming them by digest.
 * The others (1 npm ci, 6 to 8 and 10 to 12: pulumi, kubectl against a cluster) are checked, not run: every
 * `npm run X` is a script of package.json, every secret a secret key of the stack, every config key a field
 * of the schema, the kubectl URLs the releases the cluster stack installs, the log line's namespace, Job
 * output and container what the plan renders (no Pulumi CLI, no cluster here).
 * Run: npx tsx --test test/tooling/zero-to-up.test.ts
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, describe, test } from "node:test";
import YAML from "yaml";
import { checkRegistryAuth, isSecretConfigKey, platformSchema } from "../../components/config";
import { AGENT_SANDBOX_MANIFEST_URL, clusterSchema, JOBSET_MANIFEST_URL } from "../../components/config/cluster-schema";
import { schemaAt } from "../../components/config/schema-walk";
import { STACK_KEYS } from "../../components/config/stack-keys";
import { lockPath, readLock } from "../../scripts/lib/images/pins";
import { docStacks, type PageCommand, pageCommands, REPO, ZERO_TO_UP } from "../helpers/docs";

const PAGE = ZERO_TO_UP;

/** What a page's numbering gets wrong: a gap, a repeat, or more than `limit` commands up to the preflight. */
export function numberingProblems(cmds: readonly PageCommand[], limit = 10): string[] {
    const numbered = cmds.filter((c) => c.n > 0);
    const problems = numbered.flatMap((c, i) => (c.n === i + 1 ? [] : [`command '${c.line}' is numbered ${c.n}, expected ${i + 1}`]));
    const pre = numbered.find((c) => c.parts.some((p) => p.startsWith("npm run preflight")));
    if (pre === undefined) problems.push("no numbered npm run preflight");
    else if (pre.n > limit) problems.push(`the preflight is command ${pre.n}: more than ${limit} commands to a preflighted stack`);
    return problems;
}

/** Config keys the page names in backticks (`a.b`), each checked against the run or the cluster schema. */
export function configKeyProblems(text: string, platformInput: unknown): string[] {
    const keys = [...new Set([...text.matchAll(/`([a-z][A-Za-z]*(?:\.[a-z][A-Za-z]*)+)(?::[^`]*)?`/g)].map((m) => m[1]!))].filter(
        (k) => !/\.(md|ts|json|yaml|sh)$/.test(k) && !/^(node|nvidia|kubectl|docker|npm|pulumi)\./.test(k),
    );
    return keys.flatMap((k) => {
        const p = k.split(".");
        const found =
            schemaAt(platformSchema as never, p, platformInput) !== undefined ||
            schemaAt(clusterSchema as never, p, { target: { kind: "kubernetes" } }) !== undefined;
        return found ? [] : [`${PAGE} names \`${k}\`, a field of neither the run stack's schema nor the cluster stack's`];
    });
}

/** Static checks of every command part: scripts, secrets, the kubectl URLs. */
export function commandProblems(cmds: readonly PageCommand[], scripts: readonly string[]): string[] {
    const problems: string[] = [];
    for (const c of cmds)
        for (const part of c.parts) {
            const npm = /^npm run ([a-z:]+)/.exec(part);
            if (npm !== null && !scripts.includes(npm[1]!)) problems.push(`'${part}': no script ${npm[1]} in package.json`);
            const secret = /^pulumi config set --secret (\S+)/.exec(part);
            if (secret !== null && !(isSecretConfigKey(secret[1]!) && (STACK_KEYS as readonly string[]).includes(secret[1]!)))
                problems.push(`'${part}': ${secret[1]} is no secret key of the stack (${STACK_KEYS.join(", ")})`);
            const apply = /kubectl .*apply .*-f (\S+)/.exec(part);
            if (apply !== null && apply[1] !== AGENT_SANDBOX_MANIFEST_URL && apply[1] !== JOBSET_MANIFEST_URL)
                problems.push(
                    `'${part}': installs ${apply[1]}, not the release the cluster stack installs (${AGENT_SANDBOX_MANIFEST_URL} or ${JOBSET_MANIFEST_URL})`,
                );
        }
    return problems;
}

const read = (rel: string) => fs.readFileSync(path.join(REPO, rel), "utf8");
const text = read(PAGE);
const commands = pageCommands(text);
const scripts = Object.keys((JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts);
const pageStack = docStacks().find((s) => s.doc === PAGE);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-zero-to-up-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));
const tsx = pathToFileURL(path.join(REPO, "node_modules", "tsx", "dist", "loader.mjs")).href;

/** Runs `npm run <script> -- args` as npm would (tsx scripts/<script>.ts) in `cwd`, the stack named by the page given as its file. */
function npmRun(part: string, o: { cwd: string; env?: NodeJS.ProcessEnv; stackFiles: Record<string, string> }) {
    const m = /^npm run ([a-z]+)(?: -- (.*))?$/.exec(part);
    assert.ok(m, part);
    const args = (m[2] ?? "").split(/\s+/).filter((a) => a !== "");
    const mapped = args.map((a) => o.stackFiles[a] ?? a);
    return spawnSync(process.execPath, ["--import", tsx, path.join(REPO, "scripts", `${m[1]}.ts`), ...mapped], {
        cwd: o.cwd,
        encoding: "utf8",
        timeout: 240_000,
        env: { ...process.env, ...o.env },
    });
}

async function closedPort(): Promise<number> {
    const s = http.createServer();
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    const { port } = s.address() as AddressInfo;
    await new Promise<void>((r) => s.close(() => r()));
    return port;
}

const find = (pred: (p: string) => boolean, from = commands) => {
    const c = from.find((c) => c.parts.some(pred));
    assert.ok(c, `${PAGE} has the command`);
    return c.parts.find(pred)!;
};
const noTrace = (s: string) => assert.doesNotMatch(s, /internal error|fetch failed|\n\s+at [\w.<]+ \(/);

describe(`${PAGE}: the page's shape`, () => {
    test("commands numbered 1..n without a gap, the preflight within 10; README.md and docs/README.md link the page first", () => {
        assert.ok(commands.filter((c) => c.n > 0).length >= 12, `found ${commands.length}`);
        assert.deepEqual(numberingProblems(commands), []);
        const readme = read("README.md");
        const firstGuide = (t: string) => /\]\((?:docs\/)?guides\/([a-z0-9-]+)\.md/.exec(t)?.[1];
        assert.equal(firstGuide(readme.slice(readme.indexOf("## Quickstart"))), "zero-to-up");
        assert.equal(firstGuide(read("docs/README.md")), "zero-to-up");
        assert.match(read("docs/guides/opencode-blackbox.md"), /\]\(zero-to-up\.md\)/);
        assert.match(read("docs/guides/kubernetes.md"), /\]\(zero-to-up\.md\)/);
        assert.doesNotMatch(read("docs/guides/opencode-blackbox.md"), /Then deploy as \[Kubernetes\]/);
    });

    test("every npm run names a script, every secret a secret key, every kubectl apply the release the cluster stack installs, every config key a field", () => {
        assert.deepEqual(commandProblems(commands, scripts), []);
        assert.ok(pageStack, "the page shows its stack file");
        const platform = (YAML.parse(pageStack.text) as { config: Record<string, unknown> }).config["agent-rl-infra:platform"];
        assert.deepEqual(configKeyProblems(text, platform), []);
        assert.ok(text.includes(JOBSET_MANIFEST_URL), "the JobSet command names JOBSET_MANIFEST_URL");
    });

    test("the Pulumi CLI's version is the engine fixture's", () => {
        const fixture = /^PULUMI_VERSION=v(\S+)/m.exec(read("test/engine/build.sh"))?.[1];
        assert.ok(fixture);
        assert.deepEqual(
            [...text.matchAll(/Pulumi CLI \| (\d+\.\d+\.\d+)|--version (\d+\.\d+\.\d+)/g)].map((m) => m[1] ?? m[2]),
            [fixture, fixture],
        );
    });

    test("the checks fail on a wrong page: a gap, a late preflight, an unknown script, a plain key, another release, an unknown field", () => {
        const wrong = pageCommands(
            [
                "```sh",
                "# 1. a",
                "npm ci",
                "# 3. b",
                "npm run imagez -- lock",
                "# 4. c",
                "pulumi config set --secret hfTokn hf_...",
                "# 5. d",
                "kubectl apply --server-side -f https://github.com/kubernetes-sigs/agent-sandbox/releases/download/v0.5.6/sandbox-with-extensions.yaml",
                "# 11. e",
                "npm run preflight -- blackbox",
                "```",
            ].join("\n"),
        );
        assert.deepEqual(numberingProblems(wrong), [
            "command 'npm run imagez -- lock' is numbered 3, expected 2",
            "command 'pulumi config set --secret hfTokn hf_...' is numbered 4, expected 3",
            "command 'kubectl apply --server-side -f https://github.com/kubernetes-sigs/agent-sandbox/releases/download/v0.5.6/sandbox-with-extensions.yaml' is numbered 5, expected 4",
            "command 'npm run preflight -- blackbox' is numbered 11, expected 5",
            "the preflight is command 11: more than 10 commands to a preflighted stack",
        ]);
        const problems = commandProblems(wrong, scripts);
        assert.equal(problems.length, 3, problems.join("\n"));
        assert.match(problems[0]!, /no script imagez in package\.json/);
        assert.match(problems[1]!, /hfTokn is no secret key/);
        assert.match(problems[2]!, /v0\.5\.6\/sandbox-with-extensions\.yaml, not the release/);
        assert.deepEqual(configKeyProblems("set `agentSandbox.instal: true` and `target.gpuProduct`", { target: { kind: "kubernetes" } }), [
            `${PAGE} names \`agentSandbox.instal\`, a field of neither the run stack's schema nor the cluster stack's`,
        ]);
    });
});

describe(`${PAGE}: the commands that run here`, () => {
    const stacksDir = path.join(tmp, "stacks");
    const stackFiles: Record<string, string> = {};
    let stackName = "";
    before(() => {
        assert.ok(pageStack);
        stackName = pageStack.name;
        fs.mkdirSync(stacksDir, { recursive: true });
        stackFiles[stackName] = path.join(stacksDir, `Pulumi.${stackName}.yaml`);
        fs.writeFileSync(stackFiles[stackName], pageStack.text);
        // The white-box section's dev stack, as a copy: the images step writes into the file it is given.
        stackFiles.dev = path.join(stacksDir, "Pulumi.dev.yaml");
        fs.copyFileSync(path.join(REPO, "stacks", "Pulumi.dev.yaml"), stackFiles.dev);
    });

    test("the page names its stack file stacks/Pulumi.<stack>.yaml and uses that name in every command", () => {
        assert.match(text, new RegExp(`\`stacks/Pulumi\\.${stackName}\\.yaml\``));
        for (const part of commands.flatMap((c) => c.parts).filter((p) => /^npm run (plan|preflight|images) -- (?!lock)/.test(p)))
            assert.ok([stackName, "dev"].includes(part.split(/\s+/)[4]!), part);
        assert.ok(commands.some((c) => c.parts.includes(`pulumi stack select --create ${stackName}`)));
    });

    test("npm run images -- lock, offline: exit 1 naming the host and AGENTRL_BASE_REGISTRY_MIRRORS, no stack trace, the lock untouched", async () => {
        const port = await closedPort();
        const before = fs.readFileSync(lockPath(REPO), "utf8");
        for (const part of commands.flatMap((c) => c.parts).filter((p) => p.startsWith("npm run images -- lock"))) {
            const r = npmRun(part, {
                cwd: tmp,
                stackFiles,
                env: {
                    AGENTRL_BASE_REGISTRY_MIRRORS: `docker.io=127.0.0.1:${port}/dockerhub,ghcr.io=127.0.0.1:${port}/ghcr`,
                    AGENTRL_HF_ENDPOINT: `http://127.0.0.1:${port}`,
                    AGENTRL_FETCH_BASE_URL: `http://127.0.0.1:${port}`,
                },
            });
            assert.equal(r.status, 1, `${part}: ${r.stderr}`);
            assert.match(r.stderr, new RegExp(`could not reach 127\\.0\\.0\\.1:${port} \\(ECONNREFUSED\\)`), part);
            assert.match(r.stderr, /AGENTRL_BASE_REGISTRY_MIRRORS|AGENTRL_HF_ENDPOINT/, part);
            noTrace(r.stderr);
        }
        assert.equal(fs.readFileSync(lockPath(REPO), "utf8"), before);
    });

    test("the registry-auth.json line writes a registryAuth the config accepts, naming the registry of --to", () => {
        const line = find((p) => p.startsWith('printf \'{"auths"'));
        const r = spawnSync("bash", ["-c", line], { cwd: tmp, encoding: "utf8" });
        assert.equal(r.status, 0, r.stderr);
        const auth = checkRegistryAuth(fs.readFileSync(path.join(tmp, "registry-auth.json"), "utf8"));
        const to = /--to ([^/\s]+)\//.exec(find((p) => /^npm run images -- (?!lock)/.test(p)))?.[1];
        assert.deepEqual(auth.registries, [to]);
    });

    test("npm run images -- <stack> --to ...: with the shipped (unfilled) lock it stops before building, naming the lock step; the stack file unchanged", (t) => {
        if (Object.values(readLock(REPO).images).some((i) => i.base !== null))
            return t.skip("images/lock.json is filled here: the build needs dockerd (test/tooling/images-build.test.ts)");
        if (!fs.existsSync(path.join(tmp, "registry-auth.json"))) fs.writeFileSync(path.join(tmp, "registry-auth.json"), '{"auths":{}}');
        for (const part of commands.flatMap((c) => c.parts).filter((p) => /^npm run images -- (?!lock)/.test(p))) {
            const file = stackFiles[part.split(/\s+/)[4]!]!;
            const before = fs.readFileSync(file, "utf8");
            const r = npmRun(part, { cwd: tmp, stackFiles });
            assert.equal(r.status, 1, `${part}: ${r.stderr}`);
            assert.match(r.stderr, /(trainer-blackbox|trainer-whitebox): refused, the lock is not filled for it/, part);
            assert.match(r.stderr, /npm run images -- lock/, part);
            noTrace(r.stderr);
            assert.equal(fs.readFileSync(file, "utf8"), before);
        }
    });

    test("npm run plan -- <stack> plans the page's stack file; plan.md names its GPU and sends the placeholders to npm run images", () => {
        for (const part of commands.flatMap((c) => c.parts).filter((p) => p.startsWith("npm run plan -- "))) {
            const r = npmRun(part, { cwd: tmp, stackFiles });
            assert.equal(r.status, 0, `${part}: ${r.stderr}`);
        }
        const md = fs.readFileSync(path.join(tmp, "out", stackName, "plan.md"), "utf8");
        const gpu = /gpuProduct: (\S+)/.exec(pageStack!.text)?.[1];
        assert.ok(gpu);
        assert.match(md, new RegExp(`\\*\\*GPU\\*\\*: ${gpu} .*pinned by \`target\\.gpuProduct\``));
        assert.match(md, /images\.trainer: .*npm run images -- <stack> --to <registry>\/<path> builds trainer-blackbox/);
        // Command 11's namespace, Job output and container are the plan's.
        const logs = find((p) => /^kubectl .* logs /.test(p));
        const ns = /-n (\S+)/.exec(logs)?.[1];
        assert.ok(md.includes(`\`${ns}\``), `plan.md names namespace ${ns}`);
        const job = fs.readdirSync(path.join(tmp, "out", stackName, "manifests")).find((f) => /-job-/.test(f));
        assert.ok(job);
        const manifest = YAML.parse(fs.readFileSync(path.join(tmp, "out", stackName, "manifests", job), "utf8"));
        assert.equal(manifest.metadata.namespace, ns);
        const container = /-c (\S+)/.exec(logs)?.[1];
        assert.ok(
            (manifest.spec.template.spec.containers as Array<{ name: string }>).some((c) => c.name === container),
            container,
        );
        assert.match(logs, /job\/\$\(pulumi stack output trainingJob\)/);
        assert.match(read("components/platform/platform.ts"), /trainingJob: training\.jobName/);
    });

    test("npm run preflight -- <stack> against no cluster: exit 1, naming the context and the fix, no stack trace", () => {
        const kubeconfig = path.join(tmp, "kubeconfig");
        fs.writeFileSync(kubeconfig, "");
        const part = find((p) => p === `npm run preflight -- ${stackName}`);
        const r = npmRun(part, { cwd: tmp, stackFiles, env: { KUBECONFIG: kubeconfig } });
        assert.equal(r.status, 1, r.stdout + r.stderr);
        const context = /context: (\S+)/.exec(pageStack!.text)?.[1];
        assert.match(r.stdout, new RegExp(`has no context '${context}'`));
        assert.match(r.stdout, /fix: set target\.context/);
        noTrace(r.stdout + r.stderr);
    });
});
