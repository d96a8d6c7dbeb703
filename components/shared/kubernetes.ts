/**
 * Kubernetes helpers shared by the components (not a component itself): the one container
 * security context every non-root, Pod Security `restricted` container gets.
 */
import type * as k8s from "@pulumi/kubernetes";
import { imagePullPolicy } from "./images";
import { METRICS_PROGRAM_DIR, type MetricsPort, type MetricsSidecar, type Scraper } from "./metrics-pods";

/** What a restricted, non-root container is described by (the components' resolve steps decide it). */
export interface RestrictedSecurity {
    readonly runAsUser: number;
    readonly runAsGroup: number;
    readonly readOnlyRootFilesystem: boolean;
    readonly allowPrivilegeEscalation: false;
    readonly dropCapabilities: readonly string[];
    readonly seccompProfile: "RuntimeDefault";
}

/** The container securityContext Pod Security `restricted` admits: non-root, no escalation, no capabilities, RuntimeDefault seccomp. */
export function restrictedContainerSecurity(sec: RestrictedSecurity): k8s.types.input.core.v1.SecurityContext {
    return {
        runAsNonRoot: true,
        runAsUser: sec.runAsUser,
        runAsGroup: sec.runAsGroup,
        allowPrivilegeEscalation: sec.allowPrivilegeEscalation,
        readOnlyRootFilesystem: sec.readOnlyRootFilesystem,
        privileged: false,
        capabilities: { drop: [...sec.dropCapabilities] },
        seccompProfile: { type: sec.seccompProfile },
    };
}

/** Private IPv4 ranges (RFC 1918 and carrier-grade NAT), where a cluster's API server may sit when its address is not configured. */
export const PRIVATE_IPV4_RANGES = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"] as const;

/** Label every namespace carries with its own name (set by the API server since 1.22). */
export const NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name";

/** Cluster DNS pods (CoreDNS keeps the kube-dns label in kubeadm, GKE, EKS and AKS clusters). */
export const CLUSTER_DNS = { namespace: "kube-system", podLabels: { "k8s-app": "kube-dns" }, port: 53 } as const;

/**
 * Where a locked-down pod may send DNS queries, resolved from target.dns: DNS pods by selector, and
 * single node-local addresses (NodeLocal DNSCache's link-local listen address). Each address is
 * rendered as a /32 on port 53, never as a range.
 */
export interface DnsEgress {
    readonly pods: ReadonlyArray<{ readonly namespace: string; readonly podLabels: Readonly<Record<string, string>> }>;
    /** IPv4 addresses, each allowed as `<address>/32` on 53 UDP+TCP. */
    readonly addresses: readonly string[];
}

/** Today's default: the kube-dns pods. */
export const KUBE_DNS_EGRESS: DnsEgress = { pods: [{ namespace: CLUSTER_DNS.namespace, podLabels: CLUSTER_DNS.podLabels }], addresses: [] };

/** A NetworkPolicy peer: the pods with `podLabels` in the namespace named `namespace`. */
export function podsInNamespace(namespace: string, podLabels: Readonly<Record<string, string>>): k8s.types.input.networking.v1.NetworkPolicyPeer {
    return { namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: namespace } }, podSelector: { matchLabels: { ...podLabels } } };
}

/** The egress rule every locked-down pod needs: cluster DNS on 53, UDP and TCP, and nothing else on those peers. */
export function clusterDnsEgress(dns: DnsEgress): k8s.types.input.networking.v1.NetworkPolicyEgressRule {
    return {
        to: [...dns.pods.map((p) => podsInNamespace(p.namespace, p.podLabels)), ...dns.addresses.map((a) => ({ ipBlock: { cidr: `${a}/32` } }))],
        ports: [
            { protocol: "UDP", port: CLUSTER_DNS.port },
            { protocol: "TCP", port: CLUSTER_DNS.port },
        ],
    };
}

/** A pod spec's or ServiceAccount's `imagePullSecrets` for the named pull Secrets; nothing when there are none. */
export function pullSecretRefs(names: readonly string[] | undefined): { imagePullSecrets?: Array<{ name: string }> } {
    return names !== undefined && names.length > 0 ? { imagePullSecrets: names.map((name) => ({ name })) } : {};
}

/**
 * Server-side apply with force: an object a stack kept on `destroy` (the checkpoint volume and
 * its namespace) is adopted by the next `up` instead of failing with a field-manager conflict
 * (pulumi-kubernetes annotation `pulumi.com/patchForce`).
 */
export const ADOPT = { "pulumi.com/patchForce": "true" } as const;

/**
 * Addresses that are never "the internet": private (RFC 1918), carrier-grade NAT (RFC 6598),
 * link-local with the cloud metadata service (169.254.169.254), loopback, this-network,
 * multicast and reserved. Pods, nodes, Services and the API server of a cluster live here.
 */
export const NON_PUBLIC_IPV4 = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "224.0.0.0/4",
    "240.0.0.0/4",
] as const;

