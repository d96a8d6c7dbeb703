/**
 * The EnvSpace's one resolve step: pure, no Pulumi. Every port, env var, probe, resource,
 * replica address, router setting, the rendered router config and the capacity numbers of one
 * OpenEnv environment are decided here, once, for both targets; `kubernetes.ts` and
 * `docker.ts` only translate this description.
 *
 * Upstream facts this depends on (OpenEnv environment servers):
 * - every server is a FastAPI app on 8000 with `WS /ws` and `GET /health`; `ENABLE_WEB_INTERFACE=true`
 *   adds a UI at `/web` (OpenEnv src/openenv/core/env_server/http_server.py): kept off here.
 * - `MAX_CONCURRENT_ENVS` > 1 only for envs declaring SUPPORTS_CONCURRENT_SESSIONS; coding_env
 *   serves one session per process (each env's server/app.py).
 * - the uvicorn CLI (every catalog image's CMD) reads UVICORN_WS_PING_INTERVAL / _TIMEOUT (uvicorn
 *   main.py, click auto_envvar_prefix); no catalog app sets ConcurrencyConfig(session_timeout=...),
 *   so the server's ping is what frees a half-open client's slot.
 * - a Service spreads connections blindly, so the trainer talks to a session-aware router
 *   (router.ts, ROUTER.md) that caps every replica at k sessions.
 */
import { dnsEgressFor } from "../config/dns";
import type { DnsEgress } from "../shared/kubernetes";
import { imagePullPolicy } from "../shared/images";
import { createHash } from "node:crypto";
import { ConfigError } from "../config/parse";
import { dnsName, podLabels, type PlatformNames } from "../config/names";
import type { PlatformConfig, ResolvedEnv } from "../config/resolve";
import { DOCKER_EMBEDDED_DNS } from "../shared/docker";
import { METRICS_PORTS, type MetricsFile, type MetricsLinks } from "../shared/metrics-pods";
import { metricsHttpModule } from "../shared/metrics-http";
import { envMetrics, type EnvMetrics } from "./metrics";
import type { DockerMetricsTarget } from "../shared/docker-metrics";
import { ENV_CATALOG, NON_ROOT_UID, WS_PING_ENV_VARS, type CatalogEntry, type IdleReaper, type WsPing } from "../config/catalog";
import { capacityResponderScript, RESPONDER_CONFIG_FILE, RESPONDER_SCRIPT_FILE, responderCommand } from "./responder";
import {
    CAPACITY_RESPONDER_ADDRESS,
    NGINX_MIN_VERSION_FOR_RESOLVE,
    ROUTER_HEALTH_PATH,
    renderResponderConfig,
    renderRouterConfig,
    resolveRouterSettings,
    routerCommand,
    statefulSetReplicaAddresses,
    validateRouterSettings,
    type RouterSettings,
} from "./router";

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

/** Env var OpenEnv servers read their per-process session cap from (each env's server/app.py). */
export const SESSIONS_ENV_VAR = "MAX_CONCURRENT_ENVS";
/** Env var that adds OpenEnv's web UI at /web (http_server.py); always "false" in training deployments. */
export const WEB_INTERFACE_ENV_VAR = "ENABLE_WEB_INTERFACE";
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
    /** When the image runs as a non-root user (catalog) or config opts in (runAsUser set); OpenEnv images run as root. */
    readonly runAsNonRoot: boolean;
    /** uid and gid (also fsGroup) the replicas run as when config opts in (envs.<name>.runAsNonRoot); unset: the image's user. */
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

/**
 * The plan warning for an env that runs the model's code as root: what contains it instead, read
 * from what the targets render (kubernetes.ts / docker.ts), and the opt-in that would change it.
 */
