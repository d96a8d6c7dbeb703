/**
 * What one env holds: the sessions per replica it can really serve, and the capacity numbers the
 * plan shows. What it declares is checked by the session rule (config/env-sessions.ts, shared
 * with config validation), so a message is the same wherever it is caught. Pure.
 */
import type { ResolvedEnv } from "../config/types";
import { envDeclarationProblems } from "../config/env-sessions";
import type { EnvCapacity, EnvConfig } from "./model";

/** Sessions one replica holds (the router's cap k): an env without concurrent sessions holds 1, whatever config says. */
export function sessionsPerReplicaOf(env: ResolvedEnv): number {
    return env.concurrentSessions ? env.sessionsPerReplica : 1;
}

/** What this env declares about its sessions, checked by the session rule; its capacity is config's check (config/validate.ts). */
export function sessionProblems(config: EnvConfig, env: ResolvedEnv): string[] {
    return envDeclarationProblems(env, config.demand);
}

/** The capacity rule, as numbers for the plan: replicas x sessions >= demand + one replica of headroom. */
export function capacityOf(config: EnvConfig, env: ResolvedEnv, sessionsPerReplica: number): EnvCapacity {
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
