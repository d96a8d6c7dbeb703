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
import { buildMultiNodeTraining, type PlannedJobSet, planMultiNodeJobSet } from "./kubernetes-multinode";
import {
    CONTAINER,
    type ContainerDescription,
    type HttpProbe,
    KUEUE_QUEUE_LABEL,
    type SecretName,
    type TrainerEgress,
    type TrainingDescription,
    VLLM_PORT,
} from "./model";
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

/** Where a run's objects go: the parent's child options, the namespace (the Platform's output when given). */
interface Scope {
    readonly name: string;
    readonly d: TrainingDescription;
    readonly ns: pulumi.Input<string>;
    readonly child: { readonly parent: pulumi.Resource };
}

const PART_OF = { "app.kubernetes.io/part-of": "agent-rl-infra" } as const;

/** The trainer's ServiceAccount; it never mounts a token itself (the pod opts in only when it must claim sandboxes). */
function serviceAccount(s: Scope): k8s.core.v1.ServiceAccount {
    return new k8s.core.v1.ServiceAccount(
        `${s.name}-serviceaccount`,
        {
            metadata: { name: s.d.serviceAccount, namespace: s.ns, labels: { ...PART_OF } },
            automountServiceAccountToken: false,
            ...pullSecretRefs(s.d.imagePullSecrets),
        },
        s.child,
    );
}

/** The Pulumi name suffix of a training Secret. */
function secretResourceSuffix(secret: SecretName): string {
    const fixed: Partial<Record<SecretName, string>> = { hfToken: "hf-token", rolloutAdminKey: "rollout-admin-key" };
    return fixed[secret] ?? secret.toLowerCase();
}

/**
 * Only the Secrets a container references: the black-box trainer on the agent-sandbox pool gets
 * no ingress key (the sandbox pod's forwarder holds it), so no copy of it lands in training's namespace.
 */
function secrets(s: Scope, provided: Secrets): pulumi.Resource[] {
    const d = s.d;
    const referenced = new Set<SecretName>([d.vllm, d.trainer].flatMap((c) => (c === undefined ? [] : Object.values(c.secretEnv))));
    const made: pulumi.Resource[] = [];
    for (const secret of Object.keys(d.secrets) as SecretName[]) {
        const value = provided[secret];
        if (value === undefined || !referenced.has(secret)) continue;
        const ref = d.secrets[secret];
        made.push(
            new k8s.core.v1.Secret(
                `${s.name}-${secretResourceSuffix(secret)}`,
                {
                    metadata: { name: ref.name, namespace: s.ns, labels: { ...PART_OF } },
                    type: "Opaque",
                    stringData: { [ref.key]: pulumi.secret(value) },
                },
                s.child,
            ),
        );
    }
    return made;
}

/**
 * A stack-wide claim (shared by runs). skipAwait: with a WaitForFirstConsumer StorageClass a
 * claim binds only once the Job's pod is scheduled, and the Job waits for the claim.
 * The checkpoints survive `destroy` (retained, in the retained training namespace) and are
 * adopted by the next `up` (patchForce); the model cache goes with the stack.
 */
function claim(s: Scope, role: "model-cache" | "checkpoints", v: NonNullable<TrainingDescription["modelCache"]>): k8s.core.v1.PersistentVolumeClaim {
    return new k8s.core.v1.PersistentVolumeClaim(
        `${s.name}-${role}`,
        {
            metadata: {
                name: v.name,
                namespace: s.ns,
                labels: { ...PART_OF },
                annotations: { ...SKIP_AWAIT, ...(role === "checkpoints" ? ADOPT : {}) },
            },
            spec: {
                accessModes: [v.accessMode],
                ...(s.d.scheduling.storageClassName !== undefined ? { storageClassName: s.d.scheduling.storageClassName } : {}),
                resources: { requests: { storage: v.size } },
            },
        },
        { ...s.child, retainOnDelete: role === "checkpoints" },
    );
}

/** The NCCL check script, read-only next to the supervisor (gpuSharing shared + ncclCheck). */
function ncclCheckConfigMap(s: Scope): k8s.core.v1.ConfigMap | undefined {
    const check = s.d.gpuSharing.check;
    if (!check) return undefined;
    return new k8s.core.v1.ConfigMap(
        `${s.name}-nccl-check`,
        {
            metadata: { name: `${s.d.jobName}-nccl-check`, namespace: s.ns, labels: { ...PART_OF } },
            data: { [path.basename(check.path)]: ncclCheckSource() },
        },
        s.child,
    );
}

