/**
 * The cluster stack: what every run on a cluster shares, provisioned once by the platform team
 * (`agent-rl-infra:cluster` instead of `agent-rl-infra:platform` in the stack's config), and
 * read by run stacks through `clusterStack` (a StackReference to its outputs). Its schema, its
 * outputs' shape, and the one rule that turns those outputs into a run stack's settings.
 */
import { z } from "zod";
import { ConfigError, formatZodIssues } from "./parse";
import { DNS_SUBDOMAIN, dnsLabel, quantity } from "./schema";
import type { PlatformConfig } from "./resolve";
import { type Role, teamNamespaces } from "./tenancy";

/** The agent-sandbox release the run stacks' objects are written for (sandbox CRD fields). */
export const AGENT_SANDBOX_VERSION = "v0.5.6";
/** The release manifest: CRDs, controller Deployment and RBAC (agent-sandbox's GitHub release assets). */
export const AGENT_SANDBOX_MANIFEST_URL = `https://github.com/kubernetes-sigs/agent-sandbox/releases/download/${AGENT_SANDBOX_VERSION}/sandbox-with-extensions.yaml`;
/** The label of agent-sandbox's controller Deployment (agent-sandbox k8s/controller.yaml, v0.5.6). */
export const SANDBOX_CONTROLLER_LABEL = "app=agent-sandbox-controller";
/**
 * agent-sandbox v0.5.6's controller metrics (k8s/controller.yaml: container port `metrics` 8080 on pods
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
    /** PriorityClass name. */
    name: objectName,
    /** Priority value (higher preempts lower; user classes stay below 1e9). */
    value: z.number().int().min(-2147483648).max(1000000000),
    /** `PreemptLowerPriority` (default) or `Never`. */
    preemptionPolicy: z.enum(["PreemptLowerPriority", "Never"]).default("PreemptLowerPriority"),
});

