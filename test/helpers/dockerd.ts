/**
 * A real dockerd for tests (Debian's docker.io), started by the test itself:
 * - in a network namespace of its own (`unshare --net`), so its bridges, its iptables rules and
 *   the ip_forward it turns on never touch the host's; nothing listens on TCP, only a unix socket;
 * - with its own data root, exec root, pid file and socket under a temp dir;
 * - images are imported from one static Go binary (test/dockerd/standin): no registry is reached.
 * `stop()` removes every container, stops the daemon (SIGKILL after a bounded wait), unmounts
 * what is left under the temp dir and deletes it. Every wait here is bounded.
 *
 * The Docker provider plugin cannot be built here, so tests create containers from the inputs
 * the program sends (recorded under the mocks) the way the provider does (`containerCreateBody`,
 * after terraform-provider-docker resource_docker_container_funcs.go) and read back what dockerd
 * stored, which is what the provider reads on the next `up`.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import type { TestContext } from "node:test";
import type { RecordedResource } from "../../scripts/lib/mockrun";
import { unwrapSecrets } from "./secrets";
import { scaled, scaledCount } from "./waits";

/** The stand-in image every test container runs (entrypoint: the stand-in binary). */
export const STANDIN_IMAGE = "agentrl-standin:test";
const STANDIN_SOURCE = path.resolve(__dirname, "..", "dockerd", "standin");
const PREREQUISITES = ["dockerd", "docker", "containerd", "runc", "unshare", "ip", "iptables", "go", "tar"];
/** dockerd looks this helper up on its PATH at start and only then registers its nvidia device driver (moby daemon/nvidia_linux.go). */
const NVIDIA_HOOK = "nvidia-container-runtime-hook";

export interface DockerdOptions {
    /**
     * Put a no-op `nvidia-container-runtime-hook` on the daemon's PATH: dockerd then registers its
     * nvidia device driver and turns GPU device requests into NVIDIA_VISIBLE_DEVICES for the hook,
     * as on a GPU host, and the hook does nothing. @default false
     */
    readonly fakeNvidiaHook?: boolean;
    /** Milliseconds to wait for the daemon to answer. @default 60000 */
    readonly startTimeoutMs?: number;
}

export interface CommandResult {
    readonly status: number;
    readonly stdout: string;
    readonly stderr: string;
}

export interface Dockerd {
    /** The daemon's unix socket. */
    readonly socket: string;
    /** dockerd's version (`docker version`). */
    readonly version: string;
    /** Runs the docker CLI against this daemon; throws on a non-zero exit unless `allowFail`. */
    docker(args: readonly string[], opts?: { readonly allowFail?: boolean; readonly timeoutMs?: number }): CommandResult;
    /** One Engine API call; the body is JSON (or a string when the daemon sent no JSON). */
    api(method: string, apiPath: string, body?: unknown): Promise<{ status: number; body: any }>;
    /** Builds (cached) and imports the stand-in image; returns its id. */
    importStandin(): string;
    /** Removes every container, stops the daemon, deletes the temp dir. */
    stop(): Promise<void>;
}

function which(bin: string): string | undefined {
    const dirs = [...(process.env.PATH ?? "").split(":"), "/usr/sbin", "/sbin", "/usr/local/sbin"];
    for (const d of dirs) {
        const p = path.join(d, bin);
        try {
            fs.accessSync(p, fs.constants.X_OK);
            return p;
        } catch {
            // not here
        }
    }
    return undefined;
}

/** Why dockerd cannot start here, or undefined. */
export function dockerdMissing(): string | undefined {
    if (process.getuid?.() !== 0) return "dockerd needs root";
    const missing = PREREQUISITES.filter((b) => which(b) === undefined);
    if (missing.length > 0)
        return `missing ${missing.join(", ")}: apt-get install -y docker.io (dockerd, containerd, runc, iptables) and Go for the stand-in image`;
    return undefined;
}

