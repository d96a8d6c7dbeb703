/**
 * The GPU memory model: one trainer process's peak and one vLLM GPU's need, in bytes, from the
 * model's facts and the run's shape. Pure arithmetic; the constants are calibrated on one H200 with
 * TRL 1.16's real GRPOTrainer step (bench/gpu/memory_calibration.py, bench/results.md "GPU memory
 * calibration"; docs/design/gpu-memory.md says what each term is and where it comes from).
 */
import { checkpointBytesPerParameter } from "./checkpoints";
import { parameterCount, type ModelFacts } from "./model-facts";
import type { WeightDtype } from "./terms";

export const GIB = 1024 ** 3;

const DTYPE_BYTES: Readonly<Record<WeightDtype, number>> = { float32: 4, bfloat16: 2, float16: 2 };

/**
 * Calibrated constants (fitted as one set to the 10 measured peaks, minimax error 7%; the eleventh
 * shape, Qwen3-8B fp32 adamw_torch, ran out of memory and the model puts it above the H200).
 */
export const CALIBRATION = {
    /** With gradient checkpointing: the recomputed layer's working set, x tokens x (6 hidden + 4 intermediate) x dtype bytes. */
    checkpointedLayer: 3.3,
    /** Without: every layer's saved activations, x tokens x layers x (6 hidden + 4 intermediate) x dtype bytes. */
    fullActivations: 1.5,
    /**
     * float32 only: torch's SDPA has no flash kernel for fp32 and the peak grows with the square of the
     * sequence: x batch x heads x sequence^2 x 4 bytes (per layer held: one with checkpointing).
     */
    fp32AttentionScores: 3.0,
    /** bitsandbytes paged 8-bit state (CUDA managed memory, outside torch's counters) per parameter, over its 2.03 bytes. */
    pagedStateFactor: 2.5 / (2 + (2 * 4) / 256),
    /** CUDA context, cuBLAS workspace and allocator slack seen outside torch's allocated bytes (GiB). */
    overheadGiB: 1.35,
} as const;

/** One trainer process's shape. */
export interface TrainerShape {
    readonly model: ModelFacts;
    readonly dtype: WeightDtype;
    /** transformers OptimizerNames value (`--optim`). */
    readonly optim: string;
    readonly gradientCheckpointing: boolean;
    /** Sequences in one micro-batch (per_device_train_batch_size). */
    readonly batch: number;
    readonly promptTokens: number;
    readonly completionTokens: number;
    /** FSDP shards (trainer processes over every trainer node); 1: each process holds everything. */
    readonly shards: number;
}

/** The trainer's peak per GPU, by part (bytes). */
export interface TrainerMemory {
    readonly parameters: number;
    readonly weights: number;
    readonly gradients: number;
    /** Optimizer state in torch's allocator. */
    readonly optimizer: number;
    /** Paged (CUDA managed) optimizer state, resident on the GPU while it steps. */
    readonly optimizerPaged: number;
    /** Activations at the backward peak. */
    readonly activations: number;
    /** The optimizer step's temporary (torch's foreach AdamW: one state-sized buffer). */
    readonly stepTemporary: number;
    /** FSDP: the layers gathered whole while they compute (two layers and the embeddings). */
    readonly gathered: number;
    readonly overhead: number;
    readonly peak: number;
}

/** Whether an optimizer keeps its state paged (bitsandbytes paged_*). */
export function pagedOptimizer(optim: string): boolean {
    return optim.startsWith("paged_");
}

/** torch's foreach AdamW (adamw_torch, the default of transformers < 5): one state-sized temporary in its step. */
function stepTemporaryBytes(optim: string, parameters: number, bytes: number): number {
    return optim === "adamw_torch" || optim === "adamw_hf" ? parameters * bytes : 0;
}