/**
 * The pod's program files in one ConfigMap: vLLM's metrics-only listener config (observability), the
 * role runner and its module (the shared container's roles always, the trainer with observability).
 */
function programsConfigMap(s: Scope): k8s.core.v1.ConfigMap | undefined {
    const programs = s.d.programs;
    if (!programs) return undefined;
    return new k8s.core.v1.ConfigMap(
        `${s.name}-programs`,
        {
            metadata: { name: programs.configMap, namespace: s.ns, labels: { ...PART_OF } },
            data: Object.fromEntries(programs.files.map((f) => [f.file, f.text])),
        },
        s.child,
    );
}

/**
 * The listener is a native sidecar of the pod that runs vLLM (started first, stopped with the pod's
 * main container, so the Job still completes), with its volumes.
 */
interface MetricsListener {
    readonly container?: k8s.types.input.core.v1.Container;
    readonly volumes: k8s.types.input.core.v1.Volume[];
}

function metricsListener(d: TrainingDescription): MetricsListener {
    const listener = d.metrics?.vllm;
    return {
        container: listener ? { ...metricsSidecarContainer(listener), restartPolicy: "Always" } : undefined,
        volumes: listener && d.programs ? metricsSidecarVolumes([listener], d.programs.configMap) : [],
    };
}

/** The pod's volumes: shm, the claims (or scratch), the NCCL check, the trainer's API token, the program files. */
function podVolumes(d: TrainingDescription, listenerVolumes: readonly k8s.types.input.core.v1.Volume[]): k8s.types.input.core.v1.Volume[] {
    const volumes: k8s.types.input.core.v1.Volume[] = [
        // Memory-backed /dev/shm: PyTorch/NCCL need far more than the 64 MiB default (vLLM container docs).
        { name: volumeName("shm"), emptyDir: { medium: "Memory", sizeLimit: d.shmSize } },
        d.modelCache
            ? { name: volumeName("modelCache"), persistentVolumeClaim: { claimName: d.modelCache.name } }
            : { name: volumeName("modelCache"), emptyDir: {} },
        d.checkpoints
            ? { name: volumeName("checkpoints"), persistentVolumeClaim: { claimName: d.checkpoints.name } }
            : { name: volumeName("checkpoints"), emptyDir: {} },
    ];
    if (d.gpuSharing.check) volumes.push({ name: "nccl-check", configMap: { name: `${d.jobName}-nccl-check`, defaultMode: 0o555 } });
    if (d.automountServiceAccountToken) volumes.push(SERVICE_ACCOUNT_TOKEN_VOLUME);
    // One node with the listener: the pod has the program files through the listener's volumes already.
    if (d.roleRunner && d.programs && (d.multiNode !== undefined || !listenerVolumes.some((v) => v.name === METRICS_PROGRAMS_VOLUME)))
        volumes.push({ name: METRICS_PROGRAMS_VOLUME, configMap: { name: d.programs.configMap, defaultMode: 0o444 } });
    return volumes;
}

/**
 * The pod's main container: one container with every GPU in gpuSharing shared (NCCL P2P), else the
 * trainer. The API token (a black-box trainer claims sandboxes) reaches it only, never a vLLM sidecar:
 * the pod mounts none, the trainer gets the projected token at the standard path. Then the NCCL check
 * and the role runner's program files, read-only.
 */
function mainContainer(d: TrainingDescription, provided: Secrets): k8s.types.input.core.v1.Container {
    const main = container(d.gpuSharing.oneContainer ? oneContainer(d) : d.trainer, d, provided);
    const check = d.gpuSharing.check;
    const extra: k8s.types.input.core.v1.VolumeMount[] = [
        ...(d.automountServiceAccountToken ? [{ name: SERVICE_ACCOUNT_TOKEN_VOLUME.name, mountPath: SERVICE_ACCOUNT_PATH, readOnly: true }] : []),
        ...(check ? [{ name: "nccl-check", mountPath: path.dirname(check.path), readOnly: true }] : []),
        ...(d.roleRunner && d.programs ? [{ name: METRICS_PROGRAMS_VOLUME, mountPath: METRICS_PROGRAM_DIR, readOnly: true }] : []),
    ];
    if (extra.length > 0) main.volumeMounts = [...((main.volumeMounts as k8s.types.input.core.v1.VolumeMount[]) ?? []), ...extra];
    return main;
}

