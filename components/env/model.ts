/**
 * The EnvSpace's ground floor: the description types every file of the folder shares, and the
 * fixed facts (paths, uids, resolvers, labels) the resolve step and both targets read. It imports
 * nothing from its own folder.
 *
 * Upstream facts this depends on (OpenEnv environment servers):
 * - every server is a FastAPI app on 8000 with `WS /ws` and `GET /health`; `ENABLE_WEB_INTERFACE=true`
 *   adds a UI at `/web` (OpenEnv src/openenv/core/env_server/http_server.py): kept off here.
 * - a Service spreads connections blindly, so the trainer talks to a session-aware router
 *   (router.ts, ROUTER.md) that caps every replica at k sessions.
 */
import type { PlatformNames } from "../config/names";
import type { PlatformConfig, ResolvedEnv } from "../config/types";
import type { IdleReaper, WsPing } from "../config/catalog";
import type { DnsEgress } from "../shared/kubernetes";
import { DOCKER_EMBEDDED_DNS } from "../shared/docker";
import type { MetricsFile, MetricsPort, MetricsSidecar, Scraper, ScrapedPods } from "../shared/metrics-pods";
import type { DockerMetricsTarget } from "../shared/docker-metrics";

export { SESSIONS_ENV_VAR, WEB_INTERFACE_ENV_VAR } from "../config/env-sessions";

/**
 * What the env server (its `ResolvedEnv` comes from the config's `envs`) reads of a stack's config: a narrow slice of PlatformConfig, fully defaulted
 * (`resolveDefaults` applies every default once), so the component can be used without the
 * Platform by building just these fields.
 */
export type EnvConfig = Pick<PlatformConfig, "target" | "images" | "demand"> & {
    /** Metrics endpoints (observability.enabled). @default off */
    readonly observability?: Pick<PlatformConfig["observability"], "enabled">;
};
/** The object names the env server (its `ResolvedEnv` comes from the config's `envs`) uses (from `platformNames`). */
export type EnvNames = Pick<PlatformNames, "envs" | "namespaces" | "networks">;
/** The names of one env's objects (platformNames' `envs[<name>]`). */
export type EnvObjectNames = NonNullable<EnvNames["envs"][string]>;
/**
 * Cluster DNS as the router's `resolver`. nginx accepts a name here and resolves it once at
 * start with the system resolver (the pod's /etc/resolv.conf points at this very Service), then
 * re-resolves the replica names through it (`server ... resolve`, nginx >= 1.27.3).
 */
export const KUBERNETES_RESOLVER = "kube-dns.kube-system.svc.cluster.local";
/** Docker's embedded DNS on user-defined networks: it answers the replica names on the env's own network. */
export const DOCKER_RESOLVER = DOCKER_EMBEDDED_DNS;
/** Pod-template annotation (Kubernetes) / label (Docker) carrying the router config's hash: a new config replaces the router. */
export const ROUTER_CHECKSUM_ANNOTATION = "agentrl.dev/config-checksum";
/** Where the router finds nginx.conf: ConfigMap mount (Kubernetes) / upload (Docker). */
export const ROUTER_CONFIG_DIR = "/etc/env-router";
export const ROUTER_CONFIG_FILE = `${ROUTER_CONFIG_DIR}/nginx.conf`;
/** The router's writable directory (pid, temp files): emptyDir / tmpfs on a read-only root FS. */
export const ROUTER_RUN_DIR = "/tmp/env-router";
/** uid/gid of nginx in nginxinc/nginx-unprivileged (and the official nginx images' `nginx` user). */
export const ROUTER_UID = 101;
/** Router pods per env on Kubernetes; with sessionAffinity ClientIP one trainer pod uses one of them (ROUTER.md). */
export const ROUTER_REPLICAS = 2;
/** ClientIP affinity lifetime: the longest Kubernetes allows (86400 s), longer than a run should take. */
export const ROUTER_AFFINITY_SECONDS = 86_400;