/** Activation bytes of one micro-batch on one process. */
export function activationBytes(s: Omit<TrainerShape, "optim" | "shards">): number {
    const m = s.model;
    const bytes = DTYPE_BYTES[s.dtype];
    const seq = s.promptTokens + s.completionTokens;
    const tokens = s.batch * seq;
    const perLayer = tokens * (6 * m.hidden + 4 * m.intermediate) * bytes;
    const scores = s.dtype === "float32" ? s.batch * m.heads * seq * seq * 4 * CALIBRATION.fp32AttentionScores : 0;
    return s.gradientCheckpointing ? perLayer * CALIBRATION.checkpointedLayer + scores : m.layers * (perLayer * CALIBRATION.fullActivations + scores);
}

/** One trainer process's peak: static state + max(activations, the optimizer step's temporary) + overhead. */
export function trainerMemory(s: TrainerShape): TrainerMemory {
    const m = s.model;
    const parameters = parameterCount(m);
    const bytes = DTYPE_BYTES[s.dtype];
    const local = parameters / s.shards;
    const state = checkpointBytesPerParameter(s.dtype, s.optim).optimizer * local;
    const paged = pagedOptimizer(s.optim);
    const layerParameters = (parameters - m.vocab * m.hidden * (m.tiedEmbeddings ? 1 : 2)) / m.layers;
    const parts = {
        parameters,
        weights: local * bytes,
        gradients: local * bytes,
        optimizer: paged ? 0 : state,
        optimizerPaged: paged ? state * CALIBRATION.pagedStateFactor : 0,
        activations: activationBytes(s),
        stepTemporary: stepTemporaryBytes(s.optim, local, bytes),
        gathered: s.shards > 1 ? (2 * layerParameters + m.vocab * m.hidden) * bytes : 0,
        overhead: CALIBRATION.overheadGiB * GIB,
    };
    const peak =
        parts.weights +
        parts.gradients +
        parts.optimizer +
        parts.optimizerPaged +
        Math.max(parts.activations, parts.stepTemporary) +
        parts.gathered +
        parts.overhead;
    return { ...parts, peak };
}

/** vLLM's own start-up need besides weights and KV cache: CUDA context, the profiling run's activations, CUDA graphs (GiB). */
export const VLLM_OVERHEAD_GIB = 3;

/** One vLLM GPU's need. */
export interface VllmShape {
    readonly model: ModelFacts;
    readonly dtype: WeightDtype;
    /** Tensor parallel size (the GPUs one engine spans). */
    readonly tensorParallel: number;
    readonly maxModelLen: number;
    /** The share of the GPU vLLM takes (--gpu-memory-utilization). */
    readonly utilization: number;
    /** Sequences in flight at once. */
    readonly concurrency: number;
}

export interface VllmMemory {
    readonly weights: number;
    /** KV cache bytes per token on one GPU (K and V, every layer, this GPU's KV heads). */
    readonly kvPerToken: number;
    /** KV cache of one sequence at maxModelLen. */
    readonly kvOneSequence: number;
    readonly overhead: number;
    /** weights + one full-length sequence's KV + overhead: vLLM refuses to start below it. */
    readonly need: number;
    /** utilization x the GPU. */
    readonly budget: number;
    /** Full-length sequences the KV cache holds at once. */
    readonly sequencesAtFullLength: number;
}

/** vLLM on one GPU of `gpuBytes`: weights sharded by TP, KV heads split by TP (at least one per GPU). */
export function vllmMemory(s: VllmShape, gpuBytes: number): VllmMemory {
    const bytes = DTYPE_BYTES[s.dtype];
    const weights = (parameterCount(s.model) * bytes) / s.tensorParallel;
    const kvHeads = Math.max(1, s.model.kvHeads / s.tensorParallel);
    const kvPerToken = 2 * s.model.layers * kvHeads * s.model.headDim * bytes;
    const kvOneSequence = kvPerToken * s.maxModelLen;
    const overhead = VLLM_OVERHEAD_GIB * GIB;
    const budget = s.utilization * gpuBytes;
    const sequencesAtFullLength = Math.max(0, Math.floor((budget - weights - overhead) / kvOneSequence));
    return { weights, kvPerToken, kvOneSequence, overhead, need: weights + kvOneSequence + overhead, budget, sequencesAtFullLength };
}

/** Bytes as GiB with one decimal. */
export function gib(bytes: number): string {
    return (bytes / GIB).toFixed(1);
}
