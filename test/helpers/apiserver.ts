// A real Kubernetes API server for tests (in the spirit of controller-runtime's
// envtest): etcd + kube-apiserver v1.36.3 built from Go modules by
// test/apiserver/build.sh, with the agent-sandbox and Gateway API CRDs
// installed. See test/apiserver/README.md for what this does and does not prove.
import { spawn, type ChildProcess } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as fsp from "node:fs/promises";
import * as https from "node:https";
import * as http from "node:http";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { parseAllDocuments } from "yaml";
import { freePort } from "./http";
import { scaled, scaledCount, scaledSeconds } from "./waits";

export const K8S_VERSION = "v1.36.3";

const REPO_ROOT = path.resolve(__dirname, "..", "..");
const BUILD_SCRIPT = path.join(REPO_ROOT, "test", "apiserver", "build.sh");

/** Where build.sh puts the binaries and CRDs (same rule as build.sh). */
export function fixtureCacheDir(): string {
    if (process.env.AGENT_RL_K8S_CACHE_DIR) return process.env.AGENT_RL_K8S_CACHE_DIR;
    const cacheHome = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
    return path.join(cacheHome, "agent-rl-infra", `k8s-${K8S_VERSION}`);
}

export interface CommandResult {
    code: number;
    stdout: string;
    stderr: string;
}

export interface ApiServer {
    /** Path of a kubeconfig (cluster-admin via a bearer token in group system:masters). */
    kubeconfig: string;
    /** https://127.0.0.1:<port> */
    url: string;
    /** Bearer token of the admin user (random per run). */
    token: string;
    /** PEM file of the CA that signed the serving certificate. */
    caFile: string;
    /** Path of the kubectl v1.36.3 binary. */
    kubectlPath: string;
    /** Runs `kubectl --kubeconfig <kubeconfig> ...args`; never throws on a non-zero exit. */
    kubectl(args: string[], input?: string): Promise<CommandResult>;
    /** Like kubectl() but throws (with stderr) on a non-zero exit. */
    kubectlOk(args: string[], input?: string): Promise<string>;
    /** Kills every process started, removes the temp dir, and verifies nothing is left. */
    stop(): Promise<void>;
    /** Process ids of etcd and kube-apiserver (each is its own process-group leader). */
    pids: number[];
    /** TCP ports the fixture listens on. */
    ports: number[];
    /** The fixture's temp dir (removed by stop()): logs, certificates, kubeconfig. */
    dir: string;
    /** The PEM files behind the API server: its CA (and key) and the service-account key pair. */
    files: { caFile: string; caKeyFile: string; saKeyFile: string; saPubFile: string };
    /**
     * Starts another server process under the fixture's care (own process group, log file
     * `<dir>/<name>.log`, killed by stop() before the API server, and by the exit handlers and
     * the watchdog); `ports` are checked closed after stop(). For the cluster helper
     * (controller-manager, scheduler, kwok).
     */
    startProcess(name: string, cmd: string, args: string[], opts?: { env?: NodeJS.ProcessEnv; ports?: number[] }): ChildProcess;
    /** The last lines of a process's log (`etcd`, `kube-apiserver`, or a name given to startProcess). */
    logTail(name: string, lines?: number): string;
}

export interface StartOptions {
    /** Install the CRDs from the cache dir (default true). */
    installCrds?: boolean;
    /** Extra kube-apiserver flags. */
    apiServerArgs?: string[];
    /** Overall startup timeout in ms (default 180 s; a 2-core CI box needs ~15 s). */
    timeoutMs?: number;
}

// ---------------------------------------------------------------------------
// cleanup bookkeeping: synchronous kill on exit / SIGINT / SIGTERM

interface Live {
    pgids: number[];
    dir: string;
}
const live = new Set<Live>();
let handlersInstalled = false;

function killSync(l: Live): void {
    for (const pg of l.pgids) {
        try {
            process.kill(-pg, "SIGKILL");
        } catch {
            /* already gone */
        }
    }
    try {
        fs.rmSync(l.dir, { recursive: true, force: true });
    } catch {
        /* best effort */
    }
}

