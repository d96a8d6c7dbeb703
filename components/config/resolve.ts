/**
 * Applies the defaults that depend on other fields, once, with `??` (0 is a value), and
 * computes the training demand every capacity check reads. Pure: no Pulumi here.
 */
import { CUSTOM_PROGRAM } from "./programs";
import { defaultWsPing, ENV_CATALOG, NON_ROOT_UID, type CatalogEntry, type CatalogName, type WsPing } from "./catalog";
import type { TenantOutputs } from "./cluster";
import { DEFAULT_VLLM_IMAGE, STOCK_SANDBOX_IMAGE, type GpuSharing, type Layout, type ParsedConfig } from "./schema";

export type TargetKind = "kubernetes" | "docker";

/** Live sessions/sandboxes the training run holds at once (TRL GRPOConfig arithmetic). */
export interface Demand {
    /** per_device_train_batch_size x num_processes (all nodes) x steps_per_generation. */
    readonly generationBatch: number;
    /** per_device_eval_batch_size x num_processes (all nodes; 0 when eval is off). */
    readonly evalBatch: number;
    /** Prompts per generation batch (generationBatch / numGenerations). */
    readonly promptsPerGeneration: number;
    /** Sessions an env must hold at once: max(generation batch, eval batch). */
    readonly envSessions: number;
}

/** An env server with its catalog entry (or custom fields) and config applied. */
export interface ResolvedEnv extends Pick<CatalogEntry, "image" | "port" | "healthPath" | "wsPath" | "concurrentSessions" | "sessionsEnvVar"> {
    readonly name: string;
    readonly catalog: CatalogName | "custom";
    readonly sessionsPerReplica: number;
    /** Replicas deployed (0 for an external env). */
    readonly replicas: number;
    readonly headroomReplicas: number;
    readonly settings: Readonly<Record<string, string>>;
    readonly cpu: string;
    readonly memory: string;
    readonly nonRoot: boolean;
    /** What replicas may reach besides their router (catalog default, or config). */
    readonly egress: "dns" | "internet";
    /** Read-only root filesystem with a /tmp scratch dir of `scratchSize`. */
    readonly readOnlyRootFilesystem: boolean;
    readonly scratchSize: string;
    readonly ephemeralStorage: string;
    readonly runtimeClassName?: string;
    readonly terminationGraceSeconds: number;
    /** Server-side websocket keepalive of the replicas (config, else by layout: defaultWsPing). */
    readonly wsPing: WsPing;
    /** The uid/gid the replicas run as when config opts in to non-root (envs.<name>.runAsNonRoot); unset: the image's user. */
    readonly runAsUser?: number;
    /** Set when nothing is deployed and the env lives elsewhere. */
    readonly external?: { readonly url: string; readonly sessions: number };
    /** Sessions the env holds at once (replicas x sessions, or the external cap). */
    readonly capacity: number;
    /** Whether `replicas` was written in config (else sized from the demand). */
    readonly replicasFromConfig: boolean;
    /** Whether `sessionsPerReplica` was written in config. */
    readonly sessionsFromConfig: boolean;
    /** `concurrentSessions` as written in config (only custom envs may declare it). */
    readonly concurrentSessionsFromConfig?: boolean;
}

type Parsed = ParsedConfig;

