/**
 * Phase one of the Platform: pure, no resources. Computes every name and address, then
 * every component's target-neutral description; any problem anywhere ends the run here,
 * all problems together, before the first resource is registered.
 */
import { refusedProviderProblems, runsSandboxPool } from "../config/sandbox-providers";
import { ConfigError } from "../config/errors";
import { tenantQuotaProblems } from "./tenancy";
import { platformNames, validateNames, type PlatformNames } from "../config/names";
import type { PlatformConfig } from "../config/types";
import { resolveEnvSpace, type EnvDescription } from "../env";
import { resolveVllmIngress, type IngressDescription } from "../ingress";
import { resolveSandboxPool, type SandboxDescription } from "../sandbox";
import { resolveTrainingNode, type EgressPeer, type TrainingDescription, type TrainingLinks } from "../training";
import type { MetricsLinks, ScrapedPods } from "../shared/metrics-pods";
import { resolveMonitoring, type MonitoringDescription } from "../monitoring";
import { projectMetricsPrograms } from "./observability";
import { dockerMetricsPortProblems, dockerMetricsTargets } from "./docker-metrics";
import type { DockerMetricsTarget } from "../shared/docker-metrics";
import type { PlatformPlan, PlatformResolveOptions, SecretPresence } from "./model";
import { externalPrerequisites } from "./prerequisites";
import { platformWarnings } from "./warnings";

/** Runs `step`, collecting its ConfigError problems instead of stopping at the first component. */
function collect<T>(problems: string[], step: () => T): T | undefined {
    try {
        return step();
    } catch (e) {
        if (e instanceof ConfigError) {
            problems.push(...e.problems);
            return undefined;
        }
        throw e;
    }
}

/** Every component's description, each undefined where its resolve step found problems (added to `problems`). */
interface Resolved {
    readonly envs: ReadonlyArray<EnvDescription | undefined>;
    readonly ingress?: IngressDescription;
    readonly sandboxes?: SandboxDescription;
    readonly training?: TrainingDescription;
}

/** Every component's description, all resolved without a problem. */
interface Described {
    readonly envs: readonly EnvDescription[];
    readonly ingress?: IngressDescription;
    readonly sandboxes?: SandboxDescription;
    readonly training: TrainingDescription;
}

export function resolvePlatform(config: PlatformConfig, secrets: SecretPresence = { hfToken: false }, options: PlatformResolveOptions = {}): PlatformPlan {
    const names = platformNames(config);
    // A refused provider renders nothing: its reason alone, not what the components would miss without it.
    const refused = refusedProviderProblems(config);
    if (refused.length > 0) throw new ConfigError(refused);
    const problems = [...validateNames(names)];
    const metrics = metricsLinks(config, names, options);
    const warnings = platformWarnings(config, names);
    const resolved = resolveComponents(config, names, metrics, problems);
    problems.push(...tenantQuotaProblems(config, resolved.sandboxes));
    problems.push(...secretProblems(resolved.training, secrets));
    const envs = resolved.envs.filter((e): e is EnvDescription => e !== undefined);
    const dockerMetrics = dockerMetricsChecked(config, names, resolved.training, resolved.ingress, envs, problems);
    const training = resolved.training;
    if (problems.length > 0 || training === undefined) throw new ConfigError(problems);
    return assemblePlan(config, names, secrets, { ...resolved, envs, training }, dockerMetrics, warnings);
}

/** observability: who scrapes (the policies admit it on the metrics ports) and what the sidecars run. */
function metricsLinks(config: PlatformConfig, names: PlatformNames, options: PlatformResolveOptions): MetricsLinks | undefined {
    if (!config.observability.enabled) return undefined;
    return {
        scraper: { ...config.observability.scraper },
        programs: options.metricsPrograms ?? projectMetricsPrograms(),
        annotations: config.observability.form === "annotations",
        stack: names.prefix,
    };
}

/** Each component's resolve step, in order: envs, ingress, sandboxes, then the training node that links them. */
function resolveComponents(config: PlatformConfig, names: PlatformNames, metrics: MetricsLinks | undefined, problems: string[]): Resolved {
    const envs = config.envs.map((env) => collect(problems, () => resolveEnvSpace(config, env, names, metrics)));
    const ingress = config.ingress.enabled ? collect(problems, () => resolveVllmIngress(config, names, metrics)) : undefined;
    const sandboxes = runsSandboxPool(config) ? collect(problems, () => resolveSandboxPool(config, names)) : undefined;
    const envUrls = Object.fromEntries(Object.entries(names.envs).map(([env, n]) => [env, n.url]));
    const egressPeers = trainerEgressPeers(envs, ingress, sandboxes);
    const training = collect(problems, () =>
        resolveTrainingNode(config, names, {
            envUrls,
            sandbox: sandboxes ? sandboxLink(names, ingress, sandboxes, problems) : undefined,
            egressPeers,
            metrics,
        }),
    );
    return { envs, ingress, sandboxes, training };
}

/**
 * What the trainer gets of the sandbox pool. Agent-sandbox pools on Kubernetes: the ingress renders the per-rollout
 * key verifier and the pool's forwarders take a key on their delivery port, so the trainer mints one per claim
 * (docs/design/rollout-keys.md): the verifier's admin URL beside the pool's env, and its admin key as a secret.
 */
