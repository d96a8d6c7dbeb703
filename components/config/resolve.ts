/**
 * Applies the defaults that depend on other fields, once, with `??` (0 is a value), and
 * computes the training demand every capacity check reads. Pure: no Pulumi here.
 */
import { resolveHarbor } from "./harbor";
import { poolSizing } from "./pool-size";
import { defaultSandboxProvider, SANDBOX_PROVIDER_RECORDS } from "./sandbox-providers";
import { CUSTOM_PROGRAM } from "./programs";
import { defaultWsPing, ENV_CATALOG, NON_ROOT_UID, type CatalogEntry } from "./catalog";
import { DEFAULT_VLLM_IMAGE, STOCK_SANDBOX_IMAGE, type ParsedConfig } from "./schema";
import type { Layout } from "./terms";
import { plainSettings, secretKeyRefSettings } from "./secrets";
import type { Demand, PlatformConfig, ResolvedEnv } from "./types";

type Parsed = ParsedConfig;

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
    // Model-written code never runs as root unless config opts out (docs/design/env-hardening.md).
    const runsModelCode = entry?.runsModelCode ?? false;
    const runAsNonRoot = e.runAsNonRoot ?? runsModelCode;
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
        settings: { ...(entry?.settings ?? {}), ...plainSettings(e.settings) },
        secretSettings: secretKeyRefSettings(e.settings),
        cpu: e.resources.cpu,
        memory: e.resources.memory,
        nonRoot: entry?.nonRoot ?? false,
        egress: e.egress ?? entry?.egress ?? "dns",
        readOnlyRootFilesystem: e.readOnlyRootFilesystem ?? (runsModelCode || runAsNonRoot),
        scratchSize: e.scratchSize,
        ephemeralStorage: e.ephemeralStorage,
        runtimeClassName: e.runtimeClassName,
        terminationGraceSeconds: e.terminationGraceSeconds,
        wsPing: e.wsPing ?? defaultWsPing(layout),
        runAsUser: runAsNonRoot ? NON_ROOT_UID : undefined,
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
    const provider = p.sandboxes.provider ?? defaultSandboxProvider(t.layout, p.target.kind);
    const sizing = poolSizing({
        maxInflight: training.maxInflight,
        headroom: p.sandboxes.headroom,
        rolloutSeconds: p.sandboxes.rolloutSeconds,
        refillSeconds: p.sandboxes.refillSeconds,
        rolloutsOnMainProcess: t.program !== CUSTOM_PROGRAM,
        numProcesses,
        nodes: t.nodes,
    });
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
            poolSize: p.sandboxes.poolSize ?? sizing.size,
            sizing,
            image: p.sandboxes.image ?? (SANDBOX_PROVIDER_RECORDS[provider].defaultImage === "required" ? "" : STOCK_SANDBOX_IMAGE),
        },
        ingress: { ...p.ingress, enabled: p.ingress.enabled ?? t.layout === "blackbox" },
        ...(p.harbor !== undefined ? { harbor: resolveHarbor(p.harbor) } : {}),
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
