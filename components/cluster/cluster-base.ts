/**
 * agentrl:cluster:ClusterBase: what every run stack on one cluster shares, owned by one
 * cluster stack: the agent-sandbox release (CRDs, controller, RBAC), JobSet's and Kueue's when asked (jobSet.install, kueue.install), PriorityClasses for the
 * training and sandbox pods, RuntimeClasses for the nodes' sandboxing handlers, and for each team
 * its role namespaces (Pod Security, default-deny, quotas, the deployer's Role) and its sandbox
 * claim admission policy; it exports the cluster's identity (the kube-system namespace's UID). Run stacks read its outputs (clusterStack) and create none of these,
 * so two run stacks never collide on them and destroying one never removes another's.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { clusterOutputs } from "../config/cluster";
import { SANDBOX_CONTROLLER_METRICS, type ClusterConfig, type ClusterOutputs, type TeamQuota } from "../config/cluster-schema";
import { MONITORING_API_VERSION, podMonitorSpec, type PodMonitorDescription } from "../shared/pod-monitor";
import { DEPLOYER_RULES, OPERATOR_RULES, podSecurityLabels, ROLE_LABEL, ROLES, TEAM_LABEL, teamNamespace } from "../config/tenancy";
import { RUN_LABEL } from "../config/names";
import { claimLifetimePolicySpec, defaultDenyIngressSpec, NAMESPACE_NAME_LABEL } from "../shared/kubernetes";

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

/** A team namespace's ResourceQuota `hard` map (requests = limits for GPUs: extended resources only take `requests.`). */
export function teamQuota(quota: TeamQuota, gpuResourceName: string): Record<string, string> {
    return {
        ...(quota.gpus !== undefined ? { [`requests.${gpuResourceName}`]: String(quota.gpus) } : {}),
        ...(quota.cpu !== undefined ? { "requests.cpu": quota.cpu } : {}),
        ...(quota.memory !== undefined ? { "requests.memory": quota.memory } : {}),
        ...(quota.pods !== undefined ? { pods: String(quota.pods) } : {}),
    };
}

/** The team's claim-lifetime policy: any run's claims, bounded by the team's sandboxMaxLifetimeSeconds. */
export function teamClaimPolicySpec(team: ClusterConfig["teams"][number]): k8s.types.input.admissionregistration.v1.ValidatingAdmissionPolicySpec {
    return claimLifetimePolicySpec({
        maxLifetimeSeconds: team.sandboxMaxLifetimeSeconds,
        runLabel: RUN_LABEL,
        field: `teams.${team.name}.sandboxMaxLifetimeSeconds of the cluster stack`,
    });
}

/** The team's policy binding: Deny, in the team's sandboxes namespace only. */
export function teamClaimBindingSpec(team: string, policyName: string): k8s.types.input.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec {
    return {
        policyName,
        validationActions: ["Deny"],
        matchResources: { namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: teamNamespace(team, "sandboxes") } } },
    };
}

type Team = ClusterConfig["teams"][number];
type Role = (typeof ROLES)[number];
/** The options every child takes: the ClusterBase as its parent. */
type Child = { readonly parent: pulumi.Resource };

/** The agent-sandbox release (CRDs, controller, RBAC) from its manifest. */
function agentSandboxRelease(name: string, c: ClusterConfig, child: Child): k8s.yaml.v2.ConfigFile {
    return new k8s.yaml.v2.ConfigFile(`${name}-agent-sandbox`, { file: c.agentSandbox.manifest }, child);
}

/** The JobSet release (CRDs, controller, webhooks, RBAC) from its manifest: the multi-node trainer's prerequisite. */
function jobSetRelease(name: string, c: ClusterConfig, child: Child): k8s.yaml.v2.ConfigFile | undefined {
    return c.jobSet.install ? new k8s.yaml.v2.ConfigFile(`${name}-jobset`, { file: c.jobSet.manifest }, child) : undefined;
}

/** The Kueue release (CRDs, controller, webhooks, RBAC) from its manifest: what a queued run (target.kueueQueue) is admitted by. */
function kueueRelease(name: string, c: ClusterConfig, child: Child): k8s.yaml.v2.ConfigFile | undefined {
    return c.kueue.install ? new k8s.yaml.v2.ConfigFile(`${name}-kueue`, { file: c.kueue.manifest }, child) : undefined;
}