/**
 * Black box: the ClusterIP Service in front of vLLM, before the Job so the ingress can wait
 * for it. Not awaited: its endpoints become ready only once the model has loaded (minutes to
 * tens of minutes), which no `pulumi up` should wait for; the ingress needs only its name.
 * With nodes > 1 it selects the vLLM pod of this run's JobSet, and the trainer reaches vLLM through it too.
 */
function vllmService(s: Scope, plannedJobSet: PlannedJobSet | undefined): k8s.core.v1.Service | undefined {
    const serviceName = s.d.ingressAccess?.serviceName ?? s.d.multiNode?.vllmService;
    if (!serviceName) return undefined;
    return new k8s.core.v1.Service(
        `${s.name}-vllm-service`,
        {
            metadata: { name: serviceName, namespace: s.ns, labels: { ...PART_OF }, annotations: { ...SKIP_AWAIT } },
            // ClusterIP only, port 8000 only: the ingress is the one public face of vLLM.
            spec: {
                type: "ClusterIP",
                selector: plannedJobSet ? { ...plannedJobSet.vllmSelector } : { ...s.d.podLabels },
                ports: [{ name: "http", port: VLLM_PORT, targetPort: VLLM_PORT, protocol: "TCP" }],
            },
        },
        s.child,
    );
}

/** The one-node pod: the metrics listener and vLLM as native sidecars, the main container, the volumes. */
function podSpec(
    d: TrainingDescription,
    provided: Secrets,
    parts: {
        readonly main: k8s.types.input.core.v1.Container;
        readonly volumes: readonly k8s.types.input.core.v1.Volume[];
        readonly listener: MetricsListener;
    },
): k8s.types.input.core.v1.PodSpec {
    const { main, volumes, listener } = parts;
    const sidecar = d.vllm && !d.gpuSharing.oneContainer ? { ...container(d.vllm, d, provided), restartPolicy: "Always" } : undefined;
    const initContainers = [...(listener.container ? [listener.container] : []), ...(sidecar ? [sidecar] : [])];
    return {
        // podFailurePolicy requires restartPolicy Never.
        restartPolicy: "Never",
        ...trainingPodBase(d),
        // Native sidecar: starts first, the trainer starts only once its startup probe passed,
        // and it is stopped when the trainer exits (Kubernetes >= 1.29).
        // The metrics listener first: it answers 502 until vLLM's port opens, and never holds the trainer back.
        ...(initContainers.length > 0 ? { initContainers } : {}),
        containers: [main],
        volumes: [...volumes, ...listener.volumes],
    };
}