export function rootCodeWarning(name: string, target: "kubernetes" | "docker", sec: ReplicaSecurity): string | undefined {
    if (sec.runAsNonRoot) return undefined;
    const contained = [
        sec.readOnlyRootFilesystem
            ? `a read-only root filesystem (writable: ${REPLICA_SCRATCH_PATH}, ${sec.scratchSize})`
            : "a WRITABLE root filesystem (envs.<name>.readOnlyRootFilesystem is false)",
        target === "kubernetes" ? "every capability dropped, no privilege escalation" : "every capability dropped, no-new-privileges",
        target === "kubernetes" ? "seccomp RuntimeDefault" : "Docker's default seccomp profile",
        sec.egress === "dns"
            ? target === "kubernetes"
                ? "egress to cluster DNS only (NetworkPolicy)"
                : "no route out (an internal Docker network with its router)"
            : target === "kubernetes"
              ? "egress to cluster DNS and public addresses (NetworkPolicy; no private ranges)"
              : "egress to the internet (a plain bridge)",
        ...(sec.runtimeClassName !== undefined && target === "kubernetes" ? [`runtimeClass ${sec.runtimeClassName}`] : []),
    ];
    return `env ${name} runs the model's code as root (the OpenEnv image has no USER); it is contained by ${contained.join(", ")}. Set envs.${name}.runAsNonRoot: true to run it as uid ${NON_ROOT_UID} (not yet tried against the real image)`;
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

/** `http://h:8000` -> `ws://h:8000/ws`; `https` -> `wss`. */
export function wsUrlOf(url: string, wsPath: string): string {
    return `${url.replace(/^http/, "ws").replace(/\/+$/, "")}${wsPath}`;
}

/**
 * The nginx version an image tag names ("nginxinc/nginx-unprivileged:1.27-alpine" -> "1.27"),
 * or undefined when the tag names none (latest, stable, mainline, alpine, a bare digest).
 */
export function nginxImageVersion(image: string): string | undefined {
    const ref = image.split("@")[0] ?? image;
    const slash = ref.lastIndexOf("/");
    const colon = ref.lastIndexOf(":");
    if (colon <= slash) return undefined;
    const m = /^(\d+)\.(\d+)(?:\.(\d+))?/.exec(ref.slice(colon + 1));
    if (m === null) return undefined;
    return m[3] !== undefined ? `${m[1]}.${m[2]}.${m[3]}` : `${m[1]}.${m[2]}`;
}

/** Whether an image tag can serve `server ... resolve`; a floating "1.27" tag is the newest 1.27.x (>= 1.27.3). */
export function nginxImageSupportsResolve(image: string): boolean {
    const v = nginxImageVersion(image);
    if (v === undefined) return true;
    const [major = 0, minor = 0, patch] = v.split(".").map(Number);
    const [minMajor = 0, minMinor = 0, minPatch = 0] = NGINX_MIN_VERSION_FOR_RESOLVE.split(".").map(Number);
    if (major !== minMajor) return major > minMajor;
    if (minor !== minMinor) return minor > minMinor;
    return patch === undefined || patch >= minPatch;
}

function capacityOf(config: EnvConfig, env: ResolvedEnv, sessionsPerReplica: number): EnvCapacity {
    const d = config.demand;
    if (env.external) {
        return {
            deployed: false,
            replicas: 0,
            sessionsPerReplica: env.external.sessions,
            sessions: env.external.sessions,
            demand: d.envSessions,
            generationBatch: d.generationBatch,
            evalBatch: d.evalBatch,
            headroomReplicas: 0,
            required: d.envSessions,
            spareSessions: env.external.sessions - d.envSessions,
        };
    }
    const sessions = env.replicas * sessionsPerReplica;
    return {
        deployed: true,
        replicas: env.replicas,
        sessionsPerReplica,
        sessions,
        demand: d.envSessions,
        generationBatch: d.generationBatch,
        evalBatch: d.evalBatch,
        headroomReplicas: env.headroomReplicas,
        required: d.envSessions + env.headroomReplicas * sessionsPerReplica,
        spareSessions: sessions - d.envSessions,
    };
}

/**
 * Sessions per replica the env can really hold: an env without concurrent-session support is
 * 1, whatever config says; the problems name the field to fix.
 */
function sessionProblems(env: ResolvedEnv, f: string): string[] {
    const problems: string[] = [];
    const entry = env.catalog === "custom" ? undefined : ENV_CATALOG[env.catalog];
    if (entry !== undefined && !entry.concurrentSessions && env.concurrentSessions) {
        problems.push(
            `${f}.concurrentSessions: the ${env.catalog} env serves one session per process (its server does not read ${SESSIONS_ENV_VAR}): remove concurrentSessions and scale by replicas`,
        );
    }
    const concurrent = env.concurrentSessions && (entry?.concurrentSessions ?? true);
    if (!concurrent && env.sessionsPerReplica > 1) {
        problems.push(
            `${f}.sessionsPerReplica: the ${env.catalog} env cannot serve concurrent sessions, got ${env.sessionsPerReplica}: set it to 1 and scale by replicas`,
        );
    }
    for (const reserved of new Set([SESSIONS_ENV_VAR, WEB_INTERFACE_ENV_VAR, ...(env.sessionsEnvVar !== undefined ? [env.sessionsEnvVar] : [])])) {
        if (reserved in env.settings) {
            problems.push(
                reserved === WEB_INTERFACE_ENV_VAR
                    ? `${f}.settings.${reserved}: the web UI stays off in training deployments: remove it`
                    : `${f}.settings.${reserved}: the session cap is set from sessionsPerReplica (the router caps each replica at the same number): remove it and set ${f}.sessionsPerReplica`,
            );
        }
    }
    for (const [field, name] of Object.entries(WS_PING_ENV_VARS)) {
        if (name in env.settings) {
            problems.push(`${f}.settings.${name}: the websocket keepalive is set from ${f}.wsPing: remove it and set ${f}.wsPing.${field}Seconds`);
        }
    }
    return problems;
}

/** The catalog entry of a catalogued env, undefined for custom. */
function catalogEntry(env: ResolvedEnv): CatalogEntry | undefined {
    return env.catalog === "custom" ? undefined : ENV_CATALOG[env.catalog];
}

/**
 * Replica env vars: the env's settings, the web UI off, the session cap, the websocket keepalive
 * (read by the uvicorn CLI every catalog image runs), and the idle reaper's timeout where the app
 * reads one (the settings may override its default).
 */
function replicaEnv(env: ResolvedEnv, k: number): Record<string, string> {
    const reaper = catalogEntry(env)?.idleReaper;
    const out: Record<string, string> = {
        ...(reaper?.kind === "env" ? { [reaper.envVar]: String(reaper.defaultSeconds) } : {}),
        ...env.settings,
        [WEB_INTERFACE_ENV_VAR]: "false",
        [WS_PING_ENV_VARS.interval]: String(env.wsPing.intervalSeconds),
        [WS_PING_ENV_VARS.timeout]: String(env.wsPing.timeoutSeconds),
        // uid 65532 has no home in the image: caches (NLTK data, Gradio) go to the scratch dir.
        ...(env.runAsUser !== undefined ? { HOME: REPLICA_SCRATCH_PATH } : {}),
    };
    // An env without concurrent sessions gets an explicit 1, so an image whose own default is higher still holds one.
    out[env.concurrentSessions ? (env.sessionsEnvVar ?? SESSIONS_ENV_VAR) : SESSIONS_ENV_VAR] = String(k);
    return out;
}

/** How long a half-open client holds a slot: the keepalive's interval + timeout, or a shorter idle reaper. */
function halfOpenSlotSeconds(env: ResolvedEnv, replicaEnvVars: Readonly<Record<string, string>>): number {
    const ping = env.wsPing.intervalSeconds + env.wsPing.timeoutSeconds;
    const reaper = catalogEntry(env)?.idleReaper;
    if (reaper?.kind !== "env") return ping;
    // The reaper checks every max(timeout / 4, 5) s (http_server.py _reap_idle_sessions).
    const timeout = Number(replicaEnvVars[reaper.envVar] ?? reaper.defaultSeconds);
    return Number.isFinite(timeout) && timeout > 0 ? Math.min(ping, Math.ceil(timeout + Math.max(timeout / 4, 5))) : ping;
}

/** Resolves one env server of the config into its target-neutral description; throws ConfigError naming each field. */
export function resolveEnvSpace(config: EnvConfig, env: ResolvedEnv, names: EnvNames, metricsLinks?: MetricsLinks): EnvDescription {
    const f = `envs.${env.name}`;
    const n = names.envs[env.name];
    if (n === undefined) throw new ConfigError([`${f}: no names were computed for this env (platformNames must run over the same config)`]);
    const target = config.target.kind;
    const url = n.url;
    const wsUrl = wsUrlOf(url, env.wsPath);

    if (env.external) {
        return {
            kind: "external",
            name: env.name,
            target,
            url,
            wsUrl,
            sessions: env.external.sessions,
            capacity: capacityOf(config, env, env.external.sessions),
        };
    }

    const problems = sessionProblems(env, f);
    if (!nginxImageSupportsResolve(config.images.nginx)) {
        problems.push(
            `images.nginx: the env router re-resolves replica names with "server ... resolve", which needs nginx >= ${NGINX_MIN_VERSION_FOR_RESOLVE}; '${config.images.nginx}' is ${nginxImageVersion(config.images.nginx)}: use nginxinc/nginx-unprivileged:1.27-alpine or newer`,
        );
    }
    if (target === "kubernetes" && n.replicas.length > 52) {
        // The StatefulSet controller labels pods with <name>-<10-char hash>, a label value of at most 63.
        problems.push(`${f}: StatefulSet name '${n.replicas}' is ${n.replicas.length} characters; Kubernetes allows 52: shorten the env name`);
    }
    const k = env.concurrentSessions ? env.sessionsPerReplica : 1;
    const entry = catalogEntry(env);
    const security: ReplicaSecurity = {
        runAsNonRoot: env.nonRoot || env.runAsUser !== undefined,
        runAsUser: env.runAsUser,
        user: env.runAsUser !== undefined ? `uid ${env.runAsUser}` : (entry?.user ?? "the image's"),
        allowPrivilegeEscalation: false,
        dropCapabilities: ["ALL"],
        seccompProfile: "RuntimeDefault",
        readOnlyRootFilesystem: env.readOnlyRootFilesystem,
        scratchSize: env.scratchSize,
        ephemeralStorage: env.ephemeralStorage,
        runtimeClassName: env.runtimeClassName,
        egress: env.egress,
    };
    const rootWarning = entry?.runsModelCode === true ? rootCodeWarning(env.name, target, security) : undefined;
    const envVars = replicaEnv(env, k);
    const port = env.port;
    const namespace = names.namespaces.envs;
    const containerNames = target === "docker" ? Array.from({ length: env.replicas }, (_, i) => dnsName([n.replicas, String(i)])) : [];
    const replicaAddresses =
        target === "kubernetes"
            ? statefulSetReplicaAddresses({ statefulSet: n.replicas, headlessService: n.headless, namespace, replicas: env.replicas, port })
            : containerNames.map((c) => `${c}:${port}`);
    const settings: RouterSettings = {
        envName: env.name,
        replicas: replicaAddresses,
        sessionsPerReplica: k,
        listenPort: port,
        runDir: ROUTER_RUN_DIR,
        resolver: target === "kubernetes" ? KUBERNETES_RESOLVER : DOCKER_RESOLVER,
        capacityResponder: CAPACITY_RESPONDER_ADDRESS,
        demand: config.demand.envSessions,
    };
    problems.push(...validateRouterSettings(settings).map((p) => `${f} router: ${p}`));
    const observed = config.observability?.enabled ?? false;
    if (observed && metricsLinks === undefined)
        problems.push(
            `observability.enabled: env ${env.name} needs the scraper and the metrics programs: the Platform must pass them (resolveEnvSpace's metricsLinks)`,
        );
    if (problems.length > 0) throw new ConfigError(problems);

    const configText = renderRouterConfig(settings);
    const responderConfigText = renderResponderConfig(settings);
    const responderScript = capacityResponderScript();
    const responderModules = [metricsHttpModule()];
    const responderScriptFile = `${ROUTER_CONFIG_DIR}/${RESPONDER_SCRIPT_FILE}`;
    const responderConfigFile = `${ROUTER_CONFIG_DIR}/${RESPONDER_CONFIG_FILE}`;
    const health = (periodSeconds: number, timeoutSeconds: number, failureThreshold: number): EnvProbe => ({
        path: env.healthPath,
        port,
        periodSeconds,
        timeoutSeconds,
        failureThreshold,
    });
    const routerHealth = (periodSeconds: number, timeoutSeconds: number, failureThreshold: number): EnvProbe => ({
        path: ROUTER_HEALTH_PATH,
        port,
        periodSeconds,
        timeoutSeconds,
        failureThreshold,
    });

    return {
        kind: "deployed",
        name: env.name,
        target,
        dns: dnsEgressFor(config.target),
        catalog: env.catalog,
        url,
        wsUrl,
        capacity: capacityOf(config, env, k),
        namespace,
        network: names.networks.training,
        replicaNetwork: dnsName([n.routerService, "net"]),
        replicas: {
            name: n.replicas,
            headlessService: n.headless,
            containerNames,
            count: env.replicas,
            image: env.image,
            imagePullPolicy: imagePullPolicy(env.image),
            port,
            healthPath: env.healthPath,
            wsPath: env.wsPath,
            env: envVars,
            cpu: env.cpu,
            memory: env.memory,
            probes: {
                // First start may download data (e.g. TEXTARENA_DOWNLOAD_NLTK): up to 10 minutes.
                startup: health(5, 3, 120),
                // A replica that stops answering leaves the headless Service (and the router's upstream) quickly.
                readiness: health(10, 5, 3),
                // Generous: a busy env (e.g. running tests) may answer slowly, and a restart kills every session on it.
                liveness: health(30, 10, 10),
            },
            security,
            terminationGraceSeconds: env.terminationGraceSeconds,
            wsPing: env.wsPing,
            serverCommand: entry?.command.form ?? "unknown",
            idleReaper: entry?.idleReaper ?? { kind: "unknown" },
            halfOpenSlotSeconds: halfOpenSlotSeconds(env, envVars),
            podLabels: podLabels("env-replica", n.replicas),
        },
        router: {
            name: n.router,
            service: n.routerService,
            image: config.images.nginx,
            imagePullPolicy: imagePullPolicy(config.images.nginx),
            port,
            replicas: ROUTER_REPLICAS,
            settings,
            configText,
            // Any of its files changed replaces the router (never reloaded in place).
            configChecksum: [responderConfigText, responderScript, ...responderModules.map((m) => m.text)]
                .reduce((h, text) => h.update(text), createHash("sha256").update(configText))
                .digest("hex"),
            configDir: ROUTER_CONFIG_DIR,
            configFile: ROUTER_CONFIG_FILE,
            runDir: resolveRouterSettings(settings).runDir,
            command: routerCommand(settings, ROUTER_CONFIG_FILE),
            healthPath: ROUTER_HEALTH_PATH,
            probes: { readiness: routerHealth(5, 2, 2), liveness: routerHealth(10, 3, 3) },
            cpu: "500m",
            memory: "256Mi",
            security: {
                runAsUser: ROUTER_UID,
                runAsGroup: ROUTER_UID,
                readOnlyRootFilesystem: true,
                allowPrivilegeEscalation: false,
                dropCapabilities: ["ALL"],
                seccompProfile: "RuntimeDefault",
                runDirSizeLimit: "64Mi",
                terminationGraceSeconds: 30,
            },
            affinityTimeoutSeconds: ROUTER_AFFINITY_SECONDS,
            podLabels: podLabels("env-router", n.router),
            responder: {
                image: env.image,
                imagePullPolicy: imagePullPolicy(env.image),
                listen: CAPACITY_RESPONDER_ADDRESS,
                command: responderCommand({
                    scriptPath: responderScriptFile,
                    configPath: responderConfigFile,
                    listen: CAPACITY_RESPONDER_ADDRESS,
                    // observability: its CAPACITY_REACHED counter on the pod's address, the router pod's metrics port.
                    ...(observed && metricsLinks !== undefined ? { metricsListen: `0.0.0.0:${METRICS_PORTS.envRouter.port}` } : {}),
                }),
                scriptFile: responderScriptFile,
                scriptText: responderScript,
                configFile: responderConfigFile,
                configText: responderConfigText,
                modules: responderModules,
                cpu: "100m",
                memory: "64Mi",
            },
        },
        trainer: {
            namespace: names.namespaces.training,
            podLabels: trainerSelector(),
        },
        warnings: rootWarning !== undefined ? [rootWarning] : [],
        names: {
            routerConfig: dnsName([n.router, "config"]),
            replicaDisruptionBudget: n.replicas,
            routerDisruptionBudget: n.router,
            replicaNetworkPolicy: n.replicas,
            routerNetworkPolicy: n.router,
        },
        metrics:
            observed && metricsLinks !== undefined
                ? envMetrics({
                      links: metricsLinks,
                      env: env.name,
                      image: env.image,
                      port,
                      sessionsPerReplica: k,
                      statefulSet: n.replicas,
                      namespace,
                      replicaPodLabels: podLabels("env-replica", n.replicas),
                      routerPodLabels: podLabels("env-router", n.router),
                  })
                : undefined,
    };
}

/**
 * The trainer pods by role and project only: podLabels("trainer", job) also carries the Job name,
 * which holds the run id, so selecting on it would lock the next run out of a long-lived env.
 */
function trainerSelector(): Record<string, string> {
    const all = podLabels("trainer", "any");
    return { "app.kubernetes.io/name": all["app.kubernetes.io/name"]!, "app.kubernetes.io/part-of": all["app.kubernetes.io/part-of"]! };
}
