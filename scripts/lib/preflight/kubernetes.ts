/**
 * The Kubernetes preflight: what a stack needs from the cluster it points at, read with
 * kubectl (`--kubeconfig/--context`, `-o json`, bounded timeouts), then checked by pure
 * functions over the plan and what was read, so every message is unit-tested without a cluster.
 */
import { execFile } from "node:child_process";
import type { PlatformPlan } from "../../../components/platform";
import { replicaStatefulSetSpec, routerDeploymentSpec } from "../../../components/env";
import { ingressDeploymentSpec } from "../../../components/ingress";
import { AGENT_SANDBOX_MANIFEST_URL } from "../../../components/config";
import {
    AGENT_SANDBOX_VERSION,
    SANDBOX_API_VERSION,
    SANDBOX_CORE_GROUP,
    SANDBOX_EXTENSIONS_GROUP,
    sandboxTemplateSpec,
    sandboxWarmPoolSpec,
} from "../../../components/sandbox";
import { addQuantities, multiplyQuantity, quantityValue } from "../../../components/shared/quantity";
import { fail, type Finding, ok, warn } from "./report";

/** A read from the cluster: the value, or why it could not be read. */
export type Read<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string; readonly forbidden?: boolean };

/** Everything the checks look at, as the API server returned it (plain JSON objects). */
export interface KubernetesFacts {
    /** The context used: target.context, else the kubeconfig's current context. */
    readonly context: string;
    /** The kubeconfig file used (target.kubeconfig, else kubectl's default). */
    readonly kubeconfig: string;
    /** The API server URL of the context, when the kubeconfig names one. */
    readonly server?: string;
    /** Contexts the kubeconfig has (for the message when the stack's is missing). */
    readonly contexts: readonly string[];
    /** `kubectl version -o json`'s serverVersion: the API server answered. */
    readonly version: Read<{ readonly gitVersion: string; readonly major: string; readonly minor: string }>;
    readonly nodes: Read<readonly any[]>;
    readonly storageClasses: Read<readonly any[]>;
    /** The PriorityClasses the config names that exist. */
    readonly priorityClasses: Read<readonly any[]>;
    /** The RuntimeClasses the config names that exist. */
    readonly runtimeClasses: Read<readonly any[]>;
    /** The CustomResourceDefinitions the config needs that exist. */
    readonly crds: Read<readonly any[]>;
    /** Deployments labelled as the agent-sandbox controller, in any namespace. */
    readonly sandboxControllers: Read<readonly any[]>;
    /** Deployments labelled as JobSet's controller, in any namespace (read with training.nodes > 1). */
    readonly jobSetControllers: Read<readonly any[]>;
    /** The LocalQueue of target.kueueQueue (undefined: not found, or Kueue not installed). */
    readonly localQueue?: Read<any | undefined>;
    /** Every DaemonSet (the CNI heuristic). */
    readonly daemonSets: Read<readonly any[]>;
    /** The Gateway of exposure `httproute` (undefined: not found). */
    readonly gateway?: Read<any | undefined>;
    /** The cert-manager Issuer/ClusterIssuer (undefined: not found). */
    readonly issuer?: Read<any | undefined>;
    /** The TLS Secret of tls.mode `secret`: its type and data keys only (undefined: not found). */
    readonly tlsSecret?: Read<{ readonly type: string; readonly keys: readonly string[] } | undefined>;
    /** Per stack namespace: undefined when it does not exist, else its quotas and what the stack already runs there. */
    readonly namespaces: Read<Readonly<Record<string, NamespaceFacts | undefined>>>;
}

export interface NamespaceFacts {
    readonly quotas: readonly any[];
    /** Pods of this project (label app.kubernetes.io/part-of=agent-rl-infra) not finished: what an `up` replaces. */
    readonly stackPods: readonly any[];
    /** Names of PersistentVolumeClaims that exist (the stack's are reused, not counted twice). */
    readonly claims: readonly string[];
}

// ---------------------------------------------------------------------------------------------
// What the stack asks of the cluster (pure)

/** Kubernetes >= 1.30: ValidatingAdmissionPolicy v1 (the sandbox claim policy) is GA there; native sidecars (1.29) are on. */
export const MIN_KUBERNETES = { major: 1, minor: 30 } as const;

