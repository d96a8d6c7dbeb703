/**
 * The Docker preflight: what a stack needs from the GPU host's daemon at `target.host`, read
 * with the docker CLI (`docker -H <host> version/info/ps`, bounded) and, for a local socket,
 * statfs and a bind test; checked by pure functions so every message is unit-tested. The registry
 * coverage (registry.ts) is shared with Kubernetes.
 */
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { dockerIngressPorts } from "../ingress";
import type { PlatformPlan } from "../platform";
import { type DockerHostNeeds, dockerHostNeeds, formatMiB, type HostShare } from "../platform/docker-host";
import { checkpointNeed, describeNeed } from "../config/checkpoints";
import { quantityValue } from "../shared/quantity";
import { usableGiB } from "../config/gpu-products";
import { GPU_MEMORY_CHECK, gpuMemoryFinding } from "./gpu-memory";
import { checkRegistryCredentials } from "./registry";
import { fail, type Finding, human, ok, type Read, warn } from "./report";

/**
 * Engine API 1.40 (Docker 19.03) brought HostConfig.DeviceRequests, which the GPU containers
 * use (moby docs/api/version-history.md, v1.40).
 */
export const MIN_DOCKER_API = "1.40";

export interface DockerFacts {
    readonly host: string;
    /** `docker version`'s Server part: the daemon answered. */
    readonly version: Read<{
        readonly version: string;
        readonly apiVersion: string;
        readonly minApiVersion?: string;
        readonly os?: string;
        readonly arch?: string;
    }>;
    /** From `docker info`. */
    readonly info: Read<{
        readonly runtimes: readonly string[];
        readonly defaultRuntime: string;
        /** CDI device names the daemon discovered (API 1.50+ `DiscoveredDevices`), e.g. nvidia.com/gpu=0. */
        readonly cdiDevices: readonly string[];
        readonly cdiSpecDirs: readonly string[];
        /** CPUs the daemon's host has (`NCPU`); unset when the daemon does not say. */
        readonly ncpu?: number;
        /** Memory of the host in bytes (`MemTotal`); unset when the daemon does not say. */
        readonly memTotalBytes?: number;
    }>;
    /** Running containers and the host ports they publish. */
    readonly containers: Read<ReadonlyArray<{ readonly name: string; readonly ports: readonly PublishedPort[] }>>;
    /** Local socket only: host ports (ip:port) something on this machine already listens on. */
    readonly localPortsInUse?: readonly string[];
    /** Local socket only: the host's GPUs as nvidia-smi lists them (name, memory.total in MiB), or why not. */
    readonly gpus?: Read<ReadonlyArray<{ readonly name: string; readonly mib: number }>>;
    /** Free space under dataDir: measured (local socket), or why not. */
    readonly disk: { readonly checkedPath: string; readonly freeBytes: number } | { readonly unchecked: string };
}

export interface PublishedPort {
    readonly ip: string;
    readonly port: number;
    readonly protocol: string;
}

// ---------------------------------------------------------------------------------------------
// The checks (pure)

const firstLine = (s: string) =>
    s
        .split("\n")
        .map((l) => l.trim())
        .find((l) => l !== "") ?? "";

export function checkDaemon(host: string, version: DockerFacts["version"]): Finding {
    const check = "Docker daemon";
    if (version.ok)
        return ok(check, `${host} answers: Docker ${version.value.version}${version.value.os ? ` (${version.value.os}/${version.value.arch})` : ""}`);
    const e = version.error;
    if (/permission denied/i.test(e))
        return fail(check, `${host}: permission denied`, "run as a user in the docker group (sudo usermod -aG docker $USER, then log in again), or as root");
    if (/cannot run docker/i.test(e)) return fail(check, e, "install the Docker CLI (apt-get install -y docker.io, or docker-ce-cli from Docker's repository)");
    if (host.startsWith("ssh://"))
        return fail(
            check,
            `${host} did not answer: ${firstLine(e)}`,
            `check that ssh ${host.slice(6)} works without a password prompt and that the remote user may use docker (docker -H ${host} version)`,
        );
    return fail(
        check,
        `${host} did not answer: ${firstLine(e)}`,
        `start the daemon on the host (sudo systemctl start docker), or set target.host to where it listens (unix://, ssh:// or tcp://)`,
    );
}

