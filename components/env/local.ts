/**
 * Runs the env router (renderRouterConfig) with a real local nginx on 127.0.0.1, for tests and
 * local runs. Not used by the Pulumi program.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { lookup } from "node:dns/promises";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import {
    NGINX_MIN_VERSION_FOR_RESOLVE,
    ROUTER_HEALTH_PATH,
    renderResponderConfig,
    renderRouterConfig,
    splitHostPort,
    validateRouterSettings,
    versionAtLeast,
} from "./router";
import type { RouterSettings } from "./model";
import { CAPACITY_RESPONDER_SCRIPT_PATH, responderCommand } from "./responder";

/** Router settings for a local run; address, run dir and log files are chosen here. */
export type LocalRouterSettings = Omit<RouterSettings, "listenAddress" | "listenPort" | "runDir" | "logToFiles" | "capacityResponder"> & {
    /** Port on 127.0.0.1; a free one is picked when unset. @default undefined */
    readonly listenPort?: number;
    /** nginx binary. @default process.env.NGINX_BIN ?? "/usr/sbin/nginx", then PATH */
    readonly nginxBinary?: string;
    /** Rewrites the rendered config before it is written; only for tests proving a directive matters. @default undefined */
    readonly transformConfig?: (configText: string) => string;
    /** How long to wait for the router to answer, milliseconds. @default 10000 */
    readonly startTimeoutMs?: number;
    /** Run the capacity responder (capacity_responder.py) beside nginx, as deployed. @default true */
    readonly withCapacityResponder?: boolean;
    /** Python for the responder. @default "python3" */
    readonly pythonBinary?: string;
    /** Port on 127.0.0.1 where the responder serves GET /metrics (its --metrics-listen). @default undefined (no metrics) */
    readonly responderMetricsPort?: number;
};

/** A running local router. */
export interface LocalRouter {
    /** `http://127.0.0.1:<port>`. */
    readonly url: string;
    /** `ws://127.0.0.1:<port>/ws`. */
    readonly wsUrl: string;
    /** Port on 127.0.0.1. */
    readonly port: number;
    /** The nginx.conf nginx runs with. */
    readonly configText: string;
    /** Temp directory holding config, pid, temp files and logs; removed by stop(). */
    readonly runDir: string;
    /** nginx version, e.g. "1.22.1". */
    readonly nginxVersion: string;
    /** Master pid. */
    readonly pid: number;
    /** The capacity responder's process (undefined when capacityResponder is false). */
    readonly responder?: { readonly pid: number; readonly address: string; output(): string; kill(): void };
    /** Current worker pids (children of the master). */
    workerPids(): number[];
    /** Contents of error.log so far. */
    errorLog(): string;
    /** Contents of access.log so far. */
    accessLog(): string;
    /** Stops nginx (TERM, then KILL), checks master and workers are gone, removes runDir; safe to call twice. */
    stop(): Promise<void>;
}

const INSTALL_HINT = "apt-get install -y nginx-light";

/** Finds the nginx binary or throws with the install command. */
export function findNginx(explicit?: string): string {
    // An explicit binary is used or refused, never silently swapped for another nginx.
    if (explicit !== undefined) {
        try {
            fs.accessSync(explicit, fs.constants.X_OK);
            return explicit;
        } catch {
            throw new Error(`nginx not found at ${explicit} (nginxBinary): install it with "${INSTALL_HINT}" or fix the path`);
        }
    }
    const candidates = [process.env.NGINX_BIN, "/usr/sbin/nginx", ...(process.env.PATH ?? "").split(":").map((d) => path.join(d, "nginx"))];
    for (const c of candidates) {
        if (c === undefined || c === "") continue;
        try {
            fs.accessSync(c, fs.constants.X_OK);
            return c;
        } catch {
            // Not here; try the next candidate.
        }
    }
    throw new Error(`nginx not found (looked at NGINX_BIN, /usr/sbin/nginx and PATH): install it with "${INSTALL_HINT}"`);
}

