/**
 * The training node's ground floor: the description types and the fixed facts (ports, labels, paths,
 * container names) every file of this folder shares. Imports nothing from its own folder; the decisions
 * live one file each above it, `resolve.ts` lists them, `kubernetes.ts` / `docker.ts` translate.
 */
import type { PlatformNames } from "../config/names";
import type { PlatformConfig } from "../config/types";
import type { Layout } from "../config/terms";
import type { DockerMetricsTarget } from "../shared/docker-metrics";
import type { DnsEgress } from "../shared/kubernetes";
import type { MetricsFile, MetricsLinks, MetricsPort, MetricsSidecar, ScrapedPods, Scraper } from "../shared/metrics-pods";

// vLLM's port is decided once, in names.ts (the ingress's upstream address uses it too).
export { VLLM_PORT } from "../config/names";
import { VLLM_PORT } from "../config/names";

/**
 * What the training node reads of a stack's config: a narrow slice of PlatformConfig, fully defaulted
 * (`resolveDefaults` applies every default once), so the component can be used without the
 * Platform by building just these fields.
 */
export type TrainingConfig = Pick<PlatformConfig, "training" | "images" | "model" | "runId" | "sandboxes" | "target" | "envs"> & {
    /** Metrics endpoints (observability.enabled). @default off */
    readonly observability?: Pick<PlatformConfig["observability"], "enabled">;
};
/** The object names the training node uses (from `platformNames`). */
export type TrainingNames = Pick<PlatformNames, "training" | "namespaces" | "networks" | "ingress">;
/** NCCL weight-update group hosted by `trl vllm-serve` rank 0 (GRPOConfig.vllm_group_port default). */
export const TRL_GROUP_PORT = 51216;
/**
 * Where the NCCL check script is mounted (Kubernetes ConfigMap / Docker upload), in a directory of its own (mounted read-only there on Kubernetes), beside METRICS_PROGRAM_DIR (/opt/agentrl/observability),
 * never holding it: a ConfigMap volume mounted inside another read-only ConfigMap volume needs its mount point made
 * inside a read-only mount.
 */
export const NCCL_CHECK_PATH = "/opt/agentrl/nccl/nccl_check.py";
/** Rendezvous port of the NCCL check (loopback inside the pod / shared network namespace). */
export const NCCL_CHECK_PORT = 29531;
/** What the trainer calls vLLM at on one node: the same pod / network namespace, never a Service. */
export const INTERNAL_VLLM_URL = `http://localhost:${VLLM_PORT}`;
/** accelerate's rendezvous port on the rank-0 trainer pod (accelerate launch --main_process_port; its default). */
export const MAIN_PROCESS_PORT = 29500;
/**
 * JobSet v0.12.0 labels on every pod it creates (jobset api/jobset/v1alpha2/jobset_types.go):
 * the JobSet's name and the index of the pod's Job within its replicated job (= the machine rank,
 * one pod per Job).
 */
export const JOBSET_LABELS = {
    jobSetName: "jobset.sigs.k8s.io/jobset-name",
    replicatedJobName: "jobset.sigs.k8s.io/replicatedjob-name",
    jobIndex: "jobset.sigs.k8s.io/job-index",
} as const;
/** JobSet's exclusive placement annotation: one child Job per value of the topology label (jobset_types.go ExclusiveKey). */
export const EXCLUSIVE_TOPOLOGY_ANNOTATION = "alpha.jobset.sigs.k8s.io/exclusive-topology";
/** Kueue's queue label on a Job / JobSet (kueue's `constants.QueueLabel`); Kueue admits suspended workloads carrying it. */
export const KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name";
/** The trainer's replicated job in the JobSet: pods are `<jobset>-<this>-<rank>-0.<jobset>`. */
export const TRAINER_REPLICATED_JOB = "node";
/** vLLM's replicated job in the multi-node JobSet (its pod `<jobset>-vllm-0-0`). */
export const VLLM_REPLICATED_JOB = "vllm";
/** Where the model-cache volume is mounted; HF_HOME lives under it. */
export const MODEL_CACHE_PATH = "/cache";
/** Where the checkpoint volume is mounted; each run writes to `<root>/<runId>`. */
export const CHECKPOINT_ROOT = "/checkpoints";
/** Kubernetes container names (the podFailurePolicy and `kubectl logs -c` use them). */
export const CONTAINER = { vllm: "vllm", trainer: "trainer" } as const;
/** Secret env var names, decided once for both targets. */
export const SECRET_ENV = { hfToken: "HF_TOKEN", rolloutAdminKey: "SANDBOX_ROLLOUT_ADMIN_KEY" } as const;

