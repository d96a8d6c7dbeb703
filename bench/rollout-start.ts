// A rollout's start under load (npm run bench -- --only rollout-start; issue 58 point 4): claim to the agent's first
// model call with per-rollout keys (mint at the verifier, delivery to the pod's forwarder, the call through the forwarder,
// the real nginx ingress and the stub model), beside the same load on a bare agent-sandbox pool of the same size (claim to
// first command), in the same run, at 1, 8 and 32 at once, warm and drained, each figure the median of several runs with
// min and max (bench/rollout_start.py says how). Needs root (the pods' namespaces and cgroups), the trainer-side lock's
// venv and the engine and controller fixtures (test/engine/build.sh, test/sandbox-controller/build.sh).
import * as path from "node:path";
import { LOCK_VENV_HINT, lockVenvPython } from "../test/helpers/stub-env";
import { REPO_ROOT, atMost, fmt, median, quantile, runCollected, table, type TargetCheck } from "./lib";

export interface RolloutStartBenchOptions {
    readonly deadline: number;
    readonly log: (line: string) => void;
    /** Claims at once, one level each. @default [1, 8, 32] */
    readonly levels?: readonly number[];
    /** Runs per level, phase and case (each figure is their median, with min and max). @default 3 */
    readonly runs?: number;
    /** About this many claims per run (bursts of the level repeat until then). @default 6 */
    readonly perRun?: number;
}

interface Claim {
    readonly ok: boolean;
    readonly error: string | null;
    readonly post_ms?: number | null;
    readonly ready_ms?: number | null;
    readonly rest_ms?: number;
    readonly mint_ms?: number | null;
    readonly delivery_ms?: number;
    readonly exec_ms?: number;
    readonly call_ms?: number;
    readonly total_ms?: number;
}

type CaseName = "bare" | "full";
type Phase = "sized" | "drained";

interface Run {
    readonly phase: Phase;
    readonly order: CaseName[];
    readonly bare: Claim[];
    readonly full: Claim[];
}

interface Level {
    readonly concurrency: number;
    readonly replicas: number;
    readonly burst: number;
    readonly headroom: number;
    readonly bursts_per_run: number;
    readonly fill_s?: number;
    readonly runs: Run[];
    readonly phases_done: Phase[];
}

export interface RolloutFigures {
    readonly levels: Level[];
    readonly runs: number;
    readonly per_run: number;
    readonly pod_starters: number;
    readonly cpu_limits: string;
    readonly cpu_nodes?: number;
    readonly model?: string;
    readonly cluster_up_s?: number;
    readonly seconds: number;
    readonly controller_args?: string[];
    readonly errors: string[];
    readonly not_run: number[];
    readonly net_errors?: string[];
}

const ms = (v: number) => fmt(v, 0);
const okValues = (claims: readonly Claim[], key: keyof Claim) => claims.filter((c) => c.ok && typeof c[key] === "number").map((c) => c[key] as number);

/** "median [min-max]" of per-run figures. */
function spread(values: readonly number[], show: (v: number) => string = ms): string {
    const v = values.filter(Number.isFinite);
    return v.length === 0 ? "n/a" : `${show(median(v))} [${show(Math.min(...v))}-${show(Math.max(...v))}]`;
}

/** Per run of `phase`: the q-quantile of `key` over one case's successful claims. */
function perRun(l: Level, phase: Phase, which: CaseName, key: keyof Claim, q: number): number[] {
    return l.runs.filter((r) => r.phase === phase).map((r) => quantile(okValues(r[which], key), q));
}

/** Per run of `phase`: full's quantile over bare's (the same run, the same load). */
function ratios(l: Level, phase: Phase, q: number): number[] {
    const full = perRun(l, phase, "full", "total_ms", q);
    const bare = perRun(l, phase, "bare", "total_ms", q);
    return full.map((f, i) => f / bare[i]!);
}

const HEADLINE = [
    "claims at once",
    "pools",
    "phase",
    "runs x claims",
    "failed (bare / full)",
    "bare: claim to first command p50 ms",
    "p99 ms",
    "full: claim to first model call p50 ms",
    "p99 ms",
    "ratio p50",
    "ratio p99",
];

