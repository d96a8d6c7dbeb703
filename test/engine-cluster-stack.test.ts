// Two run stacks on one cluster stack (issue 16 part 1), through the real Pulumi engine on the
// simulated GPU cluster, which starts without the agent-sandbox CRDs: the cluster stack installs
// agent-sandbox (from a local copy of its v0.5.6 CRDs plus a controller Deployment, standing in
// for the release manifest, which is not reachable here), the PriorityClasses and the gVisor
// RuntimeClass; two staging-like run stacks read it through clusterStack, take its classes and
// create nothing cluster-wide; destroying one leaves the other's sandboxes and every shared
// object in place. Skipped only when the fixtures are not built and CI is not set.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { agentSandboxManifest } from "./helpers/agent-sandbox-manifest";
import type { Cluster } from "./helpers/cluster";
import { changeCount, stackPlatform, type Engine, type EngineStack } from "./helpers/engine";
import { engineSkipReason } from "./helpers/engine-fixtures";
import { assertOk, namesFor, secs, teardown, startEngineHarness } from "./helpers/engine-checks";
import { scaled } from "./helpers/waits";

const skip = engineSkipReason();
const UP_MS = 180_000;
const CLUSTER_STACK = "cluster";
const CLUSTER_REF = `organization/agent-rl-infra/${CLUSTER_STACK}`;
const SANDBOX_CRDS = [
    "sandboxes.agents.x-k8s.io",
    "sandboxclaims.extensions.agents.x-k8s.io",
    "sandboxtemplates.extensions.agents.x-k8s.io",
    "sandboxwarmpools.extensions.agents.x-k8s.io",
];

