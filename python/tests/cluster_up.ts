// For python/tests/test_controller.py: a simulated cluster (test/helpers/cluster.ts: API server,
// controller-manager, scheduler, kwok) running the REAL agent-sandbox v1.0.1 controller
// (test/sandbox-controller/build.sh), with the project's own rendered objects for the sandbox side
// applied: namespaces, the trainer's ServiceAccount, the SandboxTemplate, SandboxWarmPool,
// claim admission policy + binding, Role + RoleBinding, ResourceQuota, NetworkPolicy and key
// Secret, exactly as `npm run plan` renders them (scripts/lib/plan.ts planToDir).
//
// Prints one line `READY <json>` (kubeconfigs, the trainer's env, names), then holds everything up
// until stdin closes (or SIGTERM), then stops it all. Exit 3 with `SKIP <reason>` when the
// fixtures are not built and AGENT_RL_BUILD_FIXTURES is not 1 (the builds are large).
//
// usage (repo root): node --import tsx python/tests/cluster_up.ts
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import YAML from "yaml";
import { AGENT_SANDBOX_VERSION } from "../../components/config";
import { planToDir, REPO_ROOT } from "../../scripts/lib/plan";
import { multiplyQuantity, quantityValue } from "../../components/shared/quantity";
import { CPU_NODE_ALLOCATABLE, startCluster, type Cluster } from "../../test/helpers/cluster";
import { engineFixtures } from "../../test/helpers/engine-fixtures";
import { acquireEngineLock } from "../../test/helpers/engine-checks";

const RUN_ID = "ctl1";
/** Small enough for the simulated nodes, large enough to claim two at once. */
const OVERRIDE = {
    runId: RUN_ID,
    training: { maxInflight: 2 },
    sandboxes: { poolSize: 2, headroom: 1, maxLifetimeSeconds: 600, cpu: "100m", memory: "128Mi" },
};
/** The claim bench's levels (AGENT_RL_POOL_LEVELS, e.g. "1,8,32,128": claims at once). */
const LEVELS_ENV = "AGENT_RL_POOL_LEVELS";
/** Extra flags for the agent-sandbox controller (the bench's tuning runs), space-separated. */
const CONTROLLER_ARGS_ENV = "AGENT_RL_SANDBOX_CONTROLLER_ARGS";

/**
 * The bench's override at `maxInflight` claims at once: the pool and its quota as the rule sizes them (no poolSize), each
 * sandbox at the recipe's rendered CPU and memory (the fake nodes are sized for them: benchNodes).
 */
function levelOverride(maxInflight: number) {
    return { runId: RUN_ID, training: { maxInflight }, sandboxes: { maxLifetimeSeconds: 600 } };
}

/**
 * Fake CPU nodes enough for twice the largest level's quota (the rollout-start bench keeps a second pool of the same
 * size beside the plan's, bench/rollout_start.py), at least 2.
 */
function benchNodes(quotas: ReadonlyArray<Record<string, string>>): number {
    const need = (key: string, per: string) => Math.max(0, ...quotas.map((q) => Math.ceil((2 * quantityValue(q[key] ?? "0")) / quantityValue(per))));
    return Math.max(2, need("requests.cpu", CPU_NODE_ALLOCATABLE.cpu), need("requests.memory", CPU_NODE_ALLOCATABLE.memory), need("pods", CPU_NODE_ALLOCATABLE.pods));
}

/** AGENT_RL_POOL_LEVELS as numbers, or undefined when unset; a bad value is refused with the variable named. */
function poolLevels(raw: string | undefined): number[] | undefined {
    if (raw === undefined || raw.trim() === "") return undefined;
    const levels = raw.split(",").map((x) => Number(x.trim()));
    if (levels.some((n) => !Number.isInteger(n) || n < 1 || n > 1000))
        throw new Error(`${LEVELS_ENV}=${JSON.stringify(raw)}: expected claims at once as comma-separated integers from 1 to 1000, e.g. 1,8,32,128`);
    return levels;
}

/** A loopback port nobody listens on now (the controller's metrics). */
async function freePort(): Promise<number> {
    const srv = net.createServer();
    await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
    const port = (srv.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => srv.close(() => resolve()));
    return port;
}

