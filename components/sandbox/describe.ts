/**
 * The target-neutral description of a run's sandbox pool: every decision (image, size,
 * security settings, deadlines, quota, names, the trainer's env) is made here, once, from
 * the resolved config and the names. `kubernetes.ts` and `docker.ts` only translate it.
 * Pure: no Pulumi imports.
 */
import { dnsName, podLabels, type PlatformNames } from "../config/names";
import type { PlatformConfig } from "../config/resolve";
import { multiplyQuantity, quantityValue } from "../shared/quantity";

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
/** API group of SandboxTemplate / SandboxWarmPool / SandboxClaim (extensions.agents.x-k8s.io, served and stored v1beta1 in v0.5.6). */
export const SANDBOX_EXTENSIONS_GROUP = "extensions.agents.x-k8s.io";
/** API group of Sandbox (agents.x-k8s.io). */
export const SANDBOX_CORE_GROUP = "agents.x-k8s.io";
/** Served and stored version of every agent-sandbox CRD at v0.5.6. */
export const SANDBOX_API_VERSION = "v1beta1";

/**
 * Port of the command API inside a sandbox pod, the only port the trainer may reach.
 * 8888 is agent-sandbox's runtime convention (examples/python-runtime-sandbox serves /execute there).
 */
export const SANDBOX_PORT = 8888;
/** Env var the in-sandbox proxy reads its upstream key from (OpenEnv interception.py: --upstream-api-key, else this). */
export const SANDBOX_KEY_ENV = "OPENCODE_UPSTREAM_API_KEY";
/** Env var carrying the ingress URL into the sandbox (the proxy itself takes --upstream-url; the trainer passes the same value). */
export const SANDBOX_URL_ENV = "OPENCODE_UPSTREAM_URL";
/** Key of the sandbox key inside its Secret. */
export const SANDBOX_KEY_SECRET_KEY = "api-key";
/**
 * HOME inside every sandbox: the opencode harness's default `sandbox_home` (OpenEnv
 * envs/opencode_env/config.py), under which it looks for `.opencode/bin/opencode` and
 * `proxy/interception.py` before downloading them (which the egress policy blocks).
 */
export const SANDBOX_HOME = "/home/user";
/** The derived image's HOME skeleton (opencode, the proxy, the harness's dirs), mirrored into the HOME emptyDir by the runtime at start (python/Dockerfile). */
export const SANDBOX_HOME_SEED = "/opt/agent-rl/home";
/** The command runtime in the derived image (python/agent_rl_sandbox/runtime.py, standard library only). */
export const SANDBOX_RUNTIME_PATH = "/opt/agent-rl/runtime.py";
/** The runtime's readiness route: it answers once HOME is seeded and it listens. */
export const SANDBOX_HEALTH_PATH = "/healthz";

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

/** What the namespace's ResourceQuota allows: warm pool + claimed in-flight sandboxes + headroom. */
export interface SandboxQuota {
    /** Live sandbox pods at most: poolSize (warm) + maxInflight (claimed; each claim makes the pool create a replacement) + headroom (pods still terminating). */
    readonly pods: number;
    readonly cpu: string;
    readonly memory: string;
}

export interface SandboxDescription {
    readonly provider: PlatformConfig["sandboxes"]["provider"];
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
    /** Non-secret env of every sandbox (the key is added separately, from a secret). */
    readonly env: Readonly<Record<string, string>>;
    /** The ingress URL the sandboxes call (vLLM's /v1/chat/completions behind the authenticated proxy). */
    readonly upstreamUrl: string;
    /** Pod labels of every sandbox: the shared podLabels convention plus the run label. */
    readonly labels: Readonly<Record<string, string>>;
    readonly quota: SandboxQuota;
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
    const env: Record<string, string> = {
        HOME: home,
        // Caches and user installs land under HOME, the only writable place besides /tmp and /workspace.
        XDG_CACHE_HOME: `${home}/.cache`,
        XDG_CONFIG_HOME: `${home}/.config`,
        XDG_DATA_HOME: `${home}/.local/share`,
        PYTHONUSERBASE: `${home}/.local`,
        [SANDBOX_URL_ENV]: url,
    };
    const containers = provider === "docker" ? Array.from({ length: s.poolSize }, (_, i) => dnsName([names.sandboxes.template, String(i)])) : [];
    const common: Record<string, string> = {
        SANDBOX_PROVIDER: provider,
        SANDBOX_IMAGE: s.image,
        SANDBOX_MAX_INFLIGHT: String(maxInflight),
        SANDBOX_MAX_LIFETIME_SECONDS: String(s.maxLifetimeSeconds),
        SANDBOX_RUN_LABEL: names.sandboxes.runLabel,
        SANDBOX_RUN_ID: config.runId,
        SANDBOX_UPSTREAM_URL: url,
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
        labels: { ...podLabels("sandbox", pool), [names.sandboxes.runLabel]: config.runId },
        quota: { pods: quotaPods, cpu: multiplyQuantity(s.cpu, quotaPods), memory: multiplyQuantity(s.memory, quotaPods) },
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
