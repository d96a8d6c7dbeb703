// The node fixture (test/node/README.md): one real node (containerd 2 + runc + CNI + kubelet +
// kube-router's NetworkPolicy controller) and its control plane in a network namespace, brought
// up by test/node/up.sh and removed by test/node/down.sh. test/node/build.sh builds what it runs
// into ${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra/node-v1.36.3/ and prints that directory as
// the last line of stdout. Root and Linux only.
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { Protocol } from "./reachability";
import { scaled, TIME_SCALE_ENV, timeScale } from "./waits";

const REPO_ROOT = path.resolve(__dirname, "..", "..");
export const NODE_SCRIPTS = path.join(REPO_ROOT, "test", "node");

/** The outside addresses and the node's own, as test/node/env.sh names them. */
export interface NodeAddresses {
    readonly internet: string;
    readonly metadata: string;
    readonly apiserverStandin: string;
    readonly nodeLocalDns: string;
    readonly linkLocalNeighbour: string;
    readonly nodeIp: string;
    readonly apiPort: number;
    readonly podSubnet: string;
    /** What the outside listener serves on every outside address. */
    readonly outsidePorts: ReadonlyArray<{ port: number; protocol: Protocol }>;
}

export interface CommandResult {
    readonly code: number;
    readonly stdout: string;
    readonly stderr: string;
}

/** Runs a command (never throws on a non-zero exit); killed (SIGKILL) after `timeoutMs`, scaled (waits.ts). */
export function command(
    cmd: string,
    args: readonly string[],
    opts: { readonly input?: string; readonly timeoutMs?: number; readonly env?: NodeJS.ProcessEnv } = {},
): Promise<CommandResult> {
    return new Promise((resolve) => {
        const child = spawn(cmd, args, {
            stdio: ["pipe", "pipe", "pipe"],
            env: opts.env ?? process.env,
            timeout: scaled(opts.timeoutMs ?? 60_000),
            killSignal: "SIGKILL",
        });
        let stdout = "";
        let stderr = "";
        child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
        child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
        child.on("error", (e) => resolve({ code: 127, stdout, stderr: `${stderr}${e.message}` }));
        child.on("close", (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr: signal ? `${stderr}\n(killed: ${signal})` : stderr }));
        child.stdin.end(opts.input ?? "");
    });
}

/** Why the node test cannot run here, or false. */
export function nodePlatformSkipReason(): string | false {
    if (process.platform !== "linux") return `the node fixture runs a kubelet, containerd and network namespaces: Linux only (this is ${process.platform})`;
    if (process.getuid?.() !== 0) return "the node fixture needs root (network namespaces, cgroups, iptables, containerd): run npm test as root";
    return false;
}

/** Why the node test skips here, or false: never under CI (it builds the fixture), else when it is not built. */
export function nodeSkipReason(ci: boolean): string | false {
    const platform = nodePlatformSkipReason();
    if (platform) return platform;
    if (ci) return false;
    return nodeFixtureBuilt(nodeNames()) ? false : "the node fixture is not built: run `bash test/node/build.sh` as root (see test/node/README.md)";
}

/** After a failure: the daemons' logs and the timeline copied out of the work dir before down.sh removes it. */
export function keepNodeLogs(): string | undefined {
    const names = nodeNames();
    if (!fs.existsSync(path.join(names.work, "logs"))) return undefined;
    const dest = fs.mkdtempSync(path.join(os.tmpdir(), "arl-node-logs-"));
    fs.cpSync(path.join(names.work, "logs"), dest, { recursive: true });
    if (fs.existsSync(path.join(names.work, "timeline"))) fs.copyFileSync(path.join(names.work, "timeline"), path.join(dest, "timeline"));
    return dest;
}

