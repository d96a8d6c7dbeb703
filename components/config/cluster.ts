/**
 * The cluster stack's rules: its config parsed and cross-checked, the outputs it exports, and the
 * one rule that turns those outputs into a run stack's settings. Its schema and its outputs' shape
 * are in cluster-schema.ts.
 */
import { AGENT_SANDBOX_VERSION, CLUSTER_OUTPUTS_KIND, type ClusterConfig, type ClusterOutputs, clusterSchema } from "./cluster-schema";
import { ConfigError, formatZodIssues } from "./errors";
import { runsSandboxPool, sandboxPoolOf } from "./sandbox-providers";
import { fieldsAt } from "./schema-walk";
import { teamNamespaces } from "./tenancy";
import type { PlatformConfig } from "./types";

/** Parses and cross-checks a cluster stack's config; throws ConfigError with every problem. */
export function parseClusterConfig(raw: unknown): ClusterConfig {
    const moved = movedTeamQuotas(raw);
    if (moved.length > 0) throw new ConfigError(moved);
    const parsed = clusterSchema.safeParse(raw, { reportInput: true });
    if (!parsed.success) throw new ConfigError(formatZodIssues(parsed.error.issues, (path) => fieldsAt(clusterSchema, path, raw)).map((p) => `cluster ${p}`));
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
    if (sandboxPoolOf(config)?.controller === "agent-sandbox" && !outputs.agentSandbox?.installed)
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
    if (tenant !== undefined && runsSandboxPool(config) && config.sandboxes.maxLifetimeSeconds > tenant.sandboxMaxLifetimeSeconds)
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
