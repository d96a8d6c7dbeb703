/**
 * The Platform's ground floor: the resolved plan's shape and what it is made of, shared by the
 * resolve step (resolve.ts), the decisions it calls (docker-metrics.ts, observability.ts,
 * prerequisites.ts, docker-host.ts) and the component (platform.ts). Imports nothing from this folder.
 */
import type { PlatformNames } from "../config/names";
import type { PlatformConfig } from "../config/types";
import type { EnvDescription } from "../env";
import type { IngressDescription } from "../ingress";
import type { SandboxDescription } from "../sandbox";
import type { TrainingDescription } from "../training";
import type { MetricsPrograms } from "../shared/metrics-pods";
import type { MonitoringDescription } from "../monitoring";
import type { DockerMetricsTarget } from "../shared/docker-metrics";

/** Which secrets the stack has (their values stay secret outputs; only presence matters here). */
export interface SecretPresence {
    readonly hfToken: boolean;
    /** The registries the registryAuth secret names, when it is set: every pod of the stack pulls with it (Kubernetes: names.pullSecret). @default undefined */
    readonly registryAuth?: readonly string[];
}

export interface PlatformPlan {
    /** The registries the stack's registryAuth secret names (undefined: no registry credentials, node credentials only). */
    readonly registryAuth?: readonly string[];
    readonly config: PlatformConfig;
    readonly names: PlatformNames;
    readonly training: TrainingDescription;
    /** One description per env server (deployed or external). */
    readonly envs: readonly EnvDescription[];
    /** The authenticated vLLM ingress, for black-box runs. */
    readonly ingress?: IngressDescription;
    /** The sandbox pool, for black-box runs. */
    readonly sandboxes?: SandboxDescription;
    /** observability.enabled: every scraped pod group and, on Kubernetes with form operator, its PodMonitor. */
    readonly monitoring?: MonitoringDescription;
    /** Docker, observability.enabled: every metrics port published on the host's loopback, prometheus.yml's targets. @default [] */
    readonly dockerMetrics: readonly DockerMetricsTarget[];
    /** Things the operator should know that are not errors (shown in the plan). */
    readonly warnings: readonly string[];
    /** What the stack uses but neither creates nor checks: named loudly in plan.md and at `pulumi up`. */
    readonly prerequisites: readonly Prerequisite[];
}

/** A cluster object or capability the stack refers to but does not create. */
export interface Prerequisite {
    /** What must exist. */
    readonly what: string;
    /** The config field that refers to it. */
    readonly field: string;
    /** What breaks, and how, if it is missing. */
    readonly otherwise: string;
    /** A command that checks it. */
    readonly check: string;
}

/** What resolvePlatform takes besides the config and the secrets. */
export interface PlatformResolveOptions {
    /** The metrics sidecars' programs (observability.enabled). @default the project's own, components/observability */
    readonly metricsPrograms?: MetricsPrograms;
}