/** An HTTP probe on a container port; the same numbers drive Kubernetes probes and Docker health checks. */
export interface EnvProbe {
    readonly path: string;
    readonly port: number;
    readonly periodSeconds: number;
    readonly timeoutSeconds: number;
    readonly failureThreshold: number;
}

/** The capacity rule, as numbers for the plan: replicas x sessions >= demand + one replica of headroom. */
export interface EnvCapacity {
    /** Whether the platform deploys the env (false: an external server). */
    readonly deployed: boolean;
    /** Replicas deployed (0 for an external env). */
    readonly replicas: number;
    /** Sessions one replica holds (the router's cap k); an external env: its declared sessions. */
    readonly sessionsPerReplica: number;
    /** Sessions the env holds at once: replicas x sessionsPerReplica, or the external server's declared sessions. */
    readonly sessions: number;
    /** Sessions training opens at once: max(generation batch, eval batch). */
    readonly demand: number;
    /** per_device_train_batch_size x num_processes x steps_per_generation. */
    readonly generationBatch: number;
    /** per_device_eval_batch_size x num_processes (0 with eval off). */
    readonly evalBatch: number;
    /** Spare replicas beyond the demand (a drained node or a restarting replica costs no capacity). */
    readonly headroomReplicas: number;
    /** demand + headroomReplicas x sessionsPerReplica: what `sessions` must reach (an external env: the demand). */
    readonly required: number;
    /** sessions - demand: sessions left when training holds its whole batch. */
    readonly spareSessions: number;
}

/** How an env replica's process runs. */
export interface ReplicaSecurity {
    /** When the image runs as a non-root user (catalog) or runAsUser is set (envs.<name>.runAsNonRoot); OpenEnv images run as root. */
    readonly runAsNonRoot: boolean;
    /** uid and gid (also fsGroup) the replicas run as when non-root (envs.<name>.runAsNonRoot, default for envs that run model code); unset: the image's user. */
    readonly runAsUser?: number;
    /** The user the process runs as, for the plan: `uid <n>`, or the image's (`root` for every catalog image). */
    readonly user: string;
    readonly allowPrivilegeEscalation: false;
    readonly dropCapabilities: readonly ["ALL"];
    readonly seccompProfile: "RuntimeDefault";
    /** Read-only root filesystem; the only writable place is the /tmp scratch dir. */
    readonly readOnlyRootFilesystem: boolean;
    /** Size of the /tmp scratch dir (emptyDir / tmpfs) when the root is read-only. */
    readonly scratchSize: string;
    /** Ephemeral storage request = limit (Kubernetes). */
    readonly ephemeralStorage: string;
    /** RuntimeClass (gVisor, Kata) on Kubernetes. */
    readonly runtimeClassName?: string;
    /** What the replicas may reach besides the router calling them. */
    readonly egress: "dns" | "internet";
}

/** Where a read-only replica's scratch dir is mounted. */
export const REPLICA_SCRATCH_PATH = "/tmp";

/** How a router process runs: non-root, read-only root filesystem, nothing else writable but runDir. */
export interface RouterSecurity {
    readonly runAsUser: number;
    readonly runAsGroup: number;
    readonly readOnlyRootFilesystem: true;
    readonly allowPrivilegeEscalation: false;
    readonly dropCapabilities: readonly ["ALL"];
    readonly seccompProfile: "RuntimeDefault";
    /** Size of the runDir emptyDir / tmpfs. */
    readonly runDirSizeLimit: string;
    /** Seconds a stopping router gets (nginx's worker_shutdown_timeout is 10 s). */
    readonly terminationGraceSeconds: number;
}