function apiAtLeast(v: string, min: string): boolean {
    const [a, b] = v.split(".").map((x) => Number.parseInt(x, 10));
    const [c, d] = min.split(".").map((x) => Number.parseInt(x, 10));
    return a > c || (a === c && b >= d);
}

export function checkApiVersion(v: { version: string; apiVersion: string; minApiVersion?: string }): Finding {
    const check = "Docker API version";
    return apiAtLeast(v.apiVersion, MIN_DOCKER_API)
        ? ok(check, `API ${v.apiVersion}${v.minApiVersion ? ` (min ${v.minApiVersion})` : ""}, >= ${MIN_DOCKER_API}`)
        : fail(
              check,
              `API ${v.apiVersion} (Docker ${v.version}), older than ${MIN_DOCKER_API}: GPU device requests are refused`,
              "upgrade Docker Engine to 19.03 or newer (a current release: docker-ce from Docker's repository)",
          );
}

/** CDI GPU device names by index (nvidia.com/gpu=0, =1, ...; not `all` or UUIDs). */
export function cdiGpuIndices(devices: readonly string[]): number[] {
    return devices.map((d) => /^nvidia\.com\/gpu=(\d+)$/.exec(d)?.[1]).flatMap((x) => (x === undefined ? [] : [Number(x)]));
}

export const NVIDIA_TOOLKIT_FIX =
    "install the NVIDIA Container Toolkit on the host (package nvidia-container-toolkit from NVIDIA's repository), then register it with Docker: sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker; check: docker run --rm --gpus all ubuntu nvidia-smi";

export function checkNvidiaRuntime(info: { runtimes: readonly string[]; cdiDevices: readonly string[] }): Finding {
    const check = "NVIDIA runtime";
    const cdi = info.cdiDevices.filter((d) => d.startsWith("nvidia.com/gpu="));
    if (info.runtimes.includes("nvidia"))
        return ok(check, `the nvidia runtime is registered (runtimes: ${info.runtimes.join(", ")})${cdi.length ? `; CDI: ${cdi.join(", ")}` : ""}`);
    if (cdi.length > 0) return ok(check, `CDI GPU devices: ${cdi.join(", ")}`);
    return fail(
        check,
        `no nvidia runtime and no CDI GPU devices (runtimes: ${info.runtimes.join(", ") || "none"}): GPU containers cannot start`,
        NVIDIA_TOOLKIT_FIX,
    );
}

/** GPUs the stack's containers ask for by index (0..n-1). */
export function gpusNeeded(plan: PlatformPlan): number {
    const all = [...plan.training.gpuLayout.vllm, ...plan.training.gpuLayout.trainer];
    return all.length === 0 ? 0 : Math.max(...all) + 1;
}

export function checkGpuCount(plan: PlatformPlan, info: { runtimes: readonly string[]; cdiDevices: readonly string[] }): Finding | undefined {
    const check = "GPU count";
    const need = gpusNeeded(plan);
    const indices = cdiGpuIndices(info.cdiDevices);
    if (indices.length > 0) {
        return indices.length >= need
            ? ok(check, `${indices.length} GPUs (CDI), the stack uses ${need}`)
            : fail(
                  check,
                  `${indices.length} GPUs (CDI), the stack uses ${need} (devices 0..${need - 1})`,
                  `lower training.gpusOnNode to ${indices.length}, or use a host with ${need} GPUs`,
              );
    }
    // Without CDI, docker info says nothing about GPUs (the nvidia runtime does not report them).
    if (!info.runtimes.includes("nvidia")) return undefined;
    return warn(
        check,
        `docker info does not report GPUs (nvidia runtime without CDI specs); the stack uses ${need} (devices 0..${need - 1})`,
        `check on the host that nvidia-smi -L lists ${need} or more, or let Docker report them: sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`,
    );
}

