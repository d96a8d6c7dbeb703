/**
 * A Prometheus Operator PodMonitor as data, shared by the run stack's monitors (components/monitoring)
 * and the cluster stack's (agent-sandbox's controller, components/cluster).
 *
 * Fields used (prometheus-operator pkg/apis/monitoring v0.95.2, v1/podmonitor_types.go):
 * spec.selector, spec.jobLabel, spec.podMetricsEndpoints[].port (a container port's name), .path, .interval,
 * .relabelings[] (sourceLabels, targetLabel; action defaults to replace of the whole value: monitoring v1 RelabelConfig).
 */

/** The Prometheus Operator's API of the monitors. */
export const MONITORING_API_VERSION = "monitoring.coreos.com/v1";

export interface PodMonitorDescription {
    readonly name: string;
    readonly namespace: string;
    /** What the Prometheus's podMonitorSelector matches (observability.monitorLabels), and part-of. */
    readonly labels: Readonly<Record<string, string>>;
    /** The pods' own labels: the selector. */
    readonly selector: Readonly<Record<string, string>>;
    /** The pod label whose value becomes the targets' `job`. */
    readonly jobLabel: string;
    readonly endpoints: ReadonlyArray<{ readonly port: string; readonly path: string; readonly interval: string }>;
    /** Each endpoint's relabelings: a pod label copied onto its targets (the run stack's). @default none */
    readonly relabelings?: ReadonlyArray<{ readonly sourceLabels: readonly string[]; readonly targetLabel: string }>;
    /** What is scraped, for plan.md. */
    readonly what: string;
}

/** The PodMonitor's spec as the Operator reads it. */
export function podMonitorSpec(m: PodMonitorDescription): Record<string, unknown> {
    return {
        jobLabel: m.jobLabel,
        selector: { matchLabels: { ...m.selector } },
        podMetricsEndpoints: m.endpoints.map((e) => ({
            port: e.port,
            path: e.path,
            interval: e.interval,
            ...(m.relabelings !== undefined && m.relabelings.length > 0
                ? { relabelings: m.relabelings.map((r) => ({ sourceLabels: [...r.sourceLabels], targetLabel: r.targetLabel })) }
                : {}),
        })),
    };
}
