/**
 * Kubernetes translation of a multi-node TrainingDescription (training.nodes > 1): one JobSet
 * (jobset.x-k8s.io/v1alpha2, JobSet v0.12.0) holding vLLM (its first replicated job, one pod on a
 * node of its own) and the trainer (one-pod Jobs, one per node), so Kueue queues and admits both as
 * one workload and vLLM's node is freed when the run ends; vLLM's ClusterIP Service selects that pod;
 * NetworkPolicies open exactly trainer <-> trainer and trainer <-> vLLM (every port: NCCL picks its
 * own), plus the ingress proxy to vLLM's port in black box. Decides nothing new: ports, flags and env
 * come from the description.
 *
 * JobSet facts used (kubernetes-sigs/jobset v0.12.0): every pod carries the labels
 * `jobset.sigs.k8s.io/jobset-name`, `jobset.sigs.k8s.io/replicatedjob-name` and `jobset.sigs.k8s.io/job-index`
 * (labelAndAnnotateObject in pkg/controllers/jobset_controller.go, keys in api/jobset/v1alpha2/jobset_types.go);
 * with `network.enableDNSHostnames` the controller creates a headless Service named after the JobSet and
 * each pod's hostname is `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>`;
 * `alpha.jobset.sigs.k8s.io/exclusive-topology` places one Job per topology value (its pod webhook adds
 * the affinities); `dependsOn: [{name, status: Ready}]` creates a replicated job's Jobs only once every
 * Job of the named one is Ready (pkg/controllers/depends_on.go; the first replicated job cannot have it);
 * a successPolicy with targetReplicatedJobs completes the JobSet when those Jobs succeed, and a finished
 * JobSet (Completed or Failed) deletes its still-active Jobs (reconcile in jobset_controller.go);
 * failurePolicy rules match a child Job's failure reason, message and replicated job, the first matching
 * rule wins, and a failure no rule matches restarts every Job (RestartJobSet) up to maxRestarts
 * (pkg/controllers/failure_policy.go); a suspended JobSet's Jobs are created suspended (no pods).
 */
import * as k8s from "@pulumi/kubernetes";
import type * as pulumi from "@pulumi/pulumi";
import { createHash } from "node:crypto";
import {
    CONTAINER,
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_LABELS,
    KUEUE_QUEUE_LABEL,
    type MultiNodeDescription,
    type TrainerEgress,
    type TrainingDescription,
} from "./model";
import { trainerEgressRules } from "./egress";
import { annotationsOf } from "./metrics";
import { trainingPodBase } from "./pod";
import { clusterDnsEgress, podsInNamespace, publicInternetEgress, scrapeIngressRule } from "../shared/kubernetes";

/** Pulumi waits for a Job to finish (10 min default) unless told not to (pulumi-kubernetes await logic). */
const SKIP_AWAIT = { "pulumi.com/skipAwait": "true" } as const;
const PART_OF = { "app.kubernetes.io/part-of": "agent-rl-infra" } as const;

/** What the one-node translation has already built and the multi-node objects reuse. */
export interface MultiNodeParts {
    /** The trainer container, with its volume mounts (API token included when it claims sandboxes). */
    readonly trainer: k8s.types.input.core.v1.Container;
    /** The vLLM container. */
    readonly vllm: k8s.types.input.core.v1.Container;
    /** The pod volumes (shm, model cache, checkpoints, API token). */
    readonly volumes: readonly k8s.types.input.core.v1.Volume[];
    /** observability: vLLM's metrics-only listener (a native sidecar of vLLM's pod) and its volumes. @default [] */
    readonly vllmSidecars?: readonly k8s.types.input.core.v1.Container[];
    readonly vllmVolumes?: readonly k8s.types.input.core.v1.Volume[];
}

/** The JobSet as planned, before anything is registered: its name, its spec, and what selects its vLLM pod. */
export interface PlannedJobSet {
    /** The run's name plus a hash of the spec (a changed spec is a new JobSet). */
    readonly name: string;
    readonly spec: Record<string, unknown>;
    /** vLLM's Service selector: vLLM's pod labels and JobSet's labels for this JobSet's vLLM replicated job, so a terminating old run's vLLM is never selected. */
    readonly vllmSelector: Readonly<Record<string, string>>;
}

/** The JobSet's object name: the run's name plus a hash of its spec (the replicated jobs are immutable). */
export function jobSetObjectName(d: TrainingDescription, spec: unknown): string {
    return `${d.jobName}-${createHash("sha256").update(JSON.stringify(spec)).digest("hex").slice(0, 8)}`;
}

