/**
 * The sandbox pool on Kubernetes, with kubernetes-sigs/agent-sandbox v1.0.1: one
 * SandboxTemplate + one SandboxWarmPool (the pool size is a number, so the Pulumi resource
 * count never grows with it), plus what agent-sandbox does not give: a NetworkPolicy that
 * allows only DNS and the ingress, an admission policy that bounds every claim's lifetime,
 * a ResourceQuota, least-privilege RBAC for the trainer, and the key as a Secret.
 *
 * The object bodies are pure functions of the description (exported for tests); the
 * resources are registered by `registerKubernetesSandboxPool`.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { imagePullPolicy } from "../shared/images";
import { claimLifetimePolicySpec, clusterDnsEgress, NAMESPACE_NAME_LABEL, pullSecretRefs, restrictedContainerSecurity } from "../shared/kubernetes";
import {
    SANDBOX_API_VERSION,
    SANDBOX_CORE_GROUP,
    SANDBOX_EXTENSIONS_GROUP,
    SANDBOX_KEY_SECRET_KEY,
    type SandboxDescription,
    type SandboxPoolSpec,
} from "./model";

/** The ingress pods the sandboxes may call (NetworkPolicy egress target). */
export interface IngressPeer {
    /** Namespace of the ingress proxy pods. */
    readonly namespace: string;
    /** Labels of the ingress proxy pods (from `podLabels("vllm-ingress", ...)`). */
    readonly podLabels: Readonly<Record<string, string>>;
    /** The proxy's container port (NetworkPolicy sees the pod port, after the Service's DNAT). */
    readonly port: number;
}

/** The trainer pods that claim sandboxes and call them. */
export interface TrainerPeer {
    /** The trainer's ServiceAccount (bound to the claim Role). */
    readonly serviceAccount: string;
    /** Namespace of the trainer pods and ServiceAccount. */
    readonly namespace: string;
    /** Labels of the trainer pods (from `podLabels("trainer", ...)`): the only pods admitted into sandboxes. */
    readonly podLabels: Readonly<Record<string, string>>;
}

const apiVersion = `${SANDBOX_EXTENSIONS_GROUP}/${SANDBOX_API_VERSION}`;

/** Labels on every object of the pool (not a selector: the run label finds a run's leftovers). */
function objectLabels(d: SandboxDescription): Record<string, string> {
    return { "app.kubernetes.io/part-of": "agent-rl-infra", "app.kubernetes.io/component": "sandbox", [d.runLabel]: d.runId };
}

/**
 * The key-holding forwarder (python/agent_rl_sandbox/forwarder.py), the only container that gets
 * a key, as a uid of its own, with no volume the agent's container mounts: its rollout's key, delivered
 * by the trainer (keyPort), or else the pool's from the Secret into its env. The agent reaches it on the
 * pod's shared loopback.
 */
export function forwarderContainer(d: SandboxDescription, image: string = d.image): Record<string, unknown> {
    const f = d.forwarder;
    const resources = { cpu: f.cpu, memory: f.memory };
    return {
        name: "forwarder",
        image,
        imagePullPolicy: imagePullPolicy(image),
        restartPolicy: "Always",
        command: [...f.command],
        // The trace port (the model routes are on loopback, which needs no port): the trainer reads the trace here.
        ports: [
            { name: "trace", containerPort: f.tracePort, protocol: "TCP" },
            // The trainer hands the rollout's key over here once (agent-sandbox pools; the port closes after it).
            ...(f.keyPort !== undefined ? [{ name: "rollout-key", containerPort: f.keyPort, protocol: "TCP" }] : []),
        ],
        ...(f.keyEnv !== undefined ? { env: [{ name: f.keyEnv, valueFrom: { secretKeyRef: { name: d.names.keySecret, key: SANDBOX_KEY_SECRET_KEY } } }] } : {}),
        // Run in its container: the forwarder listens on loopback, which kubelet's httpGet/tcpSocket (pod IP) cannot reach.
        startupProbe: { exec: { command: [...f.probeCommand] }, periodSeconds: 1, timeoutSeconds: 2, failureThreshold: 30 },
        resources: { requests: resources, limits: resources },
        securityContext: restrictedContainerSecurity({ ...d.security, runAsUser: f.runAsUser, runAsGroup: f.runAsUser }),
    };
}

/**
 * The SandboxTemplate body of one pool (the run's, or a Harbor task image's): a hardened pod for PSA
 * `restricted`, agent-sandbox's own NetworkPolicy switched off.
 */
