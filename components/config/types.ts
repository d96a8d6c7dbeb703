/**
 * The resolved configuration's types: what resolveDefaults returns and every component reads.
 * Types only; the defaults that fill them are in resolve.ts.
 */
import type { CatalogEntry, CatalogName, WsPing } from "./catalog";
import type { TenantOutputs } from "./cluster-schema";
import type { HarborAgent } from "./harbor-facts";
import type { PoolSizing } from "./pool-size";
import type { ParsedConfig } from "./schema";
import type { GpuSharing, Layout, SandboxProviderName } from "./terms";

type Parsed = ParsedConfig;

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

/** A key of an existing Kubernetes Secret. */
export interface SecretKeyRef {
    readonly name: string;
    readonly key: string;
}

/** An env server with its catalog entry (or custom fields) and config applied. */
export interface ResolvedEnv extends Pick<CatalogEntry, "image" | "port" | "healthPath" | "wsPath" | "concurrentSessions" | "sessionsEnvVar"> {
    readonly name: string;
    readonly catalog: CatalogName | "custom";
    readonly sessionsPerReplica: number;
    /** Replicas deployed (0 for an external env). */
    readonly replicas: number;
    readonly headroomReplicas: number;
    /** Plain-text settings (catalog defaults, then config). */
    readonly settings: Readonly<Record<string, string>>;
    /** Settings taken from a key of an existing Kubernetes Secret in the env's namespace (env var -> Secret, key). */
    readonly secretSettings: Readonly<Record<string, SecretKeyRef>>;
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
    /** The uid/gid the replicas run as when non-root (envs.<name>.runAsNonRoot, by default true for envs that run model code); unset: the image's user. */
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

/** A Harbor task image and the key naming its warm pool (harbor.ts taskPoolKey). */
export interface HarborTaskImage {
    readonly image: string;
    /** harbor.taskImages[].name as written. */
    readonly name?: string;
    /** DNS label naming its pool's objects and labelling its pods: the name, else from the image. */
    readonly key: string;
}

/** `harbor` with each task image's pool key. */
export interface ResolvedHarbor {
    readonly agent: HarborAgent;
    readonly taskImages: readonly HarborTaskImage[];
}

/** The fully defaulted, typed configuration every component reads. */
export interface PlatformConfig {
    readonly stack: string;
    /** Whether prod rules apply (config `prod`, default: stack `prod` or `prod-*`). */
    readonly prod: boolean;
    /** `prod` as written in config (undefined: from the stack name). */
    readonly prodFromConfig?: boolean;
    readonly recipe?: string;
    readonly runId: string;
    readonly clusterStack?: string;
    /**
     * What the cluster stack's outputs said (applyClusterStack): the cluster's identity (absent offline)
     * and, with target.team, the team's namespaces, quotas and claim-lifetime bound.
     */
    readonly cluster?: { readonly id?: string; readonly tenant?: TenantOutputs };
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
        readonly provider: SandboxProviderName;
        readonly poolSize: number;
        /** The pool the run needs: its burst of claims and the refill margin (pool-size.ts). */
        readonly sizing: PoolSizing;
        /** Required for agent-sandbox (validation refuses a config without it; then ""). */
        readonly image: string;
    };
    readonly ingress: Omit<Parsed["ingress"], "enabled"> & { readonly enabled: boolean };
    /** The Harbor path: its agent and one warm pool per task image (absent: off). */
    readonly harbor?: ResolvedHarbor;
    /** Metrics, alerts and dashboards (components/observability/). */
    readonly observability: Parsed["observability"];
}
