/**
 * agentrl:index:Platform, the one top-level component. Phase one (`resolvePlatform`, pure)
 * checks the config and resolves every component's description; only when all of it holds
 * does phase two (this constructor) register resources, so a failed check never leaves a
 * half-deployed stack.
 */
import * as pulumi from "@pulumi/pulumi";
import type { ClaimRecords } from "../config/claims";
import type { PlatformSecrets } from "../config/load";
import type { Demand } from "../config/types";
import type { EnvCapacity } from "../env/model";
import { podLabels } from "../config/names";
import { EnvSpace } from "../env";
import { VllmIngress } from "../ingress";
import { SandboxPool } from "../sandbox";
import { TrainingNode } from "../training";
import { Monitors } from "../monitoring";
import type { PlatformPlan } from "./model";
import { Observability } from "../observability";
import { observabilityObjectNames, observedStack } from "./observability";
import { registerNamespaces } from "./namespaces";

export interface PlatformArgs {
    /** The resolved plan (from `resolvePlatform`): config, names and component descriptions. */
    readonly plan: PlatformPlan;
    /** The stack's secrets, as secret outputs. */
    readonly secrets: PlatformSecrets;
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
        const { plan, secrets } = args;
        const child = { parent: this };
        // Say loudly what the stack relies on but does not create (plan.md lists the same).
        for (const p of plan.prerequisites) pulumi.log.info(`prerequisite: ${p.what} (${p.field}); otherwise ${p.otherwise}; check: ${p.check}`, this);
        this.namespaces = registerNamespaces(name, plan, secrets, child);
        // Creation order, one way: vLLM's Service (Kubernetes) or container (Docker) -> the ingress
        // proxy (awaited Ready) -> the trainer. The ingress component is built first because its
        // sandbox key reaches the trainer and the sandboxes; its proxy waits for vLLM's upstream,
        // which the TrainingNode (built below) registers, through this promise.
        let upstreamRegistered: (r: pulumi.Resource | undefined) => void = () => undefined;
        const upstreamReady = new Promise<pulumi.Resource | undefined>((resolve) => (upstreamRegistered = resolve));
        const ingress = registerIngress(name, plan, secrets, this.namespaces, upstreamReady, child);
        const pool = registerSandboxPool(name, plan, ingress, this.namespaces, child);
        // Env servers before the trainer, which opens sessions against them as it starts.
        const envSpaces = registerEnvSpaces(name, plan, this.namespaces, child);
        const training = registerTraining(name, plan, secrets, this.namespaces, { envSpaces, pool, ingress }, child);
        upstreamRegistered(training.upstream);
        registerMonitors(name, plan, this.namespaces, child);
        this.observability = registerObservability(name, plan, this.namespaces, child);
        this.training = training;
        this.ingress = ingress;
        this.sandboxes = pool;
        this.envs = Object.fromEntries(envSpaces.map((e, i) => [plan.envs[i].name, e]));
        this.outputs = platformOutputs(plan, this.namespaces, { training, ingress, pool, envSpaces, observability: this.observability });
        this.registerOutputs({ ...this.outputs });
    }
}

type Namespaces = Record<string, pulumi.Output<string>>;
type Child = pulumi.ComponentResourceOptions;

/** The authenticated vLLM ingress (black box, or when enabled); its proxy waits for `upstreamReady`. */
function registerIngress(
    name: string,
    plan: PlatformPlan,
    secrets: PlatformSecrets,
    namespaces: Namespaces,
    upstreamReady: Promise<pulumi.Resource | undefined>,
    child: Child,
): VllmIngress | undefined {
    if (!plan.ingress) return undefined;
    return new VllmIngress(
        `${name}-ingress`,
        {
            description: plan.ingress,
            suppliedKeys: secrets.ingressKeys,
            namespace: namespaces.ingress,
            networks: plan.config.target.kind === "docker" ? { training: namespaces.training } : undefined,
            upstreamReady,
        },
        child,
    );
}

/** The sandbox pool (black box), reaching vLLM through the ingress with its sandbox key. */
function registerSandboxPool(
    name: string,
    plan: PlatformPlan,
    ingress: VllmIngress | undefined,
    namespaces: Namespaces,
    child: Child,
): SandboxPool | undefined {
    if (!plan.sandboxes) return undefined;
    if (ingress === undefined) throw new pulumi.RunError("sandboxes reach vLLM through the ingress: enable the ingress");
    // Per-rollout keys (agent-sandbox): the ingress has no shared sandbox key, and the pool renders none.
    const sandboxKey = ingress.sandboxKey;
    const names = plan.names;
    return new SandboxPool(
        `${name}-sandboxes`,
        {
            description: plan.sandboxes,
            ...(sandboxKey !== undefined ? { sandboxKey } : {}),
            ingress: ingress.peer,
            trainer: {
                serviceAccount: names.training.serviceAccount,
                namespace: names.namespaces.training,
                podLabels: podLabels("trainer", names.training.job),
            },
            namespace: namespaces.sandboxes,
        },
        child,
    );
}

