/**
 * The warm pool sized by the run (pure): how many sandboxes a burst of claims takes at once, how many
 * more the claim rate keeps in refill, and the pool that absorbs both without a cold start.
 *
 * - Rollouts in flight per rollout worker: training.maxInflight (the program's `--max-inflight`,
 *   TRL's `max_inflight_tasks`).
 * - Rollout workers: the named programs are TRL's async GRPO, which makes its rollout worker on the
 *   main process only (trl 1.16.0 trl/experimental/async_grpo/async_grpo_trainer.py, "Create worker
 *   and queue on rank 0"): one per run, whatever the processes. A custom program is not known: every
 *   trainer process (training.numProcesses per node x training.nodes) is counted as one, since a pool
 *   too large costs idle pods and one too small costs cold starts.
 * - Refill: a claimed sandbox leaves the pool at once and its replacement is Ready a refill time later
 *   (sandboxes.refillSeconds). Each slot of the burst claims again every rollout (sandboxes.rolloutSeconds),
 *   so claims arrive at burst / rolloutSeconds per second and, by Little's law, claim rate x refill time
 *   replacements are on their way at any moment: a pool holds a ready pod only while its size exceeds
 *   that (issue 58's field report: a pool sized by hand was empty essentially all the time).
 * - Spare: sandboxes.headroom, beyond both (a pod that fails to start, a claim released late).
 */

export interface PoolSizing {
    /** Rollouts in flight per rollout worker (training.maxInflight). */
    readonly perWorker: number;
    /** Processes that run rollouts, and why that many. */
    readonly workers: number;
    readonly workersWhy: string;
    /** Claims at once at most: perWorker x workers. */
    readonly burst: number;
    /** Seconds a rollout holds its sandbox (sandboxes.rolloutSeconds). */
    readonly rolloutSeconds: number;
    /** Seconds from a claim to its replacement's Ready (sandboxes.refillSeconds). */
    readonly refillSeconds: number;
    /** Claims per second in steady state: burst / rolloutSeconds. */
    readonly claimRate: number;
    /** Replacements in refill at any moment: ceil(claimRate x refillSeconds). */
    readonly refill: number;
    /** Spare beyond the burst and the refill (sandboxes.headroom). */
    readonly margin: number;
    /** The pool the run needs: burst + refill + margin (the default poolSize). */
    readonly size: number;
}

export interface PoolSizingInput {
    readonly maxInflight: number;
    readonly headroom: number;
    readonly rolloutSeconds: number;
    readonly refillSeconds: number;
    /** The program runs its rollouts on its main process only (the named TRL programs). */
    readonly rolloutsOnMainProcess: boolean;
    readonly numProcesses: number;
    readonly nodes: number;
}

export function poolSizing(i: PoolSizingInput): PoolSizing {
    const processes = i.numProcesses * i.nodes;
    const workers = i.rolloutsOnMainProcess ? 1 : processes;
    const workersWhy = i.rolloutsOnMainProcess
        ? `1 rollout worker (TRL's async GRPO runs rollouts on the main process only${processes > 1 ? `, not on all ${processes} trainer processes` : ""})`
        : `${processes} trainer process${processes === 1 ? "" : "es"} (${i.numProcesses} per node x ${i.nodes} node${i.nodes === 1 ? "" : "s"}; a custom program: each may run its own rollouts)`;
    const burst = i.maxInflight * workers;
    const claimRate = burst / i.rolloutSeconds;
    // burst x refill / rollout in integers first, so 8 x 35 / 35 is exactly 8 (no float ceil to 9).
    const refill = Math.ceil((burst * i.refillSeconds) / i.rolloutSeconds);
    return {
        perWorker: i.maxInflight,
        workers,
        workersWhy,
        burst,
        rolloutSeconds: i.rolloutSeconds,
        refillSeconds: i.refillSeconds,
        claimRate,
        refill,
        margin: i.headroom,
        size: burst + refill + i.headroom,
    };
}