export interface EnvReplicasDescription {
    /** StatefulSet (Kubernetes) / container name prefix (Docker). */
    readonly name: string;
    /** Headless Service giving each pod a DNS name (Kubernetes). */
    readonly headlessService: string;
    /** Docker container names, one per replica (empty on Kubernetes). */
    readonly containerNames: readonly string[];
    readonly count: number;
    readonly image: string;
    /** Pinned by digest: pull once (IfNotPresent); a tag may move, so it is pulled on every start (Always). */
    readonly imagePullPolicy: "IfNotPresent" | "Always";
    readonly port: number;
    readonly healthPath: string;
    readonly wsPath: string;
    /** Every env var of a replica: the env's settings, ENABLE_WEB_INTERFACE=false, MAX_CONCURRENT_ENVS. */
    readonly env: Readonly<Record<string, string>>;
    /** Env vars from a key of an existing Secret in the env's namespace (settings' secretKeyRef; Kubernetes only). */
    readonly secretEnv: Readonly<Record<string, { readonly name: string; readonly key: string }>>;
    /** CPU request = limit. */
    readonly cpu: string;
    /** Memory request = limit. */
    readonly memory: string;
    readonly probes: { readonly startup: EnvProbe; readonly readiness: EnvProbe; readonly liveness: EnvProbe };
    readonly security: ReplicaSecurity;
    /** Seconds open websocket sessions get when a replica stops. */
    readonly terminationGraceSeconds: number;
    /** The server's websocket keepalive, rendered as UVICORN_WS_PING_* in `env`. */
    readonly wsPing: WsPing;
    /** How the image starts its server: the catalog's CMD form; `unknown` for a custom image (it must honour UVICORN_WS_PING_*). */
    readonly serverCommand: "uvicorn-cli" | "other" | "unknown";
    /** The app's idle reaper (catalog); `unknown` for a custom image. */
    readonly idleReaper: IdleReaper | { readonly kind: "unknown" };
    /**
     * Longest a half-open client (gone without a close) holds its slot: the ping's interval +
     * timeout, or the idle reaper's timeout when that is shorter.
     */
    readonly halfOpenSlotSeconds: number;
    /** THE pod labels and selector of the replicas: podLabels("env-replica", <StatefulSet>). */
    readonly podLabels: Readonly<Record<string, string>>;
}
export interface EnvRouterDescription {
    /** Deployment (Kubernetes). */
    readonly name: string;
    /** ClusterIP Service (Kubernetes) / container name (Docker): the host of the env URL. */
    readonly service: string;
    /** nginx >= 1.27.3 (`server ... resolve`). */
    readonly image: string;
    readonly imagePullPolicy: "IfNotPresent" | "Always";
    readonly port: number;
    /** Router pods (Kubernetes); Docker runs one container. */
    readonly replicas: number;
    /** What the config is rendered from (validated). */
    readonly settings: RouterSettings;
    /** The rendered nginx.conf = renderRouterConfig(settings). */
    readonly configText: string;
    /** sha256 of configText: a new config replaces the router (never reloaded in place, ROUTER.md). */
    readonly configChecksum: string;
    readonly configDir: string;
    readonly configFile: string;
    readonly runDir: string;
    /** The container's full command line: routerCommand(settings, configFile). */
    readonly command: readonly string[];
    /** Router liveness/readiness route, answered by nginx itself. */
    readonly healthPath: string;
    readonly probes: { readonly readiness: EnvProbe; readonly liveness: EnvProbe };
    /** Requests = limits. */
    readonly cpu: string;
    readonly memory: string;
    readonly security: RouterSecurity;
    /** Seconds of sessionAffinity ClientIP on the router Service. */
    readonly affinityTimeoutSeconds: number;
    /** THE pod labels and selector of the routers: podLabels("env-router", <Deployment>). */
    readonly podLabels: Readonly<Record<string, string>>;
    /** The capacity responder beside nginx (capacity_responder.py; ROUTER.md). */
    readonly responder: CapacityResponderDescription;
}

