/**
 * How the stack is scraped (observability.enabled), from the metrics ports every component's
 * description declares (their `scraped` pods): with form `operator` one PodMonitor
 * (monitoring.coreos.com/v1) per pod group, in the pods' own namespace, selecting them by the very
 * label object their pods carry (podLabels() in config/names.ts) and scraping each metrics port by
 * name; with form `annotations` the pod annotations a Prometheus with its own pod discovery reads.
 * Pure: no Pulumi.
 */
import { dnsName } from "../config/names";
import type { PlatformConfig } from "../config/types";
import { STACK_RELABELING, type ScrapedPods } from "../shared/metrics-pods";
import type { PodMonitorDescription } from "../shared/pod-monitor";
import { JOB_LABEL, type MonitoringDescription } from "./model";

/** Kubernetes: the monitors of the stack's scraped pods. */
export function resolveMonitoring(observability: PlatformConfig["observability"], scraped: readonly ScrapedPods[]): MonitoringDescription {
    const podMonitors =
        observability.form === "operator"
            ? scraped.map(
                  (s): PodMonitorDescription => ({
                      name: dnsName([s.podLabels["app.kubernetes.io/instance"] ?? s.role, "metrics"]),
                      namespace: s.namespace,
                      labels: { ...observability.monitorLabels, "app.kubernetes.io/part-of": "agent-rl-infra" },
                      selector: { ...s.podLabels },
                      jobLabel: JOB_LABEL,
                      endpoints: s.ports.map((p) => ({ port: p.name, path: p.path, interval: observability.scrapeInterval })),
                      // Every series carries the run stack: a team's stacks share its namespaces.
                      relabelings: [STACK_RELABELING],
                      what: s.ports.map((p) => p.what).join("; "),
                  }),
              )
            : [];
    return { form: observability.form, scrapeInterval: observability.scrapeInterval, podMonitors, scraped };
}
