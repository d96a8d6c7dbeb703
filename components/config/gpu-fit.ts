/**
 * Whether a stack's roles fit its GPUs: the memory model (gpu-memory.ts) applied to the resolved
 * config, per role and per GPU, against the GPU's memory; the refusal names the numbers and the
 * settings that would fit. Pure functions: plan.md, the config check and the preflight all call these.
 */
import { checkpointDtype } from "./checkpoints";
import { GIB, gib, trainerMemory, vllmMemory, type TrainerMemory, type TrainerShape, type VllmMemory, type VllmShape } from "./gpu-memory";
import { GPU_PRODUCT_MIB, productGiB, usableGiB } from "./gpu-products";
import { MODEL_FACTS, type ModelFacts } from "./model-facts";
import { CUSTOM_PROGRAM, programFacts } from "./programs";
import { runSampling } from "./run-sampling";
import type { WeightDtype } from "./terms";
import type { PlatformConfig } from "./types";

/** TRL GRPOConfig's colocate default (vllm_gpu_memory_utilization 0.3), which the platform leaves as it is. */
export const COLOCATE_VLLM_SHARE = 0.3;
/**
 * Prompt tokens per sequence when training.gpuMemory.promptTokens is unset: the seeds' MBPP/Wordle
 * prompts (system + task + tool turns) counted at 1024, TRL's opencode task prompts at 512; these give
 * the rendered shapes the calibration measured (8 x 2048 and 4 x 4608).
 */
const PROMPT_TOKENS: Readonly<Record<string, number>> = {
    train_coding_whitebox_eval: 1024,
    train_coding_whitebox: 1024,
    train_wordle_whitebox: 1024,
    opencode_hf_sandbox: 512,
    [CUSTOM_PROGRAM]: 512,
};

/** The GPU the run is checked against. */
export interface GpuMemorySource {
    readonly bytes: number;
    readonly what: string;
}

/** training.gpuMemory.gib, else target.gpuProduct, else training.gpuMemory.product (undefined: unknown). */
export function gpuMemorySource(c: PlatformConfig): GpuMemorySource | undefined {
    const g = c.training.gpuMemory;
    if (g.gib !== undefined) return { bytes: g.gib * GIB, what: `training.gpuMemory.gib ${g.gib}` };
    const product = (c.target.kind === "kubernetes" ? c.target.gpuProduct : undefined) ?? g.product;
    const known = product === undefined ? undefined : productGiB(product);
    return known === undefined ? undefined : { bytes: known * GIB, what: `${product} (${known.toFixed(1)} GiB usable)` };
}

/** The setting the GPU memory check reads its GPU from (the order gpuMemorySource() takes them in), or undefined: none set. */
export type GpuMemoryField = "training.gpuMemory.gib" | "target.gpuProduct" | "training.gpuMemory.product";

export function gpuMemoryField(c: PlatformConfig): GpuMemoryField | undefined {
    if (c.training.gpuMemory.gib !== undefined) return "training.gpuMemory.gib";
    if (c.target.kind === "kubernetes" && c.target.gpuProduct !== undefined) return "target.gpuProduct";
    return c.training.gpuMemory.product !== undefined ? "training.gpuMemory.product" : undefined;
}

/** One known GPU product (gpu-products.ts) and whether every role of the stack fits one of its GPUs. */
export interface ProductFit {
    readonly product: string;
    readonly usableGiB: number;
    /** Undefined: the model's facts are unknown, so nothing is estimated. */
    readonly fits?: boolean;
}

/** Every known GPU product, largest first, with whether the stack's roles fit it (the same estimate as the check). */
export function knownProductFits(c: PlatformConfig): ProductFit[] {
    return Object.entries(GPU_PRODUCT_MIB)
        .sort(([, a], [, b]) => b - a)
        .map(([product, mib]) => {
            const on = { bytes: usableGiB(mib) * GIB, what: product };
            const roles = gpuMemoryPlan(c, on).roles;
            return { product, usableGiB: usableGiB(mib), fits: roles.length === 0 ? undefined : roles.every((r) => r.fits === true) };
        });
}

/** The model's facts: training.gpuMemory.model, else the table. */
export function modelFactsOf(c: PlatformConfig): ModelFacts | undefined {
    return c.training.gpuMemory.model ?? MODEL_FACTS[c.model.name];
}

