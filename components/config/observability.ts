/**
 * The observability setting's checks (docs/guides/observability.md): pure, every problem collected, each
 * naming the field and the fix. What the setting deploys is decided by the components' resolve steps
 * and the monitors; this only refuses what they could not carry out, or would carry out unsafely.
 */
import { platformNames } from "./names";
import type { PlatformConfig } from "./types";
import { buildHint } from "./built-images";

/** Whether the stack deploys the metrics endpoints, monitors, rules and dashboards. */
export function observabilityEnabled(c: Pick<PlatformConfig, "observability">): boolean {
    return c.observability.enabled;
}

/** observability: every problem, each naming the field and the fix. */
export function validateObservability(c: PlatformConfig): string[] {
    const o = c.observability;
    if (!o.enabled) return [];
    const errors: string[] = [];
    if (c.target.kind === "docker") {
        // The containers' sidecars, their loopback ports and prometheus.yml (platform/docker-metrics.ts); the host ports are checked there.
        if (o.form === "annotations") {
            errors.push(
                "observability.form: 'annotations' are prometheus.io/* pod annotations, which only a Kubernetes Prometheus reads (the docker target has no pods): remove form",
            );
        }
    } else {
        const own = platformNames(c).namespaces;
        const role = (Object.keys(own) as Array<keyof typeof own>).find((r) => own[r] === o.scraper.namespace);
        if (role !== undefined) {
            errors.push(
                `observability.scraper.namespace: '${o.scraper.namespace}' is this stack's own ${role} namespace, so the scrape rule would admit the stack's own pods that carry the scraper's labels to every metrics port: run Prometheus in a namespace of its own (default monitoring) and name it here`,
            );
        }
        if (Object.keys(o.scraper.podLabels).length === 0) {
            errors.push(
                `observability.scraper.podLabels: empty, which would admit every pod of namespace ${o.scraper.namespace} to the metrics ports: set the Prometheus pods' labels (kubectl get pods -n ${o.scraper.namespace} --show-labels; the Operator's carry app.kubernetes.io/name: prometheus)`,
            );
        }
        if (o.form === "annotations" && Object.keys(o.monitorLabels).length > 0) {
            errors.push(
                "observability.monitorLabels: they label PodMonitors and PrometheusRules, which form 'annotations' does not make (the pods carry prometheus.io/* annotations instead): remove monitorLabels, or set form to operator",
            );
        }
    }
    if (c.ingress.enabled && c.images.mtail === undefined) {
        errors.push(
            `images.mtail: required with observability on and the ingress deployed: mtail turns the ingress's JSON access log into its per-status and per-key series, and google/mtail publishes binaries only, no image: ${buildHint("mtail")} (Debian bookworm's mtail, its binary at /usr/bin/mtail)`,
        );
    }
    return errors;
}
