/**
 * Kubernetes translation of a multi-node TrainingDescription (training.nodes > 1): the trainer as a
 * JobSet (jobset.x-k8s.io/v1alpha2, JobSet v0.10.1) of one-pod Jobs, one per node, and vLLM in a
 * Deployment of its own behind its ClusterIP Service; NetworkPolicies that open exactly
 * trainer <-> trainer and trainer <-> vLLM (every port: NCCL picks its own), plus the ingress proxy to
 * vLLM's port in black box. Decides nothing new: ports, flags and env come from the description.
 *
 * JobSet facts used (kubernetes-sigs/jobset v0.10.1): every pod carries the labels
 * `jobset.sigs.k8s.io/jobset-name` and `jobset.sigs.k8s.io/job-index` (api/jobset/v1alpha2/jobset_types.go);
 * with `network.enableDNSHostnames` the controller creates a headless Service named after the JobSet and
 * each pod's hostname is `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>` (pkg/controllers/jobset_controller.go);
 * `alpha.jobset.sigs.k8s.io/exclusive-topology` places one Job per topology value (its pod webhook adds
 * the affinities); failurePolicy rules match a child Job's failure reason and message, and any failure
 * no rule matches restarts every Job (RestartJobSet) up to maxRestarts.
 */
import * as k8s from "@pulumi/kubernetes";
import type * as pulumi from "@pulumi/pulumi";
import { createHash } from "node:crypto";
import { CONTAINER, EXCLUSIVE_TOPOLOGY_ANNOTATION, KUEUE_QUEUE_LABEL, type MultiNodeDescription, type TrainingDescription } from "./describe";
import { trainerEgressRules } from "./egress";
import { trainingPodBase } from "./pod";
import { clusterDnsEgress, podsInNamespace, publicInternetEgress } from "../shared/kubernetes";

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
    readonly namespace: pulumi.Input<string>;
    /** What the JobSet waits for (ServiceAccount, Secrets, claims, vLLM's Service, the Platform's waitFor). */
    readonly dependsOn: readonly pulumi.Resource[];
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

