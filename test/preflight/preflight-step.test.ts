// The program's opt-in preflight (config `preflight`): `enforce` stops the up before any
// resource registers when the live target lacks a prerequisite, naming each with its fix;
// `warn` logs them and goes on; `off` (the default) reads nothing. Here the target is a
// kubeconfig whose context does not exist, so the first check (the API server) fails at once.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { deepMerge } from "../../components/config";
import { runUnderMocks } from "../../scripts/lib/mockrun";
import { readStackFile, REPO_ROOT } from "../../scripts/lib/plan";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-preflight-step-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));
const kubeconfig = path.join(tmp, "kubeconfig");
fs.writeFileSync(
    kubeconfig,
    "apiVersion: v1\nkind: Config\nclusters: [{ name: c, cluster: { server: 'https://127.0.0.1:1' } }]\nusers: [{ name: u, user: {} }]\ncontexts: [{ name: other, context: { cluster: c, user: u } }]\n",
);

const program = () => require(path.join(REPO_ROOT, "index.ts")) as () => Promise<Record<string, unknown>>;

function staging(preflight?: string) {
    const s = readStackFile("staging");
    const platform = deepMerge(JSON.parse(s.config["agent-rl-infra:platform"]), {
        target: { kubeconfig, context: "no-such-context" },
        ...(preflight ? { preflight } : {}),
    });
    return { stack: "staging", config: { ...s.config, "agent-rl-infra:platform": JSON.stringify(platform) }, secretKeys: s.secretKeys };
}

const registered = (r: Awaited<ReturnType<typeof runUnderMocks>>) => r.resources.filter((x) => x.type !== "pulumi:pulumi:Stack");

describe("the program's preflight step", () => {
    it("enforce: a missing prerequisite stops the up before anything registers, with the check and its fix", async () => {
        const r = await runUnderMocks(program(), staging("enforce"));
        assert.ok(pulumi.RunError.isInstance(r.error as Error), `a clean RunError: ${r.error}`);
        const message = (r.error as Error).message;
        assert.match(message, /^preflight \(preflight: enforce\) found 1 missing prerequisite; nothing was created:\n {2}- API server: /);
        assert.match(message, /no-such-context/);
        assert.match(message, /\n {4}fix: /);
        assert.deepEqual(registered(r), []);
    });

    it("warn: the same finding is logged and the up goes on", async () => {
        const warned: string[] = [];
        const original = pulumi.log.warn;
        (pulumi.log as any).warn = (msg: string) => {
            warned.push(msg);
            return Promise.resolve();
        };
        try {
            const r = await runUnderMocks(program(), staging("warn"));
            assert.equal(r.error, undefined);
            assert.ok(registered(r).length > 0);
        } finally {
            (pulumi.log as any).warn = original;
        }
        assert.ok(
            warned.some((w) => /^preflight failed: API server: .*no-such-context.*; fix: /.test(w)),
            warned.join("\n"),
        );
    });

    it("off (the default): nothing is read, the up goes on", async () => {
        const r = await runUnderMocks(program(), staging());
        assert.equal(r.error, undefined);
        assert.ok(registered(r).length > 0);
    });
});
