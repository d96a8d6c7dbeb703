/**
 * The TrainingNode's one resolve step: pure, no Pulumi. Every port, flag, env var, GPU
 * assignment, probe and volume of the training node is decided once, for both targets, each in the
 * file named for it (the steps below); `kubernetes.ts` and `docker.ts` only translate this description.
 */
import { runsSandboxPool } from "../config/sandbox-providers";
import { dnsName, podLabels } from "../config/names";
import { ConfigError } from "../config/errors";
import { programFacts } from "../config/programs";
import { trainerEgress } from "./egress";
import { gpuSplit } from "./gpus";
import type { MetricsFile } from "../shared/metrics-pods";
import { observedMetrics } from "./metrics";
import {
    type TrainingConfig,
    type TrainingDescription,
    type TrainingLinks,
    type TrainingMetrics,
    type TrainingNames,
    type RoleRunner,
    VLLM_PORT,
} from "./model";
import { multiNodeOf, trainerVllmUrl } from "./multi-node";
import { roleRunnerFiles } from "./role-runner";
import { requiredSecrets, secretRefs } from "./secrets";
import { trainerOf } from "./trainer";
import { vllmContainer } from "./vllm";
import { trainingVolumes } from "./volumes";

/** Resolves the training node of a run; throws ConfigError with every problem at once. */
export function resolveTrainingNode(config: TrainingConfig, names: TrainingNames, links: TrainingLinks): TrainingDescription {
    const problems: string[] = [];
    const multiNode = multiNodeOf(config, names);
    const vllmUrl = trainerVllmUrl(names, multiNode);
    const gpus = gpuSplit(config, multiNode !== undefined);
    const volumes = trainingVolumes(config, names, multiNode);
    const program = programFacts(config.training.program);
    const vllm = vllmContainer(config, names, { gpus, mounts: volumes.mounts, program, multiNode });
    const metrics = observedMetrics(config, names, links, { vllmServes: vllm !== undefined, multiNode }, problems);
    const trainer = trainerOf(
        config,
        names,
        links,
        { program, vllmUrl, gpus, mounts: volumes.mounts, multiNode, metrics, vllmServes: vllm !== undefined },
        problems,
    );
    if (problems.length > 0) throw new ConfigError(problems);
    return {
        layout: config.training.layout,
        target: config.target.kind,
        runId: config.runId,
        jobName: names.training.job,
        namespace: names.namespaces.training,
        network: names.networks.training,
        serviceAccount: names.training.serviceAccount,
        podLabels: podLabels("trainer", names.training.job),
        automountServiceAccountToken: claimsSandboxes(config),
        egress:
            config.target.kind === "kubernetes" && config.training.egress.restrict
                ? trainerEgress(links, claimsSandboxes(config), config.training.egress.apiServerCidrs, config)
                : undefined,
        vllm,
        trainer: trainer.container,
        gpuSharing: gpus.sharing,
        gpuLayout: { vllm: gpus.vllm, trainer: gpus.trainer },
        internalUrl: vllmUrl,
        ...blackboxAccess(config, names),
        shmSize: config.training.shmSize,
        modelCache: volumes.modelCache,
        checkpoints: volumes.checkpoints,
        secrets: secretRefs(names, config),
        requiredSecrets: requiredSecrets(config, links),
        job: { backoffLimit: config.training.backoffLimit, activeDeadlineSeconds: config.training.activeDeadlineSeconds },
        multiNode,
        kueueQueue: config.target.kind === "kubernetes" ? config.target.kueueQueue : undefined,
        scheduling: scheduling(config),
        modelLoadSeconds: config.training.modelLoadSeconds,
        metrics,
        roleRunner: trainer.roleRunner,
        programs: programs(names, metrics, trainer.roleRunner),
    };
}

/** Only a black-box trainer with a warm pool talks to the API server (it claims sandboxes). */
function claimsSandboxes(config: TrainingConfig): boolean {
    return config.training.layout === "blackbox" && runsSandboxPool(config);
}

/** Black box: the address the ingress proxies to, and the ClusterIP Service in front of vLLM with who may reach it. */
function blackboxAccess(config: TrainingConfig, names: TrainingNames): Pick<TrainingDescription, "upstreamAddress" | "ingressAccess"> {
    const blackbox = config.training.layout === "blackbox";
    return {
        upstreamAddress: blackbox ? names.training.vllmUpstream : undefined,
        ingressAccess: blackbox
            ? {
                  serviceName: names.training.vllmService,
                  port: VLLM_PORT,
                  fromNamespace: names.namespaces.ingress,
                  fromPodLabels: podLabels("vllm-ingress", names.ingress.deployment),
              }
            : undefined,
    };
}

/** Kubernetes placement: the GPU resource, node selector (with target.gpuProduct), tolerations and classes. */
function scheduling(config: TrainingConfig): TrainingDescription["scheduling"] {
    const k8s = config.target.kind === "kubernetes" ? config.target : undefined;
    const nodeSelector: Record<string, string> = { ...(k8s?.nodeSelector ?? {}) };
    if (k8s?.gpuProduct !== undefined) nodeSelector["nvidia.com/gpu.product"] = k8s.gpuProduct;
    return {
        gpuResourceName: k8s?.gpuResourceName ?? "nvidia.com/gpu",
        nodeSelector,
        tolerations: (k8s?.tolerations ?? []) as ReadonlyArray<Record<string, unknown>>,
        priorityClassName: k8s?.priorityClassName,
        storageClassName: k8s?.storageClassName,
    };
}

/** The training pods' program files (vLLM's listener config, the role runner and its module) in one ConfigMap; undefined when none. */
function programs(names: TrainingNames, metrics: TrainingMetrics | undefined, roleRunner: RoleRunner | undefined): TrainingDescription["programs"] {
    const files: MetricsFile[] = [...(metrics?.vllm?.files ?? []), ...(roleRunner ? roleRunnerFiles() : [])];
    return files.length > 0 ? { configMap: dnsName([names.training.job, "programs"]), files } : undefined;
}
