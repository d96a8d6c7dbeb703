/**
 * The "GPU memory" finding, for both targets: each role's estimate (components/config/gpu-fit.ts)
 * against a GPU of `gibPerGpu` read from the target (Kubernetes: the nodes' labels; Docker: the
 * host's nvidia-smi). Pure.
 */
import { gpuMemoryPlan, validateGpuMemory } from "../config/gpu-fit";
import { GIB, gib } from "../config/gpu-memory";
import type { PlatformPlan } from "../platform";
import { fail, type Finding, ok, warn } from "./report";

export const GPU_MEMORY_CHECK = "GPU memory";

/** The finding for the stack on GPUs of `gibPerGpu`, `where` naming them; `rest` is appended to an ok. */
export function gpuMemoryFinding(plan: PlatformPlan, where: string, gibPerGpu: number, rest = ""): Finding | undefined {
    const c = plan.config;
    const on = { bytes: gibPerGpu * GIB, what: where };
    const estimate = gpuMemoryPlan(c, on);
    if (estimate.model === undefined) return undefined;
    const summary = estimate.roles.map((r) => `${r.role} ${gib(r.need)} of ${r.budget === undefined ? "?" : gib(r.budget)} GiB`).join(", ");
    const problems = validateGpuMemory(c, on);
    if (problems.length === 0) return ok(GPU_MEMORY_CHECK, `each role fits on ${where}: ${summary}${rest}`);
    const found = `on ${where}: ${summary}`;
    const fix = problems.map((p) => p.replace(/^training\.gpuMemory: /, "")).join(" | ");
    return c.training.gpuMemory.enforce !== false
        ? fail(GPU_MEMORY_CHECK, found, fix)
        : warn(GPU_MEMORY_CHECK, `${found} (training.gpuMemory.enforce is false)`, fix);
}
