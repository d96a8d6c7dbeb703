/**
 * The target-neutral description of a run's sandbox pool: every decision (image, size,
 * security settings, deadlines, quota, names, the trainer's env) is made here, once, from
 * the resolved config and the names. `kubernetes.ts` and `docker.ts` only translate it.
 * Pure: no Pulumi imports.
 */
import { dnsEgressFor } from "../config/dns";
import type { DnsEgress } from "../shared/kubernetes";
import { dnsName, podLabels, type PlatformNames } from "../config/names";
import type { PlatformConfig } from "../config/resolve";
import { addQuantities, multiplyQuantity, quantityValue } from "../shared/quantity";

import { AGENT_SANDBOX_VERSION } from "../config/cluster";

/**
 * What the sandbox pool reads of a stack's config: a narrow slice of PlatformConfig, fully defaulted
 * (`resolveDefaults` applies every default once), so the component can be used without the
 * Platform by building just these fields.
 */
export type SandboxConfig = Pick<PlatformConfig, "runId" | "sandboxes" | "training" | "target">;
/** The object names the sandbox pool uses (from `platformNames`). */
export type SandboxNames = Pick<PlatformNames, "ingress" | "namespaces" | "networks" | "prefix" | "sandboxes">;

export { AGENT_SANDBOX_VERSION };
/** API group of SandboxTemplate / SandboxWarmPool / SandboxClaim (served and stored v1beta1 in v0.5.6): one constant in shared/kubernetes.ts. */
import { SANDBOX_EXTENSIONS_GROUP } from "../shared/kubernetes";
export { SANDBOX_EXTENSIONS_GROUP };
/** API group of Sandbox (agents.x-k8s.io). */
export const SANDBOX_CORE_GROUP = "agents.x-k8s.io";
/** Served and stored version of every agent-sandbox CRD at v0.5.6. */
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

/** The forwarder's share of a sandbox pod: one stream at a time through Python's stdlib server (bodies up to 16 MiB in memory). */
export const FORWARDER_CPU = "100m";
export const FORWARDER_MEMORY = "128Mi";

/**
 * The forwarder's command: loopback only (the agent's container shares the pod's loopback, nothing
 * outside the pod reaches it), the ingress as upstream, the key from its own container's env.
 */
export function sandboxForwarderCommand(upstreamUrl: string, port: number = SANDBOX_FORWARDER_PORT): string[] {
    return ["python3", "-I", SANDBOX_FORWARDER_PATH, "--host", "127.0.0.1", "--port", String(port), "--upstream", upstreamUrl, "--key-env", SANDBOX_KEY_ENV];
}

/** PID 1 of every Kubernetes sandbox: the runtime (python -I: nothing from the writable HOME, e.g. a planted sitecustomize, is imported). */
export function sandboxRuntimeCommand(port: number = SANDBOX_PORT): string[] {
    return ["python3", "-I", SANDBOX_RUNTIME_PATH, "--port", String(port), "--home-seed", SANDBOX_HOME_SEED];
}

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
    /** Exit 0 once it accepts connections (run in its container: it listens on loopback, which kubelet's httpGet cannot reach). */
    readonly probeCommand: readonly string[];
    readonly port: number;
    /** What the agent's side calls: `--sandbox-vllm-url` of TRL's script, the capture proxy's upstream. */
    readonly url: string;
    /** A uid of its own, never the sandbox's. */
    readonly runAsUser: number;
    /** Env var holding the key in its container. */
    readonly keyEnv: string;
    /** CPU request = limit (counted in the quota beside the sandbox's). */
    readonly cpu: string;
    /** Memory request = limit. */
    readonly memory: string;
}