/** Version of an nginx binary, e.g. "1.22.1". */
export function nginxVersion(binary: string): string {
    const r = spawnSync(binary, ["-v"], { encoding: "utf8", timeout: 10_000 });
    const m = /nginx\/(\d+(?:\.\d+)*)/.exec(`${r.stderr ?? ""}${r.stdout ?? ""}`);
    if (m === null) throw new Error(`could not read the version of ${binary}: ${r.stderr ?? r.error?.message ?? ""}`);
    return m[1] ?? "";
}

async function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
        const srv = net.createServer();
        srv.once("error", reject);
        srv.listen(0, "127.0.0.1", () => {
            const port = (srv.address() as net.AddressInfo).port;
            srv.close(() => resolve(port));
        });
    });
}

function sleep(ms: number): Promise<void> {
    return new Promise((r) => setTimeout(r, ms));
}

function readOr(file: string): string {
    try {
        return fs.readFileSync(file, "utf8");
    } catch {
        return "";
    }
}

/** True when pid is gone or a zombie (exited, waiting to be reaped by init). */
function processGone(pid: number): boolean {
    try {
        process.kill(pid, 0);
    } catch {
        return true;
    }
    const stat = readOr(`/proc/${pid}/stat`);
    // Field 3 after "(comm)" is the state; Z = exited.
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return stat === "" || state === "Z" || state === "X";
}

function childrenOf(pid: number): number[] {
    return readOr(`/proc/${pid}/task/${pid}/children`)
        .trim()
        .split(/\s+/)
        .filter((x) => x !== "")
        .map(Number);
}

/** Each replica host must resolve to exactly one address: nginx caps every resolved address separately. */
async function checkSingleAddress(replicas: readonly string[]): Promise<void> {
    for (const r of replicas) {
        const hp = splitHostPort(r);
        if (hp === undefined || net.isIP(hp.host.replace(/^\[|\]$/g, "")) !== 0) continue;
        const addrs = await lookup(hp.host, { all: true });
        if (addrs.length !== 1) {
            throw new Error(
                `replica "${r}" resolves to ${addrs.length} addresses (${addrs.map((a) => a.address).join(", ")}); nginx would allow k sessions to each: give one address per replica`,
            );
        }
    }
}

async function waitForRouter(url: string, child: ChildProcess, timeoutMs: number, logs: () => string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let lastError = "";
    while (Date.now() < deadline) {
        if (child.exitCode !== null || child.signalCode !== null) {
            throw new Error(`nginx exited (${child.exitCode ?? child.signalCode}) before answering:\n${logs()}`);
        }
        try {
            const res = await fetch(`${url}${ROUTER_HEALTH_PATH}`, { signal: AbortSignal.timeout(1000) });
            await res.text();
            if (res.status === 200) return;
            lastError = `status ${res.status}`;
        } catch (e) {
            lastError = (e as Error).message;
        }
        await sleep(50);
    }
    throw new Error(`nginx did not answer ${url}${ROUTER_HEALTH_PATH} within ${timeoutMs} ms (${lastError}):\n${logs()}`);
}

async function stopProcess(child: ChildProcess, workers: readonly number[]): Promise<void> {
    const pid = child.pid;
    if (pid === undefined) return;
    const exited = new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) resolve();
        else child.once("exit", () => resolve());
    });
    // TERM is nginx's fast shutdown: workers drop websocket sessions instead of waiting for them.
    child.kill("SIGTERM");
    const termed = await Promise.race([exited.then(() => true), sleep(5000).then(() => false)]);
    if (!termed) {
        child.kill("SIGKILL");
        for (const w of workers) {
            try {
                process.kill(w, "SIGKILL");
            } catch {
                // Already gone.
            }
        }
        await Promise.race([exited, sleep(2000)]);
    }
    const all = [pid, ...workers];
    for (let i = 0; i < 50 && !all.every(processGone); i++) await sleep(50);
    const alive = all.filter((p) => !processGone(p));
    if (alive.length > 0) throw new Error(`nginx processes still running after stop: ${alive.join(", ")}`);
}

