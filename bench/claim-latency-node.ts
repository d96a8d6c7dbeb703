// Claims under load on REAL pods (npm run bench -- --only claim-latency-node [--levels 1,8]): the same phases as
// bench/claim-latency.ts (sized by the rule, drained, refill) with the real agent-sandbox v1.0.1 controller and the
// project's backend, on the node fixture (test/node: containerd + runc + kubelet, the node's scheduler, kube-router's
// NetworkPolicy controller), so a pod start here is a real one: the scheduler's bind, the kubelet, runc, the runtime
// image's process and the readiness probe. The plan at each level (training.maxInflight = that level; the pool and its
// ResourceQuota as components/config/pool-size.ts sizes them) is applied on the sandbox side only, as
// python/tests/cluster_up.ts does on the simulated cluster: no verifier runs, so claims mint no rollout key (the
// simulated bench's path too). Each level must fit the node: the refill after a burst holds the burst's claimed pods
// beside a full pool again (2 x burst + headroom pods), which the node's allocatable CPU, memory and pods must hold
// (nodeClaimCapacity); a level beyond that is refused with the numbers before the node starts. Bounded by the bench's
// deadline; the node (down.sh) and the controller are stopped on success, failure and signals. Needs root and the
// node fixture (test/node/build.sh), the controller fixture (test/sandbox-controller/build.sh) and the trainer-side venv.
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import YAML from "yaml";
import { SANDBOX_KEY_SECRET_KEY } from "../components/sandbox/model";
import { quantityValue } from "../components/shared/quantity";
import { planToDir } from "../scripts/lib/plan";
import { agentSandboxCrdFiles } from "../test/helpers/agent-sandbox-manifest";
import { waitForClaimQuotaMonitor } from "../test/helpers/agent-sandbox-node";
import { imageRefByDigest, NodeSession, type Node } from "../test/helpers/node";
import { LOCK_VENV_HINT, lockVenvPython } from "../test/helpers/stub-env";
import { claimFiguresMarkdown, PUBLISHED, type Figures } from "./claim-latency";
import { fmt, onCleanup, REPO_ROOT, runCollected, sleep, spawnTracked, type TargetCheck } from "./lib";

const RUN_ID = "nodebench";
/**
 * Per sandbox: request = limit (components/sandbox/kubernetes.ts), beside the forwarder sidecar's fixed 100m / 128Mi
 * (components/sandbox/model.ts FORWARDER_CPU). The plan's default (1 CPU, 2Gi) would fit one sandbox on this 2-CPU
 * node; 50m makes 150m a pod, so a pool of 10 (8 at once + headroom 2) fits. AGENT_RL_NODE_SANDBOX_CPU / _MEMORY
 * change them (shown in the section).
 */
const SANDBOX_CPU = process.env.AGENT_RL_NODE_SANDBOX_CPU ?? "50m";
const SANDBOX_MEMORY = process.env.AGENT_RL_NODE_SANDBOX_MEMORY ?? "256Mi";
/** The controller's metrics, on the node's network namespace's loopback (where the bench's claims run too). */
const METRICS_PORT = 18480;

export interface ClaimLatencyNodeBenchOptions {
    readonly deadline: number;
    readonly log: (line: string) => void;
    /** Claims at once, one level each. @default [1, 8] */
    readonly levels?: readonly number[];
    /** About this many claims timed per level and case. @default 20 */
    readonly samples?: number;
}

/** What the node can hold besides what already runs on it, and per sandbox pod. */
export interface NodeRoom {
    /** Allocatable minus the requests of the pods already there: CPU in cores, memory in bytes, and pods. */
    readonly freeCpu: number;
    readonly freeMemory: number;
    readonly freePods: number;
    /** One sandbox pod's requests (all its containers). */
    readonly sandboxCpu: number;
    readonly sandboxMemory: number;
}

/** Sandbox pods the node can hold at once, and which resource binds first. */
export function sandboxPodsThatFit(r: NodeRoom): { pods: number; bound: string } {
    const byCpu = Math.floor(r.freeCpu / r.sandboxCpu + 1e-9);
    const byMemory = Math.floor(r.freeMemory / r.sandboxMemory);
    const pods = Math.min(byCpu, byMemory, r.freePods);
    const bound = pods === r.freePods ? "pods per node" : pods === byCpu ? "CPU requests" : "memory requests";
    return { pods, bound };
}

/**
 * The highest burst the node holds with the pool sized by the rule: the full pool, burst + headroom sandbox pods.
 * (A cluster also holds the burst's claimed pods beside the refilled pool, 2 x burst + headroom; on one node the
 * refill's pods wait for the claimed ones to go, so the bench releases a burst's claims before timing the refill.)
 */
