// Two run stacks on one cluster stack (issue 16 part 1), through the real Pulumi engine on the
// simulated GPU cluster, which starts without the agent-sandbox CRDs: the cluster stack installs
// agent-sandbox (from a local copy of its CRDs plus a controller Deployment, a stand-in for the
// release manifest, which is not reachable here), the PriorityClasses and the gVisor
// RuntimeClass; two staging-like run stacks read it through clusterStack, take its classes and
// create nothing cluster-wide; destroying one leaves the other's sandboxes and every shared
// object in place. The cluster stack is first deployed on agent-sandbox v0.5.6 and upgraded to
// v1.0.1 with the run stacks' objects in place (issue 45): what `pulumi up` does to the CRDs, the
// stored objects and the objects v1.0.0 dropped; the steps after it run on v1.0.1.
// Skipped only when the fixtures are not built and CI is not set.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { AGENT_SANDBOX_VERSION } from "../../components/config";
import { AGENT_SANDBOX_PREVIOUS_VERSION, agentSandboxManifest } from "../helpers/agent-sandbox-manifest";
import type { Cluster } from "../helpers/cluster";
import { changeCount, stackPlatform, type Engine, type EngineStack } from "../helpers/engine";
import { engineSkipReason } from "../helpers/engine-fixtures";
import { assertOk, namesFor, secs, teardown, startEngineHarness } from "../helpers/engine-checks";
import { scaled } from "../helpers/waits";

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

    const clusterConfig = (agentSandboxVersion: string) => ({
        target: { kind: "kubernetes", kubeconfig: cluster.kubeconfig, context: cluster.context },
        agentSandbox: { manifest: agentSandboxManifest(tmp, agentSandboxVersion) },
        runtimeClasses: [{ name: "gvisor", handler: "runsc" }],
        teams: [{ name: "team-agents", quotas: { training: { gpus: 8 } } }],
    });

    it(`the cluster stack installs agent-sandbox (${AGENT_SANDBOX_PREVIOUS_VERSION}, upgraded below), the PriorityClasses and the RuntimeClass`, async () => {
        clusterStack = await engine.stack(CLUSTER_STACK, clusterConfig(AGENT_SANDBOX_PREVIOUS_VERSION), { configKey: "agent-rl-infra:cluster" });
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

    it(`upgrading the cluster stack from agent-sandbox ${AGENT_SANDBOX_PREVIOUS_VERSION} to ${AGENT_SANDBOX_VERSION}: CRDs updated in place, the run stacks' objects kept, the webhook objects deleted`, async () => {
        const a = namesFor("run-arl-a", runs["arl-a"].platform());
        const before = await cluster.getJson<any>(["sandboxwarmpool", a.sandboxes.warmPool, "-n", a.namespaces.sandboxes]);
        for (const crd of SANDBOX_CRDS) {
            const c = await cluster.getJson<any>(["crd", crd]);
            assert.deepEqual(
                c.spec.versions.map((v: any) => v.name),
                ["v1beta1", "v1alpha1"],
                `${crd} on ${AGENT_SANDBOX_PREVIOUS_VERSION}: v1alpha1 served beside v1beta1`,
            );
            assert.equal(c.spec.conversion.strategy, "Webhook", `${crd} on ${AGENT_SANDBOX_PREVIOUS_VERSION}: a conversion webhook`);
            // What agent-sandbox's docs/api-migration-guide.md (v1.0.1) asks before the upgrade: nothing stored as v1alpha1.
            assert.deepEqual(c.status.storedVersions, ["v1beta1"], `${crd}: the stack only ever wrote v1beta1`);
        }
        assert.ok(await cluster.getJson(["service", "agent-sandbox-webhook-service", "-n", "agent-sandbox-system"]), "the v0.5.6 webhook Service");

        await clusterStack.setPlatform(clusterConfig(AGENT_SANDBOX_VERSION));
        const up = await clusterStack.up(`cluster stack up: agent-sandbox ${AGENT_SANDBOX_VERSION}`, { timeoutMs: UP_MS });
        assertOk(up, "cluster stack upgrade");
        const changed = Object.entries(up.changes ?? {}).filter(([k]) => k !== "same");
        log(`upgrade: ${secs(up.ms)}, changes ${JSON.stringify(Object.fromEntries(changed))}`);
        assert.equal(up.changes?.replace ?? 0, 0, `nothing replaced (a replaced CRD would delete every stored object): ${JSON.stringify(up.changes)}`);
        assert.equal(up.changes?.delete, 3, `the webhook Service, Role and RoleBinding deleted: ${JSON.stringify(up.changes)}`);
        for (const crd of SANDBOX_CRDS) {
            const c = await cluster.getJson<any>(["crd", crd]);
            assert.deepEqual(
                c.spec.versions.map((v: any) => v.name),
                ["v1beta1"],
                `${crd}: v1beta1 only`,
            );
            assert.equal(c.spec.conversion?.strategy ?? "None", "None", `${crd}: no conversion webhook`);
            assert.deepEqual(c.status.storedVersions, ["v1beta1"], `${crd}: stored v1beta1`);
        }
        for (const gone of ["service/agent-sandbox-webhook-service", "role/agent-sandbox-controller", "rolebinding/agent-sandbox-controller"])
            assert.equal(await cluster.getJson([gone, "-n", "agent-sandbox-system"]), undefined, `${gone} deleted by the upgrade`);
        const controller = await cluster.getJson<any>(["deployment", "agent-sandbox-controller", "-n", "agent-sandbox-system"]);
        assert.equal(controller.spec.template.spec.containers[0].image, `registry.test/agent-sandbox-controller:${AGENT_SANDBOX_VERSION}`);
        // The stored objects: the same objects (uid), read through v1beta1, unchanged in spec.
        const after = await cluster.getJson<any>(["sandboxwarmpool", a.sandboxes.warmPool, "-n", a.namespaces.sandboxes]);
        assert.equal(after?.metadata.uid, before.metadata.uid, "the warm pool is the same object");
        assert.deepEqual(after.spec, before.spec);
        assert.ok(await cluster.getJson(["sandboxtemplate", a.sandboxes.template, "-n", a.namespaces.sandboxes]), "the template kept");
        // v1alpha1 is gone: a request in it is refused by the API server.
        const alpha = await cluster.kubectl(["get", `sandboxwarmpools.v1alpha1.extensions.agents.x-k8s.io`, "-n", a.namespaces.sandboxes]);
        assert.notEqual(alpha.code, 0, "v1alpha1 is no longer served");
        // Both run stacks see nothing to change: their objects are written in v1beta1, which 1.0 keeps.
        for (const prefix of ["arl-a", "arl-b"]) {
            const again = await runs[prefix].up(`run stack ${prefix} up on ${AGENT_SANDBOX_VERSION}`, { timeoutMs: UP_MS });
            assertOk(again, `run stack ${prefix} after the upgrade`);
            assert.equal(changeCount(again.changes), 0, `${prefix} unchanged by the upgrade: ${JSON.stringify(again.changes)}`);
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