/** Registers vLLM's Deployment, the trainer's JobSet and the policies between them; returns the JobSet. */
export function buildMultiNodeTraining(
    name: string,
    d: TrainingDescription,
    m: MultiNodeDescription,
    parts: MultiNodeParts,
    parent: pulumi.Resource,
): k8s.apiextensions.CustomResource {
    const child = { parent };
    const ns = parts.namespace;
    const trainerLabels = { ...d.podLabels };
    const vllmLabels = { ...m.vllm.podLabels };
    const volumes = parts.volumes.map((v) => ({ ...v }));

    // vLLM: one replica on a GPU node of its own (tensor parallel over its GPUs, all in one pod: a
    // 32B policy fits one 8-GPU node, so no leader/worker set). A Deployment, not a StatefulSet: it
    // keeps no per-replica identity or storage (the Service gives the address, the model cache is the
    // shared claim); Recreate, since a rolling update would ask for a second node's GPUs. Not awaited:
    // it turns Ready only once the model has loaded.
    new k8s.apps.v1.Deployment(
        `${name}-vllm`,
        {
            metadata: { name: m.vllm.deployment, namespace: ns, labels: { ...PART_OF }, annotations: { ...SKIP_AWAIT } },
            spec: {
                replicas: 1,
                strategy: { type: "Recreate" },
                selector: { matchLabels: vllmLabels },
                template: {
                    metadata: { labels: vllmLabels },
                    spec: {
                        ...trainingPodBase(d),
                        containers: [parts.vllm],
                        // vLLM mounts no checkpoints and no API token.
                        volumes: volumes.filter((v) => v.name === "dshm" || v.name === "model-cache"),
                    },
                },
            },
        },
        child,
    );

    const podSpec: k8s.types.input.core.v1.PodSpec = {
        // podFailurePolicy requires restartPolicy Never.
        restartPolicy: "Never",
        ...trainingPodBase(d),
        containers: [withLabelEnv(parts.trainer, m)],
        volumes,
    };
    const queue = d.kueueQueue;
    const spec = {
        // Kueue's contract: a suspended JobSet with the queue label, which Kueue unsuspends on admission.
        ...(queue !== undefined ? { suspend: true } : {}),
        // The pods' DNS names (rank 0's is the rendezvous address), published before the pods are Ready.
        network: { enableDNSHostnames: true, publishNotReadyAddresses: true },
        // All or nothing: one node's failure restarts every node (RestartJobSet, the default for a
        // failure no rule matches) up to backoffLimit times; a trainer's own non-zero exit and the
        // deadline end the run at once; a drained node restarts it without using up a retry.
        failurePolicy: {
            maxRestarts: d.job.backoffLimit,
            rules: [
                {
                    name: "nodeDisrupted",
                    action: "RestartJobSetAndIgnoreMaxRestarts",
                    onJobFailureReasons: ["PodFailurePolicy"],
                    onJobFailureMessagePatterns: ["DisruptionTarget"],
                },
                { name: "trainerFailed", action: "FailJobSet", onJobFailureReasons: ["PodFailurePolicy"] },
                { name: "deadlineExceeded", action: "FailJobSet", onJobFailureReasons: ["DeadlineExceeded"] },
            ],
        },
        replicatedJobs: [
            {
                name: m.replicatedJob,
                replicas: m.nodes,
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
                            rules: [
                                { action: "FailJob", onExitCodes: { containerName: CONTAINER.trainer, operator: "NotIn", values: [0] } },
                                { action: "FailJob", onPodConditions: [{ type: "DisruptionTarget", status: "True" }] },
                            ],
                        },
                        template: { metadata: { labels: trainerLabels }, spec: podSpec },
                    },
                },
            },
        ],
    };
    const jobSet = new k8s.apiextensions.CustomResource(
        `${name}-jobset`,
        {
            apiVersion: "jobset.x-k8s.io/v1alpha2",
            kind: "JobSet",
            metadata: {
                name: jobSetObjectName(d, spec),
                namespace: ns,
                labels: { ...trainerLabels, ...(queue !== undefined ? { [KUEUE_QUEUE_LABEL]: queue } : {}) },
                // One trainer pod per node (each Job holds one pod).
                annotations: { ...SKIP_AWAIT, [EXCLUSIVE_TOPOLOGY_ANNOTATION]: m.exclusiveTopology },
            },
            spec,
        },
        {
            ...child,
            dependsOn: [...parts.dependsOn],
            // As the one-node Job: a changed spec is a new JobSet (a hash in its name), the old one deleted
            // first without waiting; the scheduler keeps the new pods Pending until the old ones free the GPUs.
            deleteBeforeReplace: true,
            // Kueue unsuspends an admitted JobSet; a later `up` must not suspend it again.
            ...(queue !== undefined ? { ignoreChanges: ["spec.suspend"] } : {}),
        },
    );

    // Ingress: trainer pods from each other (accelerate's rendezvous, NCCL between nodes: every port)
    // and from vLLM (the weight update's NCCL group, which the trainer hosts); vLLM from the trainer pods
    // (HTTP and NCCL) and, in black box, from the ingress proxy on its port alone.
    const trainers = podsInNamespace(d.namespace, trainerLabels);
    const vllmPods = podsInNamespace(d.namespace, vllmLabels);
    new k8s.networking.v1.NetworkPolicy(
        `${name}-policy`,
        {
            metadata: { name: d.jobName, namespace: ns, labels: { ...PART_OF } },
            spec: { podSelector: { matchLabels: trainerLabels }, policyTypes: ["Ingress"], ingress: [{ from: [trainers, vllmPods] }] },
        },
        child,
    );
    const access = d.ingressAccess;
    new k8s.networking.v1.NetworkPolicy(
        `${name}-vllm-policy`,
        {
            metadata: { name: `${d.jobName}-vllm`, namespace: ns, labels: { ...PART_OF } },
            spec: {
                podSelector: { matchLabels: vllmLabels },
                policyTypes: ["Ingress"],
                ingress: [
                    { from: [trainers] },
                    ...(access
                        ? [{ from: [podsInNamespace(access.fromNamespace, access.fromPodLabels)], ports: [{ protocol: "TCP", port: access.port }] }]
                        : []),
                ],
            },
        },
        child,
    );
    const egress = d.egress;
    if (egress) {
        new k8s.networking.v1.NetworkPolicy(
            `${name}-egress`,
            {
                metadata: { name: `${d.jobName}-egress`, namespace: ns, labels: { ...PART_OF } },
                spec: {
                    podSelector: { matchLabels: trainerLabels },
                    policyTypes: ["Egress"],
                    egress: trainerEgressRules(egress, [trainers, vllmPods]),
                },
            },
            child,
        );
        // vLLM: DNS, the trainer pods (NCCL), and the Hub on 443 for the model.
        new k8s.networking.v1.NetworkPolicy(
            `${name}-vllm-egress`,
            {
                metadata: { name: `${d.jobName}-vllm-egress`, namespace: ns, labels: { ...PART_OF } },
                spec: {
                    podSelector: { matchLabels: vllmLabels },
                    policyTypes: ["Egress"],
                    egress: [clusterDnsEgress(egress.dns), { to: [trainers] }, publicInternetEgress([HTTPS_PORT])],
                },
            },
            child,
        );
    }
    return jobSet;
}

/** HTTPS: the Hugging Face Hub, where vLLM downloads the model. */
const HTTPS_PORT = 443;