function headlineRows(levels: readonly Level[]): string[][] {
    return levels.flatMap((l) =>
        (["sized", "drained"] as const)
            .filter((phase) => l.runs.some((r) => r.phase === phase))
            .map((phase) => {
                const runs = l.runs.filter((r) => r.phase === phase);
                const failed = (w: CaseName) => runs.reduce((n, r) => n + r[w].filter((c) => !c.ok).length, 0);
                return [
                    String(l.concurrency),
                    phase === "sized" ? `2 x ${l.replicas} (${l.burst} + ${l.headroom})` : "2 x 0",
                    phase,
                    `${runs.length} x ${runs[0]?.full.length ?? 0}`,
                    `${failed("bare")} / ${failed("full")}`,
                    spread(perRun(l, phase, "bare", "total_ms", 0.5)),
                    spread(perRun(l, phase, "bare", "total_ms", 0.99)),
                    spread(perRun(l, phase, "full", "total_ms", 0.5)),
                    `**${spread(perRun(l, phase, "full", "total_ms", 0.99))}**`,
                    spread(ratios(l, phase, 0.5), (v) => fmt(v, 2)),
                    `**${spread(ratios(l, phase, 0.99), (v) => fmt(v, 2))}**`,
                ];
            }),
    );
}

const STEPS: ReadonlyArray<readonly [keyof Claim, string]> = [
    ["post_ms", "claim POST"],
    ["ready_ms", "wait for the claim's Ready"],
    ["rest_ms", "pod IP + runtime health"],
    ["mint_ms", "mint (verifier)"],
    ["delivery_ms", "delivery (PUT to the forwarder)"],
    ["exec_ms", "first command / first model call (through the runtime)"],
    ["call_ms", "of which the call in the pod (curl)"],
];

function stepRows(levels: readonly Level[]): string[][] {
    return levels.flatMap((l) =>
        (["sized", "drained"] as const).flatMap((phase) =>
            (["bare", "full"] as const)
                .filter(() => l.runs.some((r) => r.phase === phase))
                .map((which) => [
                    String(l.concurrency),
                    phase,
                    which,
                    ...STEPS.map(([key]) => {
                        const v = perRun(l, phase, which, key, 0.5).filter(Number.isFinite);
                        return v.length === 0 ? "-" : spread(v);
                    }),
                    spread(perRun(l, phase, which, "total_ms", 0.5)),
                ]),
        ),
    );
}

/** The tables of one run of bench/rollout_start.py. */
export function rolloutFiguresMarkdown(f: RolloutFigures): string[] {
    const failures = f.levels.flatMap((l) =>
        l.runs.flatMap((r) =>
            (["bare", "full"] as const).flatMap((w) => r[w].filter((c) => !c.ok).map((c) => `${l.concurrency} at once, ${r.phase}, ${w}: ${c.error}`)),
        ),
    );
    return [
        `Each cell: the median over ${f.runs} runs [min-max]; a run is about ${f.per_run} claims of one case (bursts of the level released at once), p99 over n <= 32 being the run's slowest claim. The ratio is full / bare within the same run.`,
        "",
        table(HEADLINE, headlineRows(f.levels)),
        "",
        "Where the time goes (per step: the median over runs of the run's p50, ms [min-max]; `-`: not a step of that case):",
        "",
        table(["claims at once", "phase", "case", ...STEPS.map(([, name]) => name), "total p50"], stepRows(f.levels)),
        "",
        `Pool fill (both pools from empty, nothing else running): ${f.levels.map((l) => `${l.concurrency} at once: 2 x ${l.replicas} in ${fmt(l.fill_s ?? NaN, 1)} s`).join("; ")}.`,
        `Pod starts ${f.pod_starters} at a time; CPU: ${f.cpu_limits}; ${f.cpu_nodes ?? "?"} fake nodes; controller flags beyond the fixture's: ${f.controller_args?.length ? f.controller_args.join(" ") : "none (upstream defaults)"}; cluster start ${fmt(f.cluster_up_s ?? NaN, 0)} s; the script ran ${fmt(f.seconds, 0)} s.${f.not_run.length ? ` Not run (deadline): ${f.not_run.join(", ")} at once.` : ""}`,
        ...(f.errors.length ? ["", "Stopped early:", "", ...f.errors.map((e) => `- ${e}`)] : []),
        ...(failures.length ? ["", `Failed claims (${failures.length}; first 5):`, "", ...failures.slice(0, 5).map((e) => `- ${e}`)] : []),
        ...(f.net_errors?.length ? ["", "Pod network errors:", "", ...f.net_errors.slice(0, 5).map((e) => `- ${e}`)] : []),
        "",
    ];
}

