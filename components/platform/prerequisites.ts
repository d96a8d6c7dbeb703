/**
 * What a stack uses but neither creates nor checks: each external reference of a config, with the
 * symptom of its absence and a command that checks it (plan.md lists them, `pulumi up` logs them).
 */
import { sandboxPoolOf } from "../config/sandbox-providers";
import { KUEUE_RELEASE, SANDBOX_CONTROLLER_LABEL } from "../config/cluster-schema";
import type { PlatformConfig } from "../config/types";
import { AGENT_SANDBOX_VERSION } from "../sandbox";
import type { PlatformPlan, Prerequisite } from "./model";

type KubernetesTarget = Extract<PlatformConfig["target"], { kind: "kubernetes" }>;
type Names = PlatformPlan["names"];

/** The GPU resource name as a kubectl custom-columns path (its dots escaped). */
const gpuColumn = (gpu: string) => gpu.replace(/\./g, "\\.");

/** Every external reference of a config, each with the symptom of its absence and a check. */
export function externalPrerequisites(config: PlatformConfig, names: Names): Prerequisite[] {
    const t = config.target;
    if (t.kind !== "kubernetes") return [dockerRuntime()];
    return [
        ...clusterBasics(t),
        ...multiNode(config, t),
        ...kueue(config, t, names),
        ...sandboxController(config),
        ...ingressTls(config, names),
        ...ingressGateway(config, names),
    ];
}

/** Docker: the GPU runtime the vLLM and trainer containers ask for. */
function dockerRuntime(): Prerequisite {
    return {
        what: "the NVIDIA container runtime on the Docker host",
        field: "target.host",
        otherwise: "vLLM and the trainer fail to start (device request refused)",
        check: "docker info --format '{{json .Runtimes}}' (lists nvidia)",
    };
}

/** Kubernetes, every stack: GPUs, NetworkPolicy enforcement, the priority class, storage. */
function clusterBasics(t: KubernetesTarget): Prerequisite[] {
    const gpu = t.gpuResourceName;
    const out: Prerequisite[] = [];
    out.push({
        what: `the GPU device plugin (extended resource ${gpu})`,
        field: "target.gpuResourceName",
        otherwise: "the training pod stays Pending for ever",
        check: `kubectl get nodes -o custom-columns=NAME:.metadata.name,GPU:.status.allocatable.${gpuColumn(gpu)}`,
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
    return out;
}

/** training.nodes > 1: JobSet, enough GPU nodes with NCCL's ports open, ReadWriteMany volumes. */
function multiNode(config: PlatformConfig, t: KubernetesTarget): Prerequisite[] {
    const training = config.training;
    if (training.nodes <= 1) return [];
    const gpu = t.gpuResourceName;
    return [
        {
            what: "the JobSet controller and CRD, v0.10 or later (tested: v0.12.0; jobset.x-k8s.io/v1alpha2), with its webhooks",
            field: "training.nodes",
            otherwise:
                "`pulumi up` fails on the unknown JobSet kind, or, with the CRD but no controller, the trainer never gets a pod (and without its pod webhook two trainer pods may share a node)",
            check: "kubectl get crd jobsets.jobset.x-k8s.io && kubectl get deploy -A | grep jobset-controller (or npm run preflight)",
        },
        {
            what: `${training.nodes + 1} GPU nodes with ${training.gpusOnNode} ${gpu} each (${training.nodes} for the trainer, one for vLLM), with TCP open between pods on every port (NCCL)`,
            field: "training.nodes",
            otherwise: "trainer pods stay Pending (one per node, all or none start), or NCCL hangs at the first collective when pods cannot reach each other",
            check: `kubectl get nodes -l nvidia.com/gpu.present=true -o custom-columns=NAME:.metadata.name,GPU:.status.allocatable.${gpuColumn(gpu)}`,
        },
        {
            what: `ReadWriteMany volumes from ${t.storageClassName !== undefined ? `StorageClass ${t.storageClassName}` : "the default StorageClass"} (NFS, CephFS, Filestore, EFS, ...)`,
            field: "target.storageClassName",
            otherwise: "the model-cache and checkpoint claims stay Pending, and every trainer pod and vLLM with them",
            check:
                t.storageClassName !== undefined
                    ? `kubectl get storageclass ${t.storageClassName} -o jsonpath='{.provisioner}'`
                    : "kubectl get storageclass (the default's provisioner must support ReadWriteMany)",
        },
    ];
}

/** target.kueueQueue: Kueue, its integration for the trainer's kind, and the LocalQueue. */
function kueue(config: PlatformConfig, t: KubernetesTarget, names: Names): Prerequisite[] {
    if (t.kueueQueue === undefined) return [];
    const multi = config.training.nodes > 1;
    return [
        {
            what: `Kueue ${KUEUE_RELEASE} (the cluster stack's kueue.install, or its release manifest) with its ${multi ? "jobset.x-k8s.io/jobset" : "batch/job"} integration (on in the manifest's default configuration), and LocalQueue ${t.kueueQueue} in ${names.namespaces.training}, pointing at a ClusterQueue with GPU quota`,
            field: "target.kueueQueue",
            otherwise: `the trainer's ${multi ? "JobSet" : "Job"} stays suspended for ever (no pods)`,
            check: `kubectl -n ${names.namespaces.training} get localqueue ${t.kueueQueue}`,
        },
    ];
}

/** sandboxes.provider agent-sandbox: the RuntimeClass, and the controller with its CRDs. */
function sandboxController(config: PlatformConfig): Prerequisite[] {
    const sb = config.sandboxes;
    if (sandboxPoolOf(config)?.controller !== "agent-sandbox") return [];
    const out: Prerequisite[] = [];
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
    return out;
}

/** ingress.tls: the Secret it names, or cert-manager and the issuer. */
function ingressTls(config: PlatformConfig, names: Names): Prerequisite[] {
    const tls = config.ingress.enabled ? config.ingress.tls : undefined;
    const out: Prerequisite[] = [];
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
    return out;
}

/** ingress.exposure httproute: the Gateway the route attaches to. */
function ingressGateway(config: PlatformConfig, names: Names): Prerequisite[] {
    if (!(config.ingress.enabled && config.ingress.exposure === "httproute" && config.ingress.gateway)) return [];
    const g = config.ingress.gateway;
    return [
        {
            what: `Gateway ${g.namespace}/${g.name} admitting routes from ${names.namespaces.ingress}`,
            field: "ingress.gateway",
            otherwise: "the HTTPRoute is never accepted: sandboxes get no route",
            check: `kubectl -n ${g.namespace} get gateway ${g.name}`,
        },
    ];
}