/** The shares that size a total most, largest first, as "<what> (<fields>)". */
function biggest(needs: DockerHostNeeds, by: (s: HostShare) => number): string {
    return [...needs.shares]
        .filter((s) => s.fields !== undefined)
        .sort((a, b) => by(b) - by(a))
        .slice(0, 2)
        .map((s) => `${s.containers} x ${s.what} (${s.fields})`)
        .join(" and ");
}

/**
 * The stack's summed container limits (dockerHostNeeds, the table in plan.md) against the host's
 * `docker info` NCPU and MemTotal. Limits are not reservations, so the daemon would start them all:
 * memory beyond the host's fails (the OOM killer ends containers once they near their limits), CPUs
 * beyond it warn (they share, slower).
 */
export function checkHostCapacity(plan: PlatformPlan, info: { ncpu?: number; memTotalBytes?: number }): Finding[] {
    const needs = dockerHostNeeds(plan);
    if (needs === undefined) return [];
    const out: Finding[] = [];
    const memCheck = "Host memory";
    const needMiB = needs.memoryMiB;
    if (info.memTotalBytes === undefined) {
        out.push(
            warn(
                memCheck,
                `docker info does not report MemTotal; the stack's containers are limited to ${formatMiB(needMiB)} in all (unchecked)`,
                "check on the host: free -g",
            ),
        );
    } else {
        const hostMiB = Math.floor(info.memTotalBytes / 1024 ** 2);
        out.push(
            needMiB <= hostMiB
                ? ok(memCheck, `${needs.containers} containers limited to ${formatMiB(needMiB)} in all, the host has ${formatMiB(hostMiB)}`)
                : fail(
                      memCheck,
                      `${needs.containers} containers limited to ${formatMiB(needMiB)} in all, but the host has ${formatMiB(hostMiB)} (MemTotal): Docker starts them all, and the kernel's OOM killer ends containers once they near their limits`,
                      `lower the largest shares, ${biggest(needs, (s) => s.containers * s.memoryMiB)}, by ${formatMiB(needMiB - hostMiB)} or more (plan.md's 'Docker host' table has every share), or use a host with more memory`,
                  ),
        );
    }
    const cpuCheck = "Host CPUs";
    if (info.ncpu === undefined) {
        out.push(
            warn(
                cpuCheck,
                `docker info does not report NCPU; the stack's containers are limited to ${needs.cpus} CPUs in all (unchecked)`,
                "check on the host: nproc",
            ),
        );
    } else {
        out.push(
            needs.cpus <= info.ncpu
                ? ok(cpuCheck, `${needs.containers} containers limited to ${needs.cpus} CPUs in all, the host has ${info.ncpu}`)
                : warn(
                      cpuCheck,
                      `${needs.containers} containers limited to ${needs.cpus} CPUs in all, but the host has ${info.ncpu} (NCPU): they share them, and every container runs slower than its limit`,
                      `lower the largest shares, ${biggest(needs, (s) => s.containers * s.cpus)}, to fit ${info.ncpu} CPUs, or use a host with more`,
                  ),
        );
    }
    return out;
}

/** What the stack stores under dataDir: the model cache and the checkpoints, at their configured sizes. */
export function dataDirNeeds(plan: PlatformPlan): { bytes: number; parts: string[] } {
    const parts: string[] = [];
    let bytes = 0;
    for (const [what, v] of [
        ["model cache", plan.training.modelCache],
        ["checkpoints", plan.training.checkpoints],
    ] as const) {
        if (!v) continue;
        bytes += quantityValue(v.size);
        parts.push(`${what} ${v.size}`);
    }
    return { bytes, parts };
}