interface LocalResponder {
    readonly pid: number;
    readonly address: string;
    output(): string;
    kill(): void;
    stop(): Promise<void>;
}

/** Starts capacity_responder.py on a free 127.0.0.1 port with its rendered config and waits for its health route. */
async function startResponder(
    s: Omit<RouterSettings, "listenAddress">,
    runDir: string,
    python: string | undefined,
    timeoutMs: number,
    metricsPort: number | undefined,
): Promise<LocalResponder> {
    const port = await freePort();
    const address = `127.0.0.1:${port}`;
    const configPath = path.join(runDir, "responder.json");
    fs.writeFileSync(configPath, renderResponderConfig(s));
    const [bin = "python3", ...argv] = responderCommand({
        python,
        scriptPath: CAPACITY_RESPONDER_SCRIPT_PATH,
        configPath,
        listen: address,
        metricsListen: metricsPort !== undefined ? `127.0.0.1:${metricsPort}` : undefined,
    });
    const child = spawn(bin, argv, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout?.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr?.on("data", (d: Buffer) => (output += d.toString()));
    const spawnError = new Promise<Error>((resolve) => child.once("error", resolve));
    const deadline = Date.now() + timeoutMs;
    for (;;) {
        if (child.exitCode !== null) throw new Error(`capacity responder exited (${child.exitCode}) before answering:\n${output}`);
        const failed = await Promise.race([spawnError, sleep(0).then(() => undefined)]);
        if (failed !== undefined) throw new Error(`capacity responder could not start (${bin}): ${failed.message}; install python3 or set pythonBinary`);
        try {
            const res = await fetch(`http://${address}/responder/health`, { signal: AbortSignal.timeout(1000) });
            await res.text();
            if (res.status === 200) break;
        } catch {
            // Not listening yet.
        }
        if (Date.now() > deadline) {
            child.kill("SIGKILL");
            throw new Error(`capacity responder did not answer on ${address} within ${timeoutMs} ms:\n${output}`);
        }
        await sleep(50);
    }
    const exited = new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve())));
    return {
        pid: child.pid ?? 0,
        address,
        output: () => output,
        kill: () => child.kill("SIGKILL"),
        stop: async () => {
            child.kill("SIGTERM");
            if (!(await Promise.race([exited.then(() => true), sleep(3000).then(() => false)]))) {
                child.kill("SIGKILL");
                await exited;
            }
        },
    };
}

/** Renders the router config, checks it with `nginx -t`, runs nginx on 127.0.0.1 and waits until it answers. */
export async function startLocalRouter(settings: LocalRouterSettings): Promise<LocalRouter> {
    const binary = findNginx(settings.nginxBinary);
    const version = nginxVersion(binary);
    if (settings.resolver !== undefined && !versionAtLeast(version, NGINX_MIN_VERSION_FOR_RESOLVE)) {
        throw new Error(`resolver needs "server ... resolve" (nginx >= ${NGINX_MIN_VERSION_FOR_RESOLVE}); ${binary} is ${version}: leave resolver unset`);
    }
    await checkSingleAddress(settings.replicas);

    const attempts = settings.listenPort === undefined ? 3 : 1;
    let lastError: unknown;
    for (let attempt = 0; attempt < attempts; attempt++) {
        const port = settings.listenPort ?? (await freePort());
        const runDir = fs.mkdtempSync(path.join(os.tmpdir(), "env-router-"));
        // As root nginx workers run as "nobody" and must reach the temp dirs.
        fs.chmodSync(runDir, 0o755);
        try {
            return await startIn(settings, binary, version, port, runDir);
        } catch (e) {
            fs.rmSync(runDir, { recursive: true, force: true });
            lastError = e;
            // Only a lost race for the picked port is worth another try.
            if (!/Address already in use/.test(String(e))) throw e;
        }
    }
    throw lastError;
}

