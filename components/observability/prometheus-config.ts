/**
 * prometheus.yml for a Prometheus on a Docker stack's host (observability.enabled, target docker):
 * one scrape job over the metrics ports the containers publish on the host's loopback
 * (shared/docker-metrics.ts), each target with the static labels a PodMonitor's target carries on
 * Kubernetes (namespace, pod, container, job), so the same rules file and dashboard select its series
 * unchanged. A relayed target (an env replica's session counter) names its own path through
 * `__metrics_path__` (Prometheus docs, configuration.md: "__metrics_path__" of a target). Pure.
 */
import { DOCKER_METRICS_HOST_IP, type DockerMetricsTarget } from "../shared/docker-metrics";
import { type ObservabilitySettings, type ObservedStack, RULES_FILE } from "./model";

/** The file name of the generated config (plan output, stack output prometheusConfig). */
export const PROMETHEUS_CONFIG_FILE = "prometheus.yml";

/** The Prometheus config object; `rulesFile` as rule_files names it (relative: beside prometheus.yml). */
export function prometheusConfig(
    settings: ObservabilitySettings,
    stack: Pick<ObservedStack, "stack">,
    targets: readonly DockerMetricsTarget[],
    rulesFile: string = RULES_FILE,
): Record<string, unknown> {
    return {
        global: { scrape_interval: settings.scrapeInterval, evaluation_interval: settings.scrapeInterval },
        rule_files: [rulesFile],
        scrape_configs: [
            {
                job_name: `agentrl-${stack.stack}`,
                scrape_interval: settings.scrapeInterval,
                metrics_path: "/metrics",
                // The targets' own `job` label (the component's, as on Kubernetes) wins over job_name.
                static_configs: targets.map((t) => ({
                    targets: [`${DOCKER_METRICS_HOST_IP}:${t.hostPort}`],
                    labels: { ...t.labels, ...(t.path !== "/metrics" ? { __metrics_path__: t.path } : {}) },
                })),
            },
        ],
    };
}

/** prometheus.yml's text: JSON, which Prometheus's YAML reader takes as it is (as the rules file). */
export function prometheusConfigText(settings: ObservabilitySettings, stack: Pick<ObservedStack, "stack">, targets: readonly DockerMetricsTarget[]): string {
    return `${JSON.stringify(prometheusConfig(settings, stack, targets), null, 2)}\n`;
}