export function checkDataDir(plan: PlatformPlan, disk: DockerFacts["disk"]): Finding {
    const check = "Free space in dataDir";
    const dataDir = plan.config.target.kind === "docker" ? plan.config.target.dataDir : "";
    const need = dataDirNeeds(plan);
    if ("unchecked" in disk)
        return warn(
            check,
            `${dataDir}: unchecked (${disk.unchecked})`,
            `check on the host: df -h ${dataDir} (the stack plans ${need.parts.join(" + ") || "nothing"})`,
        );
    const where = disk.checkedPath === dataDir ? dataDir : `${dataDir} (not there yet; measured at ${disk.checkedPath})`;
    const free = human("storage", disk.freeBytes);
    if (need.bytes === 0) return ok(check, `${free} free under ${where}; the stack keeps no volumes there`);
    if (disk.freeBytes >= need.bytes) return ok(check, `${free} free under ${where}, the stack plans ${need.parts.join(" + ")}`);
    return warn(
        check,
        `${free} free under ${where}, less than the ${need.parts.join(" + ")} the stack plans (Docker does not hold a directory to a size: a download or a checkpoint save fails when the disk fills)`,
        "free space there, move target.dataDir to a larger disk, or lower training.modelCache.size / training.checkpoints.size",
    );
}

/**
 * The checkpoints' directory against the checkpoint rule (config/checkpoints.ts): the free space on
 * dataDir's file system must hold what one run writes, or the run's saves fail once the disk is
 * full. Measured with statfs for a local (unix://) daemon only: a remote host's file system is not
 * read from here (reading it through the daemon would mean starting a container), so it is a
 * warning naming the command to run there. Undefined when the stack keeps no checkpoints.
 */
export function checkCheckpointSpace(plan: PlatformPlan, disk: DockerFacts["disk"]): Finding | undefined {
    const v = plan.training.checkpoints;
    if (v === undefined || plan.config.target.kind !== "docker") return undefined;
    const check = "Checkpoint space";
    const dataDir = plan.config.target.dataDir;
    const c = plan.config;
    const need = checkpointNeed(c);
    const rule = need ? `one run of ${c.model.name} writes ${need.runSize} by the checkpoint rule (${describeNeed(need)})` : undefined;
    if ("unchecked" in disk)
        return warn(
            check,
            `${dataDir}: unchecked (${disk.unchecked}); ${rule ?? `the checkpoint rule cannot size a run: no parameter count for ${c.model.name}`}`,
            `check on the host: df -h ${dataDir} (it needs ${need ? `${need.runSize} free for one run; ` : ""}training.checkpoints.size is ${v.size})`,
        );
    if (need === undefined)
        return warn(
            check,
            `the checkpoint rule cannot size a run: no parameter count for ${c.model.name}; ${human("storage", disk.freeBytes)} free under ${disk.checkedPath}`,
            "set training.checkpoints.parameters (the model's parameter count) to have the run's need checked",
        );
    const free = human("storage", disk.freeBytes);
    if (need.runBytes === 0)
        return ok(check, `${free} free under ${disk.checkedPath}; ${c.model.name}'s program writes nothing there by the checkpoint rule (${need.writes.why})`);
    if (disk.freeBytes < need.runBytes)
        return fail(
            check,
            `${free} free under ${disk.checkedPath === dataDir ? dataDir : `${dataDir} (measured at ${disk.checkedPath})`}, less than ${rule}: the run's checkpoint saves fail when the disk fills`,
            `free ${human("storage", need.runBytes - disk.freeBytes)} or more there (old runs' checkpoints: npm run checkpoints -- ${c.stack} --prune <runId>), or move target.dataDir to a larger disk`,
        );
    const runs = Math.floor(disk.freeBytes / need.runBytes);
    return ok(check, `${free} free under ${disk.checkedPath} holds ${runs} run${runs === 1 ? "" : "s"}: ${rule}`);
}