/** The trainer's env: JobSet's labels through the downward API first, so `$(VAR)` in later values and in args expands. */
function withLabelEnv(c: k8s.types.input.core.v1.Container, m: MultiNodeDescription): k8s.types.input.core.v1.Container {
    const fromLabels = Object.entries(m.labelEnv).map(([name, label]) => ({
        name,
        valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: `metadata.labels['${label}']` } },
    }));
    return { ...c, env: [...fromLabels, ...((c.env as k8s.types.input.core.v1.EnvVar[]) ?? [])] };
}

/** A drained or preempted node fails its Job with this pod condition (the nodeDisrupted rule reads it). */
const FAIL_ON_DISRUPTION = { action: "FailJob", onPodConditions: [{ type: "DisruptionTarget", status: "True" }] } as const;

/** The trainers' pod: every volume of the one-node pod, JobSet's labels as env. */
function trainerPodSpec(
    d: TrainingDescription,
    m: MultiNodeDescription,
    parts: MultiNodeParts,
    volumes: k8s.types.input.core.v1.Volume[],
): k8s.types.input.core.v1.PodSpec {
    return {
        // podFailurePolicy requires restartPolicy Never.
        restartPolicy: "Never",
        ...trainingPodBase(d),
        containers: [withLabelEnv(parts.trainer, m)],
        volumes,
    };
}

/**
 * vLLM: one pod on a GPU node of its own (tensor parallel over its GPUs, all in one pod: a 32B
 * policy fits one 8-GPU node). Never restarted in place: a vLLM that exits or fails its liveness
 * probe fails its Job, which the failure policy turns into a restart of the whole JobSet (the
 * trainers' NCCL group with vLLM does not survive a vLLM restart anyway). So its liveness probe
 * allows VLLM_UNANSWERED_SECONDS without an answer, as the one-node supervisor does (probes.ts).
 */
function vllmPodSpec(d: TrainingDescription, parts: MultiNodeParts, volumes: readonly k8s.types.input.core.v1.Volume[]): k8s.types.input.core.v1.PodSpec {
    return {
        restartPolicy: "Never",
        ...trainingPodBase(d),
        ...(parts.vllmSidecars !== undefined && parts.vllmSidecars.length > 0 ? { initContainers: [...parts.vllmSidecars] } : {}),
        containers: [parts.vllm],
        // vLLM mounts no checkpoints and no API token.
        volumes: [...volumes.filter((v) => v.name === "dshm" || v.name === "model-cache"), ...(parts.vllmVolumes ?? [])],
    };
}

/**
 * All or nothing, first matching rule wins: a drained node restarts everything without using up
 * a retry; vLLM's failure (exit, liveness kill) restarts everything, counted against maxRestarts
 * (= training.backoffLimit: 0 ends the run); a trainer's own non-zero exit and the deadline end
 * the run at once; anything else restarts everything, counted.
 *
 * What JobSet v0.12.0 adds and why it is not used (api/jobset/v1alpha2/jobset_types.go, pkg/features):
 * - RestartJob / RestartJobAndIgnoreMaxRestarts recreate only the failed Job. The trainer ranks are one
 *   torch.distributed group: a rank recreated alone cannot rejoin the others' collectives, so a trainer
 *   failure must restart them all. vLLM recreated alone comes back with the base weights and without
 *   the weight-sync group the trainer opened to it, and the trainer does not reopen it: the run would
 *   go on generating with stale weights. Both stay all-or-nothing (RestartJobSet).
 * - restartStrategy InPlaceRestart (restart healthy pods' containers instead of recreating the Jobs)
 *   is behind the InPlaceRestart feature gate, alpha and off by default in v0.12.0, and needs an agent
 *   in every pod that holds the processes at a barrier until all pods reach the new attempt: nothing in
 *   the trainer or vLLM images is that agent. The default strategy (Recreate) stays.
 */
function failurePolicy(d: TrainingDescription, m: MultiNodeDescription) {
    return {
        maxRestarts: d.job.backoffLimit,
        rules: [
            {
                name: "nodeDisrupted",
                action: "RestartJobSetAndIgnoreMaxRestarts",
                onJobFailureReasons: ["PodFailurePolicy"],
                onJobFailureMessagePatterns: ["DisruptionTarget"],
            },
            { name: "vllmFailed", action: "RestartJobSet", targetReplicatedJobs: [m.vllm.replicatedJob] },
            { name: "trainerFailed", action: "FailJobSet", onJobFailureReasons: ["PodFailurePolicy"], targetReplicatedJobs: [m.replicatedJob] },
            { name: "deadlineExceeded", action: "FailJobSet", onJobFailureReasons: ["DeadlineExceeded"], targetReplicatedJobs: [m.replicatedJob] },
        ],
    };
}

