/**
 * Phase one of the Platform: pure, no resources. Computes every name and address, then
 * every component's target-neutral description; any problem anywhere ends the run here,
 * all problems together, before the first resource is registered.
 */
import { SANDBOX_CONTROLLER_LABEL } from "../config/cluster";
import { ConfigError } from "../config/parse";
import { tenantQuotaProblems } from "./tenancy";
import { programWarnings } from "../config/program-rules";
import { placeholderImageWarnings } from "../config/validate";
import { platformNames, validateNames, type PlatformNames } from "../config/names";
import type { PlatformConfig } from "../config/resolve";
import { resolveEnvSpace, type EnvDescription } from "../env";
import { resolveVllmIngress, type IngressDescription } from "../ingress";
import { AGENT_SANDBOX_VERSION, resolveSandboxPool, type SandboxDescription } from "../sandbox";
import { resolveTrainingNode, type EgressPeer, type TrainingDescription } from "../training";
import type { MetricsLinks, MetricsPrograms, ScrapedPods } from "../shared/metrics-pods";
import { resolveMonitoring, type MonitoringDescription } from "../monitoring";
import { projectMetricsPrograms } from "./observability";
import { dockerMetricsPortProblems, dockerMetricsTargets } from "./docker-metrics";
import type { DockerMetricsTarget } from "../shared/docker-metrics";

/** Which secrets the stack has (their values stay secret outputs; only presence matters here). */
export interface SecretPresence {
    readonly hfToken: boolean;
    /** The registries the registryAuth secret names, when it is set: every pod of the stack pulls with it (Kubernetes: names.pullSecret). @default undefined */
    readonly registryAuth?: readonly string[];
}

export interface PlatformPlan {
    /** The registries the stack's registryAuth secret names (undefined: no registry credentials, node credentials only). */
    readonly registryAuth?: readonly string[];
    readonly config: PlatformConfig;
    readonly names: PlatformNames;
    readonly training: TrainingDescription;
    /** One description per env server (deployed or external). */
    readonly envs: readonly EnvDescription[];
    /** The authenticated vLLM ingress, for black-box runs. */
    readonly ingress?: IngressDescription;
    /** The sandbox pool, for black-box runs. */
    readonly sandboxes?: SandboxDescription;
    /** observability.enabled: every scraped pod group and, on Kubernetes with form operator, its PodMonitor. */
    readonly monitoring?: MonitoringDescription;
    /** Docker, observability.enabled: every metrics port published on the host's loopback, prometheus.yml's targets. @default [] */
    readonly dockerMetrics: readonly DockerMetricsTarget[];
    /** Things the operator should know that are not errors (shown in the plan). */
    readonly warnings: readonly string[];
    /** What the stack uses but neither creates nor checks: named loudly in plan.md and at `pulumi up`. */
    readonly prerequisites: readonly Prerequisite[];
}

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

/** A cluster object or capability the stack refers to but does not create. */
export interface Prerequisite {
    /** What must exist. */
    readonly what: string;
    /** The config field that refers to it. */
    readonly field: string;
    /** What breaks, and how, if it is missing. */
    readonly otherwise: string;
    /** A command that checks it. */
    readonly check: string;
}

