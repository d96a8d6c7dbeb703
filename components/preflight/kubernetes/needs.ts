/**
 * What the stack asks of the cluster (pure): the CRDs, controllers, classes and namespaces the
 * config names, and what its pods and claims request, from the very pod specs the components
 * register. The reader (read.ts) reads exactly this; the checks compare against it.
 */
import { runsSandboxPool, sandboxPoolOf } from "../../config/sandbox-providers";
import { replicaStatefulSetSpec, routerDeploymentSpec } from "../../env";
import { ingressDeploymentSpec } from "../../ingress";
import type { PlatformPlan } from "../../platform";
import { SANDBOX_CORE_GROUP, SANDBOX_EXTENSIONS_GROUP, sandboxTemplateSpec, sandboxWarmPoolSpec } from "../../sandbox";
import { addQuantities, multiplyQuantity } from "../../shared/quantity";
import { value } from "../report";

/** agent-sandbox v1.0.1 CRDs (k8s/crds of the release) and the fields the stack and the trainer's client use in the served version. */
export function sandboxCrdExpectations(
    /** The run stack's plan; without one (the cluster stack) the fields every pool uses. */
    plan: PlatformPlan | undefined,
): Array<{ readonly name: string; readonly spec: readonly string[]; readonly status: readonly string[]; readonly scale?: boolean }> {
    const sb = plan?.sandboxes;
    return [
        // The trainer's client reads Sandbox.status.podIPs / serviceFQDN (k8s-agent-sandbox 1.0.8 sandbox.py).
        { name: `sandboxes.${SANDBOX_CORE_GROUP}`, spec: ["podTemplate"], status: ["podIPs", "serviceFQDN"] },
        { name: `sandboxtemplates.${SANDBOX_EXTENSIONS_GROUP}`, spec: sb ? Object.keys(sandboxTemplateSpec(sb)) : ["podTemplate"], status: [] },
        { name: `sandboxwarmpools.${SANDBOX_EXTENSIONS_GROUP}`, spec: sb ? Object.keys(sandboxWarmPoolSpec(sb)) : ["replicas"], status: [], scale: true },
        // k8s-agent-sandbox 1.0.8 creates claims with warmPoolRef and lifecycle (k8s_helper.py).
        { name: `sandboxclaims.${SANDBOX_EXTENSIONS_GROUP}`, spec: ["warmPoolRef", "lifecycle"], status: ["sandbox"] },
    ];
}

/** JobSet's CRD and the version the multi-node trainer is written in (training/kubernetes-multinode.ts). */
export const JOBSET_CRD = "jobsets.jobset.x-k8s.io";
export const JOBSET_VERSION = "v1alpha2";
/** JobSet's release manifest: one home, the cluster stack's schema (jobSet.install renders it). */
export { JOBSET_MANIFEST_URL, JOBSET_RELEASE } from "../../config/cluster-schema";
export const GATEWAY_CRDS = ["gateways.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io"] as const;
export const CERT_MANAGER_CERTIFICATES_CRD = "certificates.cert-manager.io";
/** The cert-manager release the tests install the CRDs of; any v1 release serves the same kinds. */
export const CERT_MANAGER_MANIFEST_URL = "https://github.com/cert-manager/cert-manager/releases/download/v1.21.2/cert-manager.yaml";

/** The label of agent-sandbox's controller Deployment: one home, the config's (the plan's prerequisites name it too). */
export { SANDBOX_CONTROLLER_LABEL } from "../../config";
/** JobSet's controller Deployment (jobset's config/components/manager/manager.yaml: jobset-controller-manager in jobset-system). */
export const JOBSET_CONTROLLER_LABEL = "app.kubernetes.io/part-of=jobset,app.kubernetes.io/component=manager";
/** Kueue's LocalQueue CRD (the queue a Job or JobSet names with kueue.x-k8s.io/queue-name). */
export const KUEUE_LOCALQUEUE_CRD = "localqueues.kueue.x-k8s.io";
/** Kueue's release manifest: one home, the cluster stack's schema (kueue.install renders it). */
export { KUEUE_MANIFEST_URL, KUEUE_RELEASE } from "../../config/cluster-schema";

/**
 * DaemonSets of CNIs that enforce NetworkPolicy, by name (a heuristic: a name says which CNI runs,
 * not that policy enforcement is switched on). GKE Dataplane V2's agent is `anetd` (Cilium).
 */
export const POLICY_CNI_DAEMONSETS: Readonly<Record<string, string>> = {
    "calico-node": "Calico",
    canal: "Canal (Calico policy)",
    cilium: "Cilium",
    anetd: "GKE Dataplane V2 (Cilium)",
    "antrea-agent": "Antrea",
    "kube-router": "kube-router",
    "weave-net": "Weave Net",
};
/** CNIs known not to enforce NetworkPolicy on their own. */
export const NON_POLICY_CNI_DAEMONSETS: Readonly<Record<string, string>> = { "kube-flannel-ds": "flannel", flannel: "flannel" };