/** vLLM's replicated job, first: the trainers depend on it (JobSet refuses dependsOn on the first replicated job). */
function vllmReplicatedJob(d: TrainingDescription, m: MultiNodeDescription, pod: k8s.types.input.core.v1.PodSpec) {
    const vllmLabels = { ...m.vllm.podLabels };
    return {
        name: m.vllm.replicatedJob,
        replicas: 1,
        template: {
            metadata: { labels: vllmLabels },
            spec: {
                parallelism: 1,
                completions: 1,
                backoffLimit: 0,
                podFailurePolicy: { rules: [FAIL_ON_DISRUPTION] },
                template: { metadata: { labels: { ...vllmLabels, ...d.metrics?.stackLabels }, ...annotationsOf(d, "vllm") }, spec: pod },
            },
        },
    };
}

/**
 * The trainers' replicated job: one Job per node. Its Jobs are created once vLLM's Job is Ready: its
 * pod passed the readiness probe on /health, so the model is loaded before any trainer starts.
 */
function trainerReplicatedJob(d: TrainingDescription, m: MultiNodeDescription, pod: k8s.types.input.core.v1.PodSpec) {
    const trainerLabels = { ...d.podLabels };
    return {
        name: m.replicatedJob,
        replicas: m.nodes,
        dependsOn: [{ name: m.vllm.replicatedJob, status: "Ready" }],
        template: {
            metadata: { labels: trainerLabels },
            spec: {
                parallelism: 1,
                completions: 1,
                // Indexed: the Job controller gives the pod its hostname (<job>-0) under the JobSet's
                // subdomain; JobSet's webhook defaults it too, set here so it never depends on that.
                completionMode: "Indexed",
                // No pod retries inside a node's Job: any failure is the JobSet's to restart, all nodes together.
                backoffLimit: 0,
                activeDeadlineSeconds: d.job.activeDeadlineSeconds,
                podFailurePolicy: {
                    rules: [{ action: "FailJob", onExitCodes: { containerName: CONTAINER.trainer, operator: "NotIn", values: [0] } }, FAIL_ON_DISRUPTION],
                },
                template: { metadata: { labels: { ...trainerLabels, ...d.metrics?.stackLabels }, ...annotationsOf(d, "trainer") }, spec: pod },
            },
        },
    };
}

/** Plans the run's JobSet (pure: registers nothing). */
export function planMultiNodeJobSet(d: TrainingDescription, m: MultiNodeDescription, parts: MultiNodeParts): PlannedJobSet {
    const volumes = parts.volumes.map((v) => ({ ...v }));
    const queue = d.kueueQueue;
    const spec = {
        // Kueue's contract: a suspended JobSet with the queue label, which Kueue unsuspends on admission;
        // JobSet creates the Jobs of a suspended JobSet suspended, so neither vLLM nor a trainer has a pod.
        ...(queue !== undefined ? { suspend: true } : {}),
        // The pods' DNS names (rank 0's is the rendezvous address), published before the pods are Ready.
        network: { enableDNSHostnames: true, publishNotReadyAddresses: true },
        // The run is done when every trainer's Job succeeded; the JobSet then deletes vLLM's Job.
        successPolicy: { operator: "All", targetReplicatedJobs: [m.replicatedJob] },
        failurePolicy: failurePolicy(d, m),
        replicatedJobs: [vllmReplicatedJob(d, m, vllmPodSpec(d, parts, volumes)), trainerReplicatedJob(d, m, trainerPodSpec(d, m, parts, volumes))],
    };
    const name = jobSetObjectName(d, spec);
    return {
        name,
        spec,
        vllmSelector: { ...m.vllm.podLabels, [JOBSET_LABELS.jobSetName]: name, [JOBSET_LABELS.replicatedJobName]: m.vllm.replicatedJob },
    };
}

/** Where the run's multi-node objects go. */
interface Scope {
    readonly name: string;
    readonly d: TrainingDescription;
    readonly m: MultiNodeDescription;
    readonly ns: pulumi.Input<string>;
    readonly child: { readonly parent: pulumi.Resource };
}

/** The JobSet itself: one pod per node (each Job holds one pod), vLLM's and each trainer's. */
function jobSet(s: Scope, planned: PlannedJobSet, dependsOn: readonly pulumi.Resource[]): k8s.apiextensions.CustomResource {
    const queue = s.d.kueueQueue;
    return new k8s.apiextensions.CustomResource(
        `${s.name}-jobset`,
        {
            apiVersion: "jobset.x-k8s.io/v1alpha2",
            kind: "JobSet",
            metadata: {
                name: planned.name,
                namespace: s.ns,
                labels: { ...s.d.podLabels, ...(queue !== undefined ? { [KUEUE_QUEUE_LABEL]: queue } : {}) },
                annotations: { ...SKIP_AWAIT, [EXCLUSIVE_TOPOLOGY_ANNOTATION]: s.m.exclusiveTopology },
            },
            spec: planned.spec,
        },
        {
            ...s.child,
            dependsOn: [...dependsOn],
            // As the one-node Job: a changed spec is a new JobSet (a hash in its name), the old one deleted
            // first without waiting; the scheduler keeps the new pods Pending until the old ones free the GPUs.
            deleteBeforeReplace: true,
            // Kueue unsuspends an admitted JobSet; a later `up` must not suspend it again.
            ...(queue !== undefined ? { ignoreChanges: ["spec.suspend"] } : {}),
        },
    );
}

