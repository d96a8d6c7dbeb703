// Every wall-clock wait of the tests (a readiness poll, a name lookup, a process start, node:test's
// `timeout:`) is a budget for something that makes progress; on a busy machine it makes that
// progress slower. One factor scales them all: AGENT_RL_TEST_TIME_SCALE when set, else the busier of
// the 1- and 5-minute load averages per CPU, read once per process (a test's `timeout:` and the waits
// inside it then agree) and written back to the environment, so processes this one starts (a
// Python stand-in, a nested test run) use the same factor. A bound that is itself the behaviour under
// test (a lifetime, "deleted within 20 s of SIGTERM") is not scaled; python/tests/waits.py is the
// same rule for the Python tests.
import * as os from "node:os";

/** The environment variable that fixes the factor (a number >= 1; "1" keeps every wait as written). */
export const TIME_SCALE_ENV = "AGENT_RL_TEST_TIME_SCALE";
/** The most the load average stretches a wait by default (a hung process still fails in bounded time). */
export const MAX_LOAD_SCALE = 8;

/**
 * The factor from its inputs: `fixed` (the environment variable) when set, else the busier of the
 * 1- and 5-minute load averages per CPU, between 1 and MAX_LOAD_SCALE. Throws on a `fixed` that is not
 * a number >= 1 (a typo must not silently shorten or drop every wait).
 */
export function timeScaleFrom(fixed: string | undefined, loadavg: readonly number[], cpus: number): number {
    if (fixed !== undefined && fixed.trim() !== "") {
        const n = Number(fixed);
        if (!Number.isFinite(n) || n < 1)
            throw new Error(`${TIME_SCALE_ENV}=${JSON.stringify(fixed)}: expected a number >= 1 (the factor every test wait is multiplied by)`);
        return n;
    }
    const load = Math.max(loadavg[0] ?? 0, loadavg[1] ?? 0) / Math.max(1, cpus);
    return Math.min(MAX_LOAD_SCALE, Math.max(1, Math.round(load * 100) / 100));
}

let processScale: number | undefined;

/** This process's factor (see the header): measured on first use, then fixed and exported to child processes. */
export function timeScale(): number {
    if (processScale === undefined) {
        processScale = timeScaleFrom(process.env[TIME_SCALE_ENV], os.loadavg(), os.availableParallelism());
        process.env[TIME_SCALE_ENV] = String(processScale);
    }
    return processScale;
}

/** `ms` stretched by this process's factor: the budget of a wait for something that makes progress. */
export function scaled(ms: number): number {
    return Math.ceil(ms * timeScale());
}

/** `seconds` stretched by this process's factor, whole seconds (kubectl's `--timeout=Ns`, a Python `timeout=`). */
export function scaledSeconds(seconds: number): number {
    return Math.ceil(seconds * timeScale());
}

/** A number of tries (each a probe and a fixed pause) stretched by this process's factor: the budget of a retry loop. */
export function scaledCount(tries: number): number {
    return Math.ceil(tries * timeScale());
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Polls `check` every `intervalMs` until it returns a value that is not undefined/false and returns
 * it; after `scaled(budgetMs)` it throws naming `what`, the budget and the last value `describe`
 * gives (the last check's value by default).
 */
export async function pollUntil<T>(
    what: string,
    check: () => Promise<T | undefined | false>,
    opts: { readonly budgetMs: number; readonly intervalMs?: number; readonly describe?: (last: T | undefined | false) => string },
): Promise<T> {
    const budget = scaled(opts.budgetMs);
    const until = Date.now() + budget;
    let last: T | undefined | false;
    for (;;) {
        last = await check();
        if (last !== undefined && last !== false) return last;
        if (Date.now() >= until) break;
        await sleep(opts.intervalMs ?? 500);
    }
    const seen = opts.describe ? opts.describe(last) : JSON.stringify(last);
    throw new Error(`${what}: not within ${budget} ms (${timeScale()}x ${opts.budgetMs} ms); last: ${seen}`);
}
