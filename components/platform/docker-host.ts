/**
 * What a Docker stack takes from its one host: every container it starts, with the CPU and
 * memory limits the Docker code paths set (`cpus`, `memory`) and the GPUs they open. plan.md
 * shows it and the preflight compares it with `docker info` (NCPU, MemTotal). Docker limits are
 * not reservations: the daemon starts every container whatever the sum, so this is the only
 * place the sum is seen before the host is oversubscribed.
 */
import { dockerCpus, dockerMemoryMiB } from "../shared/quantity";
import type { PlatformPlan } from "./model";
import { replicaMetricsRelay } from "../env";

/** One group of identical containers. */
export interface HostShare {
    readonly what: string;
    readonly containers: number;
    /** CPUs per container (Docker `cpus`). */
    readonly cpus: number;
    /** MiB per container (Docker `memory`). */
    readonly memoryMiB: number;
    /** The settings that size it (none: fixed by the platform). */
    readonly fields?: string;
}

export interface DockerHostNeeds {
    readonly shares: readonly HostShare[];
    readonly containers: number;
    readonly cpus: number;
    readonly memoryMiB: number;
    /** Host GPU indices the containers open (both roles see every training GPU with gpuSharing shared). */
    readonly gpus: readonly number[];
}

/** The stack's containers on its Docker host; undefined for a Kubernetes stack. */
export function dockerHostNeeds(plan: PlatformPlan): DockerHostNeeds | undefined {
    if (plan.config.target.kind !== "docker") return undefined;
    const shares: HostShare[] = [];
    const add = (what: string, containers: number, cpu: string, memory: string, fields?: string) => {
        if (containers > 0) shares.push({ what, containers, cpus: Number(dockerCpus(cpu)), memoryMiB: dockerMemoryMiB(memory), fields });
    };
    const t = plan.training;
    if (t.vllm) add("vLLM", 1, t.vllm.cpu, t.vllm.memory, "training.vllmCpu / vllmMemory");
    add(t.vllm ? "trainer" : "trainer (vLLM colocated)", 1, t.trainer.cpu, t.trainer.memory, "training.trainerCpu / trainerMemory");
    for (const e of plan.envs) {
        if (e.kind !== "deployed") continue;
        const f = `envs.${e.name}`;
        add(`env \`${e.name}\` replicas`, e.replicas.containerNames.length, e.replicas.cpu, e.replicas.memory, `${f}.resources`);
        add(`env \`${e.name}\` router`, 1, e.router.cpu, e.router.memory);
        add(`env \`${e.name}\` capacity responder`, 1, e.router.responder.cpu, e.router.responder.memory);
    }
    if (plan.ingress) add("vLLM ingress proxy", 1, plan.ingress.resources.limits.cpu, plan.ingress.resources.limits.memory);
    // observability: the metrics sidecars (components' docker.ts), as many as the containers they watch.
    const listener = t.metrics?.vllm;
    if (t.vllm && listener) add("vLLM metrics listener", 1, listener.cpu, listener.memory);
    const im = plan.ingress?.metrics;
    if (im) for (const s of [im.exporter, im.log]) add(`ingress ${s.name}`, 1, s.cpu, s.memory);
    for (const e of plan.envs) {
        if (e.kind !== "deployed" || e.metrics === undefined) continue;
        const relay = replicaMetricsRelay(e);
        add(
            `env \`${e.name}\` session counters`,
            e.replicas.containerNames.length,
            e.metrics.sessions.cpu,
            e.metrics.sessions.memory,
            `envs.${e.name}.replicas`,
        );
        add(`env \`${e.name}\` session counters' relay`, 1, relay.cpu, relay.memory);
    }
    const gpus = [...new Set([...(t.vllm?.gpuDevices ?? []), ...t.trainer.gpuDevices])].sort((a, b) => a - b);
    return {
        shares,
        containers: shares.reduce((n, s) => n + s.containers, 0),
        // Sums of decimal CPUs: round away float noise (0.1 + 0.2).
        cpus: Math.round(shares.reduce((n, s) => n + s.containers * s.cpus, 0) * 1000) / 1000,
        memoryMiB: shares.reduce((n, s) => n + s.containers * s.memoryMiB, 0),
        gpus,
    };
}

/** MiB as the plan and preflight print it: GiB with one decimal from 1 GiB up. */
export function formatMiB(mib: number): string {
    return mib >= 1024 ? `${Math.round((mib / 1024) * 10) / 10} GiB` : `${mib} MiB`;
}