/** Whether the program takes a flag for a setting (custom: the TrlParser contract takes them all). */
function takes(c: PlatformConfig, arg: "optim" | "gradientCheckpointing" | "maxCompletionLength"): boolean {
    const p = programFacts(c.training.program);
    return p === undefined || p.args[arg] !== undefined;
}

/** One trainer process's shape as the stack renders it. */
export function trainerShape(c: PlatformConfig, model: ModelFacts): TrainerShape {
    const t = c.training;
    const p = programFacts(t.program);
    const gcDefault = p?.args.gradientCheckpointing ? p.flags[p.args.gradientCheckpointing]?.default !== false : true;
    const fsdp = t.accelerateConfig !== undefined && /fsdp/i.test(t.accelerateConfig);
    return {
        model,
        dtype: checkpointDtype(c),
        optim: t.optim ?? p?.checkpoints.optim ?? "adamw_torch_fused",
        gradientCheckpointing: t.gradientCheckpointing ?? gcDefault,
        batch: p?.fixed.perDeviceTrainBatchSize ?? t.perDeviceTrainBatchSize,
        promptTokens: t.gpuMemory.promptTokens ?? PROMPT_TOKENS[t.program] ?? 512,
        completionTokens: runSampling(c).maxCompletionTokens,
        shards: fsdp ? t.numProcesses * t.nodes : 1,
    };
}

/** vLLM's dtype: the black box serves in the trainer's one dtype; the white box in the model's (bf16 for Qwen3). */
function vllmDtype(c: PlatformConfig): WeightDtype {
    const d = c.training.dtype;
    if (c.training.layout !== "blackbox" || d === "auto") return "bfloat16";
    return d ?? (programFacts(c.training.program)?.trainerDtype as WeightDtype | undefined) ?? "float32";
}

/** vLLM's shape: colocated (TRL's 0.3 share, TP 1) or a server on vllmGpus (TP = vllmGpus). */
export function vllmShape(c: PlatformConfig, model: ModelFacts): VllmShape {
    const t = c.training;
    const colocate = t.layout === "whitebox-colocate";
    return {
        model,
        dtype: vllmDtype(c),
        tensorParallel: colocate ? 1 : Math.max(1, t.vllmGpus),
        maxModelLen: t.maxModelLen ?? model.maxPositions,
        utilization: colocate ? COLOCATE_VLLM_SHARE : t.gpuMemoryUtilization,
        concurrency: t.layout === "blackbox" ? t.maxInflight : c.demand.generationBatch,
    };
}

/** One role's fit on its GPUs. */
export interface RoleFit {
    readonly role: "trainer" | "vllm";
    /** Bytes the role needs on one GPU. */
    readonly need: number;
    /** Bytes it may use on one GPU (undefined: the GPU's memory is unknown). */
    readonly budget?: number;
    readonly budgetRule: string;
    readonly fits?: boolean;
}

/** The whole memory picture of a stack. */
export interface GpuMemoryPlan {
    readonly gpu?: GpuMemorySource;
    /** Undefined: the model's facts are unknown (set training.gpuMemory.model). */
    readonly model?: ModelFacts;
    readonly trainerShape?: TrainerShape;
    readonly trainer?: TrainerMemory;
    readonly vllmShape?: VllmShape;
    readonly vllm?: VllmMemory;
    readonly roles: readonly RoleFit[];
}

/** Every role's estimate against its GPU (`on`: a GPU read from the target, instead of the config's). */
export function gpuMemoryPlan(c: PlatformConfig, on?: GpuMemorySource): GpuMemoryPlan {
    const gpu = on ?? gpuMemorySource(c);
    const model = modelFactsOf(c);
    if (model === undefined) return { gpu, roles: [] };
    const colocate = c.training.layout === "whitebox-colocate";
    const ts = trainerShape(c, model);
    const trainer = trainerMemory(ts);
    const vs = vllmShape(c, model);
    const vllm = vllmMemory(vs, gpu?.bytes ?? 0);
    const trainerBudget = gpu === undefined ? undefined : gpu.bytes * (colocate ? 1 - COLOCATE_VLLM_SHARE : 1);
    const roles: RoleFit[] = [
        {
            role: "trainer",
            need: trainer.peak,
            budget: trainerBudget,
            budgetRule: colocate ? `the GPU less vLLM's colocated share ${COLOCATE_VLLM_SHARE}` : "the whole GPU",
            fits: trainerBudget === undefined ? undefined : trainer.peak <= trainerBudget,
        },
        {
            role: "vllm",
            need: vllm.need,
            budget: gpu === undefined ? undefined : vllm.budget,
            budgetRule: colocate ? `TRL's colocate share ${COLOCATE_VLLM_SHARE} of the GPU` : `--gpu-memory-utilization ${vs.utilization} of the GPU`,
            fits: gpu === undefined ? undefined : vllm.need <= vllm.budget,
        },
    ];
    return { gpu, model, trainerShape: ts, trainer, vllmShape: vs, vllm, roles };
}