describe("engine: two run stacks on one cluster stack", { skip, timeout: scaled(60 * 60_000) }, () => {
    let cluster: Cluster;
    let engine: Engine;
    let release: (() => void) | undefined;
    let clusterStack: EngineStack;
    const runs: Record<string, EngineStack> = {};
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-cluster-stack-"));
    const log = (line: string) => process.stderr.write(`# ${line}\n`);
    const runPlatform = (prefix: string, runId: string) =>
        stackPlatform("staging", cluster, { clusterStack: CLUSTER_REF, runId, target: { namespacePrefix: prefix } });

    before(async () => {
        ({ cluster, engine, release } = await startEngineHarness({ volumes: 12, crds: false }));
    });

    after(async () => {
        for (const s of [...Object.values(runs), clusterStack]) {
            if (!s) continue;
            const d = await s.destroy(`destroy ${s.name}`, { timeoutMs: UP_MS }).catch((e) => ({ ok: false, error: String(e) }));
            if (!d.ok) log(`destroy ${s.name} failed: ${d.error?.slice(0, 300)}`);
        }
        await teardown(engine, cluster, release);
        fs.rmSync(tmp, { recursive: true, force: true });
    });

    it("a run stack naming a cluster stack that is not up is refused before anything is created", async () => {
        const early = await engine.stack("early", runPlatform("arl-early", "early-001"));
        const up = await early.up("run stack before the cluster stack", { timeoutMs: UP_MS });
        assert.equal(up.ok, false);
        assert.match(up.error ?? "", /clusterStack: 'organization\/agent-rl-infra\/cluster' exports no cluster outputs|organization\/agent-rl-infra\/cluster/);
        assert.equal(changeCount(up.changes), 0, `nothing created: ${JSON.stringify(up.changes)}`);
        assert.equal(await cluster.getJson(["namespace", "arl-early-training"]), undefined);
    });

    it("the cluster stack installs agent-sandbox, the PriorityClasses and the RuntimeClass", async () => {
        clusterStack = await engine.stack(
            CLUSTER_STACK,
            {
                target: { kind: "kubernetes", kubeconfig: cluster.kubeconfig, context: cluster.context },
                agentSandbox: { manifest: agentSandboxManifest(tmp) },
                runtimeClasses: [{ name: "gvisor", handler: "runsc" }],
                teams: [{ name: "team-agents", quotas: { training: { gpus: 8 } } }],
            },
            { configKey: "agent-rl-infra:cluster" },
        );
        const up = await clusterStack.up("cluster stack up", { timeoutMs: UP_MS });
        assertOk(up, "cluster stack up");
        for (const crd of SANDBOX_CRDS) assert.ok(await cluster.getJson(["crd", crd]), `CRD ${crd}`);
        assert.equal((await cluster.getJson(["priorityclass", "agent-rl-training"]))?.value, 100000);
        assert.equal((await cluster.getJson(["priorityclass", "agent-rl-sandboxes"]))?.preemptionPolicy, "Never");
        assert.equal((await cluster.getJson(["runtimeclass", "gvisor"]))?.handler, "runsc");
        assert.deepEqual((await cluster.getJson(["resourcequota", "team-quota", "-n", "team-agents-training"]))?.spec.hard, { "requests.nvidia.com/gpu": "8" });
        assert.equal(up.outputs?.kind?.value, "agent-rl-infra/cluster");
        log(`cluster stack up: ${secs(up.ms)}`);
    });

    it("two run stacks on it: both up, both take its PriorityClasses, neither creates anything cluster-wide", async () => {
        for (const [prefix, runId] of [
            ["arl-a", "a-001"],
            ["arl-b", "b-001"],
        ] as const) {
            runs[prefix] = await engine.stack(`run-${prefix}`, runPlatform(prefix, runId));
            const up = await runs[prefix].up(`run stack ${prefix} up`, { timeoutMs: UP_MS });
            assertOk(up, `run stack ${prefix} up`);
            const n = namesFor(`run-${prefix}`, runs[prefix].platform());
            const template = await cluster.getJson(["sandboxtemplate", n.sandboxes.template, "-n", n.namespaces.sandboxes]);
            assert.equal(template?.spec.podTemplate.spec.priorityClassName, "agent-rl-sandboxes", `${prefix}: sandboxes take the cluster's sandbox class`);
            const jobs = await cluster.getJson(["jobs", "-n", n.namespaces.training]);
            assert.equal(
                jobs?.items[0]?.spec.template.spec.priorityClassName,
                "agent-rl-training",
                `${prefix}: the trainer takes the cluster's training class`,
            );
            const types = runs[prefix].stateResources().map((r: any) => r.type as string);
            assert.deepEqual(
                types.filter((t) => /PriorityClass|RuntimeClass|CustomResourceDefinition|yaml\/v2:ConfigFile|ClusterRole/.test(t)),
                [],
                `${prefix} owns nothing cluster-wide`,
            );
            log(`run stack ${prefix} up: ${secs(up.ms)}`);
        }
    });

    it("destroying one run stack leaves the other's sandboxes and every shared object; the other's next up changes nothing", async () => {
        const a = namesFor("run-arl-a", runs["arl-a"].platform());
        const down = await runs["arl-b"].destroy("destroy run stack arl-b", { timeoutMs: UP_MS });
        assertOk(down, "destroy run stack arl-b");
        delete runs["arl-b"];
        assert.ok(await cluster.getJson(["sandboxwarmpool", a.sandboxes.warmPool, "-n", a.namespaces.sandboxes]), "arl-a's warm pool is still there");
        assert.ok(await cluster.getJson(["sandboxtemplate", a.sandboxes.template, "-n", a.namespaces.sandboxes]), "and its template");
        for (const crd of SANDBOX_CRDS) assert.ok(await cluster.getJson(["crd", crd]), `CRD ${crd} still there`);
        assert.ok(await cluster.getJson(["priorityclass", "agent-rl-training"]), "the training PriorityClass still there");
        assert.ok(await cluster.getJson(["runtimeclass", "gvisor"]), "the RuntimeClass still there");
        const again = await runs["arl-a"].up("run stack arl-a up after arl-b's destroy", { timeoutMs: UP_MS });
        assertOk(again, "arl-a's next up");
        assert.equal(changeCount(again.changes), 0, `arl-a unchanged: ${JSON.stringify(again.changes)}`);
    });
});