/** agent-sandbox v0.5.6 CRDs (k8s/crds of the release) and the fields the stack and the trainer's client use in the served version. */
export function sandboxCrdExpectations(
    plan: PlatformPlan,
): Array<{ readonly name: string; readonly spec: readonly string[]; readonly status: readonly string[]; readonly scale?: boolean }> {
    const sb = plan.sandboxes;
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
export const JOBSET_MANIFEST_URL = "https://github.com/kubernetes-sigs/jobset/releases/download/v0.10.1/manifests.yaml";
export const GATEWAY_CRDS = ["gateways.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io"] as const;
export const CERT_MANAGER_CERTIFICATES_CRD = "certificates.cert-manager.io";
/** The cert-manager release the tests install the CRDs of; any v1 release serves the same kinds. */
export const CERT_MANAGER_MANIFEST_URL = "https://github.com/cert-manager/cert-manager/releases/download/v1.21.2/cert-manager.yaml";

/** The label of agent-sandbox's controller Deployment (agent-sandbox k8s/controller.yaml, v0.5.6). */
export const SANDBOX_CONTROLLER_LABEL = "app=agent-sandbox-controller";
/** JobSet's controller Deployment (jobset's config/components/manager/manager.yaml: jobset-controller-manager in jobset-system). */
export const JOBSET_CONTROLLER_LABEL = "app.kubernetes.io/part-of=jobset,app.kubernetes.io/component=manager";
/** Kueue's LocalQueue CRD (the queue a Job or JobSet names with kueue.x-k8s.io/queue-name). */
export const KUEUE_LOCALQUEUE_CRD = "localqueues.kueue.x-k8s.io";

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
    if (c.sandboxes.provider === "agent-sandbox") useRuntime(c.sandboxes.runtimeClassName, "sandboxes.runtimeClassName");
    for (const e of c.envs) if (!e.external) useRuntime(e.runtimeClassName, `envs.${e.name}.runtimeClassName`);
    // With a cluster stack, a name the run's config leaves out is the cluster stack's (applyClusterStack).
    const fromCluster = c.clusterStack !== undefined ? ` or the cluster stack ${c.clusterStack}'s` : "";
    const priorityClasses: Record<string, string[]> = {};
    const usePriority = (name: string | undefined, field: string) => {
        if (name !== undefined) priorityClasses[name] = [...(priorityClasses[name] ?? []), field];
    };
    usePriority(t?.priorityClassName, `target.priorityClassName${fromCluster}`);
    if (c.sandboxes.provider === "agent-sandbox") usePriority(plan.sandboxes?.priorityClassName, `sandboxes.priorityClassName${fromCluster}`);
    const agentSandbox = c.sandboxes.provider === "agent-sandbox";
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

function addTo(total: ResourceTotals, key: string, q: string | number | undefined): void {
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

function merge(into: ResourceTotals, more: ResourceTotals): void {
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
    if (plan.sandboxes && plan.config.sandboxes.provider === "agent-sandbox") {
        // Live sandboxes at most: the warm pool plus the claimed ones (the stack's own quota, SandboxQuota).
        const q = plan.sandboxes.quota;
        const sb = at(plan.sandboxes.names.namespace);
        merge(sb, { pods: String(q.pods), "requests.cpu": q.cpu, "limits.cpu": q.cpu, "requests.memory": q.memory, "limits.memory": q.memory });
    }
    return out;
}

/** The value of a quantity the API server wrote ("7910m", "2113992Ki", "8"); NaN when unreadable. */
export function value(q: unknown): number {
    if (typeof q === "number") return q;
    if (typeof q !== "string") return Number.NaN;
    try {
        return quantityValue(q);
    } catch {
        const n = Number(q);
        return Number.isFinite(n) ? n : Number.NaN;
    }
}

/** A quantity for people: "1.5 CPU", "64 GiB". */
export function human(resource: string, v: number): string {
    if (/memory|storage/.test(resource)) {
        const gib = v / 1024 ** 3;
        return gib >= 1 ? `${Number(gib.toFixed(1))} GiB` : `${Math.round(v / 1024 ** 2)} MiB`;
    }
    return String(Number(v.toFixed(3)));
}

// ---------------------------------------------------------------------------------------------
// The checks (pure)

const firstLine = (s: string) =>
    s
        .split("\n")
        .map((l) => l.trim())
        .find((l) => l !== "")
        ?.replace(/^error: /i, "") ?? "";

function unreadable(check: string, what: string, r: { error: string; forbidden?: boolean }): Finding {
    return warn(
        check,
        `could not read ${what}: ${firstLine(r.error)} (unchecked)`,
        r.forbidden ? `run the preflight with credentials that may list ${what} (read-only is enough)` : "run it again; if it persists, see the error",
    );
}

/** The API server answers with the stack's context: the first check; nothing else is read when it fails. */
export function checkConnection(f: Pick<KubernetesFacts, "context" | "kubeconfig" | "server" | "contexts" | "version">, timeoutSeconds: number): Finding {
    const check = "API server";
    const at = `${f.server ?? "the API server"} (context ${f.context || "(none)"}, kubeconfig ${f.kubeconfig})`;
    if (f.version.ok) return ok(check, `${at} answers: ${f.version.value.gitVersion}`);
    const e = f.version.error;
    if (/^cannot run .*not installed/.test(e))
        return fail(check, e, "install kubectl (any release within one minor version of the cluster), or set KUBECTL to its path");
    if (f.context === "") {
        return fail(
            check,
            `kubeconfig ${f.kubeconfig} has no current context and the stack names none`,
            `set target.context to one of: ${f.contexts.join(", ") || "(the kubeconfig has no contexts)"}`,
        );
    }
    if (/context was not found|no context exists|context .* does not exist/i.test(e) || (f.contexts.length > 0 && !f.contexts.includes(f.context))) {
        return fail(
            check,
            `kubeconfig ${f.kubeconfig} has no context '${f.context}'`,
            `set target.context to one of: ${f.contexts.join(", ") || "(none: the file has no contexts)"}; or point target.kubeconfig at the file that has '${f.context}'`,
        );
    }
    if (/no such file|cannot find|does not exist/i.test(e)) {
        return fail(
            check,
            `cannot read kubeconfig ${f.kubeconfig}: ${firstLine(e)}`,
            "set target.kubeconfig to an existing kubeconfig file (or unset it for kubectl's default)",
        );
    }
    if (/unauthorized|must be logged in|forbidden/i.test(e)) {
        return fail(
            check,
            `${at} refused the credentials: ${firstLine(e)}`,
            `refresh the credentials of context ${f.context} (your cloud's get-credentials command), then: kubectl --context ${f.context} version`,
        );
    }
    return fail(
        check,
        `${at} did not answer within ${timeoutSeconds} s: ${firstLine(e)}`,
        `check that the cluster is up and reachable from here (VPN, firewall, API server address), then: kubectl --context ${f.context} version`,
    );
}

export function checkVersion(version: { gitVersion: string; major: string; minor: string }): Finding {
    const check = "Kubernetes version";
    const major = Number.parseInt(version.major, 10);
    const minor = Number.parseInt(version.minor, 10);
    if (!Number.isFinite(major) || !Number.isFinite(minor))
        return warn(
            check,
            `the server reports version ${JSON.stringify(version)}, which is not major.minor`,
            `check that it is ${MIN_KUBERNETES.major}.${MIN_KUBERNETES.minor} or newer`,
        );
    const good = major > MIN_KUBERNETES.major || (major === MIN_KUBERNETES.major && minor >= MIN_KUBERNETES.minor);
    return good
        ? ok(check, `${version.gitVersion} (>= ${MIN_KUBERNETES.major}.${MIN_KUBERNETES.minor})`)
        : fail(
              check,
              `${version.gitVersion}, older than ${MIN_KUBERNETES.major}.${MIN_KUBERNETES.minor}`,
              `upgrade the cluster to ${MIN_KUBERNETES.major}.${MIN_KUBERNETES.minor} or newer (the sandbox claim policy is a ValidatingAdmissionPolicy v1, GA in 1.30; the vLLM sidecar is a native sidecar, on since 1.29)`,
          );
}

interface Toleration {
    readonly key?: string;
    readonly operator?: string;
    readonly value?: string;
    readonly effect?: string;
}

/** Whether `tolerations` tolerate `taint` (Kubernetes' rule: empty key + Exists tolerates all; empty effect matches every effect). */
export function tolerates(tolerations: readonly Toleration[], taint: { key: string; value?: string; effect: string }): boolean {
    return tolerations.some((t) => {
        if (t.effect !== undefined && t.effect !== "" && t.effect !== taint.effect) return false;
        const op = t.operator ?? "Equal";
        if (t.key === undefined || t.key === "") return op === "Exists";
        if (t.key !== taint.key) return false;
        return op === "Exists" || (t.value ?? "") === (taint.value ?? "");
    });
}

/** Why `node` cannot take the training pod (empty: it fits). */
export function nodeMisfits(node: any, pod: Pick<PodNeeds, "gpus" | "cpu" | "memory">, plan: PlatformPlan): string[] {
    const s = plan.training.scheduling;
    const why: string[] = [];
    const labels: Record<string, string> = node.metadata?.labels ?? {};
    if (node.spec?.unschedulable) why.push("cordoned (spec.unschedulable)");
    const ready = (node.status?.conditions ?? []).find((c: any) => c.type === "Ready");
    if (ready && ready.status !== "True") why.push("not Ready");
    for (const [k, v] of Object.entries(s.nodeSelector)) {
        if (labels[k] !== v) why.push(`label ${k}=${v} wanted, node has ${labels[k] === undefined ? "none" : `${k}=${labels[k]}`}`);
    }
    for (const taint of node.spec?.taints ?? []) {
        if (taint.effect !== "NoSchedule" && taint.effect !== "NoExecute") continue;
        if (!tolerates(s.tolerations as readonly Toleration[], taint))
            why.push(`taint ${taint.key}${taint.value ? `=${taint.value}` : ""}:${taint.effect} not tolerated`);
    }
    const alloc = node.status?.allocatable ?? {};
    const gpus = value(alloc[s.gpuResourceName] ?? "0");
    if (pod.gpus > 0 && !(gpus >= pod.gpus)) why.push(`${Number.isNaN(gpus) ? 0 : gpus} ${s.gpuResourceName} allocatable, the pod needs ${pod.gpus}`);
    for (const [r, need] of [
        ["cpu", pod.cpu],
        ["memory", pod.memory],
    ] as const) {
        const have = value(alloc[r]);
        if (have < value(need)) why.push(`${human(r, have)} ${r === "cpu" ? "CPU" : "memory"} allocatable, the pod needs ${human(r, value(need))}`);
    }
    return why;
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
    if (!m) return [podOf("GPU node", "the training pod", [t.trainer, ...(t.vllm ? [t.vllm] : [])])];
    return [
        podOf("GPU nodes: trainers", `${m.nodes} trainer pods (one per node)`, [t.trainer], m.nodes),
        ...(t.vllm ? [podOf("GPU node: vLLM", "the vLLM pod", [t.vllm])] : []),
    ];
}

export function checkGpuNodes(plan: PlatformPlan, nodes: readonly any[]): Finding[] {
    return trainingPods(plan).map((pod) => checkPodFits(plan, pod, nodes));
}

function checkPodFits(plan: PlatformPlan, pod: PodNeeds, nodes: readonly any[]): Finding {
    const check = pod.check;
    const s = plan.training.scheduling;
    const product = s.nodeSelector["nvidia.com/gpu.product"];
    const wants = `${pod.gpus} ${s.gpuResourceName}${product ? ` (${product})` : ""}, ${human("cpu", value(pod.cpu))} CPU, ${human("memory", value(pod.memory))}`;
    const fits = nodes.filter((n) => nodeMisfits(n, pod, plan).length === 0).map((n) => n.metadata.name);
    const many = pod.count > 1 ? ` (${pod.count} needed, one each)` : "";
    if (fits.length >= pod.count)
        return ok(check, `${fits.join(", ")} fit${fits.length === 1 ? "s" : ""} ${pod.what} (${wants}) with its nodeSelector and tolerations${many}`);
    const gpuNodes = nodes.filter((n) => value(n.status?.allocatable?.[s.gpuResourceName] ?? "0") > 0);
    if (nodes.length === 0) return fail(check, "the cluster has no nodes", "add a GPU node pool");
    if (gpuNodes.length === 0) {
        return fail(
            check,
            `no node has allocatable ${s.gpuResourceName} (${nodes.length} node${nodes.length === 1 ? "" : "s"}); ${pod.what} needs ${wants}`,
            `install the GPU device plugin (NVIDIA GPU Operator or k8s-device-plugin) on the GPU nodes, or set target.gpuResourceName to the resource they advertise`,
        );
    }
    const misfits = gpuNodes.filter((n) => !fits.includes(n.metadata.name));
    if (fits.length > 0 && misfits.length === 0) {
        return fail(
            check,
            `only ${fits.join(", ")} fit${fits.length === 1 ? "s" : ""} ${pod.what} (${wants})${many}`,
            `add GPU nodes, or lower training.nodes to ${fits.length}`,
        );
    }
    const reasons = misfits.slice(0, 5).map((n) => `${n.metadata.name}: ${nodeMisfits(n, pod, plan).join("; ")}`);
    const all = misfits.flatMap((n) => nodeMisfits(n, pod, plan));
    const fixes: string[] = [];
    if (product && all.some((r) => r.startsWith("label nvidia.com/gpu.product="))) {
        const seen = [...new Set(gpuNodes.map((n) => n.metadata?.labels?.["nvidia.com/gpu.product"]).filter(Boolean))];
        fixes.push(`pin target.gpuProduct to a product the nodes have (${seen.join(", ") || "none labelled"}) or add ${product} nodes`);
    }
    if (all.some((r) => r.startsWith("label ") && !r.startsWith("label nvidia.com/gpu.product=")))
        fixes.push("change target.nodeSelector to labels the GPU nodes carry (kubectl get nodes --show-labels), or label them");
    if (all.some((r) => r.startsWith("taint ")))
        fixes.push("add a toleration for each taint to target.tolerations (e.g. { key: <taint key>, operator: Exists, effect: NoSchedule })");
    if (all.some((r) => r.includes(`${s.gpuResourceName} allocatable`))) {
        const most = Math.max(...gpuNodes.map((n) => value(n.status.allocatable[s.gpuResourceName])));
        fixes.push(`lower training.gpusOnNode (with vllmGpus/trainerGpus) to at most ${most}, or add a node with ${pod.gpus} ${s.gpuResourceName}`);
    }
    if (all.some((r) => / (CPU|memory) allocatable/.test(r))) fixes.push("lower training.trainerCpu/trainerMemory/vllmCpu/vllmMemory, or use a larger node");
    if (all.some((r) => r.startsWith("cordoned") || r === "not Ready")) fixes.push("uncordon the node or bring it back Ready (kubectl describe node)");
    const fitting = fits.length > 0 ? `only ${fits.join(", ")} fit${fits.length === 1 ? "s" : ""}${many}; ` : "";
    return fail(
        check,
        `${fitting}no ${fits.length > 0 ? "other " : ""}node fits ${pod.what} (${wants}): ${reasons.join(" | ")}`,
        fixes.join("; or ") || "add a GPU node that fits",
    );
}

const DEFAULT_CLASS_ANNOTATIONS = ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"];

export function checkStorage(plan: PlatformPlan, classes: readonly any[]): Finding[] {
    const named = plan.training.scheduling.storageClassName;
    const check = "StorageClass";
    const names = classes.map((c) => c.metadata.name);
    const defaults = classes.filter((c) => DEFAULT_CLASS_ANNOTATIONS.some((a) => c.metadata?.annotations?.[a] === "true"));
    const describe = (c: any) => `${c.metadata.name} (provisioner ${c.provisioner}, reclaimPolicy ${c.reclaimPolicy ?? "Delete"})`;
    let sc: any;
    const out: Finding[] = [];
    if (named !== undefined) {
        sc = classes.find((c) => c.metadata.name === named);
        if (!sc) {
            return [
                fail(
                    check,
                    `no StorageClass ${named} (target.storageClassName); the cluster has: ${names.join(", ") || "none"}`,
                    names.length > 0
                        ? `set target.storageClassName to one of them, or create ${named}`
                        : `create StorageClass ${named} (your storage provider's CSI driver)`,
                ),
            ];
        }
        out.push(ok(check, describe(sc)));
    } else if (defaults.length === 0) {
        return [
            fail(
                check,
                `no default StorageClass (target.storageClassName is unset); the cluster has: ${names.join(", ") || "none"}`,
                names.length > 0
                    ? `set target.storageClassName to one of them, or mark one default: kubectl patch storageclass <name> -p '{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"true"}}}'`
                    : "install a CSI driver with a StorageClass and mark it default, or set target.storageClassName",
            ),
        ];
    } else {
        // Several defaults: the API server picks the newest (Kubernetes 1.26+).
        sc = [...defaults].sort((a, b) => String(b.metadata.creationTimestamp ?? "").localeCompare(String(a.metadata.creationTimestamp ?? "")))[0];
        out.push(
            defaults.length === 1
                ? ok(check, `default ${describe(sc)}`)
                : warn(
                      check,
                      `${defaults.length} default classes (${defaults.map((c) => c.metadata.name).join(", ")}); claims get the newest, ${sc.metadata.name}`,
                      "set target.storageClassName, or keep one class default",
                  ),
        );
    }
    if (plan.training.checkpoints) {
        const policy = sc.reclaimPolicy ?? "Delete";
        out.push(
            policy === "Delete"
                ? warn(
                      "Checkpoint reclaim policy",
                      `StorageClass ${sc.metadata.name} has reclaimPolicy Delete: deleting the checkpoints claim (or its namespace) deletes the checkpoints`,
                      `use a class with reclaimPolicy Retain for checkpoints (target.storageClassName), or after the first up: kubectl patch pv <the checkpoints claim's volume> -p '{"spec":{"persistentVolumeReclaimPolicy":"Retain"}}'`,
                  )
                : ok("Checkpoint reclaim policy", `StorageClass ${sc.metadata.name}: reclaimPolicy ${policy}, checkpoints outlive their claim`),
        );
    }
    return out;
}

export function checkPriorityClass(name: string, fields: readonly string[], found: readonly any[]): Finding {
    const pc = found.find((p) => p.metadata?.name === name);
    return pc
        ? ok("PriorityClass", `${name} (value ${pc.value})`)
        : fail(
              "PriorityClass",
              `no PriorityClass ${name} (${fields.join(", ")}): those pods are refused (the Job gets no pod, the warm pool never fills)`,
              `create it (kubectl create priorityclass ${name} --value=1000000 --description="RL training runs"; a cluster stack creates its own on up), or name an existing one (kubectl get priorityclasses)`,
          );
}

export function checkRuntimeClass(name: string, fields: readonly string[], found: readonly any[]): Finding {
    const rc = found.find((r) => r.metadata?.name === name);
    return rc
        ? ok("RuntimeClass", `${name} (handler ${rc.handler}; that the nodes' container runtime has the handler is not checked)`)
        : fail(
              "RuntimeClass",
              `no RuntimeClass ${name} (${fields.join(", ")}): those pods are refused`,
              `install the runtime on the nodes (gVisor: runsc; Kata: kata) and create the RuntimeClass, e.g. kubectl apply -f - <<<'{"apiVersion":"node.k8s.io/v1","kind":"RuntimeClass","metadata":{"name":"${name}"},"handler":"runsc"}'; or unset ${fields.join(" and ")}`,
          );
}

/** The served version's schema of a CRD, or undefined. */
function servedSchema(crd: any, version: string): any {
    const v = (crd?.spec?.versions ?? []).find((x: any) => x.name === version && x.served);
    return v;
}

export function checkSandboxCrds(plan: PlatformPlan, crds: readonly any[]): Finding {
    const check = "agent-sandbox CRDs";
    const expect = sandboxCrdExpectations(plan);
    const install = `kubectl apply --server-side -f ${AGENT_SANDBOX_MANIFEST_URL}`;
    const problems: string[] = [];
    for (const e of expect) {
        const crd = crds.find((c) => c.metadata?.name === e.name);
        if (!crd) {
            problems.push(`${e.name} missing`);
            continue;
        }
        const v = servedSchema(crd, SANDBOX_API_VERSION);
        if (!v) {
            problems.push(`${e.name} does not serve ${SANDBOX_API_VERSION}`);
            continue;
        }
        const props = v.schema?.openAPIV3Schema?.properties ?? {};
        const spec = Object.keys(props.spec?.properties ?? {});
        const status = Object.keys(props.status?.properties ?? {});
        const missing = [
            ...e.spec.filter((k) => !spec.includes(k)).map((k) => `spec.${k}`),
            ...e.status.filter((k) => !status.includes(k)).map((k) => `status.${k}`),
        ];
        if (missing.length > 0) problems.push(`${e.name} ${SANDBOX_API_VERSION} has no ${missing.join(", ")}`);
        if (e.scale && !v.subresources?.scale) problems.push(`${e.name} ${SANDBOX_API_VERSION} has no scale subresource`);
    }
    if (problems.length === 0)
        return ok(check, `${expect.length} CRDs serve ${SANDBOX_API_VERSION} with the ${AGENT_SANDBOX_VERSION} fields the stack and the trainer use`);
    const missingAll = problems.length === expect.length && problems.every((p) => p.endsWith(" missing"));
    return fail(
        check,
        missingAll
            ? `agent-sandbox is not installed (${expect.map((e) => e.name).join(", ")} missing)`
            : `the schema does not match ${AGENT_SANDBOX_VERSION}: ${problems.join("; ")}`,
        `install agent-sandbox ${AGENT_SANDBOX_VERSION} with the cluster stack (agentSandbox.install) or by hand (${install})`,
    );
}

export function checkSandboxController(deployments: readonly any[]): Finding {
    const check = "agent-sandbox controller";
    const install = `kubectl apply --server-side -f ${AGENT_SANDBOX_MANIFEST_URL}`;
    if (deployments.length === 0) {
        return fail(
            check,
            `no Deployment labelled ${SANDBOX_CONTROLLER_LABEL} in any namespace: the warm pool would never fill`,
            `install agent-sandbox ${AGENT_SANDBOX_VERSION}: ${install}`,
        );
    }
    const available = deployments.filter((d) => (d.status?.availableReplicas ?? 0) >= 1);
    const id = (d: any) => `${d.metadata.namespace}/${d.metadata.name}`;
    if (available.length === 0) {
        const d = deployments[0];
        return fail(
            check,
            `${id(d)}: ${d.status?.availableReplicas ?? 0} of ${d.spec?.replicas ?? 1} replicas available`,
            `see why: kubectl -n ${d.metadata.namespace} describe deployment ${d.metadata.name}`,
        );
    }
    const d = available[0];
    const args: string[] = (d.spec?.template?.spec?.containers ?? []).flatMap((c: any) => [...(c.command ?? []), ...(c.args ?? [])]);
    if (!args.some((a) => a === "--extensions" || a === "--extensions=true")) {
        return fail(
            check,
            `${id(d)} runs without --extensions: SandboxTemplate, SandboxWarmPool and SandboxClaim are not reconciled`,
            `install the release manifest with extensions (${install})`,
        );
    }
    return ok(check, `${id(d)} available (${d.status.availableReplicas}/${d.spec?.replicas ?? 1}), with --extensions`);
}

function crdProblems(crds: readonly any[], names: readonly string[], version: string): string[] {
    return names.flatMap((n) => {
        const crd = crds.find((c) => c.metadata?.name === n);
        if (!crd) return [`${n} missing`];
        return servedSchema(crd, version) ? [] : [`${n} does not serve ${version}`];
    });
}

/** training.nodes > 1: the trainer is a JobSet, whose CRD (and controller) the cluster must have. */
export function checkJobSet(crds: readonly any[]): Finding {
    const issues = crdProblems(crds, [JOBSET_CRD], JOBSET_VERSION);
    return issues.length > 0
        ? fail(
              "JobSet",
              `${issues.join("; ")}: training.nodes > 1 runs the trainer as a JobSet`,
              `install JobSet (kubectl apply --server-side -f ${JOBSET_MANIFEST_URL}), or train on one node (training.nodes 1)`,
          )
        : ok("JobSet", `${JOBSET_CRD} serves ${JOBSET_VERSION}`);
}

/** training.nodes > 1: JobSet's controller (and its webhooks, which do the exclusive placement) must run. */
export function checkJobSetController(deployments: readonly any[]): Finding {
    const check = "JobSet controller";
    const install = `install JobSet v0.10.1 (kubectl apply --server-side -f ${JOBSET_MANIFEST_URL})`;
    if (deployments.length === 0)
        return fail(check, `no Deployment labelled ${JOBSET_CONTROLLER_LABEL} in any namespace: the trainer's JobSet would never get pods`, install);
    const available = deployments.find((d) => (d.status?.availableReplicas ?? 0) >= 1);
    if (!available) {
        const d = deployments[0];
        return fail(
            check,
            `${d.metadata.namespace}/${d.metadata.name}: ${d.status?.availableReplicas ?? 0} of ${d.spec?.replicas ?? 1} replicas available`,
            `see why: kubectl -n ${d.metadata.namespace} describe deployment ${d.metadata.name}`,
        );
    }
    return ok(
        check,
        `${available.metadata.namespace}/${available.metadata.name} available (${available.status.availableReplicas}/${available.spec?.replicas ?? 1})`,
    );
}

/**
 * target.kueueQueue: the trainer is created suspended until Kueue admits it, so without Kueue or
 * without the LocalQueue it waits for ever. The LocalQueue lives in the training namespace, which the
 * stack creates: before the first up it cannot exist yet (a warning).
 */
export function checkKueue(kueue: NonNullable<KubernetesNeeds["kueue"]>, crds: readonly any[], localQueue: any | undefined, namespaceExists: boolean): Finding {
    const check = "Kueue LocalQueue";
    const where = `${kueue.namespace}/${kueue.queue}`;
    if (!crds.some((c) => c.metadata?.name === KUEUE_LOCALQUEUE_CRD))
        return fail(
            check,
            `Kueue is not installed (${KUEUE_LOCALQUEUE_CRD} missing): the trainer is created suspended (target.kueueQueue) and nothing would ever admit it`,
            "install Kueue with its batch/job and jobset.x-k8s.io/jobset integrations, or remove target.kueueQueue",
        );
    if (localQueue !== undefined) return ok(check, `LocalQueue ${where} exists`);
    const create = `create LocalQueue ${kueue.queue} in ${kueue.namespace} pointing at a ClusterQueue with GPU quota`;
    return namespaceExists
        ? fail(check, `no LocalQueue ${where} (target.kueueQueue): the suspended trainer would never be admitted`, create)
        : warn(
              check,
              `namespace ${kueue.namespace} does not exist yet (the stack creates it), so LocalQueue ${where} cannot either`,
              `${create} right after the first up (the trainer waits, suspended, until then)`,
          );
}

export function checkGateway(plan: PlatformPlan, crds: readonly any[], gateway: any | undefined): Finding[] {
    const g = plan.config.ingress.gateway!;
    const ns = plan.names.namespaces.ingress;
    const crdIssues = crdProblems(crds, GATEWAY_CRDS, "v1");
    if (crdIssues.length > 0) {
        return [
            fail(
                "Gateway API",
                `${crdIssues.join("; ")} (ingress.exposure httproute)`,
                "install the Gateway API standard CRDs (v1.x, kubernetes-sigs/gateway-api releases: standard-install.yaml) and a Gateway controller, or use ingress.exposure cluster or loadbalancer",
            ),
        ];
    }
    const out = [ok("Gateway API", `${GATEWAY_CRDS.join(", ")} serve v1`)];
    const id = `${g.namespace}/${g.name}`;
    if (!gateway) {
        out.push(fail("Gateway", `no Gateway ${id} (ingress.gateway)`, "create it, or point ingress.gateway at an existing Gateway (kubectl get gateways -A)"));
        return out;
    }
    const listeners: any[] = gateway.spec?.listeners ?? [];
    const chosen = g.sectionName !== undefined ? listeners.filter((l) => l.name === g.sectionName) : listeners;
    if (g.sectionName !== undefined && chosen.length === 0) {
        out.push(
            fail(
                "Gateway",
                `Gateway ${id} has no listener ${g.sectionName} (listeners: ${listeners.map((l) => l.name).join(", ") || "none"})`,
                "set ingress.gateway.sectionName to one of its listeners",
            ),
        );
        return out;
    }
    const admits = chosen.map((l) => l.allowedRoutes?.namespaces?.from ?? "Same");
    if (admits.includes("All") || (admits.includes("Same") && g.namespace === ns)) {
        // fine
    } else if (admits.includes("Selector")) {
        out.push(
            warn(
                "Gateway",
                `Gateway ${id} admits routes from namespaces matching a label selector; whether ${ns} (which this stack creates) matches is not checked`,
                `make sure namespace ${ns} carries the labels the listener selects, or allow routes from All namespaces`,
            ),
        );
        return out;
    } else {
        out.push(
            fail(
                "Gateway",
                `Gateway ${id} admits routes only from its own namespace ${g.namespace}, not from ${ns} where the stack's HTTPRoute lives`,
                `set the listener's allowedRoutes.namespaces.from to All (or Selector matching ${ns})`,
            ),
        );
        return out;
    }
    const programmed = (gateway.status?.conditions ?? []).find((c: any) => c.type === "Programmed");
    out.push(
        programmed?.status === "True"
            ? ok("Gateway", `${id} is Programmed and admits routes from ${ns}`)
            : warn(
                  "Gateway",
                  `${id} admits routes from ${ns} but is not Programmed (${programmed ? `${programmed.reason}: ${programmed.message}` : "no status: is a Gateway controller running?"})`,
                  `see kubectl -n ${g.namespace} describe gateway ${g.name}`,
              ),
    );
    return out;
}

export function checkCertManager(plan: PlatformPlan, crds: readonly any[], issuer: any | undefined, namespaceExists: boolean): Finding[] {
    const i = plan.config.ingress.tls.issuer;
    const kindCrd = `${i?.kind === "Issuer" ? "issuers" : "clusterissuers"}.cert-manager.io`;
    const issues = crdProblems(crds, [CERT_MANAGER_CERTIFICATES_CRD, kindCrd], "v1");
    if (issues.length > 0) {
        return [
            fail(
                "cert-manager",
                `${issues.join("; ")} (ingress.tls.mode cert-manager)`,
                `install cert-manager (kubectl apply -f ${CERT_MANAGER_MANIFEST_URL}), or use ingress.tls.mode secret`,
            ),
        ];
    }
    const out = [ok("cert-manager", `${CERT_MANAGER_CERTIFICATES_CRD} and ${kindCrd} serve v1`)];
    if (!i) return out;
    const ns = plan.names.namespaces.ingress;
    const what = i.kind === "Issuer" ? `Issuer ${ns}/${i.name}` : `ClusterIssuer ${i.name}`;
    if (i.group !== "cert-manager.io") {
        out.push(
            warn(
                "Issuer",
                `${i.kind} ${i.name} of group ${i.group} (an external issuer) is not checked`,
                `check it yourself: kubectl get ${i.kind.toLowerCase()}s.${i.group} ${i.name}`,
            ),
        );
        return out;
    }
    if (!issuer) {
        if (i.kind === "Issuer" && !namespaceExists) {
            out.push(
                fail(
                    "Issuer",
                    `no ${what}: an Issuer must live in the ingress namespace ${ns}, which does not exist yet (this stack creates it), so the certificate cannot be issued on the first up`,
                    "use a ClusterIssuer (ingress.tls.issuer.kind ClusterIssuer)",
                ),
            );
        } else {
            out.push(
                fail(
                    "Issuer",
                    `no ${what} (ingress.tls.issuer): the certificate is never issued and the proxy pods hang in ContainerCreating`,
                    `create it, or set ingress.tls.issuer to an existing one (kubectl get ${i.kind === "Issuer" ? `issuers -n ${ns}` : "clusterissuers"})`,
                ),
            );
        }
        return out;
    }
    const ready = (issuer.status?.conditions ?? []).find((c: any) => c.type === "Ready");
    out.push(
        ready?.status === "True"
            ? ok("Issuer", `${what} is Ready`)
            : warn(
                  "Issuer",
                  `${what} exists but is not Ready (${ready ? `${ready.reason}: ${ready.message}` : "no status: is cert-manager running?"})`,
                  `see kubectl describe ${i.kind.toLowerCase()} ${i.name}${i.kind === "Issuer" ? ` -n ${ns}` : ""}`,
              ),
    );
    return out;
}

export function checkTlsSecret(plan: PlatformPlan, secret: { type: string; keys: readonly string[] } | undefined, namespaceExists: boolean): Finding {
    const check = "TLS Secret";
    const name = plan.config.ingress.tls.secretName!;
    const ns = plan.names.namespaces.ingress;
    const create = `kubectl -n ${ns} create secret tls ${name} --cert=<cert.pem> --key=<key.pem>`;
    if (!secret) {
        return namespaceExists
            ? fail(check, `no Secret ${ns}/${name} (ingress.tls.secretName): the proxy pods would hang in ContainerCreating`, create)
            : warn(
                  check,
                  `namespace ${ns} does not exist yet (this stack creates it), so Secret ${name} cannot be there before the first up; the proxy waits for it`,
                  `create it right after the namespace appears: ${create}; or let cert-manager issue it (ingress.tls.mode cert-manager)`,
              );
    }
    const missing = ["tls.crt", "tls.key"].filter((k) => !secret.keys.includes(k));
    if (missing.length > 0)
        return fail(check, `Secret ${ns}/${name} (type ${secret.type}) has no ${missing.join(", ")}`, `recreate it as a TLS Secret: ${create}`);
    return ok(check, `${ns}/${name} (type ${secret.type}) holds tls.crt and tls.key`);
}

export function checkCni(daemonSets: readonly any[]): Finding {
    const check = "NetworkPolicy CNI";
    const known = daemonSets.filter((d) => POLICY_CNI_DAEMONSETS[d.metadata?.name] !== undefined);
    if (known.length > 0) {
        const d = known[0];
        return ok(
            check,
            `DaemonSet ${d.metadata.namespace}/${d.metadata.name} (${POLICY_CNI_DAEMONSETS[d.metadata.name]}) runs, so NetworkPolicy is likely enforced (a heuristic: by DaemonSet name)`,
        );
    }
    const flannel = daemonSets.find((d) => NON_POLICY_CNI_DAEMONSETS[d.metadata?.name] !== undefined);
    return warn(
        check,
        `${flannel ? `only ${NON_POLICY_CNI_DAEMONSETS[flannel.metadata.name]} (${flannel.metadata.namespace}/${flannel.metadata.name}), which does not enforce NetworkPolicy, and ` : ""}no DaemonSet of a NetworkPolicy-enforcing CNI (${Object.keys(POLICY_CNI_DAEMONSETS).join(", ")}); this is a heuristic, by DaemonSet name`,
        "if your CNI enforces NetworkPolicy under another name, ignore this; otherwise install one (Calico, Cilium): without it every isolation rule of the stack is silently ignored",
    );
}

const QUOTA_KEYS: Readonly<Record<string, string>> = {
    cpu: "requests.cpu",
    memory: "requests.memory",
    "requests.cpu": "requests.cpu",
    "requests.memory": "requests.memory",
    "limits.cpu": "limits.cpu",
    "limits.memory": "limits.memory",
    "ephemeral-storage": "requests.ephemeral-storage",
    "requests.ephemeral-storage": "requests.ephemeral-storage",
    "limits.ephemeral-storage": "limits.ephemeral-storage",
    pods: "pods",
    "count/pods": "pods",
    persistentvolumeclaims: "persistentvolumeclaims",
    "count/persistentvolumeclaims": "persistentvolumeclaims",
    "requests.storage": "requests.storage",
};

/**
 * Quota headroom in the stack's namespaces that already exist: for each ResourceQuota not the
 * stack's own, hard - used, plus what the stack already runs there (an `up` replaces it), must
 * hold what the stack requests.
 */
export function checkQuotas(plan: PlatformPlan, namespaces: Readonly<Record<string, NamespaceFacts | undefined>>): Finding {
    const check = "Quota headroom";
    const requests = stackRequests(plan);
    const gpu = plan.training.scheduling.gpuResourceName;
    const own = new Set([plan.sandboxes?.names.quota].filter((x): x is string => x !== undefined));
    const stackClaims = [plan.training.modelCache, plan.training.checkpoints].filter((v) => v !== undefined);
    const short: string[] = [];
    const checked: string[] = [];
    const absent: string[] = [];
    for (const [ns, want] of Object.entries(requests)) {
        const facts = namespaces[ns];
        if (!facts) {
            absent.push(ns);
            continue;
        }
        // What this stack already holds there comes back when `up` replaces it.
        const held: ResourceTotals = {};
        for (const p of facts.stackPods) merge(held, podTotals(p.spec ?? {}, gpu));
        for (const v of stackClaims) {
            if (facts.claims.includes(v.name) && ns === plan.training.namespace) {
                addTo(held, "persistentvolumeclaims", 1);
                addTo(held, "requests.storage", v.size);
            }
        }
        for (const q of facts.quotas) {
            if (own.has(q.metadata?.name)) continue;
            checked.push(`${ns}/${q.metadata.name}`);
            for (const [key, hard] of Object.entries<string>(q.status?.hard ?? q.spec?.hard ?? {})) {
                const as = QUOTA_KEYS[key] ?? (key === `requests.${gpu}` ? key : undefined);
                if (as === undefined || want[as] === undefined) continue;
                const used = value(q.status?.used?.[key] ?? "0");
                const free = value(hard) - used + value(held[as] ?? "0");
                const need = value(want[as]);
                if (need > free + 1e-9) {
                    short.push(
                        `${ns} quota ${q.metadata.name} ${key}: the stack needs ${human(as, need)}, ${human(as, Math.max(0, free))} free (hard ${hard}, used ${q.status?.used?.[key] ?? "0"})`,
                    );
                }
            }
        }
    }
    const notYet = absent.length > 0 ? `; ${absent.join(", ")} do${absent.length === 1 ? "es" : ""} not exist yet (no quota)` : "";
    if (short.length > 0) {
        return fail(
            check,
            `${short.join("; ")}${notYet}`,
            "raise the quota (kubectl -n <namespace> edit resourcequota <name>) or lower what the stack requests (replicas, cpu/memory, sandboxes.poolSize)",
        );
    }
    if (checked.length === 0) return ok(check, `no ResourceQuota in the stack's existing namespaces${notYet}`);
    return ok(check, `the stack fits ${checked.join(", ")}${notYet}`);
}

/** The facts when the API server did not answer: the connection as found, nothing else read. */
export function unansweredFacts(conn: Pick<KubernetesFacts, "context" | "kubeconfig" | "server" | "contexts" | "version">): KubernetesFacts {
    const nothing = { ok: false as const, error: "not read: the API server did not answer" };
    return {
        ...conn,
        nodes: nothing,
        storageClasses: nothing,
        priorityClasses: nothing,
        runtimeClasses: nothing,
        crds: nothing,
        sandboxControllers: nothing,
        jobSetControllers: nothing,
        daemonSets: nothing,
        namespaces: nothing,
    };
}

/** Every Kubernetes finding from the plan and what was read. Only the connection finding when the API server did not answer. */
export function checkKubernetes(plan: PlatformPlan, f: KubernetesFacts, timeoutSeconds = 10): Finding[] {
    const conn = checkConnection(f, timeoutSeconds);
    if (!f.version.ok) return [conn];
    const needs = kubernetesNeeds(plan);
    const out: Finding[] = [conn, checkVersion(f.version.value)];
    out.push(...(f.nodes.ok ? checkGpuNodes(plan, f.nodes.value) : [unreadable("GPU node", "nodes", f.nodes)]));
    if (needs.storage)
        out.push(...(f.storageClasses.ok ? checkStorage(plan, f.storageClasses.value) : [unreadable("StorageClass", "storageclasses", f.storageClasses)]));
    for (const [name, fields] of Object.entries(needs.priorityClasses))
        out.push(
            f.priorityClasses.ok
                ? checkPriorityClass(name, fields, f.priorityClasses.value)
                : unreadable("PriorityClass", "priorityclasses", f.priorityClasses),
        );
    for (const [name, fields] of Object.entries(needs.runtimeClasses))
        out.push(
            f.runtimeClasses.ok ? checkRuntimeClass(name, fields, f.runtimeClasses.value) : unreadable("RuntimeClass", "runtimeclasses", f.runtimeClasses),
        );
    const crds = f.crds.ok ? f.crds.value : undefined;
    if (plan.config.sandboxes.provider === "agent-sandbox") {
        out.push(crds ? checkSandboxCrds(plan, crds) : unreadable("agent-sandbox CRDs", "customresourcedefinitions", f.crds as { error: string }));
        if (needs.sandboxController)
            out.push(
                f.sandboxControllers.ok
                    ? checkSandboxController(f.sandboxControllers.value)
                    : unreadable("agent-sandbox controller", "deployments", f.sandboxControllers),
            );
    }
    if (plan.training.multiNode) {
        out.push(crds ? checkJobSet(crds) : unreadable("JobSet", "customresourcedefinitions", f.crds as { error: string }));
        out.push(
            f.jobSetControllers.ok ? checkJobSetController(f.jobSetControllers.value) : unreadable("JobSet controller", "deployments", f.jobSetControllers),
        );
    }
    const nsExists = (ns: string) => f.namespaces.ok && f.namespaces.value[ns] !== undefined;
    if (needs.gateway) {
        if (!crds) out.push(unreadable("Gateway API", "customresourcedefinitions", f.crds as { error: string }));
        else if (f.gateway && !f.gateway.ok) out.push(unreadable("Gateway", "gateways", f.gateway));
        else out.push(...checkGateway(plan, crds, f.gateway?.ok ? f.gateway.value : undefined));
    }
    if (plan.config.ingress.enabled && plan.config.ingress.tls.mode === "cert-manager") {
        if (!crds) out.push(unreadable("cert-manager", "customresourcedefinitions", f.crds as { error: string }));
        else if (f.issuer && !f.issuer.ok) out.push(unreadable("Issuer", "issuers", f.issuer));
        else out.push(...checkCertManager(plan, crds, f.issuer?.ok ? f.issuer.value : undefined, nsExists(plan.names.namespaces.ingress)));
    }
    if (needs.tlsSecret) {
        if (f.tlsSecret && !f.tlsSecret.ok) out.push(unreadable("TLS Secret", "secrets", f.tlsSecret));
        else out.push(checkTlsSecret(plan, f.tlsSecret?.ok ? f.tlsSecret.value : undefined, nsExists(needs.tlsSecret.namespace)));
    }
    if (needs.kueue) {
        if (!crds) out.push(unreadable("Kueue LocalQueue", "customresourcedefinitions", f.crds as { error: string }));
        else if (f.localQueue && !f.localQueue.ok) out.push(unreadable("Kueue LocalQueue", "localqueues", f.localQueue));
        else out.push(checkKueue(needs.kueue, crds, f.localQueue?.ok ? f.localQueue.value : undefined, nsExists(needs.kueue.namespace)));
    }
    out.push(f.daemonSets.ok ? checkCni(f.daemonSets.value) : unreadable("NetworkPolicy CNI", "daemonsets", f.daemonSets));
    out.push(f.namespaces.ok ? checkQuotas(plan, f.namespaces.value) : unreadable("Quota headroom", "namespaces and resourcequotas", f.namespaces));
    return out;
}

// ---------------------------------------------------------------------------------------------
// Reading the cluster

export interface CommandResult {
    readonly code: number;
    readonly stdout: string;
    readonly stderr: string;
}

export interface KubernetesReadOptions {
    /** kubectl binary. @default $KUBECTL, else "kubectl" */
    readonly kubectl?: string;
    /** Per request. @default 10000 */
    readonly timeoutMs?: number;
}

function runKubectl(bin: string, args: readonly string[], timeoutMs: number): Promise<CommandResult> {
    return new Promise((resolve) => {
        execFile(bin, [...args], { timeout: timeoutMs + 5000, maxBuffer: 256 * 1024 * 1024, killSignal: "SIGKILL" }, (err, stdout, stderr) => {
            const e = err as (NodeJS.ErrnoException & { killed?: boolean }) | null;
            let why = stderr;
            if (e?.code === "ENOENT") why = `cannot run ${bin}: not installed (install kubectl, or set KUBECTL to its path)`;
            else if (e?.killed) why = `${stderr}\nkubectl gave no answer within ${Math.round((timeoutMs + 5000) / 1000)} s`;
            resolve({ code: e ? (typeof e.code === "number" ? e.code : 1) : 0, stdout, stderr: why });
        });
    });
}

/** Reads what `checkKubernetes` needs, with the stack's kubeconfig and context; every read bounded. */
export async function readKubernetes(plan: PlatformPlan, opts: KubernetesReadOptions = {}): Promise<KubernetesFacts> {
    const t = plan.config.target;
    if (t.kind !== "kubernetes") throw new Error("readKubernetes: the stack's target is not kubernetes");
    const bin = opts.kubectl ?? process.env.KUBECTL ?? "kubectl";
    const timeoutMs = opts.timeoutMs ?? 10_000;
    const kubeconfig = t.kubeconfig ?? process.env.KUBECONFIG ?? "~/.kube/config";
    const base = t.kubeconfig !== undefined ? [`--kubeconfig=${t.kubeconfig}`] : [];
    const contexts = (await runKubectl(bin, [...base, "config", "get-contexts", "-o", "name"], timeoutMs)).stdout.split("\n").filter(Boolean);
    const context = t.context ?? (await runKubectl(bin, [...base, "config", "current-context"], timeoutMs)).stdout.trim();
    const withCtx = [...base, ...(context ? [`--context=${context}`] : []), `--request-timeout=${Math.ceil(timeoutMs / 1000)}s`];
    let server: string | undefined;
    const view = await runKubectl(bin, [...base, "config", "view", "--minify", "-o", "json", ...(context ? [`--context=${context}`] : [])], timeoutMs);
    if (view.code === 0) {
        try {
            server = JSON.parse(view.stdout).clusters?.[0]?.cluster?.server;
        } catch {
            // no server then
        }
    }
    const json = async <T>(args: readonly string[], pick: (doc: any) => T): Promise<Read<T>> => {
        const r = await runKubectl(bin, [...withCtx, ...args, "-o", "json"], timeoutMs);
        if (r.code !== 0) return { ok: false, error: r.stderr || `kubectl exited ${r.code}`, forbidden: /forbidden/i.test(r.stderr) };
        try {
            return { ok: true, value: pick(r.stdout.trim() ? JSON.parse(r.stdout) : {}) };
        } catch (e) {
            return { ok: false, error: `unreadable kubectl output: ${(e as Error).message}` };
        }
    };
    const version = await json(["version"], (d) => {
        if (!d.serverVersion) throw new Error("no serverVersion");
        return d.serverVersion;
    });
    if (!version.ok) return unansweredFacts({ context, kubeconfig, server, contexts, version });
    const needs = kubernetesNeeds(plan);
    const items = (d: any): any[] => (Array.isArray(d.items) ? d.items : d.kind && d.kind !== "List" ? [d] : []);
    /** Named objects, missing ones left out. */
    const named = (resource: string, names: readonly string[]) =>
        names.length === 0 ? Promise.resolve({ ok: true as const, value: [] as any[] }) : json(["get", resource, ...names, "--ignore-not-found"], items);
    /** One object, undefined when not found. */
    const one = (args: readonly string[]) => json(["get", ...args, "--ignore-not-found"], (d) => (d.metadata ? d : undefined));
    const namespaces = async (): Promise<Read<Record<string, NamespaceFacts | undefined>>> => {
        const list = await named("namespaces", needs.namespaces);
        if (!list.ok) return list;
        const out: Record<string, NamespaceFacts | undefined> = {};
        for (const ns of needs.namespaces) {
            if (!list.value.some((n) => n.metadata?.name === ns)) continue;
            const [quotas, pods, claims] = await Promise.all([
                json(["get", "resourcequotas", "-n", ns], items),
                json(
                    [
                        "get",
                        "pods",
                        "-n",
                        ns,
                        "-l",
                        "app.kubernetes.io/part-of=agent-rl-infra",
                        "--field-selector=status.phase!=Succeeded,status.phase!=Failed",
                    ],
                    items,
                ),
                json(["get", "persistentvolumeclaims", "-n", ns], items),
            ]);
            if (!quotas.ok) return quotas;
            out[ns] = { quotas: quotas.value, stackPods: pods.ok ? pods.value : [], claims: claims.ok ? claims.value.map((c) => c.metadata.name) : [] };
        }
        return { ok: true, value: out };
    };
    const [
        nodes,
        storageClasses,
        priorityClasses,
        runtimeClasses,
        crds,
        sandboxControllers,
        jobSetControllers,
        localQueue,
        daemonSets,
        gateway,
        issuer,
        secret,
        nsFacts,
    ] = await Promise.all([
        json(["get", "nodes"], items),
        needs.storage ? json(["get", "storageclasses.storage.k8s.io"], items) : Promise.resolve({ ok: true as const, value: [] as any[] }),
        named("priorityclasses.scheduling.k8s.io", Object.keys(needs.priorityClasses)),
        named("runtimeclasses.node.k8s.io", Object.keys(needs.runtimeClasses)),
        named("customresourcedefinitions.apiextensions.k8s.io", needs.crds),
        needs.sandboxController
            ? json(["get", "deployments.apps", "-A", "-l", SANDBOX_CONTROLLER_LABEL], items)
            : Promise.resolve({ ok: true as const, value: [] as any[] }),
        needs.jobSetController
            ? json(["get", "deployments.apps", "-A", "-l", JOBSET_CONTROLLER_LABEL], items)
            : Promise.resolve({ ok: true as const, value: [] as any[] }),
        needs.kueue ? one(["localqueues.kueue.x-k8s.io", needs.kueue.queue, "-n", needs.kueue.namespace]) : Promise.resolve(undefined),
        json(["get", "daemonsets.apps", "-A"], items),
        needs.gateway ? one(["gateways.gateway.networking.k8s.io", needs.gateway.name, "-n", needs.gateway.namespace]) : Promise.resolve(undefined),
        needs.issuer && needs.issuer.group === "cert-manager.io"
            ? one(
                  needs.issuer.kind === "Issuer"
                      ? ["issuers.cert-manager.io", needs.issuer.name, "-n", needs.issuer.namespace]
                      : ["clusterissuers.cert-manager.io", needs.issuer.name],
              )
            : Promise.resolve(undefined),
        needs.tlsSecret
            ? json(["get", "secret", needs.tlsSecret.name, "-n", needs.tlsSecret.namespace, "--ignore-not-found"], (d) =>
                  // Only the type and the key names leave this function, never the data.
                  d.metadata ? { type: String(d.type ?? ""), keys: Object.keys(d.data ?? {}) } : undefined,
              )
            : Promise.resolve(undefined),
        namespaces(),
    ]);
    // A missing CRD makes `get <kind>` fail with "the server doesn't have a resource type": that is "not found" here.
    const noKind = <T>(r: Read<T> | undefined): Read<T | undefined> | undefined =>
        r && !r.ok && /doesn't have a resource type|the server could not find the requested resource/i.test(r.error) ? { ok: true, value: undefined } : r;
    return {
        context,
        kubeconfig,
        server,
        contexts,
        version,
        nodes,
        storageClasses,
        priorityClasses,
        runtimeClasses,
        crds,
        sandboxControllers,
        jobSetControllers,
        localQueue: noKind(localQueue),
        daemonSets,
        gateway: noKind(gateway),
        issuer: noKind(issuer),
        tlsSecret: secret,
        namespaces: nsFacts,
    };
}