function run(cmd: string, args: readonly string[], opts: { input?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv; cwd?: string } = {}): CommandResult {
    const r = spawnSync(cmd, [...args], {
        encoding: "utf8",
        input: opts.input,
        timeout: scaled(opts.timeoutMs ?? 60_000),
        env: opts.env,
        cwd: opts.cwd,
        maxBuffer: 64 * 1024 * 1024,
    });
    return { status: r.status ?? (r.error ? 127 : 128), stdout: r.stdout ?? "", stderr: `${r.stderr ?? ""}${r.error ? String(r.error) : ""}` };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function apiCall(socket: string, method: string, apiPath: string, body?: unknown, timeoutMs = 60_000): Promise<{ status: number; body: any }> {
    return new Promise((resolve, reject) => {
        const payload = body === undefined ? undefined : JSON.stringify(body);
        const req = http.request(
            {
                socketPath: socket,
                method,
                path: apiPath,
                timeout: scaled(timeoutMs),
                headers: payload ? { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } : {},
            },
            (res) => {
                const parts: Buffer[] = [];
                res.on("data", (c: Buffer) => parts.push(c));
                res.on("end", () => {
                    const text = Buffer.concat(parts).toString("utf8");
                    let parsed: unknown = text;
                    try {
                        parsed = text ? JSON.parse(text) : undefined;
                    } catch {
                        // plain text (e.g. /_ping's "OK")
                    }
                    resolve({ status: res.statusCode ?? 0, body: parsed });
                });
            },
        );
        req.on("timeout", () => req.destroy(new Error(`${method} ${apiPath}: no answer in ${scaled(timeoutMs)} ms`)));
        req.on("error", reject);
        req.end(payload);
    });
}

/** The stand-in binary, built once per source version into the user's cache dir. */
function standinBinary(): string {
    const hash = createHash("sha256");
    for (const f of fs.readdirSync(STANDIN_SOURCE).sort()) hash.update(f).update(fs.readFileSync(path.join(STANDIN_SOURCE, f)));
    const cacheHome = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
    const dir = path.join(cacheHome, "agent-rl-infra", `dockerd-standin-${hash.digest("hex").slice(0, 12)}`);
    const bin = path.join(dir, "standin");
    if (fs.existsSync(bin)) return bin;
    fs.mkdirSync(dir, { recursive: true });
    const tmp = `${bin}.${process.pid}`;
    // Static (CGO off), no modules to download: it builds offline.
    const r = run("go", ["build", "-trimpath", "-ldflags", "-s -w", "-o", tmp, "."], {
        cwd: STANDIN_SOURCE,
        timeoutMs: 300_000,
        env: { ...process.env, CGO_ENABLED: "0", GOFLAGS: "-mod=mod", GOTOOLCHAIN: "local", GOPROXY: "off" },
    });
    if (r.status !== 0) throw new Error(`building the stand-in (go build in ${STANDIN_SOURCE}) failed:\n${r.stderr}${r.stdout}`);
    fs.renameSync(tmp, bin);
    return bin;
}

/** Mount points at or under `dir`, deepest first. */
function mountsUnder(dir: string): string[] {
    let text = "";
    try {
        text = fs.readFileSync("/proc/self/mountinfo", "utf8");
    } catch {
        return [];
    }
    return text
        .split("\n")
        .map((l) => l.split(" ")[4])
        .filter((m): m is string => m !== undefined && (m === dir || m.startsWith(`${dir}/`)))
        .sort((a, b) => b.length - a.length);
}

function tail(file: string, chars = 4000): string {
    try {
        return fs.readFileSync(file, "utf8").slice(-chars);
    } catch {
        return "";
    }
}

/** Starts dockerd; throws (with the daemon's log) when it does not answer in time. */
export async function startDockerd(opts: DockerdOptions = {}): Promise<Dockerd> {
    const missing = dockerdMissing();
    if (missing) throw new Error(missing);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-dockerd-"));
    const socket = path.join(dir, "docker.sock");
    const log = path.join(dir, "dockerd.log");
    const binDir = path.join(dir, "bin");
    fs.mkdirSync(binDir);
    if (opts.fakeNvidiaHook)
        fs.writeFileSync(path.join(binDir, NVIDIA_HOOK), "#!/bin/sh\n# no GPU here: accept the OCI state on stdin and do nothing\ncat >/dev/null\nexit 0\n", {
            mode: 0o755,
        });
    // The daemon's own network namespace: `lo` up, then exec dockerd (same pid as the spawned child).
    const daemon = [
        "dockerd",
        `--data-root=${dir}/data`,
        `--exec-root=${dir}/exec`,
        `--pidfile=${dir}/dockerd.pid`,
        `--host=unix://${socket}`,
        "--iptables=true",
        "--ip6tables=false",
        "--userland-proxy=false",
        "--log-level=warn",
    ].join(" ");
    const guard = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => fs.existsSync(p));
    const argv = ["unshare", "--net", "--", "sh", "-c", `ip link set lo up && exec ${daemon}`];
    const logFd = fs.openSync(log, "a");
    const child: ChildProcess = spawn(guard ?? argv[0], guard ? ["--pdeathsig", "KILL", "--", ...argv] : argv.slice(1), {
        detached: true,
        stdio: ["ignore", logFd, logFd],
        env: { ...process.env, PATH: `${binDir}:${process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin"}:/usr/sbin:/sbin` },
    });
    fs.closeSync(logFd);
    let exited: number | null | undefined;
    child.once("exit", (code, signal) => (exited = code ?? (signal ? 128 : null)));
    const killGroup = (signal: NodeJS.Signals) => {
        try {
            if (child.pid) process.kill(-child.pid, signal);
        } catch {
            // already gone
        }
    };
    const onExit = () => killGroup("SIGKILL");
    process.once("exit", onExit);
    const env = { ...process.env, DOCKER_HOST: `unix://${socket}`, DOCKER_CONFIG: path.join(dir, "cli") };

    let stopped = false;
    const stop = async () => {
        if (stopped) return;
        stopped = true;
        try {
            if (exited === undefined) {
                const list = await apiCall(socket, "GET", "/containers/json?all=1", undefined, 10_000).catch(() => ({ status: 0, body: [] }));
                for (const c of Array.isArray(list.body) ? list.body : [])
                    await apiCall(socket, "DELETE", `/containers/${c.Id}?force=1&v=1`, undefined, 30_000).catch(() => undefined);
                killGroup("SIGTERM");
                for (let i = 0; i < scaledCount(100) && exited === undefined; i++) await sleep(200);
                if (exited === undefined) killGroup("SIGKILL");
                for (let i = 0; i < scaledCount(25) && exited === undefined; i++) await sleep(200);
            }
        } finally {
            process.off("exit", onExit);
            for (const m of mountsUnder(dir)) run("umount", ["-l", m], { timeoutMs: 10_000 });
            fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
        }
    };

    const startBudget = scaled(opts.startTimeoutMs ?? 60_000);
    const deadline = Date.now() + startBudget;
    let ready = false;
    while (Date.now() < deadline && exited === undefined) {
        if (fs.existsSync(socket)) {
            const ping = await apiCall(socket, "GET", "/_ping", undefined, 2_000).catch(() => undefined);
            if (ping?.status === 200) {
                ready = true;
                break;
            }
        }
        await sleep(250);
    }
    if (!ready) {
        const why = exited !== undefined ? `dockerd exited (${String(exited)})` : `dockerd did not answer on ${socket} in ${startBudget} ms`;
        const daemonLog = tail(log);
        await stop();
        throw new Error(`${why}:\n${daemonLog}`);
    }

    const docker = (args: readonly string[], o: { allowFail?: boolean; timeoutMs?: number } = {}): CommandResult => {
        const r = run("docker", args, { env, timeoutMs: o.timeoutMs ?? 60_000 });
        if (r.status !== 0 && !o.allowFail) throw new Error(`docker ${args.join(" ")} exited ${r.status}:\n${r.stderr}${r.stdout}`);
        return r;
    };
    const version = docker(["version", "--format", "{{.Server.Version}}"]).stdout.trim();
    let imported: string | undefined;
    return {
        socket,
        version,
        docker,
        api: (method, apiPath, body) => apiCall(socket, method, apiPath, body),
        importStandin() {
            if (imported) return imported;
            const bin = standinBinary();
            // One file, the binary, as the image's root filesystem.
            const r = run("sh", ["-c", `tar -C "${path.dirname(bin)}" -cf - standin | docker import -c 'ENTRYPOINT ["/standin"]' - ${STANDIN_IMAGE}`], {
                env,
                timeoutMs: 120_000,
            });
            if (r.status !== 0) throw new Error(`docker import of the stand-in failed:\n${r.stderr}${r.stdout}`);
            imported = r.stdout.trim();
            return imported;
        },
        stop,
    };
}

