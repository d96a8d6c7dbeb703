/**
 * The sandbox pool's ground floor: the description types every file of the folder shares, and the
 * fixed facts (API groups, ports, paths, env var names) the resolve step and both targets read. It
 * imports nothing from its own folder.
 */
import type { DnsEgress } from "../shared/kubernetes";
import type { PlatformNames } from "../config/names";
import type { PlatformConfig } from "../config/types";
import { AGENT_SANDBOX_VERSION } from "../config/cluster-schema";
import type { PoolAutoscaleBounds, PoolSizing } from "../config/pool-size";
import { SANDBOX_EXTENSIONS_GROUP } from "../shared/kubernetes";

/**
 * What the sandbox pool reads of a stack's config: a narrow slice of PlatformConfig, fully defaulted
 * (`resolveDefaults` applies every default once), so the component can be used without the
 * Platform by building just these fields.
 */
export type SandboxConfig = Pick<PlatformConfig, "runId" | "sandboxes" | "training" | "target" | "harbor">;
/** The object names the sandbox pool uses (from `platformNames`). */
export type SandboxNames = Pick<PlatformNames, "ingress" | "namespaces" | "networks" | "prefix" | "sandboxes">;

export { AGENT_SANDBOX_VERSION };
/** API group of SandboxTemplate / SandboxWarmPool / SandboxClaim (served and stored v1beta1; the only version from v1.0.0 on): one constant in shared/kubernetes.ts. */
export { SANDBOX_EXTENSIONS_GROUP };
/** API group of Sandbox (agents.x-k8s.io). */
export const SANDBOX_CORE_GROUP = "agents.x-k8s.io";
/** Served and stored version of every agent-sandbox CRD at v1.0.1 (v1alpha1 was removed in v1.0.0). */
export const SANDBOX_API_VERSION = "v1beta1";

/**
 * Port of the command API inside a sandbox pod, the only port the trainer may reach.
 * 8888 is agent-sandbox's runtime convention (examples/python-runtime-sandbox serves /execute there).
 */
export const SANDBOX_PORT = 8888;
/**
 * Env var holding the ingress key, set in the forwarder's container only (never the agent's):
 * the name OpenEnv's proxy reads (interception.py: --upstream-api-key, else this), which the
 * platform's secret-env policy already knows (policy/policies.ts PLATFORM_SECRET_ENV).
 */
export const SANDBOX_KEY_ENV = "OPENCODE_UPSTREAM_API_KEY";
/** Env var telling the agent's side where its upstream is: the forwarder on the pod's loopback (the harness passes the same URL as --upstream-url). */
export const SANDBOX_URL_ENV = "OPENCODE_UPSTREAM_URL";
/** Key of the sandbox key inside its Secret. */
export const SANDBOX_KEY_SECRET_KEY = "api-key";
/**
 * HOME inside every sandbox: TRL's opencode example's `SANDBOX_HOME = "/root"`, work dir
 * `/root/workdir` (huggingface/trl examples/async_grpo_opencode/opencode_hf_sandbox.py), so its
 * script runs unchanged. The harness looks under it for `.opencode/bin/opencode` and
 * `proxy/interception.py` before downloading them (which the egress policy blocks).
 */
export const SANDBOX_HOME = "/root";
/**
 * OpenEnv's default `sandbox_home` (envs/opencode_env/config.py): the derived image links it to
 * SANDBOX_HOME (python/image/install-layout.sh), so scripts on either default find one HOME.
 */