/** What the config makes the cluster need; the reader reads exactly this. */
export interface KubernetesNeeds {
    /** PriorityClass name -> the config fields that name it. */
    readonly priorityClasses: Readonly<Record<string, readonly string[]>>;
    /** RuntimeClass name -> the config fields that name it. */
    readonly runtimeClasses: Readonly<Record<string, readonly string[]>>;
    readonly crds: readonly string[];
    readonly sandboxController: boolean;
    /** training.nodes > 1: the JobSet controller must run. */
    readonly jobSetController: boolean;
    /** target.kueueQueue: the LocalQueue (in the training namespace) the trainer is submitted to. */
    readonly kueue?: { readonly queue: string; readonly namespace: string };
    readonly gateway?: { readonly name: string; readonly namespace: string; readonly sectionName?: string };
    readonly issuer?: { readonly name: string; readonly kind: "Issuer" | "ClusterIssuer"; readonly group: string; readonly namespace: string };
    readonly tlsSecret?: { readonly name: string; readonly namespace: string };
    readonly namespaces: readonly string[];
    readonly storage: boolean;
}

export function kubernetesNeeds(plan: PlatformPlan): KubernetesNeeds {
    const c = plan.config;
    const t = c.target.kind === "kubernetes" ? c.target : undefined;
    const runtimeClasses: Record<string, string[]> = {};
    const useRuntime = (name: string | undefined, field: string) => {
        if (name !== undefined) runtimeClasses[name] = [...(runtimeClasses[name] ?? []), field];
    };
    if (runsSandboxPool(c)) useRuntime(c.sandboxes.runtimeClassName, "sandboxes.runtimeClassName");
    for (const e of c.envs) if (!e.external) useRuntime(e.runtimeClassName, `envs.${e.name}.runtimeClassName`);
    // With a cluster stack, a name the run's config leaves out is the cluster stack's (applyClusterStack).
    const fromCluster = c.clusterStack !== undefined ? ` or the cluster stack ${c.clusterStack}'s` : "";
    const priorityClasses: Record<string, string[]> = {};
    const usePriority = (name: string | undefined, field: string) => {
        if (name !== undefined) priorityClasses[name] = [...(priorityClasses[name] ?? []), field];
    };
    usePriority(t?.priorityClassName, `target.priorityClassName${fromCluster}`);
    if (runsSandboxPool(c)) usePriority(plan.sandboxes?.priorityClassName, `sandboxes.priorityClassName${fromCluster}`);
    const agentSandbox = sandboxPoolOf(c)?.controller === "agent-sandbox";
    const ingress = c.ingress.enabled ? c.ingress : undefined;
    const gateway = ingress?.exposure === "httproute" ? ingress.gateway : undefined;
    const tls = ingress?.tls;
    const issuer = tls?.mode === "cert-manager" && tls.issuer ? { ...tls.issuer, namespace: plan.names.namespaces.ingress } : undefined;
    const crds = [
        ...(agentSandbox ? sandboxCrdExpectations(plan).map((x) => x.name) : []),
        ...(gateway ? GATEWAY_CRDS : []),
        ...(plan.training.multiNode ? [JOBSET_CRD] : []),
        ...(t?.kueueQueue !== undefined ? [KUEUE_LOCALQUEUE_CRD] : []),
        ...(tls?.mode === "cert-manager" ? [CERT_MANAGER_CERTIFICATES_CRD, `${issuer?.kind === "Issuer" ? "issuers" : "clusterissuers"}.cert-manager.io`] : []),
    ];
    const tr = plan.training;
    return {
        priorityClasses,
        runtimeClasses,
        crds,
        sandboxController: agentSandbox,
        jobSetController: plan.training.multiNode !== undefined,
        ...(t?.kueueQueue !== undefined ? { kueue: { queue: t.kueueQueue, namespace: plan.names.namespaces.training } } : {}),
        gateway,
        issuer,
        tlsSecret: tls?.mode === "secret" && tls.secretName !== undefined ? { name: tls.secretName, namespace: plan.names.namespaces.ingress } : undefined,
        namespaces: Object.keys(stackRequests(plan)),
        storage: tr.modelCache !== undefined || tr.checkpoints !== undefined,
    };
}

/** Resource totals keyed as a ResourceQuota's `hard` is (requests.cpu, limits.memory, pods, ...), as quantities. */
export type ResourceTotals = Record<string, string>;

export function addTo(total: ResourceTotals, key: string, q: string | number | undefined): void {
    if (q === undefined) return;
    total[key] = total[key] === undefined ? String(q) : addQuantities(total[key], String(q));
}

