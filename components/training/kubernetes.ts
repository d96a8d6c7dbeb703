/**
 * Kubernetes translation of a TrainingDescription: one batch/v1 Job per run (vLLM as a
 * native sidecar, the trainer as the main container), its ServiceAccount, Secrets, volumes,
 * and in black box a ClusterIP Service + NetworkPolicy so only the ingress reaches port 8000.
 * Decides nothing new: every port, flag and env var comes from the description.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { createHash } from "node:crypto";
import * as path from "node:path";
import { CONTAINER, type ContainerDescription, type HttpProbe, KUEUE_QUEUE_LABEL, type SecretName, type TrainingDescription, VLLM_PORT } from "./model";
import { buildMultiNodeTraining, planMultiNodeJobSet } from "./kubernetes-multinode";
import { trainerEgressRules } from "./egress";
import { ncclCheckSource } from "./nccl-check";
import { trainingPodBase } from "./pod";
import { annotationsOf } from "./metrics";
import { oneContainer } from "./supervisor";
import {
    ADOPT,
    METRICS_PROGRAMS_VOLUME,
    metricsSidecarContainer,
    metricsSidecarVolumes,
    NAMESPACE_NAME_LABEL,
    pullSecretRefs,
    scrapeIngressRule,
} from "../shared/kubernetes";
import { METRICS_PROGRAM_DIR } from "../shared/metrics-pods";
import { imagePullPolicy } from "../shared/images";
import type { ClaimRecords } from "../config/claims";

/** Pulumi waits for a Job to finish (10 min default) unless told not to (pulumi-kubernetes await logic). */
const SKIP_AWAIT = { "pulumi.com/skipAwait": "true" } as const;

type Secrets = Partial<Record<SecretName, pulumi.Input<string>>>;

function probe(p: HttpProbe): k8s.types.input.core.v1.Probe {
    return { httpGet: { path: p.path, port: p.port }, periodSeconds: p.periodSeconds, failureThreshold: p.failureThreshold, timeoutSeconds: p.timeoutSeconds };
}

function container(c: ContainerDescription, d: TrainingDescription, provided: Secrets): k8s.types.input.core.v1.Container {
    const gpuResources: Record<string, string> = c.gpus > 0 ? { [d.scheduling.gpuResourceName]: String(c.gpus) } : {};
    // Requests == limits: GPUs cannot be overcommitted, and a training pod should be Guaranteed.
    const resources = { cpu: c.cpu, memory: c.memory, ...gpuResources };
    const env: k8s.types.input.core.v1.EnvVar[] = [
        ...Object.entries(c.env)
            .sort(([a], [b]) => a.localeCompare(b))
            .map(([name, value]) => ({ name, value })),
        // Secrets only by reference; a secret not supplied is simply absent (required ones were checked).
        ...Object.entries(c.secretEnv)
            .filter(([, secret]) => provided[secret] !== undefined)
            .map(([name, secret]) => ({ name, valueFrom: { secretKeyRef: { name: d.secrets[secret].name, key: d.secrets[secret].key } } })),
    ];
    return {
        name: c.name,
        image: c.image,
        imagePullPolicy: imagePullPolicy(c.image),
        ...(c.command !== undefined ? { command: [...c.command] } : {}),
        args: [...c.args],
        env,
        ...(c.ports.length + (c.metricsPorts?.length ?? 0) > 0
            ? {
                  ports: [
                      ...c.ports.map((p) => ({ name: "http", containerPort: p, protocol: "TCP" })),
                      ...(c.metricsPorts ?? []).map((p) => ({ name: p.name, containerPort: p.port, protocol: "TCP" })),
                  ],
              }
            : {}),
        resources: { requests: resources, limits: resources },
        volumeMounts: c.mounts.map((m) => ({ name: volumeName(m.volume), mountPath: m.path })),
        ...(c.probes
            ? {
                  startupProbe: probe(c.probes.startup),
                  ...(c.probes.liveness ? { livenessProbe: probe(c.probes.liveness) } : {}),
                  readinessProbe: probe(c.probes.readiness),
              }
            : {}),
        // vLLM/TRL images run as root (hence PSA baseline on the training namespace); still no privilege gain, no capabilities.
        securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
    };
}

function volumeName(v: "shm" | "modelCache" | "checkpoints"): string {
    return v === "shm" ? "dshm" : v === "modelCache" ? "model-cache" : "checkpoints";
}