export function sandboxTemplateSpec(d: SandboxDescription, pool: SandboxPoolSpec = d.pools[0]): Record<string, unknown> {
    const sec = d.security;
    const resources = { cpu: d.cpu, memory: d.memory };
    return {
        podTemplate: {
            metadata: { labels: { ...pool.labels } },
            spec: {
                // Sandboxes never talk to the API server.
                automountServiceAccountToken: false,
                ...pullSecretRefs(d.imagePullSecrets),
                // No env vars describing the cluster's Services.
                enableServiceLinks: false,
                ...(d.runtimeClassName !== undefined ? { runtimeClassName: d.runtimeClassName } : {}),
                ...(d.priorityClassName !== undefined ? { priorityClassName: d.priorityClassName } : {}),
                // A warm pod's clock starts before it is claimed: wait + lifetime.
                activeDeadlineSeconds: d.deadlineSeconds,
                terminationGracePeriodSeconds: sec.terminationGraceSeconds,
                securityContext: {
                    runAsNonRoot: true,
                    runAsUser: sec.runAsUser,
                    runAsGroup: sec.runAsGroup,
                    fsGroup: sec.fsGroup,
                    seccompProfile: { type: sec.seccompProfile },
                },
                // Each container its own PID namespace: the agent cannot see the forwarder's processes (their environ holds the key).
                shareProcessNamespace: false,
                // A native sidecar (an init container that keeps running, Kubernetes >= 1.29): it starts, and passes
                // its startup probe, before the agent's container starts, and lives as long as the pod.
                initContainers: [forwarderContainer(d, pool.image)],
                containers: [
                    {
                        name: "sandbox",
                        image: pool.image,
                        imagePullPolicy: imagePullPolicy(pool.image),
                        // The runtime (python/agent_rl_sandbox/runtime.py): the stock image has no CMD and nothing on 8888.
                        command: [...d.runtime.command],
                        workingDir: sec.workingDir,
                        ports: [{ name: "command", containerPort: d.port, protocol: "TCP" }],
                        // A warm sandbox counts as Ready (and a claim adopts it) only once the runtime answers.
                        readinessProbe: { httpGet: { path: d.runtime.healthPath, port: d.port }, periodSeconds: 2, timeoutSeconds: 2, failureThreshold: 3 },
                        // No key here: the agent runs as this container's uid (see forwarderContainer).
                        env: Object.entries(d.env).map(([name, value]) => ({ name, value })),
                        resources: { requests: resources, limits: resources },
                        securityContext: restrictedContainerSecurity(sec),
                        volumeMounts: pool.writablePaths.map((w) => ({ name: w.name, mountPath: w.path })),
                    },
                ],
                volumes: pool.writablePaths.map((w) => ({ name: w.name, emptyDir: { sizeLimit: w.sizeLimit } })),
            },
        },
        // Managed (the default) allows internet egress, blocks DNS and admits only agent-sandbox's router: ours replaces it.
        networkPolicyManagement: "Unmanaged",
        // Claims may not inject env (a claim with env also skips the warm pool) nor volumes.
        envVarsInjectionPolicy: "Disallowed",
        volumeClaimTemplatesPolicy: "Disallowed",
        // A headless Service per sandbox: the trainer reaches it at status.serviceFQDN.
        service: true,
    };
}

/** The SandboxWarmPool body of one pool. */
export function sandboxWarmPoolSpec(d: SandboxDescription, pool: SandboxPoolSpec = d.pools[0]): Record<string, unknown> {
    return { sandboxTemplateRef: { name: pool.template }, replicas: pool.poolSize, updateStrategy: { type: "OnReplenish" } };
}

/**
 * The HorizontalPodAutoscaler of an autoscaled pool, on the SandboxWarmPool's `/scale` (agent-sandbox v1.0.1
 * k8s/crds/extensions.agents.x-k8s.io_sandboxwarmpools.yaml: specReplicasPath .spec.replicas; as upstream's
 * examples/hpa-swp-scaling/hpa.yaml). The metric is the pool's wanted size, so an AverageValue target of 1 makes
 * the HPA's desired replicas ceil(wanted) (autoscaling/v2: external metric / target average), bounded by min and max.
 */
export function sandboxWarmPoolAutoscalerSpec(pool: SandboxPoolSpec): k8s.types.input.autoscaling.v2.HorizontalPodAutoscalerSpec {
    const a = pool.autoscale;
    if (a === undefined) throw new Error(`warm pool ${pool.warmPool} has no autoscaler (sandboxes.autoscale is off)`);
    return {
        scaleTargetRef: { apiVersion, kind: "SandboxWarmPool", name: pool.warmPool },
        minReplicas: a.min,
        maxReplicas: a.max,
        metrics: [
            {
                type: "External",
                external: { metric: { name: a.metric, selector: { matchLabels: { ...a.selector } } }, target: { type: "AverageValue", averageValue: "1" } },
            },
        ],
    };
}

