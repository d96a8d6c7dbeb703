/**
 * What one env holds: the sessions per replica it can really serve, and the capacity numbers the
 * plan shows. Whether those numbers are enough is the session rule's (config/env-sessions.ts,
 * shared with config validation), so the message is the same wherever it is caught. Pure.
 */
import type { ResolvedEnv } from "../config/types";
import { envSessionProblems } from "../config/env-sessions";
import type { EnvCapacity, EnvConfig } from "./model";

/** Sessions one replica holds (the router's cap k): an env without concurrent sessions holds 1, whatever config says. */
export function sessionsPerReplicaOf(env: ResolvedEnv): number {
    return env.concurrentSessions ? env.sessionsPerReplica : 1;
}

/** The session rule's problems for this env, each naming the field and the fix. */
export function sessionProblems(config: EnvConfig, env: ResolvedEnv): string[] {
    return envSessionProblems(env, config.demand);
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
