/**
 * The env session rule, in one home: what an env declares about its sessions (concurrentSessions,
 * sessionsPerReplica), the capacity it must reach (replicas x sessions >= demand + headroom), and
 * the env vars only the platform sets. Config validation and the env component's resolve step
 * both call `envSessionProblems`, so a problem reads the same wherever it is caught.
 *
 * Upstream facts (OpenEnv environment servers): `MAX_CONCURRENT_ENVS` > 1 only for envs declaring
 * SUPPORTS_CONCURRENT_SESSIONS, `ENABLE_WEB_INTERFACE=true` adds a UI at `/web`
 * (OpenEnv src/openenv/core/env_server/http_server.py, each env's server/app.py).
 */
import { ENV_CATALOG, WS_PING_ENV_VARS } from "./catalog";
import type { Demand, ResolvedEnv } from "./types";

/** Env var OpenEnv servers read their per-process session cap from (each env's server/app.py). */
export const SESSIONS_ENV_VAR = "MAX_CONCURRENT_ENVS";
/** Env var that adds OpenEnv's web UI at /web (http_server.py); always "false" in training deployments. */
export const WEB_INTERFACE_ENV_VAR = "ENABLE_WEB_INTERFACE";

/** Replicas needed to hold `sessions` with `perReplica` each, plus headroom. */
export function replicasFor(sessions: number, perReplica: number, headroom: number): number {
    return Math.ceil(sessions / perReplica) + headroom;
}

/**
 * Every session problem of one env, each naming the field and the fix: its declarations first
 * (a wrong one stops there, so no capacity message follows from it), then its capacity, then the
 * settings that would override what the platform sets. Config validation runs this.
 */
export function envSessionProblems(e: ResolvedEnv, demand: Demand): string[] {
    const declared = declarationProblems(e, demand);
    return [...declared.problems, ...(declared.final ? [] : capacityProblems(e, demand)), ...reservedSettingProblems(e)];
}

/**
 * What one env declares about its sessions, without its capacity: the env component's own check
 * (a component used alone may be sized under its demand on purpose, as the router tests do to run
 * what the config check prevents; the capacity rule is the config's).
 */
export function envDeclarationProblems(e: ResolvedEnv, demand: Demand): string[] {
    return [...declarationProblems(e, demand).problems, ...reservedSettingProblems(e)];
}

/** The declaration problems; `final` when one of them makes the capacity numbers meaningless. */
function declarationProblems(e: ResolvedEnv, demand: Demand): { readonly problems: string[]; readonly final: boolean } {
    const f = `envs.${e.name}`;
    const errors: string[] = [];
    const sessions = demand.envSessions;
    if (e.catalog === "custom" && e.external === undefined && e.sessionsFromConfig === false) {
        errors.push(
            `${f}.sessionsPerReplica: a custom env must say how many sessions one replica holds (MAX_CONCURRENT_ENVS, 1 when it cannot serve concurrent sessions)`,
        );
    }
    // A catalog env's concurrency is its server's: declared in config, or forged past it, it is refused.
    if (e.catalog !== "custom" && (e.concurrentSessionsFromConfig !== undefined || e.concurrentSessions !== ENV_CATALOG[e.catalog].concurrentSessions)) {
        errors.push(
            `${f}.concurrentSessions: only a custom env declares it; the ${e.catalog} env's is known from its server (${ENV_CATALOG[e.catalog].concurrentSessions ? "it serves concurrent sessions" : "one session per process"}): remove the field`,
        );
        return { problems: errors, final: true };
    }
    if (!e.concurrentSessions && e.sessionsPerReplica > 1) {
        errors.push(
            `${f}.sessionsPerReplica: the ${e.catalog} env serves one session per process (it cannot serve concurrent sessions), got ${e.sessionsPerReplica}: set it to 1 and scale by replicas (${replicasFor(sessions, 1, e.headroomReplicas)} for ${sessions} sessions with ${e.headroomReplicas} spare)`,
        );
        return { problems: errors, final: true };
    }
    return { problems: errors, final: false };
}

/** The capacity rule: replicas x sessions >= demand + one replica of headroom; an external env: its sessions >= demand. */
function capacityProblems(e: ResolvedEnv, demand: Demand): string[] {
    const f = `envs.${e.name}`;
    const sessions = demand.envSessions;
    const phase = demand.evalBatch > demand.generationBatch ? `the eval batch (${demand.evalBatch})` : `the generation batch (${demand.generationBatch})`;
    if (e.external) {
        if (e.external.sessions >= sessions) return [];
        return [
            `${f}.external.sessions: the external env holds ${e.external.sessions} sessions but training opens ${sessions} at once (${phase}): use a server that holds ${sessions}, or lower training.perDeviceTrainBatchSize/perDeviceEvalBatchSize`,
        ];
    }
    const needed = sessions + e.headroomReplicas * e.sessionsPerReplica;
    if (e.capacity >= needed) return [];
    const replicas = replicasFor(sessions, e.sessionsPerReplica, e.headroomReplicas);
    const sessionsHint = e.concurrentSessions ? ` or sessionsPerReplica to ${Math.ceil(sessions / Math.max(1, e.replicas - e.headroomReplicas))}` : "";
    return [
        `${f}.replicas: ${e.replicas} replicas x ${e.sessionsPerReplica} sessions = ${e.capacity}, but training opens ${sessions} sessions at once (${phase}) plus ${e.headroomReplicas} spare replica(s) of headroom = ${needed}: raise replicas to ${replicas}${sessionsHint}`,
    ];
}

/** Settings a deployed env may not carry: the session cap, the web UI and the websocket keepalive are the platform's. */
function reservedSettingProblems(e: ResolvedEnv): string[] {
    if (e.external) return [];
    const f = `envs.${e.name}`;
    const problems: string[] = [];
    for (const reserved of new Set([SESSIONS_ENV_VAR, WEB_INTERFACE_ENV_VAR, ...(e.sessionsEnvVar !== undefined ? [e.sessionsEnvVar] : [])])) {
        if (reserved in e.settings || reserved in e.secretSettings) {
            problems.push(
                reserved === WEB_INTERFACE_ENV_VAR
                    ? `${f}.settings.${reserved}: the web UI stays off in training deployments: remove it`
                    : `${f}.settings.${reserved}: the session cap is set from sessionsPerReplica (the router caps each replica at the same number): remove it and set ${f}.sessionsPerReplica`,
            );
        }
    }
    for (const [field, name] of Object.entries(WS_PING_ENV_VARS)) {
        if (name in e.settings || name in e.secretSettings) {
            problems.push(`${f}.settings.${name}: the websocket keepalive is set from ${f}.wsPing: remove it and set ${f}.wsPing.${field}Seconds`);
        }
    }
    return problems;
}