/** The targets of issue 58 point 4, at 32 at once with the pools sized by the rule. */
export function rolloutChecks(f: RolloutFigures): TargetCheck[] {
    const at32 = f.levels.find((l) => l.concurrency === 32);
    const runs = at32?.runs.filter((r) => r.phase === "sized") ?? [];
    if (at32 === undefined || runs.length === 0) return [];
    const failed = runs.reduce((n, r) => n + r.full.filter((c) => !c.ok).length + r.bare.filter((c) => !c.ok).length, 0);
    const p99 = median(perRun(at32, "sized", "full", "total_ms", 0.99));
    const ratio = median(ratios(at32, "sized", 0.99));
    return [
        atMost(
            `claim to first model call p99 at 32 at once, pool sized by the rule, median of ${runs.length} runs (${failed} claims failed)`,
            failed ? Infinity : p99,
            1000,
            " ms",
            0,
        ),
        atMost(
            `its ratio to a bare agent-sandbox pool's claim to first command p99, same run, median of ${runs.length} runs`,
            failed ? Infinity : ratio,
            1.25,
            "",
            2,
        ),
    ];
}

export async function runRolloutStartBench(o: RolloutStartBenchOptions): Promise<{ markdown: string; checks: TargetCheck[] }> {
    const python = lockVenvPython();
    if (python === undefined) throw new Error(`the trainer-side lock's venv is missing: ${LOCK_VENV_HINT}`);
    const levels = o.levels ?? [1, 8, 32];
    const runs = o.runs ?? 3;
    const perRunClaims = o.perRun ?? 6;
    const budget = Math.max(120, (o.deadline - Date.now()) / 1000 - 60);
    o.log(`rollout-start: ${levels.join(", ")} at once, ${runs} runs of about ${perRunClaims} claims per case and phase (at most ${fmt(budget, 0)} s)`);
    const args = [path.join(REPO_ROOT, "bench", "rollout_start.py"), levels.join(","), String(runs), String(perRunClaims), String(budget)];
    const r = await runCollected("nice", ["-n", "10", python, ...args], { cwd: REPO_ROOT }, (budget + 180) * 1000);
    const line = r.out.split("\n").find((l) => l.startsWith("BENCH_JSON "));
    if (line === undefined) throw new Error(`bench/rollout_start.py exited ${r.code} without figures:\n${r.err.slice(-3000)}`);
    const f = JSON.parse(line.slice("BENCH_JSON ".length)) as RolloutFigures;
    if (r.code !== 0) o.log(`rollout-start: bench/rollout_start.py exited ${r.code}:\n${r.err.slice(-2000)}`);
    const markdown = [
        "### A rollout's start: claim to the first model call beside a bare pool (issue 58)",
        "",
        "**Simulated cluster: kwok pods, not real pod starts** (bench/rollout_start.py says what runs). Full: the plan's template,",
        "each pod a network namespace with the runtime and the key-holding forwarder; `AgentSandboxBackend.create()` with",
        "rollout keys on (claim, Ready, runtime health, mint at the verifier, PUT to the forwarder), then a command in the",
        "sandbox calls the forwarder on the pod's loopback (127.0.0.1:7100) and gets the stub model's answer through the real",
        "nginx ingress (the verifier asked). Bare: the same template without the forwarder and no keys, to the first command.",
        "",
        ...rolloutFiguresMarkdown(f),
    ].join("\n");
    return { markdown, checks: rolloutChecks(f) };
}
