/**
 * agentrl:observability:Observability: a run's alert rules and its dashboard, from the stack's
 * observability settings and its plan's capacity numbers (alerts.ts, dashboard.ts). On Kubernetes: with form
 * `operator` a PrometheusRule (monitoring.coreos.com/v1, labelled observability.monitorLabels for
 * the Prometheus's ruleSelector), with form `annotations` a ConfigMap holding the rules file to load
 * by hand; and the dashboard as a ConfigMap labelled observability.dashboardLabels (the Grafana
 * dashboard sidecar's label). On Docker it registers nothing: `prometheusConfigText`, `rulesText`
 * and `dashboardText` are the files for a Prometheus and a Grafana on the host (npm run plan writes
 * them; the stack output prometheusConfig is the first).
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { DockerMetricsTarget } from "../shared/docker-metrics";
import { alertRules } from "./alerts";
import { grafanaDashboard } from "./dashboard";
import { DASHBOARD_FILE, type ObservabilitySettings, type ObservedStack, RULES_FILE, type RuleGroup } from "./model";
import { prometheusConfigText } from "./prometheus-config";

export interface ObservabilityArgs {
    /** The config's observability key (defaulted). */
    readonly settings: ObservabilitySettings;
    /** What the stack runs and its plan's numbers. */
    readonly stack: ObservedStack;
    /** Where the objects go. */
    readonly target: "kubernetes" | "docker";
    /** Kubernetes: the namespace of the rule and dashboard objects. @default stack.namespaces.training */
    readonly namespace?: pulumi.Input<string>;
    /** Kubernetes: the objects' names (DNS-1123, derived from the stack and run by the caller). @default `${stack.stack}-agentrl-rules` / `${stack.stack}-agentrl-dashboard` */
    readonly names?: { readonly rules: string; readonly dashboard: string };
    /** Docker: the metrics ports the containers publish on the host's loopback (prometheus.yml's targets). @default [] */
    readonly dockerTargets?: readonly DockerMetricsTarget[];
}

/** The rules file text: JSON, which every YAML reader (Prometheus, promtool) takes as it is. */
export function rulesFileText(groups: readonly RuleGroup[]): string {
    return `${JSON.stringify({ groups }, null, 2)}\n`;
}

export class Observability extends pulumi.ComponentResource {
    /** The alert rule groups. */
    public readonly rules: readonly RuleGroup[];
    /** The rules file (Prometheus rule_files). */
    public readonly rulesText: string;
    /** The run dashboard's JSON. */
    public readonly dashboardText: string;
    /** Docker: prometheus.yml for a Prometheus on the host (its rule_files names RULES_FILE beside it). */
    public readonly prometheusConfigText?: string;
    /** Kubernetes: the PrometheusRule (form operator). */
    public readonly prometheusRule?: k8s.apiextensions.CustomResource;
    /** Kubernetes: the rules ConfigMap (form annotations). */
    public readonly rulesConfigMap?: k8s.core.v1.ConfigMap;
    /** Kubernetes: the dashboard ConfigMap. */
    public readonly dashboardConfigMap?: k8s.core.v1.ConfigMap;

    constructor(name: string, args: ObservabilityArgs, opts?: pulumi.ComponentResourceOptions) {
        super("agentrl:observability:Observability", name, {}, opts);
        const s = args.settings;
        this.rules = alertRules(s, args.stack);
        this.rulesText = rulesFileText(this.rules);
        this.dashboardText = `${JSON.stringify(grafanaDashboard(s, args.stack), null, 2)}\n`;
        if (args.target === "docker") this.prometheusConfigText = prometheusConfigText(s, args.stack, args.dockerTargets ?? []);
        if (args.target === "kubernetes") {
            const child = { parent: this };
            const namespace = args.namespace ?? args.stack.namespaces.training;
            const names = args.names ?? { rules: `${args.stack.stack}-agentrl-rules`, dashboard: `${args.stack.stack}-agentrl-dashboard` };
            const labels = { "app.kubernetes.io/part-of": "agent-rl-infra", "app.kubernetes.io/component": "observability" };
            if (s.form === "operator") {
                this.prometheusRule = new k8s.apiextensions.CustomResource(
                    `${name}-rules`,
                    {
                        apiVersion: "monitoring.coreos.com/v1",
                        kind: "PrometheusRule",
                        metadata: { name: names.rules, namespace, labels: { ...labels, ...s.monitorLabels } },
                        spec: { groups: this.rules },
                    },
                    child,
                );
            } else {
                this.rulesConfigMap = new k8s.core.v1.ConfigMap(
                    `${name}-rules`,
                    { metadata: { name: names.rules, namespace, labels }, data: { [RULES_FILE]: this.rulesText } },
                    child,
                );
            }
            this.dashboardConfigMap = new k8s.core.v1.ConfigMap(
                `${name}-dashboard`,
                { metadata: { name: names.dashboard, namespace, labels: { ...labels, ...s.dashboardLabels } }, data: { [DASHBOARD_FILE]: this.dashboardText } },
                child,
            );
        }
        this.registerOutputs({ rulesText: this.rulesText, dashboardText: this.dashboardText, prometheusConfigText: this.prometheusConfigText });
    }
}