/** `weights 30.5 + gradients 30.5 + ...`: the trainer's parts in GiB. */
export function describeTrainer(m: TrainerMemory): string {
    const parts: Array<[string, number]> = [
        ["weights", m.weights],
        ["gradients", m.gradients],
        ["optimizer state", m.optimizer],
        ["paged optimizer state", m.optimizerPaged],
        [m.activations >= m.stepTemporary ? "activations" : "optimizer step temporary", Math.max(m.activations, m.stepTemporary)],
        ["FSDP gathered layers", m.gathered],
        ["CUDA context and slack", m.overhead],
    ];
    return parts
        .filter(([, b]) => b > 0)
        .map(([n, b]) => `${n} ${gib(b)}`)
        .join(" + ");
}

/** `Qwen/Qwen3-8B, float32, paged_adamw_8bit, batch 4 x (512 + 4096) tokens, gradient checkpointing on`. */
export function describeTrainerShape(name: string, s: TrainerShape): string {
    return `${name}, ${s.dtype}, ${s.optim}, batch ${s.batch} x (${s.promptTokens} prompt + ${s.completionTokens} completion) tokens, gradient checkpointing ${s.gradientCheckpointing ? "on" : "off"}${s.shards > 1 ? `, FSDP over ${s.shards} processes` : ""}`;
}

/** `weights 15.3 + KV cache of one 32768-token sequence 4.5 + vLLM overhead 3.0`. */
export function describeVllm(v: VllmMemory, s: VllmShape): string {
    return `weights ${gib(v.weights)} + KV cache of one ${s.maxModelLen}-token sequence ${gib(v.kvOneSequence)} + vLLM overhead ${gib(v.overhead)} (${s.dtype}, TP ${s.tensorParallel})`;
}

