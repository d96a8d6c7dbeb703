// Run the VllmIngress nginx config locally (dev loop, tests, benchmarks) with the SAME renderNginxConfig as the
// deployed component; only the file paths differ (see localPaths). Needs an nginx binary (apt-get install -y nginx-light).
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import {
    renderKeysFile,
    renderNginxConfig,
    resolveProxySettings,
    validateKeys,
    type IngressKey,
    type ProxyPathField,
    type ProxySettings,
    type ResolvedProxySettings,
} from "./nginx";

/** Settings a local run may override; listen, upstream, TLS and all paths are set by startLocalIngress. */
export type LocalProxyOverrides = Omit<ProxySettings, ProxyPathField | "listenAddress" | "listenPort" | "upstream" | "tlsEnabled">;

/** Options of startLocalIngress. */
export interface LocalIngressOptions {
    /** "ipv4:port" to listen on; port 0 picks a free port. @default "127.0.0.1:0" */
    readonly listen?: string;
    /** vLLM (or stub) base URL "http://host:port" or "host:port". */
    readonly upstream: string;
    /** Keys to accept; exactly one of keys / keysFile. */
    readonly keys?: ReadonlyArray<IngressKey>;
    /** File with one "name key" per line ("#" comments); exactly one of keys / keysFile. */
    readonly keysFile?: string;
    /** PEM certificate + key to serve TLS with (copied into the run directory). @default undefined (plain HTTP) */
    readonly tls?: { readonly certFile: string; readonly keyFile: string };
    /** Other ProxySettings (allowCompletions, healthUnauthenticated, maxBodySize, rate limit, timeouts ...). @default {} */
    readonly settings?: LocalProxyOverrides;
    /** nginx binary. @default /usr/sbin/nginx, else "nginx" on PATH */
    readonly nginxBinary?: string;
    /** Milliseconds to wait for the port to accept connections. @default 10000 */
    readonly readyTimeoutMs?: number;
    /**
     * The command nginx's command line runs under, which must exec it in place (same pid): the deployed
     * pod's access-log rotation (rotatingAccessLogCommand in metrics.ts). @default none (nginx itself)
     */
    readonly launcher?: (nginxCommand: readonly string[]) => readonly string[];
    /** Copy nginx's stdout/stderr to this process's stderr (the CLI does; tests do not). @default false */
    readonly echoOutput?: boolean;
}

/** A running local nginx. */
export interface LocalIngress {
    /** Base URL, e.g. "http://127.0.0.1:18080". */
    readonly url: string;
    readonly host: string;
    readonly port: number;
    /** Private run directory (mode 0711) holding config, keys (0600), logs, pid and temp dirs; removed by stop(). */
    readonly dir: string;
    readonly configText: string;
    readonly configPath: string;
    readonly keysPath: string;
    readonly accessLogPath: string;
    readonly errorLogPath: string;
    /** The settings the config was rendered from (paths point into dir). */
    readonly settings: ResolvedProxySettings;
    /** nginx master pid. */
    readonly pid: number;
    /** Resolves with the exit code when the nginx master exits (for whatever reason). */
    readonly exited: Promise<number | null>;
    /** Rewrite the keys file (rotation), check it with nginx -t, reload (SIGHUP) and wait for the new workers. */
    setKeys(keys: ReadonlyArray<IngressKey>): Promise<void>;
    /** Stop nginx, verify master and workers are gone, delete dir. Idempotent. */
    stop(): Promise<void>;
}

/** Where each path setting points in a local run directory (the deploy paths are the PROXY_DEFAULTS). */
export function localPaths(dir: string): Pick<ResolvedProxySettings, ProxyPathField> {
    return {
        keysFile: path.join(dir, "keys.conf"),
        tlsCertFile: path.join(dir, "tls.crt"),
        tlsKeyFile: path.join(dir, "tls.key"),
        runtimeDir: dir,
        errorLog: path.join(dir, "error.log"),
        accessLog: path.join(dir, "access.log"),
    };
}