/**
 * The capacity responder: a second container in the router pod (Kubernetes) / a container in the
 * router container's network namespace (Docker), listening on loopback only. It runs in the env's
 * own image (every OpenEnv server image has python3; the script is stdlib-only), non-root, as the
 * router's uid, with the script and its config from the router's ConfigMap / uploads.
 */
export interface CapacityResponderDescription {
    readonly image: string;
    readonly imagePullPolicy: "IfNotPresent" | "Always";
    /** `127.0.0.1:<port>` (CAPACITY_RESPONDER_ADDRESS), what nginx proxies to. */
    readonly listen: string;
    readonly command: readonly string[];
    /** The script (capacity_responder.py) and its config (renderResponderConfig), beside nginx.conf in configDir. */
    readonly scriptFile: string;
    readonly scriptText: string;
    readonly configFile: string;
    readonly configText: string;
    /** Modules the script imports, by file name beside it in configDir (metrics_http.py, components/shared). */
    readonly modules: readonly MetricsFile[];
    /** Requests = limits. */
    readonly cpu: string;
    readonly memory: string;
    /**
     * Its readiness and liveness probes: an exec of the script's --probe mode (it listens on
     * loopback only, so an httpGet probe from the node could not reach it). Kubernetes runs them;
     * on Docker the same command is the container's healthcheck.
     */
    readonly probes: {
        readonly command: readonly string[];
        readonly readiness: ExecProbeTiming;
        readonly liveness: ExecProbeTiming;
    };
}

/** When and how patiently an exec probe runs. */
export interface ExecProbeTiming {
    readonly periodSeconds: number;
    readonly timeoutSeconds: number;
    readonly failureThreshold: number;
}

/** The trainer pods a router admits (Kubernetes NetworkPolicy). */
export interface TrainerPods {
    readonly namespace: string;
    /** Role and part-of only (no instance): a new run id renames the trainer Job, and its pods must still get in. */
    readonly podLabels: Readonly<Record<string, string>>;
}

interface EnvDescriptionBase {
    readonly name: string;
    readonly target: "kubernetes" | "docker";
    /** http(s) base URL the trainer gets (names.envs[name].url). */
    readonly url: string;
    /** ws(s) URL of the session route: `<url>/ws`. */
    readonly wsUrl: string;
    readonly capacity: EnvCapacity;
}

/** An env the platform runs: replicas behind a session-aware router. */
export interface DeployedEnvDescription extends EnvDescriptionBase {
    readonly kind: "deployed";
    readonly catalog: ResolvedEnv["catalog"];
    /** Kubernetes namespace of every object. */
    readonly namespace: string;
    /** Docker network where the trainer reaches the router (the private training network). */
    readonly network: string;
    /**
     * Docker network of the env's own: its replicas and its router, nothing else (docker.ts says
     * why). `internal` (no route out) with egress `dns`, a plain bridge with `internet`, as
     * envs.<name>.egress says; Docker drops traffic between bridge networks, so not the training network.
     */
    readonly replicaNetwork: string;
    /** Kubernetes: where the pods' DNS queries may go (target.dns, resolved by the config). */
    readonly dns: DnsEgress;
    /** Kubernetes: image pull Secrets every pod (and ServiceAccount) references; the Platform sets them when the stack has registryAuth. @default [] */
    readonly imagePullSecrets?: readonly string[];
    readonly replicas: EnvReplicasDescription;
    readonly router: EnvRouterDescription;
    readonly trainer: TrainerPods;
    /** Lines for plan.md's warnings (e.g. model code running as root, and what contains it). */
    readonly warnings: readonly string[];
    /** Names of the supporting Kubernetes objects. */
    readonly names: {
        readonly routerConfig: string;
        readonly replicaDisruptionBudget: string;
        readonly routerDisruptionBudget: string;
        readonly replicaNetworkPolicy: string;
        readonly routerNetworkPolicy: string;
    };
    /** observability.enabled: the session counter beside each replica, the responder's port, who may scrape; absent when off. */
    readonly metrics?: EnvMetrics;
    /** Docker, observability.enabled: the metrics ports its containers publish on the host's loopback (set by the Platform, platform/docker-metrics.ts). @default [] */
    readonly dockerMetrics?: readonly DockerMetricsTarget[];
}

