/**
 * A long-running program a test starts (mtail, nginx-prometheus-exporter, Prometheus, a session
 * counter): its output kept, a bounded wait for an HTTP route to answer, and a stop that ends it by
 * its own pid (TERM, then KILL after 3 s).
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import { scaled } from "./waits";

export interface Started {
    readonly pid: number;
    readonly child: ChildProcess;
    output(): string;
    /** Ends the process (TERM, KILL after 3 s); resolves once it exited. Safe to call twice. */
    stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts `bin args` and waits (at most `timeoutMs`, scaled: waits.ts) until `readyUrl` answers `readyStatus`;
 * throws with the program's output if it exits or does not answer in time.
 */
export async function startProgram(
    bin: string,
    args: readonly string[],
    opts: { readonly readyUrl: string; readonly readyStatus?: number; readonly timeoutMs?: number; readonly env?: NodeJS.ProcessEnv; readonly cwd?: string },
): Promise<Started> {
    const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env: opts.env ?? process.env, cwd: opts.cwd });
    let output = "";
    const keep = (d: Buffer) => {
        output += d.toString();
        if (output.length > 200_000) output = output.slice(-100_000);
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    let spawnError: Error | undefined;
    child.once("error", (e) => (spawnError = e));
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    let stopped: Promise<void> | undefined;
    const stop = (): Promise<void> => {
        stopped ??= (async () => {
            if (child.exitCode !== null || child.signalCode !== null) return;
            child.kill("SIGTERM");
            if (!(await Promise.race([exited.then(() => true), sleep(3000).then(() => false)]))) {
                child.kill("SIGKILL");
                await exited;
            }
        })();
        return stopped;
    };
    const budget = scaled(opts.timeoutMs ?? 15_000);
    const deadline = Date.now() + budget;
    for (;;) {
        if (spawnError !== undefined) throw new Error(`${bin} could not start: ${spawnError.message}`);
        if (child.exitCode !== null) throw new Error(`${bin} exited (${child.exitCode}) before ${opts.readyUrl} answered:\n${output}`);
        if ((await statusOf(opts.readyUrl)) === (opts.readyStatus ?? 200)) break;
        if (Date.now() > deadline) {
            await stop();
            throw new Error(`${bin} did not answer ${opts.readyUrl} within ${budget} ms:\n${output}`);
        }
        await sleep(100);
    }
    return { pid: child.pid ?? 0, child, output: () => output, stop };
}

/**
 * The status of one GET on a fresh connection that is closed after it (fetch would keep it in its
 * pool: a session counter would see it), 0 when nothing answers within 1 s.
 */
export function statusOf(url: string): Promise<number> {
    return new Promise((resolve) => {
        const req = http.get(url, { agent: false, headers: { connection: "close" }, timeout: 1000 }, (res) => {
            res.resume();
            res.on("end", () => resolve(res.statusCode ?? 0));
        });
        req.on("timeout", () => req.destroy());
        req.on("error", () => resolve(0));
    });
}

/** One sample of a Prometheus text exposition: name, labels, value. */
export interface Sample {
    readonly name: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly value: number;
}

/** Parses the sample lines of a Prometheus text exposition (label values without escaped quotes). */
export function parseExposition(text: string): Sample[] {
    const out: Sample[] = [];
    for (const line of text.split("\n")) {
        if (line === "" || line.startsWith("#")) continue;
        const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ([^ ]+)(?: \d+)?$/.exec(line);
        if (!m) throw new Error(`not a sample line: ${line}`);
        const labels: Record<string, string> = {};
        for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)) labels[l[1]!] = l[2]!;
        out.push({ name: m[1]!, labels, value: Number(m[3]) });
    }
    return out;
}

/** Scrapes `url` and parses it. */
export async function scrape(url: string): Promise<Sample[]> {
    const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${url}: ${res.status} ${text}`);
    return parseExposition(text);
}

/** The value of the one sample named `name` whose labels include `labels`; undefined when none. */
export function sampleValue(samples: readonly Sample[], name: string, labels: Readonly<Record<string, string>> = {}): number | undefined {
    const hit = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
    if (hit.length > 1) throw new Error(`${name}${JSON.stringify(labels)} matches ${hit.length} samples`);
    return hit[0]?.value;
}

/**
 * Stops every one of them, in order, even when an earlier stop throws, then throws the first
 * error: an after() hook that stopped at its first failure would leave the rest (a listening stub
 * server keeps the test file's process alive for ever).
 */
export async function stopAll(...stops: ReadonlyArray<(() => Promise<unknown>) | undefined>): Promise<void> {
    const errors: unknown[] = [];
    for (const stop of stops) {
        try {
            await stop?.();
        } catch (e) {
            errors.push(e);
        }
    }
    if (errors.length > 0) throw errors[0];
}

export interface WatchedResult {
    readonly status: number | null;
    readonly stdout: string;
    readonly stderr: string;
}

/**
 * Runs `bin args` to its end, bounded by its progress: its output and the growth of the `watch`
 * files (a log it writes) count as progress; after `scaled(stallMs)` without any, its whole process
 * group is killed (SIGKILL) and this throws naming `what`, the silence and the last lines it printed.
 * `budgetMs` (scaled) bounds the whole run the same way, as a backstop.
 */
export async function runWatched(
    what: string,
    bin: string,
    args: readonly string[],
    opts: {
        readonly stallMs: number;
        readonly budgetMs: number;
        readonly watch?: readonly string[];
        readonly env?: NodeJS.ProcessEnv;
        readonly cwd?: string;
    },
): Promise<WatchedResult> {
    const child = spawn(bin, [...args], { stdio: ["ignore", "pipe", "pipe"], env: opts.env ?? process.env, cwd: opts.cwd, detached: true });
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    const size = (f: string) => {
        try {
            return fs.statSync(f).size;
        } catch {
            return 0;
        }
    };
    const mark = () => stdout.length + stderr.length + (opts.watch ?? []).reduce((n, f) => n + size(f), 0);
    const stall = scaled(opts.stallMs);
    const budget = scaled(opts.budgetMs);
    const started = Date.now();
    let last = mark();
    let lastAt = started;
    let killed: string | undefined;
    const closed = new Promise<number | null>((resolve, reject) => {
        child.once("error", reject);
        child.once("close", (code) => resolve(code));
    });
    const timer = setInterval(() => {
        const now = Date.now();
        const m = mark();
        if (m !== last) [last, lastAt] = [m, now];
        const why =
            now - lastAt > stall
                ? `no progress for ${Math.round((now - lastAt) / 1000)} s (bound ${stall} ms: no output${opts.watch?.length ? ` and no growth of ${opts.watch.join(", ")}` : ""})`
                : now - started > budget
                  ? `still running after ${budget} ms`
                  : undefined;
        if (why !== undefined && killed === undefined) {
            killed = why;
            try {
                process.kill(-(child.pid as number), "SIGKILL");
            } catch {
                // already gone
            }
        }
    }, 1000);
    try {
        const status = await closed;
        if (killed !== undefined) {
            const tail = (s: string) => s.trimEnd().split("\n").slice(-15).join("\n");
            const logs = (opts.watch ?? []).filter((f) => fs.existsSync(f)).map((f) => `${f}:\n${tail(fs.readFileSync(f, "utf8"))}`);
            throw new Error(`${what}: ${killed}; killed. Its last output:\n${tail(`${stdout}${stderr}`)}${logs.length ? `\n${logs.join("\n")}` : ""}`);
        }
        return { status, stdout, stderr };
    } finally {
        clearInterval(timer);
    }
}