/** observability: the scraper on a role's metrics ports alone (vLLM's listener, never its 8000). */
function scrapeRules(d: TrainingDescription, role: string) {
    const ports = d.metrics?.scraped.filter((p) => p.role === role).flatMap((p) => p.ports) ?? [];
    return d.metrics && ports.length > 0 ? [scrapeIngressRule(d.metrics.scraper, ports)] : [];
}

/**
 * Ingress: trainer pods from each other (accelerate's rendezvous, NCCL between nodes: every port)
 * and from vLLM (the weight update's NCCL group, which the trainer hosts); vLLM from the trainer pods
 * (HTTP and NCCL) and, in black box, from the ingress proxy on its port alone.
 */
function ingressPolicies(s: Scope, trainers: k8s.types.input.networking.v1.NetworkPolicyPeer, vllmPods: k8s.types.input.networking.v1.NetworkPolicyPeer): void {
    const d = s.d;
    new k8s.networking.v1.NetworkPolicy(
        `${s.name}-policy`,
        {
            metadata: { name: d.jobName, namespace: s.ns, labels: { ...PART_OF } },
            spec: {
                podSelector: { matchLabels: { ...d.podLabels } },
                policyTypes: ["Ingress"],
                ingress: [{ from: [trainers, vllmPods] }, ...scrapeRules(d, "trainer")],
            },
        },
        s.child,
    );
    const access = d.ingressAccess;
    new k8s.networking.v1.NetworkPolicy(
        `${s.name}-vllm-policy`,
        {
            metadata: { name: `${d.jobName}-vllm`, namespace: s.ns, labels: { ...PART_OF } },
            spec: {
                podSelector: { matchLabels: { ...s.m.vllm.podLabels } },
                policyTypes: ["Ingress"],
                ingress: [
                    { from: [trainers] },
                    ...(access
                        ? [{ from: [podsInNamespace(access.fromNamespace, access.fromPodLabels)], ports: [{ protocol: "TCP", port: access.port }] }]
                        : []),
                    ...scrapeRules(d, "vllm"),
                ],
            },
        },
        s.child,
    );
}

/** Egress: the trainers' allow-list plus each other and vLLM; vLLM: DNS, the trainer pods (NCCL), and the Hub on 443 for the model. */
function egressPolicies(
    s: Scope,
    egress: TrainerEgress,
    trainers: k8s.types.input.networking.v1.NetworkPolicyPeer,
    vllmPods: k8s.types.input.networking.v1.NetworkPolicyPeer,
): void {
    new k8s.networking.v1.NetworkPolicy(
        `${s.name}-egress`,
        {
            metadata: { name: `${s.d.jobName}-egress`, namespace: s.ns, labels: { ...PART_OF } },
            spec: { podSelector: { matchLabels: { ...s.d.podLabels } }, policyTypes: ["Egress"], egress: trainerEgressRules(egress, [trainers, vllmPods]) },
        },
        s.child,
    );
    new k8s.networking.v1.NetworkPolicy(
        `${s.name}-vllm-egress`,
        {
            metadata: { name: `${s.d.jobName}-vllm-egress`, namespace: s.ns, labels: { ...PART_OF } },
            spec: {
                podSelector: { matchLabels: { ...s.m.vllm.podLabels } },
                policyTypes: ["Egress"],
                egress: [clusterDnsEgress(egress.dns), { to: [trainers] }, publicInternetEgress([HTTPS_PORT])],
            },
        },
        s.child,
    );
}

/** Registers the run's JobSet (vLLM and the trainers) and the policies between them; returns the JobSet. */
export function buildMultiNodeTraining(
    name: string,
    d: TrainingDescription,
    m: MultiNodeDescription,
    planned: PlannedJobSet,
    deps: { readonly namespace: pulumi.Input<string>; readonly dependsOn: readonly pulumi.Resource[] },
    parent: pulumi.Resource,
): k8s.apiextensions.CustomResource {
    const s: Scope = { name, d, m, ns: deps.namespace, child: { parent } };
    const made = jobSet(s, planned, deps.dependsOn);
    const trainers = podsInNamespace(d.namespace, { ...d.podLabels });
    const vllmPods = podsInNamespace(d.namespace, { ...m.vllm.podLabels });
    ingressPolicies(s, trainers, vllmPods);
    if (d.egress) egressPolicies(s, d.egress, trainers, vllmPods);
    return made;
}

/** HTTPS: the Hugging Face Hub, where vLLM downloads the model. */
const HTTPS_PORT = 443;