/** agent-sandbox's controller PodMonitor: in the release's own namespace, once the release (which makes it) is applied. */
function sandboxControllerPodMonitor(
    name: string,
    c: ClusterConfig,
    release: k8s.yaml.v2.ConfigFile | undefined,
    child: Child,
): k8s.apiextensions.CustomResource | undefined {
    const monitor = c.observability.enabled && release ? sandboxControllerMonitor(c.observability) : undefined;
    return monitor
        ? new k8s.apiextensions.CustomResource(
              `${name}-agent-sandbox-monitor`,
              {
                  apiVersion: MONITORING_API_VERSION,
                  kind: "PodMonitor",
                  metadata: { name: monitor.name, namespace: monitor.namespace, labels: monitor.labels },
                  spec: podMonitorSpec(monitor),
              },
              { ...child, dependsOn: [release!] },
          )
        : undefined;
}

/** The PriorityClass of one role's pods, where the config names one. */
function priorityClass(name: string, c: ClusterConfig, role: "training" | "sandboxes", child: Child): k8s.scheduling.v1.PriorityClass | undefined {
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
}

/** One RuntimeClass per sandboxing handler of the nodes, by name. */
function runtimeClasses(name: string, c: ClusterConfig, child: Child): Record<string, k8s.node.v1.RuntimeClass> {
    return Object.fromEntries(
        c.runtimeClasses.map((r) => [
            r.name,
            new k8s.node.v1.RuntimeClass(`${name}-runtime-${r.name}`, { metadata: { name: r.name, labels: PART_OF }, handler: r.handler }, child),
        ]),
    );
}

/** The team's sandbox claim admission policy and its binding. */
function teamClaimAdmission(name: string, t: Team, child: Child): void {
    const policy = new k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
        `${name}-team-${t.name}-claims`,
        { metadata: { name: `agentrl-${t.name}-sandbox-claims`, labels: { ...PART_OF, [TEAM_LABEL]: t.name } }, spec: teamClaimPolicySpec(t) },
        child,
    );
    new k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
        `${name}-team-${t.name}-claims-binding`,
        {
            metadata: { name: `agentrl-${t.name}-sandbox-claims`, labels: { ...PART_OF, [TEAM_LABEL]: t.name } },
            spec: teamClaimBindingSpec(t.name, `agentrl-${t.name}-sandbox-claims`),
        },
        { ...child, dependsOn: [policy] },
    );
}

/** One role namespace of a team, labelled for Pod Security. */
function roleNamespace(name: string, t: Team, role: Role, labels: Record<string, string>, child: Child): k8s.core.v1.Namespace {
    // Run stacks keep their checkpoints in the training namespace: a namespace's deletion takes its claims.
    const keep = role === "training";
    return new k8s.core.v1.Namespace(
        `${name}-team-${t.name}-${role}`,
        { metadata: { name: teamNamespace(t.name, role), labels: { ...labels, ...podSecurityLabels(role) } } },
        { ...child, retainOnDelete: keep },
    );
}

/** The metadata of an object in a role namespace. */
type InNamespace = (objName: string) => { name: string; namespace: pulumi.Output<string>; labels: Record<string, string> };

/** The namespace's default-deny: no pod of any run admits traffic its own policies do not (an old run's pod included). */
function defaultDeny(name: string, t: Team, role: Role, inNs: InNamespace, child: Child): void {
    new k8s.networking.v1.NetworkPolicy(
        `${name}-team-${t.name}-${role}-default-deny`,
        { metadata: inNs("default-deny-ingress"), spec: defaultDenyIngressSpec() },
        child,
    );
}

/** The namespace's ResourceQuota, where the team has one for the role. */
function roleQuota(name: string, c: ClusterConfig, t: Team, role: Role, inNs: InNamespace, child: Child): void {
    const quota = t.quotas[role];
    if (quota !== undefined)
        new k8s.core.v1.ResourceQuota(
            `${name}-team-${t.name}-${role}-quota`,
            { metadata: inNs("team-quota"), spec: { hard: teamQuota(quota, c.gpuResourceName) } },
            child,
        );
}