/** The claim rate as plan.md and the messages write it: claims per second, two decimals. */
export function formatClaimRate(s: Pick<PoolSizing, "claimRate">): string {
    return `${Number(s.claimRate.toFixed(2))}/s`;
}

/** The sizing arithmetic in one line, for plan.md and the messages. */
export function sizingArithmetic(s: PoolSizing): string {
    return (
        `burst ${s.burst} + refill ${s.refill} (claim rate ${s.burst} / ${s.rolloutSeconds} s sandboxes.rolloutSeconds = ${formatClaimRate(s)}, ` +
        `x ${s.refillSeconds} s sandboxes.refillSeconds, rounded up) + ${s.margin} sandboxes.headroom = ${s.size}`
    );
}

/**
 * A pool smaller than the burst is refused: the claims beyond it wait for cold starts on every
 * burst, not only when the pool drains. Below burst + refill + margin is allowed (the pool then runs
 * dry while claims come at the planned rate, and plan.md shows the numbers).
 */
export function poolSizeProblems(poolSize: number, s: PoolSizing): string[] {
    if (poolSize >= s.burst) return [];
    return [
        `sandboxes.poolSize: the pool holds ${poolSize} sandboxes but a burst claims ${s.burst} at once ` +
            `(training.maxInflight ${s.perWorker} x ${s.workersWhy}): every burst would wait for ${s.burst - poolSize} cold start${s.burst - poolSize === 1 ? "" : "s"}; ` +
            `raise poolSize to at least ${s.size} (${sizingArithmetic(s)}), or unset it (that is the default), or lower training.maxInflight`,
    ];
}

/** The autoscaler's bounds on one warm pool: the computed size below, the quota's room above. */
export interface PoolAutoscaleBounds {
    /** HPA minReplicas: the pool's size (sandboxes.poolSize, or the computed one). */
    readonly min: number;
    /** HPA maxReplicas: sandboxes.autoscale.maxPoolSize, or twice the minimum. The namespace quota counts it. */
    readonly max: number;
}

/** The bounds of an autoscaled pool (sandboxes.autoscale on), the default max being twice the minimum. */
export function poolAutoscaleBounds(poolSize: number, maxPoolSize: number | undefined): PoolAutoscaleBounds {
    return { min: poolSize, max: maxPoolSize ?? 2 * poolSize };
}

/** What the autoscaler needs of the rest of the stack, every problem at once. */
export interface PoolAutoscaleInput {
    readonly enabled: boolean;
    readonly maxPoolSize: number | undefined;
    readonly poolSize: number;
    /** The stack runs an agent-sandbox warm pool on Kubernetes (the HPA's target). */
    readonly runsWarmPool: boolean;
    /** observability.enabled: the stack's PrometheusRule carries the recording rule the HPA reads. */
    readonly observability: boolean;
}

export function poolAutoscaleProblems(i: PoolAutoscaleInput): string[] {
    if (!i.enabled) return [];
    const problems: string[] = [];
    if (!i.runsWarmPool)
        problems.push(
            "sandboxes.autoscale.enabled: the autoscaler scales an agent-sandbox SandboxWarmPool, and this stack runs none: set sandboxes.provider to agent-sandbox on a Kubernetes target, or turn autoscale off",
        );
    if (!i.observability)
        problems.push(
            "sandboxes.autoscale.enabled: the autoscaler reads the warm pool's wanted size, a recording rule of the stack's PrometheusRule, which only observability.enabled renders: set observability.enabled to true, or turn autoscale off",
        );
    if (i.maxPoolSize !== undefined && i.maxPoolSize < i.poolSize)
        problems.push(
            `sandboxes.autoscale.maxPoolSize: ${i.maxPoolSize} is below the pool's size ${i.poolSize}, the autoscaler's minimum: raise maxPoolSize to at least ${i.poolSize}, or unset it (twice the pool's size, ${2 * i.poolSize})`,
        );
    return problems;
}