/** Locate nginx: /usr/sbin/nginx, then PATH; throws with the install hint otherwise. */
export function findNginx(): string {
    const candidates = [
        "/usr/sbin/nginx",
        ...(process.env.PATH ?? "")
            .split(path.delimiter)
            .filter((d) => d !== "")
            .map((d) => path.join(d, "nginx")),
    ];
    for (const c of candidates) {
        try {
            fs.accessSync(c, fs.constants.X_OK);
            return c;
        } catch {
            // try the next candidate
        }
    }
    throw new Error("nginx not found: apt-get install -y nginx-light");
}

/** Parse a keys text file: one "name key" per line, blank lines and "#" comments ignored. Never echoes a key. */
export function parseKeysText(text: string, source = "keys file"): IngressKey[] {
    const keys: IngressKey[] = [];
    const errs: string[] = [];
    text.split(/\r?\n/).forEach((raw, i) => {
        const line = raw.trim();
        if (line === "" || line.startsWith("#")) return;
        const parts = line.split(/\s+/);
        if (parts.length !== 2) errs.push(`${source}:${i + 1}: expected "name key" (two fields), got ${parts.length} field(s)`);
        else keys.push({ name: parts[0]!, key: parts[1]! });
    });
    if (errs.length === 0) errs.push(...validateKeys(keys).map((e) => `${source}: ${e}`));
    if (errs.length > 0) throw new Error(errs.join("\n"));
    return keys;
}

/** Parse "ipv4:port" (port 0 allowed = pick one). */
export function parseListen(s: string): { host: string; port: number } {
    const m = /^(\d{1,3}(?:\.\d{1,3}){3}):(\d{1,5})$/.exec(s);
    const port = m ? Number(m[2]) : NaN;
    if (!m || net.isIPv4(m[1]!) === false || !(port >= 0 && port <= 65535)) {
        throw new Error(`listen: "${s}" must be IPv4:port, e.g. 127.0.0.1:8080 (port 0 = any free port)`);
    }
    return { host: m[1]!, port };
}

/** Parse "http://host:port" or "host:port" into nginx's upstream "host:port". */
export function parseUpstream(s: string): string {
    const m = /^(?:http:\/\/)?([A-Za-z0-9.-]+):(\d{1,5})\/?$/.exec(s);
    const port = m ? Number(m[2]) : NaN;
    if (!m || !(port >= 1 && port <= 65535)) {
        throw new Error(`upstream: "${s}" must be http://host:port (no path; https upstreams are not supported), e.g. http://127.0.0.1:8000`);
    }
    return `${m[1]}:${port}`;
}

async function freePort(host: string): Promise<number> {
    return await new Promise((resolve, reject) => {
        const srv = net.createServer();
        srv.once("error", reject);
        srv.listen(0, host, () => {
            const addr = srv.address();
            const port = typeof addr === "object" && addr !== null ? addr.port : 0;
            srv.close(() => resolve(port));
        });
    });
}