/** NetworkPolicy: egress only to cluster DNS and the ingress pods; ingress only from the trainer pods, on the command port and the forwarder's trace and rollout-key ports. */
export function sandboxNetworkPolicySpec(d: SandboxDescription, ingress: IngressPeer, trainer: TrainerPeer): k8s.types.input.networking.v1.NetworkPolicySpec {
    return {
        // Every pod in the stack's sandboxes namespace, so a leftover sandbox of an earlier run (other labels)
        // stays locked down too. A team's namespace holds other runs' sandboxes: there only this pool's
        // (the cluster stack's default-deny covers leftovers).
        podSelector: d.team !== undefined ? { matchLabels: { ...d.labels } } : {},
        policyTypes: ["Ingress", "Egress"],
        ingress: [
            {
                from: [
                    {
                        namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: trainer.namespace } },
                        podSelector: { matchLabels: { ...trainer.podLabels } },
                    },
                ],
                ports: [
                    { protocol: "TCP", port: d.port },
                    { protocol: "TCP", port: d.forwarder.tracePort },
                    ...(d.forwarder.keyPort !== undefined ? [{ protocol: "TCP", port: d.forwarder.keyPort }] : []),
                ],
            },
        ],
        egress: [
            clusterDnsEgress(d.dns),
            {
                to: [
                    {
                        namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: ingress.namespace } },
                        podSelector: { matchLabels: { ...ingress.podLabels } },
                    },
                ],
                ports: [{ protocol: "TCP", port: ingress.port }],
            },
        ],
    };
}

export { HAS_SHUTDOWN_TIME } from "../shared/kubernetes";

/**
 * The ValidatingAdmissionPolicy body: this run's claims live at most sandboxes.maxLifetimeSeconds
 * and carry the run id (claimLifetimePolicySpec, shared with the cluster stack's team policy).
 */
export function sandboxClaimPolicySpec(d: SandboxDescription): k8s.types.input.admissionregistration.v1.ValidatingAdmissionPolicySpec {
    return claimLifetimePolicySpec({ maxLifetimeSeconds: d.maxLifetimeSeconds, runLabel: d.runLabel, runId: d.runId, field: "sandboxes.maxLifetimeSeconds" });
}

/** The binding: Deny, only in the sandboxes namespace. */
export function sandboxClaimBindingSpec(d: SandboxDescription): k8s.types.input.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec {
    return {
        policyName: d.names.admissionPolicy,
        validationActions: ["Deny"],
        matchResources: { namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: d.names.namespace } } },
    };
}

/** The quota: warm pool + claimed in-flight + headroom; every sandbox sets requests = limits, so all four are bounded. */
export function sandboxQuotaSpec(d: SandboxDescription): k8s.types.input.core.v1.ResourceQuotaSpec {
    const q = d.quota;
    return {
        hard: {
            pods: String(q.pods),
            "requests.cpu": q.cpu,
            "limits.cpu": q.cpu,
            "requests.memory": q.memory,
            "limits.memory": q.memory,
            [`count/sandboxclaims.${SANDBOX_EXTENSIONS_GROUP}`]: String(q.pods),
        },
    };
}

/** The trainer's rights: claims (create/get/list/watch/delete) and sandboxes (read). No pods/exec: it calls the sandbox's port over the network. */
export function sandboxClaimerRules(): Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }> {
    return [
        { apiGroups: [SANDBOX_EXTENSIONS_GROUP], resources: ["sandboxclaims"], verbs: ["create", "get", "list", "watch", "delete"] },
        { apiGroups: [SANDBOX_CORE_GROUP], resources: ["sandboxes"], verbs: ["get", "list", "watch"] },
    ];
}

export interface KubernetesSandboxArgs {
    readonly description: SandboxDescription;
    /** The shared ingress key, only for forwarders that hold one (description.forwarder.keyEnv). @default undefined */
    readonly sandboxKey?: pulumi.Input<string>;
    readonly ingress: IngressPeer;
    readonly trainer: TrainerPeer;
    /** The sandboxes namespace (the Platform's Namespace output, so the objects wait for it). @default description.names.namespace */
    readonly namespace?: pulumi.Input<string>;
}

export interface KubernetesSandboxResources {
    /** The first pool's (the run's one pool off the Harbor path). */
    readonly template: k8s.apiextensions.CustomResource;
    readonly warmPool: k8s.apiextensions.CustomResource;
    /** Every pool's, in the order of description.pools. */
    readonly pools: ReadonlyArray<{ readonly template: k8s.apiextensions.CustomResource; readonly warmPool: k8s.apiextensions.CustomResource }>;
}