function controllerDir(build: boolean): string | undefined {
    const script = path.join(REPO_ROOT, "test/sandbox-controller/build.sh");
    if (!build) {
        const cache = path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "agent-rl-infra");
        const done = fs.existsSync(cache) ? fs.readdirSync(cache).filter((d) => d.startsWith(`sandbox-controller-${AGENT_SANDBOX_VERSION}-`) && fs.existsSync(path.join(cache, d, ".complete"))) : [];
        if (done.length === 0) return undefined;
    }
    // Idempotent: prints the (already) complete directory as its last line.
    const out = execFileSync("bash", [script], { cwd: REPO_ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
    return out.trim().split("\n").pop();
}

async function main(): Promise<number> {
    const build = process.env.AGENT_RL_BUILD_FIXTURES === "1" || !!process.env.CI;
    const fx = await engineFixtures({ build });
    if (!fx.ok) {
        process.stdout.write(`SKIP engine fixtures not built (bash test/engine/build.sh, or AGENT_RL_BUILD_FIXTURES=1): ${fx.reason.split("\n")[0]}\n`);
        return 3;
    }
    const ctlDir = controllerDir(build);
    if (!ctlDir) {
        process.stdout.write("SKIP agent-sandbox controller not built (bash test/sandbox-controller/build.sh, or AGENT_RL_BUILD_FIXTURES=1)\n");
        return 3;
    }
    // The engine tests' cross-file lock (an engine test file of another run may hold it for
    // minutes). LOCKED tells the caller the wait is over.
    const release = await acquireEngineLock();
    process.stdout.write("LOCKED\n");
    let cluster: Cluster | undefined;
    const stop = async () => {
        try {
            await cluster?.stop();
        } finally {
            release();
        }
    };
    process.on("SIGTERM", () => void stop().then(() => process.exit(0)));
    try {
        const levels = poolLevels(process.env[LEVELS_ENV]);
        const planAt = async (platformOverride: object) => {
            const outDir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-ctl-plan-"));
            try {
                return await planToDir({ recipe: "opencode-blackbox", target: "kubernetes" }, { outDir, platformOverride });
            } finally {
                fs.rmSync(outDir, { recursive: true, force: true });
            }
        };
        // The bench: each level's pool and quota exactly as its plan renders them; the cluster starts at the first level.
        const levelPlans: Array<Record<string, unknown>> = [];
        for (const c of levels ?? []) {
            const r = await planAt(levelOverride(c));
            const ns = r.plan.names.namespaces.sandboxes;
            const quota = r.manifests.find((m) => m.kind === "ResourceQuota" && m.metadata?.namespace === ns);
            const pool = r.manifests.find((m) => m.kind === "SandboxWarmPool");
            if (!quota || !pool) throw new Error(`the plan at maxInflight ${c} renders no ResourceQuota or SandboxWarmPool in ${ns}`);
            const s = r.plan.sandboxes!;
            const hard = quota.spec.hard as Record<string, string>;
            // Two pools of this size side by side (bench/rollout_start.py): every bound of the quota twice.
            const quotaTwoPools = Object.fromEntries(Object.entries(hard).map(([k, v]) => [k, multiplyQuantity(v, 2)]));
            levelPlans.push({ concurrency: c, poolSize: s.poolSize, replicas: pool.spec.replicas, burst: s.sizing.burst, headroom: s.sizing.margin, quota: hard, quotaTwoPools });
        }
        const { plan, manifests } = await planAt(levels ? levelOverride(levels[0]!) : OVERRIDE);
        const sandboxesNs = plan.names.namespaces.sandboxes;
        const trainingNs = plan.names.namespaces.training;
        const sa = plan.training.serviceAccount;
        // The sandbox side: its namespace's objects, the cluster-scoped claim policy, the namespaces
        // and the trainer's ServiceAccount (the RoleBinding's subject).
        const wanted = manifests.filter(
            (m) =>
                m.kind === "Namespace" ||
                m.metadata?.namespace === sandboxesNs ||
                m.kind.startsWith("ValidatingAdmissionPolicy") ||
                (m.kind === "ServiceAccount" && m.metadata?.namespace === trainingNs && m.metadata?.name === sa),
        );

        // kwok leaves the sandbox pods Running and not Ready: the test's pod network (test_controller.py PodNetwork)
        // makes each Ready once its runtime answers at the address it writes, as a kubelet's readiness probe would.
        const cpuNodes = benchNodes(levelPlans.map((l) => l.quota as Record<string, string>));
        cluster = await startCluster({ cpuNodes, volumes: 0, slowNamespaces: [sandboxesNs] }, fx);
        const kc = cluster.kubeconfig;
        // The bench reads the controller's own claim metrics (agent_sandbox_claim_*; plain HTTP on loopback).
        const metricsPort = levels ? await freePort() : undefined;
        // The bench may try the controller's own tuning flags (e.g. --sandbox-warm-pool-replenish-delay=1s).
        const extraArgs = (process.env[CONTROLLER_ARGS_ENV] ?? "").split(/\s+/).filter((a) => a !== "");
        const badArg = extraArgs.find((a) => !a.startsWith("--"));
        if (badArg !== undefined) throw new Error(`${CONTROLLER_ARGS_ENV}: ${JSON.stringify(badArg)} is not a --flag of agent-sandbox-controller`);
        cluster.api.startProcess(
            "agent-sandbox-controller",
            path.join(ctlDir, "bin/agent-sandbox-controller"),
            [
                `--kubeconfig=${kc}`,
                "--extensions",
                "--leader-elect=false",
                `--metrics-bind-address=${metricsPort ? `127.0.0.1:${metricsPort}` : "0"}`,
                "--health-probe-bind-address=0",
                ...extraArgs,
            ],
            { env: { KUBECONFIG: kc } },
        );
        // Namespaces first (and the policy before the pool, as the component's dependsOn orders them).
        const rank = (k: string) => ["Namespace", "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"].indexOf(k);
        const ordered = [...wanted].sort((a, b) => (rank(a.kind) === -1 ? 9 : rank(a.kind)) - (rank(b.kind) === -1 ? 9 : rank(b.kind)));
        for (const m of ordered) await cluster.kubectlOk(["apply", "--server-side", "-f", "-"], JSON.stringify(m));

        // A kubeconfig for the trainer's ServiceAccount: what the trainer pod's mounted token gives it.
        const token = (await cluster.kubectlOk(["-n", trainingNs, "create", "token", sa, "--duration=2h"])).trim();
        const admin = YAML.parse(fs.readFileSync(kc, "utf8"));
        const trainerKc = path.join(cluster.api.dir, "trainer.kubeconfig");
        const trainer = { ...admin, users: [{ name: "trainer", user: { token } }], contexts: [{ name: "trainer", context: { cluster: admin.clusters[0].name, user: "trainer" } }], "current-context": "trainer" };
        fs.writeFileSync(trainerKc, YAML.stringify(trainer), { mode: 0o600 });

        const facts = {
            adminKubeconfig: kc,
            trainerKubeconfig: trainerKc,
            trainerEnv: plan.training.trainer.env,
            sandboxesNamespace: sandboxesNs,
            warmPool: plan.sandboxes!.names.warmPool,
            poolSize: plan.sandboxes!.poolSize,
            runLabel: plan.sandboxes!.runLabel,
            runId: RUN_ID,
            maxLifetimeSeconds: plan.sandboxes!.maxLifetimeSeconds,
            applied: ordered.map((m) => `${m.kind}/${m.metadata?.name}`),
            controllerLog: path.join(cluster.api.dir, "agent-sandbox-controller.log"),
            quota: plan.sandboxes!.names.quota,
            levels: levelPlans,
            controllerMetrics: metricsPort ? `http://127.0.0.1:${metricsPort}/metrics` : undefined,
            controllerArgs: extraArgs,
            cpuNodes,
        };
        process.stdout.write(`READY ${JSON.stringify(facts)}\n`);
        // Hold until the test closes stdin.
        await new Promise<void>((resolve) => {
            process.stdin.on("end", resolve);
            process.stdin.on("close", resolve);
            process.stdin.resume();
        });
        return 0;
    } finally {
        await stop();
    }
}

main().then(
    (code) => process.exit(code),
    (e: unknown) => {
        process.stderr.write(`cluster_up: ${(e as Error).stack ?? e}\n`);
        process.exit(1);
    },
);