/** What the namespace's ResourceQuota allows: warm pool + claimed in-flight sandboxes + headroom. */
export interface SandboxQuota {
    /** Live sandbox pods at most: poolSize (warm) + maxInflight (claimed; each claim makes the pool create a replacement) + headroom (pods still terminating). */
    readonly pods: number;
    readonly cpu: string;
    readonly memory: string;
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
    /** Warm pool size (Kubernetes) / fixed pool size (Docker). */
    readonly poolSize: number;
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
    /** The key-holding forwarder of every sandbox (agent-sandbox and docker pools). */
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
    readonly hfFlavor: string;
    readonly names: {
        readonly namespace: string;
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
        /** Docker network of the sandboxes (internal; its only other member is the ingress). */
        readonly network: string;
        /** Docker container names (empty on other providers). */
        readonly containers: readonly string[];
    };
    /** Env vars for the trainer: how it finds, claims and bounds its sandboxes. */
    readonly trainerEnv: Readonly<Record<string, string>>;
}

/** Resolves a run's sandbox pool from the platform config and names. */
export function resolveSandboxPool(config: SandboxConfig, names: SandboxNames): SandboxDescription {
    const s = config.sandboxes;
    const provider = s.provider;
    const maxInflight = config.training.maxInflight;
    const pool = names.sandboxes.warmPool;
    const quotaPods = s.poolSize + maxInflight + s.headroom;
    const home = SANDBOX_HOME;
    const workingDir = "/workspace";
    const security: SandboxSecurity = {
        runAsUser: s.runAsUser,
        runAsGroup: s.runAsUser,
        fsGroup: s.runAsUser,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        dropCapabilities: ["ALL"],
        seccompProfile: "RuntimeDefault",
        home,
        workingDir,
        writablePaths: [
            { name: "home", path: home, sizeLimit: "2Gi" },
            { name: "workspace", path: workingDir, sizeLimit: "4Gi" },
            { name: "tmp", path: "/tmp", sizeLimit: "1Gi" },
        ],
        terminationGraceSeconds: 5,
    };
    const url = names.ingress.sandboxUrl;
    const forwarderUrl = `http://127.0.0.1:${SANDBOX_FORWARDER_PORT}`;
    // A uid of its own beside the sandbox's (schema: runAsUser in 1000..2^31-1).
    const forwarderUid = s.runAsUser < 2147483647 ? s.runAsUser + 1 : s.runAsUser - 1;
    // Hosted sandboxes (hf) have no forwarder: they call the ingress themselves, with the key the trainer hands them.
    const agentUpstream = provider === "hf" ? url : forwarderUrl;
    const env: Record<string, string> = {
        HOME: home,
        // Caches and user installs land under HOME, the only writable place besides /tmp and /workspace.
        XDG_CACHE_HOME: `${home}/.cache`,
        XDG_CONFIG_HOME: `${home}/.config`,
        XDG_DATA_HOME: `${home}/.local/share`,
        PYTHONUSERBASE: `${home}/.local`,
        [SANDBOX_URL_ENV]: agentUpstream,
    };
    const containers = provider === "docker" ? Array.from({ length: s.poolSize }, (_, i) => dnsName([names.sandboxes.template, String(i)])) : [];
    const common: Record<string, string> = {
        SANDBOX_PROVIDER: provider,
        SANDBOX_IMAGE: s.image,
        SANDBOX_MAX_INFLIGHT: String(maxInflight),
        SANDBOX_MAX_LIFETIME_SECONDS: String(s.maxLifetimeSeconds),
        SANDBOX_RUN_LABEL: names.sandboxes.runLabel,
        SANDBOX_RUN_ID: config.runId,
        // What the agent's side calls (TRL's --sandbox-vllm-url, OpenCodeConfig.base_url without /v1).
        SANDBOX_UPSTREAM_URL: agentUpstream,
    };
    let trainerEnv: Record<string, string>;
    if (provider === "agent-sandbox") {
        trainerEnv = {
            ...common,
            SANDBOX_NAMESPACE: names.namespaces.sandboxes,
            SANDBOX_WARM_POOL: pool,
            SANDBOX_TEMPLATE: names.sandboxes.template,
            SANDBOX_API_GROUP: SANDBOX_EXTENSIONS_GROUP,
            SANDBOX_API_VERSION: SANDBOX_API_VERSION,
            SANDBOX_SHUTDOWN_POLICY: "Delete",
            SANDBOX_PORT: String(SANDBOX_PORT),
            // OpenCodeConfig.sandbox_home: where the harness writes config, task and logs (python/agent_rl_sandbox/settings.py).
            SANDBOX_HOME: home,
            SANDBOX_POOL_SIZE: String(s.poolSize),
            // What a sandbox gets (the backend maps HF flavors onto it: python/agent_rl_sandbox/agent_sandbox.py).
            SANDBOX_CPU: s.cpu,
            SANDBOX_MEMORY: s.memory,
        };
    } else if (provider === "docker") {
        trainerEnv = { ...common, SANDBOX_NETWORK: names.networks.sandboxes, SANDBOX_CONTAINERS: containers.join(","), SANDBOX_POOL_SIZE: String(s.poolSize) };
    } else if (provider === "hf") {
        trainerEnv = { ...common, SANDBOX_FLAVOR: s.hfFlavor };
    } else {
        trainerEnv = { SANDBOX_PROVIDER: "none" };
    }
    return {
        provider,
        dns: dnsEgressFor(config.target),
        runId: config.runId,
        runLabel: names.sandboxes.runLabel,
        image: s.image,
        cpu: s.cpu,
        memory: s.memory,
        runtimeClassName: s.runtimeClassName,
        priorityClassName: s.priorityClassName,
        poolSize: s.poolSize,
        maxInflight,
        headroom: s.headroom,
        maxLifetimeSeconds: s.maxLifetimeSeconds,
        maxWarmWaitSeconds: s.maxWarmWaitSeconds,
        deadlineSeconds: s.maxLifetimeSeconds + s.maxWarmWaitSeconds,
        port: SANDBOX_PORT,
        runtime: { command: sandboxRuntimeCommand(SANDBOX_PORT), healthPath: SANDBOX_HEALTH_PATH },
        security,
        env,
        upstreamUrl: url,
        forwarder: {
            command: sandboxForwarderCommand(url),
            probeCommand: ["python3", "-I", SANDBOX_FORWARDER_PATH, "--probe", "--port", String(SANDBOX_FORWARDER_PORT)],
            port: SANDBOX_FORWARDER_PORT,
            url: forwarderUrl,
            runAsUser: forwarderUid,
            keyEnv: SANDBOX_KEY_ENV,
            cpu: FORWARDER_CPU,
            memory: FORWARDER_MEMORY,
        },
        labels: { ...podLabels("sandbox", pool), [names.sandboxes.runLabel]: config.runId },
        // Every pod holds the sandbox and its forwarder (Kubernetes counts a native sidecar's requests in the pod's).
        quota: {
            pods: quotaPods,
            cpu: addQuantities(multiplyQuantity(s.cpu, quotaPods), multiplyQuantity(FORWARDER_CPU, quotaPods)),
            memory: addQuantities(multiplyQuantity(s.memory, quotaPods), multiplyQuantity(FORWARDER_MEMORY, quotaPods)),
        },
        ...(config.target.kind === "kubernetes" && config.target.team !== undefined ? { team: config.target.team } : {}),
        hfFlavor: s.hfFlavor,
        names: {
            namespace: names.namespaces.sandboxes,
            template: names.sandboxes.template,
            warmPool: pool,
            keySecret: names.sandboxes.keySecret,
            networkPolicy: dnsName([pool, "network"]),
            quota: dnsName([pool, "quota"]),
            role: dnsName([pool, "claimer"]),
            roleBinding: dnsName([pool, "claimer"]),
            admissionPolicy: dnsName([names.prefix, "sandbox-claims", config.runId]),
            admissionBinding: dnsName([names.prefix, "sandbox-claims", config.runId, "binding"]),
            network: names.networks.sandboxes,
            containers,
        },
        trainerEnv,
    };
}

export { multiplyQuantity, quantityValue };
