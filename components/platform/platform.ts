/**
 * agentrl:index:Platform, the one top-level component. Phase one (`resolvePlatform`, pure)
 * checks the config and resolves every component's description; only when all of it holds
 * does phase two (this constructor) register resources, so a failed check never leaves a
 * half-deployed stack.
 */
import * as docker from "@pulumi/docker";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { ClaimRecords } from "../config/claims";
import type { PlatformSecrets } from "../config/load";
import type { Demand } from "../config/resolve";
import type { EnvCapacity } from "../env/model";
import { podLabels } from "../config/names";
import { podSecurityLabels, ROLE_LABEL } from "../config/tenancy";
import { EnvSpace } from "../env";
import { VllmIngress } from "../ingress";
import { SandboxPool } from "../sandbox";
import { TrainingNode } from "../training";
import { Monitors } from "../monitoring";
import { ADOPT, defaultDenyIngressSpec } from "../shared/kubernetes";
import type { PlatformPlan } from "./resolve";
import { Observability } from "../observability";
import { observabilityObjectNames, observedStack } from "./observability";

export interface PlatformArgs {
    /** The resolved plan (from `resolvePlatform`): config, names and component descriptions. */
    readonly plan: PlatformPlan;
    /** The stack's secrets, as secret outputs. */
    readonly secrets: PlatformSecrets;
}

/**
 * The roles whose namespace the stack makes (Kubernetes): training always; ingress, envs and
 * sandboxes only where something of this stack runs in them (a white-box run has no ingress or
 * sandboxes, an external env deploys nothing, hosted sandboxes run elsewhere).
 */
export function namespaceRoles(config: PlatformPlan["config"]): Array<keyof PlatformPlan["names"]["namespaces"]> {
    return [
        "training" as const,
        ...(config.ingress.enabled ? (["ingress"] as const) : []),
        ...(config.envs.some((e) => e.external === undefined) ? (["envs"] as const) : []),
        ...(config.sandboxes.provider === "agent-sandbox" ? (["sandboxes"] as const) : []),
    ];
}

/** What the Platform exports (index.ts returns it as the stack's outputs). */
export interface PlatformOutputs {
    readonly target: "kubernetes" | "docker";
    readonly layout: string;
    readonly runId: string;
    /** Namespaces by role (Kubernetes) or network names (Docker). */
    readonly namespaces: Record<string, pulumi.Output<string>>;
    readonly demand: Demand;
    /** The run's Job name (Kubernetes) / trainer container name (Docker). */
    readonly trainingJob: pulumi.Output<string>;
    /** Kubernetes: the stack-wide claims as made (read back by the next up: previous.ts). */
    readonly claims?: pulumi.Output<ClaimRecords>;
    readonly vllmInternalUrl: pulumi.Output<string>;
    readonly gpuLayout: { readonly vllm: readonly number[]; readonly trainer: readonly number[] };
    /** Per env server: its URLs and capacity. */
    readonly envs: Record<string, { url: pulumi.Output<string>; wsUrl: pulumi.Output<string>; capacity: EnvCapacity }>;
    /** With the ingress: the sandboxes' URL of vLLM, and every ingress key (secret). */
    readonly sandboxUrl?: pulumi.Output<string>;
    readonly ingressKeys?: pulumi.Output<Record<string, string>>;
    /** With sandboxes: the pool and the env the trainer gets. */
    readonly sandboxPool?: { provider: string; size: number; trainerEnv: Record<string, string> };
    /** Docker with observability: prometheus.yml for a Prometheus on the host (its rule_files: agentrl-rules.yaml beside it). */
    readonly prometheusConfig?: string;
}

