/**
 * The TrainingNode's one resolve step: pure, no Pulumi. Every port, flag, env var, GPU
 * assignment, probe and volume of the training node is decided here, once, for both
 * targets; `kubernetes.ts` and `docker.ts` only translate this description.
 *
 * Upstream facts this depends on:
 * - black box `vllm serve` flags and `VLLM_SERVER_DEV_MODE=1`: trl
 *   `examples/async_grpo_opencode/opencode_hf_sandbox.py` docstring (vllm >= 0.22).
 * - `trl vllm-serve` flags: trl `trl/scripts/vllm_serve.py`; in trl 1.16 it execs `vllm serve`, whose
 *   health route is `GET /health` (`/health/` answers 307).
 * - GRPOConfig fields (`vllm_mode`, `vllm_server_base_url`, `vllm_group_port` 51216,
 *   `steps_per_generation`): trl `trl/trainer/grpo_config.py`; AsyncGRPOConfig
 *   (`vllm_server_base_url`, `max_inflight_tasks`, no `vllm_mode`/`steps_per_generation`):
 *   trl `trl/experimental/async_grpo/async_grpo_config.py`.
 *
 * The trainer's command line: a named program's own flags (training.program; the facts and their
 * sources in components/config/programs.ts, rendered by program-args.ts). What a `custom` script
 * must accept instead (white box: TRL's `TrlParser` over `GRPOConfig`,
 * TRL's `ModelConfig` and the script's own dataclass; black box: `TrlParser` over
 * `AsyncGRPOConfig` and the script's own dataclass, NOT `ModelConfig`: both define `--dtype`
 * and one parser over the two fails with "conflicting option string"):
 * - `--model_name_or_path`, `--model_revision` (ModelConfig in white box; the script's own
 *   dataclass fields in black box).
 * - TrainingArguments/GRPOConfig: `--output_dir`, `--per_device_train_batch_size`,
 *   `--gradient_accumulation_steps`, `--num_generations`, `--per_device_eval_batch_size`,
 *   `--max_steps`, `--push_to_hub`, `--hub_model_id`, `--report_to trackio`, `--project`,
 *   `--trackio_space_id`, `--save_total_limit`, `--resume_from_checkpoint` (the script must hand it to
 *   `trainer.train(resume_from_checkpoint=...)`).
 * - white box (GRPOConfig): `--steps_per_generation`, `--use_vllm`, `--vllm_mode`, and in
 *   server mode `--vllm_server_base_url`, `--vllm_group_port`.
 * - black box (AsyncGRPOConfig): `--vllm_server_base_url`, `--max_inflight_tasks`.
 * - the script's own arguments (seed-specific, dashed): `--dataset-size` (the MBPP seed
 *   defaults to 120 unless `--dataset-size 170` is passed), `--eval-size` (held-out
 *   problems, only when > 0), black box `--sandbox-vllm-url` (the URL sandboxes reach vLLM
 *   through: the ingress). Env servers arrive as env vars `ENV_<NAME>_URL` (name upper-cased,
 *   `-` -> `_`), the sandbox pool as `SANDBOX_PROVIDER` + the pool's own vars, the ingress
 *   key for sandboxes as the secret env var `SANDBOX_API_KEY` (the script passes it to
 *   OpenEnv's `OpenCodeConfig(api_key=...)`, whose in-sandbox proxy sends it upstream).
 */
import { dnsEgressFor } from "../config/dns";
import type { DnsEgress } from "../shared/kubernetes";
import { DEFAULT_KEEP_LAST } from "../config/checkpoints";
import { ConfigError } from "../config/parse";
import { programFacts } from "../config/programs";
import { modelSource, programArgs, programLauncher, withStartChecks } from "./program-args";
import { resumeCommand } from "./checkpoint-select";
import { blackboxServerArgs, whiteboxServerArgs } from "./vllm-args";
import { vllmServerSettings } from "../config/vllm-settings";
import { dnsName, podLabels, type PlatformNames, vllmPodLabels } from "../config/names";
import type { PlatformConfig } from "../config/resolve";
import type { Layout } from "../config/schema";
import type { MetricsFile, MetricsLinks, MetricsPort } from "../shared/metrics-pods";
import { trainingMetrics, type TrainingMetrics } from "./metrics";
import type { DockerMetricsTarget } from "../shared/docker-metrics";
import { type RoleRunner, roleRunnerArgv, roleRunnerAt, roleRunnerFiles } from "./role-runner";

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
 * JobSet v0.10.1 labels on every pod it creates (jobset api/jobset/v1alpha2/jobset_types.go):
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
/** The Docker daemon's socket on the GPU host (Docker's default). */
export const DOCKER_SOCKET = "/var/run/docker.sock";
export const SECRET_ENV = { hfToken: "HF_TOKEN", sandboxKey: "SANDBOX_API_KEY" } as const;