async function startIn(settings: LocalRouterSettings, binary: string, version: string, port: number, runDir: string): Promise<LocalRouter> {
    const {
        nginxBinary: _b,
        transformConfig,
        startTimeoutMs,
        listenPort: _p,
        withCapacityResponder,
        pythonBinary,
        responderMetricsPort,
        ...routerFields
    } = settings;
    const responder =
        withCapacityResponder === false ? undefined : await startResponder(routerFields, runDir, pythonBinary, startTimeoutMs ?? 10_000, responderMetricsPort);
    const routerSettings: RouterSettings = {
        ...routerFields,
        listenAddress: "127.0.0.1",
        listenPort: port,
        runDir,
        logToFiles: true,
        capacityResponder: responder?.address,
    };
    const { configText, args, errorLogPath } = writeCheckedConfig(routerSettings, transformConfig, binary, runDir, responder);

    // daemon off is in the config, so the master stays our child.
    const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout?.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr?.on("data", (d: Buffer) => (output += d.toString()));
    const logs = (): string => `${output}${readOr(errorLogPath)}`;
    try {
        await waitForRouter(`http://127.0.0.1:${port}`, child, startTimeoutMs ?? 10_000, logs);
    } catch (e) {
        await stopProcess(child, child.pid !== undefined ? childrenOf(child.pid) : []).catch(() => undefined);
        responder?.kill();
        throw e;
    }
    return runningRouter({ child, port, configText, runDir, version, errorLogPath, responder });
}

/** Validates and renders the config into runDir and has `nginx -t` check it; returns nginx's arguments. */
function writeCheckedConfig(
    routerSettings: RouterSettings,
    transformConfig: ((configText: string) => string) | undefined,
    binary: string,
    runDir: string,
    responder: LocalResponder | undefined,
): { configText: string; args: string[]; errorLogPath: string } {
    const problems = validateRouterSettings(routerSettings);
    if (problems.length > 0) throw new Error(`invalid router settings:\n- ${problems.join("\n- ")}`);
    const rendered = renderRouterConfig(routerSettings);
    const configText = transformConfig !== undefined ? transformConfig(rendered) : rendered;
    const confPath = path.join(runDir, "nginx.conf");
    fs.writeFileSync(confPath, configText);
    const errorLogPath = path.join(runDir, "error.log");
    const args = ["-p", runDir, "-c", confPath, "-e", errorLogPath];
    const check = spawnSync(binary, ["-t", ...args], { encoding: "utf8", timeout: 15_000 });
    if (check.status !== 0) {
        responder?.kill();
        throw new Error(`nginx -t rejected the router config (${check.status ?? check.error?.message}):\n${check.stderr}${check.stdout}`);
    }
    return { configText, args, errorLogPath };
}

/** The handle of a router that answers: its addresses, logs, workers, and a stop that also ends the responder. */
function runningRouter(r: {
    readonly child: ChildProcess;
    readonly port: number;
    readonly configText: string;
    readonly runDir: string;
    readonly version: string;
    readonly errorLogPath: string;
    readonly responder: LocalResponder | undefined;
}): LocalRouter {
    const { child, port, configText, runDir, version, errorLogPath, responder } = r;
    const url = `http://127.0.0.1:${port}`;
    const pid = child.pid ?? 0;
    let workersSeen = childrenOf(pid);

    let stopped: Promise<void> | undefined;
    return {
        url,
        wsUrl: `ws://127.0.0.1:${port}/ws`,
        port,
        configText,
        runDir,
        nginxVersion: version,
        pid,
        responder: responder && { pid: responder.pid, address: responder.address, output: responder.output, kill: responder.kill },
        workerPids: () => {
            const now = childrenOf(pid);
            workersSeen = [...new Set([...workersSeen, ...now])];
            return now;
        },
        errorLog: () => readOr(errorLogPath),
        accessLog: () => readOr(path.join(runDir, "access.log")),
        stop: () => {
            stopped ??= (async () => {
                const workers = [...new Set([...workersSeen, ...childrenOf(pid)])];
                try {
                    await stopProcess(child, workers);
                    await responder?.stop();
                } finally {
                    fs.rmSync(runDir, { recursive: true, force: true });
                }
            })();
            return stopped;
        },
    };
}