/** Host ports the stack publishes (the ingress proxy on Docker; nothing else is published). */
export function publishedPorts(plan: PlatformPlan): Array<PublishedPort & { readonly by: string }> {
    if (!plan.ingress || plan.config.target.kind !== "docker") return [];
    return dockerIngressPorts(plan.ingress).map((p) => ({
        ip: String(p.ip ?? "0.0.0.0"),
        port: Number(p.external ?? p.internal),
        protocol: String(p.protocol ?? "tcp"),
        by: plan.ingress!.names.container,
    }));
}

const overlaps = (a: string, b: string) => a === b || a === "0.0.0.0" || b === "0.0.0.0" || a === "::" || b === "::";

export function checkPorts(plan: PlatformPlan, facts: Pick<DockerFacts, "containers" | "localPortsInUse">): Finding {
    const check = "Host ports";
    const wanted = publishedPorts(plan);
    if (wanted.length === 0) return ok(check, "the stack publishes no host ports");
    if (!facts.containers.ok)
        return warn(check, `could not list containers: ${firstLine(facts.containers.error)} (unchecked)`, "run it again once the daemon answers");
    const taken: string[] = [];
    const ours: string[] = [];
    for (const w of wanted) {
        const id = `${w.ip}:${w.port}/${w.protocol}`;
        const holders = facts.containers.value.filter((c) => c.ports.some((p) => p.port === w.port && p.protocol === w.protocol && overlaps(p.ip, w.ip)));
        const others = holders.filter((c) => c.name !== w.by);
        if (others.length > 0) taken.push(`${id} is published by container ${others.map((c) => c.name).join(", ")}`);
        else if (holders.length > 0) ours.push(`${id} (held by this stack's ${w.by}, which an up replaces)`);
        else if (facts.localPortsInUse?.includes(`${w.ip}:${w.port}`)) taken.push(`${id} is in use by a process on the host (not a container)`);
    }
    if (taken.length > 0)
        return fail(
            check,
            `${taken.join("; ")}; the ingress (${wanted[0]!.by}) cannot publish it`,
            "stop what holds the port (docker ps; ss -ltnp), or run this stack on another host",
        );
    const free = wanted.filter((w) => !ours.some((o) => o.startsWith(`${w.ip}:${w.port}/`))).map((w) => `${w.ip}:${w.port}/${w.protocol}`);
    return ok(check, [free.length ? `${free.join(", ")} free` : "", ...ours].filter(Boolean).join("; "));
}

export function checkDocker(plan: PlatformPlan, f: DockerFacts): Finding[] {
    const daemon = checkDaemon(f.host, f.version);
    if (!f.version.ok) return [daemon];
    const out: Finding[] = [daemon, checkApiVersion(f.version.value)];
    if (f.info.ok) {
        out.push(checkNvidiaRuntime(f.info.value));
        const count = checkGpuCount(plan, f.info.value);
        if (count) out.push(count);
        out.push(...checkHostCapacity(plan, f.info.value));
    } else {
        out.push(
            warn("NVIDIA runtime", `docker info failed: ${firstLine(f.info.error)} (unchecked)`, "run docker info on the host and look for the nvidia runtime"),
        );
    }
    if (f.gpus) {
        const memory = checkDockerGpuMemory(plan, f.gpus);
        if (memory) out.push(memory);
    }
    out.push(checkDataDir(plan, f.disk));
    const space = checkCheckpointSpace(plan, f.disk);
    if (space) out.push(space);
    out.push(checkRegistryCredentials(plan, "docker"), checkPorts(plan, f));
    return out;
}

/** `nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits` lines as GPUs. */
export function parseNvidiaSmi(text: string): Array<{ name: string; mib: number }> {
    return text
        .split("\n")
        .map((l) => /^(.+),\s*(\d+)\s*$/.exec(l.trim()))
        .flatMap((m) => (m ? [{ name: m[1]!.trim(), mib: Number(m[2]) }] : []));
}

