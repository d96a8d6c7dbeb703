// Claims under load (npm run bench -- --only claim-latency): warm-pool claims through the backend (AgentSandboxBackend,
// the trainer's ServiceAccount) to their first command, p50 and p99, at 1, 8, 32 and 128 claims at once, against the real
// agent-sandbox v1.0.1 controller on the simulated cluster (bench/claim-latency.py reuses python/tests/test_controller.py's
// cluster and pod network): with the pool sized by the rule for that concurrency (components/config/pool-size.ts, as the
// plan renders it), with the pool drained (every claim waits for a cold sandbox), and the refill rate. kwok starts no
// container: a "pod start" is the test's pod network starting the runtime process on this machine. Bounded by counts and
// the bench's deadline. Needs root (the pods' mount namespaces), the trainer-side lock's venv and the engine and
// controller fixtures (test/engine/build.sh, test/sandbox-controller/build.sh).
import * as path from "node:path";
import { LOCK_VENV_HINT, lockVenvPython } from "../test/helpers/stub-env";
import { REPO_ROOT, atMost, fmt, quantile, runCollected, table, type TargetCheck } from "./lib";

export interface ClaimLatencyBenchOptions {
    readonly deadline: number;
    readonly log: (line: string) => void;
    /** Claims at once, one level each. @default [1, 8, 32, 128] */
    readonly levels?: readonly number[];
    /** About this many claims timed per level and case (bursts repeat until then). @default 20 */
    readonly samples?: number;
}

interface Claim {
    readonly ok: boolean;
    readonly error: string | null;
    readonly create_ms?: number;
    readonly post_ms?: number | null;
    readonly ready_ms?: number | null;
    readonly rest_ms?: number;
    readonly exec_ms?: number;
    readonly total_ms?: number;
}

interface ControllerView {
    readonly [launchType: string]: { created: Record<string, number>; controller_ms_buckets: Record<string, number> };
}

interface Level {
    readonly concurrency: number;
    readonly poolSize: number;
    readonly replicas: number;
    readonly burst: number;
    readonly headroom: number;
    readonly quota: Record<string, string>;
    readonly rounds?: number;
    readonly fill_s?: number;
    readonly sized?: Claim[];
    readonly refill_after_burst_s?: number[];
    /** The controller's agent_sandboxes gauge of the pool's Ready members (what the pool-drain alert reads) and the bench's own count. */
    readonly gauge_after_burst?: Array<{ controller: number | null; bench: number }>;
    readonly gauge_after_refill?: Array<{ controller: number | null; bench: number }>;
    readonly drained?: Claim[];
    readonly refill_after_drain?: { sandboxes: number; seconds: number; first_ready_s: number | null; per_s: number | null };
    readonly controller_sized?: ControllerView;
    readonly controller_drained?: ControllerView;
    readonly phases_done?: string[];
}

export interface Figures {
    readonly levels: Level[];
    readonly cluster_up_s: number;
    readonly pod_starters: number;
    readonly controller_args: string[];
    readonly errors: string[];
    readonly not_run: number[];
    readonly net_errors: string[];
}

/** agent-sandbox's published figures this bench is read beside (cited in bench/results.md section 6). */
export const PUBLISHED = [
    "kubernetes-sigs/agent-sandbox#1454: p99 851 ms against a 500 ms target at 3,600 claims (real cluster)",
    "cocoonstack/sandbox-operator#33: 35-64 ms p50 warm, 9-21 s once the pool drained",
    "openkruise/agents#96: claims failed instead of starting cold when the pool was empty",
];

const ms = (v: number) => fmt(v, 0);
const values = (claims: readonly Claim[], key: keyof Claim) => claims.filter((c) => c.ok && typeof c[key] === "number").map((c) => c[key] as number);
const p50p99 = (v: readonly number[]) => (v.length === 0 ? "n/a" : `${ms(quantile(v, 0.5))} / ${ms(quantile(v, 0.99))}`);

/** The smallest bucket bound holding the q-quantile of a Prometheus histogram's (cumulative) bucket deltas. */
export function bucketQuantile(buckets: Record<string, number>, q: number): string {
    const bounds = Object.entries(buckets)
        .map(([le, n]) => [le === "+Inf" ? Infinity : Number(le), n] as const)
        .sort((a, b) => a[0] - b[0]);
    const total = bounds[bounds.length - 1]?.[1] ?? 0;
    if (total === 0) return "n/a";
    const hit = bounds.find(([, n]) => n >= q * total)!;
    return hit[0] === Infinity ? "> 240000" : `<= ${hit[0]}`;
}

