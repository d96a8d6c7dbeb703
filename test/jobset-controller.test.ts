// The multi-node recipe on the simulated cluster with the real JobSet controller (issue 18):
// opencode-blackbox-32b's training objects, as planned, are created on a kwok cluster of three
// 8-GPU nodes running JobSet v0.10.1 (test/helpers/jobset-controller.ts, webhooks included). The
// JobSet reconciles into one pod per node on distinct GPU nodes, each with its rank and the rank-0
// address; vLLM lands on the third node; with target.kueueQueue the JobSet stays suspended (no pods)
// until the test unsuspends it, as Kueue does on admission. kwok runs no containers, so the env
// expansion a kubelet does ($(VAR) from the downward API) is done here from the pods' own labels.
// Skipped (with the reason) only when the engine fixtures are not built and CI is not set.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { JOBSET_LABELS } from "../components/training/describe";
import { planToDir } from "../scripts/lib/plan";
import { GPU_RESOURCE, type Cluster } from "./helpers/cluster";
import { recipePlatform, type Engine } from "./helpers/engine";
import { assertOk, namesFor, secs, teardown, startEngineHarness } from "./helpers/engine-checks";
import { engineSkipReason } from "./helpers/engine-fixtures";
import { jobSetControllerBuild, startJobSetController } from "./helpers/jobset-controller";

const skip = engineSkipReason();
const RECIPE = { recipe: "opencode-blackbox-32b", target: "kubernetes" } as const;
/** The cluster's GPU nodes are tainted, as GPU pools are; the stack tolerates that taint. */
const TOLERATE_GPU = { target: { tolerations: [{ key: GPU_RESOURCE, operator: "Exists", effect: "NoSchedule" }] } };

/** A kubelet's expansion of a container's env (fieldRef to a label, `$(VAR)` from earlier vars) and of its command. */
function expand(pod: any): { env: Record<string, string>; command: string[] } {
    const c = pod.spec.containers[0];
    const env: Record<string, string> = {};
    const sub = (s: string) => s.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, v) => env[v] ?? m);
    for (const e of c.env ?? []) {
        const label = /^metadata\.labels\['(.+)'\]$/.exec(e.valueFrom?.fieldRef?.fieldPath ?? "")?.[1];
        if (label !== undefined) env[e.name] = pod.metadata.labels[label] ?? "";
        else if (typeof e.value === "string") env[e.name] = sub(e.value);
    }
    return { env, command: (c.command ?? []).map(sub) };
}
const flag = (argv: string[], f: string) => argv[argv.indexOf(f) + 1];