export class Platform extends pulumi.ComponentResource {
    /** Namespaces by role (Kubernetes) or network names (Docker). */
    public readonly namespaces: Record<string, pulumi.Output<string>>;
    /** The training node (vLLM and the trainer). */
    public readonly training: TrainingNode;
    /** The authenticated vLLM ingress (black box, or when enabled). */
    public readonly ingress: VllmIngress | undefined;
    /** The sandbox pool (black box). */
    public readonly sandboxes: SandboxPool | undefined;
    /** The env servers by name. */
    public readonly envs: Readonly<Record<string, EnvSpace>>;
    /** Stack outputs (URLs, secret keys, plan facts). */
    public readonly outputs: PlatformOutputs;
    /** observability.enabled: the run's alert rules and dashboard. */
    public readonly observability?: Observability;

    constructor(name: string, args: PlatformArgs, opts?: pulumi.ComponentResourceOptions) {
        super("agentrl:index:Platform", name, {}, opts);
        const { plan } = args;
        const { config, names } = plan;
        const child = { parent: this };
        // Say loudly what the stack relies on but does not create (plan.md lists the same).
        for (const p of plan.prerequisites) pulumi.log.info(`prerequisite: ${p.what} (${p.field}); otherwise ${p.otherwise}; check: ${p.check}`, this);
        this.namespaces = {};
        if (config.target.kind === "kubernetes") {
            const team = config.target.team !== undefined;
            for (const role of namespaceRoles(config)) {
                const nsName = names.namespaces[role];
                // The training namespace holds the checkpoint volume, which outlives the stack: it is
                // kept on `destroy` (deleting a namespace deletes its claims) and adopted by the next
                // `up`. The stack's other objects in it are deleted one by one.
                const keep = role === "training";
                // A team's namespaces are the cluster stack's (with their Pod Security labels and default-deny policy).
                const ns = team
                    ? undefined
                    : new k8s.core.v1.Namespace(
                          `${name}-ns-${role}`,
                          {
                              metadata: {
                                  name: nsName,
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
                const nsRef: pulumi.Input<string> = ns ? ns.metadata.name : nsName;
                // The registry credentials, in every namespace the stack makes (a Secret named elsewhere
                // cannot exist before the first up). Every object given the namespace below waits for it.
                const registryAuth = args.secrets.registryAuth;
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
                this.namespaces[role] = pullSecret ? pulumi.all([nsRef, pullSecret.metadata.name]).apply(([n]) => n) : pulumi.output(nsRef);
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
            }
        } else {
            // The training network reaches the internet (model downloads); the sandbox network is
            // internal: its only other member is the ingress proxy.
            const training = new docker.Network(`${name}-net-training`, { name: names.networks.training, driver: "bridge", internal: false }, child);
            this.namespaces.training = training.name;
            if (plan.config.sandboxes.provider === "docker") {
                const sandboxes = new docker.Network(`${name}-net-sandboxes`, { name: names.networks.sandboxes, driver: "bridge", internal: true }, child);
                this.namespaces.sandboxes = sandboxes.name;
            }
        }

        // Creation order, one way: vLLM's Service (Kubernetes) or container (Docker) -> the ingress
        // proxy (awaited Ready) -> the trainer. The ingress component is built first because its
        // sandbox key reaches the trainer and the sandboxes; its proxy waits for vLLM's upstream,
        // which the TrainingNode (built below) registers, through this promise.
        let upstreamRegistered: (r: pulumi.Resource | undefined) => void = () => undefined;
        const upstreamReady = new Promise<pulumi.Resource | undefined>((resolve) => (upstreamRegistered = resolve));
        const ingress = plan.ingress
            ? new VllmIngress(
                  `${name}-ingress`,
                  {
                      description: plan.ingress,
                      suppliedKeys: args.secrets.ingressKeys,
                      namespace: this.namespaces.ingress,
                      networks: config.target.kind === "docker" ? { training: this.namespaces.training, sandboxes: this.namespaces.sandboxes } : undefined,
                      upstreamReady,
                  },
                  child,
              )
            : undefined;
        const sandboxKey = ingress?.sandboxKey;

        let sandboxEnv: Record<string, string> = {};
        let pool: SandboxPool | undefined;
        if (plan.sandboxes) {
            if (sandboxKey === undefined) throw new pulumi.RunError("sandboxes need the ingress's sandbox key: enable the ingress");
            pool = new SandboxPool(
                `${name}-sandboxes`,
                {
                    description: plan.sandboxes,
                    sandboxKey,
                    ingress: ingress!.peer,
                    trainer: {
                        serviceAccount: names.training.serviceAccount,
                        namespace: names.namespaces.training,
                        podLabels: podLabels("trainer", names.training.job),
                    },
                    namespace: this.namespaces.sandboxes,
                    network: this.namespaces.sandboxes,
                },
                child,
            );
            sandboxEnv = pool.trainerEnv;
        }

        // Env servers before the trainer, which opens sessions against them as it starts.
        const envSpaces = plan.envs.map(
            (description) =>
                new EnvSpace(
                    `${name}-env-${description.name}`,
                    { description, namespace: this.namespaces.envs, network: config.target.kind === "docker" ? this.namespaces.training : undefined },
                    child,
                ),
        );

        const training = new TrainingNode(
            `${name}-training`,
            {
                description: plan.training,
                hfToken: args.secrets.hfToken,
                sandboxKey,
                namespace: this.namespaces.training,
                network: config.target.kind === "docker" ? this.namespaces.training : undefined,
                // The trainer opens env sessions, claims sandboxes (through its Role) and hands them the
                // ingress URL as it starts.
                waitFor: [...envSpaces, ...(pool ? [pool] : []), ...(ingress ? [ingress] : [])],
            },
            child,
        );
        upstreamRegistered(training.upstream);

        // observability (form operator): a PodMonitor per scraped pod group, in that group's namespace.
        if (config.target.kind === "kubernetes" && plan.monitoring && plan.monitoring.podMonitors.length > 0) {
            const byName = Object.fromEntries(
                (Object.keys(this.namespaces) as Array<keyof typeof names.namespaces>).map((role) => [names.namespaces[role], this.namespaces[role]!]),
            );
            new Monitors(`${name}-monitors`, { description: plan.monitoring, namespaces: byName }, child);
        }
        // The run's alert rules and dashboard (Kubernetes objects; on Docker files only: npm run plan).
        if (config.observability.enabled) {
            const observed = {
                settings: config.observability,
                stack: observedStack(plan),
                target: config.target.kind,
                names: observabilityObjectNames(names),
                dockerTargets: plan.dockerMetrics,
            };
            this.observability = new Observability(`${name}-observability`, { ...observed, namespace: this.namespaces.training }, child);
        }
        this.training = training;
        this.ingress = ingress;
        this.sandboxes = pool;
        this.envs = Object.fromEntries(envSpaces.map((e, i) => [plan.envs[i].name, e]));

        this.outputs = {
            target: config.target.kind,
            layout: config.training.layout,
            runId: config.runId,
            namespaces: this.namespaces,
            demand: config.demand,
            trainingJob: training.jobName,
            // Read back by the next up (previous.ts) to refuse a claim change Kubernetes cannot apply.
            ...(config.target.kind === "kubernetes" ? { claims: training.claims } : {}),
            vllmInternalUrl: training.internalUrl,
            gpuLayout: training.gpuLayout,
            envs: Object.fromEntries(envSpaces.map((e, i) => [plan.envs[i].name, { url: e.url, wsUrl: e.wsUrl, capacity: e.capacity }])),
            ...(ingress ? { sandboxUrl: ingress.sandboxUrl, ingressKeys: pulumi.secret(pulumi.output(ingress.keys)) } : {}),
            // Docker: prometheus.yml for a Prometheus on the host (README "Observability"; npm run plan writes it with the rules beside it).
            ...(this.observability?.prometheusConfigText !== undefined ? { prometheusConfig: this.observability.prometheusConfigText } : {}),
            ...(plan.sandboxes ? { sandboxPool: { provider: plan.sandboxes.provider, size: plan.sandboxes.poolSize, trainerEnv: sandboxEnv } } : {}),
        };
        this.registerOutputs({ ...this.outputs });
    }
}