/** Where Kubernetes mounts a pod's API credentials (client libraries read them there). */
const SERVICE_ACCOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount";
/** The API credentials automount would give, as one volume for the trainer container alone. */
const SERVICE_ACCOUNT_TOKEN_VOLUME: k8s.types.input.core.v1.Volume & { name: string } = {
    name: "api-token",
    projected: {
        defaultMode: 0o444,
        sources: [
            { serviceAccountToken: { path: "token", expirationSeconds: 3607 } },
            { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
            { downwardAPI: { items: [{ path: "namespace", fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } }] } },
        ],
    },
};

/**
 * The Job's object name: the run's name plus a hash of its pod template, so a changed template
 * under the same run id is a new Job that never collides with the old one while it terminates.
 */
export function jobObjectName(d: TrainingDescription, podSpec: k8s.types.input.core.v1.PodSpec, annotations?: Readonly<Record<string, string>>): string {
    // The pod template's annotations (form annotations' prometheus.io/*) are part of it too; without any, the
    // hash is the pod spec's alone, as it always was (a stack that sets none keeps its Job's name).
    const hashed = annotations !== undefined && Object.keys(annotations).length > 0 ? { podSpec, annotations } : podSpec;
    const hash = createHash("sha256").update(JSON.stringify(hashed)).digest("hex").slice(0, 8);
    return `${d.jobName}-${hash}`;
}

export interface KubernetesTrainingResources {
    /** The run's trainer: a Job on one node, a JobSet (jobset.x-k8s.io/v1alpha2) with training.nodes > 1. */
    readonly job: k8s.batch.v1.Job | k8s.apiextensions.CustomResource;
    /** Black box: the ClusterIP Service in front of vLLM (the ingress's upstream); with nodes > 1 also the trainer's way to vLLM. */
    readonly vllmService?: k8s.core.v1.Service;
    /** The stack-wide claims as made: size asked for and the class the cluster gave (the next up's checks read them back). */
    readonly claims: pulumi.Output<ClaimRecords>;
}