function claimRows(levels: readonly Level[], pick: (l: Level) => readonly Claim[] | undefined, pool: (l: Level) => string) {
    return levels
        .filter((l) => pick(l) !== undefined && pick(l)!.length > 0)
        .map((l) => {
            const cl = pick(l)!;
            const total = values(cl, "total_ms");
            return [
                String(l.concurrency),
                pool(l),
                String(cl.length),
                String(cl.filter((c) => !c.ok).length),
                total.length ? ms(quantile(total, 0.5)) : "n/a",
                total.length ? `**${ms(quantile(total, 0.99))}**` : "n/a",
                total.length ? ms(Math.max(...total)) : "n/a",
                p50p99(values(cl, "post_ms")),
                p50p99(values(cl, "ready_ms")),
                p50p99(values(cl, "rest_ms")),
                p50p99(values(cl, "exec_ms")),
            ];
        });
}

const CLAIM_HEADER = [
    "claims at once",
    "pool",
    "claims timed",
    "failed",
    "claim to first command p50 ms",
    "p99 ms",
    "max ms",
    "claim POST p50 / p99",
    "wait for Ready p50 / p99",
    "pod IP + runtime health p50 / p99",
    "first command p50 / p99",
];

function controllerLine(l: Level, which: "controller_sized" | "controller_drained"): string {
    const v = l[which];
    if (!v) return "";
    const parts = Object.entries(v).map(([kind, e]) => {
        const created = Object.entries(e.created)
            .map(([cond, n]) => `${n} ${cond}`)
            .join(", ");
        const b = e.controller_ms_buckets;
        return `${kind}: ${created || "0"} created; controller first-observed -> Ready p50 ${bucketQuantile(b, 0.5)} ms, p99 ${bucketQuantile(b, 0.99)} ms`;
    });
    return `${l.concurrency} at once, ${which === "controller_sized" ? "sized" : "drained"}: ${parts.join("; ") || "no claim metrics"}`;
}

/**
 * The tables of one run of bench/claim-latency.py (simulated cluster or real node): sized, drained, refill, the
 * controller's own view, and what stopped early.
 */