/** Requests and limits of one pod spec (containers + native sidecars; a plain init container only when larger). */
export function podTotals(spec: any, gpuResource: string): ResourceTotals {
    const sum = (containers: any[]) => {
        const t: ResourceTotals = { pods: "1" };
        for (const ctr of containers) {
            const req = ctr.resources?.requests ?? {};
            const lim = ctr.resources?.limits ?? {};
            for (const r of ["cpu", "memory", "ephemeral-storage", gpuResource]) {
                // A request left out defaults to the limit (Kubernetes defaulting).
                addTo(t, `requests.${r}`, req[r] ?? lim[r]);
                addTo(t, `limits.${r}`, lim[r]);
            }
        }
        return t;
    };
    const running = sum([...(spec.containers ?? []), ...(spec.initContainers ?? []).filter((c: any) => c.restartPolicy === "Always")]);
    for (const init of (spec.initContainers ?? []).filter((c: any) => c.restartPolicy !== "Always")) {
        const one = sum([init]);
        for (const [k, v] of Object.entries(one)) if (k !== "pods" && (running[k] === undefined || value(v) > value(running[k]))) running[k] = v;
    }
    return running;
}

function times(t: ResourceTotals, n: number): ResourceTotals {
    return Object.fromEntries(Object.entries(t).map(([k, v]) => [k, multiplyQuantity(v, n)]));
}

export function merge(into: ResourceTotals, more: ResourceTotals): void {
    for (const [k, v] of Object.entries(more)) addTo(into, k, v);
}

/**
 * What the stack's pods and claims request, per namespace, from the very pod specs the
 * components register (one home: the component's spec functions), at full size.
 */
export function stackRequests(plan: PlatformPlan): Record<string, ResourceTotals> {
    const out: Record<string, ResourceTotals> = {};
    const at = (ns: string) => {
        out[ns] ??= {};
        return out[ns];
    };
    const t = plan.training;
    const gpu = t.scheduling.gpuResourceName;
    const training = at(t.namespace);
    for (const pod of trainingPods(plan)) {
        const r = { cpu: pod.cpu, memory: pod.memory, ...(pod.gpus > 0 ? { [gpu]: String(pod.gpus) } : {}) };
        merge(training, times(podTotals({ containers: [{ resources: { requests: r, limits: r } }] }, gpu), pod.count));
    }
    for (const v of [t.modelCache, t.checkpoints]) {
        if (!v) continue;
        addTo(training, "persistentvolumeclaims", 1);
        addTo(training, "requests.storage", v.size);
    }
    for (const e of plan.envs) {
        if (e.kind !== "deployed") continue;
        const ns = at(e.namespace);
        for (const w of [replicaStatefulSetSpec(e), routerDeploymentSpec(e)])
            merge(ns, times(podTotals((w.template as any).spec, gpu), Number(w.replicas ?? 1)));
    }
    if (plan.ingress) {
        const dep = ingressDeploymentSpec(plan.ingress, "preflight");
        merge(at(plan.ingress.names.namespace), times(podTotals((dep.template as any).spec, gpu), Number(dep.replicas ?? 1)));
    }
    if (plan.sandboxes) {
        // Live sandboxes at most: the warm pool plus the claimed ones (the stack's own quota, SandboxQuota).
        const q = plan.sandboxes.quota;
        const sb = at(plan.sandboxes.names.namespace);
        merge(sb, { pods: String(q.pods), "requests.cpu": q.cpu, "limits.cpu": q.cpu, "requests.memory": q.memory, "limits.memory": q.memory });
    }
    return out;
}

export interface PodNeeds {
    /** The check's name ("GPU node"; multi-node: "GPU nodes: trainers", "GPU node: vLLM"). */
    readonly check: string;
    /** What the pod is, for the message ("the training pod", "2 trainer pods (one per node)", "the vLLM pod"). */
    readonly what: string;
    readonly gpus: number;
    readonly cpu: string;
    readonly memory: string;
    /** Pods of this shape, each on a node of its own (multi-node: one trainer pod per node). */
    readonly count: number;
}

const podOf = (check: string, what: string, cs: ReadonlyArray<{ gpus: number; cpu: string; memory: string }>, count = 1): PodNeeds => ({
    check,
    what,
    gpus: cs.reduce((n, c) => n + c.gpus, 0),
    cpu: cs.map((c) => c.cpu).reduce((a, b) => addQuantities(a, b)),
    memory: cs.map((c) => c.memory).reduce((a, b) => addQuantities(a, b)),
    count,
});

/** The GPU pods of the run: one training pod (trainer + vLLM), or with training.nodes > 1 a trainer pod per node and vLLM's own. */
export function trainingPods(plan: PlatformPlan): PodNeeds[] {
    const t = plan.training;
    const m = t.multiNode;
    // observability: vLLM's metrics listener, a native sidecar of the pod that runs vLLM (it counts while the pod runs).
    const listener = t.metrics?.vllm ? [{ gpus: 0, cpu: t.metrics.vllm.cpu, memory: t.metrics.vllm.memory }] : [];
    if (!m) return [podOf("GPU node", "the training pod", [t.trainer, ...(t.vllm ? [t.vllm] : []), ...listener])];
    return [
        podOf("GPU nodes: trainers", `${m.nodes} trainer pods (one per node)`, [t.trainer], m.nodes),
        ...(t.vllm ? [podOf("GPU node: vLLM", "the vLLM pod", [t.vllm, ...listener])] : []),
    ];
}
