/**
 * Where the pods land: GPU nodes that fit the training pods (nodeSelector, taints, allocatable),
 * the StorageClass of the claims, and the PriorityClasses and RuntimeClasses the config names.
 */
import type { PlatformPlan } from "../../platform";
import { fail, type Finding, human, ok, value, warn } from "../report";
import { type PodNeeds, trainingPods } from "./needs";

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
