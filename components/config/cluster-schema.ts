/**
 * The cluster stack: what every run on a cluster shares, provisioned once by the platform team
 * (`agent-rl-infra:cluster` instead of `agent-rl-infra:platform` in the stack's config), and
 * read by run stacks through `clusterStack` (a StackReference to its outputs). Its schema and
 * its outputs' shape; the rules that read them are in cluster.ts.
 *
 * A field's words live in field-docs.ts (CLUSTER_FIELD_DOCS), as schema.ts's do: no comment here
 * repeats them (test/schema-docs.test.ts holds it).
 */
import { z } from "zod";
import { DNS_SUBDOMAIN, dnsLabel, quantity } from "./schema";
import type { Role } from "./tenancy";

/** The agent-sandbox release the run stacks' objects are written for (sandbox CRD fields). */
export const AGENT_SANDBOX_VERSION = "v1.0.1";
/** The release manifest: CRDs, controller Deployment and RBAC (agent-sandbox's GitHub release assets). */
export const AGENT_SANDBOX_MANIFEST_URL = `https://github.com/kubernetes-sigs/agent-sandbox/releases/download/${AGENT_SANDBOX_VERSION}/sandbox-with-extensions.yaml`;
/** The JobSet release the multi-node trainer is written for (training/kubernetes-multinode.ts: jobset.x-k8s.io/v1alpha2). */
export const JOBSET_RELEASE = "v0.12.0";
/** Its release manifest: CRDs, controller, webhooks, RBAC (jobset README.md, "kubectl apply --server-side -f"). */
export const JOBSET_MANIFEST_URL = `https://github.com/kubernetes-sigs/jobset/releases/download/${JOBSET_RELEASE}/manifests.yaml`;
/** The Kueue release queued runs (target.kueueQueue: a suspended Job or JobSet with kueue.x-k8s.io/queue-name) are written for; the tests apply its CRDs, not its controller. */
export const KUEUE_RELEASE = "v0.17.0";
/** Its release manifest: CRDs, controller, webhooks, RBAC in kueue-system (kueue README.md at v0.17.0, "kubectl apply --server-side -f"). */
export const KUEUE_MANIFEST_URL = `https://github.com/kubernetes-sigs/kueue/releases/download/${KUEUE_RELEASE}/manifests.yaml`;
/** The label of agent-sandbox's controller Deployment (agent-sandbox k8s/controller.yaml, v1.0.1 as v0.5.6). */
export const SANDBOX_CONTROLLER_LABEL = "app=agent-sandbox-controller";
/**
 * agent-sandbox v1.0.1's controller metrics, as in v0.5.6 (k8s/controller.yaml: container port `metrics` 8080 on pods
 * labelled app=agent-sandbox-controller in agent-sandbox-system; cmd/agent-sandbox-controller/main.go:
 * --metrics-bind-address :8080, controller-runtime's plain-HTTP metrics server on /metrics).
 */
export const SANDBOX_CONTROLLER_METRICS = {
    namespace: "agent-sandbox-system",
    podLabels: { app: "agent-sandbox-controller" },
    port: "metrics",
    path: "/metrics",
} as const;
/** Tells a cluster stack's outputs from any other stack's (a run stack pointed at the wrong stack). */
export const CLUSTER_OUTPUTS_KIND = "agent-rl-infra/cluster";

const objectName = z.string().regex(DNS_SUBDOMAIN, "must be a Kubernetes object name (lower-case DNS subdomain)");

const priorityClass = z.strictObject({
    name: objectName,
    value: z.number().int().min(-2147483648).max(1000000000),
    preemptionPolicy: z.enum(["PreemptLowerPriority", "Never"]).default("PreemptLowerPriority"),
});

const teamQuota = z.strictObject({
    gpus: z.number().int().nonnegative().optional(),
    cpu: quantity.optional(),
    memory: quantity.optional(),
    pods: z.number().int().nonnegative().optional(),
});
export type TeamQuota = z.output<typeof teamQuota>;