/** A stack secret an extraEnv entry references (`{ secret: envSecret-<name> }`), by its config key. */
export type EnvSecretKey = `envSecret-${string}`;

/** The secrets a container may read; the component gets their values through its args. */
export type SecretName = keyof typeof SECRET_ENV | EnvSecretKey;

/**
 * Seconds without any answer from vLLM's `/health` after which the run ends (issue 26 point 8): the
 * shared-layout supervisor's watch (components/training/supervisor.ts) and the multi-node vLLM pod's
 * liveness probe. Longer than any pause a healthy vLLM makes (a weight update, a long prefill starve
 * its event loop for seconds), short enough that a hung vLLM does not hold GPU nodes for long.
 */
export const VLLM_UNANSWERED_SECONDS = 300;

/** What other components hand the TrainingNode (through the Platform). */
export interface TrainingLinks {
    /** Base URL of each env server by env name; the trainer gets `ENV_<NAME>_URL`. */
    readonly envUrls: Readonly<Record<string, string>>;
    /** Black box: where sandboxes reach vLLM (the ingress), and the pool's env vars for the trainer. */
    readonly sandbox?: {
        /** The ingress URL sandboxes call (`--sandbox-vllm-url`). */
        readonly url: string;
        /** The pool's env vars for the trainer (non-secret). */
        readonly trainerEnv: Readonly<Record<string, string>>;
        /**
         * The trainer mints a key per rollout at the ingress's verifier (docs/design/rollout-keys.md): it reads the
         * verifier's admin key as SANDBOX_ROLLOUT_ADMIN_KEY (a Secret of its own namespace; the Platform passes the
         * value); the URL and the forwarders' port are in trainerEnv. @default false
         */
        readonly mintsRolloutKeys?: boolean;
    };
    /** Pods of this stack the trainer must reach (for its egress policy). @default [] */
    readonly egressPeers?: readonly EgressPeer[];
    /** observability.enabled: who scrapes and the listener's program (the Platform hands them). @default undefined */
    readonly metrics?: MetricsLinks;
}

/** Pods of this stack the trainer talks to (a NetworkPolicy egress peer). */
export interface EgressPeer {
    /** What it is (plan.md, comments). */
    readonly what: string;
    readonly namespace: string;
    readonly podLabels: Readonly<Record<string, string>>;
    readonly port: number;
}

/** The trainer pod's egress allow-list (Kubernetes NetworkPolicy), or undefined when not restricted. */
export interface TrainerEgress {
    /** Where DNS queries may go (target.dns), for the trainer and, across nodes, vLLM. */
    readonly dns: DnsEgress;
    /** Pods of this stack: env routers, the ingress proxy, the sandboxes. */
    readonly peers: readonly EgressPeer[];
    /** TCP ports open to public addresses (the Hub and hosted services on 443; external envs). */
    readonly internetPorts: readonly number[];
    /** The API server (the trainer claims sandboxes): exact CIDRs, or any private address on these ports. */
    readonly apiServer?: { readonly cidrs?: readonly string[]; readonly ports: readonly number[] };
}

export interface HttpProbe {
    readonly path: string;
    readonly port: number;
    readonly periodSeconds: number;
    readonly failureThreshold: number;
    readonly timeoutSeconds: number;
}

export interface VolumeMount {
    readonly volume: "shm" | "modelCache" | "checkpoints";
    readonly path: string;
}

export interface ContainerDescription {
    /** Kubernetes container name. */
    readonly name: string;
    /** Docker container name (daemon-wide, so it carries the stack prefix and run id). */
    readonly dockerName: string;
    readonly image: string;
    /** Entrypoint override (Kubernetes `command`, Docker `entrypoints`); undefined keeps the image's. */
    readonly command?: readonly string[];
    /** Arguments (Kubernetes `args`, Docker `command`). */
    readonly args: readonly string[];
    /** Plain env vars. */
    readonly env: Readonly<Record<string, string>>;
    /** Secret env vars: env var name -> logical secret (never a literal value here). */
    readonly secretEnv: Readonly<Record<string, SecretName>>;
    /** GPUs of this container. */
    readonly gpus: number;
    /**
     * Host GPU indices the container is given (Docker device request). Disjoint between the
     * containers with gpuSharing `isolated`; with `shared` both get every training GPU and
     * CUDA_VISIBLE_DEVICES in `env` holds each to its own set.
     */
    readonly gpuDevices: readonly number[];
    /** Container ports (never published on a host or a public Service). */
    readonly ports: readonly number[];
    /** Metrics ports this container serves (named `metrics-*`; observability.enabled). @default [] */
    readonly metricsPorts?: readonly MetricsPort[];
    /** Kubernetes probes / Docker health check; no liveness where a supervisor watches vLLM instead (components/training/supervisor.ts). */
    readonly probes?: { readonly startup: HttpProbe; readonly liveness?: HttpProbe; readonly readiness: HttpProbe };
    readonly cpu: string;
    readonly memory: string;
    readonly mounts: readonly VolumeMount[];
}