export function claimFiguresMarkdown(f: Figures): string[] {
    const done = f.levels;
    const refillRows = done
        .filter((l) => l.refill_after_burst_s?.length || l.refill_after_drain)
        .map((l) => {
            const rb = l.refill_after_burst_s ?? [];
            const med = rb.length ? quantile(rb, 0.5) : NaN;
            const rd = l.refill_after_drain;
            return [
                String(l.concurrency),
                String(l.replicas),
                rb.length ? `${fmt(med, 1)} s for ${l.concurrency} (${fmt(l.concurrency / med, 1)} / s)` : "n/a",
                rd ? `${fmt(rd.seconds, 1)} s for ${rd.sandboxes}` : "n/a",
                rd?.first_ready_s != null ? fmt(rd.first_ready_s, 1) : "n/a",
                rd?.per_s != null ? fmt(rd.per_s, 1) : "n/a",
            ];
        });
    const errors = done.flatMap((l) => [...(l.sized ?? []), ...(l.drained ?? [])].filter((c) => !c.ok).map((c) => `${l.concurrency} at once: ${c.error}`));
    return [
        "Pool sized by the rule:",
        "",
        table(
            CLAIM_HEADER,
            claimRows(
                done,
                (l) => l.sized,
                (l) => `${l.replicas} (${l.burst} + ${l.headroom})`,
            ),
        ),
        "",
        "Pool drained (scaled to 0 and empty: every claim takes the controller's cold path, a pod start):",
        "",
        table(
            CLAIM_HEADER,
            claimRows(
                done,
                (l) => l.drained,
                () => "0",
            ),
        ),
        "",
        "Refill (sandboxes Ready at their runtimes' addresses; polled every 0.3 s):",
        "",
        table(["claims at once", "pool", "after a burst: until full again, median", "after a drain: 0 to full", "first Ready s", "Ready / s"], refillRows),
        "",
        "The controller's own view (its metrics, bucket bounds):",
        "",
        ...done.flatMap((l) => [controllerLine(l, "controller_sized"), controllerLine(l, "controller_drained")].filter((x) => x).map((x) => `- ${x}`)),
        ...done
            .filter((l) => l.gauge_after_burst?.length)
            .map((l) => {
                // Identical readings once, with how many times they were read: "2 (bench 2) x 20".
                const readings = (gs: ReadonlyArray<{ controller: number | null; bench: number }>) => {
                    const counts = new Map<string, number>();
                    for (const g of gs) {
                        const k = `${g.controller ?? "n/a"} (bench ${g.bench})`;
                        counts.set(k, (counts.get(k) ?? 0) + 1);
                    }
                    return [...counts].map(([k, n]) => (n > 1 ? `${k} x ${n}` : k)).join(", ") || "n/a";
                };
                return `- ${l.concurrency} at once: the controller's warm-pool Ready gauge (\`agent_sandboxes{owned_by="SandboxWarmPool",ready_condition="true"}\`, what AgentRLWarmPoolBelowBurst reads against the burst ${l.burst}) right after a burst: ${readings(l.gauge_after_burst!)}; once refilled: ${readings(l.gauge_after_refill ?? [])}`;
            }),
        "",
        `Controller flags beyond the fixture's: ${f.controller_args.length ? f.controller_args.map((a) => `\`${a}\``).join(" ") : "none (upstream defaults)"}. Cluster start ${fmt(f.cluster_up_s, 0)} s.${f.not_run.length ? ` Not run (deadline): ${f.not_run.join(", ")} at once.` : ""}`,
        ...(f.errors.length ? ["", "Stopped early:", "", ...f.errors.map((e) => `- ${e}`)] : []),
        ...(errors.length ? ["", `Failed claims (${errors.length}; first 5):`, "", ...errors.slice(0, 5).map((e) => `- ${e}`)] : []),
        ...(f.net_errors.length ? ["", "Pod network errors:", "", ...f.net_errors.slice(0, 5).map((e) => `- ${e}`)] : []),
        "",
    ];
}

export async function runClaimLatencyBench(o: ClaimLatencyBenchOptions): Promise<{ markdown: string; checks: TargetCheck[] }> {
    const python = lockVenvPython();
    if (python === undefined) throw new Error(`the trainer-side lock's venv is missing: ${LOCK_VENV_HINT}`);
    const levels = o.levels ?? [1, 8, 32, 128];
    const samples = o.samples ?? 20;
    // What is left of the deadline goes to the script (the cluster's start included); it stops itself before.
    const budget = Math.max(60, (o.deadline - Date.now()) / 1000 - 30);
    o.log(`claim-latency: ${levels.join(", ")} claims at once, about ${samples} claims per case (at most ${fmt(budget, 0)} s, cluster start included)`);
    const args = [path.join(REPO_ROOT, "bench", "claim-latency.py"), levels.join(","), String(samples), String(budget)];
    const r = await runCollected("nice", ["-n", "10", python, ...args], { cwd: REPO_ROOT }, (budget + 120) * 1000);
    const line = r.out.split("\n").find((l) => l.startsWith("BENCH_JSON "));
    if (line === undefined) throw new Error(`bench/claim-latency.py exited ${r.code} without figures:\n${r.err.slice(-3000)}`);
    const f = JSON.parse(line.slice("BENCH_JSON ".length)) as Figures;
    const markdown = [
        "## 6. Sandbox claims under load",
        "",
        "**Simulated cluster: kwok pods, not real pod starts.** The real agent-sandbox v1.0.1 controller and the project's backend",
        '(`AgentSandboxBackend.create()` as the trainer\'s ServiceAccount, then the first `exec("true")` through the runtime) on the',
        "API server fixture; kwok runs no container, and a sandbox pod becomes Ready when the test's pod network has started its",
        `runtime (runtime.py, a process on this machine, ${f.pod_starters} at a time) and it answers. The pool and its ResourceQuota at each`,
        "level are what the plan renders for `training.maxInflight` = that level (pool = burst + headroom). Each burst releases all",
        "its claims at once from as many threads, each with its own client made before the clock starts.",
        "",
        ...claimFiguresMarkdown(f),
        "Published figures to read these beside:",
        "",
        ...PUBLISHED.map((p) => `- ${p}`),
        "",
    ].join("\n");
    const checks: TargetCheck[] = [];
    const at32 = f.levels.find((l) => l.concurrency === 32);
    const v32 = at32?.sized ? values(at32.sized, "total_ms") : [];
    if (at32?.sized?.length) {
        const failed = at32.sized.filter((c) => !c.ok).length;
        checks.push(
            atMost(
                `claim to first command p99 at 32 at once, pool sized by the rule (${v32.length} claims, ${failed} failed)`,
                failed ? Infinity : quantile(v32, 0.99),
                1000,
                " ms",
                0,
            ),
        );
    }
    if (r.code !== 0) o.log(`claim-latency: bench/claim-latency.py exited ${r.code}:\n${r.err.slice(-2000)}`);
    return { markdown, checks };
}