/** The names env.sh gives the node (one source for the scripts and the test). */
export interface NodeNames {
    readonly dir: string;
    readonly k8sCache: string;
    readonly work: string;
    readonly netns: string;
    readonly nodeName: string;
    readonly nodeIp: string;
    readonly apiPort: number;
    readonly busyboxImage: string;
    readonly runtimeImage: string;
    /** The nginx stand-in for images.nginx (Debian forky's nginx, test/node/images.sh). */
    readonly nginxImage: string;
    /** The OpenEnv echo env server (openenv's own `openenv init` template, test/node/images.sh). */
    readonly openenvImage: string;
    readonly ctr: string;
    /** The stand-in device plugin's resource name (nvidia.com/gpu) and how many fake devices it advertises. */
    readonly gpuResource: string;
    readonly gpuDevices: number;
    /** The outside addresses and the node's own (test/helpers/node-reachability.ts). */
    readonly addresses: NodeAddresses;
}

export function nodeNames(env: NodeJS.ProcessEnv = process.env): NodeNames {
    const vars = [
        "NODE_DIR",
        "K8S_CACHE",
        "W",
        "NETNS",
        "NODE_NAME",
        "NODE_IP",
        "API_PORT",
        "BUSYBOX_IMAGE",
        "RUNTIME_IMAGE",
        "NGINX_IMAGE",
        "OPENENV_IMAGE",
        "CTR_BIN",
        "GPU_RESOURCE",
        "GPU_STANDIN_DEVICES",
    ];
    const addressVars = [
        "INTERNET_IP",
        "METADATA_IP",
        "APISERVER_STANDIN_IP",
        "NODE_LOCAL_DNS_IP",
        "LINK_LOCAL_NEIGHBOUR_IP",
        "POD_SUBNET",
        "OUTSIDE_TCP_PORTS",
        "OUTSIDE_UDP_PORTS",
    ];
    const script = `. ${JSON.stringify(path.join(NODE_SCRIPTS, "env.sh"))}; printf '%s\\n' ${[...vars, ...addressVars].map((v) => `"$${v}"`).join(" ")}`;
    const r = spawnSync("bash", ["-c", script], { env, encoding: "utf8" });
    if (r.status !== 0) throw new Error(`sourcing test/node/env.sh failed: ${r.stderr}`);
    const [
        dir,
        k8sCache,
        work,
        netns,
        nodeName,
        nodeIp,
        apiPort,
        busyboxImage,
        runtimeImage,
        nginxImage,
        openenvImage,
        ctrBin,
        gpuResource,
        gpuDevices,
        ...rest
    ] = r.stdout.split("\n");
    const [internet, metadata, apiserverStandin, nodeLocalDns, linkLocalNeighbour, podSubnet, outsideTcp, outsideUdp] = rest;
    const outside = (list: string, protocol: "TCP" | "UDP") => list.split(",").map((p) => ({ port: Number(p), protocol }));
    return {
        dir: dir!,
        k8sCache: k8sCache!,
        work: work!,
        netns: netns!,
        nodeName: nodeName!,
        nodeIp: nodeIp!,
        apiPort: Number(apiPort),
        busyboxImage: busyboxImage!,
        runtimeImage: runtimeImage!,
        nginxImage: nginxImage!,
        openenvImage: openenvImage!,
        ctr: path.join(ctrBin!, "ctr"),
        gpuResource: gpuResource!,
        gpuDevices: Number(gpuDevices),
        addresses: {
            internet: internet!,
            metadata: metadata!,
            apiserverStandin: apiserverStandin!,
            nodeLocalDns: nodeLocalDns!,
            linkLocalNeighbour: linkLocalNeighbour!,
            nodeIp: nodeIp!,
            apiPort: Number(apiPort),
            podSubnet: podSubnet!,
            outsidePorts: [...outside(outsideTcp!, "TCP"), ...outside(outsideUdp!, "UDP")],
        },
    };
}

/** A complete build (top stamp present) without building anything. */
export function nodeFixtureBuilt(names: NodeNames): boolean {
    return fs.existsSync(path.join(names.dir, ".complete"));
}

