/**
 * The monitoring folder's ground floor: the description the resolver makes and the component
 * registers (monitors.ts), and the pod label that names the targets' job. Imports nothing from its folder.
 */
import type { ScrapedPods } from "../shared/metrics-pods";
import type { PodMonitorDescription } from "../shared/pod-monitor";

/** The pod label whose value becomes the targets' `job` (the pods' role: trainer, vllm, vllm-ingress, env-replica, env-router). */
export const JOB_LABEL = "app.kubernetes.io/name";

export interface MonitoringDescription {
    readonly form: "operator" | "annotations";
    readonly scrapeInterval: string;
    readonly podMonitors: readonly PodMonitorDescription[];
    /** Every scraped pod group and its ports (plan.md's table; the Docker target publishes the same). */
    readonly scraped: readonly ScrapedPods[];
}