export const SANDBOX_HOME_ALIAS = "/home/user";
/** The derived image's HOME skeleton (opencode, the proxy, the harness's dirs), mirrored into the HOME emptyDir by the runtime at start (python/Dockerfile). */
export const SANDBOX_HOME_SEED = "/opt/agent-rl/home";
/** The command runtime in the derived image (python/agent_rl_sandbox/runtime.py, standard library only). */
export const SANDBOX_RUNTIME_PATH = "/opt/agent-rl/runtime.py";
/** The runtime's readiness route: it answers once HOME is seeded and it listens. */
export const SANDBOX_HEALTH_PATH = "/healthz";
/** The key-holding forwarder in the derived image (python/agent_rl_sandbox/forwarder.py, standard library only). */
export const SANDBOX_FORWARDER_PATH = "/opt/agent-rl/forwarder.py";
/** The forwarder's port on the pod's loopback (forwarder.py DEFAULT_PORT); 7000 is the harness's capture proxy, 8888 the runtime. */
export const SANDBOX_FORWARDER_PORT = 7100;
/**
 * The forwarder's trace port on the pod IP (forwarder.py DEFAULT_TRACE_PORT): the token ids and logprobs of every
 * completion it relayed, read by the trainer (`GET /trace`), refused to callers inside the pod. The NetworkPolicy
 * admits the trainer pods to it beside the runtime's port (docs/design/sandbox-trust.md).
 */
export const SANDBOX_TRACE_PORT = 7101;
/**
 * The forwarder's rollout-key delivery port on the pod IP (forwarder.py `--key-port`), on Kubernetes agent-sandbox
 * pools: the trainer PUTs the claim's per-rollout key there once, before the agent runs, and the port closes
 * (docs/design/rollout-keys.md). 7101 is the trace port. The NetworkPolicy admits only the trainer pods to it.
 */
export const SANDBOX_KEY_PORT = 7102;

/**
 * The forwarder's share of a sandbox pod. Its memory is bounded by forwarder.py's caps, not by traffic: bodies are
 * streamed (never held whole), at most 4 requests at once (each holding at most a 4 MiB JSON answer or one 4 MiB event
 * of a streamed one for the trace, parsed one at a time), the trace at most 16 MiB; measured under nine 16 MiB bodies at
 * once, a 200-connection burst (python/tests/test_sandbox_trust.py) and streamed answers with 20 top logprobs a token
 * over a full record (python/tests/test_recorder.py: 32 MiB at peak).
 */
export const FORWARDER_CPU = "100m";
export const FORWARDER_MEMORY = "128Mi";

/** A writable directory on an otherwise read-only root filesystem (emptyDir / tmpfs). */
export interface WritablePath {
    readonly name: string;
    readonly path: string;
    /** emptyDir sizeLimit / tmpfs size. */
    readonly sizeLimit: string;
}

/** How a sandbox process runs: the same on both targets. */
export interface SandboxSecurity {
    /** Non-root uid: PSA `restricted` demands runAsNonRoot; the upstream image would run as root. */
    readonly runAsUser: number;
    readonly runAsGroup: number;
    /** Group owning the emptyDirs, so the uid can write them. */
    readonly fsGroup: number;
    readonly readOnlyRootFilesystem: true;
    readonly allowPrivilegeEscalation: false;
    readonly dropCapabilities: readonly ["ALL"];
    readonly seccompProfile: "RuntimeDefault";
    /** HOME, on a writable emptyDir (the image keeps its work dirs under /root, which the uid cannot write). */
    readonly home: string;
    /** Working directory, writable. */
    readonly workingDir: string;
    readonly writablePaths: readonly WritablePath[];
    /** Seconds a stopped sandbox gets: short, because a terminating pod still counts against the quota. */
    readonly terminationGraceSeconds: number;
}

/** What the forwarder forces and bounds for its one rollout (forwarder.py --temperature, --max-tokens, --max-calls, --max-rollout-tokens). */
export interface ForwarderBounds {
    /** The run's sampling temperature, sent on every call whatever the caller asked. */
    readonly temperature: number;
    /** The most tokens one answer may ask for: the run's longest completion. */
    readonly maxTokens: number;
    /** The most calls one rollout may make (sandboxes.maxCallsPerRollout). */
    readonly maxCalls: number;
    /** The most completion tokens one rollout may sample (sandboxes.maxTokensPerRollout). */
    readonly maxRolloutTokens: number;
}

