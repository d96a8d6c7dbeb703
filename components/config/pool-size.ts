/**
 * The warm pool sized by the run (pure): how many sandboxes a burst of claims takes at once, and
 * the pool that absorbs it without a cold start.
 *
 * - Rollouts in flight per rollout worker: training.maxInflight (the program's `--max-inflight`,
 *   TRL's `max_inflight_tasks`).
 * - Rollout workers: the named programs are TRL's async GRPO, which makes its rollout worker on the
 *   main process only (trl 1.16.0 trl/experimental/async_grpo/async_grpo_trainer.py, "Create worker
 *   and queue on rank 0"): one per run, whatever the processes. A custom program is not known: every
 *   trainer process (training.numProcesses per node x training.nodes) is counted as one, since a pool
 *   too large costs idle pods and one too small costs cold starts.
 * - Refill margin: sandboxes.headroom, the claims that arrive while the controller replaces the ones
 *   just taken (a claim's sandbox leaves the pool at once; its replacement is a pod start away).
 */

export interface PoolSizing {
    /** Rollouts in flight per rollout worker (training.maxInflight). */
    readonly perWorker: number;
    /** Processes that run rollouts, and why that many. */
    readonly workers: number;
    readonly workersWhy: string;
    /** Claims at once at most: perWorker x workers. */
    readonly burst: number;
    /** Refill margin (sandboxes.headroom). */
    readonly margin: number;
    /** The pool the run needs: burst + margin (the default poolSize). */
    readonly size: number;
}

export interface PoolSizingInput {
    readonly maxInflight: number;
    readonly headroom: number;
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
    return { perWorker: i.maxInflight, workers, workersWhy, burst, margin: i.headroom, size: burst + i.headroom };
}

/**
 * A pool smaller than the burst is refused: the claims beyond it wait for cold starts on every
 * burst, not only when the pool drains. Below burst + margin is allowed (the margin is a refill
 * cushion), and plan.md shows the numbers.
 */
export function poolSizeProblems(poolSize: number, s: PoolSizing): string[] {
    if (poolSize >= s.burst) return [];
    return [
        `sandboxes.poolSize: the pool holds ${poolSize} sandboxes but a burst claims ${s.burst} at once ` +
            `(training.maxInflight ${s.perWorker} x ${s.workersWhy}): every burst would wait for ${s.burst - poolSize} cold start${s.burst - poolSize === 1 ? "" : "s"}; ` +
            `raise poolSize to at least ${s.size} (the burst + sandboxes.headroom ${s.margin}), or unset it (that is the default), or lower training.maxInflight`,
    ];
}
