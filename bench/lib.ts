// Shared helpers of the benchmarks: child-process bookkeeping (everything started is stopped, also on failure and
// SIGINT), a bounded wrk runner, /proc CPU accounting, statistics and Markdown tables. Linux only.
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

export const BENCH_DIR = __dirname;
export const REPO_ROOT = path.resolve(__dirname, "..");
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------------------------
// Cleanup registry: every child process and every async resource (nginx via startLocalIngress, stub children).

const children = new Set<ChildProcess>();
const cleanups = new Map<number, () => Promise<void>>();
let nextCleanup = 0;

let shuttingDown = false;
/** After this (SIGINT, SIGTERM, hard limit) no new child is started. */
export function beginShutdown(): void {
    shuttingDown = true;
}
export function isShuttingDown(): boolean {
    return shuttingDown;
}

/** Spawn a child that cleanupAll() kills (by its pid) if it is still running. */
export function spawnTracked(cmd: string, args: readonly string[], opts: SpawnOptions = {}): ChildProcess {
    if (shuttingDown) throw new Error(`bench is shutting down: not starting ${cmd}`);
    const child = spawn(cmd, [...args], opts);
    children.add(child);
    child.once("exit", () => children.delete(child));
    child.once("error", () => children.delete(child));
    return child;
}

/** Register an async cleanup (e.g. LocalIngress.stop); returns a function that unregisters it. */
export function onCleanup(fn: () => Promise<void>): () => void {
    const id = nextCleanup++;
    cleanups.set(id, fn);
    return () => cleanups.delete(id);
}

function alive(child: ChildProcess): boolean {
    return child.exitCode === null && child.signalCode === null;
}

/** Stop everything still running: registered cleanups first (nginx stop verifies its workers), then children. */
export async function cleanupAll(): Promise<void> {
    const fns = [...cleanups.values()].reverse();
    cleanups.clear();
    for (const fn of fns) {
        try {
            await Promise.race([fn(), sleep(10000)]);
        } catch (e) {
            process.stderr.write(`bench: cleanup failed: ${(e as Error).message}\n`);
        }
    }
    const left = [...children].filter(alive);
    for (const c of left) c.kill("SIGTERM");
    for (let i = 0; i < 40 && left.some(alive); i++) await sleep(50);
    for (const c of left.filter(alive)) c.kill("SIGKILL");
}

/** Kill a child if it is still running after `ms` (bounds every external command). */
export function killAfter(child: ChildProcess, ms: number): () => void {
    const t = setTimeout(() => {
        if (alive(child)) child.kill("SIGKILL");
    }, ms);
    t.unref();
    return () => clearTimeout(t);
}

/** Runs a tracked child to its end (killed after `timeoutMs`), collecting stdout and stderr. */
export async function runCollected(
    cmd: string,
    args: readonly string[],
    opts: SpawnOptions,
    timeoutMs: number,
): Promise<{ code: number | null; out: string; err: string }> {
    const child = spawnTracked(cmd, args, { ...opts, stdio: ["ignore", "pipe", "pipe"] });
    const disarm = killAfter(child, timeoutMs);
    let out = "";
    let err = "";
    child.stdout!.on("data", (b: Buffer) => (out += b.toString("utf8")));
    child.stderr!.on("data", (b: Buffer) => (err += b.toString("utf8")));
    const code = await new Promise<number | null>((resolve) => {
        child.once("exit", (c) => resolve(c));
        child.once("error", () => resolve(-1));
    });
    disarm();
    return { code, out, err };
}

// ---------------------------------------------------------------------------------------------------------------
// wrk

/** What bench/wrk/*.lua print in done() (one line "BENCH_JSON {...}"). Latencies in microseconds. */
export interface WrkResult {
    readonly requests: number;
    readonly durationUs: number;
    readonly bytes: number;
    readonly connectErrors: number;
    readonly readErrors: number;
    readonly writeErrors: number;
    /** Responses with status > 399 (wrk's "Non-2xx or 3xx responses"). */
    readonly statusErrors: number;
    readonly timeouts: number;
    readonly p50Us: number;
    readonly p90Us: number;
    readonly p99Us: number;
    readonly meanUs: number;
    readonly maxUs: number;
    /** Only from wrong-key.lua: responses with status 401, and with any other status. */
    readonly status401?: number;
    readonly statusOther?: number;
    /** Requests per second. */
    readonly rps: number;
}

