/**
 * The Platform's side of observability: the metrics programs its components' sidecars run
 * (components/observability, handed down through resolvePlatform), and what the run's rules and
 * dashboard see of the plan (which parts run, the capacity numbers plan.md states).
 */
import { runsSandboxPool } from "../config/sandbox-providers";
import { INGRESS_MTAIL, SESSION_COUNTER, programText, renderVllmMetricsProxy, type ObservedStack } from "../observability";
import { dnsName, type PlatformNames } from "../config/names";
import type { MetricsPrograms } from "../shared/metrics-pods";
import type { PlatformPlan } from "./model";

/** The project's own metrics programs, as files for the sidecars' ConfigMaps. */
export function projectMetricsPrograms(): MetricsPrograms {
    return {
        // nginxinc/nginx-unprivileged keeps its pid and temp files in the sidecar's memory-backed /tmp (training/metrics.ts).
        vllmListener: { file: "vllm-metrics.conf", text: renderVllmMetricsProxy({ runtimeDir: "/tmp" }) },
        ingressLog: { file: INGRESS_MTAIL.file, text: programText(INGRESS_MTAIL) },
        sessionCounter: { file: SESSION_COUNTER.file, text: programText(SESSION_COUNTER) },
    };
}

/** The rule and dashboard objects' names: per stack (each run of it replaces them), never colliding with another stack. */
export function observabilityObjectNames(names: Pick<PlatformNames, "prefix">): { readonly rules: string; readonly dashboard: string } {
    return { rules: dnsName([names.prefix, "alert-rules"]), dashboard: dnsName([names.prefix, "run-dashboard"]) };
}

/** What the run's rules and dashboard watch, from the resolved plan. */
export function observedStack(plan: Pick<PlatformPlan, "config" | "names" | "envs" | "training" | "ingress" | "sandboxes">): ObservedStack {
    const n = plan.names;
    const pool = plan.sandboxes;
    return {
        stack: n.prefix,
        namespaces: { training: n.namespaces.training, ingress: n.namespaces.ingress, envs: n.namespaces.envs },
        envs: plan.envs
            .filter((e) => e.kind === "deployed")
            .map((e) => ({
                name: e.name,
                replicas: e.capacity.replicas,
                sessionsPerReplica: e.capacity.sessionsPerReplica,
                sessions: e.capacity.sessions,
                demand: e.capacity.demand,
            })),
        vllm: plan.training.metrics?.vllm !== undefined,
        // The role runner serves them on Kubernetes (training/role-runner.ts); Docker's trainer runs bare.
        trainer: plan.training.metrics !== undefined && plan.config.target.kind === "kubernetes",
        ingress: plan.ingress !== undefined,
        sandboxPool:
            pool !== undefined && runsSandboxPool(plan.config) && plan.config.target.kind === "kubernetes"
                ? {
                      ...(pool.pools.some((p) => p.taskKey !== undefined)
                          ? {
                                template: pool.pools[0].template,
                                poolSize: pool.poolSize,
                                burst: pool.sizing.burst,
                                templates: pool.pools.map((p) => p.template),
                            }
                          : { template: n.sandboxes.template, poolSize: pool.poolSize, burst: pool.sizing.burst }),
                      ...(pool.pools.some((p) => p.autoscale !== undefined)
                          ? { autoscale: { refillSeconds: pool.sizing.refillSeconds, headroom: pool.sizing.margin } }
                          : {}),
                  }
                : undefined,
    };
}