/** The stack's roles against the smallest of the host GPUs it uses (devices 0..n-1). */
export function checkDockerGpuMemory(plan: PlatformPlan, gpus: NonNullable<DockerFacts["gpus"]>): Finding | undefined {
    if (!gpus.ok)
        return warn(
            GPU_MEMORY_CHECK,
            `nvidia-smi on the host failed: ${firstLine(gpus.error)} (unchecked)`,
            "run nvidia-smi --query-gpu=name,memory.total --format=csv on the host and set training.gpuMemory.product or training.gpuMemory.gib",
        );
    const used = gpus.value.slice(0, gpusNeeded(plan));
    if (used.length === 0) return undefined;
    const smallest = used.reduce((a, b) => (b.mib < a.mib ? b : a));
    const index = gpus.value.indexOf(smallest);
    return gpuMemoryFinding(
        plan,
        `GPU ${index} ${smallest.name} (${smallest.mib} MiB: ${usableGiB(smallest.mib).toFixed(1)} GiB usable)`,
        usableGiB(smallest.mib),
    );
}

// ---------------------------------------------------------------------------------------------
// Reading the host

export interface DockerReadOptions {
    /** docker CLI binary. @default $DOCKER_CLI, else "docker" */
    readonly docker?: string;
    /** Per command. @default 15000 */
    readonly timeoutMs?: number;
}

function runDocker(bin: string, args: readonly string[], timeoutMs: number): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
        execFile(bin, [...args], { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, killSignal: "SIGKILL" }, (err, stdout, stderr) => {
            const e = err as (NodeJS.ErrnoException & { killed?: boolean }) | null;
            let why = stderr;
            if (e?.code === "ENOENT") why = `cannot run ${bin}: not installed`;
            else if (e?.killed) why = `${stderr}\nno answer within ${Math.round(timeoutMs / 1000)} s`;
            resolve({ code: e ? (typeof e.code === "number" ? e.code : 1) : 0, stdout, stderr: why });
        });
    });
}

/** "127.0.0.1:8080->8080/tcp, [::]:8080->8080/tcp" as published ports. */
export function parsePorts(text: string): PublishedPort[] {
    const out: PublishedPort[] = [];
    for (const part of text.split(",").map((s) => s.trim())) {
        const m = /^(.*):(\d+)(?:-(\d+))?->\d+(?:-\d+)?\/(\w+)$/.exec(part);
        if (!m) continue;
        const ip = m[1]!.replace(/^\[|\]$/g, "");
        const from = Number(m[2]);
        const to = m[3] !== undefined ? Number(m[3]) : from;
        for (let p = from; p <= to; p++) out.push({ ip, port: p, protocol: m[4]! });
    }
    return out;
}

/** Whether something on this machine listens on ip:port (a bind test). */
function portInUse(ip: string, port: number): Promise<boolean> {
    return new Promise((resolve) => {
        const srv = net.createServer();
        srv.once("error", (e: NodeJS.ErrnoException) => resolve(e.code === "EADDRINUSE"));
        srv.listen({ host: ip, port, exclusive: true }, () => srv.close(() => resolve(false)));
    });
}

/** statfs of dataDir, or of its nearest existing parent. */
export function freeSpace(dir: string): { checkedPath: string; freeBytes: number } | { unchecked: string } {
    let p = path.resolve(dir);
    for (;;) {
        try {
            const s = fs.statfsSync(p);
            return { checkedPath: p, freeBytes: Number(s.bavail) * Number(s.bsize) };
        } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== "ENOENT" || p === path.dirname(p)) return { unchecked: `statfs ${p}: ${(e as Error).message}` };
            p = path.dirname(p);
        }
    }
}