/**
 * The Engine API create body the provider builds from a docker.Container's inputs, for the
 * fields these tests are about (terraform-provider-docker resource_docker_container_funcs.go):
 * network_mode -> HostConfig.NetworkMode, ipc_mode -> IpcMode, device_requests -> DeviceRequests
 * (capabilities as one set), env, labels, capabilities, security_opts, shm_size (MiB). Image and
 * command are the stand-in's; CPU and memory limits are left out (this machine is not a GPU host).
 * `networksAdvanced` is joined after create (`connectNetworks`), as the provider does.
 */
export function containerCreateBody(inputs: Record<string, any>, standinArgs: readonly string[], extraEnv: readonly string[] = []): Record<string, unknown> {
    const i = unwrapSecrets(inputs);
    const hostConfig: Record<string, unknown> = {};
    if (i.networkMode !== undefined) hostConfig.NetworkMode = i.networkMode;
    if (i.ipcMode !== undefined) hostConfig.IpcMode = i.ipcMode;
    if (i.shmSize !== undefined) hostConfig.ShmSize = i.shmSize * 1024 * 1024;
    if (i.deviceRequests !== undefined) {
        hostConfig.DeviceRequests = i.deviceRequests.map((r: any) => ({
            Driver: r.driver ?? "",
            Count: r.count ?? 0,
            DeviceIDs: r.deviceIds ?? [],
            Capabilities: [r.capabilities ?? []],
        }));
    }
    if (i.capabilities?.drops) hostConfig.CapDrop = i.capabilities.drops;
    if (i.securityOpts) hostConfig.SecurityOpt = i.securityOpts;
    return {
        Image: STANDIN_IMAGE,
        Cmd: [...standinArgs],
        Env: [...(i.envs ?? []), ...extraEnv],
        Labels: Object.fromEntries((i.labels ?? []).map((l: any) => [l.label, l.value])),
        HostConfig: hostConfig,
    };
}

