/**
 * A long-running program a test starts (mtail, nginx-prometheus-exporter, Prometheus, a session
 * counter): its output kept, a bounded wait for an HTTP route to answer, and a stop that ends it by
 * its own pid (TERM, then KILL after 3 s).
 */
import { spawn, type ChildProcess } from "node:child_process";
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