/** Runs test/node/build.sh (a no-op when its cache is complete); the directory it printed last. */
export async function buildNodeFixture(): Promise<string> {
    const r = await command("bash", [path.join(NODE_SCRIPTS, "build.sh")], { timeoutMs: 30 * 60_000 });
    const dir = r.stdout.trim().split("\n").pop()?.trim();
    if (r.code !== 0 || !dir) throw new Error(`bash test/node/build.sh failed (exit ${r.code}):\n${r.stderr.split("\n").slice(-40).join("\n")}`);
    return dir;
}

/** The running node: kubectl in its network namespace, ctr on its containerd. */
export interface Node {
    readonly names: NodeNames;
    kubectl(args: readonly string[], input?: string, timeoutMs?: number): Promise<CommandResult>;
    kubectlOk(args: readonly string[], input?: string): Promise<string>;
    /**
     * `kubectl apply -f -` of a document (an object or a v1 List); once more when a create met
     * AlreadyExists: a controller made the object between kubectl's read and its create (the
     * controller-manager makes each new namespace's default ServiceAccount).
     */
    apply(doc: unknown): Promise<string>;
    /** `ctr tasks exec` in a running container (its own network namespace, its own user). */
    exec(containerId: string, argv: readonly string[], timeoutMs?: number): Promise<CommandResult>;
    /** up.sh's timeline ("<seconds> <step>" lines). */
    timeline(): string;
    /** The last lines of a daemon's log (etcd, kube-apiserver, containerd, kubelet, gpu-standin, kube-router). */
    logTail(daemon: string, lines?: number): string;
}

/**
 * The unscaled budget that outlives kubectl's own `--timeout=Ns` (already scaled by the caller) by
 * 10 s, so kubectl reports its own timeout instead of being killed first; 0 without one.
 */
export function outlivesKubectlTimeout(args: readonly string[]): number {
    const m = args.map((a) => /^--timeout=(\d+)s$/.exec(a)).find((x) => x !== null);
    return m ? Math.ceil((Number(m[1]) * 1000) / timeScale()) + 10_000 : 0;
}

let execSeq = 0;