function canConnect(host: string, port: number): Promise<boolean> {
    return new Promise((resolve) => {
        const sock = net.connect({ host, port });
        sock.setTimeout(500);
        sock.once("connect", () => {
            sock.destroy();
            resolve(true);
        });
        sock.once("timeout", () => {
            sock.destroy();
            resolve(false);
        });
        sock.once("error", () => resolve(false));
    });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Child pids of a process (scans /proc; Linux only). */
export function childPids(pid: number): number[] {
    const out: number[] = [];
    let entries: string[] = [];
    try {
        entries = fs.readdirSync("/proc");
    } catch {
        return out;
    }
    for (const e of entries) {
        if (!/^\d+$/.test(e)) continue;
        try {
            const stat = fs.readFileSync(`/proc/${e}/stat`, "utf8");
            // Field 4 (ppid) follows the parenthesised command name, which may itself contain spaces.
            const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
            if (Number(rest[1]) === pid) out.push(Number(e));
        } catch {
            // process vanished while scanning
        }
    }
    return out;
}

let pdeathsig: string | null | undefined;
/** util-linux setpriv when it supports --pdeathsig (Linux), else null. */
function pdeathsigWrapper(): string | null {
    if (pdeathsig !== undefined) return pdeathsig;
    pdeathsig = null;
    for (const c of ["/usr/bin/setpriv", "/bin/setpriv"]) {
        if (!fs.existsSync(c)) continue;
        const r = spawnSync(c, ["--help"], { encoding: "utf8", timeout: 5000 });
        if (r.status === 0 && r.stdout.includes("--pdeathsig")) {
            pdeathsig = c;
            break;
        }
    }
    return pdeathsig;
}

/** The process exists and is not a zombie (a SIGKILLed worker whose master is gone stays one until init reaps it). */
function isAlive(pid: number): boolean {
    try {
        process.kill(pid, 0);
    } catch (e) {
        return (e as NodeJS.ErrnoException).code === "EPERM";
    }
    try {
        // /proc/<pid>/stat: "pid (comm) S ...": the state follows the last ')'.
        const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
        return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
    } catch {
        return process.platform !== "linux"; // gone between the two reads on Linux; no /proc elsewhere
    }
}

// Safety net: if this process exits without stop(), SIGTERM the nginx masters (they stop their workers) and drop the dirs.
const live = new Map<number, string>();
let exitHookInstalled = false;
function trackLive(pid: number, dir: string): void {
    live.set(pid, dir);
    if (exitHookInstalled) return;
    exitHookInstalled = true;
    process.on("exit", () => {
        for (const [p, d] of live) {
            try {
                process.kill(p, "SIGTERM");
            } catch {
                // already gone
            }
            fs.rmSync(d, { recursive: true, force: true });
        }
    });
}

function writePrivate(file: string, text: string): void {
    const tmp = `${file}.tmp`;
    fs.writeFileSync(tmp, text, { mode: 0o600 });
    fs.chmodSync(tmp, 0o600);
    fs.renameSync(tmp, file); // atomic: nginx never reads a half-written keys file
}

function nginxTest(bin: string, dir: string, configPath: string, errorLogPath: string): void {
    const r = spawnSync(bin, ["-t", "-q", "-p", `${dir}/`, "-e", errorLogPath, "-c", configPath], { encoding: "utf8", timeout: 15000 });
    if (r.status !== 0) {
        let log = "";
        try {
            log = fs.readFileSync(errorLogPath, "utf8");
        } catch {
            // no log written
        }
        throw new Error(`nginx -t failed (exit ${String(r.status)}):\n${r.stderr}${r.stdout}${log}`.trimEnd());
    }
}

/** The keys from exactly one of `keys` / `keysFile`, rendered (throws on bad keys before anything is created). */
function keysFileText(opts: LocalIngressOptions): string {
    if ((opts.keys === undefined) === (opts.keysFile === undefined)) throw new Error("startLocalIngress: pass exactly one of keys / keysFile");
    const keys = opts.keys ?? parseKeysText(fs.readFileSync(opts.keysFile!, "utf8"), opts.keysFile);
    return renderKeysFile(keys);
}

/** Writes the keys file (0600) and copies the TLS files into the run's dir. */
function writeFiles(paths: ReturnType<typeof localPaths>, keysText: string, tls: LocalIngressOptions["tls"]): void {
    writePrivate(paths.keysFile, keysText);
    if (tls) {
        fs.copyFileSync(tls.certFile, paths.tlsCertFile);
        fs.copyFileSync(tls.keyFile, paths.tlsKeyFile);
        fs.chmodSync(paths.tlsKeyFile, 0o600);
    }
}

/** A started nginx master: its output's tail and its exit code (undefined while it runs), updated as they come. */
interface RunningNginx {
    readonly child: ChildProcess;
    readonly exited: Promise<number | null>;
    output: string;
    exitCode: number | null | undefined;
}

/** Starts nginx in the foreground under setpriv --pdeathsig where there is one, collecting its output. */
function launchNginx(bin: string, nginxArgs: readonly string[], opts: LocalIngressOptions): RunningNginx {
    // setpriv --pdeathsig execs nginx in place (same pid) and makes the kernel SIGTERM it if this process dies without stop().
    const guard = pdeathsigWrapper();
    const [first, ...rest] = opts.launcher?.([bin, ...nginxArgs]) ?? [bin, ...nginxArgs];
    const child: ChildProcess = spawn(guard ?? first!, guard ? ["--pdeathsig", "TERM", "--", first!, ...rest] : rest, {
        stdio: ["ignore", "pipe", "pipe"],
    });
    const run = { child, output: "", exitCode: undefined } as {
        child: ChildProcess;
        exited: Promise<number | null>;
        output: string;
        exitCode: number | null | undefined;
    };
    const collect = (b: Buffer) => {
        if (opts.echoOutput === true) process.stderr.write(b);
        run.output = (run.output + b.toString("utf8")).slice(-16384);
    };
    child.stdout!.on("data", collect);
    child.stderr!.on("data", collect);
    run.exited = new Promise<number | null>((resolve) => {
        child.once("exit", (code, signal) => {
            run.exitCode = code ?? (signal !== null ? 128 : null);
            live.delete(child.pid ?? -1);
            resolve(run.exitCode);
        });
        child.once("error", (err) => {
            run.output += String(err);
            run.exitCode = -1;
            resolve(-1);
        });
    });
    return run;
}

/** stop(), once: SIGTERM the master (SIGKILL after 5 s), kill the workers left, drop the dir; throws if any survives. */
function stopper(run: RunningNginx, pid: number, cleanupDir: () => void): () => Promise<void> {
    let stopped: Promise<void> | undefined;
    return (): Promise<void> => {
        stopped ??= (async () => {
            const workers = childPids(pid);
            if (run.exitCode === undefined) {
                run.child.kill("SIGTERM"); // fast shutdown: master stops its workers
                const t = await Promise.race([run.exited.then(() => "exit"), sleep(5000).then(() => "timeout")]);
                if (t === "timeout") {
                    run.child.kill("SIGKILL");
                    await Promise.race([run.exited, sleep(2000)]);
                }
            }
            for (let i = 0; i < 40 && workers.some(isAlive); i++) await sleep(50);
            for (const w of workers.filter(isAlive)) process.kill(w, "SIGKILL");
            // SIGKILL is delivered at once but the exit is not: wait, by progress, for the kernel to finish it.
            for (let i = 0; i < 40 && [pid, ...workers].some(isAlive); i++) await sleep(50);
            live.delete(pid);
            cleanupDir();
            const survivors = [pid, ...workers].filter(isAlive);
            if (survivors.length > 0) throw new Error(`nginx processes still alive after stop(): ${survivors.join(", ")}`);
        })();
        return stopped;
    };
}

/** Waits until the port accepts connections; stops nginx and throws with its output if it exits or the time runs out. */
async function waitReady(
    run: RunningNginx,
    host: string,
    port: number,
    readyTimeoutMs: number | undefined,
    stop: () => Promise<void>,
    errorLogTail: () => string,
) {
    const deadline = Date.now() + (readyTimeoutMs ?? 10000);
    for (;;) {
        if (run.exitCode !== undefined) {
            await stop();
            throw new Error(`nginx exited during startup (code ${String(run.exitCode)}):\n${run.output}${errorLogTail()}`.trimEnd());
        }
        if (await canConnect(host, port)) break;
        if (Date.now() > deadline) {
            await stop();
            throw new Error(
                `nginx did not accept connections on ${host}:${port} within ${readyTimeoutMs ?? 10000} ms:\n${run.output}${errorLogTail()}`.trimEnd(),
            );
        }
        await sleep(50);
    }
}

/** setKeys(): write the new keys file, nginx -t it (restoring the old one on failure), reload and wait for the new workers. */
function keySetter(
    bin: string,
    dir: string,
    configPath: string,
    paths: ReturnType<typeof localPaths>,
    run: RunningNginx,
    pid: number,
    errorLogTail: () => string,
): (next: ReadonlyArray<IngressKey>) => Promise<void> {
    return async (next) => {
        const text = renderKeysFile(next);
        if (run.exitCode !== undefined) throw new Error("setKeys: nginx is not running");
        const previous = fs.readFileSync(paths.keysFile, "utf8");
        writePrivate(paths.keysFile, text);
        try {
            nginxTest(bin, dir, configPath, paths.errorLog);
        } catch (e) {
            writePrivate(paths.keysFile, previous);
            throw e;
        }
        const oldWorkers = childPids(pid);
        process.kill(pid, "SIGHUP"); // reload: new workers read the new map, old ones finish in-flight requests and exit
        const until = Date.now() + 10000;
        for (;;) {
            const now = childPids(pid);
            if (now.length > 0 && now.every((w) => !oldWorkers.includes(w)) && oldWorkers.every((w) => !isAlive(w))) return;
            if (Date.now() > until) throw new Error(`nginx reload did not replace workers within 10 s:\n${errorLogTail()}`);
            await sleep(25);
        }
    };
}

/** Render the config into a fresh temp dir, nginx -t it, start nginx in the foreground and wait until the port accepts connections. */
export async function startLocalIngress(opts: LocalIngressOptions): Promise<LocalIngress> {
    const bin = opts.nginxBinary ?? findNginx();
    const { host, port: wantedPort } = parseListen(opts.listen ?? "127.0.0.1:0");
    const upstream = parseUpstream(opts.upstream);
    const keysText = keysFileText(opts);

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vllm-ingress-"));
    // 0711: when started as root, nginx workers run as "nobody" and must traverse dir to reach their temp dirs; keys stay 0600.
    fs.chmodSync(dir, 0o711);
    const cleanupDir = () => fs.rmSync(dir, { recursive: true, force: true });
    try {
        const paths = localPaths(dir);
        writeFiles(paths, keysText, opts.tls);
        const port = wantedPort === 0 ? await freePort(host) : wantedPort;
        const settings = resolveProxySettings({
            ...(opts.settings ?? {}),
            ...paths,
            listenAddress: host,
            listenPort: port,
            upstream,
            tlsEnabled: opts.tls !== undefined,
        });
        const configText = renderNginxConfig(settings);
        const configPath = path.join(dir, "nginx.conf");
        fs.writeFileSync(configPath, configText, { mode: 0o644 });
        nginxTest(bin, dir, configPath, paths.errorLog);

        const run = launchNginx(bin, ["-p", `${dir}/`, "-e", paths.errorLog, "-c", configPath, "-g", "daemon off;"], opts);
        if (run.child.pid === undefined) {
            await run.exited;
            throw new Error(`failed to start ${bin}: ${run.output}`);
        }
        const pid = run.child.pid;
        trackLive(pid, dir);
        const errorLogTail = () => {
            try {
                return fs.readFileSync(paths.errorLog, "utf8").slice(-4000);
            } catch {
                return "";
            }
        };
        const stop = stopper(run, pid, cleanupDir);
        await waitReady(run, host, port, opts.readyTimeoutMs, stop, errorLogTail);
        return {
            url: `${opts.tls ? "https" : "http"}://${host}:${port}`,
            host,
            port,
            dir,
            configText,
            configPath,
            keysPath: paths.keysFile,
            accessLogPath: paths.accessLog,
            errorLogPath: paths.errorLog,
            settings,
            pid,
            exited: run.exited,
            setKeys: keySetter(bin, dir, configPath, paths, run, pid, errorLogTail),
            stop,
        };
    } catch (e) {
        cleanupDir();
        throw e;
    }
}
