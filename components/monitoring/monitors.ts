/**
 * agentrl:monitoring:Monitors, the stack's PodMonitors (form operator), registered from a
 * MonitoringDescription. Nothing else: the pods declare their ports, the NetworkPolicies admit the
 * scraper; the Operator's Prometheus finds these through its podMonitorSelector (observability.monitorLabels)
 * and podMonitorNamespaceSelector (which must include the stack's namespaces).
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { MonitoringDescription } from "./model";
import { MONITORING_API_VERSION, podMonitorSpec } from "../shared/pod-monitor";

export interface MonitorsArgs {
    readonly description: MonitoringDescription;
    /** Namespace name -> the Platform's Namespace output of it, so each monitor waits for its namespace. @default the names as written */
    readonly namespaces?: Readonly<Record<string, pulumi.Input<string>>>;
}

export class Monitors extends pulumi.ComponentResource {
    /** The PodMonitors by name. */
    public readonly podMonitors: Readonly<Record<string, k8s.apiextensions.CustomResource>>;

    constructor(name: string, args: MonitorsArgs, opts?: pulumi.ComponentResourceOptions) {
        super("agentrl:monitoring:Monitors", name, {}, opts);
        const out: Record<string, k8s.apiextensions.CustomResource> = {};
        for (const m of args.description.podMonitors) {
            out[m.name] = new k8s.apiextensions.CustomResource(
                `${name}-${m.name}`,
                {
                    apiVersion: MONITORING_API_VERSION,
                    kind: "PodMonitor",
                    metadata: { name: m.name, namespace: args.namespaces?.[m.namespace] ?? m.namespace, labels: { ...m.labels } },
                    spec: podMonitorSpec(m),
                },
                { parent: this },
            );
        }
        this.podMonitors = out;
        this.registerOutputs({});
    }
}