export function nodeHandle(names: NodeNames): Node {
    const kubeconfig = path.join(names.work, "kubeconfig");
    const kubectl = (args: readonly string[], input?: string, timeoutMs = 60_000) =>
        command("ip", ["netns", "exec", names.netns, path.join(names.k8sCache, "bin", "kubectl"), "--kubeconfig", kubeconfig, ...args], {
            input,
            timeoutMs: Math.max(timeoutMs, outlivesKubectlTimeout(args)),
        });
    return {
        names,
        kubectl,
        async kubectlOk(args, input) {
            const r = await kubectl(args, input);
            if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} failed (exit ${r.code}): ${r.stderr}`);
            return r.stdout;
        },
        async apply(doc) {
            const input = JSON.stringify(doc);
            let r = await kubectl(["apply", "-f", "-"], input);
            if (r.code !== 0 && /AlreadyExists/.test(r.stderr)) r = await kubectl(["apply", "-f", "-"], input);
            if (r.code !== 0) throw new Error(`kubectl apply failed (exit ${r.code}): ${r.stderr}`);
            return r.stdout;
        },
        exec(containerId, argv, timeoutMs = 30_000) {
            execSeq++;
            return command(
                names.ctr,
                [
                    "--address",
                    path.join(names.work, "containerd", "containerd.sock"),
                    "-n",
                    "k8s.io",
                    "tasks",
                    "exec",
                    "--exec-id",
                    `t${process.pid}-${execSeq}`,
                    containerId,
                    ...argv,
                ],
                { timeoutMs },
            );
        },
        timeline() {
            try {
                return fs.readFileSync(path.join(names.work, "timeline"), "utf8").trim();
            } catch {
                return "(no timeline)";
            }
        },
        logTail(daemon, lines = 30) {
            try {
                return fs
                    .readFileSync(path.join(names.work, "logs", `${daemon}.log`), "utf8")
                    .split("\n")
                    .slice(-lines)
                    .join("\n");
            } catch {
                return `(no log for ${daemon})`;
            }
        },
    };
}

/**
 * The node is one per machine (env.sh's fixed names): the process that runs it (test/stack/node.test.ts, or
 * another checkout's npm test on the same machine) holds this lock from nodeUp until its NodeSession
 * has run down.sh (and its check). The file names the holder's pid; a holder that is gone (killed) no
 * longer holds it.
 */
export const NODE_LOCK = path.join(os.tmpdir(), "agentrl-node-test.lock");
/** Longest wait for another process's node (another checkout's npm test, a second runner call): test/stack/node.test.ts takes under 25 minutes. */
const NODE_LOCK_WAIT_MS = 30 * 60_000;

function pidAlive(pid: number): boolean {
    try {
        process.kill(pid, 0);
        return true;
    } catch (e) {
        return (e as NodeJS.ErrnoException).code === "EPERM";
    }
}

/** The live process the lock file names, if any (scripts/test/run.ts: whose node is up). */
export function nodeLockHolder(): number | undefined {
    let pid = 0;
    try {
        pid = Number(fs.readFileSync(NODE_LOCK, "utf8"));
    } catch {
        return undefined;
    }
    return Number.isInteger(pid) && pid > 0 && pidAlive(pid) ? pid : undefined;
}

/** Whether this process holds the node (the lock file names its pid). */
function holdsNodeLock(): boolean {
    try {
        return Number(fs.readFileSync(NODE_LOCK, "utf8")) === process.pid;
    } catch {
        return false;
    }
}

function releaseNodeLock(): void {
    if (holdsNodeLock()) fs.rmSync(NODE_LOCK, { force: true });
}

/** The lock file, created with the pid already in it (a hard link of a written file): never seen empty. */
function tryTakeNodeLock(): boolean {
    const mine = `${NODE_LOCK}.${process.pid}`;
    fs.writeFileSync(mine, String(process.pid));
    try {
        fs.linkSync(mine, NODE_LOCK);
        return true;
    } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
        return false;
    } finally {
        fs.rmSync(mine, { force: true });
    }
}

async function acquireNodeLock(): Promise<void> {
    const t0 = Date.now();
    for (;;) {
        if (holdsNodeLock()) return;
        if (tryTakeNodeLock()) {
            process.once("exit", releaseNodeLock);
            return;
        }
        let holder = 0;
        try {
            holder = Number(fs.readFileSync(NODE_LOCK, "utf8"));
        } catch {
            continue; // released meanwhile: try again
        }
        // Only a holder known to be gone loses it (its pid no longer runs).
        if (Number.isInteger(holder) && holder > 0 && !pidAlive(holder)) {
            fs.rmSync(NODE_LOCK, { force: true });
            continue;
        }
        if (Date.now() - t0 > scaled(NODE_LOCK_WAIT_MS))
            throw new Error(`the node is held by pid ${holder} (${NODE_LOCK}) for over ${scaled(NODE_LOCK_WAIT_MS) / 60_000} minutes`);
        await new Promise((r) => setTimeout(r, 1000));
    }
}

/** up.sh: the node and its control plane (after another process's node is down); throws with its output when it fails. */
export async function nodeUp(opts: { readonly env?: NodeJS.ProcessEnv } = {}): Promise<CommandResult> {
    await acquireNodeLock();
    // up.sh scales its own waits by the same factor (env.sh `scaled`).
    const env = { ...(opts.env ?? process.env), [TIME_SCALE_ENV]: String(timeScale()) };
    const r = await command("bash", [path.join(NODE_SCRIPTS, "up.sh")], { timeoutMs: 6 * 60_000, env });
    if (r.code !== 0) throw new Error(`bash test/node/up.sh failed (exit ${r.code}):\n${r.stderr.split("\n").slice(-60).join("\n")}`);
    return r;
}

/** down.sh (or `down.sh --check`, which removes nothing): exit 0 when nothing is left. */
export function nodeDown(check = false): Promise<CommandResult> {
    return command("bash", [path.join(NODE_SCRIPTS, "down.sh"), ...(check ? ["--check"] : [])], { timeoutMs: 3 * 60_000 });
}

/**
 * An images.sh archive's digest reference (`localhost/arl-node/<image>@sha256:<manifest digest>`),
 * under which up.sh also tags it: a stack pinned by digest runs it with imagePullPolicy IfNotPresent.
 */
export function imageRefByDigest(names: NodeNames, image: string): string {
    const archive = path.join(names.dir, "images", `${image}.oci.tar`);
    const r = spawnSync("bash", ["-c", `. ${JSON.stringify(path.join(NODE_SCRIPTS, "env.sh"))}; image_ref_by_digest "$1"`, "_", archive], { encoding: "utf8" });
    const ref = r.stdout.trim();
    if (r.status !== 0 || !/@sha256:[0-9a-f]{64}$/.test(ref)) throw new Error(`no digest reference for ${archive}: ${r.stderr}${ref}`);
    return ref;
}

/**
 * test/stack/node.test.ts's node, from its `before` to its last test: `prepare` (the API server's
 * binaries, the fixture built or brought up to date, the names), `start` (up.sh, after another
 * process's node is down), `clearNamespaces` between suites, `cleanup` for the file's `after` (the
 * daemons' logs kept, down.sh, when the last test did not get that far), `downLeavesNothing` for
 * the last test.
 */
export class NodeSession {
    #env: NodeJS.ProcessEnv = process.env;
    #started = false;
    #downChecked = false;
    node!: Node;

    /**
     * build.sh always runs: a no-op when every part's stamp is current, and it rebuilds a part whose
     * inputs changed (an image's packages, a Go module), which a `.complete` file alone would not show.
     */
    async prepare(): Promise<Node> {
        const { ensureBinaries } = await import("./apiserver");
        const env: NodeJS.ProcessEnv = { ...process.env, AGENT_RL_K8S_CACHE_DIR: await ensureBinaries(), AGENT_RL_NODE_DIR: await buildNodeFixture() };
        process.env.AGENT_RL_K8S_CACHE_DIR = env.AGENT_RL_K8S_CACHE_DIR;
        process.env.AGENT_RL_NODE_DIR = env.AGENT_RL_NODE_DIR;
        this.#env = env;
        this.node = nodeHandle(nodeNames(env));
        return this.node;
    }

    /** up.sh; prints how long it took (the wait for another process's node included) and its timeline. */
    async start(): Promise<void> {
        this.#started = true; // up.sh may fail half-way: cleanup runs down.sh either way
        const t0 = Date.now();
        await nodeUp({ env: this.#env });
        process.stderr.write(`# node up in ${((Date.now() - t0) / 1000).toFixed(1)} s; timeline (s): ${this.node.timeline().replace(/\n/g, "; ")}\n`);
    }

    /** The file's `after`: down.sh unless the last test ran it, and only on a node this process holds (never another's). */
    async cleanup(): Promise<void> {
        if (!this.#started || this.#downChecked || !holdsNodeLock()) return;
        const kept = keepNodeLogs();
        if (kept) process.stderr.write(`# the node's logs and timeline kept in ${kept}\n`);
        const d = await nodeDown();
        if (d.code !== 0) process.stderr.write(`test/node/down.sh after a failure: ${d.stderr}\n`);
        releaseNodeLock();
    }

    /**
     * Between suites sharing the node: every namespace a test made deleted (its pods first, without
     * their grace period) and waited for, so the next suite starts on an empty node (the same plan's
     * namespaces and pod names come back in another suite).
     */
    async clearNamespaces(): Promise<void> {
        const list = async (): Promise<string[]> => {
            const r = await this.node.kubectl(["get", "namespaces", "-o", "jsonpath={.items[*].metadata.name}"]);
            if (r.code !== 0) throw new Error(`kubectl get namespaces (exit ${r.code}): ${r.stderr}`);
            return r.stdout.split(/\s+/).filter((n) => n !== "" && !SYSTEM_NAMESPACES.has(n));
        };
        const made = await list();
        if (made.length === 0) return;
        // The namespaces first (their controllers stop making pods), then their pods without a grace
        // period, again until the namespaces are gone (a StatefulSet may remake one meanwhile).
        const d = await this.node.kubectl(["delete", "namespaces", ...made, "--wait=false"]);
        if (d.code !== 0) throw new Error(`kubectl delete namespaces ${made.join(" ")} (exit ${d.code}): ${d.stderr}`);
        const t0 = Date.now();
        for (;;) {
            const left = (await list()).filter((n) => made.includes(n));
            if (left.length === 0) return;
            if (Date.now() - t0 > scaled(150_000)) throw new Error(`namespaces ${left.join(", ")} not deleted after ${scaled(150_000) / 1000} s`);
            for (const ns of left) await this.node.kubectl(["-n", ns, "delete", "pods", "--all", "--grace-period=0", "--force", "--wait=false"]);
            await new Promise((r) => setTimeout(r, 2000));
        }
    }

    /** down.sh, then `down.sh --check` (before another process may take the node): throws naming what is left. */
    async downLeavesNothing(): Promise<void> {
        this.#downChecked = true;
        try {
            const d = await nodeDown();
            if (d.code !== 0) throw new Error(`down.sh (exit ${d.code}): ${d.stdout}${d.stderr}`);
            const check = await nodeDown(true);
            if (check.code !== 0) throw new Error(`down.sh --check (exit ${check.code}): ${check.stdout}${check.stderr}`);
        } finally {
            releaseNodeLock();
        }
    }
}

/** Namespaces the API server and up.sh make: never cleared between suites. */
const SYSTEM_NAMESPACES = new Set(["default", "kube-system", "kube-public", "kube-node-lease"]);

/** The container hardening every stand-in pod on the node gets: no privilege gain, read-only root, no capabilities. */
export const HARDENED_CONTAINER = { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } } as const;

