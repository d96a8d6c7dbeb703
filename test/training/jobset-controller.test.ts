// The multi-node recipe on the simulated cluster with the real JobSet controller (issue 18):
// opencode-blackbox-32b's training objects, as planned, are created on a kwok cluster of three
// 8-GPU nodes running JobSet v0.12.0 (test/helpers/jobset-controller.ts, webhooks included). The
// JobSet reconciles into vLLM's pod first, then (once it is Ready) one trainer pod per node on distinct
// GPU nodes, each with its rank and the rank-0 address; vLLM lands on the third node and its Service
// selects that pod alone. The run's lifecycle (issue 26): when the trainers finish, or one fails, the
// JobSet ends and vLLM's pod goes with it; a vLLM crash restarts every pod, counted against
// training.backoffLimit, then fails the run. With target.kueueQueue the JobSet stays suspended with no
// pod at all in the namespace until the test unsuspends it, as Kueue does on admission (Kueue itself is
// not built here: the test plays its part, the suspend semantics are JobSet's). kwok runs no containers,
// so the env expansion a kubelet does ($(VAR) from the downward API) is done here from the pods' own
// labels, and a container's exit is a status patch on its pod (phase and exit code, as a kubelet writes them).
// Skipped (with the reason) only when the engine fixtures are not built and CI is not set.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { JOBSET_LABELS } from "../../components/training/model";
import { planToDir } from "../../scripts/lib/plan";
import { GPU_RESOURCE, type Cluster } from "../helpers/cluster";
import { recipePlatform, type Engine } from "../helpers/engine";
import { assertOk, namesFor, secs, teardown, startEngineHarness } from "../helpers/engine-checks";
import { engineSkipReason } from "../helpers/engine-fixtures";
import { jobSetControllerBuild, startJobSetController } from "../helpers/jobset-controller";
import { scaled } from "../helpers/waits";

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
/** A pod's selector for a replicated job of a JobSet (JobSet's own labels). */
const ofReplicatedJob = (jobSet: string, replicatedJob: string) => `${JOBSET_LABELS.jobSetName}=${jobSet},${JOBSET_LABELS.replicatedJobName}=${replicatedJob}`;