export function highestLevel(fit: number, headroom: number): number {
    return Math.max(0, fit - headroom);
}

/** Every level that does not fit, with the numbers; [] when all fit. */
export function levelProblems(levels: readonly number[], headroom: number, room: NodeRoom): string[] {
    const { pods, bound } = sandboxPodsThatFit(room);
    const top = highestLevel(pods, headroom);
    return levels
        .filter((c) => c > top)
        .map(
            (c) =>
                `${c} at once needs a pool of ${c + headroom} sandbox pods (the burst + headroom ${headroom}), ` +
                `but the node holds ${pods} (bound by ${bound}: ${fmt(room.freeCpu, 2)} CPU free / ${fmt(room.sandboxCpu, 3)} per sandbox, ` +
                `${fmt(room.freeMemory / 1024 ** 3, 1)} GiB / ${fmt(room.sandboxMemory / 1024 ** 2, 0)} MiB, ${room.freePods} pods free): ` +
                `at most ${top} at once here (or a smaller AGENT_RL_NODE_SANDBOX_CPU / _MEMORY)`,
        );
}

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
/** A pod's requests as the scheduler counts them: its containers and its sidecars (init containers that keep running: the forwarder). */
export const podRequests = (spec: any, what: "cpu" | "memory"): number =>
    sum(
        [...(spec?.containers ?? []), ...(spec?.initContainers ?? []).filter((c: any) => c.restartPolicy === "Always")].map((c: any) =>
            c.resources?.requests?.[what] ? quantityValue(c.resources.requests[what]) : 0,
        ),
    );

async function nodeRoom(node: Node, template: any): Promise<NodeRoom> {
    const n = JSON.parse(await node.kubectlOk(["get", "node", node.names.nodeName, "-o", "json"]));
    const pods = JSON.parse(await node.kubectlOk(["get", "pods", "-A", "-o", "json"])).items.filter(
        (p: any) => p.spec.nodeName === node.names.nodeName && p.status?.phase !== "Succeeded" && p.status?.phase !== "Failed",
    );
    const a = n.status.allocatable;
    return {
        freeCpu: quantityValue(a.cpu) - sum(pods.map((p: any) => podRequests(p.spec, "cpu"))),
        freeMemory: quantityValue(a.memory) - sum(pods.map((p: any) => podRequests(p.spec, "memory"))),
        freePods: Number(a.pods) - pods.length,
        sandboxCpu: podRequests(template.spec.podTemplate.spec, "cpu"),
        sandboxMemory: podRequests(template.spec.podTemplate.spec, "memory"),
    };
}

function override(node: Node, maxInflight: number) {
    return {
        runId: RUN_ID,
        images: {
            trainer: imageRefByDigest(node.names, "trainer-standin"),
            nginx: imageRefByDigest(node.names, "nginx"),
        },
        ingress: { replicas: 1 },
        training: { maxInflight },
        sandboxes: { image: imageRefByDigest(node.names, "sandbox-runtime"), cpu: SANDBOX_CPU, memory: SANDBOX_MEMORY, maxLifetimeSeconds: 600 },
    };
}

/** The last line a fixture script printed (its directory; a no-op when built). */
async function fixtureDir(script: string, args: readonly string[] = []): Promise<string> {
    const r = await runCollected("bash", [path.join(REPO_ROOT, script), ...args], { cwd: REPO_ROOT }, 40 * 60_000);
    const last = r.out.trim().split("\n").pop()?.trim() ?? "";
    if (r.code !== 0 || last === "") throw new Error(`bash ${script} failed (exit ${r.code}): ${r.err.split("\n").slice(-20).join("\n")}`);
    return last;
}

export async function runClaimLatencyNodeBench(o: ClaimLatencyNodeBenchOptions): Promise<{ markdown: string; checks: TargetCheck[] }> {
    if (process.getuid?.() !== 0) throw new Error("the node fixture needs root (network namespaces, containerd)");
    const python = lockVenvPython();
    if (python === undefined) throw new Error(`the trainer-side lock's venv is missing: ${LOCK_VENV_HINT}`);
    const levels = o.levels ?? [1, 8];
    const samples = o.samples ?? 20;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-claim-node-"));
    const planAt = (maxInflight: number, node: Node) =>
        planToDir(
            { recipe: "opencode-blackbox", target: "kubernetes" },
            { outDir: fs.mkdtempSync(path.join(dir, "plan-")), platformOverride: override(node, maxInflight) },
        );

    const ctlDir = await fixtureDir("test/sandbox-controller/build.sh");
    // Only the sandbox image besides busybox and CoreDNS (up.sh UP_IMAGES): the bench runs no other pod.
    process.env.UP_IMAGES = "sandbox-runtime";
    const session = new NodeSession();
    const node = await session.prepare();
    // The pool's plans first: a level the node cannot hold is refused before the node starts.
    const plans = [];
    for (const c of levels) plans.push({ c, ...(await planAt(c, node)) });

    const t0 = Date.now();
    // On a signal or the hard limit (run.ts cleanupAll); a normal end stops it below and unregisters this.
    const unregister = onCleanup(async () => {
        await session.cleanup();
        fs.rmSync(dir, { recursive: true, force: true });
    });
    try {
        return await onNode(o, session, plans, levels, samples, dir, ctlDir, python, t0);
    } finally {
        await session.cleanup();
        fs.rmSync(dir, { recursive: true, force: true });
        unregister();
    }
}

