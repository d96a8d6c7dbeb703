// Engine timings (issue 12): the real Pulumi engine (CLI v3.274.1, kubernetes and random plugins built by
// test/engine/build.sh) running index.ts through the Automation API's inline program against the simulated GPU
// cluster of the engine tests (test/helpers/cluster.ts: API server, controller-manager, scheduler, kwok). For every
// Kubernetes recipe: first up, no-change up, destroy; then how the first up grows with the sandbox pool size and the
// env replicas. Too long for the default run's 4 min 45 s: `npm run bench -- --only engine`.
import { RECIPE_NAMES } from "../components/config";
import { changeCount, merge, recipePlatform, type OpResult } from "../test/helpers/engine";
import { namesFor, startEngineHarness, teardown } from "../test/helpers/engine-checks";
import { atMost, fmt, table, type TargetCheck } from "./lib";

export interface EngineBenchOptions {
    readonly deadline: number;
    readonly log: (line: string) => void;
    /** One size per sweep end instead of three. */
    readonly quick?: boolean;
}

export interface EngineBenchResult {
    readonly markdown: string;
    readonly checks: TargetCheck[];
}

const POOL = [10, 100, 1000];
const REPLICAS = [5, 16, 64];

const s = (ms: number) => fmt(ms / 1000, 1);