/** A team namespace's quota. */
const teamQuota = z.strictObject({
    /** GPUs requested at once (the device plugin's resource, `gpuResourceName`). */
    gpus: z.number().int().nonnegative().optional(),
    /** CPU requested at once. */
    cpu: quantity.optional(),
    /** Memory requested at once. */
    memory: quantity.optional(),
    /** Pods at once. */
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
    /** The cluster. Kubernetes only: a Docker host has nothing shared between runs to provision. */
    target: z.strictObject({
        kind: z.literal("kubernetes"),
        /** kubeconfig context of the cluster (required: never kubectl's current context). */
        context: z.string().min(1),
        /** kubeconfig file; default: the ambient one. */
        kubeconfig: z.string().min(1).optional(),
    }),
    /** agent-sandbox (CRDs, controller, RBAC) for every run stack's warm pools. */
    agentSandbox: z
        .strictObject({
            /** Install it. Off when the cluster already has agent-sandbox from elsewhere. */
            install: z.boolean().default(true),
            /** Release manifest (URL or local file) of agent-sandbox v0.5.6. Default: the GitHub release asset. */
            manifest: z.string().min(1).default(AGENT_SANDBOX_MANIFEST_URL),
        })
        .prefault({}),
    /** PriorityClasses run stacks use when they name none: the training pod, and the sandboxes (below training). */
    priorityClasses: z
        .strictObject({
            training: priorityClass.optional(),
            sandboxes: priorityClass.optional(),
        })
        .default({
            training: { name: "agent-rl-training", value: 100000, preemptionPolicy: "PreemptLowerPriority" },
            sandboxes: { name: "agent-rl-sandboxes", value: 1000, preemptionPolicy: "Never" },
        }),
    /** RuntimeClasses to create, one per handler the nodes' container runtime has (gVisor `runsc`, Kata `kata`). */
    runtimeClasses: z.array(z.strictObject({ name: dnsLabel, handler: dnsLabel })).default([]),
    /** The cert-manager issuer run stacks' ingress certificates use (a reference: the issuer itself is cert-manager config). */
    certIssuer: z
        .strictObject({
            name: objectName,
            kind: z.enum(["Issuer", "ClusterIssuer"]).default("ClusterIssuer"),
            group: z.string().default("cert-manager.io"),
        })
        .optional(),
    /**
     * Teams: each gets the four role namespaces of a run (`<team>-training`, `-ingress`, `-envs`,
     * `-sandboxes`) with their Pod Security levels, a default-deny ingress policy, a quota per role
     * when limits are given and the sandbox-claim admission policy, so run stacks naming the team
     * (`target.team`) deploy into them and make nothing cluster-wide. Default: none.
     */
    teams: z
        .array(
            z.strictObject({
                /** Team name: the prefix of its namespaces (at most 40 characters). */
                name: dnsLabel.max(40),
                /** ResourceQuota per role namespace (omitted role: no quota). Default: none. */
                quotas: z
                    .strictObject({
                        training: teamQuota.optional(),
                        ingress: teamQuota.optional(),
                        envs: teamQuota.optional(),
                        sandboxes: teamQuota.optional(),
                    })
                    .default({}),
                /** The longest a sandbox claim in the team's sandboxes namespace may live (the admission policy's bound); a run's sandboxes.maxLifetimeSeconds must not exceed it. Default: 21600 (6 h). */
                sandboxMaxLifetimeSeconds: z.number().int().positive().default(21600),
                /** Who deploys the team's run stacks: a Role with what a run stack needs (DEPLOYER_RULES, README) bound in each of the team's namespaces. Default: none (grant it yourself). */
                deployers: z.array(deployer).default([]),
            }),
        )
        .default([]),
    /** Extended resource name of the GPU device plugin (for team GPU quotas). */
    gpuResourceName: z.string().default("nvidia.com/gpu"),
    /** A PodMonitor (monitoring.coreos.com/v1) for agent-sandbox's controller, when this stack installs it. */
    observability: z
        .strictObject({
            /** Make the PodMonitor. Default: false. */
            enabled: z.boolean().default(false),
            /** Labels on it (what the Prometheus's podMonitorSelector matches). Default: none. */
            monitorLabels: z.record(z.string(), z.string().max(63)).default({}),
            /** Scrape interval. Default: 30s. */
            scrapeInterval: z
                .string()
                .regex(/^[1-9][0-9]*(s|m|h)$/, "must be a Prometheus duration such as 30s, 5m or 2h")
                .default("30s"),
        })
        .prefault({}),
});

export type ClusterConfig = z.output<typeof clusterSchema>;

/** Parses and cross-checks a cluster stack's config; throws ConfigError with every problem. */
export function parseClusterConfig(raw: unknown): ClusterConfig {
    const moved = movedTeamQuotas(raw);
    if (moved.length > 0) throw new ConfigError(moved);
    const parsed = clusterSchema.safeParse(raw, { reportInput: true });
    if (!parsed.success) throw new ConfigError(formatZodIssues(parsed.error.issues).map((p) => `cluster ${p}`));
    const c = parsed.data;
    const problems: string[] = [];
    const dup = <T>(xs: readonly T[], key: (x: T) => string) => xs.map(key).filter((k, i, all) => all.indexOf(k) !== i);
    for (const n of dup(c.runtimeClasses, (r) => r.name)) problems.push(`cluster runtimeClasses: '${n}' is listed twice: keep one`);
    for (const n of dup(c.teams, (t) => t.name)) problems.push(`cluster teams: '${n}' is listed twice: keep one`);
    const pcs = [c.priorityClasses.training, c.priorityClasses.sandboxes].filter((p) => p !== undefined);
    if (pcs.length === 2 && pcs[0].name === pcs[1].name)
        problems.push(`cluster priorityClasses: training and sandboxes are both '${pcs[0].name}': give them two names (sandboxes rank below training)`);
    if (problems.length > 0) throw new ConfigError(problems);
    return c;
}