/**
 * The key-holding forwarder beside every sandbox (python/agent_rl_sandbox/forwarder.py). The agent
 * (opencode's bash tool runs the model's commands as the sandbox uid) can read the env and argv of
 * every process of its uid in its PID namespace, so the key lives in neither: it is in this
 * container's env only, another container (its own PID and mount namespace; the pod does not share
 * processes) running as another uid. It forwards POST /v1/chat/completions and GET /v1/models to
 * the ingress with the key; the harness's capture proxy uses it as upstream with a placeholder key.
 */
export interface SandboxForwarder {
    readonly command: readonly string[];
    /** The run's sampling it forces and the rollout's bounds it holds (rendered into `command`). */
    readonly bounds: ForwarderBounds;
    /** Exit 0 once it accepts connections (run in its container: it listens on loopback, which kubelet's httpGet cannot reach). */
    readonly probeCommand: readonly string[];
    readonly port: number;
    /** The trace port on the pod IP (the trainer reads `GET /trace` there; callers inside the pod are refused). */
    readonly tracePort: number;
    /**
     * Kubernetes agent-sandbox pools: the one-time rollout-key delivery port on the pod IP (`--key-port`), which the
     * trainer mints a key for each claim and hands over on. Absent where the pool takes no per-rollout keys (config/sandbox-providers.ts rolloutKeys). @default undefined
     */
    readonly keyPort?: number;
    /** What the agent's side calls: `--sandbox-vllm-url` of TRL's script, the capture proxy's upstream. */
    readonly url: string;
    /** A uid of its own, never the sandbox's. */
    readonly runAsUser: number;
    /**
     * Env var holding the pool's shared ingress key in its container. Absent where the pool takes per-rollout keys
     * (keyPort): that forwarder holds only its rollout's key, and nothing falls back to a shared one. @default undefined
     */
    readonly keyEnv?: string;
    /** CPU request = limit (counted in the quota beside the sandbox's). */
    readonly cpu: string;
    /** Memory request = limit. */
    readonly memory: string;
}

/** What the namespace's ResourceQuota allows: warm pool (its autoscaler's maximum when autoscaled) + claimed in-flight sandboxes + headroom. */
export interface SandboxQuota {
    /** Live sandbox pods at most: every pool's size (warm; an autoscaled pool's maximum) + the burst (claimed; each claim makes the pool create a replacement) + headroom (pods still terminating). */
    readonly pods: number;
    readonly cpu: string;
    readonly memory: string;
}

/**
 * One SandboxTemplate + SandboxWarmPool: the run's pool (sandboxes.image), or on the Harbor path one per
 * task image (harbor.taskImages), each holding the whole burst warm (config/harbor.ts says why).
 */
export interface SandboxPoolSpec {
    /** The image its sandboxes (and their forwarders) run. */
    readonly image: string;
    readonly template: string;
    readonly warmPool: string;
    /** Warm sandboxes it keeps (sandboxes.poolSize, or the run's burst + headroom). */
    readonly poolSize: number;
    /** Harbor: the task image's key, which names the pool's Pulumi children and labels its pods. Absent: the run's one pool. */
    readonly taskKey?: string;
    /** Pod labels: the run's sandbox labels, plus the task label of a Harbor pool. */
    readonly labels: Readonly<Record<string, string>>;
    /** Writable dirs of its sandboxes: the security settings', plus Harbor's dirs on a Harbor pool. */
    readonly writablePaths: readonly WritablePath[];
    /** sandboxes.autoscale on: its HorizontalPodAutoscaler's name and bounds (min = poolSize). Absent: a fixed pool. */
    readonly autoscale?: SandboxPoolAutoscale;
}