/** Reads what `checkDocker` needs from the daemon at target.host; every command bounded. */
export async function readDocker(plan: PlatformPlan, opts: DockerReadOptions = {}): Promise<DockerFacts> {
    const t = plan.config.target;
    if (t.kind !== "docker") throw new Error("readDocker: the stack's target is not docker");
    const bin = opts.docker ?? process.env.DOCKER_CLI ?? "docker";
    const timeoutMs = opts.timeoutMs ?? 15_000;
    const host = t.host;
    const local = host.startsWith("unix://");
    const disk = local ? freeSpace(t.dataDir) : { unchecked: `${host} is not a local socket` };
    const docker = (args: readonly string[]) => runDocker(bin, ["-H", host, ...args], timeoutMs);
    const v = await docker(["version", "--format", "{{json .Server}}"]);
    let version: DockerFacts["version"];
    try {
        const s = v.code === 0 ? JSON.parse(v.stdout) : null;
        version = s
            ? { ok: true, value: { version: s.Version, apiVersion: s.ApiVersion, minApiVersion: s.MinAPIVersion, os: s.Os, arch: s.Arch } }
            : { ok: false, error: v.stderr || `docker version exited ${v.code}` };
    } catch (e) {
        version = { ok: false, error: `unreadable docker version output: ${(e as Error).message}` };
    }
    const nothing = { ok: false as const, error: "not read: the daemon did not answer" };
    if (!version.ok) return { host, version, info: nothing, containers: nothing, disk };
    const [i, ps] = await Promise.all([docker(["info", "--format", "{{json .}}"]), docker(["ps", "--no-trunc", "--format", "{{json .}}"])]);
    let info: DockerFacts["info"];
    try {
        const d = JSON.parse(i.stdout);
        if (i.code !== 0 || (Array.isArray(d.ServerErrors) && d.ServerErrors.length > 0)) throw new Error(i.stderr || d.ServerErrors?.join("; "));
        info = {
            ok: true,
            value: {
                runtimes: Object.keys(d.Runtimes ?? {}).sort(),
                defaultRuntime: String(d.DefaultRuntime ?? ""),
                cdiDevices: (d.DiscoveredDevices ?? []).filter((x: any) => x.Source === "cdi").map((x: any) => String(x.ID)),
                cdiSpecDirs: d.CDISpecDirs ?? [],
                ncpu: typeof d.NCPU === "number" ? d.NCPU : undefined,
                memTotalBytes: typeof d.MemTotal === "number" ? d.MemTotal : undefined,
            },
        };
    } catch (e) {
        info = { ok: false, error: (e as Error).message || i.stderr };
    }
    let containers: DockerFacts["containers"];
    if (ps.code !== 0) containers = { ok: false, error: ps.stderr };
    else {
        containers = {
            ok: true,
            value: ps.stdout
                .split("\n")
                .filter((l) => l.trim())
                .map((l) => JSON.parse(l))
                .map((c) => ({ name: String(c.Names ?? "").split(",")[0]!, ports: parsePorts(String(c.Ports ?? "")) })),
        };
    }
    let localPortsInUse: string[] | undefined;
    if (local) {
        localPortsInUse = [];
        for (const w of publishedPorts(plan)) if (w.protocol === "tcp" && (await portInUse(w.ip, w.port))) localPortsInUse.push(`${w.ip}:${w.port}`);
    }
    let gpus: DockerFacts["gpus"];
    if (local) {
        const smi = await runDocker(process.env.NVIDIA_SMI ?? "nvidia-smi", ["--query-gpu=name,memory.total", "--format=csv,noheader,nounits"], timeoutMs);
        // No nvidia-smi on this machine: no GPU driver here, which the NVIDIA runtime check reports; no finding.
        if (smi.code === 0) gpus = { ok: true, value: parseNvidiaSmi(smi.stdout) };
        else if (!smi.stderr.startsWith("cannot run ")) gpus = { ok: false, error: smi.stderr || `nvidia-smi exited ${smi.code}` };
    }
    return { host, version, info, containers, localPortsInUse, disk, gpus };
}