/** The secrets a container may read; the component gets their values through its args. */
export type SecretName = keyof typeof SECRET_ENV;

/** What other components hand the TrainingNode (through the Platform). */
export interface TrainingLinks {
    /** Base URL of each env server by env name; the trainer gets `ENV_<NAME>_URL`. */
    readonly envUrls: Readonly<Record<string, string>>;
    /** Black box: where sandboxes reach vLLM (the ingress), and the pool's env vars for the trainer. */
    readonly sandbox?: {
        /** The ingress URL sandboxes call (`--sandbox-vllm-url`). */
        readonly url: string;
        /** Sandbox provider (agent-sandbox, docker, hf). */
        readonly provider: string;
        /** The pool's env vars for the trainer (non-secret). */
        readonly trainerEnv: Readonly<Record<string, string>>;
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
    /**
     * Docker black box with the Docker sandbox pool: the host's Docker socket, mounted into the
     * trainer, which reaches its sandboxes with `docker exec` (they sit on an internal network it
     * is not on). This gives the trainer control of the host's Docker daemon: the trainer is
     * trusted code; the sandboxes never get the socket.
     */
    readonly dockerSocket?: { readonly hostPath: string; readonly containerPath: string };
}

const PROBE_PERIOD = 10;

/**
 * Seconds without any answer from vLLM's `/health` after which the run ends (issue 26 point 8): the
 * shared-layout supervisor's watch (components/training/supervisor.ts) and the multi-node vLLM pod's
 * liveness probe. Longer than any pause a healthy vLLM makes (a weight update, a long prefill starve
 * its event loop for seconds), short enough that a hung vLLM does not hold GPU nodes for long.
 */
export const VLLM_UNANSWERED_SECONDS = 300;

/** Env var name for an env server's URL: `ENV_<NAME>_URL`. */
export function envUrlVar(envName: string): string {
    return `ENV_${envName.toUpperCase().replace(/[^A-Z0-9]+/g, "_")}_URL`;
}

function range(start: number, count: number): number[] {
    return Array.from({ length: count }, (_, i) => start + i);
}

/** accelerate flags the platform sets for a multi-node run (from JobSet's labels); the command may not set them. */
const MULTI_NODE_FLAGS = ["--num_machines", "--machine_rank", "--main_process_ip", "--main_process_port"] as const;

/**
 * Multi-node: `accelerate launch` with every process of the run (`--num_processes` is the total over
 * all machines), this pod's rank and the rank-0 address, both expanded by Kubernetes from env vars
 * the downward API fills from JobSet's labels.
 */
function multiNodeLauncher(command: readonly string[] | undefined, m: MultiNodeDescription, problems: string[]): string[] | undefined {
    const before = problems.length;
    const single = launcher(command, m.processesPerNode * m.nodes, problems);
    // launcher already said why a command that is not accelerate (nor python) cannot start the processes.
    if (single === undefined || problems.length > before) return undefined;
    const taken = MULTI_NODE_FLAGS.filter((f) => single.includes(f));
    if (taken.length > 0) {
        problems.push(
            `training.command: ${taken.join(", ")} ${taken.length === 1 ? "is" : "are"} set by the platform from JobSet's labels when training.nodes > 1: remove ${taken.length === 1 ? "it" : "them"} from the command`,
        );
        return undefined;
    }
    return [
        ...single.slice(0, 2),
        "--num_machines",
        String(m.nodes),
        "--machine_rank",
        "$(MACHINE_RANK)",
        "--main_process_ip",
        "$(MAIN_PROCESS_IP)",
        "--main_process_port",
        String(m.mainProcessPort),
        ...single.slice(2),
    ];
}

/** `python x.py` or `accelerate launch x.py`, with `--num_processes` set for accelerate. */
function launcher(command: readonly string[] | undefined, numProcesses: number, problems: string[]): string[] | undefined {
    if (command === undefined) {
        problems.push(
            `training.command: required: the command that starts the training script baked into the trainer image (e.g. [python, /app/train.py]${numProcesses > 1 ? `; ${numProcesses} processes need 'accelerate launch <script>'` : ""})`,
        );
        return undefined;
    }
    const [first, second, ...rest] = command;
    if (first === "accelerate" && second === "launch") {
        return command.includes("--num_processes") ? [...command] : ["accelerate", "launch", "--num_processes", String(numProcesses), ...rest];
    }
    if (numProcesses > 1) {
        if (first === "python" || first === "python3") return ["accelerate", "launch", "--num_processes", String(numProcesses), ...command.slice(1)];
        problems.push(
            `training.command: ${numProcesses} trainer processes need 'accelerate launch <script>' (or 'python <script>', turned into it), got '${command.join(" ")}'`,
        );
    }
    return [...command];
}

/**
 * The liveness probe of a vLLM in a pod of its own with training.nodes > 1. Its kill is not a restart
 * in place (restartPolicy Never): vLLM's Job fails and the JobSet's `vllmFailed` rule restarts every
 * trainer with it (their NCCL weight-sync group with vLLM does not survive a vLLM restart), counted
 * against training.backoffLimit (0 by default: the run ends). So it ends the run on point 8's bound,
 * not after a minute of a busy vLLM: 30 consecutive failures 10 s apart, each waiting at most 10 s
 * (the kubelet probes once per period and a probe blocks its worker up to its timeout,
 * pkg/kubelet/prober/worker.go, Kubernetes 1.36), i.e. VLLM_UNANSWERED_SECONDS without a 200 within
 * 10 s. Unlike the supervisor's watch, an answer slower than 10 s counts as none: the kubelet cannot
 * wait longer per probe without loosening the bound.
 */
function ownPodLiveness(path: string): HttpProbe {
    return { path, port: VLLM_PORT, periodSeconds: PROBE_PERIOD, failureThreshold: VLLM_UNANSWERED_SECONDS / PROBE_PERIOD, timeoutSeconds: PROBE_PERIOD };
}

function healthProbes(path: string, modelLoadSeconds: number, ownPod: boolean): ContainerDescription["probes"] {
    return {
        // period x threshold >= modelLoadSeconds: a slow model download is not a crash loop.
        startup: { path, port: VLLM_PORT, periodSeconds: PROBE_PERIOD, failureThreshold: Math.ceil(modelLoadSeconds / PROBE_PERIOD), timeoutSeconds: 5 },
        // Runs only once the startup probe passed (Kubernetes semantics).
        liveness: ownPod ? ownPodLiveness(path) : { path, port: VLLM_PORT, periodSeconds: PROBE_PERIOD, failureThreshold: 6, timeoutSeconds: 10 },
        readiness: { path, port: VLLM_PORT, periodSeconds: 5, failureThreshold: 3, timeoutSeconds: 5 },
    };
}

/** Resolves the training node of a run; throws ConfigError with every problem at once. */
export function resolveTrainingNode(config: TrainingConfig, names: TrainingNames, links: TrainingLinks): TrainingDescription {
    const t = config.training;
    const layout = t.layout;
    const problems: string[] = [];
    const blackbox = layout === "blackbox";
    const colocate = layout === "whitebox-colocate";

    // nodes > 1 (Kubernetes; validation refuses it elsewhere): the trainer as a JobSet, vLLM on a node of its own.
    const multiNode: MultiNodeDescription | undefined =
        t.nodes > 1
            ? {
                  nodes: t.nodes,
                  processesPerNode: t.numProcesses,
                  replicatedJob: TRAINER_REPLICATED_JOB,
                  mainProcessPort: MAIN_PROCESS_PORT,
                  labelEnv: { JOBSET_NAME: JOBSET_LABELS.jobSetName, MACHINE_RANK: JOBSET_LABELS.jobIndex },
                  // JobSet's headless Service is named after the JobSet and each pod's hostname is
                  // <jobset>-<replicatedJob>-<jobIndex>-<podIndex> (jobset pkg/controllers/jobset_controller.go).
                  derivedEnv: { MAIN_PROCESS_IP: `$(JOBSET_NAME)-${TRAINER_REPLICATED_JOB}-0-0.$(JOBSET_NAME)` },
                  exclusiveTopology: "kubernetes.io/hostname",
                  vllm: { replicatedJob: VLLM_REPLICATED_JOB, podLabels: vllmPodLabels(config, names) },
                  vllmService: names.training.vllmService,
              }
            : undefined;
    // Where the trainer reaches vLLM: the same pod on one node, vLLM's Service across nodes.
    const vllmUrl = multiNode ? `http://${names.training.vllmUpstream}` : INTERNAL_VLLM_URL;
    const accessMode = multiNode ? "ReadWriteMany" : "ReadWriteOnce";

    // GPUs: vLLM gets the first indices, the trainer the next ones (disjoint: TRL refuses
    // one CUDA device for two roles, trl/scripts/vllm_serve.py). Across nodes each role starts at 0.
    const vllmDevices = colocate ? [] : range(0, t.vllmGpus);
    const trainerDevices = range(multiNode ? 0 : vllmDevices.length, t.trainerGpus);
    const gpuSharing = describeGpuSharing(t.gpuSharing, config.target.kind, t.ncclCheck, t.extraEnv);
    const shared = gpuSharing.mode === "shared";
    // Shared: both containers get every training GPU and CUDA_VISIBLE_DEVICES splits them
    // (CUDA_DEVICE_ORDER=PCI_BUS_ID makes the indices the host's, as nvidia-smi numbers them).
    const allDevices = [...vllmDevices, ...trainerDevices];
    const visible = (own: readonly number[]): Record<string, string> => (shared ? { CUDA_VISIBLE_DEVICES: own.join(",") } : {});

    const modelCache: VolumeDescription | undefined = t.modelCache.enabled
        ? { name: volumeName(names.training.modelCache, multiNode), size: t.modelCache.size, accessMode, hostPath: hostDir(config, names.training.modelCache) }
        : undefined;
    const checkpoints: VolumeDescription | undefined = t.checkpoints.enabled
        ? {
              name: volumeName(names.training.checkpoints, multiNode),
              size: t.checkpoints.size,
              accessMode,
              hostPath: hostDir(config, names.training.checkpoints),
          }
        : undefined;
    const mounts: VolumeMount[] = [
        { volume: "shm", path: "/dev/shm" },
        { volume: "modelCache", path: MODEL_CACHE_PATH },
        { volume: "checkpoints", path: CHECKPOINT_ROOT },
    ];
    const cacheEnv = { HF_HOME: `${MODEL_CACHE_PATH}/huggingface` };
    const hfSecretEnv: Record<string, SecretName> = { [SECRET_ENV.hfToken]: "hfToken" };

    const program = programFacts(t.program);

    // --- vLLM ---------------------------------------------------------------------------
    const vllmSettings = vllmServerSettings(config);
    let vllm: ContainerDescription | undefined;
    const vllmBase = {
        name: CONTAINER.vllm,
        dockerName: names.training.vllm,
        secretEnv: hfSecretEnv,
        gpus: vllmDevices.length,
        gpuDevices: shared ? allDevices : vllmDevices,
        ports: [VLLM_PORT],
        cpu: t.vllmCpu,
        memory: t.vllmMemory,
        mounts: mounts.filter((m) => m.volume !== "checkpoints"),
    };
    // A named program loading a pinned revision from its directory asks vLLM for the model under that
    // path: vLLM answers to both names (--served-model-name takes several).
    const pinnedDir = program !== undefined ? modelSource(config.model).download && modelSource(config.model).arg : undefined;
    const servedNames = pinnedDir ? ["--served-model-name", config.model.name, pinnedDir] : [];
    if (layout === "whitebox-server") {
        // What `trl vllm-serve` execs in TRL 1.16, in dev mode (trl/scripts/vllm_serve.py main).
        vllm = {
            ...vllmBase,
            image: config.images.trainer, // the TRL image carries vllm (colocate needs it anyway)
            command: ["vllm", "serve"],
            args: whiteboxServerArgs(config, vllmSettings, servedNames),
            env: { ...cacheEnv, ...gpuSharing.env, ...visible(vllmDevices), ...(program?.env ?? {}), ...vllmSettings.extraEnv, VLLM_SERVER_DEV_MODE: "1" },
            probes: healthProbes("/health", t.modelLoadSeconds, multiNode !== undefined),
        };
    } else if (blackbox) {
        vllm = {
            ...vllmBase,
            image: config.images.vllm,
            command: ["vllm", "serve"],
            args: blackboxServerArgs(config, vllmSettings, servedNames),
            // Dev mode opens the weight-transfer routes the AsyncGRPO trainer calls; only here, and
            // only reachable on loopback / through the ingress allow-list.
            env: { ...cacheEnv, ...gpuSharing.env, ...visible(vllmDevices), ...vllmSettings.extraEnv, VLLM_SERVER_DEV_MODE: "1" },
            probes: healthProbes("/health", t.modelLoadSeconds, multiNode !== undefined),
        };
    }

    // --- metrics (observability.enabled) ---------------------------------------------------
    const observed = config.observability?.enabled ?? false;
    if (observed && links.metrics === undefined)
        problems.push("observability.enabled: the training node needs the scraper and the metrics programs: the Platform must pass links.metrics");
    const metrics =
        observed && links.metrics !== undefined
            ? trainingMetrics({
                  links: links.metrics,
                  nginxImage: config.images.nginx,
                  vllmServes: vllm !== undefined,
                  namespace: names.namespaces.training,
                  trainerPodLabels: podLabels("trainer", names.training.job),
                  vllmPodLabels: multiNode?.vllm.podLabels,
              })
            : undefined;

    // --- trainer ------------------------------------------------------------------------
    const outputDir = `${CHECKPOINT_ROOT}/${config.runId}`;
    let scriptArgs: string[];
    // What the agent's side of a sandbox calls: its pod's key-holding forwarder where the pool has one
    // (SANDBOX_UPSTREAM_URL, components/sandbox/describe.ts), else the ingress itself (hosted sandboxes).
    const sandboxVllmUrl = links.sandbox?.trainerEnv.SANDBOX_UPSTREAM_URL ?? links.sandbox?.url;
    if (program !== undefined) {
        // A named program: its own flags only (components/config/programs.ts); refusals were made in config.
        scriptArgs = programArgs(program, config, { outputDir, vllmUrl, envUrls: links.envUrls, sandboxVllmUrl });
    } else {
        scriptArgs = trlParserArgs(config, outputDir, vllmUrl);
    }
    if (blackbox && links.sandbox === undefined) {
        problems.push(`training.layout: the black-box trainer needs the ingress URL sandboxes reach vLLM through: the Platform must pass links.sandbox`);
    } else if (blackbox && program === undefined) {
        scriptArgs.push("--sandbox-vllm-url", sandboxVllmUrl!);
    }
    if (program === undefined) scriptArgs.push(...t.extraArgs);

    // A named program gets a pinned revision as a downloaded directory (it has no revision flag).
    const modelDownload = program !== undefined ? modelSource(config.model).download : undefined;
    const command = program !== undefined ? programLauncher(program, config) : t.command;
    const launch = multiNode ? multiNodeLauncher(command, multiNode, problems) : launcher(command, t.numProcesses, problems);
    let trainerCommand: string[] | undefined;
    let trainerArgs: string[];
    if (t.resumeFromCheckpoint !== false) {
        // Config refused it for a program that cannot resume and without the volume (config/checkpoints.ts).
        if (launch === undefined) problems.push(`training.command: resumeFromCheckpoint wraps the trainer's command line: set training.command`);
        const source = typeof t.resumeFromCheckpoint === "string" ? t.resumeFromCheckpoint : undefined;
        trainerCommand = resumeCommand(config.runId, source, [...(launch ?? []), ...scriptArgs], CHECKPOINT_ROOT);
        trainerArgs = [];
    } else if (launch !== undefined && (t.argsCheck || modelDownload !== undefined)) {
        // The pinned model's download and the program's own parser run first, in the trainer's container.
        trainerCommand = withStartChecks([...launch, ...scriptArgs], t.argsCheck, modelDownload);
        trainerArgs = [];
    } else {
        trainerCommand = launch;
        trainerArgs = scriptArgs;
    }

    const reservedEnv: Record<string, string> = {
        ...cacheEnv,
        ...(program?.env ?? {}),
        RUN_ID: config.runId,
        OUTPUT_DIR: outputDir,
        VLLM_URL: vllmUrl,
        ...visible(trainerDevices),
        ...(multiNode ? { ...multiNode.derivedEnv, ...Object.fromEntries(Object.keys(multiNode.labelEnv).map((k) => [k, "(downward API)"])) } : {}),
    };
    for (const [envName, url] of Object.entries(links.envUrls)) reservedEnv[envUrlVar(envName)] = url;
    const dockerSocket =
        config.target.kind === "docker" && links.sandbox?.provider === "docker" ? { hostPath: DOCKER_SOCKET, containerPath: DOCKER_SOCKET } : undefined;
    if (dockerSocket) reservedEnv.DOCKER_HOST = `unix://${dockerSocket.containerPath}`;
    if (links.sandbox) {
        reservedEnv.SANDBOX_PROVIDER = links.sandbox.provider;
        for (const [k, v] of Object.entries(links.sandbox.trainerEnv)) reservedEnv[k] = v;
    }
    const trainerSecretEnv: Record<string, SecretName> = { ...hfSecretEnv };
    // Only hosted sandboxes get the key from the trainer; a pool's forwarder holds it itself.
    if (blackbox && config.sandboxes.provider === "hf") trainerSecretEnv[SECRET_ENV.sandboxKey] = "sandboxKey";
    for (const k of Object.keys(t.extraEnv)) {
        if (shared && k === "CUDA_DEVICE_ORDER") {
            problems.push(
                `training.extraEnv.CUDA_DEVICE_ORDER: gpuSharing 'shared' splits the GPUs by host index and needs PCI_BUS_ID order: remove it from extraEnv`,
            );
        } else if (k in reservedEnv || k in trainerSecretEnv) {
            problems.push(
                `training.extraEnv.${k}: ${k} is set by the platform (${k in trainerSecretEnv ? "a secret" : "from the run's config and links"}): remove it from extraEnv`,
            );
        }
    }
    // The role runner: each role of the one container (every line prefixed with its role: supervisor.ts),
    // whatever observability says; elsewhere it wraps the trainer's command on Kubernetes with observability
    // on only. The trainer's metrics listener only with observability on.
    const wrapped = metrics !== undefined && !gpuSharing.oneContainer && config.target.kind === "kubernetes";
    const roleRunner = gpuSharing.oneContainer || wrapped ? roleRunnerAt(metrics ? `0.0.0.0:${metrics.trainer.port}` : undefined) : undefined;
    if (wrapped && trainerCommand === undefined)
        problems.push(
            "observability.enabled: the trainer's metrics come from a runner that wraps its command line, and training.command is unset (the image's entrypoint runs): set training.command",
        );
    const vllmHealth = vllm !== undefined && multiNode === undefined ? `http://127.0.0.1:${VLLM_PORT}/health` : undefined;
    const programFiles = [...(metrics?.vllm?.files ?? []), ...(roleRunner ? roleRunnerFiles() : [])];
    const trainer: ContainerDescription = {
        name: CONTAINER.trainer,
        dockerName: names.training.job,
        image: config.images.trainer,
        command:
            wrapped && roleRunner !== undefined && trainerCommand !== undefined
                ? roleRunnerArgv(roleRunner, "trainer", trainerCommand, vllmHealth)
                : trainerCommand,
        args: trainerArgs,
        // The label-fed vars come from the downward API (kubernetes.ts), not as literals.
        env: omit({ ...gpuSharing.env, ...t.extraEnv, ...reservedEnv }, Object.keys(multiNode?.labelEnv ?? {})),
        secretEnv: trainerSecretEnv,
        gpus: trainerDevices.length,
        gpuDevices: shared ? allDevices : trainerDevices,
        // Colocate: the in-process vLLM listens nowhere; server modes: nothing listens in the trainer
        // that others need (NCCL rendezvous stays on loopback).
        ports: [],
        ...(metrics ? { metricsPorts: [metrics.trainer] } : {}),
        cpu: t.trainerCpu,
        memory: t.trainerMemory,
        mounts,
    };

    const requiredSecrets: SecretName[] = [];
    if (t.hubRepoId !== undefined) requiredSecrets.push("hfToken");
    if (blackbox) requiredSecrets.push("sandboxKey");

    if (problems.length > 0) throw new ConfigError(problems);

    const target = config.target;
    const k8s = target.kind === "kubernetes" ? target : undefined;
    const claimsSandboxes = blackbox && config.sandboxes.provider === "agent-sandbox";
    const nodeSelector: Record<string, string> = { ...(k8s?.nodeSelector ?? {}) };
    if (k8s?.gpuProduct !== undefined) nodeSelector["nvidia.com/gpu.product"] = k8s.gpuProduct;

    return {
        layout,
        target: target.kind,
        runId: config.runId,
        jobName: names.training.job,
        namespace: names.namespaces.training,
        network: names.networks.training,
        serviceAccount: names.training.serviceAccount,
        podLabels: podLabels("trainer", names.training.job),
        automountServiceAccountToken: claimsSandboxes,
        egress: k8s && t.egress.restrict ? trainerEgress(links, claimsSandboxes, t.egress.apiServerCidrs, config) : undefined,
        vllm,
        trainer,
        gpuSharing,
        gpuLayout: { vllm: vllmDevices, trainer: trainerDevices },
        internalUrl: vllmUrl,
        upstreamAddress: blackbox ? names.training.vllmUpstream : undefined,
        ingressAccess: blackbox
            ? {
                  serviceName: names.training.vllmService,
                  port: VLLM_PORT,
                  fromNamespace: names.namespaces.ingress,
                  fromPodLabels: podLabels("vllm-ingress", names.ingress.deployment),
              }
            : undefined,
        shmSize: t.shmSize,
        modelCache,
        checkpoints,
        secrets: {
            hfToken: { name: names.training.hfSecret, key: SECRET_ENV.hfToken },
            sandboxKey: { name: names.training.sandboxKeySecret, key: SECRET_ENV.sandboxKey },
        },
        requiredSecrets,
        job: { backoffLimit: t.backoffLimit, activeDeadlineSeconds: t.activeDeadlineSeconds },
        multiNode,
        kueueQueue: k8s?.kueueQueue,
        scheduling: {
            gpuResourceName: k8s?.gpuResourceName ?? "nvidia.com/gpu",
            nodeSelector,
            tolerations: (k8s?.tolerations ?? []) as ReadonlyArray<Record<string, unknown>>,
            priorityClassName: k8s?.priorityClassName,
            storageClassName: k8s?.storageClassName,
        },
        modelLoadSeconds: t.modelLoadSeconds,
        dockerSocket,
        metrics,
        roleRunner,
        programs: programFiles.length > 0 ? { configMap: dnsName([names.training.job, "programs"]), files: programFiles } : undefined,
    };
}

/**
 * The GPU sharing of a layout on a target, and the NCCL settings both roles get. Both roles
 * share one network namespace (the pod; Docker: the trainer joins vLLM's), so NCCL's bootstrap
 * is pinned to loopback instead of left to interface discovery. NCCL_* keys the user sets in
 * training.extraEnv win, on both roles (the two ends of the group must agree).
 */
export function describeGpuSharing(
    mode: "shared" | "isolated" | "none" | "network",
    target: "kubernetes" | "docker",
    check: boolean,
    extraEnv: Readonly<Record<string, string>>,
): GpuSharingDescription {
    if (mode === "none") {
        return { mode, transport: "none (vLLM runs inside the trainer process)", bandwidth: "-", oneContainer: false, env: {} };
    }
    const userNccl = Object.fromEntries(Object.entries(extraEnv).filter(([k]) => k.startsWith("NCCL_")));
    if (mode === "network") {
        // Across nodes NCCL picks the pod's interface itself (never lo); NCCL_SOCKET_IFNAME / NCCL_IB_HCA
        // from training.extraEnv pin it where a node has several.
        return {
            mode,
            transport: "NCCL over the pod network between nodes (TCP sockets; InfiniBand/RoCE where the pods get RDMA devices)",
            bandwidth: "the nodes' network: ~1-3 GiB/s on 10-25 GbE sockets, tens of GiB/s with RDMA",
            oneContainer: false,
            env: { ...userNccl },
        };
    }
    const base: Record<string, string> = { NCCL_SOCKET_IFNAME: "lo" };
    if (mode === "isolated") {
        return {
            mode,
            transport: "SHM (NCCL_P2P_DISABLE=1, NCCL_CUMEM_ENABLE=0; each container sees only its own GPUs)",
            bandwidth: "shared memory: ~46 GiB/s measured on 2 x H200 (16 GiB in 0.35 s)",
            oneContainer: false,
            env: { ...base, NCCL_P2P_DISABLE: "1", NCCL_CUMEM_ENABLE: "0", ...userNccl },
        };
    }
    return {
        mode,
        transport: `P2P over NVLink/PCIe (${target === "kubernetes" ? "one container holds every training GPU" : "both containers get every training GPU"}, CUDA_VISIBLE_DEVICES splits them)`,
        bandwidth: "NVLink P2P: ~346 GiB/s measured on 2 x H200 NV18 (16 GiB in 0.046 s); PCIe-only nodes get PCIe speed",
        oneContainer: target === "kubernetes",
        env: { ...base, CUDA_DEVICE_ORDER: "PCI_BUS_ID", ...userNccl },
        check: check ? { sizeGiB: 1, timeoutSeconds: 120, port: NCCL_CHECK_PORT, path: NCCL_CHECK_PATH } : undefined,
    };
}

/** HTTPS: the Hugging Face Hub (models, datasets, pushes), trackio Spaces, hosted sandboxes. */
const HTTPS_PORT = 443;
/** The API server's Service port and its usual endpoint ports (kubeadm 6443). */
const API_SERVER_PORTS = [443, 6443] as const;

function trainerEgress(links: TrainingLinks, claimsSandboxes: boolean, apiServerCidrs: readonly string[] | undefined, config: TrainingConfig): TrainerEgress {
    // External env servers are reached on their URL's port over the internet.
    const externalPorts = config.envs
        .filter((e) => e.external)
        .map((e) => {
            const u = new URL(e.external!.url);
            return Number(u.port || (u.protocol === "https:" ? 443 : 80));
        });
    return {
        dns: dnsEgressFor(config.target),
        peers: [...(links.egressPeers ?? [])],
        internetPorts: [...new Set([HTTPS_PORT, ...externalPorts])].sort((a, b) => a - b),
        apiServer: claimsSandboxes ? { ...(apiServerCidrs ? { cidrs: [...apiServerCidrs] } : {}), ports: [...API_SERVER_PORTS] } : undefined,
    };
}

/**
 * A stack-wide claim's name: ReadWriteMany claims (nodes > 1) get their own name, since a claim's
 * access mode is immutable and a retained claim replaced under its own name would collide with itself.
 */
export function volumeName(name: string, multiNode: MultiNodeDescription | undefined): string {
    return multiNode ? `${name}-rwx` : name;
}

function omit(env: Readonly<Record<string, string>>, keys: readonly string[]): Record<string, string> {
    return Object.fromEntries(Object.entries(env).filter(([k]) => !keys.includes(k)));
}

/** A directory under the Docker host's data dir; undefined on Kubernetes (PVCs there). */
function hostDir(config: TrainingConfig, name: string): string | undefined {
    return config.target.kind === "docker" ? `${config.target.dataDir.replace(/\/+$/, "")}/${name}` : undefined;
}

/**
 * A custom script's arguments: the TrlParser flag contract (README "Your own training script"): TRL's
 * `GRPOConfig` (white box) or `AsyncGRPOConfig` (black box) fields with underscores, plus the seeds'
 * dashed `--dataset-size` / `--eval-size`.
 */
function trlParserArgs(config: TrainingConfig, outputDir: string, vllmUrl: string): string[] {
    const t = config.training;
    const args: string[] = [
        "--model_name_or_path",
        config.model.name,
        "--model_revision",
        config.model.revision,
        "--dataset-size",
        String(t.datasetSize),
        ...(t.evalSize > 0 ? ["--eval-size", String(t.evalSize)] : []),
        "--output_dir",
        outputDir,
        "--per_device_train_batch_size",
        String(t.perDeviceTrainBatchSize),
        "--gradient_accumulation_steps",
        String(t.gradientAccumulationSteps),
        "--num_generations",
        String(t.numGenerations),
        "--per_device_eval_batch_size",
        String(t.perDeviceEvalBatchSize),
    ];
    if (t.layout === "whitebox-colocate") {
        // vllm_gpu_memory_utilization stays TRL's colocate default (0.3): training shares the GPU, so
        // training.gpuMemoryUtilization (a server setting, 0.9) would starve it; override via extraArgs.
        args.push("--steps_per_generation", String(t.stepsPerGeneration), "--use_vllm", "true", "--vllm_mode", "colocate");
    } else if (t.layout === "whitebox-server") {
        args.push(
            "--steps_per_generation",
            String(t.stepsPerGeneration),
            "--use_vllm",
            "true",
            "--vllm_mode",
            "server",
            "--vllm_server_base_url",
            vllmUrl,
            "--vllm_group_port",
            String(TRL_GROUP_PORT),
        );
    } else {
        // AsyncGRPOConfig has no vllm_mode / steps_per_generation; rollouts in flight = sandboxes in use.
        args.push("--vllm_server_base_url", vllmUrl, "--max_inflight_tasks", String(t.maxInflight));
        // The dtype vLLM is served in too (AsyncGRPOConfig.dtype; unset: its float32, which vLLM gets).
        const dtype = vllmServerSettings(config).trainerDtypeArg;
        if (dtype !== undefined) args.push("--dtype", dtype);
    }
    // Retention on the shared volume (transformers rotates the oldest out after each save).
    args.push("--save_total_limit", String(t.checkpoints.keepLast ?? DEFAULT_KEEP_LAST));
    if (t.maxSteps !== undefined) args.push("--max_steps", String(t.maxSteps));
    if (t.maxCompletionLength !== undefined) args.push("--max_completion_length", String(t.maxCompletionLength));
    if (t.optim !== undefined) args.push("--optim", t.optim);
    if (t.gradientCheckpointing !== undefined) args.push("--gradient_checkpointing", String(t.gradientCheckpointing));
    if (t.hubRepoId !== undefined) args.push("--push_to_hub", "true", "--hub_model_id", t.hubRepoId);
    if (t.trackioProject !== undefined) args.push("--report_to", "trackio", "--project", t.trackioProject);
    if (t.trackioSpaceId !== undefined) args.push("--trackio_space_id", t.trackioSpaceId);
    return args;
}