/** The fully defaulted, typed configuration every component reads. */
export interface PlatformConfig {
    readonly stack: string;
    /** Whether prod rules apply (config `prod`, default: stack `prod` or `prod-*`). */
    readonly prod: boolean;
    /** `prod` as written in config (undefined: from the stack name). */
    readonly prodFromConfig?: boolean;
    readonly recipe?: string;
    readonly runId: string;
    /** The cluster stack this run stack takes its shared objects from (`<org>/<project>/<stack>`). */
    readonly clusterStack?: string;
    /**
     * What the cluster stack's outputs said (applyClusterStack): the cluster's identity (absent offline)
     * and, with target.team, the team's namespaces, quotas and claim-lifetime bound.
     */
    readonly cluster?: { readonly id?: string; readonly tenant?: TenantOutputs };
    /** The program's preflight step: off, warn or enforce. */
    readonly preflight: "off" | "warn" | "enforce";
    readonly target: Parsed["target"] & { readonly namespacePrefix?: string };
    readonly model: Parsed["model"];
    readonly images: Parsed["images"] & {
        readonly vllm: string;
        /** images.vllm as written (undefined: defaulted). */
        readonly vllmFromConfig?: string;
        /** Required: validation refuses a config without it (then this is ""). */
        readonly trainer: string;
    };
    readonly training: Omit<Parsed["training"], "vllmGpus" | "trainerGpus" | "numProcesses" | "stepsPerGeneration" | "gpuSharing" | "argsCheck"> & {
        readonly layout: Layout;
        /** Whether the program's own parser checks the command line at pod start (default: named programs). */
        readonly argsCheck: boolean;
        readonly vllmGpus: number;
        readonly trainerGpus: number;
        readonly numProcesses: number;
        readonly stepsPerGeneration: number;
        /**
         * `none` in colocate (vLLM runs inside the trainer process); `network` with nodes > 1 (vLLM on
         * a node of its own: the weight update crosses the network).
         */
        readonly gpuSharing: GpuSharing | "none" | "network";
        /** gpuSharing as written in config (undefined: defaulted). */
        readonly gpuSharingFromConfig?: GpuSharing;
    };
    readonly demand: Demand;
    readonly envs: readonly ResolvedEnv[];
    readonly sandboxes: Omit<Parsed["sandboxes"], "provider" | "poolSize" | "image"> & {
        readonly provider: "agent-sandbox" | "docker" | "hf" | "none";
        readonly poolSize: number;
        /** Required for agent-sandbox (validation refuses a config without it; then ""). */
        readonly image: string;
    };
    readonly ingress: Omit<Parsed["ingress"], "enabled"> & { readonly enabled: boolean };
    /** Metrics, alerts and dashboards (components/observability/). */
    readonly observability: Parsed["observability"];
}

/** Stacks that may use the ambient kubeconfig context (a developer's own cluster). */
export function isDevStack(stack: string): boolean {
    return stack === "dev" || stack.startsWith("dev-");
}

export function isProdStack(stack: string): boolean {
    return stack === "prod" || stack.startsWith("prod-");
}

/** Trainer processes of the whole run: processes per node x trainer nodes (accelerate's num_processes). */
export function totalProcesses(t: Pick<PlatformConfig["training"], "numProcesses" | "nodes">): number {
    return t.numProcesses * t.nodes;
}

export function computeDemand(t: PlatformConfig["training"]): Demand {
    const generationBatch = t.perDeviceTrainBatchSize * totalProcesses(t) * t.stepsPerGeneration;
    const evalBatch = t.evalSize > 0 ? t.perDeviceEvalBatchSize * totalProcesses(t) : 0;
    return {
        generationBatch,
        evalBatch,
        promptsPerGeneration: generationBatch / t.numGenerations,
        envSessions: Math.max(generationBatch, evalBatch),
    };
}

function resolveEnv(name: string, e: Parsed["envs"][string], demand: Demand, layout: Layout): ResolvedEnv {
    const entry: CatalogEntry | undefined = e.catalog === "custom" ? undefined : ENV_CATALOG[e.catalog];
    const concurrentSessions = e.concurrentSessions ?? entry?.concurrentSessions ?? false;
    const sessionsPerReplica = e.sessionsPerReplica ?? entry?.defaultSessions ?? 1;
    const base = {
        name,
        catalog: e.catalog,
        image: e.image ?? entry?.image ?? "",
        port: entry?.port ?? 8000,
        healthPath: entry?.healthPath ?? "/health",
        wsPath: entry?.wsPath ?? "/ws",
        concurrentSessions,
        sessionsEnvVar: entry?.sessionsEnvVar ?? (concurrentSessions ? "MAX_CONCURRENT_ENVS" : undefined),
        sessionsPerReplica,
        headroomReplicas: e.headroomReplicas,
        settings: { ...(entry?.settings ?? {}), ...e.settings },
        cpu: e.resources.cpu,
        memory: e.resources.memory,
        nonRoot: entry?.nonRoot ?? false,
        egress: e.egress ?? entry?.egress ?? "dns",
        readOnlyRootFilesystem: e.readOnlyRootFilesystem ?? ((entry?.runsModelCode ?? false) || e.runAsNonRoot),
        scratchSize: e.scratchSize,
        ephemeralStorage: e.ephemeralStorage,
        runtimeClassName: e.runtimeClassName,
        terminationGraceSeconds: e.terminationGraceSeconds,
        wsPing: e.wsPing ?? defaultWsPing(layout),
        runAsUser: e.runAsNonRoot ? NON_ROOT_UID : undefined,
        replicasFromConfig: e.replicas !== undefined,
        sessionsFromConfig: e.sessionsPerReplica !== undefined,
        concurrentSessionsFromConfig: e.concurrentSessions,
    };
    if (e.external) {
        return { ...base, replicas: 0, external: { url: e.external.url, sessions: e.external.sessions }, capacity: e.external.sessions };
    }
    const replicas = e.replicas ?? Math.ceil(demand.envSessions / Math.max(1, sessionsPerReplica)) + e.headroomReplicas;
    return { ...base, replicas, capacity: replicas * sessionsPerReplica };
}