/** One warm pool's autoscaler (autoscaling/v2 HPA on the SandboxWarmPool's `/scale`, which v1.0.1's CRD serves). */
export interface SandboxPoolAutoscale extends PoolAutoscaleBounds {
    /** The HorizontalPodAutoscaler's name (derived from the warm pool's). */
    readonly name: string;
    /** The external metric it reads: the wanted size of this pool (shared/metrics.ts SERIES.sandboxWarmPoolWanted). */
    readonly metric: string;
    /** The metric's label selecting this pool: its template's name. */
    readonly selector: Readonly<Record<string, string>>;
}

export interface SandboxDescription {
    readonly provider: PlatformConfig["sandboxes"]["provider"];
    /** Kubernetes: where the pods' DNS queries may go (target.dns, resolved by the config). */
    readonly dns: DnsEgress;
    /** Kubernetes: image pull Secrets every pod (and ServiceAccount) references; the Platform sets them when the stack has registryAuth. @default [] */
    readonly imagePullSecrets?: readonly string[];

    readonly runId: string;
    /** Label key carrying the run id on every sandbox (pods, claims, containers). */
    readonly runLabel: string;
    /** Pinned image (prod stacks must pin by digest; see config validateProdPinning). */
    readonly image: string;
    /** CPU request = limit per sandbox. */
    readonly cpu: string;
    /** Memory request = limit per sandbox. */
    readonly memory: string;
    readonly runtimeClassName?: string;
    /** PriorityClass of the sandbox pods (sandboxes.priorityClassName, or the cluster stack's). */
    readonly priorityClassName?: string;
    /** Warm pool size. */
    readonly poolSize: number;
    /** The pool the run needs: its burst of claims (maxInflight x rollout workers) and the refill margin. */
    readonly sizing: PoolSizing;
    /** Rollouts in flight = sandboxes claimed at once. */
    readonly maxInflight: number;
    readonly headroom: number;
    /** Longest a claimed sandbox may live; enforced on every claim's shutdownTime. */
    readonly maxLifetimeSeconds: number;
    readonly maxWarmWaitSeconds: number;
    /** Hard kill of a sandbox's process: maxWarmWait + maxLifetime (a warm pod's clock starts before it is claimed). */
    readonly deadlineSeconds: number;
    readonly port: number;
    /** The command runtime every Kubernetes sandbox runs as its main process, and its readiness route on `port`. */
    readonly runtime: { readonly command: readonly string[]; readonly healthPath: string };
    readonly security: SandboxSecurity;
    /** Non-secret env of every sandbox's agent container (the key is never in it: see `forwarder`). */
    readonly env: Readonly<Record<string, string>>;
    /** The ingress URL the forwarder calls (vLLM's /v1/chat/completions behind the authenticated proxy). */
    readonly upstreamUrl: string;
    /** The key-holding forwarder of every sandbox. */
    readonly forwarder: SandboxForwarder;
    /** Pod labels of every sandbox: the shared podLabels convention plus the run label. */
    readonly labels: Readonly<Record<string, string>>;
    readonly quota: SandboxQuota;
    /**
     * Kubernetes: the team whose sandboxes namespace the pool runs in (target.team). The cluster
     * stack then owns the claim-lifetime policy and the namespace's quota and lock-down, and the
     * pool's policy selects its own sandboxes only (other runs of the team share the namespace).
     */
    readonly team?: string;
    readonly names: {
        readonly namespace: string;
        /** The run's pool's (off the Harbor path; a Harbor path's pools are `pools`); the per-pool objects' names derive from warmPool. */
        readonly template: string;
        readonly warmPool: string;
        readonly keySecret: string;
        readonly networkPolicy: string;
        readonly quota: string;
        readonly role: string;
        readonly roleBinding: string;
        /** Cluster-scoped: carries the stack prefix and the run id. */
        readonly admissionPolicy: string;
        readonly admissionBinding: string;
    };
    /** Kubernetes: the templates and warm pools (one, or one per Harbor task image). */
    readonly pools: readonly SandboxPoolSpec[];
    /** Env vars for the trainer: how it finds, claims and bounds its sandboxes. */
    readonly trainerEnv: Readonly<Record<string, string>>;
}