/**
 * How vLLM and the trainer share the node's GPUs and what NCCL transport the weight update
 * takes. Measured on 2 x H200 (NVLink NV18, torch 2.11, NCCL 2.28.9), 16 GiB bf16 broadcast,
 * container isolation emulated (bench/gpu/nccl-isolation.sh): only own GPU visible, no
 * settings: crash ('Cuda failure 101 invalid device ordinal', as NVIDIA/nccl issues 1529 and
 * 1948 report); only own GPU + NCCL_P2P_DISABLE=1 NCCL_CUMEM_ENABLE=0: SHM, 46 GiB/s;
 * sockets: 5 GiB/s; every GPU visible, split by CUDA_VISIBLE_DEVICES: P2P, 346 GiB/s.
 */
export interface GpuSharingDescription {
    readonly mode: "shared" | "isolated" | "none" | "network";
    /** What NCCL uses for the weight update (plan.md). */
    readonly transport: string;
    /** Expected bandwidth class, from the measurement above (plan.md). */
    readonly bandwidth: string;
    /** Kubernetes only: vLLM and the trainer run in one container under the supervisor. */
    readonly oneContainer: boolean;
    /** NCCL/CUDA env both roles get (a user's NCCL_* in training.extraEnv already applied). */
    readonly env: Readonly<Record<string, string>>;
    /** The opt-in NCCL check before vLLM loads (components/training/gpu/nccl_check.py). */
    readonly check?: { readonly sizeGiB: number; readonly timeoutSeconds: number; readonly port: number; readonly path: string };
}

export interface VolumeDescription {
    /** Kubernetes PVC name / Docker host directory name. */
    readonly name: string;
    readonly size: string;
    /**
     * Kubernetes access mode: ReadWriteOnce on one node; ReadWriteMany with nodes > 1, where every
     * trainer pod (sharded checkpoints) and the vLLM pod mount the claims from different nodes.
     */
    readonly accessMode: "ReadWriteOnce" | "ReadWriteMany";
    /** Host directory on the Docker GPU host (docker target only). */
    readonly hostPath?: string;
}

/**
 * Multi-node training (training.nodes > 1, Kubernetes): the trainer as a JobSet of `nodes` one-pod
 * Jobs, one per node, ranks wired by accelerate from JobSet's labels; vLLM as the JobSet's first
 * replicated job, one pod on a node of its own, so it is queued, admitted and ended with the trainers.
 */
export interface MultiNodeDescription {
    readonly nodes: number;
    readonly processesPerNode: number;
    /** The replicated job's name (pods `<jobset>-<name>-<rank>-0`). */
    readonly replicatedJob: string;
    /** accelerate's rendezvous port on rank 0. */
    readonly mainProcessPort: number;
    /** Env vars the trainer gets from the downward API: var -> pod label (JobSet sets them). */
    readonly labelEnv: Readonly<Record<string, string>>;
    /** Env vars built from those (Kubernetes `$(VAR)` expansion), e.g. the rank-0 address. */
    readonly derivedEnv: Readonly<Record<string, string>>;
    /** Node label whose every value holds at most one trainer pod (JobSet exclusive placement). */
    readonly exclusiveTopology: string;
    /** vLLM's replicated job in the same JobSet, and its pod labels (the NetworkPolicies' selector). */
    readonly vllm: { readonly replicatedJob: string; readonly podLabels: Readonly<Record<string, string>> };
    /** vLLM's ClusterIP Service, which the trainer reaches for HTTP and the NCCL weight update. */
    readonly vllmService: string;
}