/** An env served elsewhere (e.g. a hosted Space): nothing is deployed. */
export interface ExternalEnvDescription extends EnvDescriptionBase {
    readonly kind: "external";
    /** Sessions the external server holds at once (declared in config). */
    readonly sessions: number;
}

export type EnvDescription = DeployedEnvDescription | ExternalEnvDescription;

/** Everything the router needs; the component or the local runner fills it in. */
export interface RouterSettings {
    /** Environment name, shown in the capacity error and the config header; letters, digits, `_`, `-`. */
    readonly envName: string;
    /** Replica addresses as `host:port`; on Kubernetes `<sts>-<i>.<headless-svc>.<ns>.svc.cluster.local:8000`, on Docker container names. */
    readonly replicas: readonly string[];
    /** Sessions one replica holds (its MAX_CONCURRENT_ENVS, k); the router never opens more to one replica. */
    readonly sessionsPerReplica: number;
    /** Port the router listens on; the same as the env so clients need no change. @default 8000 */
    readonly listenPort?: number;
    /** Address the router binds. @default "0.0.0.0" */
    readonly listenAddress?: string;
    /** Longest silence on a websocket session (and longest wait for an HTTP answer), seconds. @default 3600 */
    readonly readTimeoutSeconds?: number;
    /** Longest a send to a client or replica may stall, seconds. @default 3600 */
    readonly sendTimeoutSeconds?: number;
    /** Longest wait to open a TCP connection to a replica before trying the next, seconds. @default 5 */
    readonly connectTimeoutSeconds?: number;
    /** How long a replica whose connection failed is skipped, seconds. @default 10 */
    readonly failTimeoutSeconds?: number;
    /** Writable directory for the pid file and nginx temp files (root FS is read-only, nginx runs non-root). @default "/tmp/env-router" */
    readonly runDir?: string;
    /** Write error.log and access.log into runDir instead of stderr/stdout. @default false */
    readonly logToFiles?: boolean;
    /** nginx worker processes; the shared zone keeps the cap exact for any count. @default 2 */
    readonly workerProcesses?: number | "auto";
    /** DNS server for re-resolving replica names at runtime (`server … resolve`, needs nginx >= 1.27.3); unset: names resolve once at start. @default undefined */
    readonly resolver?: string;
    /** How long a resolved replica address is trusted when `resolver` is set, seconds. @default 10 */
    readonly resolverValidSeconds?: number;
    /**
     * `host:port` of the capacity responder (capacity_responder.py) beside nginx: at capacity `WS /ws`
     * is proxied there, which completes the upgrade and sends OpenEnv's CAPACITY_REACHED error frame
     * with the message below; unset: nginx answers the upgrade with its own 503. @default undefined
     */
    readonly capacityResponder?: string;
    /** Sessions training is planned to hold at once, named in the capacity message. @default undefined */
    readonly demand?: number;
}

export interface EnvMetrics {
    readonly scraper: Scraper;
    /** The session counter beside each replica. */
    readonly sessions: MetricsSidecar;
    /** The capacity responder's metrics port in each router pod. */
    readonly router: MetricsPort;
    /** The ConfigMap holding the counter's program (mounted by every replica). */
    readonly configMap: string;
    readonly scraped: readonly ScrapedPods[];
    /** form annotations: the prometheus.io/* annotations of each scraped pod group, by role ({} otherwise). */
    readonly podAnnotations: Readonly<Record<string, Readonly<Record<string, string>>>>;
    /** The run stack's pod label (STACK_POD_LABEL), on every scraped pod's template beside its selector labels. */
    readonly stackLabels: Readonly<Record<string, string>>;
}