/** Registers the run's Kubernetes objects as children of `parent`. */
export function buildKubernetesTraining(
    name: string,
    d: TrainingDescription,
    provided: Secrets,
    parent: pulumi.Resource,
    waitFor: readonly pulumi.Resource[] = [],
    namespace?: pulumi.Input<string>,
): KubernetesTrainingResources {
    const child = { parent };
    // The Platform's Namespace output when given, so every object waits for the namespace.
    const ns = namespace ?? d.namespace;
    const labels = { ...d.podLabels };

    const serviceAccount = new k8s.core.v1.ServiceAccount(
        `${name}-serviceaccount`,
        // The SA itself never mounts a token; the pod opts in only when it must claim sandboxes.
        {
            metadata: { name: d.serviceAccount, namespace: ns, labels: { "app.kubernetes.io/part-of": "agent-rl-infra" } },
            automountServiceAccountToken: false,
            ...pullSecretRefs(d.imagePullSecrets),
        },
        child,
    );

    const secretResources: pulumi.Resource[] = [];
    // Only the Secrets a container references: the black-box trainer on the agent-sandbox pool gets
    // no ingress key (the sandbox pod's forwarder holds it), so no copy of it lands in training's namespace.
    const referenced = new Set<SecretName>([d.vllm, d.trainer].flatMap((c) => (c === undefined ? [] : Object.values(c.secretEnv))));
    for (const secret of Object.keys(d.secrets) as SecretName[]) {
        const value = provided[secret];
        if (value === undefined || !referenced.has(secret)) continue;
        const ref = d.secrets[secret];
        secretResources.push(
            new k8s.core.v1.Secret(
                `${name}-${secret === "hfToken" ? "hf-token" : "sandbox-key"}`,
                {
                    metadata: { name: ref.name, namespace: ns, labels: { "app.kubernetes.io/part-of": "agent-rl-infra" } },
                    type: "Opaque",
                    stringData: { [ref.key]: pulumi.secret(value) },
                },
                child,
            ),
        );
    }

    // PVCs are stack-wide (shared by runs). skipAwait: with a WaitForFirstConsumer StorageClass a
    // claim binds only once the Job's pod is scheduled, and the Job waits for the claim.
    // The checkpoints survive `destroy` (retained, in the retained training namespace) and are
    // adopted by the next `up` (patchForce); the model cache goes with the stack.
    const pvc = (role: string, v: NonNullable<TrainingDescription["modelCache"]>) =>
        new k8s.core.v1.PersistentVolumeClaim(
            `${name}-${role}`,
            {
                metadata: {
                    name: v.name,
                    namespace: ns,
                    labels: { "app.kubernetes.io/part-of": "agent-rl-infra" },
                    annotations: { ...SKIP_AWAIT, ...(role === "checkpoints" ? ADOPT : {}) },
                },
                spec: {
                    accessModes: [v.accessMode],
                    ...(d.scheduling.storageClassName !== undefined ? { storageClassName: d.scheduling.storageClassName } : {}),
                    resources: { requests: { storage: v.size } },
                },
            },
            { ...child, retainOnDelete: role === "checkpoints" },
        );
    const modelCache = d.modelCache ? pvc("model-cache", d.modelCache) : undefined;
    const checkpoints = d.checkpoints ? pvc("checkpoints", d.checkpoints) : undefined;

    const volumes: k8s.types.input.core.v1.Volume[] = [
        // Memory-backed /dev/shm: PyTorch/NCCL need far more than the 64 MiB default (vLLM container docs).
        { name: volumeName("shm"), emptyDir: { medium: "Memory", sizeLimit: d.shmSize } },
        modelCache
            ? { name: volumeName("modelCache"), persistentVolumeClaim: { claimName: d.modelCache!.name } }
            : { name: volumeName("modelCache"), emptyDir: {} },
        checkpoints
            ? { name: volumeName("checkpoints"), persistentVolumeClaim: { claimName: d.checkpoints!.name } }
            : { name: volumeName("checkpoints"), emptyDir: {} },
    ];

    // The NCCL check script, read-only next to the supervisor (gpuSharing shared + ncclCheck).
    const check = d.gpuSharing.check;
    const checkScripts = check
        ? new k8s.core.v1.ConfigMap(
              `${name}-nccl-check`,
              {
                  metadata: { name: `${d.jobName}-nccl-check`, namespace: ns, labels: { "app.kubernetes.io/part-of": "agent-rl-infra" } },
                  data: { [path.basename(check.path)]: ncclCheckSource() },
              },
              child,
          )
        : undefined;
    if (check && checkScripts) {
        volumes.push({ name: "nccl-check", configMap: { name: `${d.jobName}-nccl-check`, defaultMode: 0o555 } });
    }
    // The pod's program files in one ConfigMap: vLLM's metrics-only listener config (observability), the
    // role runner and its module (the shared container's roles always, the trainer with observability).
    // The listener is a native sidecar of the pod that runs vLLM (started first, stopped with the pod's
    // main container, so the Job still completes).
    const listener = d.metrics?.vllm;
    const programs = d.programs
        ? new k8s.core.v1.ConfigMap(
              `${name}-programs`,
              {
                  metadata: { name: d.programs.configMap, namespace: ns, labels: { "app.kubernetes.io/part-of": "agent-rl-infra" } },
                  data: Object.fromEntries(d.programs.files.map((f) => [f.file, f.text])),
              },
              child,
          )
        : undefined;
    const listenerContainer = listener ? { ...metricsSidecarContainer(listener), restartPolicy: "Always" } : undefined;
    const listenerVolumes = listener && d.programs ? metricsSidecarVolumes([listener], d.programs.configMap) : [];
    // gpuSharing shared: one container with every GPU (NCCL P2P); else vLLM as a native sidecar.
    const merged = d.gpuSharing.oneContainer ? oneContainer(d) : undefined;
    const main = container(merged ?? d.trainer, d, provided);
    // The API token (a black-box trainer claims sandboxes) reaches the trainer's container only, never a
    // vLLM sidecar: the pod mounts none, the trainer gets the projected token at the standard path.
    if (d.automountServiceAccountToken) {
        volumes.push(SERVICE_ACCOUNT_TOKEN_VOLUME);
        main.volumeMounts = [
            ...((main.volumeMounts as k8s.types.input.core.v1.VolumeMount[]) ?? []),
            { name: SERVICE_ACCOUNT_TOKEN_VOLUME.name, mountPath: SERVICE_ACCOUNT_PATH, readOnly: true },
        ];
    }
    if (check)
        main.volumeMounts = [
            ...((main.volumeMounts as k8s.types.input.core.v1.VolumeMount[]) ?? []),
            { name: "nccl-check", mountPath: path.dirname(check.path), readOnly: true },
        ];
    // The role runner the trainer's container runs (both roles under the supervisor in the shared layout).
    if (d.roleRunner && d.programs) {
        main.volumeMounts = [
            ...((main.volumeMounts as k8s.types.input.core.v1.VolumeMount[]) ?? []),
            { name: METRICS_PROGRAMS_VOLUME, mountPath: METRICS_PROGRAM_DIR, readOnly: true },
        ];
        // One node with the listener: the pod has the volume through the listener's already.
        if (d.multiNode !== undefined || !listenerVolumes.some((v) => v.name === METRICS_PROGRAMS_VOLUME))
            volumes.push({ name: METRICS_PROGRAMS_VOLUME, configMap: { name: d.programs.configMap, defaultMode: 0o444 } });
    }
    // training.nodes > 1: one JobSet of vLLM and the trainers over the nodes, planned first so vLLM's
    // Service can select this JobSet's vLLM pod by name.
    const plannedJobSet =
        d.multiNode && d.vllm
            ? planMultiNodeJobSet(d, d.multiNode, {
                  trainer: main,
                  vllm: container(d.vllm, d, provided),
                  volumes,
                  ...(listenerContainer ? { vllmSidecars: [listenerContainer], vllmVolumes: listenerVolumes } : {}),
              })
            : undefined;
    // Black box: the ClusterIP Service in front of vLLM, before the Job so the ingress can wait
    // for it. Not awaited: its endpoints become ready only once the model has loaded (minutes to
    // tens of minutes), which no `pulumi up` should wait for; the ingress needs only its name.
    // With nodes > 1 it selects the vLLM pod of this run's JobSet, and the trainer reaches vLLM through it too.
    const access = d.ingressAccess;
    const vllmServiceName = access?.serviceName ?? d.multiNode?.vllmService;
    const vllmService = vllmServiceName
        ? new k8s.core.v1.Service(
              `${name}-vllm-service`,
              {
                  metadata: {
                      name: vllmServiceName,
                      namespace: ns,
                      labels: { "app.kubernetes.io/part-of": "agent-rl-infra" },
                      annotations: { ...SKIP_AWAIT },
                  },
                  // ClusterIP only, port 8000 only: the ingress is the one public face of vLLM.
                  spec: {
                      type: "ClusterIP",
                      selector: plannedJobSet ? { ...plannedJobSet.vllmSelector } : labels,
                      ports: [{ name: "http", port: VLLM_PORT, targetPort: VLLM_PORT, protocol: "TCP" }],
                  },
              },
              child,
          )
        : undefined;

    const dependsOn = [
        serviceAccount,
        ...secretResources,
        ...(modelCache ? [modelCache] : []),
        ...(checkpoints ? [checkpoints] : []),
        ...(checkScripts ? [checkScripts] : []),
        ...(programs ? [programs] : []),
        ...(vllmService ? [vllmService] : []),
        ...waitFor,
    ];
    const multi = d.multiNode && plannedJobSet ? buildMultiNodeTraining(name, d, d.multiNode, plannedJobSet, { namespace: ns, dependsOn }, parent) : undefined;
    const sidecar = d.vllm && !merged ? { ...container(d.vllm, d, provided), restartPolicy: "Always" } : undefined;
    const podSpec: k8s.types.input.core.v1.PodSpec = {
        // podFailurePolicy requires restartPolicy Never.
        restartPolicy: "Never",
        ...trainingPodBase(d),
        // Native sidecar: starts first, the trainer starts only once its startup probe passed,
        // and it is stopped when the trainer exits (Kubernetes >= 1.29).
        // The metrics listener first: it answers 502 until vLLM's port opens, and never holds the trainer back.
        ...(sidecar || listenerContainer ? { initContainers: [...(listenerContainer ? [listenerContainer] : []), ...(sidecar ? [sidecar] : [])] } : {}),
        containers: [main],
        volumes: [...volumes, ...listenerVolumes],
    };
    const queue = d.kueueQueue;
    const job =
        multi ??
        new k8s.batch.v1.Job(
            `${name}-job`,
            {
                metadata: {
                    name: jobObjectName(d, podSpec, annotationsOf(d, "trainer").annotations),
                    namespace: ns,
                    labels: queue !== undefined ? { ...labels, [KUEUE_QUEUE_LABEL]: queue } : labels,
                    annotations: { ...SKIP_AWAIT },
                },
                spec: {
                    // Kueue's contract: a suspended Job with the queue label, which Kueue unsuspends on admission.
                    ...(queue !== undefined ? { suspend: true } : {}),
                    backoffLimit: d.job.backoffLimit,
                    activeDeadlineSeconds: d.job.activeDeadlineSeconds,
                    podFailurePolicy: {
                        rules: [
                            // A trainer that exits non-zero failed for a reason a retry will not fix.
                            { action: "FailJob", onExitCodes: { containerName: CONTAINER.trainer, operator: "NotIn", values: [0] } },
                            // A drained or preempted node is not the run's fault: retry without using up backoffLimit.
                            { action: "Ignore", onPodConditions: [{ type: "DisruptionTarget", status: "True" }] },
                        ],
                    },
                    template: { metadata: { labels: { ...labels, ...d.metrics?.stackLabels }, ...annotationsOf(d, "trainer") }, spec: podSpec },
                },
            },
            {
                ...child,
                dependsOn,
                // A Job's pod template is immutable: any change of the run (a new run id, or a trainer
                // setting under the same one) replaces the Job, which is deleted first. skipAwait (no
                // waiting hours for the run to finish) also skips waiting for that delete, so the new Job
                // carries a hash of its pod template in its name and never meets the terminating one.
                // The scheduler keeps the new pod Pending until the old one frees the GPUs: never two
                // trainers on them. The checkpoints stay on their volume.
                deleteBeforeReplace: true,
                // Kueue unsuspends an admitted Job; a later `up` must not suspend it again.
                ...(queue !== undefined ? { ignoreChanges: ["spec.suspend"] } : {}),
            },
        );

    // Who may reach the pod: in black box only the ingress proxy, on vLLM's port; in white box nobody
    // (NCCL and localhost:8000 stay inside the pod, which NetworkPolicy never filters); with observability
    // the scraper on the metrics ports alone (never 8000). With nodes > 1 the multi-node module writes the policies.
    const scrape = d.metrics
        ? [
              scrapeIngressRule(
                  d.metrics.scraper,
                  d.metrics.scraped.flatMap((s) => s.ports),
              ),
          ]
        : [];
    if (!multi)
        new k8s.networking.v1.NetworkPolicy(
            `${name}-policy`,
            {
                metadata: { name: d.jobName, namespace: ns, labels: { "app.kubernetes.io/part-of": "agent-rl-infra" } },
                spec: {
                    podSelector: { matchLabels: labels },
                    policyTypes: ["Ingress"],
                    ingress: access
                        ? [
                              {
                                  from: [
                                      {
                                          namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: access.fromNamespace } },
                                          podSelector: { matchLabels: { ...access.fromPodLabels } },
                                      },
                                  ],
                                  ports: [{ protocol: "TCP", port: access.port }],
                              },
                              ...scrape,
                          ]
                        : scrape,
                },
            },
            child,
        );
    // What the trainer may reach: DNS, this stack's env routers, ingress and sandboxes, the API server
    // when it claims sandboxes, and public addresses on 443 (the Hub). Never the metadata service,
    // other pods, or the node. Loopback (vLLM, NCCL) is not filtered by NetworkPolicy.
    const egress = multi ? undefined : d.egress;
    if (egress) {
        new k8s.networking.v1.NetworkPolicy(
            `${name}-egress`,
            {
                metadata: { name: `${d.jobName}-egress`, namespace: ns, labels: { "app.kubernetes.io/part-of": "agent-rl-infra" } },
                spec: {
                    podSelector: { matchLabels: labels },
                    policyTypes: ["Egress"],
                    egress: trainerEgressRules(egress),
                },
            },
            child,
        );
    }
    const record = (pvc: k8s.core.v1.PersistentVolumeClaim | undefined, v: TrainingDescription["modelCache"]) =>
        pvc && v
            ? pulumi
                  .all([pvc.metadata.namespace, pvc.spec.storageClassName])
                  .apply(([namespace, storageClassName]) => ({ namespace, name: v.name, size: v.size, storageClassName }))
            : undefined;
    const claims = pulumi.all([record(modelCache, d.modelCache), record(checkpoints, d.checkpoints)]).apply(([m, c]) => ({
        ...(m ? { modelCache: m } : {}),
        ...(c ? { checkpoints: c } : {}),
    }));
    return { job, vllmService, claims };
}