export interface TrainingDescription {
    /** Kubernetes: image pull Secrets every pod (and ServiceAccount) references; the Platform sets them when the stack has registryAuth. @default [] */
    readonly imagePullSecrets?: readonly string[];
    readonly layout: Layout;
    readonly target: "kubernetes" | "docker";
    readonly runId: string;
    /** Kubernetes Job name / Docker trainer container name. */
    readonly jobName: string;
    /** Kubernetes namespace of the training node. */
    readonly namespace: string;
    /** Docker network of the training node. */
    readonly network: string;
    readonly serviceAccount: string;
    /** Pod labels = the Service/NetworkPolicy selector (one object, no drift). */
    readonly podLabels: Readonly<Record<string, string>>;
    /** Only a black-box trainer on agent-sandbox talks to the API server (it claims sandboxes). */
    readonly automountServiceAccountToken: boolean;
    /** Kubernetes: what the trainer pod may reach; undefined when training.egress.restrict is false (or on Docker). */
    readonly egress?: TrainerEgress;
    /** vLLM as a separate container (absent in colocate: vLLM runs inside the trainer). */
    readonly vllm?: ContainerDescription;
    readonly trainer: ContainerDescription;
    /** GPU sharing between the roles and the NCCL settings it needs. */
    readonly gpuSharing: GpuSharingDescription;
    /** Host GPU indices per role. */
    readonly gpuLayout: { readonly vllm: readonly number[]; readonly trainer: readonly number[] };
    readonly internalUrl: string;
    /** Black box: the in-cluster address the ingress proxies to; absent otherwise. */
    readonly upstreamAddress?: string;
    /** Black box: the ClusterIP Service in front of vLLM, and who may reach it. */
    readonly ingressAccess?: {
        readonly serviceName: string;
        readonly port: number;
        readonly fromNamespace: string;
        readonly fromPodLabels: Readonly<Record<string, string>>;
    };
    readonly shmSize: string;
    readonly modelCache?: VolumeDescription;
    readonly checkpoints?: VolumeDescription;
    /** Kubernetes Secret per logical secret (name, key). */
    readonly secrets: Readonly<Record<SecretName, { readonly name: string; readonly key: string }>>;
    /** Secrets the run cannot start without. */
    readonly requiredSecrets: readonly SecretName[];
    readonly job: { readonly backoffLimit: number; readonly activeDeadlineSeconds: number };
    /** training.nodes > 1: the JobSet of the trainers and vLLM; absent on one node. */
    readonly multiNode?: MultiNodeDescription;
    /** Kubernetes with target.kueueQueue: the Kueue LocalQueue the trainer is submitted to (created suspended). */
    readonly kueueQueue?: string;
    readonly scheduling: {
        readonly gpuResourceName: string;
        readonly nodeSelector: Readonly<Record<string, string>>;
        readonly tolerations: ReadonlyArray<Record<string, unknown>>;
        readonly priorityClassName?: string;
        readonly storageClassName?: string;
    };
    /** Seconds the model may take to load (probe and Docker wait budget). */
    readonly modelLoadSeconds: number;
    /** observability.enabled: the metrics endpoints of the training pods and who may scrape them; absent when off. */
    readonly metrics?: TrainingMetrics;
    /** Docker, observability.enabled: the metrics ports its containers publish on the host's loopback (set by the Platform, platform/docker-metrics.ts). @default [] */
    readonly dockerMetrics?: readonly DockerMetricsTarget[];
    /**
     * The role runner (./role-runner) the trainer runs under: in the shared single container (each role,
     * its lines prefixed `[vllm] ` / `[trainer] `) always, elsewhere on Kubernetes with observability on;
     * `metricsListen` only with observability on. Absent where the trainer runs bare.
     */
    readonly roleRunner?: RoleRunner;
    /** The program files of the training pods (vLLM's listener config, the role runner and its module): one ConfigMap mounted read-only at METRICS_PROGRAM_DIR; absent when none. */
    readonly programs?: { readonly configMap: string; readonly files: readonly MetricsFile[] };
}

export interface TrainingMetrics {
    /** Who may scrape (observability.scraper). */
    readonly scraper: Scraper;
    /** vLLM's metrics-only listener: in the trainer pod on one node, in vLLM's pod with nodes > 1; absent in colocate. */
    readonly vllm?: MetricsSidecar;
    /** The trainer container's metrics port. */
    readonly trainer: MetricsPort;
    /** The pods a monitor scrapes, with their metrics ports. */
    readonly scraped: readonly ScrapedPods[];
    /** form annotations: the prometheus.io/* annotations of each scraped pod group, by role ({} otherwise). */
    readonly podAnnotations: Readonly<Record<string, Readonly<Record<string, string>>>>;
    /** The run stack's pod label (STACK_POD_LABEL), on every scraped pod's template beside its selector labels. */
    readonly stackLabels: Readonly<Record<string, string>>;
}

/** The roles it runs; each is the prefix of its lines (`[vllm] `, `[trainer] `). */
export type Role = "vllm" | "trainer";

/** How a pod runs the role runner. */
export interface RoleRunner {
    /** Its path in the container (METRICS_PROGRAM_DIR/role_runner.py). */
    readonly path: string;
    /** observability.enabled: where the trainer's runner serves GET /metrics. @default undefined (no listener) */
    readonly metricsListen?: string;
}