/** Fills every default that depends on other fields. */
export function resolveDefaults(p: Parsed, stack: string): PlatformConfig {
    const t = p.training;
    // nodes > 1: every trainer node and the vLLM node are whole GPU nodes of their own.
    const multiNode = t.nodes > 1;
    const vllmGpus = t.vllmGpus ?? (t.layout === "whitebox-colocate" ? 0 : multiNode ? t.gpusOnNode : 1);
    const trainerGpus = t.trainerGpus ?? (multiNode ? t.gpusOnNode : Math.max(1, t.gpusOnNode - vllmGpus));
    const numProcesses = t.numProcesses ?? trainerGpus;
    const gpuSharing = t.layout === "whitebox-colocate" ? "none" : multiNode ? "network" : (t.gpuSharing ?? "shared");
    const training = {
        ...t,
        vllmGpus,
        trainerGpus,
        numProcesses,
        stepsPerGeneration: t.stepsPerGeneration ?? t.gradientAccumulationSteps,
        argsCheck: t.argsCheck ?? t.program !== CUSTOM_PROGRAM,
        gpuSharing,
        gpuSharingFromConfig: t.gpuSharing,
    } as const;
    const demand = computeDemand(training);
    const defaultProvider = t.layout !== "blackbox" ? "none" : p.target.kind === "kubernetes" ? "agent-sandbox" : "docker";
    const provider = p.sandboxes.provider ?? defaultProvider;
    return {
        stack,
        prod: p.prod ?? isProdStack(stack),
        prodFromConfig: p.prod,
        recipe: p.recipe,
        runId: p.runId,
        clusterStack: p.clusterStack,
        preflight: p.preflight,
        target: p.target.kind === "kubernetes" ? { ...p.target, namespacePrefix: p.target.namespacePrefix ?? defaultNamespacePrefix(stack) } : p.target,
        model: p.model,
        images: { ...p.images, vllm: p.images.vllm ?? DEFAULT_VLLM_IMAGE, vllmFromConfig: p.images.vllm, trainer: p.images.trainer ?? "" },
        training,
        demand,
        envs: Object.entries(p.envs).map(([name, e]) => resolveEnv(name, e, demand, t.layout)),
        sandboxes: {
            ...p.sandboxes,
            provider,
            poolSize: p.sandboxes.poolSize ?? training.maxInflight + p.sandboxes.headroom,
            image: p.sandboxes.image ?? (provider === "agent-sandbox" ? "" : STOCK_SANDBOX_IMAGE),
        },
        ingress: { ...p.ingress, enabled: p.ingress.enabled ?? t.layout === "blackbox" },
        observability: p.observability,
    };
}

/** `arl-<stack>`, made a DNS label (stack names allow characters namespaces do not). */
export function defaultNamespacePrefix(stack: string): string {
    const cleaned = stack
        .toLowerCase()
        .replace(/[^a-z0-9-]+/g, "-")
        .replace(/^-+|-+$/g, "")
        .slice(0, 30);
    return `arl-${cleaned || "stack"}`.replace(/-+$/, "");
}