/** Every external reference of a config, each with the symptom of its absence and a check. */
export function externalPrerequisites(config: PlatformConfig, names: PlatformPlan["names"]): Prerequisite[] {
    const out: Prerequisite[] = [];
    const t = config.target;
    if (t.kind !== "kubernetes") {
        out.push({
            what: "the NVIDIA container runtime on the Docker host",
            field: "target.host",
            otherwise: "vLLM and the trainer fail to start (device request refused)",
            check: "docker info --format '{{json .Runtimes}}' (lists nvidia)",
        });
        return out;
    }
    const gpu = t.gpuResourceName;
    out.push({
        what: `the GPU device plugin (extended resource ${gpu})`,
        field: "target.gpuResourceName",
        otherwise: "the training pod stays Pending for ever",
        check: `kubectl get nodes -o custom-columns=NAME:.metadata.name,GPU:.status.allocatable.${gpu.replace(/\./g, "\\.")}`,
    });
    out.push({
        what: "a CNI that enforces NetworkPolicy (Calico, Cilium, ...)",
        field: "(every component)",
        otherwise: "every isolation rule is silently ignored: sandboxes and env replicas reach vLLM and the internet",
        check: "kubectl get pods -n kube-system (look for calico / cilium)",
    });
    if (t.priorityClassName !== undefined) {
        out.push({
            what: `PriorityClass ${t.priorityClassName}`,
            field: "target.priorityClassName",
            otherwise: "the Job gets no pod (admission refuses it; kubectl describe job shows why)",
            check: `kubectl get priorityclass ${t.priorityClassName}`,
        });
    }
    out.push({
        what: t.storageClassName !== undefined ? `StorageClass ${t.storageClassName}` : "a default StorageClass",
        field: "target.storageClassName",
        otherwise: "the model-cache and checkpoint claims stay Pending, and the training pod with them",
        check: t.storageClassName !== undefined ? `kubectl get storageclass ${t.storageClassName}` : "kubectl get storageclass (one marked (default))",
    });
    const training = config.training;
    if (training.nodes > 1) {
        out.push({
            what: "the JobSet v0.10.x controller and CRD (jobset.x-k8s.io/v1alpha2), with its webhooks",
            field: "training.nodes",
            otherwise:
                "`pulumi up` fails on the unknown JobSet kind, or, with the CRD but no controller, the trainer never gets a pod (and without its pod webhook two trainer pods may share a node)",
            check: "kubectl get crd jobsets.jobset.x-k8s.io && kubectl get deploy -A | grep jobset-controller (or npm run preflight)",
        });
        out.push({
            what: `${training.nodes + 1} GPU nodes with ${training.gpusOnNode} ${gpu} each (${training.nodes} for the trainer, one for vLLM), with TCP open between pods on every port (NCCL)`,
            field: "training.nodes",
            otherwise: "trainer pods stay Pending (one per node, all or none start), or NCCL hangs at the first collective when pods cannot reach each other",
            check: `kubectl get nodes -l nvidia.com/gpu.present=true -o custom-columns=NAME:.metadata.name,GPU:.status.allocatable.${gpu.replace(/\./g, "\\.")}`,
        });
        out.push({
            what: `ReadWriteMany volumes from ${t.storageClassName !== undefined ? `StorageClass ${t.storageClassName}` : "the default StorageClass"} (NFS, CephFS, Filestore, EFS, ...)`,
            field: "target.storageClassName",
            otherwise: "the model-cache and checkpoint claims stay Pending, and every trainer pod and vLLM with them",
            check:
                t.storageClassName !== undefined
                    ? `kubectl get storageclass ${t.storageClassName} -o jsonpath='{.provisioner}'`
                    : "kubectl get storageclass (the default's provisioner must support ReadWriteMany)",
        });
    }
    if (t.kueueQueue !== undefined) {
        out.push({
            what: `Kueue (with its ${training.nodes > 1 ? "jobset.x-k8s.io/jobset" : "batch/job"} integration) and LocalQueue ${t.kueueQueue} in ${names.namespaces.training}, pointing at a ClusterQueue with GPU quota`,
            field: "target.kueueQueue",
            otherwise: `the trainer's ${training.nodes > 1 ? "JobSet" : "Job"} stays suspended for ever (no pods)`,
            check: `kubectl -n ${names.namespaces.training} get localqueue ${t.kueueQueue}`,
        });
    }
    const sb = config.sandboxes;
    if (sb.provider === "agent-sandbox") {
        if (sb.runtimeClassName !== undefined) {
            out.push({
                what: `RuntimeClass ${sb.runtimeClassName} (and its handler on the nodes)`,
                field: "sandboxes.runtimeClassName",
                otherwise: "sandbox pods are refused and the warm pool never fills",
                check: `kubectl get runtimeclass ${sb.runtimeClassName}`,
            });
        }
        out.push({
            what: `the agent-sandbox ${AGENT_SANDBOX_VERSION} CRDs and controller`,
            field: config.clusterStack !== undefined ? `clusterStack (${config.clusterStack})` : "sandboxes.provider",
            otherwise: "`pulumi up` fails on the unknown SandboxTemplate kind, or, with the CRDs but no controller, the warm pool never fills",
            check: `kubectl get crd sandboxwarmpools.extensions.agents.x-k8s.io && kubectl get deploy -A -l ${SANDBOX_CONTROLLER_LABEL} (or npm run preflight)`,
        });
    }
    const tls = config.ingress.enabled ? config.ingress.tls : undefined;
    if (tls?.mode === "secret" && tls.secretName !== undefined) {
        out.push({
            what: `TLS Secret ${tls.secretName} in namespace ${names.namespaces.ingress} (which this stack creates: create the Secret after the first up, or let cert-manager issue it: tls.mode cert-manager)`,
            field: "ingress.tls.secretName",
            otherwise: "the proxy pods hang in ContainerCreating and `pulumi up` times out on the Deployment",
            check: `kubectl -n ${names.namespaces.ingress} get secret ${tls.secretName}`,
        });
    }
    if (tls?.mode === "cert-manager" && tls.issuer !== undefined) {
        out.push({
            what: `cert-manager and ${tls.issuer.kind} ${tls.issuer.name}`,
            field: "ingress.tls.issuer",
            otherwise: "`pulumi up` fails on the unknown Certificate kind, or the certificate is never issued and the proxy pods hang in ContainerCreating",
            check: `kubectl get ${tls.issuer.kind.toLowerCase()} ${tls.issuer.name}${tls.issuer.kind === "Issuer" ? ` -n ${names.namespaces.ingress}` : ""}`,
        });
    }
    if (config.ingress.enabled && config.ingress.exposure === "httproute" && config.ingress.gateway) {
        const g = config.ingress.gateway;
        out.push({
            what: `Gateway ${g.namespace}/${g.name} admitting routes from ${names.namespaces.ingress}`,
            field: "ingress.gateway",
            otherwise: "the HTTPRoute is never accepted: sandboxes get no route",
            check: `kubectl -n ${g.namespace} get gateway ${g.name}`,
        });
    }
    return out;
}