/** `teams[i].quota` (one namespace per team, before the role namespaces) is refused with where it went. */
function movedTeamQuotas(raw: unknown): string[] {
    const teams = (raw as { teams?: unknown } | undefined)?.teams;
    if (!Array.isArray(teams)) return [];
    return teams.flatMap((t, i) =>
        t !== null && typeof t === "object" && "quota" in t
            ? [
                  `cluster teams[${i}].quota: a team now has four namespaces (<team>-training, -ingress, -envs, -sandboxes), each with its own quota: move it to teams[${i}].quotas.training (GPUs are requested there) and add quotas for the other roles as needed`,
              ]
            : [],
    );
}

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

/** The outputs a cluster config produces: one rule, used by the cluster program and by the offline plan. */
export function clusterOutputs(c: ClusterConfig): ClusterOutputs {
    return {
        kind: CLUSTER_OUTPUTS_KIND,
        agentSandbox: { version: AGENT_SANDBOX_VERSION, installed: c.agentSandbox.install },
        priorityClasses: {
            ...(c.priorityClasses.training ? { training: c.priorityClasses.training.name } : {}),
            ...(c.priorityClasses.sandboxes ? { sandboxes: c.priorityClasses.sandboxes.name } : {}),
        },
        runtimeClasses: c.runtimeClasses.map((r) => r.name),
        ...(c.certIssuer ? { certIssuer: c.certIssuer } : {}),
        teams: c.teams.map((t) => t.name),
        tenants: Object.fromEntries(
            c.teams.map((t) => [t.name, { namespaces: teamNamespaces(t.name), quotas: t.quotas, sandboxMaxLifetimeSeconds: t.sandboxMaxLifetimeSeconds }]),
        ),
    };
}

/**
 * A run stack's config with what its cluster stack provides: the PriorityClasses where the run
 * names none, the ingress issuer where cert-manager mode names none, the team's namespaces and
 * bounds (target.team), the cluster's identity (checked against the live cluster by
 * clusterIdentityProblems at up); and every reference the cluster stack does not provide, refused.
 * Throws ConfigError naming each problem and its fix.
 */
