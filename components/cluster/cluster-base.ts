/**
 * agentrl:cluster:ClusterBase: what every run stack on one cluster shares, owned by one
 * cluster stack: the agent-sandbox release (CRDs, controller, RBAC), PriorityClasses for the
 * training and sandbox pods, RuntimeClasses for the nodes' sandboxing handlers, and team
 * namespaces with quotas. Run stacks read its outputs (clusterStack) and create none of these,
 * so two run stacks never collide on them and destroying one never removes another's.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { clusterOutputs, SANDBOX_CONTROLLER_METRICS, type ClusterConfig, type ClusterOutputs } from "../config/cluster";
import { MONITORING_API_VERSION, podMonitorSpec, type PodMonitorDescription } from "../shared/pod-monitor";

export interface ClusterBaseArgs {
    /** The parsed cluster config (parseClusterConfig). */
    readonly config: ClusterConfig;
}

const PART_OF = { "app.kubernetes.io/part-of": "agent-rl-infra", "app.kubernetes.io/component": "cluster" } as const;

/** agent-sandbox's controller as a PodMonitor (claims, warm vs cold, startup latency: its internal/metrics). */
export function sandboxControllerMonitor(o: ClusterConfig["observability"]): PodMonitorDescription {
    const m = SANDBOX_CONTROLLER_METRICS;
    return {
        name: "agent-sandbox-controller",
        namespace: m.namespace,
        labels: { ...o.monitorLabels, ...PART_OF },
        selector: { ...m.podLabels },
        jobLabel: "app",
        endpoints: [{ port: m.port, path: m.path, interval: o.scrapeInterval }],
        what: "agent-sandbox's controller (controller-runtime metrics)",
    };
}

/** A team's ResourceQuota `hard` map (requests = limits for GPUs: extended resources only take `requests.`). */
export function teamQuota(quota: NonNullable<ClusterConfig["teams"][number]["quota"]>, gpuResourceName: string): Record<string, string> {
    return {
        ...(quota.gpus !== undefined ? { [`requests.${gpuResourceName}`]: String(quota.gpus) } : {}),
        ...(quota.cpu !== undefined ? { "requests.cpu": quota.cpu } : {}),
        ...(quota.memory !== undefined ? { "requests.memory": quota.memory } : {}),
        ...(quota.pods !== undefined ? { pods: String(quota.pods) } : {}),
    };
}

export class ClusterBase extends pulumi.ComponentResource {
    /** The agent-sandbox release objects (undefined when agentSandbox.install is false). */
    public readonly agentSandbox: k8s.yaml.v2.ConfigFile | undefined;
    /** PriorityClasses by role. */
    public readonly priorityClasses: { readonly training?: k8s.scheduling.v1.PriorityClass; readonly sandboxes?: k8s.scheduling.v1.PriorityClass };
    /** RuntimeClasses by name. */
    public readonly runtimeClasses: Readonly<Record<string, k8s.node.v1.RuntimeClass>>;
    /** agent-sandbox's controller PodMonitor (observability.enabled with agentSandbox.install). */
    public readonly sandboxControllerMonitor: k8s.apiextensions.CustomResource | undefined;
    /** Team namespaces by name. */
    public readonly teamNamespaces: Readonly<Record<string, k8s.core.v1.Namespace>>;
    /** What run stacks read (the stack's outputs). */
    public readonly outputs: ClusterOutputs;

    constructor(name: string, args: ClusterBaseArgs, opts?: pulumi.ComponentResourceOptions) {
        super("agentrl:cluster:ClusterBase", name, {}, opts);
        const c = args.config;
        const child = { parent: this };

        this.agentSandbox = c.agentSandbox.install ? new k8s.yaml.v2.ConfigFile(`${name}-agent-sandbox`, { file: c.agentSandbox.manifest }, child) : undefined;

        // In the release's own namespace, once the release (which makes it) is applied.
        const monitor = c.observability.enabled && this.agentSandbox ? sandboxControllerMonitor(c.observability) : undefined;
        this.sandboxControllerMonitor = monitor
            ? new k8s.apiextensions.CustomResource(
                  `${name}-agent-sandbox-monitor`,
                  {
                      apiVersion: MONITORING_API_VERSION,
                      kind: "PodMonitor",
                      metadata: { name: monitor.name, namespace: monitor.namespace, labels: monitor.labels },
                      spec: podMonitorSpec(monitor),
                  },
                  { ...child, dependsOn: [this.agentSandbox!] },
              )
            : undefined;

        const priorityClass = (role: "training" | "sandboxes") => {
            const pc = c.priorityClasses[role];
            if (pc === undefined) return undefined;
            return new k8s.scheduling.v1.PriorityClass(
                `${name}-priority-${role}`,
                {
                    metadata: { name: pc.name, labels: PART_OF },
                    value: pc.value,
                    preemptionPolicy: pc.preemptionPolicy,
                    globalDefault: false,
                    description: `agent-rl-infra ${role} pods`,
                },
                child,
            );
        };
        this.priorityClasses = { training: priorityClass("training"), sandboxes: priorityClass("sandboxes") };

        this.runtimeClasses = Object.fromEntries(
            c.runtimeClasses.map((r) => [
                r.name,
                new k8s.node.v1.RuntimeClass(`${name}-runtime-${r.name}`, { metadata: { name: r.name, labels: PART_OF }, handler: r.handler }, child),
            ]),
        );

        this.teamNamespaces = Object.fromEntries(
            c.teams.map((t) => {
                const ns = new k8s.core.v1.Namespace(
                    `${name}-team-${t.name}`,
                    { metadata: { name: t.name, labels: { ...PART_OF, "agent-rl-infra/team": t.name } } },
                    child,
                );
                if (t.quota !== undefined) {
                    new k8s.core.v1.ResourceQuota(
                        `${name}-team-${t.name}-quota`,
                        {
                            metadata: { name: "team-quota", namespace: ns.metadata.name, labels: PART_OF },
                            spec: { hard: teamQuota(t.quota, c.gpuResourceName) },
                        },
                        child,
                    );
                }
                return [t.name, ns];
            }),
        );

        this.outputs = clusterOutputs(c);
        this.registerOutputs({ outputs: this.outputs });
    }
}