/** What resolvePlatform takes besides the config and the secrets. */
export interface PlatformResolveOptions {
    /** The metrics sidecars' programs (observability.enabled). @default the project's own, components/observability */
    readonly metricsPrograms?: MetricsPrograms;
}

export function resolvePlatform(config: PlatformConfig, secrets: SecretPresence = { hfToken: false }, options: PlatformResolveOptions = {}): PlatformPlan {
    const names = platformNames(config);
    const problems = [...validateNames(names)];
    // observability: who scrapes (the policies admit it on the metrics ports) and what the sidecars run.
    const metrics: MetricsLinks | undefined = config.observability.enabled
        ? {
              scraper: { ...config.observability.scraper },
              programs: options.metricsPrograms ?? projectMetricsPrograms(),
              annotations: config.observability.form === "annotations",
              stack: names.prefix,
          }
        : undefined;
    const warnings: string[] = [];
    if (config.envs.some((e) => !e.external)) {
        warnings.push("changing an env server during a run restarts its replicas and kills their open sessions: change envs between runs");
    }
    if (
        config.ingress.enabled &&
        config.ingress.tls.mode !== "none" &&
        (config.sandboxes.provider === "agent-sandbox" || config.sandboxes.provider === "docker")
    ) {
        const host = new URL(names.ingress.sandboxUrl).hostname;
        warnings.push(
            `sandboxes call ${names.ingress.sandboxUrl}: the certificate (ingress.tls) must name ${host}, and the sandbox image must trust its issuer (a private CA goes into the image's trust store)`,
        );
    }
    warnings.push(...programWarnings(config), ...placeholderImageWarnings(config));
    const envs = config.envs.map((env) => collect(problems, () => resolveEnvSpace(config, env, names, metrics)));
    const ingress = config.ingress.enabled ? collect(problems, () => resolveVllmIngress(config, names, metrics)) : undefined;
    const sandboxes = config.sandboxes.provider === "none" ? undefined : collect(problems, () => resolveSandboxPool(config, names));
    const envUrls = Object.fromEntries(Object.entries(names.envs).map(([env, n]) => [env, n.url]));
    // Who the trainer talks to inside the stack (its egress allow-list on Kubernetes).
    const egressPeers: EgressPeer[] = [];
    for (const e of envs) {
        if (e?.kind === "deployed")
            egressPeers.push({ what: `env ${e.name} router`, namespace: e.namespace, podLabels: e.router.podLabels, port: e.router.port });
    }
    if (ingress) egressPeers.push({ what: "vLLM ingress", ...ingress.peer });
    if (sandboxes && config.sandboxes.provider === "agent-sandbox") {
        egressPeers.push({ what: "sandboxes", namespace: sandboxes.names.namespace, podLabels: sandboxes.labels, port: sandboxes.port });
    }
    const training = collect(problems, () =>
        resolveTrainingNode(config, names, {
            envUrls,
            sandbox: sandboxes ? { url: names.ingress.sandboxUrl, provider: config.sandboxes.provider, trainerEnv: sandboxes.trainerEnv } : undefined,
            egressPeers,
            metrics,
        }),
    );
    problems.push(...tenantQuotaProblems(config, sandboxes));
    if (training?.requiredSecrets.includes("hfToken") && !secrets.hfToken) {
        problems.push("hfToken: training.hubRepoId pushes to the Hub, which needs a token: pulumi config set --secret hfToken hf_...");
    }
    // Docker: the host ports of the metrics targets (observability.hostPortBase), checked before anything registers.
    const deployedEnvs = envs.filter((e): e is EnvDescription => e !== undefined);
    const dockerMetrics = training !== undefined ? dockerMetricsTargets({ config, names, training, ingress, envs: deployedEnvs }) : [];
    if (training !== undefined) problems.push(...dockerMetricsPortProblems({ config, names, training, ingress, envs: deployedEnvs }, dockerMetrics));
    if (problems.length > 0 || training === undefined) throw new ConfigError(problems);
    const published = (container: string) => dockerMetrics.filter((t) => t.container === container);
    // Every pod the stack renders pulls with the stack's registry credentials (one Secret per namespace, made by the Platform).
    const pull = config.target.kind === "kubernetes" && secrets.registryAuth !== undefined ? { imagePullSecrets: [names.pullSecret] } : {};
    // Every pod group a component declares metrics ports for, in one list (the monitors, plan.md, Docker's prometheus.yml).
    const scraped: ScrapedPods[] = [
        ...(training.metrics?.scraped ?? []),
        ...(ingress?.metrics?.scraped ?? []),
        ...envs.flatMap((e) => (e?.kind === "deployed" ? (e.metrics?.scraped ?? []) : [])),
    ];
    return {
        config,
        names,
        monitoring: config.observability.enabled ? resolveMonitoring(config.observability, scraped) : undefined,
        training: { ...training, ...pull, ...(dockerMetrics.length > 0 && training.vllm ? { dockerMetrics: published(training.vllm.dockerName) } : {}) },
        envs: deployedEnvs.map((e) =>
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