export interface WrkOptions {
    readonly url: string;
    readonly script: string;
    readonly connections: number;
    readonly threads?: number;
    readonly durationSeconds: number;
    /** Passed to the Lua script as BENCH_KEYS (space separated), never on the command line. */
    readonly keys: readonly string[];
    readonly timeoutSeconds?: number;
}

/** Run wrk once, bounded by -d and by a hard kill at duration + 20 s. */
export async function runWrk(o: WrkOptions): Promise<WrkResult> {
    const args = [
        "-t",
        String(o.threads ?? 2),
        "-c",
        String(o.connections),
        "-d",
        `${o.durationSeconds}s`,
        "--timeout",
        `${o.timeoutSeconds ?? 5}s`,
        "--latency",
        "-s",
        o.script,
        o.url,
    ];
    const { code, out, err } = await runCollected("wrk", args, { env: { ...process.env, BENCH_KEYS: o.keys.join(" ") } }, (o.durationSeconds + 20) * 1000);
    const line = out.split("\n").find((l) => l.startsWith("BENCH_JSON "));
    if (code !== 0 || line === undefined) throw new Error(`wrk ${args.join(" ")} failed (exit ${String(code)}):\n${out}${err}`);
    const j = JSON.parse(line.slice("BENCH_JSON ".length)) as Record<string, number>;
    const r: WrkResult = {
        requests: j.requests!,
        durationUs: j.duration_us!,
        bytes: j.bytes!,
        connectErrors: j.connect_errors!,
        readErrors: j.read_errors!,
        writeErrors: j.write_errors!,
        statusErrors: j.status_errors!,
        timeouts: j.timeouts!,
        p50Us: j.p50_us!,
        p90Us: j.p90_us!,
        p99Us: j.p99_us!,
        meanUs: j.mean_us!,
        maxUs: j.max_us!,
        ...(j.status_401 !== undefined ? { status401: j.status_401, statusOther: j.status_other } : {}),
        rps: j.requests! / (j.duration_us! / 1e6),
    };
    return r;
}

/** Transport problems of a wrk run (all should be 0). */
export function wrkSocketErrors(r: WrkResult): number {
    return r.connectErrors + r.readErrors + r.writeErrors + r.timeouts;
}

// ---------------------------------------------------------------------------------------------------------------
// /proc CPU accounting

export const CLK_TCK = (() => {
    const r = spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8", timeout: 5000 });
    const n = Number(r.stdout?.trim());
    return Number.isFinite(n) && n > 0 ? n : 100;
})();

/** utime + stime of one process in clock ticks (0 when it is gone). */
export function cpuTicks(pid: number): number {
    try {
        const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
        const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        // rest[0] is field 3 (state): utime is field 14, stime field 15.
        return Number(rest[11]) + Number(rest[12]);
    } catch {
        return 0;
    }
}

/** Sum of utime + stime in seconds over the given pids. */
export function cpuSeconds(pids: readonly number[]): number {
    return pids.reduce((s, p) => s + cpuTicks(p), 0) / CLK_TCK;
}

// ---------------------------------------------------------------------------------------------------------------
// Statistics and formatting

export function quantile(values: readonly number[], q: number): number {
    if (values.length === 0) return NaN;
    const s = [...values].sort((a, b) => a - b);
    const idx = Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1));
    return s[idx]!;
}

export const median = (values: readonly number[]) => quantile(values, 0.5);
export const mean = (values: readonly number[]) => values.reduce((a, b) => a + b, 0) / values.length;

export function fmt(n: number, digits = 2): string {
    if (!Number.isFinite(n)) return "n/a";
    return n.toFixed(digits);
}

