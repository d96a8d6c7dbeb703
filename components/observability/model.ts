/**
 * The observability folder's ground floor: the settings, the narrowed view of a stack its signals read,
 * the shapes of an alert rule and a dashboard panel, and the file names the rules and dashboard go by.
 * Imports nothing from its folder, so the pure renderers (alerts.ts, dashboard.ts, prometheus-config.ts)
 * and the component (observability.ts) all stand on it without loading one another.
 */
import type { PlatformConfig } from "../config/types";

/** File names of the rules and the dashboard (ConfigMap keys, plan output files). */
export const RULES_FILE = "agentrl-rules.yaml";
export const DASHBOARD_FILE = "agentrl-run-dashboard.json";

/** The observability settings (the config's `observability` key, defaulted). */
export type ObservabilitySettings = PlatformConfig["observability"];

/** One deployed env's capacity as the plan states it. */
export interface EnvPlan {
    /** The env's name (label env of its series). */
    readonly name: string;
    readonly replicas: number;
    readonly sessionsPerReplica: number;
    /** replicas x sessionsPerReplica. */
    readonly sessions: number;
    /** Sessions training opens at once. */
    readonly demand: number;
}

/** What the stack runs, narrowed to what its signals need. */
export interface ObservedStack {
    /**
     * The stack's prefix: titles, object names, and the STACK_SERIES_LABEL every scraped series of the
     * stack carries (the monitors copy it from the pods' STACK_POD_LABEL; Docker: set on each target).
     */
    readonly stack: string;
    /** The namespaces the stack's pods run in (Docker: the same names, set as the `namespace` label of each target). */
    readonly namespaces: { readonly training: string; readonly ingress: string; readonly envs: string };
    /** Deployed envs (external ones serve no series of ours). */
    readonly envs: readonly EnvPlan[];
    /** vLLM serves /metrics (false in colocate, where vLLM runs inside the trainer and serves no HTTP). */
    readonly vllm: boolean;
    /** The supervisor's role runner serves the agentrl_trainer_* series. */
    readonly trainer: boolean;
    /** The authenticated ingress runs (black box). */
    readonly ingress: boolean;
    /**
     * An agent-sandbox warm pool (black box on Kubernetes): its template's name, its size, and the run's burst (the
     * claims it makes at once, components/config/pool-size.ts): fewer ready than that and the next burst waits on cold starts.
     */
    readonly sandboxPool?: {
        readonly template: string;
        readonly poolSize: number;
        readonly burst: number;
        /** The Harbor path: every pool's template (one per task image, each of poolSize; `template` is the first). Absent: the one pool. */
        readonly templates?: readonly string[];
        /**
         * sandboxes.autoscale on: what the wanted-size recording rule adds to the live claims (the refill time the
         * claim rate is multiplied by, and the spare). Absent: fixed pools, no recording rule.
         */
        readonly autoscale?: { readonly refillSeconds: number; readonly headroom: number };
    };
}

/** A Prometheus recording rule (the PrometheusRule's `record` form). */
export interface RecordingRule {
    readonly record: string;
    readonly expr: string;
    readonly labels: Readonly<Record<string, string>>;
}

export interface AlertRule {
    readonly alert: string;
    readonly expr: string;
    readonly for?: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations: { readonly summary: string; readonly description: string };
}

export interface RuleGroup {
    readonly name: string;
    readonly rules: ReadonlyArray<AlertRule | RecordingRule>;
}

/** One dashboard query: its PromQL and its legend. */
export interface PanelQuery {
    readonly expr: string;
    readonly legend: string;
    /** The plan's number drawn beside the live value (a constant `vector(n)`), for the tests to tell apart. */
    readonly plan?: boolean;
}

export interface Panel {
    readonly title: string;
    readonly description: string;
    readonly unit: string;
    readonly queries: readonly PanelQuery[];
    /** The part of the stack the panel shows (which test target serves it). */
    readonly part: "envs" | "ingress" | "vllm" | "trainer" | "sandboxes";
}