function sandboxLink(
    names: PlatformNames,
    ingress: IngressDescription | undefined,
    sandboxes: SandboxDescription,
    problems: string[],
): NonNullable<TrainingLinks["sandbox"]> {
    const base = { url: names.ingress.sandboxUrl, trainerEnv: sandboxes.trainerEnv };
    const verifier = ingress?.rolloutKeys;
    const keyPort = sandboxes.forwarder.keyPort;
    if ((verifier === undefined) !== (keyPort === undefined)) {
        // Both sides are decided by the same rule (config/sandbox-providers.ts takesRolloutKeys); a drift would leave keys unminted or undeliverable.
        problems.push(
            `sandboxes: the rollout-key verifier is ${verifier ? "rendered" : "not rendered"} but the forwarders ${keyPort ? "take" : "do not take"} a rollout key: both or neither`,
        );
        return base;
    }
    if (verifier === undefined) return base;
    return { ...base, trainerEnv: { ...sandboxes.trainerEnv, SANDBOX_ROLLOUT_KEYS_URL: verifier.adminUrl }, mintsRolloutKeys: true };
}

/** Who the trainer talks to inside the stack (its egress allow-list on Kubernetes). */
function trainerEgressPeers(envs: Resolved["envs"], ingress: IngressDescription | undefined, sandboxes: SandboxDescription | undefined): EgressPeer[] {
    const egressPeers: EgressPeer[] = [];
    for (const e of envs) {
        if (e?.kind === "deployed")
            egressPeers.push({ what: `env ${e.name} router`, namespace: e.namespace, podLabels: e.router.podLabels, port: e.router.port });
    }
    if (ingress) egressPeers.push({ what: "vLLM ingress", ...ingress.peer });
    // The per-rollout key verifier's admin port: the trainer mints and revokes there (its NetworkPolicy admits only the trainer).
    const verifier = ingress?.rolloutKeys;
    if (verifier)
        egressPeers.push({ what: "rollout key verifier", namespace: ingress.names.namespace, podLabels: verifier.podLabels, port: verifier.adminPort });
    if (sandboxes) {
        egressPeers.push({ what: "sandboxes", namespace: sandboxes.names.namespace, podLabels: sandboxes.labels, port: sandboxes.port });
        // The forwarders' trace port (docs/design/sandbox-trust.md): the trainer reads the training trace there.
        egressPeers.push({ what: "sandbox traces", namespace: sandboxes.names.namespace, podLabels: sandboxes.labels, port: sandboxes.forwarder.tracePort });
        // The forwarders' one-time rollout-key port (docs/design/rollout-keys.md): the trainer hands each claim its key there.
        const keyPort = sandboxes.forwarder.keyPort;
        if (keyPort !== undefined)
            egressPeers.push({ what: "sandbox rollout keys", namespace: sandboxes.names.namespace, podLabels: sandboxes.labels, port: keyPort });
    }
    return egressPeers;
}

/** The secrets the descriptions need that the stack does not have. */
function secretProblems(training: TrainingDescription | undefined, secrets: SecretPresence): string[] {
    if (training?.requiredSecrets.includes("hfToken") && !secrets.hfToken) {
        return ["hfToken: training.hubRepoId pushes to the Hub, which needs a token: pulumi config set --secret hfToken hf_..."];
    }
    return [];
}

/** Docker: the host ports of the metrics targets (observability.hostPortBase), checked before anything registers. */
function dockerMetricsChecked(
    config: PlatformConfig,
    names: PlatformNames,
    training: TrainingDescription | undefined,
    ingress: IngressDescription | undefined,
    envs: readonly EnvDescription[],
    problems: string[],
): DockerMetricsTarget[] {
    if (training === undefined) return [];
    const dockerMetrics = dockerMetricsTargets({ config, names, training, ingress, envs });
    problems.push(...dockerMetricsPortProblems({ config, names, training, ingress, envs }, dockerMetrics));
    return dockerMetrics;
}

/** Every pod group a component declares metrics ports for, in one list (the monitors, plan.md, Docker's prometheus.yml). */
function monitoringOf(config: PlatformConfig, { training, ingress, envs }: Described): MonitoringDescription | undefined {
    const scraped: ScrapedPods[] = [
        ...(training.metrics?.scraped ?? []),
        ...(ingress?.metrics?.scraped ?? []),
        ...envs.flatMap((e) => (e.kind === "deployed" ? (e.metrics?.scraped ?? []) : [])),
    ];
    return config.observability.enabled ? resolveMonitoring(config.observability, scraped) : undefined;
}

/** The plan: each description with the stack's pull credentials and, on Docker, the metrics ports its containers publish. */
function assemblePlan(
    config: PlatformConfig,
    names: PlatformNames,
    secrets: SecretPresence,
    described: Described,
    dockerMetrics: readonly DockerMetricsTarget[],
    warnings: readonly string[],
): PlatformPlan {
    const { training, ingress, sandboxes, envs } = described;
    const published = (container: string) => dockerMetrics.filter((t) => t.container === container);
    // Every pod the stack renders pulls with the stack's registry credentials (one Secret per namespace, made by the Platform).
    const pull = config.target.kind === "kubernetes" && secrets.registryAuth !== undefined ? { imagePullSecrets: [names.pullSecret] } : {};
    return {
        config,
        names,
        monitoring: monitoringOf(config, described),
        training: { ...training, ...pull, ...(dockerMetrics.length > 0 && training.vllm ? { dockerMetrics: published(training.vllm.dockerName) } : {}) },
        envs: envs.map((e) =>
            e.kind === "deployed" ? { ...e, ...pull, ...(dockerMetrics.length > 0 ? { dockerMetrics: published(e.router.service) } : {}) } : e,
        ),
        ingress: ingress ? { ...ingress, ...pull, ...(dockerMetrics.length > 0 ? { dockerMetrics: published(ingress.names.container) } : {}) } : undefined,
        dockerMetrics,
        sandboxes: sandboxes ? { ...sandboxes, ...pull } : undefined,
        registryAuth: secrets.registryAuth,
        warnings,
        prerequisites: externalPrerequisites(config, names),
    };
}
