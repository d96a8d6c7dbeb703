/**
 * Teams on a shared cluster: the role namespaces a cluster stack makes for each team, their Pod
 * Security levels, and what a run stack's deployer must be allowed in them. One table read by the
 * cluster stack (which makes the namespaces, quotas, admission policy and the deployer's Role),
 * the run stack (which deploys into them, `target.team`) and docs/guides/platform-teams.md.
 */

/** The namespaces of a run, by role. */
export const ROLES = ["training", "ingress", "envs", "sandboxes"] as const;
export type Role = (typeof ROLES)[number];

/** Pod Security admission level per role: sandboxes run untrusted code, so `restricted`. */
export const POD_SECURITY: Record<Role, "restricted" | "baseline"> = {
    // GPU pods need a memory-backed /dev/shm and root images (vLLM, TRL): baseline.
    training: "baseline",
    ingress: "restricted",
    // OpenEnv images run as root: baseline; restricted is warned about.
    envs: "baseline",
    sandboxes: "restricted",
};

/** The Pod Security labels of a role's namespace (enforce its level, warn at restricted). */
export function podSecurityLabels(role: Role): Record<string, string> {
    return {
        "pod-security.kubernetes.io/enforce": POD_SECURITY[role],
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/warn-version": "latest",
    };
}

/** Label on a team's namespaces naming the team. */
export const TEAM_LABEL = "agentrl.dev/team";
/** Label on every namespace of the project naming its role (the policy pack reads it). */
export const ROLE_LABEL = "agentrl.dev/role";

/** A team's namespace of a role: `<team>-<role>` (a team name is at most 40 characters, so this stays a DNS label). */
export function teamNamespace(team: string, role: Role): string {
    return `${team}-${role}`;
}

/** Every role namespace of a team. */
export function teamNamespaces(team: string): Record<Role, string> {
    return Object.fromEntries(ROLES.map((r) => [r, teamNamespace(team, r)])) as Record<Role, string>;
}

/** One RBAC rule. */
export interface Rule {
    readonly apiGroups: readonly string[];
    readonly resources: readonly string[];
    readonly verbs: readonly string[];
}

/** What `pulumi up` does to the objects it manages (server-side apply: get, create, patch; refresh: list/watch; destroy: delete). */
const MANAGE = ["get", "list", "watch", "create", "update", "patch", "delete"] as const;

/**
 * What a run stack's deployer needs in each of its team's namespaces: every namespaced kind a run
 * stack creates (a test compares it with every recipe's plan), plus the claim rights the trainer's
 * Role grants (Kubernetes lets a deployer grant only rights it holds: rbac escalation prevention,
 * kubernetes docs reference/access-authn-authz/rbac.md "Privilege escalation prevention").
 */
export const DEPLOYER_RULES: readonly Rule[] = [
    { apiGroups: [""], resources: ["configmaps", "secrets", "services", "serviceaccounts", "persistentvolumeclaims"], verbs: MANAGE },
    { apiGroups: ["apps"], resources: ["deployments", "statefulsets"], verbs: MANAGE },
    { apiGroups: ["batch"], resources: ["jobs"], verbs: MANAGE },
    { apiGroups: ["policy"], resources: ["poddisruptionbudgets"], verbs: MANAGE },
    { apiGroups: ["networking.k8s.io"], resources: ["networkpolicies"], verbs: MANAGE },
    { apiGroups: ["rbac.authorization.k8s.io"], resources: ["roles", "rolebindings"], verbs: MANAGE },
    { apiGroups: ["extensions.agents.x-k8s.io"], resources: ["sandboxtemplates", "sandboxwarmpools"], verbs: MANAGE },
    // sandboxes.autoscale: the warm pools' HorizontalPodAutoscalers.
    { apiGroups: ["autoscaling"], resources: ["horizontalpodautoscalers"], verbs: MANAGE },
    // observability.enabled: the run's PodMonitors and PrometheusRule (which sandboxes.autoscale reads).
    { apiGroups: ["monitoring.coreos.com"], resources: ["podmonitors", "prometheusrules"], verbs: MANAGE },
    // What the trainer's Role grants (sandboxClaimerRules): a deployer must hold it to grant it.
    { apiGroups: ["extensions.agents.x-k8s.io"], resources: ["sandboxclaims"], verbs: ["create", "get", "list", "watch", "delete"] },
    { apiGroups: ["agents.x-k8s.io"], resources: ["sandboxes"], verbs: ["get", "list", "watch"] },
    { apiGroups: ["cert-manager.io"], resources: ["certificates"], verbs: MANAGE },
    { apiGroups: ["jobset.x-k8s.io"], resources: ["jobsets"], verbs: MANAGE },
    { apiGroups: ["gateway.networking.k8s.io"], resources: ["httproutes"], verbs: MANAGE },
];

/**
 * What `npm run checkpoints` (its helper pod on the checkpoint claim, `kubectl exec` / `kubectl cp`)
 * and reading a failed run (`kubectl logs`, events) need in the team's training namespace.
 */
export const OPERATOR_RULES: readonly Rule[] = [
    { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch", "create", "delete"] },
    { apiGroups: [""], resources: ["pods/exec"], verbs: ["create"] },
    { apiGroups: [""], resources: ["pods/log", "events"], verbs: ["get", "list", "watch"] },
];