async function onNode(
    o: ClaimLatencyNodeBenchOptions,
    session: NodeSession,
    plans: ReadonlyArray<{ c: number } & Awaited<ReturnType<typeof planToDir>>>,
    levels: readonly number[],
    samples: number,
    dir: string,
    ctlDir: string,
    python: string,
    t0: number,
): Promise<{ markdown: string; checks: TargetCheck[] }> {
    const node = session.node;
    await session.start();
    const upSeconds = (Date.now() - t0) / 1000;
    o.log(`claim-latency-node: node up in ${fmt(upSeconds, 0)} s`);

    const first = plans[0]!;
    const template = first.manifests.find((m) => m.kind === "SandboxTemplate");
    if (!template) throw new Error("the plan renders no SandboxTemplate");
    const room = await nodeRoom(node, template);
    const headroom = first.plan.sandboxes!.sizing.margin;
    const fit = sandboxPodsThatFit(room);
    const problems = levelProblems(levels, headroom, room);
    if (problems.length > 0) throw new Error(`levels the node cannot hold:\n${problems.map((p) => `- ${p}`).join("\n")}`);

    for (const f of agentSandboxCrdFiles()) await node.kubectlOk(["apply", "--server-side", "-f", "-"], fs.readFileSync(f, "utf8"));
    await node.kubectlOk(["wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"]);
    const quotaSeconds = await waitForClaimQuotaMonitor(node);

    const controllerLog = path.join(dir, "agent-sandbox-controller.log");
    const logFd = fs.openSync(controllerLog, "a");
    const controller = spawnTracked(
        "ip",
        [
            "netns",
            "exec",
            node.names.netns,
            path.join(ctlDir, "bin", "agent-sandbox-controller"),
            `--kubeconfig=${path.join(node.names.work, "kubeconfig")}`,
            "--extensions",
            "--leader-elect=false",
            `--metrics-bind-address=127.0.0.1:${METRICS_PORT}`,
            "--health-probe-bind-address=0",
        ],
        { stdio: ["ignore", logFd, logFd] },
    );
    fs.closeSync(logFd);

    // The sandbox side of the first level's plan (cluster_up.ts's selection), with a test key in the pool's Secret.
    const { plan, manifests } = first;
    const sandboxNs = plan.names.namespaces.sandboxes;
    const trainingNs = plan.names.namespaces.training;
    const sa = plan.training.serviceAccount;
    const wanted = manifests
        .filter(
            (m) =>
                m.kind === "Namespace" ||
                m.metadata?.namespace === sandboxNs ||
                m.kind.startsWith("ValidatingAdmissionPolicy") ||
                (m.kind === "ServiceAccount" && m.metadata?.namespace === trainingNs && m.metadata?.name === sa),
        )
        .map((m) => (m.kind === "Secret" ? { ...m, stringData: { [SANDBOX_KEY_SECRET_KEY]: `node-bench-${randomBytes(16).toString("hex")}` } } : m));
    const rank = (k: string) => {
        const i = ["Namespace", "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"].indexOf(k);
        return i === -1 ? 9 : i;
    };
    for (const m of [...wanted].sort((a, b) => rank(a.kind) - rank(b.kind))) await node.kubectlOk(["apply", "--server-side", "-f", "-"], JSON.stringify(m));

    const token = (await node.kubectlOk(["-n", trainingNs, "create", "token", sa, "--duration=2h"])).trim();
    const admin = YAML.parse(fs.readFileSync(path.join(node.names.work, "kubeconfig"), "utf8"));
    const trainerKubeconfig = path.join(dir, "trainer.kubeconfig");
    fs.writeFileSync(
        trainerKubeconfig,
        YAML.stringify({
            ...admin,
            users: [{ name: "trainer", user: { token } }],
            contexts: [{ name: "trainer", context: { cluster: admin.clusters[0].name, user: "trainer" } }],
            "current-context": "trainer",
        }),
        { mode: 0o600 },
    );
    const levelPlans = plans.map(({ c, plan: p, manifests: ms }) => {
        const ns = p.names.namespaces.sandboxes;
        const quota = ms.find((m) => m.kind === "ResourceQuota" && m.metadata?.namespace === ns);
        const pool = ms.find((m) => m.kind === "SandboxWarmPool");
        if (!quota || !pool) throw new Error(`the plan at maxInflight ${c} renders no ResourceQuota or SandboxWarmPool in ${ns}`);
        const s = p.sandboxes!;
        return { concurrency: c, poolSize: s.poolSize, replicas: pool.spec.replicas, burst: s.sizing.burst, headroom: s.sizing.margin, quota: quota.spec.hard };
    });
    const facts = {
        releaseBeforeRefill: true,
        adminKubeconfig: path.join(node.names.work, "kubeconfig"),
        trainerKubeconfig,
        trainerEnv: plan.training.trainer.env,
        sandboxesNamespace: sandboxNs,
        warmPool: plan.sandboxes!.names.warmPool,
        quota: plan.sandboxes!.names.quota,
        levels: levelPlans,
        controllerMetrics: `http://127.0.0.1:${METRICS_PORT}/metrics`,
        controllerArgs: [],
        clusterUpSeconds: upSeconds,
    };
    const factsFile = path.join(dir, "facts.json");
    fs.writeFileSync(factsFile, JSON.stringify(facts), { mode: 0o600 });

    const budget = Math.max(60, (o.deadline - Date.now()) / 1000 - 120); // down.sh after it
    o.log(`claim-latency-node: ${levels.join(", ")} at once on real pods (${fit.pods} sandbox pods fit, bound by ${fit.bound}); at most ${fmt(budget, 0)} s`);
    const r = await runCollected(
        "ip",
        [
            "netns",
            "exec",
            node.names.netns,
            "nice",
            "-n",
            "10",
            python,
            "-B",
            path.join(REPO_ROOT, "bench", "claim-latency.py"),
            "--node",
            factsFile,
            String(samples),
            String(budget),
        ],
        { cwd: REPO_ROOT, env: { ...process.env, PYTHONPATH: path.join(REPO_ROOT, "python") } },
        (budget + 60) * 1000,
    );
    if (controller.exitCode !== null)
        o.log(`claim-latency-node: the controller exited ${controller.exitCode}:\n${fs.readFileSync(controllerLog, "utf8").slice(-2000)}`);
    controller.kill("SIGTERM");
    for (let i = 0; i < 20 && controller.exitCode === null && controller.signalCode === null; i++) await sleep(250);
    const line = r.out.split("\n").find((l) => l.startsWith("BENCH_JSON "));
    if (line === undefined) throw new Error(`bench/claim-latency.py --node exited ${r.code} without figures:\n${r.err.slice(-3000)}`);
    const f = JSON.parse(line.slice("BENCH_JSON ".length)) as Figures;
    if (r.code !== 0) o.log(`claim-latency-node: bench/claim-latency.py exited ${r.code}:\n${r.err.slice(-2000)}`);

    const top = highestLevel(fit.pods, headroom);
    const markdown = [
        "## 6b. Sandbox claims under load: real pod starts (the node fixture)",
        "",
        "**Real pod starts**: the node fixture's containerd + runc + kubelet, its scheduler and NetworkPolicy controller, the",
        "real agent-sandbox v1.0.1 controller (upstream default flags) and the project's backend as the trainer's ServiceAccount,",
        "to the first `exec(\"true\")` through the pod's runtime (the runtime image by digest; readiness is the kubelet's probe).",
        `Per sandbox ${SANDBOX_CPU} CPU and ${SANDBOX_MEMORY} (request = limit). No verifier: claims mint no rollout key (as on the simulated cluster).`,
        "",
        `What this node holds: ${fmt(room.freeCpu, 2)} CPU, ${fmt(room.freeMemory / 1024 ** 3, 1)} GiB and ${room.freePods} pods free ` +
            `(allocatable minus the pods already there) = ${fit.pods} sandbox pods of ${fmt(room.sandboxCpu * 1000, 0)}m / ${fmt(room.sandboxMemory / 1024 ** 2, 0)} MiB (sandbox + forwarder), ` +
            `bound by ${fit.bound}; a pool of burst + headroom ${headroom}, so at most **${top} claims at once**. On one node the refill's pods wait for the ` +
            `claimed ones' CPU: each burst's claims are released after their first command, then the refill is timed (from the burst). ` +
            `Node up ${fmt(upSeconds, 0)} s; the quota controller counted claims ${fmt(quotaSeconds, 0)} s after the CRDs.`,
        "",
        ...claimFiguresMarkdown(f),
        "Published figures to read these beside:",
        "",
        ...PUBLISHED.map((p) => `- ${p}`),
        "",
    ].join("\n");
    return { markdown, checks: [] };
}