/**
 * A pod on the fixture's OpenEnv image (python3, openenv's client, OpenAI's client) that sleeps, for
 * `kubectl exec`: non-root (65532), read-only root, RuntimeDefault seccomp (the restricted Pod Security
 * Standard the plan's namespaces enforce), bound to the node when `nodeName` is given.
 */
export function openenvClientPod(node: Node, name: string, namespace: string, labels: Record<string, string>, nodeName?: string) {
    return {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, namespace, labels },
        spec: {
            ...(nodeName === undefined ? {} : { nodeName }),
            automountServiceAccountToken: false,
            enableServiceLinks: false,
            terminationGracePeriodSeconds: 1,
            securityContext: { runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: { type: "RuntimeDefault" } },
            containers: [
                {
                    name: "client",
                    image: imageRefByDigest(node.names, "openenv-echo"),
                    imagePullPolicy: "IfNotPresent",
                    command: ["sleep", "2147483647"],
                    resources: { requests: { cpu: "50m", memory: "128Mi" }, limits: { memory: "256Mi" } },
                    securityContext: HARDENED_CONTAINER,
                },
            ],
        },
    };
}

/** `kubectl exec` in a pod's container: the exit code, stdout and stderr together (`out`), stdout alone. */
export async function podExec(
    node: Node,
    ns: string,
    pod: string,
    container: string,
    argv: readonly string[],
    timeoutMs = 60_000,
): Promise<{ code: number; out: string; stdout: string }> {
    const r = await node.kubectl(["-n", ns, "exec", pod, "-c", container, "--", ...argv], undefined, timeoutMs);
    return { code: r.code, out: `${r.stdout}${r.stderr}`.trim(), stdout: r.stdout };
}
