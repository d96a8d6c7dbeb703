/**
 * The GPU memory check against the cluster: the memory of the GPUs the training pod can land on,
 * read from the node labels NVIDIA's GPU feature discovery sets (`nvidia.com/gpu.memory` in MiB,
 * else `nvidia.com/gpu.product` through the product table), against each role's estimate
 * (components/config/gpu-fit.ts). The smallest such GPU decides; no fitting node: no finding (the
 * GPU node check reports it).
 */
import { gpuMemoryPlan } from "../../config/gpu-fit";
import { productGiB, usableGiB } from "../../config/gpu-products";
import type { PlatformPlan } from "../../platform";
import { GPU_MEMORY_CHECK, gpuMemoryFinding } from "../gpu-memory";
import { type Finding, value, warn } from "../report";
import { nodeMisfits } from "./nodes";
import { trainingPods } from "./needs";

/** A node's usable GiB per GPU from its labels, and what said so (undefined: no label that tells). */
export function nodeGpuGiB(node: any): { gib: number; from: string } | undefined {
    const labels: Record<string, string> = node.metadata?.labels ?? {};
    const mib = Number(labels["nvidia.com/gpu.memory"]);
    const product = labels["nvidia.com/gpu.product"];
    if (Number.isFinite(mib) && mib > 0) return { gib: usableGiB(mib), from: `nvidia.com/gpu.memory=${mib}${product ? ` (${product})` : ""}` };
    const known = product === undefined ? undefined : productGiB(product);
    return known === undefined ? undefined : { gib: known, from: `nvidia.com/gpu.product=${product}` };
}

export function checkGpuMemory(plan: PlatformPlan, nodes: readonly any[]): Finding | undefined {
    const c = plan.config;
    const gpuResource = plan.training.scheduling.gpuResourceName;
    const pod = trainingPods(plan)[0];
    const gpuNodes = nodes.filter((n) => value(n.status?.allocatable?.[gpuResource] ?? "0") > 0);
    // Only the nodes the pod can land on; none: the GPU node check says so already.
    const candidates = gpuNodes.filter((n) => pod === undefined || nodeMisfits(n, pod, plan).length === 0);
    if (candidates.length === 0 || gpuMemoryPlan(c).model === undefined) return undefined;
    const read = candidates.map((n) => ({ name: n.metadata?.name as string, gpu: nodeGpuGiB(n) }));
    const unknown = read.filter((r) => r.gpu === undefined).map((r) => r.name);
    const known = read.filter((r): r is { name: string; gpu: { gib: number; from: string } } => r.gpu !== undefined);
    if (known.length === 0) {
        return warn(
            GPU_MEMORY_CHECK,
            `no GPU node carries nvidia.com/gpu.memory or a known nvidia.com/gpu.product label (${unknown.slice(0, 5).join(", ")}): the memory fit is unchecked on the cluster`,
            "install NVIDIA GPU feature discovery (the GPU Operator runs it), or set training.gpuMemory.gib to the GPUs' memory",
        );
    }
    const smallest = known.reduce((a, b) => (b.gpu.gib < a.gpu.gib ? b : a));
    const where = `${smallest.name} (${smallest.gpu.from}: ${smallest.gpu.gib.toFixed(1)} GiB per GPU)${known.length > 1 ? ", the smallest GPU the training pod can land on" : ""}`;
    return gpuMemoryFinding(plan, where, smallest.gpu.gib, unknown.length > 0 ? `; no memory label on ${unknown.slice(0, 5).join(", ")}` : "");
}