export function table(header: readonly string[], rows: ReadonlyArray<ReadonlyArray<string>>): string {
    const line = (cells: readonly string[]) => `| ${cells.join(" | ")} |`;
    return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

/** A target check printed as met/missed with the margin. */
export interface TargetCheck {
    readonly name: string;
    readonly met: boolean;
    /** e.g. "0.985 >= 0.97 (+0.015)". */
    readonly detail: string;
}

/** value must be >= target (higher is better). */
export function atLeast(name: string, value: number, target: number, unit = "", digits = 3): TargetCheck {
    const d = value - target;
    return {
        name,
        met: value >= target,
        detail: `${fmt(value, digits)}${unit} vs target >= ${fmt(target, digits)}${unit} (${d >= 0 ? `${fmt(d, digits)}${unit} to spare` : `short by ${fmt(-d, digits)}${unit}`})`,
    };
}

/** value must be <= target (lower is better). */
export function atMost(name: string, value: number, target: number, unit = "", digits = 2): TargetCheck {
    const d = value - target;
    return {
        name,
        met: value <= target,
        detail: `${fmt(value, digits)}${unit} vs target <= ${fmt(target, digits)}${unit} (${d > 0 ? `over by ${fmt(d, digits)}${unit}` : `${fmt(-d, digits)}${unit} to spare`})`,
    };
}

export function checkLine(c: TargetCheck): string {
    return `- **${c.met ? "met" : "MISSED"}**: ${c.name}: ${c.detail}`;
}

// ---------------------------------------------------------------------------------------------------------------
// Machine

export interface MachineInfo {
    readonly cpuModel: string;
    readonly cores: number;
    readonly memoryGiB: number;
    readonly kernel: string;
    readonly node: string;
    readonly nginx: string;
    readonly wrk: string;
    readonly openssl: string;
}

function firstLine(cmd: string, args: string[]): string {
    const r = spawnSync(cmd, args, { encoding: "utf8", timeout: 5000 });
    const text = `${r.stdout ?? ""}${r.stderr ?? ""}`.trim();
    return text.split("\n")[0]?.trim() || "unknown";
}

export function machineInfo(): MachineInfo {
    let cpuModel = os.cpus()[0]?.model ?? "unknown";
    try {
        const m = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync("/proc/cpuinfo", "utf8"));
        if (m) cpuModel = m[1]!.trim();
    } catch {
        // keep os.cpus()
    }
    return {
        cpuModel,
        cores: os.cpus().length,
        memoryGiB: os.totalmem() / 2 ** 30,
        kernel: `${os.type()} ${os.release()}`,
        node: process.version,
        nginx: firstLine("nginx", ["-v"]).replace(/^nginx version:\s*/, ""),
        wrk: firstLine("wrk", ["-v"]).replace(/\s+Copyright.*$/, ""),
        openssl: firstLine("openssl", ["version"]),
    };
}

// ---------------------------------------------------------------------------------------------------------------
// Other load on the machine: CPU the whole machine used minus CPU of this process tree, over a window.

/** Busy CPU seconds of the whole machine since boot (/proc/stat: user nice system irq softirq steal). */
export function machineBusySeconds(): number {
    try {
        const line = fs.readFileSync("/proc/stat", "utf8").split("\n")[0]!;
        const v = line.trim().split(/\s+/).slice(1).map(Number);
        // user nice system idle iowait irq softirq steal ...
        const busy = (v[0] ?? 0) + (v[1] ?? 0) + (v[2] ?? 0) + (v[5] ?? 0) + (v[6] ?? 0) + (v[7] ?? 0);
        return busy / CLK_TCK;
    } catch {
        return NaN;
    }
}

/** CPU seconds of this process plus its children that have exited and been reaped (wrk, plan children, ...). */
export function selfAndReapedSeconds(): number {
    try {
        const stat = fs.readFileSync("/proc/self/stat", "utf8");
        const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        // utime 14, stime 15, cutime 16, cstime 17 (rest[0] is field 3)
        return (Number(rest[11]) + Number(rest[12]) + Number(rest[13]) + Number(rest[14])) / CLK_TCK;
    } catch {
        return NaN;
    }
}

export interface CpuWindow {
    readonly wallSeconds: number;
    /** Cores the rest of the machine (processes this run did not start) kept busy on average. */
    readonly foreignCores: number;
    /** Cores the whole machine kept busy on average (this run + others); near the core count = CPU-bound. */
    readonly busyCores: number;
}

/**
 * Start a window; the returned function ends it. `livePids` are this run's children still running at the end of the
 * window (nginx, stub); children that exit inside the window (wrk) are counted through this process's cutime/cstime.
 */
export function cpuWindow(livePids: () => readonly number[]): () => CpuWindow {
    const t0 = process.hrtime.bigint();
    const busy0 = machineBusySeconds();
    const self0 = selfAndReapedSeconds();
    const pids0 = livePids();
    const live0 = cpuSeconds(pids0);
    return () => {
        const wallSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
        const live1 = cpuSeconds(pids0);
        const own = selfAndReapedSeconds() - self0 + (live1 - live0);
        const busy = machineBusySeconds() - busy0;
        return { wallSeconds, foreignCores: Math.max(0, (busy - own) / wallSeconds), busyCores: busy / wallSeconds };
    };
}
