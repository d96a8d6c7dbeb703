/**
 * How an env's replicas run: their env vars, security, probes, and how long a half-open client
 * holds a slot. Pure.
 *
 * Upstream facts this depends on (OpenEnv environment servers):
 * - the uvicorn CLI (every catalog image's CMD) reads UVICORN_WS_PING_INTERVAL / _TIMEOUT (uvicorn
 *   main.py, click auto_envvar_prefix); no catalog app sets ConcurrencyConfig(session_timeout=...),
 *   so the server's ping is what frees a half-open client's slot.
 * - `MAX_CONCURRENT_ENVS` > 1 only for envs declaring SUPPORTS_CONCURRENT_SESSIONS; coding_env
 *   serves one session per process (each env's server/app.py).
 */
import { dnsName, podLabels } from "../config/names";
import type { ResolvedEnv } from "../config/types";
import { ENV_CATALOG, NON_ROOT_UID, WS_PING_ENV_VARS, type CatalogEntry } from "../config/catalog";
import { imagePullPolicy } from "../shared/images";
import {
    REPLICA_SCRATCH_PATH,
    SESSIONS_ENV_VAR,
    WEB_INTERFACE_ENV_VAR,
    type EnvObjectNames,
    type EnvProbe,
    type EnvReplicasDescription,
    type ReplicaSecurity,
} from "./model";

/** The catalog entry of a catalogued env, undefined for custom. */
export function catalogEntry(env: ResolvedEnv): CatalogEntry | undefined {
    return env.catalog === "custom" ? undefined : ENV_CATALOG[env.catalog];
}

/**
 * The plan warning for an env that runs the model's code as root (only after the explicit opt-out,
 * envs.<name>.runAsNonRoot: false): what contains it instead, read from what the targets render
 * (kubernetes.ts / docker.ts), and how to undo the opt-out.
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
    return `env ${name} runs the model's code as root (envs.${name}.runAsNonRoot: false; the OpenEnv image has no USER); it is contained by ${contained.join(", ")}. Remove the opt-out to run it as uid ${NON_ROOT_UID}, the default for an env that runs model code`;
}

/** The plan warnings of an env's replicas (model code running as root, and what contains it). */
export function replicaWarnings(env: ResolvedEnv, target: "kubernetes" | "docker", security: ReplicaSecurity): string[] {
    const warning = catalogEntry(env)?.runsModelCode === true ? rootCodeWarning(env.name, target, security) : undefined;
    return warning !== undefined ? [warning] : [];
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

/** How a replica's process runs: non-root when the image or config says so, hardened either way. */
export function replicaSecurity(env: ResolvedEnv): ReplicaSecurity {
    return {
        runAsNonRoot: env.nonRoot || env.runAsUser !== undefined,
        runAsUser: env.runAsUser,
        user: env.runAsUser !== undefined ? `uid ${env.runAsUser}` : (catalogEntry(env)?.user ?? "the image's"),
        allowPrivilegeEscalation: false,
        dropCapabilities: ["ALL"],
        seccompProfile: "RuntimeDefault",
        readOnlyRootFilesystem: env.readOnlyRootFilesystem,
        scratchSize: env.scratchSize,
        ephemeralStorage: env.ephemeralStorage,
        runtimeClassName: env.runtimeClassName,
        egress: env.egress,
    };
}

/** Docker container names, one per replica (empty on Kubernetes, where the StatefulSet names its pods). */
export function replicaContainerNames(target: "kubernetes" | "docker", env: ResolvedEnv, n: EnvObjectNames): string[] {
    return target === "docker" ? Array.from({ length: env.replicas }, (_, i) => dnsName([n.replicas, String(i)])) : [];
}

/** The replicas' startup, readiness and liveness probes on the env's health route. */
function replicaProbes(env: ResolvedEnv): EnvReplicasDescription["probes"] {
    const health = (periodSeconds: number, timeoutSeconds: number, failureThreshold: number): EnvProbe => ({
        path: env.healthPath,
        port: env.port,
        periodSeconds,
        timeoutSeconds,
        failureThreshold,
    });
    return {
        // First start may download data (e.g. TEXTARENA_DOWNLOAD_NLTK): up to 10 minutes.
        startup: health(5, 3, 120),
        // A replica that stops answering leaves the headless Service (and the router's upstream) quickly.
        readiness: health(10, 5, 3),
        // Generous: a busy env (e.g. running tests) may answer slowly, and a restart kills every session on it.
        liveness: health(30, 10, 10),
    };
}

/** The replicas of one deployed env: k sessions each, behind the router. */
export function replicasDescription(
    env: ResolvedEnv,
    n: EnvObjectNames,
    k: number,
    containerNames: readonly string[],
    security: ReplicaSecurity,
): EnvReplicasDescription {
    const entry = catalogEntry(env);
    const envVars = replicaEnv(env, k);
    return {
        name: n.replicas,
        headlessService: n.headless,
        containerNames,
        count: env.replicas,
        image: env.image,
        imagePullPolicy: imagePullPolicy(env.image),
        port: env.port,
        healthPath: env.healthPath,
        wsPath: env.wsPath,
        env: envVars,
        secretEnv: env.secretSettings,
        cpu: env.cpu,
        memory: env.memory,
        probes: replicaProbes(env),
        security,
        terminationGraceSeconds: env.terminationGraceSeconds,
        wsPing: env.wsPing,
        serverCommand: entry?.command.form ?? "unknown",
        idleReaper: entry?.idleReaper ?? { kind: "unknown" },
        halfOpenSlotSeconds: halfOpenSlotSeconds(env, envVars),
        podLabels: podLabels("env-replica", n.replicas),
    };
}