function onExit(): void {
    for (const l of live) killSync(l);
    live.clear();
}

function onSignal(signal: NodeJS.Signals): void {
    onExit();
    uninstallHandlers();
    // Re-raise so the process dies with the default behaviour for the signal.
    process.kill(process.pid, signal);
}

function installHandlers(): void {
    if (handlersInstalled) return;
    handlersInstalled = true;
    process.on("exit", onExit);
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    process.on("SIGHUP", onSignal);
}

function uninstallHandlers(): void {
    if (!handlersInstalled) return;
    handlersInstalled = false;
    process.removeListener("exit", onExit);
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
    process.removeListener("SIGHUP", onSignal);
}

// ---------------------------------------------------------------------------
// small helpers

function sleep(ms: number): Promise<void> {
    return new Promise((r) => setTimeout(r, ms));
}

function run(
    cmd: string,
    args: string[],
    opts: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; inheritStderr?: boolean } = {},
): Promise<CommandResult> {
    return new Promise((resolve, reject) => {
        const child = spawn(cmd, args, { env: opts.env ?? process.env, stdio: ["pipe", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
        child.stderr.setEncoding("utf8").on("data", (d: string) => {
            stderr += d;
            if (opts.inheritStderr) process.stderr.write(d);
        });
        // A budget for a command that makes progress: scaled by the machine's load (waits.ts).
        const timeoutMs = opts.timeoutMs ? scaled(opts.timeoutMs) : 0;
        const timer = timeoutMs
            ? setTimeout(() => {
                  child.kill("SIGKILL");
                  stderr += `\n[timeout after ${timeoutMs} ms]`;
              }, timeoutMs)
            : undefined;
        child.on("error", (err) => {
            if (timer) clearTimeout(timer);
            reject(new Error(`cannot run ${cmd}: ${err.message}`));
        });
        child.on("close", (code, signal) => {
            if (timer) clearTimeout(timer);
            resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr });
        });
        child.stdin.on("error", () => {
            /* child may exit before reading stdin */
        });
        child.stdin.end(opts.input ?? "");
    });
}

async function distinctFreePorts(n: number): Promise<number[]> {
    const ports = new Set<number>();
    while (ports.size < n) ports.add(await freePort());
    return [...ports];
}

/** true if something accepts TCP connections on 127.0.0.1:port */
export function portOpen(port: number): Promise<boolean> {
    return new Promise((resolve) => {
        const sock = net.connect({ host: "127.0.0.1", port });
        sock.setTimeout(2000);
        sock.once("connect", () => {
            sock.destroy();
            resolve(true);
        });
        sock.once("timeout", () => {
            sock.destroy();
            resolve(true); // something is there but not answering: treat as open
        });
        sock.once("error", () => resolve(false));
    });
}

/** Whether a process with this pid exists (EPERM: it does, owned by another user). */
export function pidAlive(pid: number): boolean {
    try {
        process.kill(pid, 0);
        return true;
    } catch (e) {
        return (e as NodeJS.ErrnoException).code === "EPERM";
    }
}

function httpGet(url: string, opts: https.RequestOptions = {}): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
        const mod = url.startsWith("https:") ? https : http;
        const req = mod.get(url, { ...opts, timeout: 5000 }, (res) => {
            let body = "";
            res.setEncoding("utf8");
            res.on("data", (d: string) => (body += d));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on("timeout", () => req.destroy(new Error("timeout")));
        req.on("error", reject);
    });
}

function tail(file: string, lines = 40): string {
    try {
        return fs.readFileSync(file, "utf8").split("\n").slice(-lines).join("\n");
    } catch {
        return "(no log)";
    }
}

// ---------------------------------------------------------------------------
// build

let buildPromise: Promise<string> | undefined;

/**
 * Runs test/apiserver/build.sh (a no-op taking milliseconds when the cache is
 * complete) and returns the cache dir. Throws loudly when the build fails.
 */
