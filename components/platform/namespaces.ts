/**
 * Where the stack's components run: on Kubernetes a namespace per role (with the registry
 * credentials and a default-deny rule), on Docker the training and sandbox networks. The
 * Platform registers them first; every component is given the name it returns here.
 */
import * as docker from "@pulumi/docker";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { PlatformSecrets } from "../config/load";
import { runsSandboxPool } from "../config/sandbox-providers";
import { podSecurityLabels, ROLE_LABEL } from "../config/tenancy";
import { ADOPT, defaultDenyIngressSpec } from "../shared/kubernetes";
import type { PlatformPlan } from "./model";

type Role = keyof PlatformPlan["names"]["namespaces"];

/**
 * The roles whose namespace the stack makes (Kubernetes): training always; ingress, envs and
 * sandboxes only where something of this stack runs in them (a white-box run has no ingress or
 * sandboxes, an external env deploys nothing).
 */
export function namespaceRoles(config: PlatformPlan["config"]): Array<Role> {
    return [
        "training" as const,
        ...(config.ingress.enabled ? (["ingress"] as const) : []),
        ...(config.envs.some((e) => e.external === undefined) ? (["envs"] as const) : []),
        ...(runsSandboxPool(config) ? (["sandboxes"] as const) : []),
    ];
}

/** Namespaces by role (Kubernetes) or network names (Docker), each registered under `name`. */
export function registerNamespaces(
    name: string,
    plan: PlatformPlan,
    secrets: PlatformSecrets,
    child: pulumi.CustomResourceOptions,
): Record<string, pulumi.Output<string>> {
    if (plan.config.target.kind !== "kubernetes") return dockerNetworks(name, plan, child);
    const namespaces: Record<string, pulumi.Output<string>> = {};
    for (const role of namespaceRoles(plan.config)) namespaces[role] = roleNamespace(name, plan, role, secrets, child);
    return namespaces;
}

/** One role's namespace (a team's is the cluster stack's), its pull Secret and its default-deny rule; the name once the Secret exists. */
function roleNamespace(name: string, plan: PlatformPlan, role: Role, secrets: PlatformSecrets, child: pulumi.CustomResourceOptions): pulumi.Output<string> {
    const { config, names } = plan;
    const nsName = names.namespaces[role];
    // A team's namespaces are the cluster stack's (with their Pod Security labels and default-deny policy).
    const ns = config.target.kind === "kubernetes" && config.target.team !== undefined ? undefined : namespaceObject(name, plan, role, child);
    const nsRef: pulumi.Input<string> = ns ? ns.metadata.name : nsName;
    // The registry credentials, in every namespace the stack makes (a Secret named elsewhere
    // cannot exist before the first up). Every object given the namespace below waits for it.
    const registryAuth = secrets.registryAuth;
    const pullSecret = registryAuth
        ? new k8s.core.v1.Secret(
              `${name}-ns-${role}-pull`,
              {
                  metadata: { name: names.pullSecret, namespace: nsRef, labels: { "app.kubernetes.io/part-of": "agent-rl-infra" } },
                  type: "kubernetes.io/dockerconfigjson",
                  stringData: { ".dockerconfigjson": pulumi.secret(registryAuth.dockerConfigJson) },
              },
              child,
          )
        : undefined;
    const ref = pullSecret ? pulumi.all([nsRef, pullSecret.metadata.name]).apply(([n]) => n) : pulumi.output(nsRef);
    // A standing rule, created with the namespace and outliving runs: no pod in it admits
    // anything its own policies do not (an old run's pod included). A team's is the cluster stack's.
    if (ns)
        new k8s.networking.v1.NetworkPolicy(
            `${name}-ns-${role}-default-deny`,
            {
                metadata: { name: "default-deny-ingress", namespace: ns.metadata.name, labels: { "app.kubernetes.io/part-of": "agent-rl-infra" } },
                spec: defaultDenyIngressSpec(),
            },
            child,
        );
    return ref;
}

/** The Namespace object of a role, labelled for the stack, its role and Pod Security. */
function namespaceObject(name: string, plan: PlatformPlan, role: Role, child: pulumi.CustomResourceOptions): k8s.core.v1.Namespace {
    const names = plan.names;
    // The training namespace holds the checkpoint volume, which outlives the stack: it is
    // kept on `destroy` (deleting a namespace deletes its claims) and adopted by the next
    // `up`. The stack's other objects in it are deleted one by one.
    const keep = role === "training";
    return new k8s.core.v1.Namespace(
        `${name}-ns-${role}`,
        {
            metadata: {
                name: names.namespaces[role],
                ...(keep ? { annotations: { ...ADOPT } } : {}),
                labels: {
                    "app.kubernetes.io/part-of": "agent-rl-infra",
                    [ROLE_LABEL]: role,
                    "agentrl.dev/stack": names.prefix,
                    ...podSecurityLabels(role),
                },
            },
        },
        { ...child, retainOnDelete: keep },
    );
}

/** Docker: the training network, which reaches the internet (model downloads); no sandbox runs on Docker (config/sandbox-providers.ts). */
function dockerNetworks(name: string, plan: PlatformPlan, child: pulumi.CustomResourceOptions): Record<string, pulumi.Output<string>> {
    const names = plan.names;
    const namespaces: Record<string, pulumi.Output<string>> = {};
    const training = new docker.Network(`${name}-net-training`, { name: names.networks.training, driver: "bridge", internal: false }, child);
    namespaces.training = training.name;
    return namespaces;
}