/** Egress to public IPv4 addresses only (never the cluster, the node, or the metadata service), on `ports` (TCP). */
export function publicInternetEgress(ports: readonly number[]): k8s.types.input.networking.v1.NetworkPolicyEgressRule {
    return {
        to: [{ ipBlock: { cidr: "0.0.0.0/0", except: [...NON_PUBLIC_IPV4] } }],
        ...(ports.length > 0 ? { ports: ports.map((port) => ({ protocol: "TCP", port })) } : {}),
    };
}

/** A standing rule for a namespace: no pod admits traffic unless a policy of its own says so. */
export function defaultDenyIngressSpec(): k8s.types.input.networking.v1.NetworkPolicySpec {
    return { podSelector: {}, policyTypes: ["Ingress"] };
}

/**
 * The pod-level settings of a hardened, API-less service pod (the nginx proxies and routers):
 * no API token, no service links, non-root with a RuntimeDefault seccomp profile, and replicas
 * spread over nodes when possible so a node drain keeps the service up.
 */
export function hardenedServicePod(
    sec: { readonly runAsUser: number; readonly runAsGroup: number; readonly seccompProfile: "RuntimeDefault"; readonly terminationGraceSeconds: number },
    podLabels: Readonly<Record<string, string>>,
): Pick<
    k8s.types.input.core.v1.PodSpec,
    "automountServiceAccountToken" | "enableServiceLinks" | "terminationGracePeriodSeconds" | "securityContext" | "topologySpreadConstraints"
> {
    return {
        automountServiceAccountToken: false,
        enableServiceLinks: false,
        terminationGracePeriodSeconds: sec.terminationGraceSeconds,
        securityContext: {
            runAsNonRoot: true,
            runAsUser: sec.runAsUser,
            runAsGroup: sec.runAsGroup,
            fsGroup: sec.runAsGroup,
            seccompProfile: { type: sec.seccompProfile },
        },
        topologySpreadConstraints: [
            { maxSkew: 1, topologyKey: "kubernetes.io/hostname", whenUnsatisfiable: "ScheduleAnyway", labelSelector: { matchLabels: { ...podLabels } } },
        ],
    };
}

/** The pod volume holding the metrics sidecars' program files (a ConfigMap mounted at METRICS_PROGRAM_DIR). */
export const METRICS_PROGRAMS_VOLUME = "metrics-programs";

/** The volume of a metrics sidecar's scratch dir (memory-backed emptyDir). */
export function metricsScratchVolume(s: MetricsSidecar): string {
    return `${s.name}-tmp`;
}

/**
 * A metrics sidecar as a container: its one named port, requests = limits, and the container security
 * Pod Security `restricted` admits (non-root, read-only root, no privilege escalation, no capabilities,
 * RuntimeDefault seccomp); its program files read-only, its scratch dir (if any) the only writable place.
 */
export function metricsSidecarContainer(
    s: MetricsSidecar,
    extraMounts: readonly k8s.types.input.core.v1.VolumeMount[] = [],
): k8s.types.input.core.v1.Container {
    const resources = { cpu: s.cpu, memory: s.memory };
    return {
        name: s.name,
        image: s.image,
        imagePullPolicy: imagePullPolicy(s.image),
        ...(s.command !== undefined ? { command: [...s.command] } : {}),
        args: [...s.args],
        ...(s.fieldEnv !== undefined
            ? { env: Object.entries(s.fieldEnv).map(([name, fieldPath]) => ({ name, valueFrom: { fieldRef: { apiVersion: "v1", fieldPath } } })) }
            : {}),
        ports: [{ name: s.port.name, containerPort: s.port.port, protocol: "TCP" }],
        resources: { requests: resources, limits: resources },
        securityContext: restrictedContainerSecurity({
            runAsUser: s.runAsUser,
            runAsGroup: s.runAsUser,
            readOnlyRootFilesystem: true,
            allowPrivilegeEscalation: false,
            dropCapabilities: ["ALL"],
            seccompProfile: "RuntimeDefault",
        }),
        volumeMounts: [
            ...(s.files.length > 0 ? [{ name: METRICS_PROGRAMS_VOLUME, mountPath: METRICS_PROGRAM_DIR, readOnly: true }] : []),
            ...(s.scratchDir !== undefined ? [{ name: metricsScratchVolume(s), mountPath: s.scratchDir }] : []),
            ...extraMounts,
        ],
    };
}

/** The pod volumes a pod's metrics sidecars need: the programs ConfigMap (when any sidecar has files) and each scratch dir. */
export function metricsSidecarVolumes(sidecars: readonly MetricsSidecar[], configMap: string): k8s.types.input.core.v1.Volume[] {
    return [
        ...(sidecars.some((s) => s.files.length > 0) ? [{ name: METRICS_PROGRAMS_VOLUME, configMap: { name: configMap, defaultMode: 0o444 } }] : []),
        ...sidecars
            .filter((s) => s.scratchDir !== undefined)
            .map((s) => ({ name: metricsScratchVolume(s), emptyDir: { medium: "Memory", sizeLimit: "16Mi" } })),
    ];
}