export async function runEngineBench(o: EngineBenchOptions): Promise<EngineBenchResult> {
    // One engine run at a time (the engine test files take the same lock).
    const { cluster, engine, release, clusterMs, engineMs } = await startEngineHarness({ volumes: 48 });
    try {
        o.log(`engine: cluster up in ${s(clusterMs)} s, engine home in ${s(engineMs)} s`);
        const must = (r: OpResult, what: string): OpResult => {
            if (!r.ok) throw new Error(`${what} failed: ${r.error?.split("\n").slice(0, 6).join(" | ")}`);
            return r;
        };
        const left = () => {
            if (Date.now() > o.deadline) throw new Error("engine benchmark deadline reached");
        };

        const recipeRows: string[][] = [];
        for (const recipe of RECIPE_NAMES) {
            left();
            const st = await engine.stack(`${recipe}-k8s`, recipePlatform(recipe, cluster));
            const up = must(await st.up("first up", { timeoutMs: 600_000 }), `${recipe} first up`);
            const again = must(await st.up("no-change up", { timeoutMs: 600_000 }), `${recipe} no-change up`);
            const down = must(await st.destroy("destroy", { timeoutMs: 600_000 }), `${recipe} destroy`);
            o.log(`engine: ${recipe}: up ${s(up.ms)} s, no-change up ${s(again.ms)} s (${changeCount(again.changes)} changes), destroy ${s(down.ms)} s`);
            recipeRows.push([recipe, String(up.changes.create ?? 0), s(up.ms), s(again.ms), String(changeCount(again.changes)), s(down.ms)]);
        }

        /** First up and destroy per size; with `change`, an up with that change in between (a rollout). */
        const sweep = async (
            label: string,
            recipe: string,
            sizes: number[],
            override: (n: number) => Record<string, unknown>,
            change?: Record<string, unknown>,
        ) => {
            const rows: Array<{ n: number; up: number; resources: number; change?: number; rolled?: number; down: number }> = [];
            for (const n of sizes) {
                left();
                const platform = recipePlatform(recipe, cluster, override(n));
                const st = await engine.stack(`${label}-${n}`, platform);
                const up = must(await st.up("first up", { timeoutMs: 900_000 }), `${label} ${n} first up`);
                let changed: OpResult | undefined;
                let rolled: number | undefined;
                if (change) {
                    const next = recipePlatform(recipe, cluster, merge(override(n), change));
                    await st.setPlatform(next);
                    const t = Date.now();
                    changed = must(await st.up("rollout", { timeoutMs: 900_000 }), `${label} ${n} rollout`);
                    // The provider's StatefulSet await returned before the rolling update was done (seen here:
                    // "initialization complete" after 0.25 s with 0 of 8 replicas updated): wait for it ourselves.
                    const ns = namesFor(`${label}-${n}`, next).namespaces.envs;
                    await cluster.waitFor(
                        `the StatefulSets in ${ns} rolled`,
                        async () => {
                            const list = await cluster.getJson<{ items: any[] }>(["statefulsets", "-n", ns]);
                            return list?.items.every(
                                (x) =>
                                    x.status?.currentRevision === x.status?.updateRevision &&
                                    x.status?.updatedReplicas === x.spec.replicas &&
                                    x.status?.readyReplicas === x.spec.replicas,
                            );
                        },
                        900_000,
                    );
                    rolled = Date.now() - t;
                }
                const down = must(await st.destroy("destroy", { timeoutMs: 900_000 }), `${label} ${n} destroy`);
                o.log(
                    `engine: ${label} ${n}: up ${s(up.ms)} s (${up.changes.create ?? 0} resources)${changed ? `, rollout up ${s(changed.ms)} s, rolled after ${s(rolled!)} s` : ""}, destroy ${s(down.ms)} s`,
                );
                rows.push({ n, up: up.ms, resources: up.changes.create ?? 0, change: changed?.ms, rolled, down: down.ms });
            }
            return rows;
        };
        const pool = await sweep("pool", "opencode-blackbox", o.quick ? [POOL[0]!, POOL[POOL.length - 1]!] : POOL, (n) => ({ sandboxes: { poolSize: n } }));
        // The rollout: one more env var for the env server, so every replica is replaced, one at a time.
        const replicas = await sweep(
            "replicas",
            "wordle-whitebox",
            o.quick ? [REPLICAS[0]!, REPLICAS[REPLICAS.length - 1]!] : REPLICAS,
            (n) => ({ envs: { wordle: { replicas: n } } }),
            {
                envs: { wordle: { settings: { BENCH_ROLLOUT: "1" } } },
            },
        );

        const poolRatio = pool[pool.length - 1]!.up / pool[0]!.up;
        const replicasRatio = replicas[replicas.length - 1]!.up / replicas[0]!.up;
        const first = replicas[0]!;
        const last = replicas[replicas.length - 1]!;
        const perPod = (last.rolled! - first.rolled!) / (last.n - first.n);
        const checks: TargetCheck[] = [
            atMost(
                `engine first up, sandbox pool ${pool[pool.length - 1]!.n} vs ${pool[0]!.n} (${s(pool[pool.length - 1]!.up)} s / ${s(pool[0]!.up)} s)`,
                poolRatio,
                1.5,
                "x",
            ),
            atMost(`engine first up, env replicas ${last.n} vs ${first.n} (${s(last.up)} s / ${s(first.up)} s)`, replicasRatio, 1.5, "x"),
        ];
        const markdown = [
            "## 4. Engine timings",
            "",
            `What: the real engine (Pulumi CLI v3.274.1, the kubernetes 4.34.2 and random 4.21.2 plugins built by test/engine/build.sh) runs index.ts through the Automation API's inline program, local file backend, passphrase secrets, against the engine tests' simulated cluster (etcd + kube-apiserver, kube-controller-manager, kube-scheduler v1.36.3, kwok v0.8.0: a GPU node with 8 nvidia.com/gpu, 3 CPU nodes; a pod becomes Running and Ready as soon as it is scheduled and takes 3 s to stop; nothing is pulled or run). The provider's awaits are on wherever the program leaves them on (Deployments and StatefulSets Ready, Services with endpoints). Destroy keeps the training namespace and the checkpoints claim, and waits for the other namespaces to be finalised. Cluster start ${s(clusterMs)} s, engine home (plugin install) ${s(engineMs)} s. Generated ${new Date().toISOString()}; the 2 cores are shared by the engine, the providers, the API server, the controllers and kwok.`,
            "",
            "Command: `npm run bench -- --only engine` (bench/engine.ts; tests of the same flows: test/stack/engine-*.test.ts)",
            "",
            "### Per recipe (Kubernetes, recipe defaults, GPU node placement)",
            "",
            table(["recipe", "resources", "first up s", "no-change up s", "changes in no-change up", "destroy s"], recipeRows),
            "",
            "### First up as the sandbox pool grows (opencode-blackbox)",
            "",
            "The warm pool is one SandboxWarmPool whatever its size (no agent-sandbox controller runs here, so no sandbox pod is made): the first up should stay flat.",
            "",
            table(
                ["sandboxes.poolSize", "resources", "first up s", "destroy s"],
                pool.map((r) => [String(r.n), String(r.resources), s(r.up), s(r.down)]),
            ),
            "",
            "### First up as env replicas grow (wordle-whitebox)",
            "",
            `The resource count stays flat, and so does the first up (${fmt(replicasRatio)}x from ${first.n} to ${last.n} replicas): the StatefulSet starts its replicas in parallel (podManagementPolicy Parallel) and the simulated pods are Ready at once. A rollout (one env var more for the env server) replaces the replicas one at a time, so it grows with the replicas by design: about ${s(perPod)} s per replica here (mostly the simulated 3 s pod stop; a real env server's stop and start take longer, which is why the StatefulSet's update timeout grows with the count). Note: the \`up\` itself returned before the rollout was done (the provider's StatefulSet await reported the update complete while 0 replicas were updated); "rolled after" is measured from the start of that up until every replica runs the new revision.`,
            "",
            table(
                ["envs.wordle.replicas", "resources", "first up s", "rollout: up returned s", "rollout: all replicas rolled s", "destroy s"],
                replicas.map((r) => [
                    String(r.n),
                    String(r.resources),
                    s(r.up),
                    r.change !== undefined ? s(r.change) : "-",
                    r.rolled !== undefined ? s(r.rolled) : "-",
                    s(r.down),
                ]),
            ),
            "",
        ].join("\n");
        return { markdown, checks };
    } finally {
        await teardown(engine, cluster, release);
    }
}