/** A pool in a namespace of its own: its ResourceQuota and the claim-lifetime admission policy with its binding. */
function ownQuotaAndClaimPolicy(
    name: string,
    d: SandboxDescription,
    quotaMeta: { name: string; namespace: pulumi.Input<string>; labels: Record<string, string> },
    labels: Record<string, string>,
    child: { readonly parent: pulumi.Resource },
): pulumi.Resource[] {
    const quota = new k8s.core.v1.ResourceQuota(`${name}-quota`, { metadata: quotaMeta, spec: sandboxQuotaSpec(d) }, child);
    const policy = new k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
        `${name}-claim-policy`,
        { metadata: { name: d.names.admissionPolicy, labels }, spec: sandboxClaimPolicySpec(d) },
        child,
    );
    const binding = new k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
        `${name}-claim-policy-binding`,
        { metadata: { name: d.names.admissionBinding, labels }, spec: sandboxClaimBindingSpec(d) },
        { ...child, dependsOn: [policy] },
    );
    return [quota, binding];
}

/**
 * The pool key's Secret, only where a forwarder reads it (keyEnv). Per-rollout keys (agent-sandbox) leave none: no
 * container would read it, and nginx no longer accepts that key (docs/design/rollout-keys.md).
 */
function sharedKeySecret(
    name: string,
    d: SandboxDescription,
    sandboxKey: pulumi.Input<string> | undefined,
    metadata: { name: string; namespace: pulumi.Input<string>; labels: Record<string, string> },
    child: { readonly parent: pulumi.Resource },
): pulumi.Resource[] {
    if (d.forwarder.keyEnv === undefined) return [];
    if (sandboxKey === undefined)
        throw new pulumi.RunError(
            `SandboxPool ${name}: its forwarders read the shared key from $${d.forwarder.keyEnv}: pass args.sandboxKey (VllmIngress.sandboxKey)`,
        );
    const stringData = { [SANDBOX_KEY_SECRET_KEY]: pulumi.secret(sandboxKey) };
    return [new k8s.core.v1.Secret(`${name}-key`, { metadata, type: "Opaque", stringData }, child)];
}

/** Registers the pool's Kubernetes objects as children of `parent`, named `${name}-<role>`. */
export function registerKubernetesSandboxPool(name: string, args: KubernetesSandboxArgs, parent: pulumi.Resource): KubernetesSandboxResources {
    const d = args.description;
    const child = { parent };
    const ns = args.namespace ?? d.names.namespace;
    const labels = objectLabels(d);
    const meta = (objName: string) => ({ name: objName, namespace: ns, labels });

    const keySecret = sharedKeySecret(name, d, args.sandboxKey, meta(d.names.keySecret), child);
    const networkPolicy = new k8s.networking.v1.NetworkPolicy(
        `${name}-network`,
        { metadata: meta(d.names.networkPolicy), spec: sandboxNetworkPolicySpec(d, args.ingress, args.trainer) },
        child,
    );
    // In a team's namespace the cluster stack's quota and claim policy apply (a quota counts every run's pods).
    const own = d.team === undefined ? ownQuotaAndClaimPolicy(name, d, meta(d.names.quota), labels, child) : [];
    const role = new k8s.rbac.v1.Role(`${name}-claimer`, { metadata: meta(d.names.role), rules: sandboxClaimerRules() }, child);
    new k8s.rbac.v1.RoleBinding(
        `${name}-claimer`,
        {
            metadata: meta(d.names.roleBinding),
            roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: d.names.role },
            subjects: [{ kind: "ServiceAccount", name: args.trainer.serviceAccount, namespace: args.trainer.namespace }],
        },
        { ...child, dependsOn: [role] },
    );
    // Sandboxes start only once their key, their network lock-down, their quota and the claim policy exist.
    const pools = d.pools.map((pool) => {
        // A Harbor pool's children carry its task image's key; the run's one pool keeps the plain names.
        const role = (r: string) => (pool.taskKey !== undefined ? `${name}-${r}-${pool.taskKey}` : `${name}-${r}`);
        const template = new k8s.apiextensions.CustomResource(
            role("template"),
            { apiVersion, kind: "SandboxTemplate", metadata: meta(pool.template), spec: sandboxTemplateSpec(d, pool) },
            { ...child, dependsOn: [...keySecret, networkPolicy, ...own] },
        );
        const warmPool = new k8s.apiextensions.CustomResource(
            role("warm-pool"),
            { apiVersion, kind: "SandboxWarmPool", metadata: meta(pool.warmPool), spec: sandboxWarmPoolSpec(d, pool) },
            // An autoscaled pool's replicas are the HPA's after the create (min at first): an update must not reset them.
            { ...child, dependsOn: [template], ...(pool.autoscale !== undefined ? { ignoreChanges: ["spec.replicas"] } : {}) },
        );
        if (pool.autoscale !== undefined)
            new k8s.autoscaling.v2.HorizontalPodAutoscaler(
                role("autoscaler"),
                { metadata: meta(pool.autoscale.name), spec: sandboxWarmPoolAutoscalerSpec(pool) },
                { ...child, dependsOn: [warmPool] },
            );
        return { template, warmPool };
    });
    return { ...pools[0], pools };
}