/** The run's one-node Job. */
function job(s: Scope, spec: k8s.types.input.core.v1.PodSpec, dependsOn: pulumi.Resource[]): k8s.batch.v1.Job {
    const d = s.d;
    const labels = { ...d.podLabels };
    const queue = d.kueueQueue;
    return new k8s.batch.v1.Job(
        `${s.name}-job`,
        {
            metadata: {
                name: jobObjectName(d, spec, annotationsOf(d, "trainer").annotations),
                namespace: s.ns,
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
                template: { metadata: { labels: { ...labels, ...d.metrics?.stackLabels }, ...annotationsOf(d, "trainer") }, spec },
            },
        },
        {
            ...s.child,
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
}

/**
 * Who may reach the pod: in black box only the ingress proxy, on vLLM's port; in white box nobody
 * (NCCL and localhost:8000 stay inside the pod, which NetworkPolicy never filters); with observability
 * the scraper on the metrics ports alone (never 8000). With nodes > 1 the multi-node module writes the policies.
 */
function ingressPolicy(s: Scope): k8s.networking.v1.NetworkPolicy {
    const d = s.d;
    const access = d.ingressAccess;
    const scrape = d.metrics
        ? [
              scrapeIngressRule(
                  d.metrics.scraper,
                  d.metrics.scraped.flatMap((p) => p.ports),
              ),
          ]
        : [];
    return new k8s.networking.v1.NetworkPolicy(
        `${s.name}-policy`,
        {
            metadata: { name: d.jobName, namespace: s.ns, labels: { ...PART_OF } },
            spec: {
                podSelector: { matchLabels: { ...d.podLabels } },
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
        s.child,
    );
}

/**
 * What the trainer may reach: DNS, this stack's env routers, ingress and sandboxes, the API server
 * when it claims sandboxes, and public addresses on 443 (the Hub). Never the metadata service,
 * other pods, or the node. Loopback (vLLM, NCCL) is not filtered by NetworkPolicy.
 */
function egressPolicy(s: Scope, egress: TrainerEgress): k8s.networking.v1.NetworkPolicy {
    return new k8s.networking.v1.NetworkPolicy(
        `${s.name}-egress`,
        {
            metadata: { name: `${s.d.jobName}-egress`, namespace: s.ns, labels: { ...PART_OF } },
            spec: {
                podSelector: { matchLabels: { ...s.d.podLabels } },
                policyTypes: ["Egress"],
                egress: trainerEgressRules(egress),
            },
        },
        s.child,
    );
}

/** The stack-wide claims as made: size asked for and the class the cluster gave. */
function claimRecords(
    d: TrainingDescription,
    modelCache: k8s.core.v1.PersistentVolumeClaim | undefined,
    checkpoints: k8s.core.v1.PersistentVolumeClaim | undefined,
): pulumi.Output<ClaimRecords> {
    const record = (pvc: k8s.core.v1.PersistentVolumeClaim | undefined, v: TrainingDescription["modelCache"]) =>
        pvc && v
            ? pulumi
                  .all([pvc.metadata.namespace, pvc.spec.storageClassName])
                  .apply(([namespace, storageClassName]) => ({ namespace, name: v.name, size: v.size, storageClassName }))
            : undefined;
    return pulumi.all([record(modelCache, d.modelCache), record(checkpoints, d.checkpoints)]).apply(([m, c]) => ({
        ...(m ? { modelCache: m } : {}),
        ...(c ? { checkpoints: c } : {}),
    }));
}

/** Registers the run's Kubernetes objects as children of `parent`, in this order. */
export function buildKubernetesTraining(
    name: string,
    d: TrainingDescription,
    provided: Secrets,
    parent: pulumi.Resource,
    waitFor: readonly pulumi.Resource[] = [],
    namespace?: pulumi.Input<string>,
): KubernetesTrainingResources {
    // The Platform's Namespace output when given, so every object waits for the namespace.
    const s: Scope = { name, d, ns: namespace ?? d.namespace, child: { parent } };
    const account = serviceAccount(s);
    const secretResources = secrets(s, provided);
    const modelCache = d.modelCache ? claim(s, "model-cache", d.modelCache) : undefined;
    const checkpoints = d.checkpoints ? claim(s, "checkpoints", d.checkpoints) : undefined;
    const checkScripts = ncclCheckConfigMap(s);
    const programs = programsConfigMap(s);
    const listener = metricsListener(d);
    const volumes = podVolumes(d, listener.volumes);
    const main = mainContainer(d, provided);
    // training.nodes > 1: one JobSet of vLLM and the trainers over the nodes, planned first so vLLM's
    // Service can select this JobSet's vLLM pod by name.
    const plannedJobSet =
        d.multiNode && d.vllm
            ? planMultiNodeJobSet(d, d.multiNode, {
                  trainer: main,
                  vllm: container(d.vllm, d, provided),
                  volumes,
                  ...(listener.container ? { vllmSidecars: [listener.container], vllmVolumes: listener.volumes } : {}),
              })
            : undefined;
    const service = vllmService(s, plannedJobSet);
    const dependsOn = [
        account,
        ...secretResources,
        ...[modelCache, checkpoints, checkScripts, programs, service].filter((r): r is NonNullable<typeof r> => r !== undefined),
        ...waitFor,
    ];
    if (d.multiNode && plannedJobSet) {
        const jobSet = buildMultiNodeTraining(name, d, d.multiNode, plannedJobSet, { namespace: s.ns, dependsOn }, parent);
        return { job: jobSet, vllmService: service, claims: claimRecords(d, modelCache, checkpoints) };
    }
    const trainerJob = job(s, podSpec(d, provided, { main, volumes, listener }), dependsOn);
    ingressPolicy(s);
    if (d.egress) egressPolicy(s, d.egress);
    return { job: trainerJob, vllmService: service, claims: claimRecords(d, modelCache, checkpoints) };
}