/** One EnvSpace per env description (on Docker in the training network). */
function registerEnvSpaces(name: string, plan: PlatformPlan, namespaces: Namespaces, child: Child): EnvSpace[] {
    return plan.envs.map(
        (description) =>
            new EnvSpace(
                `${name}-env-${description.name}`,
                { description, namespace: namespaces.envs, network: plan.config.target.kind === "docker" ? namespaces.training : undefined },
                child,
            ),
    );
}

/** What the trainer waits for: the env servers, the sandbox pool and the ingress. */
interface TrainerPeers {
    readonly envSpaces: readonly EnvSpace[];
    readonly pool: SandboxPool | undefined;
    readonly ingress: VllmIngress | undefined;
}

/** The training node (vLLM and the trainer), registered after everything it opens as it starts. */
function registerTraining(name: string, plan: PlatformPlan, secrets: PlatformSecrets, namespaces: Namespaces, peers: TrainerPeers, child: Child): TrainingNode {
    const { envSpaces, pool, ingress } = peers;
    return new TrainingNode(
        `${name}-training`,
        {
            description: plan.training,
            hfToken: secrets.hfToken,
            // agent-sandbox pools on Kubernetes: the trainer mints per-rollout keys at the verifier (docs/design/rollout-keys.md).
            rolloutAdminKey: ingress?.rolloutAdminKey,
            envSecrets: secrets.envSecrets,
            namespace: namespaces.training,
            network: plan.config.target.kind === "docker" ? namespaces.training : undefined,
            // The trainer opens env sessions, claims sandboxes (through its Role) and hands them the
            // ingress URL as it starts.
            waitFor: [...envSpaces, ...(pool ? [pool] : []), ...(ingress ? [ingress] : [])],
        },
        child,
    );
}

/** observability (form operator): a PodMonitor per scraped pod group, in that group's namespace. */
function registerMonitors(name: string, plan: PlatformPlan, namespaces: Namespaces, child: Child): void {
    const { config, names } = plan;
    if (!(config.target.kind === "kubernetes" && plan.monitoring && plan.monitoring.podMonitors.length > 0)) return;
    const byName = Object.fromEntries(
        (Object.keys(namespaces) as Array<keyof typeof names.namespaces>).map((role) => [names.namespaces[role], namespaces[role]!]),
    );
    new Monitors(`${name}-monitors`, { description: plan.monitoring, namespaces: byName }, child);
}

/** The run's alert rules and dashboard (Kubernetes objects; on Docker files only: npm run plan). */
function registerObservability(name: string, plan: PlatformPlan, namespaces: Namespaces, child: Child): Observability | undefined {
    const { config, names } = plan;
    if (!config.observability.enabled) return undefined;
    const observed = {
        settings: config.observability,
        stack: observedStack(plan),
        target: config.target.kind,
        names: observabilityObjectNames(names),
        dockerTargets: plan.dockerMetrics,
    };
    return new Observability(`${name}-observability`, { ...observed, namespace: namespaces.training }, child);
}

/** The components the Platform registered, for its outputs. */
interface Registered {
    readonly training: TrainingNode;
    readonly ingress: VllmIngress | undefined;
    readonly pool: SandboxPool | undefined;
    readonly envSpaces: readonly EnvSpace[];
    readonly observability: Observability | undefined;
}

/** The stack's outputs (index.ts returns them). */
function platformOutputs(plan: PlatformPlan, namespaces: Namespaces, registered: Registered): PlatformOutputs {
    const { config } = plan;
    const { training, ingress, pool, envSpaces, observability } = registered;
    return {
        target: config.target.kind,
        layout: config.training.layout,
        runId: config.runId,
        namespaces,
        demand: config.demand,
        trainingJob: training.jobName,
        // Read back by the next up (previous.ts) to refuse a claim change Kubernetes cannot apply.
        ...(config.target.kind === "kubernetes" ? { claims: training.claims } : {}),
        vllmInternalUrl: training.internalUrl,
        gpuLayout: training.gpuLayout,
        envs: Object.fromEntries(envSpaces.map((e, i) => [plan.envs[i].name, { url: e.url, wsUrl: e.wsUrl, capacity: e.capacity }])),
        ...(ingress ? { sandboxUrl: ingress.sandboxUrl, ingressKeys: pulumi.secret(pulumi.output(ingress.keys)) } : {}),
        // Docker: prometheus.yml for a Prometheus on the host (docs/guides/observability.md; npm run plan writes it with the rules beside it).
        ...(observability?.prometheusConfigText !== undefined ? { prometheusConfig: observability.prometheusConfigText } : {}),
        ...(plan.sandboxes ? { sandboxPool: { provider: plan.sandboxes.provider, size: plan.sandboxes.poolSize, trainerEnv: pool?.trainerEnv ?? {} } } : {}),
    };
}