describe("multi-node recipe on the simulated cluster with the JobSet controller", { skip, timeout: 20 * 60_000 }, () => {
    let cluster: Cluster | undefined;
    let engine: Engine | undefined;
    let release: (() => void) | undefined;
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-jobset-"));
    let ns = "";

    before(async () => {
        const build = jobSetControllerBuild();
        if (!build.ok) throw new Error(build.reason);
        const t0 = Date.now();
        ({ cluster, engine, release } = await startEngineHarness({ gpuNodes: 3, cpuNodes: 2, volumes: 0 }));
        await startJobSetController(cluster, build.dir);
        // The recipe's claims are ReadWriteMany (every node mounts them): volumes of that mode.
        const pvs = ["rwx-0", "rwx-1", "rwx-2", "rwx-3"].map((name) => ({
            apiVersion: "v1",
            kind: "PersistentVolume",
            metadata: { name },
            spec: {
                capacity: { storage: "4Ti" },
                accessModes: ["ReadWriteMany"],
                persistentVolumeReclaimPolicy: "Retain",
                storageClassName: cluster!.storageClass,
                hostPath: { path: `/var/lib/kwok-volumes/${name}` },
            },
        }));
        await cluster.kubectlOk(["create", "-f", "-"], pvs.map((p) => JSON.stringify(p)).join("\n"));
        process.stderr.write(`# cluster with 3 GPU nodes and the JobSet controller up in ${secs(Date.now() - t0)}\n`);
    });

    after(async () => {
        await teardown(engine, cluster, release);
        fs.rmSync(tmp, { recursive: true, force: true });
    });

    /** Plans the recipe and creates its training namespace's objects; returns the JobSet's name. */
    async function createTraining(label: string, override: Record<string, unknown> = {}): Promise<string> {
        const p = await planToDir(RECIPE, { outDir: path.join(tmp, label), platformOverride: { ...TOLERATE_GPU, ...override } });
        ns = p.plan.names.namespaces.training;
        const objects = p.manifests.filter((m) => m.metadata?.namespace === ns || (m.kind === "Namespace" && m.metadata.name === ns));
        const existing = await cluster!.getJson(["namespace", ns]);
        const toCreate = objects.filter((m) => !(existing && m.kind === "Namespace"));
        await cluster!.kubectlOk(["apply", "--server-side", "--field-manager=jobset-test", "-f", "-"], toCreate.map((m) => JSON.stringify(m)).join("\n"));
        return p.manifests.find((m) => m.kind === "JobSet")!.metadata.name;
    }

    const jobSetPods = (name: string) => cluster!.pods(ns, `${JOBSET_LABELS.jobSetName}=${name}`);

    it("reconciles into one pod per node on distinct GPU nodes, each with its rank and the rank-0 address", async () => {
        const c = cluster!;
        const name = await createTraining("run");
        const pods = await c.waitFor(
            "two Running trainer pods",
            async () => {
                const ps = await jobSetPods(name);
                return ps.length === 2 && ps.every((p) => p.status?.phase === "Running" && p.spec.nodeName) && ps;
            },
            120_000,
        );
        const byRank = [...pods].sort((a, b) => Number(a.metadata.labels[JOBSET_LABELS.jobIndex]) - Number(b.metadata.labels[JOBSET_LABELS.jobIndex]));
        assert.deepEqual(
            byRank.map((p) => p.metadata.labels[JOBSET_LABELS.jobIndex]),
            ["0", "1"],
        );
        const nodes = byRank.map((p) => p.spec.nodeName);
        assert.equal(new Set(nodes).size, 2, `distinct nodes: ${nodes.join(", ")}`);
        for (const n of nodes) assert.ok(c.gpuNodes.includes(n), `${n} is a GPU node`);
        // JobSet's headless Service and the pods' DNS names under it.
        const svc = await c.getJson(["service", name, "-n", ns]);
        assert.equal(svc?.spec?.clusterIP, "None", "JobSet's headless Service, named after the JobSet");
        byRank.forEach((p, rank) => {
            assert.equal(p.spec.hostname, `${name}-node-${rank}-0`);
            assert.equal(p.spec.subdomain, name);
            const { env, command } = expand(p);
            assert.equal(env.MACHINE_RANK, String(rank));
            assert.equal(flag(command, "--machine_rank"), String(rank));
            assert.equal(flag(command, "--main_process_ip"), `${byRank[0].spec.hostname}.${byRank[0].spec.subdomain}`, "every rank dials rank 0's DNS name");
            assert.equal(flag(command, "--num_machines"), "2");
            assert.equal(flag(command, "--num_processes"), "16");
            assert.equal(p.spec.containers[0].resources.limits[GPU_RESOURCE], "8");
            // Exclusive placement, by JobSet's pod webhook from the exclusive-topology annotation.
            const anti = p.spec.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? [];
            assert.ok(
                anti.some((t: any) => t.topologyKey === "kubernetes.io/hostname"),
                `pod ${p.metadata.name} carries JobSet's anti-affinity on kubernetes.io/hostname: ${JSON.stringify(p.spec.affinity)}`,
            );
        });
        // vLLM on the third GPU node, its claims bound ReadWriteMany.
        const vllm = await c.waitFor(
            "vLLM's pod Running",
            async () => (await c.pods(ns, "app.kubernetes.io/name=vllm")).find((p) => p.status?.phase === "Running"),
            120_000,
        );
        assert.ok(c.gpuNodes.includes(vllm.spec.nodeName) && !nodes.includes(vllm.spec.nodeName), `vLLM on its own GPU node: ${vllm.spec.nodeName}`);
        const claims = (await c.getJson<{ items: any[] }>(["pvc", "-n", ns]))!.items;
        assert.deepEqual(claims.map((x) => [x.metadata.name, x.status.phase]).sort(), [
            ["checkpoints-rwx", "Bound"],
            ["model-cache-rwx", "Bound"],
        ]);
        // Room for the next test: the JobSet and vLLM go, and with them their pods.
        await c.kubectlOk(["delete", "jobset", name, "-n", ns, "--wait=true"]);
        await c.kubectlOk(["delete", "deployment", "--all", "-n", ns, "--wait=true"]);
        await c.waitFor("the pods to go", async () => (await c.pods(ns)).length === 0, 60_000);
    });

    it("with target.kueueQueue the JobSet stays suspended, without pods, until it is unsuspended as Kueue admits it", async () => {
        const c = cluster!;
        const name = await createTraining("queued", { target: { ...TOLERATE_GPU.target, kueueQueue: "team-a" } });
        const js = await c.waitFor(
            "the JobSet's Suspended condition",
            async () => {
                const j = await c.getJson(["jobset", name, "-n", ns]);
                return (j?.status?.conditions ?? []).some((x: any) => x.type === "Suspended" && x.status === "True") && j;
            },
            60_000,
        );
        assert.equal(js.metadata.labels["kueue.x-k8s.io/queue-name"], "team-a");
        await new Promise((r) => setTimeout(r, 5000));
        assert.deepEqual(await jobSetPods(name), [], "no pod while suspended");
        // What Kueue does on admission.
        await c.kubectlOk(["patch", "jobset", name, "-n", ns, "--type=merge", "-p", JSON.stringify({ spec: { suspend: false } })]);
        const pods = await c.waitFor(
            "two Running trainer pods after the unsuspend",
            async () => {
                const ps = await jobSetPods(name);
                return ps.length === 2 && ps.every((p) => p.status?.phase === "Running") && ps;
            },
            120_000,
        );
        assert.equal(new Set(pods.map((p) => p.spec.nodeName)).size, 2);
        await c.kubectlOk(["delete", "jobset", name, "-n", ns, "--wait=true"]);
        await c.kubectlOk(["delete", "deployment", "--all", "-n", ns, "--wait=true"]);
        await c.waitFor("the pods to go", async () => (await c.pods(ns)).length === 0, 60_000);
    });

    it("through the real engine: up queued, admitted by Kueue, refresh + up never re-suspend it, a changed setting replaces the JobSet, destroy", async () => {
        const c = cluster!;
        const stackName = "multinode";
        const platform = recipePlatform("opencode-blackbox-32b", c, { target: { kueueQueue: "team-a" } });
        const stack = await engine!.stack(stackName, platform);
        const training = namesFor(stackName, platform).namespaces.training;
        const jobSets = async () => (await c.getJson<{ items: any[] }>(["jobsets", "-n", training]))?.items ?? [];
        assertOk(await stack.up("first up", { timeoutMs: 300_000 }), "first up");
        const [first] = await jobSets();
        assert.equal(first.spec.suspend, true, "created suspended, for Kueue");
        assert.deepEqual(await c.pods(training, `${JOBSET_LABELS.jobSetName}=${first.metadata.name}`), []);
        // Kueue admits it.
        await c.kubectlOk(["patch", "jobset", first.metadata.name, "-n", training, "--type=merge", "-p", JSON.stringify({ spec: { suspend: false } })]);
        await c.waitFor("two trainer pods", async () => (await c.pods(training, `${JOBSET_LABELS.jobSetName}=${first.metadata.name}`)).length === 2, 120_000);
        // refresh reads suspend: false into the state; the next up must leave it (ignoreChanges), not suspend the running run.
        assertOk(await stack.refresh("refresh"), "refresh");
        const again = await stack.up("up after refresh", { timeoutMs: 240_000 });
        assertOk(again, "up after refresh");
        const [still] = await jobSets();
        assert.equal(still.metadata.name, first.metadata.name);
        assert.equal(still.spec.suspend, false, "an admitted JobSet stays unsuspended");
        // A trainer setting under the same run id: a new JobSet (another hash), the old one deleted first.
        await stack.setPlatform({ ...platform, training: { ...(platform.training ?? {}), maxSteps: 11 } });
        const changed = await stack.up("changed maxSteps", { timeoutMs: 240_000 });
        assertOk(changed, "changed maxSteps");
        assert.equal(changed.changes.replace, 1, `one replacement (the JobSet): ${JSON.stringify(changed.changes)}`);
        const after = await c.waitFor("only the new JobSet", async () => {
            const js = await jobSets();
            return js.length === 1 && js[0].metadata.name !== first.metadata.name && js;
        });
        assert.equal(after[0].spec.suspend, true, "the new JobSet waits for Kueue again");
        assertOk(await stack.destroy("destroy", { timeoutMs: 240_000 }), "destroy");
        assert.deepEqual(await jobSets(), []);
    });
});