/** A NetworkPolicy ingress rule: the scraper's pods, on the metrics ports and nothing else. */
export function scrapeIngressRule(scraper: Scraper, ports: readonly MetricsPort[]): k8s.types.input.networking.v1.NetworkPolicyIngressRule {
    return {
        from: [podsInNamespace(scraper.namespace, scraper.podLabels)],
        ports: [...new Set(ports.map((p) => p.port))].sort((a, b) => a - b).map((port) => ({ protocol: "TCP", port })),
    };
}

/** API group of SandboxClaim / SandboxTemplate / SandboxWarmPool (agent-sandbox v1.0.1, extensions.agents.x-k8s.io; the same group and v1beta1 since v0.5). */
export const SANDBOX_EXTENSIONS_GROUP = "extensions.agents.x-k8s.io";

/** CEL: the claim sets spec.lifecycle.shutdownTime. */
export const HAS_SHUTDOWN_TIME = "has(object.spec.lifecycle) && has(object.spec.lifecycle.shutdownTime)";

/** What a claim-lifetime admission policy enforces. */
export interface ClaimLifetimeRule {
    /** The longest a claim may live, from its creation. */
    readonly maxLifetimeSeconds: number;
    /** Label key carrying the run id on every claim. */
    readonly runLabel: string;
    /** The one run id claims must carry; undefined: any non-empty run id (a team's namespace holds several runs). */
    readonly runId?: string;
    /** The config field that sets the bound, named in the messages. */
    readonly field: string;
}

/**
 * A ValidatingAdmissionPolicy body bounding SandboxClaims. CEL in admission has no "now", but on
 * CREATE the API server has already set metadata.creationTimestamp (registry BeforeCreate runs
 * before validating admission), and on UPDATE it is the stored, immutable creation time: so
 * "shutdownTime - creationTimestamp <= max" bounds the claim's whole life, and an UPDATE cannot
 * extend it past creation + max. timestamp() accepts a string or a timestamp.
 */
export function claimLifetimePolicySpec(r: ClaimLifetimeRule): k8s.types.input.admissionregistration.v1.ValidatingAdmissionPolicySpec {
    const max = `duration('${r.maxLifetimeSeconds}s')`;
    const label = r.runLabel;
    const created = "timestamp(object.metadata.creationTimestamp)";
    const hasLabel = `has(object.metadata.labels) && '${label}' in object.metadata.labels`;
    return {
        failurePolicy: "Fail",
        matchConstraints: {
            resourceRules: [{ apiGroups: [SANDBOX_EXTENSIONS_GROUP], apiVersions: ["*"], operations: ["CREATE", "UPDATE"], resources: ["sandboxclaims"] }],
        },
        // A claim being deleted may still be updated (finalizers removed) whatever it holds.
        matchConditions: [{ name: "not-being-deleted", expression: "!has(object.metadata.deletionTimestamp)" }],
        validations: [
            {
                expression: HAS_SHUTDOWN_TIME,
                reason: "Invalid",
                message: `spec.lifecycle.shutdownTime is required: set it to at most ${r.maxLifetimeSeconds}s after the claim is created (e.g. now + ${r.maxLifetimeSeconds}s, RFC 3339), so the sandbox cannot outlive the run's maximum lifetime (${r.field})`,
            },
            {
                expression: `!(${HAS_SHUTDOWN_TIME}) || timestamp(object.spec.lifecycle.shutdownTime) - ${created} <= ${max}`,
                reason: "Invalid",
                message: `spec.lifecycle.shutdownTime is more than ${r.maxLifetimeSeconds}s after the claim's creation: set it to at most creationTimestamp + ${r.maxLifetimeSeconds}s (${r.field})`,
                messageExpression: `'spec.lifecycle.shutdownTime ' + string(object.spec.lifecycle.shutdownTime) + ' is more than ${r.maxLifetimeSeconds}s after the claim was created (' + string(object.metadata.creationTimestamp) + '): set it to at most ' + string(${created} + ${max}) + ' (${r.field})'`,
            },
            r.runId !== undefined
                ? {
                      expression: `${hasLabel} && object.metadata.labels['${label}'] == '${r.runId}'`,
                      reason: "Invalid",
                      message: `metadata.labels['${label}'] must be '${r.runId}' (the run id): add the label, so the run's sandboxes can be listed and removed with one selector (${label}=${r.runId})`,
                  }
                : {
                      expression: `${hasLabel} && object.metadata.labels['${label}'] != ''`,
                      reason: "Invalid",
                      message: `metadata.labels['${label}'] must name the claim's run (its run id): add the label, so each run's sandboxes can be listed and removed with one selector`,
                  },
        ],
    };
}

/**
 * Probes for a server whose every HTTP path needs a key (or reaches an upstream): a TCP check proves it
 * accepts connections. Ready after 5 s of answers, restarted after 30 s without.
 */
export function tcpProbes(port: string): Pick<k8s.types.input.core.v1.Container, "readinessProbe" | "livenessProbe"> {
    const tcp = { tcpSocket: { port } };
    return {
        readinessProbe: { ...tcp, periodSeconds: 5, timeoutSeconds: 2, failureThreshold: 2 },
        livenessProbe: { ...tcp, initialDelaySeconds: 5, periodSeconds: 10, timeoutSeconds: 3, failureThreshold: 3 },
    };
}