/** The largest value in [1, upTo] for which `fits` holds (fits is monotone: smaller fits better), or undefined. */
function largest(upTo: number, fits: (n: number) => boolean): number | undefined {
    if (!fits(1)) return undefined;
    let lo = 1;
    let hi = upTo;
    while (lo < hi) {
        const mid = Math.ceil((lo + hi) / 2);
        if (fits(mid)) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/**
 * The black box's bf16 setting: training.dtype, which a named program that fixes its dtype refuses
 * (TRL's opencode script trains in AsyncGRPO's float32): then your own script with it.
 */
function bfloat16Setting(c: PlatformConfig): string {
    const fixed = programFacts(c.training.program)?.trainerDtype;
    return fixed === undefined
        ? "training.dtype: bfloat16"
        : `your own script (program ${CUSTOM_PROGRAM}) with training.dtype: bfloat16 (${c.training.program} trains in ${fixed} only)`;
}

/** Single settings that bring the trainer within `budget`, each with its estimate. */
export function trainerFixes(c: PlatformConfig, s: TrainerShape, budget: number): string[] {
    const fixes: string[] = [];
    const peak = (x: Partial<TrainerShape>) => trainerMemory({ ...s, ...x }).peak;
    const add = (setting: string, x: Partial<TrainerShape>) => {
        if (peak(x) <= budget) fixes.push(`${setting} (${gib(peak(x))} GiB)`);
    };
    if (s.dtype === "float32" && c.training.layout === "blackbox") add(bfloat16Setting(c), { dtype: "bfloat16" });
    if (!/8bit/.test(s.optim) && takes(c, "optim")) add("training.optim: paged_adamw_8bit", { optim: "paged_adamw_8bit" });
    if (!s.gradientCheckpointing && takes(c, "gradientCheckpointing")) add("training.gradientCheckpointing: true", { gradientCheckpointing: true });
    if (takes(c, "maxCompletionLength")) {
        const n = largest(s.completionTokens - 1, (completionTokens) => peak({ completionTokens }) <= budget);
        if (n !== undefined && n >= 256) fixes.push(`training.maxCompletionLength: ${n} or less (${gib(peak({ completionTokens: n }))} GiB)`);
    }
    const fixedBatch = programFacts(c.training.program)?.fixed.perDeviceTrainBatchSize !== undefined;
    if (!fixedBatch && s.batch > 1) {
        const b = largest(s.batch - 1, (batch) => peak({ batch }) <= budget);
        if (b !== undefined)
            fixes.push(`training.perDeviceTrainBatchSize: ${b} (${gib(peak({ batch: b }))} GiB; raise gradientAccumulationSteps to keep the batch)`);
    }
    const shards = [2, 4, 8, 16].find((n) => n > s.shards && peak({ shards: n }) <= budget);
    if (shards !== undefined)
        fixes.push(
            `training.trainerGpus: ${shards} with an FSDP accelerate config in training.accelerateConfig (e.g. /app/fsdp2.yaml in the black-box trainer image): the state sharded over ${shards} processes (${gib(peak({ shards }))} GiB per GPU)`,
        );
    return fixes;
}

/** Settings that bring vLLM within its budget. */
export function vllmFixes(c: PlatformConfig, s: VllmShape, gpuBytes: number): string[] {
    const fixes: string[] = [];
    const fits = (x: Partial<VllmShape>) => {
        const v = vllmMemory({ ...s, ...x }, gpuBytes);
        return v.need <= v.budget;
    };
    if (c.training.layout === "whitebox-colocate") return ["training.layout: whitebox-server (vLLM on a GPU of its own)"];
    const len = largest(s.maxModelLen - 1, (maxModelLen) => fits({ maxModelLen }));
    if (len !== undefined) fixes.push(`training.maxModelLen: ${len} or less`);
    if (s.utilization < 0.95 && fits({ utilization: 0.95 })) fixes.push("training.gpuMemoryUtilization: 0.95");
    if (s.dtype === "float32" && fits({ dtype: "bfloat16" })) fixes.push(bfloat16Setting(c));
    for (const tp of [2, 4, 8]) {
        if (tp > s.tensorParallel && fits({ tensorParallel: tp })) {
            fixes.push(`training.vllmGpus: ${tp} (tensor parallel)`);
            break;
        }
    }
    return fixes;
}

const OVERRIDE = "or, if you know better (e.g. CPU offload), set training.gpuMemory.enforce: false to deploy anyway";

/**
 * The refusals: a role whose estimate exceeds its GPU budget, with the numbers and what would fit.
 * `on` (the preflight: a GPU read from the target) checks even with training.gpuMemory.enforce false.
 */
export function validateGpuMemory(c: PlatformConfig, on?: GpuMemorySource): string[] {
    if (c.training.gpuMemory.enforce === false && on === undefined) return [];
    const plan = gpuMemoryPlan(c, on);
    const gpu = plan.gpu;
    if (gpu === undefined) return [];
    const problems: string[] = [];
    for (const r of plan.roles) {
        if (r.fits !== false || r.budget === undefined) continue;
        if (r.role === "trainer" && plan.trainer && plan.trainerShape) {
            const fixes = trainerFixes(c, plan.trainerShape, r.budget);
            problems.push(
                `training.gpuMemory: the trainer needs an estimated ${gib(r.need)} GiB per GPU, more than the ${gib(r.budget)} GiB it has on ${gpu.what} (${r.budgetRule}): ` +
                    `${describeTrainerShape(c.model.name, plan.trainerShape)} = ${describeTrainer(plan.trainer)} GiB. ` +
                    `${fixes.length > 0 ? `Settings that fit: ${fixes.join("; ")}` : "No single setting fits: combine them (training.dtype bfloat16, an 8-bit optimizer, shorter completions), shard the trainer (FSDP over more GPUs) or use a larger GPU"}; ${OVERRIDE}`,
            );
        }
        if (r.role === "vllm" && plan.vllm && plan.vllmShape) {
            const fixes = vllmFixes(c, plan.vllmShape, gpu.bytes);
            problems.push(
                `training.gpuMemory: vLLM needs an estimated ${gib(r.need)} GiB per GPU to start, more than the ${gib(r.budget)} GiB it may take on ${gpu.what} (${r.budgetRule}): ` +
                    `${describeVllm(plan.vllm, plan.vllmShape)} GiB. ${fixes.length > 0 ? `Settings that fit: ${fixes.join("; ")}` : "No single setting fits"}; ${OVERRIDE}`,
            );
        }
    }
    return problems;
}