export function ensureBinaries(): Promise<string> {
    buildPromise ??= (async () => {
        const res = await run("bash", [BUILD_SCRIPT], { inheritStderr: true });
        if (res.code !== 0) {
            throw new Error(`test/apiserver/build.sh failed (exit ${res.code}):\n${res.stderr.split("\n").slice(-60).join("\n")}`);
        }
        const dir = fixtureCacheDir();
        for (const b of ["etcd", "kube-apiserver", "kubectl"]) {
            if (!fs.existsSync(path.join(dir, "bin", b))) throw new Error(`build.sh succeeded but ${dir}/bin/${b} is missing`);
        }
        return dir;
    })();
    return buildPromise;
}

// ---------------------------------------------------------------------------
// certificates and credentials

async function makeCredentials(
    dir: string,
): Promise<{ caFile: string; certFile: string; keyFile: string; saPub: string; saKey: string; tokenFile: string; token: string }> {
    const p = (f: string) => path.join(dir, f);
    const openssl = async (args: string[]) => {
        const r = await run("openssl", args);
        if (r.code !== 0) throw new Error(`openssl ${args.join(" ")} failed:\n${r.stderr}`);
    };
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    // keyUsage as RFC 5280 asks of a CA: Python 3.13's clients verify strictly (VERIFY_X509_STRICT) and refuse a CA without it.
    await openssl([
        "req",
        "-x509",
        ...ec,
        "-keyout",
        p("ca.key"),
        "-out",
        p("ca.crt"),
        "-days",
        "2",
        "-subj",
        "/CN=agent-rl-infra-test-ca",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    await openssl(["req", ...ec, "-keyout", p("apiserver.key"), "-out", p("apiserver.csr"), "-subj", "/CN=kube-apiserver"]);
    await fsp.writeFile(
        p("apiserver.ext"),
        [
            "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.0.0.1",
            "basicConstraints=CA:FALSE",
            "keyUsage=critical,digitalSignature,keyEncipherment",
            "extendedKeyUsage=serverAuth",
            "",
        ].join("\n"),
    );
    await openssl([
        "x509",
        "-req",
        "-in",
        p("apiserver.csr"),
        "-CA",
        p("ca.crt"),
        "-CAkey",
        p("ca.key"),
        "-CAcreateserial",
        "-out",
        p("apiserver.crt"),
        "-days",
        "2",
        "-extfile",
        p("apiserver.ext"),
    ]);

    const sa = generateKeyPairSync("rsa", {
        modulusLength: 2048,
        publicKeyEncoding: { type: "spki", format: "pem" },
        privateKeyEncoding: { type: "pkcs8", format: "pem" },
    });
    await fsp.writeFile(p("sa.pub"), sa.publicKey);
    await fsp.writeFile(p("sa.key"), sa.privateKey, { mode: 0o600 });

    const token = randomBytes(32).toString("hex");
    await fsp.writeFile(p("tokens.csv"), `${token},agent-rl-test-admin,agent-rl-test-admin,"system:masters"\n`, { mode: 0o600 });
    return {
        caFile: p("ca.crt"),
        certFile: p("apiserver.crt"),
        keyFile: p("apiserver.key"),
        saPub: p("sa.pub"),
        saKey: p("sa.key"),
        tokenFile: p("tokens.csv"),
        token,
    };
}

// ---------------------------------------------------------------------------
// the fixture

/**
 * Starts etcd + kube-apiserver on random loopback ports, installs the CRDs and
 * returns once they are Established. Always call stop() (e.g. in an `after`
 * hook); on process exit or SIGINT/SIGTERM everything is killed anyway, and a
 * watchdog kills the servers if this Node process dies without running hooks.
 */
export async function startApiServer(options: StartOptions = {}): Promise<ApiServer> {
    const timeoutMs = options.timeoutMs ?? 180_000;
    const deadline = Date.now() + scaled(timeoutMs);
    const cacheDir = await ensureBinaries();
    const bin = (b: string) => path.join(cacheDir, "bin", b);

    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), "agent-rl-apiserver-"));
    const entry: Live = { pgids: [], dir };
    live.add(entry);
    installHandlers();

    const children: ChildProcess[] = [];
    const exited = new Map<number, Promise<void>>();
    const [etcdClientPort, etcdPeerPort, apiPort] = await distinctFreePorts(3);
    const ports = [etcdClientPort, etcdPeerPort, apiPort];

    // Watchdog: if this Node process disappears without running exit handlers
    // (SIGKILL, OOM), kill the servers and remove the temp dir.
    const watchdog = spawn(
        "bash",
        [
            "-c",
            'parent=$1; dir=$2; while kill -0 "$parent" 2>/dev/null && [ -d "$dir" ]; do sleep 1; done; ' +
                'if [ -f "$dir/pgids" ]; then for pg in $(cat "$dir/pgids"); do kill -KILL -- "-$pg" 2>/dev/null; done; fi; rm -rf -- "$dir"',
            "watchdog",
            String(process.pid),
            dir,
        ],
        { detached: true, stdio: "ignore" },
    );
    watchdog.unref();
    if (watchdog.pid) entry.pgids.push(watchdog.pid);
    const watchdogExited = new Promise<void>((r) => watchdog.once("exit", () => r()));

    const launch = (name: string, cmd: string, args: string[], env?: NodeJS.ProcessEnv): ChildProcess => {
        const logFile = path.join(dir, `${name}.log`);
        const fd = fs.openSync(logFile, "a");
        // detached => own process group, so stop() can kill the whole group.
        const child = spawn(cmd, args, { detached: true, stdio: ["ignore", fd, fd], env: { ...process.env, KUBECONFIG: "", ...env } });
        fs.closeSync(fd);
        child.unref();
        if (!child.pid) throw new Error(`failed to start ${name}`);
        children.push(child);
        entry.pgids.push(child.pid);
        fs.writeFileSync(path.join(dir, "pgids"), `${entry.pgids.filter((p) => p !== watchdog.pid).join(" ")}\n`);
        exited.set(child.pid, new Promise<void>((r) => child.once("exit", () => r())));
        return child;
    };

    let stopped = false;
    const stop = async (): Promise<void> => {
        if (stopped) return;
        stopped = true;
        // kube-apiserver first, then etcd: SIGTERM to the process group, SIGKILL
        // after 15 s.
        for (const c of [...children].reverse()) {
            const done = exited.get(c.pid!)!;
            try {
                process.kill(-c.pid!, "SIGTERM");
            } catch {
                /* gone */
            }
            if (await Promise.race([done.then(() => false), sleep(15_000).then(() => true)])) {
                try {
                    process.kill(-c.pid!, "SIGKILL");
                } catch {
                    /* gone */
                }
                await Promise.race([done, sleep(10_000)]);
            }
        }
        // The watchdog notices the dir is gone within a second and exits; kill it
        // only if it does not.
        await fsp.rm(dir, { recursive: true, force: true });
        if (!(await Promise.race([watchdogExited.then(() => true), sleep(5_000).then(() => false)]))) {
            try {
                if (watchdog.pid) process.kill(-watchdog.pid, "SIGKILL");
            } catch {
                /* gone */
            }
            await Promise.race([watchdogExited, sleep(5_000)]);
        }
        live.delete(entry);
        if (live.size === 0) uninstallHandlers();

        // Verify: no process of ours alive, no port still open. Orphans (e.g. the
        // watchdog's `sleep`) may take a moment to be reaped by init: poll briefly.
        const check = async (): Promise<string[]> => {
            const problems: string[] = [];
            for (const pg of entry.pgids) {
                if (pidAlive(pg)) problems.push(`pid ${pg} is still alive`);
                else if (pidAlive(-pg)) problems.push(`process group ${pg} still has members`);
            }
            for (const port of ports) {
                if (await portOpen(port)) problems.push(`port ${port} is still open`);
            }
            return problems;
        };
        let problems = await check();
        for (let i = 0; i < scaledCount(50) && problems.length; i++) {
            await sleep(100);
            problems = await check();
        }
        if (fs.existsSync(dir)) problems.push(`${dir} still exists`);
        if (problems.length) throw new Error(`API server fixture did not clean up: ${problems.join("; ")}`);
    };

    const fail = async (msg: string): Promise<never> => {
        const logs = ["etcd", "kube-apiserver"].map((n) => `--- ${n}.log (tail) ---\n${tail(path.join(dir, `${n}.log`))}`).join("\n");
        await stop().catch(() => undefined);
        throw new Error(`${msg}\n${logs}`);
    };

    try {
        const creds = await makeCredentials(dir);

        // etcd
        const etcdUrl = `http://127.0.0.1:${etcdClientPort}`;
        const peerUrl = `http://127.0.0.1:${etcdPeerPort}`;
        const etcd = launch("etcd", bin("etcd"), [
            "--name=default",
            `--data-dir=${path.join(dir, "etcd-data")}`,
            `--listen-client-urls=${etcdUrl}`,
            `--advertise-client-urls=${etcdUrl}`,
            `--listen-peer-urls=${peerUrl}`,
            `--initial-advertise-peer-urls=${peerUrl}`,
            `--initial-cluster=default=${peerUrl}`,
            "--initial-cluster-state=new",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]);
        for (;;) {
            if (etcd.exitCode !== null || etcd.signalCode !== null) return await fail(`etcd exited early (code ${etcd.exitCode}, signal ${etcd.signalCode})`);
            if (Date.now() > deadline) return await fail("timed out waiting for etcd /health");
            const r = await httpGet(`${etcdUrl}/health`).catch(() => undefined);
            if (r?.status === 200 && r.body.includes('"true"')) break;
            await sleep(200);
        }

        // kube-apiserver
        const url = `https://127.0.0.1:${apiPort}`;
        const apiserver = launch("kube-apiserver", bin("kube-apiserver"), [
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            `--secure-port=${apiPort}`,
            `--cert-dir=${path.join(dir, "certs")}`,
            `--tls-cert-file=${creds.certFile}`,
            `--tls-private-key-file=${creds.keyFile}`,
            `--etcd-servers=${etcdUrl}`,
            `--token-auth-file=${creds.tokenFile}`,
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            `--service-account-key-file=${creds.saPub}`,
            `--service-account-signing-key-file=${creds.saKey}`,
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            // The "kubernetes" Service would get a loopback endpoint, which is invalid.
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            "--v=1",
            ...(options.apiServerArgs ?? []),
        ]);
        const auth = { ca: fs.readFileSync(creds.caFile), headers: { Authorization: `Bearer ${creds.token}` } };
        let last = "";
        for (;;) {
            if (apiserver.exitCode !== null || apiserver.signalCode !== null)
                return await fail(`kube-apiserver exited early (code ${apiserver.exitCode}, signal ${apiserver.signalCode})`);
            if (Date.now() > deadline) return await fail(`timed out waiting for kube-apiserver /readyz (last: ${last})`);
            const r = await httpGet(`${url}/readyz`, auth).catch((e: Error) => ({ status: 0, body: e.message }));
            if (r.status === 200) break;
            last = `${r.status} ${r.body.slice(0, 300)}`;
            await sleep(300);
        }

        // kubeconfig (JSON is valid YAML)
        const kubeconfig = path.join(dir, "kubeconfig");
        await fsp.writeFile(
            kubeconfig,
            JSON.stringify(
                {
                    apiVersion: "v1",
                    kind: "Config",
                    clusters: [{ name: "test", cluster: { server: url, "certificate-authority": creds.caFile } }],
                    users: [{ name: "admin", user: { token: creds.token } }],
                    contexts: [{ name: "test", context: { cluster: "test", user: "admin", namespace: "default" } }],
                    "current-context": "test",
                },
                null,
                2,
            ),
            { mode: 0o600 },
        );

        const kubectlPath = bin("kubectl");
        const kubectlEnv: NodeJS.ProcessEnv = { ...process.env, KUBECONFIG: kubeconfig };
        const kubectl = (args: string[], input?: string): Promise<CommandResult> =>
            run(kubectlPath, ["--kubeconfig", kubeconfig, "--cache-dir", path.join(dir, "kube-cache"), ...args], {
                input,
                env: kubectlEnv,
                timeoutMs: 300_000,
            });
        const kubectlOk = async (args: string[], input?: string): Promise<string> => {
            const r = await kubectl(args, input);
            if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} failed (exit ${r.code}):\n${r.stderr}${r.stdout}`);
            return r.stdout;
        };

        const startProcess = (name: string, cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; ports?: number[] } = {}): ChildProcess => {
            if (stopped) throw new Error(`cannot start ${name}: the fixture is stopped`);
            ports.push(...(opts.ports ?? []));
            return launch(name, cmd, args, opts.env);
        };
        const api: ApiServer = {
            kubeconfig,
            url,
            token: creds.token,
            caFile: creds.caFile,
            kubectlPath,
            kubectl,
            kubectlOk,
            stop,
            pids: children.map((c) => c.pid!),
            ports,
            dir,
            files: { caFile: creds.caFile, caKeyFile: path.join(dir, "ca.key"), saKeyFile: creds.saKey, saPubFile: creds.saPub },
            startProcess,
            logTail: (name: string, lines?: number) => tail(path.join(dir, `${name}.log`), lines),
        };

        if (options.installCrds ?? true) {
            const crdDir = path.join(cacheDir, "crds");
            await kubectlOk(["apply", "--server-side", "--field-manager=agent-rl-test-fixture", "-f", crdDir]);
            await kubectlOk(["wait", "--for=condition=Established", `--timeout=${scaledSeconds(120)}s`, "crd", "--all"]);
        }
        return api;
    } catch (e) {
        if (!stopped) await stop().catch(() => undefined);
        throw e;
    }
}

// ---------------------------------------------------------------------------
// server-side dry run of a directory of manifests

interface ManifestObject {
    file: string;
    apiVersion: string;
    kind: string;
    name: string;
    namespace?: string;
    doc: Record<string, unknown>;
}

/** Reads every *.yaml / *.yml / *.json file under dir (recursively), one or more objects each. */
export async function readManifests(dir: string): Promise<ManifestObject[]> {
    const out: ManifestObject[] = [];
    const walk = async (d: string): Promise<void> => {
        for (const ent of (await fsp.readdir(d, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
            const p = path.join(d, ent.name);
            if (ent.isDirectory()) await walk(p);
            else if (/\.(ya?ml|json)$/.test(ent.name)) {
                for (const doc of parseAllDocuments(await fsp.readFile(p, "utf8"))) {
                    if (doc.errors.length) throw new Error(`${p}: ${doc.errors.map((e) => e.message).join("; ")}`);
                    const obj = doc.toJS() as Record<string, unknown> | null;
                    if (!obj || typeof obj !== "object") continue;
                    const items = obj.kind === "List" && Array.isArray(obj.items) ? (obj.items as Record<string, unknown>[]) : [obj];
                    for (const it of items) {
                        const md = (it.metadata ?? {}) as { name?: string; namespace?: string };
                        out.push({
                            file: p,
                            apiVersion: String(it.apiVersion),
                            kind: String(it.kind),
                            name: String(md.name ?? ""),
                            namespace: md.namespace,
                            doc: it,
                        });
                    }
                }
            }
        }
    };
    await walk(dir);
    return out;
}

/** Kinds that serverDryRun() creates for real before dry-running the rest. */
const REAL_KINDS = new Set(["Namespace", "CustomResourceDefinition", "ServiceAccount"]);

/**
 * Validates a directory of planned manifests against the real API server:
 *  1. Namespaces, CustomResourceDefinitions and ServiceAccounts in the
 *     manifests are applied for real (later objects need them to exist: the
 *     NamespaceLifecycle and ServiceAccount admission plugins, CR kinds), and
 *     a `default` ServiceAccount is created in each namespace (the
 *     controller-manager, which would do that, does not run);
 *  2. everything is applied with `kubectl apply --server-side
 *     --dry-run=server --force-conflicts`, i.e. defaulting, schema and field
 *     validation (strict), CEL rules and built-in admission all run, but
 *     nothing is persisted.
 * Throws with the API server's own messages if any object is rejected.
 */
export async function serverDryRun(api: ApiServer, manifestsDir: string): Promise<{ objects: number; output: string }> {
    const objects = await readManifests(manifestsDir);
    if (objects.length === 0) throw new Error(`no manifests found in ${manifestsDir}`);
    const real = objects.filter((o) => REAL_KINDS.has(o.kind) && (o.apiVersion === "v1" || o.apiVersion.startsWith("apiextensions.k8s.io/")));
    const order = (k: string) => (k === "CustomResourceDefinition" ? 0 : k === "Namespace" ? 1 : 2);
    real.sort((a, b) => order(a.kind) - order(b.kind));
    const apply = (objs: ManifestObject[], extra: string[] = []) =>
        api.kubectl(
            ["apply", "--server-side", "--force-conflicts", "--field-manager=agent-rl-plan", ...extra, "-f", "-"],
            objs.map((o) => JSON.stringify(o.doc)).join("\n"),
        );

    const realErrors: string[] = [];
    for (const group of [real.filter((o) => o.kind !== "ServiceAccount"), real.filter((o) => o.kind === "ServiceAccount")]) {
        if (!group.length) continue;
        const r = await apply(group);
        if (r.code !== 0) realErrors.push(r.stderr.trim());
        if (group[0].kind !== "ServiceAccount") {
            if (group.some((o) => o.kind === "CustomResourceDefinition")) {
                await api.kubectl([
                    "wait",
                    "--for=condition=Established",
                    `--timeout=${scaledSeconds(60)}s`,
                    ...group.filter((o) => o.kind === "CustomResourceDefinition").map((o) => `crd/${o.name}`),
                ]);
            }
            const namespaces = new Set(objects.map((o) => o.namespace).filter((n): n is string => !!n));
            for (const o of group) if (o.kind === "Namespace") namespaces.add(o.name);
            const sas = [...namespaces].map((ns) => ({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "default", namespace: ns } }));
            if (sas.length) {
                // Namespaces not in the manifests fail here too, with a clear "namespaces ... not found".
                const r2 = await api.kubectl(
                    ["apply", "--server-side", "--field-manager=agent-rl-test-fixture", "-f", "-"],
                    sas.map((s) => JSON.stringify(s)).join("\n"),
                );
                if (r2.code !== 0) realErrors.push(r2.stderr.trim());
            }
        }
    }

    // Dry-run everything from the directory so kubectl names the files in errors.
    const r = await api.kubectl([
        "apply",
        "--server-side",
        "--dry-run=server",
        "--force-conflicts",
        "--field-manager=agent-rl-plan",
        "--recursive",
        "-f",
        manifestsDir,
    ]);
    if (r.code !== 0 || realErrors.length) {
        // kubectl's server-side-apply errors do not name the file: re-run the
        // failing run file by file so each message can be attributed.
        let details = r.stderr.trim();
        if (r.code !== 0) {
            const files = [...new Set(objects.map((o) => o.file))];
            const perFile: string[] = [];
            for (let i = 0; i < files.length; i += 4) {
                const results = await Promise.all(
                    files.slice(i, i + 4).map(async (f) => ({
                        f,
                        res: await api.kubectl(["apply", "--server-side", "--dry-run=server", "--force-conflicts", "--field-manager=agent-rl-plan", "-f", f]),
                    })),
                );
                for (const { f, res } of results) if (res.code !== 0) perFile.push(`${path.relative(manifestsDir, f)}: ${res.stderr.trim()}`);
            }
            if (perFile.length) details = perFile.join("\n");
        }
        throw new Error(`API server rejected manifests in ${manifestsDir}:\n${[...realErrors, details].filter(Boolean).join("\n")}`);
    }
    return { objects: objects.length, output: r.stdout };
}