/** Joins the container to each of `networksAdvanced` with its aliases (the provider: NetworkConnect after create). */
export async function connectNetworks(
    d: Dockerd,
    containerId: string,
    networksAdvanced: ReadonlyArray<{ name: string; aliases?: string[] }> | undefined,
): Promise<void> {
    for (const n of networksAdvanced ?? []) {
        const r = await d.api("POST", `/networks/${encodeURIComponent(n.name)}/connect`, {
            Container: containerId,
            EndpointConfig: { Aliases: n.aliases ?? [] },
        });
        if (r.status !== 200) throw new Error(`connect ${containerId} to ${n.name}: ${r.status} ${JSON.stringify(r.body)}`);
    }
}

/** Creates a container (networking as the provider does); returns its id. Throws with dockerd's message on refusal. */
export async function createContainer(
    d: Dockerd,
    name: string,
    body: Record<string, unknown>,
    networksAdvanced?: ReadonlyArray<{ name: string; aliases?: string[] }>,
): Promise<string> {
    // The provider creates on the default bridge, leaves it and joins each of networks_advanced; creating on the
    // first one and joining the rest is the same end state.
    const hostConfig = body.HostConfig as Record<string, unknown>;
    const [first, ...rest] = hostConfig.NetworkMode === undefined ? (networksAdvanced ?? []) : [];
    const created = await d.api("POST", `/containers/create?name=${encodeURIComponent(name)}`, {
        ...body,
        HostConfig: { ...hostConfig, ...(first ? { NetworkMode: first.name } : {}) },
        ...(first ? { NetworkingConfig: { EndpointsConfig: { [first.name]: { Aliases: first.aliases ?? [] } } } } : {}),
    });
    if (created.status !== 201) throw new Error(`create ${name}: ${created.status} ${JSON.stringify(created.body)}`);
    const id: string = created.body.Id;
    await connectNetworks(d, id, rest);
    return id;
}