describe("multi-node recipe on the simulated cluster with the JobSet controller", { skip, timeout: scaled(20 * 60_000) }, () => {
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
    const trainerPods = (name: string) => cluster!.pods(ns, ofReplicatedJob(name, "node"));
    const vllmPods = (name: string) => cluster!.pods(ns, ofReplicatedJob(name, "vllm"));
    const live = (ps: any[]) => ps.filter((p) => !p.metadata.deletionTimestamp && ["Pending", "Running"].includes(p.status?.phase));

    /** What a kubelet writes when the pod's containers exit with `exitCode` (kwok never does: its pods run for ever). */
    async function exitPod(pod: any, exitCode: number): Promise<void> {
        const now = new Date().toISOString();
        const cond = (type: string, status: string) => ({ type, status, lastTransitionTime: now });
        const status = {
            phase: exitCode === 0 ? "Succeeded" : "Failed",
            conditions: [cond("Initialized", "True"), cond("Ready", "False"), cond("ContainersReady", "False"), cond("PodScheduled", "True")],
            containerStatuses: pod.spec.containers.map((c: any) => ({
                name: c.name,
                image: c.image,
                imageID: "",
                ready: false,
                started: false,
                restartCount: 0,
                state: { terminated: { exitCode, reason: exitCode === 0 ? "Completed" : "Error", startedAt: now, finishedAt: now } },
            })),
        };
        await cluster!.kubectlOk(["patch", "pod", pod.metadata.name, "-n", ns, "--subresource=status", "--type=merge", "-p", JSON.stringify({ status })]);
    }

    /** The JobSet's terminal condition once it has one. */
    async function terminal(name: string, timeoutMs = 60_000): Promise<any> {
        return cluster!.waitFor(
            `JobSet ${name} Completed or Failed`,
            async () => {
                const j = await cluster!.getJson(["jobset", name, "-n", ns]);
                return (j?.status?.conditions ?? []).find((x: any) => (x.type === "Completed" || x.type === "Failed") && x.status === "True");
            },
            timeoutMs,
        );
    }

    /** vLLM Running and Ready, then both trainers Running; returns them. */
    async function runningRun(name: string): Promise<{ vllm: any; trainers: any[] }> {
        const c = cluster!;
        const trainers = await c.waitFor(
            "two Running trainer pods",
            async () => {
                const ps = live(await trainerPods(name));
                return ps.length === 2 && ps.every((p) => p.status?.phase === "Running") && ps;
            },
            120_000,
        );
        const [vllm] = live(await vllmPods(name));
        return { vllm, trainers };
    }

    async function cleanUp(name: string): Promise<void> {
        await cluster!.kubectlOk(["delete", "jobset", name, "-n", ns, "--wait=true", "--ignore-not-found"]);
        await cluster!.waitFor("the pods to go", async () => (await cluster!.pods(ns)).length === 0, 60_000);
    }

    it("reconciles into vLLM's pod, then once it is Ready one trainer pod per node on distinct GPU nodes, each with its rank and the rank-0 address", async () => {
        const c = cluster!;
        const name = await createTraining("run");
        const pods = await c.waitFor(
            "two Running trainer pods",
            async () => {
                const ps = await trainerPods(name);
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
        assert.equal(vllm.metadata.labels[JOBSET_LABELS.jobSetName], name, "vLLM's pod is the JobSet's");
        // The trainers' Jobs were created only once vLLM's pod was Ready (dependsOn Ready).
        const vllmReady = Date.parse(vllm.status.conditions.find((x: any) => x.type === "Ready" && x.status === "True").lastTransitionTime);
        for (const p of pods) assert.ok(Date.parse(p.metadata.creationTimestamp) >= vllmReady, `trainer ${p.metadata.name} created after vLLM was Ready`);
        // vLLM's Service selects exactly that pod (JobSet's labels: jobset-name, replicatedjob-name).
        const vllmService = await c.getJson(["service", "vllm-demo", "-n", ns]);
        const selector = Object.entries(vllmService.spec.selector as Record<string, string>)
            .map(([k, v]) => `${k}=${v}`)
            .join(",");
        assert.deepEqual(
            (await c.pods(ns, selector)).map((p) => p.metadata.name),
            [vllm.metadata.name],
            `the Service's selector ${selector}`,
        );
        const claims = (await c.getJson<{ items: any[] }>(["pvc", "-n", ns]))!.items;
        assert.deepEqual(claims.map((x) => [x.metadata.name, x.status.phase]).sort(), [
            ["checkpoints-rwx", "Bound"],
            ["model-cache-rwx", "Bound"],
        ]);
        // Room for the next test: the JobSet goes, and with it every pod.
        await cleanUp(name);
    });

    it("the trainers finish: the JobSet completes and vLLM's pod goes away, freeing its node", async () => {
        const c = cluster!;
        const name = await createTraining("finish", { training: { maxSteps: 12 } });
        const { vllm, trainers } = await runningRun(name);
        assert.ok(vllm, "vLLM's pod runs beside the trainers");
        for (const t of trainers) await exitPod(t, 0);
        const done = await terminal(name);
        assert.equal(done.type, "Completed", JSON.stringify(done));
        await c.waitFor("vLLM's pod to go", async () => live(await c.pods(ns, "app.kubernetes.io/name=vllm")).length === 0, 60_000);
        await cleanUp(name);
    });

    it("a trainer fails: the JobSet fails at once (no restart) and vLLM's pod goes away", async () => {
        const c = cluster!;
        const name = await createTraining("trainer-fails", { training: { maxSteps: 13, backoffLimit: 2 } });
        const { trainers } = await runningRun(name);
        await exitPod(trainers[1], 1);
        const failed = await terminal(name);
        assert.equal(failed.type, "Failed", JSON.stringify(failed));
        const js = await c.getJson(["jobset", name, "-n", ns]);
        assert.equal(js.status.restarts ?? 0, 0, "the trainer's own failure is not retried, whatever backoffLimit says");
        await c.waitFor("every pod to go", async () => live(await jobSetPods(name)).length === 0, 60_000);
        await cleanUp(name);
    });

    it("vLLM crashes: every pod is restarted (vLLM first), counted against training.backoffLimit; the next crash fails the run", async () => {
        const c = cluster!;
        const name = await createTraining("vllm-crashes", { training: { maxSteps: 14, backoffLimit: 1 } });
        const first = await runningRun(name);
        await exitPod(first.vllm, 1);
        const second = await c.waitFor(
            "the JobSet restarted once, its pods recreated",
            async () => {
                const js = await c.getJson(["jobset", name, "-n", ns]);
                if ((js?.status?.restarts ?? 0) !== 1) return false;
                const ps = live(await jobSetPods(name)).filter((p) => p.status?.phase === "Running");
                return ps.length === 3 && ps;
            },
            120_000,
        );
        const js = await c.getJson(["jobset", name, "-n", ns]);
        assert.equal(js.status.restartsCountTowardsMax, 1, "a vLLM crash counts against maxRestarts");
        const oldNames = new Set([first.vllm, ...first.trainers].map((p) => p.metadata.name));
        for (const p of second) assert.ok(!oldNames.has(p.metadata.name), `${p.metadata.name} is a new pod`);
        const [vllm] = live(await vllmPods(name));
        await exitPod(vllm, 1);
        const failed = await terminal(name);
        assert.equal(failed.type, "Failed", JSON.stringify(failed));
        await c.waitFor("every pod to go", async () => live(await jobSetPods(name)).length === 0, 60_000);
        await cleanUp(name);
    });

    it("with target.kueueQueue the JobSet stays suspended with no pod in the namespace (vLLM's neither) until it is unsuspended as Kueue admits it", async () => {
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
        assert.deepEqual(
            (await c.pods(ns)).map((p) => p.metadata.name),
            [],
            "no pod while suspended: neither the trainers nor vLLM hold a node",
        );
        // What Kueue does on admission.
        await c.kubectlOk(["patch", "jobset", name, "-n", ns, "--type=merge", "-p", JSON.stringify({ spec: { suspend: false } })]);
        const { vllm, trainers: pods } = await runningRun(name);
        assert.ok(vllm, "vLLM's pod after the unsuspend");
        assert.equal(new Set([vllm, ...pods].map((p) => p.spec.nodeName)).size, 3);
        await cleanUp(name);
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
        assert.deepEqual(await c.pods(training), [], "queued: no pod in the training namespace, vLLM's neither");
        // Kueue admits it.
        await c.kubectlOk(["patch", "jobset", first.metadata.name, "-n", training, "--type=merge", "-p", JSON.stringify({ spec: { suspend: false } })]);
        await c.waitFor("two trainer pods", async () => (await c.pods(training, ofReplicatedJob(first.metadata.name, "node"))).length === 2, 120_000);
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