export function applyClusterStack(config: PlatformConfig, outputs: Partial<ClusterOutputs> | undefined): PlatformConfig {
    const ref = config.clusterStack;
    if (ref === undefined) return config;
    if (outputs?.kind !== CLUSTER_OUTPUTS_KIND) {
        throw new ConfigError([
            `clusterStack: '${ref}' exports no cluster outputs: point it at a stack whose config is agent-rl-infra:cluster and that has been up'd (pulumi stack ls; pulumi stack output -s ${ref})`,
        ]);
    }
    if (config.target.kind !== "kubernetes")
        throw new ConfigError([
            `clusterStack: a cluster stack serves Kubernetes run stacks; this stack's target is ${config.target.kind}: remove clusterStack`,
        ]);
    const problems: string[] = [];
    const pcs = outputs.priorityClasses ?? {};
    const runtimeClasses = outputs.runtimeClasses ?? [];
    if (config.sandboxes.provider === "agent-sandbox" && !outputs.agentSandbox?.installed)
        problems.push(
            `sandboxes.provider: agent-sandbox, but the cluster stack '${ref}' does not install it: set agentSandbox.install true there (or install agent-sandbox ${AGENT_SANDBOX_VERSION} by hand and say so with the preflight)`,
        );
    const rc = config.sandboxes.runtimeClassName;
    if (rc !== undefined && !runtimeClasses.includes(rc))
        problems.push(
            `sandboxes.runtimeClassName: '${rc}' is not a RuntimeClass of the cluster stack '${ref}' (it has: ${runtimeClasses.join(", ") || "none"}): add { name: ${rc}, handler: <the nodes' handler> } to its runtimeClasses, or use one it has`,
        );
    for (const [field, name] of Object.entries(envRuntimeClasses(config))) {
        if (!runtimeClasses.includes(name))
            problems.push(
                `${field}: '${name}' is not a RuntimeClass of the cluster stack '${ref}' (it has: ${runtimeClasses.join(", ") || "none"}): add it there, or use one it has`,
            );
    }
    const team = config.target.team;
    const tenant = team !== undefined ? outputs.tenants?.[team] : undefined;
    if (team !== undefined && tenant === undefined)
        problems.push(
            outputs.tenants === undefined && (outputs.teams ?? []).includes(team)
                ? `target.team: the cluster stack '${ref}' lists team '${team}' but exports no team namespaces (it was last up'd before teams had role namespaces): run pulumi up on the cluster stack, then this one`
                : `target.team: '${team}' is not a team of the cluster stack '${ref}' (it has: ${(outputs.teams ?? []).join(", ") || "none"}): add { name: ${team} } to its teams and up it, or name one it has`,
        );
    if (tenant !== undefined && config.sandboxes.provider === "agent-sandbox" && config.sandboxes.maxLifetimeSeconds > tenant.sandboxMaxLifetimeSeconds)
        problems.push(
            `sandboxes.maxLifetimeSeconds: ${config.sandboxes.maxLifetimeSeconds} is above team '${team}''s bound of ${tenant.sandboxMaxLifetimeSeconds}s (the cluster stack's admission policy would refuse every claim): lower it to at most ${tenant.sandboxMaxLifetimeSeconds}, or raise teams.${team}.sandboxMaxLifetimeSeconds in the cluster stack '${ref}'`,
        );
    const tls = config.ingress.tls;
    if (tls.mode === "cert-manager" && tls.issuer === undefined && outputs.certIssuer === undefined)
        problems.push(
            `ingress.tls.issuer: tls mode 'cert-manager' needs an issuer, and the cluster stack '${ref}' names none: set tls.issuer here, or certIssuer in the cluster stack`,
        );
    if (problems.length > 0) throw new ConfigError(problems);
    return {
        ...config,
        cluster: { ...(outputs.clusterId !== undefined ? { id: outputs.clusterId } : {}), ...(tenant !== undefined ? { tenant } : {}) },
        target: { ...config.target, priorityClassName: config.target.priorityClassName ?? pcs.training },
        sandboxes: { ...config.sandboxes, priorityClassName: config.sandboxes.priorityClassName ?? pcs.sandboxes },
        ingress:
            tls.mode === "cert-manager" && tls.issuer === undefined && outputs.certIssuer !== undefined
                ? { ...config.ingress, tls: { ...tls, issuer: { ...outputs.certIssuer } } }
                : config.ingress,
    };
}

/** The RuntimeClass each env server names, by config field. */
function envRuntimeClasses(config: PlatformConfig): Record<string, string> {
    const out: Record<string, string> = {};
    for (const env of config.envs) if (env.runtimeClassName !== undefined) out[`envs.${env.name}.runtimeClassName`] = env.runtimeClassName;
    return out;
}

/**
 * A run stack's cluster against its cluster stack's: `exported` is the cluster stack's clusterId
 * output, `live` the kube-system namespace's UID as this stack's provider reads it (undefined in
 * the offline plan, which reads no cluster: nothing to compare).
 */
export function clusterIdentityProblems(ref: string, exported: string | undefined, live: string | undefined, context: string | undefined): string[] {
    if (live === undefined) return [];
    if (exported === undefined)
        return [
            `clusterStack: '${ref}' exports no clusterId (the kube-system namespace's UID, read when the cluster stack is up'd): run pulumi up on the cluster stack, then this one`,
        ];
    if (exported === live) return [];
    return [
        `clusterStack: '${ref}' was up'd on another cluster (its kube-system namespace has UID ${exported}; this stack's target${context !== undefined ? `, context '${context}',` : ""} has ${live}): point target.context at the cluster stack's cluster, or clusterStack at this cluster's cluster stack`,
    ];
}