/** Starts a container; returns dockerd's refusal message, or undefined when it started. */
export async function startContainer(d: Dockerd, id: string): Promise<string | undefined> {
    const r = await d.api("POST", `/containers/${id}/start`);
    return r.status === 204 || r.status === 304 ? undefined : String(r.body?.message ?? JSON.stringify(r.body));
}

/**
 * A dockerd for one describe block: `start()` in its before() (under CI a dockerd that cannot
 * start fails the block; elsewhere the reason is kept and `need(t)` skips each test with it), and
 * the program's recorded containers created on it the way the provider would: `create()` sends a
 * recorded container's inputs with the mock ids (`<resource name>-id`) in networkMode and ipcMode
 * replaced by dockerd's ids, starts it and records its id under the resource name.
 */
export class DockerdSession {
    d: Dockerd | undefined;
    /** Resource name -> dockerd's container id. */
    readonly ids = new Map<string, string>();
    private skipReason = "";

    async start(opts: DockerdOptions): Promise<Dockerd | undefined> {
        try {
            this.d = await startDockerd(opts);
        } catch (e) {
            if (process.env.CI) throw e;
            this.skipReason = `dockerd could not start: ${(e as Error).message.split("\n")[0]}`;
        }
        return this.d;
    }

    /** Whether dockerd runs; skips the test with the reason when it does not. */
    need(t: TestContext): boolean {
        if (this.d) return true;
        t.skip(this.skipReason);
        return false;
    }

    /** `v` with every recorded mock id replaced by dockerd's id of that container. */
    real(v: string): string {
        let out = v;
        for (const [name, id] of this.ids) out = out.split(`${name}-id`).join(id);
        return out;
    }

    /** Creates and starts a recorded container (the stand-in image with `args`); `body` adjusts the create body. */
    async create(
        r: RecordedResource,
        args: readonly string[],
        role: string,
        body: (b: Record<string, unknown>, inputs: Record<string, any>) => Record<string, unknown> = (b) => b,
    ): Promise<string> {
        const d = this.d;
        if (!d) throw new Error("DockerdSession.create before a dockerd started");
        const inputs = unwrapSecrets(r.inputs);
        const sent = {
            ...inputs,
            ...(inputs.networkMode ? { networkMode: this.real(inputs.networkMode) } : {}),
            ...(inputs.ipcMode ? { ipcMode: this.real(inputs.ipcMode) } : {}),
        };
        const id = await createContainer(
            d,
            inputs.name,
            body(containerCreateBody(sent, args, [`STANDIN_ROLE=${role}`]), inputs),
            inputs.networkMode ? undefined : inputs.networksAdvanced,
        );
        const refused = await startContainer(d, id);
        if (refused) throw new Error(`start ${inputs.name}: ${refused}`);
        this.ids.set(r.name, id);
        return id;
    }
}