/** The deployers' Role in the namespace and its binding, where the team names deployers. */
function deployerAccess(name: string, t: Team, role: Role, inNs: InNamespace, child: Child): void {
    if (t.deployers.length === 0) return;
    const rules = [...DEPLOYER_RULES, ...(role === "training" ? OPERATOR_RULES : [])].map((r) => ({
        apiGroups: [...r.apiGroups],
        resources: [...r.resources],
        verbs: [...r.verbs],
    }));
    const deployerRole = new k8s.rbac.v1.Role(`${name}-team-${t.name}-${role}-deployer`, { metadata: inNs("agentrl-deployer"), rules }, child);
    new k8s.rbac.v1.RoleBinding(
        `${name}-team-${t.name}-${role}-deployer`,
        {
            metadata: inNs("agentrl-deployer"),
            roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "agentrl-deployer" },
            subjects: t.deployers.map((d) =>
                d.kind === "ServiceAccount"
                    ? { kind: d.kind, name: d.name, namespace: d.namespace }
                    : { kind: d.kind, name: d.name, apiGroup: "rbac.authorization.k8s.io" },
            ),
        },
        { ...child, dependsOn: [deployerRole] },
    );
}

/** A team's objects: its claim admission, then each role namespace with its default-deny, quota and deployer access. */
function teamObjects(name: string, c: ClusterConfig, t: Team, child: Child): Record<string, k8s.core.v1.Namespace> {
    const namespaces: Record<string, k8s.core.v1.Namespace> = {};
    teamClaimAdmission(name, t, child);
    for (const role of ROLES) {
        const labels = { ...PART_OF, [TEAM_LABEL]: t.name, [ROLE_LABEL]: role };
        const ns = roleNamespace(name, t, role, labels, child);
        namespaces[teamNamespace(t.name, role)] = ns;
        const inNs: InNamespace = (objName) => ({ name: objName, namespace: ns.metadata.name, labels });
        defaultDeny(name, t, role, inNs, child);
        roleQuota(name, c, t, role, inNs, child);
        deployerAccess(name, t, role, inNs, child);
    }
    return namespaces;
}

/** What the ClusterBase exports: the config's outputs and the cluster's identity, read from the cluster. */
export type ClusterBaseOutputs = Omit<ClusterOutputs, "clusterId"> & { readonly clusterId: pulumi.Output<string> };

export class ClusterBase extends pulumi.ComponentResource {
    /** The agent-sandbox release objects (undefined when agentSandbox.install is false). */
    public readonly agentSandbox: k8s.yaml.v2.ConfigFile | undefined;
    /** The JobSet release objects (undefined unless jobSet.install). */
    public readonly jobSet: k8s.yaml.v2.ConfigFile | undefined;
    /** The Kueue release objects (undefined unless kueue.install). */
    public readonly kueue: k8s.yaml.v2.ConfigFile | undefined;
    /** PriorityClasses by role. */
    public readonly priorityClasses: { readonly training?: k8s.scheduling.v1.PriorityClass; readonly sandboxes?: k8s.scheduling.v1.PriorityClass };
    /** RuntimeClasses by name. */
    public readonly runtimeClasses: Readonly<Record<string, k8s.node.v1.RuntimeClass>>;
    /** agent-sandbox's controller PodMonitor (observability.enabled with agentSandbox.install). */
    public readonly sandboxControllerMonitor: k8s.apiextensions.CustomResource | undefined;
    /** Every team's role namespaces, by namespace name. */
    public readonly teamNamespaces: Record<string, k8s.core.v1.Namespace>;
    /** What run stacks read (the stack's outputs). */
    public readonly outputs: ClusterBaseOutputs;

    constructor(name: string, args: ClusterBaseArgs, opts?: pulumi.ComponentResourceOptions) {
        super("agentrl:cluster:ClusterBase", name, {}, opts);
        const c = args.config;
        const child = { parent: this };
        this.agentSandbox = c.agentSandbox.install ? agentSandboxRelease(name, c, child) : undefined;
        this.sandboxControllerMonitor = sandboxControllerPodMonitor(name, c, this.agentSandbox, child);
        this.jobSet = jobSetRelease(name, c, child);
        this.kueue = kueueRelease(name, c, child);
        this.priorityClasses = { training: priorityClass(name, c, "training", child), sandboxes: priorityClass(name, c, "sandboxes", child) };
        this.runtimeClasses = runtimeClasses(name, c, child);
        this.teamNamespaces = {};
        for (const t of c.teams) Object.assign(this.teamNamespaces, teamObjects(name, c, t, child));
        // The cluster's identity: run stacks compare it with their own cluster's before anything registers.
        const kubeSystem = k8s.core.v1.Namespace.get(`${name}-kube-system`, "kube-system", child);
        this.outputs = { ...clusterOutputs(c), clusterId: kubeSystem.metadata.uid };
        this.registerOutputs({ outputs: this.outputs });
    }
}