/** An RBAC subject (a user, group or ServiceAccount of the team's CI). */
const deployer = z.discriminatedUnion("kind", [
    z.strictObject({ kind: z.literal("User"), name: z.string().min(1) }),
    z.strictObject({ kind: z.literal("Group"), name: z.string().min(1) }),
    z.strictObject({ kind: z.literal("ServiceAccount"), name: dnsLabel, namespace: dnsLabel }),
]);

export const clusterSchema = z.strictObject({
    target: z.strictObject({
        kind: z.literal("kubernetes"),
        context: z.string().min(1),
        kubeconfig: z.string().min(1).optional(),
    }),
    agentSandbox: z
        .strictObject({
            install: z.boolean().default(true),
            manifest: z.string().min(1).default(AGENT_SANDBOX_MANIFEST_URL),
        })
        .prefault({}),
    jobSet: z
        .strictObject({
            install: z.boolean().default(false),
            manifest: z.string().min(1).default(JOBSET_MANIFEST_URL),
        })
        .prefault({}),
    kueue: z
        .strictObject({
            install: z.boolean().default(false),
            manifest: z.string().min(1).default(KUEUE_MANIFEST_URL),
        })
        .prefault({}),
    priorityClasses: z
        .strictObject({
            training: priorityClass.optional(),
            sandboxes: priorityClass.optional(),
        })
        .default({
            training: { name: "agent-rl-training", value: 100000, preemptionPolicy: "PreemptLowerPriority" },
            sandboxes: { name: "agent-rl-sandboxes", value: 1000, preemptionPolicy: "Never" },
        }),
    runtimeClasses: z.array(z.strictObject({ name: dnsLabel, handler: dnsLabel })).default([]),
    certIssuer: z
        .strictObject({
            name: objectName,
            kind: z.enum(["Issuer", "ClusterIssuer"]).default("ClusterIssuer"),
            group: z.string().default("cert-manager.io"),
        })
        .optional(),
    teams: z
        .array(
            z.strictObject({
                name: dnsLabel.max(40),
                quotas: z
                    .strictObject({
                        training: teamQuota.optional(),
                        ingress: teamQuota.optional(),
                        envs: teamQuota.optional(),
                        sandboxes: teamQuota.optional(),
                    })
                    .default({}),
                sandboxMaxLifetimeSeconds: z.number().int().positive().default(21600),
                deployers: z.array(deployer).default([]),
            }),
        )
        .default([]),
    gpuResourceName: z.string().default("nvidia.com/gpu"),
    observability: z
        .strictObject({
            enabled: z.boolean().default(false),
            monitorLabels: z.record(z.string(), z.string().max(63)).default({}),
            scrapeInterval: z
                .string()
                .regex(/^[1-9][0-9]*(s|m|h)$/, "must be a Prometheus duration such as 30s, 5m or 2h")
                .default("30s"),
        })
        .prefault({}),
});

export type ClusterConfig = z.output<typeof clusterSchema>;

/** What a cluster stack exports (its stack outputs), and what run stacks read. */
export interface ClusterOutputs {
    readonly kind: typeof CLUSTER_OUTPUTS_KIND;
    readonly agentSandbox: { readonly version: string; readonly installed: boolean };
    readonly priorityClasses: { readonly training?: string; readonly sandboxes?: string };
    readonly runtimeClasses: readonly string[];
    readonly certIssuer?: { readonly name: string; readonly kind: "Issuer" | "ClusterIssuer"; readonly group: string };
    readonly teams: readonly string[];
    /** Per team: its namespaces, quotas and claim-lifetime bound (what a run stack with target.team checks). */
    readonly tenants: Readonly<Record<string, TenantOutputs>>;
    /** The cluster's identity: the kube-system namespace's UID (absent in the offline plan, which reads no cluster). */
    readonly clusterId?: string;
}

/** What a team's run stacks read from the cluster stack. */
export interface TenantOutputs {
    readonly namespaces: Readonly<Record<Role, string>>;
    readonly quotas: Readonly<Partial<Record<Role, TeamQuota>>>;
    readonly sandboxMaxLifetimeSeconds: number;
}
