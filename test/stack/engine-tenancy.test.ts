// Tenancy through the real Pulumi engine on the simulated GPU cluster (issue 26 point 6): the
// cluster stack makes team-agents' role namespaces with a training quota of 2 GPUs and exports the
// cluster's kube-system UID; two staging-like run stacks deploy into the team's namespaces
// (target.team), create no namespace and nothing cluster-wide, pass the identity check against the
// real UID, and share the team's quota: the first run's trainer pod is created, the second's is
// refused by the API server ("exceeded quota") until the first is gone. The pods are kwok's
// (stand-ins: they run nothing). Skipped only when the fixtures are not built and CI is not set.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { agentSandboxManifest } from "../helpers/agent-sandbox-manifest";
import type { Cluster } from "../helpers/cluster";
import { stackPlatform, type Engine, type EngineStack } from "../helpers/engine";
import { engineSkipReason } from "../helpers/engine-fixtures";
import { assertOk, namesFor, secs, startEngineHarness, teardown } from "../helpers/engine-checks";
import { pollUntil, scaled } from "../helpers/waits";

const skip = engineSkipReason();
const UP_MS = 180_000;
const CLUSTER_REF = "organization/agent-rl-infra/cluster";
const TEAM = "team-agents";

describe("engine: run stacks in a team's namespaces share the team's quota", { skip, timeout: scaled(40 * 60_000) }, () => {
    let cluster: Cluster;
    let engine: Engine;
    let release: (() => void) | undefined;
    let clusterStack: EngineStack | undefined;
    const runs: EngineStack[] = [];
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-tenancy-"));
    const log = (line: string) => process.stderr.write(`# ${line}\n`);
    const runPlatform = (prefix: string, runId: string) =>
        stackPlatform("staging", cluster, { clusterStack: CLUSTER_REF, runId, target: { namespacePrefix: prefix, team: TEAM } });

    before(async () => {
        ({ cluster, engine, release } = await startEngineHarness({ volumes: 12, crds: false }));
    });

    after(async () => {
        for (const s of [...runs.reverse(), clusterStack]) {
            if (!s) continue;
            const d = await s.destroy(`destroy ${s.name}`, { timeoutMs: UP_MS }).catch((e) => ({ ok: false, error: String(e) }));
            if (!d.ok) log(`destroy ${s.name} failed: ${d.error?.slice(0, 300)}`);
        }
        await teardown(engine, cluster, release);
        fs.rmSync(tmp, { recursive: true, force: true });
    });

    it("the cluster stack makes the team's four namespaces, its quota and claim policy, and exports the kube-system UID", async () => {
        clusterStack = await engine.stack(
            "cluster",
            {
                target: { kind: "kubernetes", kubeconfig: cluster.kubeconfig, context: cluster.context },
                agentSandbox: { manifest: agentSandboxManifest(tmp) },
                runtimeClasses: [{ name: "gvisor", handler: "runsc" }],
                teams: [{ name: TEAM, quotas: { training: { gpus: 2 } } }],
            },
            { configKey: "agent-rl-infra:cluster" },
        );
        const up = await clusterStack.up("cluster stack up", { timeoutMs: UP_MS });
        assertOk(up, "cluster stack up");
        for (const role of ["training", "ingress", "envs", "sandboxes"])
            assert.ok(await cluster.getJson(["namespace", `${TEAM}-${role}`]), `namespace ${TEAM}-${role}`);
        assert.deepEqual((await cluster.getJson(["resourcequota", "team-quota", "-n", `${TEAM}-training`]))?.spec.hard, { "requests.nvidia.com/gpu": "2" });
        const uid = (await cluster.getJson(["namespace", "kube-system"]))?.metadata.uid;
        assert.equal(up.outputs?.clusterId?.value, uid, "clusterId is the cluster's kube-system UID");
        log(`cluster stack up: ${secs(up.ms)}`);
    });

    it("the first run deploys into the team's namespaces, makes no namespace and nothing cluster-wide, and its trainer pod is created", async () => {
        const a = await engine.stack("run-a", runPlatform("arl-a", "a-001"));
        runs.push(a);
        const up = await a.up("run a up", { timeoutMs: UP_MS });
        assertOk(up, "run a up");
        // kube-system is read (the identity check: an external resource in the state), never owned.
        const state = a.stateResources();
        assert.deepEqual(
            state.filter((r: any) => r.type === "kubernetes:core/v1:Namespace").map((r: any) => [r.id, r.external === true]),
            [["kube-system", true]],
        );
        assert.deepEqual(
            state
                .filter((r: any) => r.external !== true)
                .map((r: any) => r.type as string)
                .filter((t: string) => /core\/v1:Namespace$|ValidatingAdmissionPolicy|PriorityClass|RuntimeClass|CustomResourceDefinition|ClusterRole/.test(t)),
            [],
            "run a owns no namespace and nothing cluster-wide",
        );
        const n = namesFor("run-a", a.platform());
        assert.equal(n.namespaces.training, `${TEAM}-training`);
        const trainerPod = async () => {
            const pods = await cluster.getJson(["pods", "-n", n.namespaces.training, "-l", `job-name=${up.outputs?.trainingJob?.value}`]);
            return pods?.items?.[0];
        };
        const pod = await pollUntil("run a's trainer pod", trainerPod, { budgetMs: 60_000, intervalMs: 1000 });
        log(`run a up: ${secs(up.ms)}; its trainer pod ${pod.metadata.name} created`);
    });

    it("the second run is up too, but the team's quota refuses its trainer pod (exceeded quota); the first run's pod is untouched", async () => {
        const b = await engine.stack("run-b", runPlatform("arl-b", "b-001"));
        runs.push(b);
        const up = await b.up("run b up", { timeoutMs: UP_MS });
        assertOk(up, "run b up");
        const n = namesFor("run-b", b.platform());
        // The Job's name is the run's plus a hash of its pod template (the stack output says which).
        const job = up.outputs?.trainingJob?.value as string;
        assert.match(job, new RegExp(`^${n.training.job}-[0-9a-f]{8}$`));
        const refusal = async () => {
            const events = await cluster.getJson(["events", "-n", n.namespaces.training]);
            return (events?.items ?? []).find((e: any) => e.involvedObject?.name === job && /exceeded quota/.test(e.message ?? ""));
        };
        const refused = await pollUntil("the quota's refusal of run b's trainer pod", refusal, { budgetMs: 90_000, intervalMs: 1000 }).catch(async (e) => {
            const events = await cluster.getJson(["events", "-n", n.namespaces.training]);
            const quota = await cluster.getJson(["resourcequota", "team-quota", "-n", n.namespaces.training]);
            const pods = await cluster.getJson(["pods", "-n", n.namespaces.training]);
            const jobs = await cluster.getJson(["jobs", "-n", n.namespaces.training]);
            log(`quota status: ${JSON.stringify(quota?.status)}`);
            log(`pods: ${(pods?.items ?? []).map((p: any) => `${p.metadata.name} ${p.status.phase}`).join("; ")}`);
            log(`jobs: ${(jobs?.items ?? []).map((j: any) => `${j.metadata.name} suspend=${j.spec.suspend} ${JSON.stringify(j.status)}`).join("; ")}`);
            log(
                `events: ${(events?.items ?? [])
                    .map((x: any) => `${x.involvedObject?.kind}/${x.involvedObject?.name} ${x.reason}: ${x.message}`)
                    .join(" | ")
                    .slice(0, 3000)}`,
            );
            throw e;
        });
        assert.match(refused.message, /requests\.nvidia\.com\/gpu=2, used: requests\.nvidia\.com\/gpu=2, limited: requests\.nvidia\.com\/gpu=2/);
        const pods = await cluster.getJson(["pods", "-n", n.namespaces.training, "-l", `job-name=${job}`]);
        assert.equal(pods?.items?.length ?? 0, 0, "run b has no trainer pod while the quota is used");
        const first = await cluster.getJson(["pods", "-n", n.namespaces.training, "-l", "app.kubernetes.io/name=trainer"]);
        assert.equal((first?.items ?? []).filter((p: any) => p.status.phase === "Running").length, 1, "run a's trainer pod still runs");
        log(`run b up: ${secs(up.ms)}; refused: ${refused.message}`);
    });
});
