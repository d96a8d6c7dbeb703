/**
 * The architecture facts the GPU memory estimate needs, per model: the numbers of each model's
 * config.json on the Hub (huggingface.co/<model>/blob/main/config.json, read 2026-12-03). A model
 * outside the table: training.gpuMemory.model gives the same numbers. Pure data and arithmetic.
 */

/** A decoder-only transformer's shape (config.json names in the comments). */
export interface ModelFacts {
    /** num_hidden_layers */
    readonly layers: number;
    /** hidden_size */
    readonly hidden: number;
    /** intermediate_size (the MLP's inner width) */
    readonly intermediate: number;
    /** num_attention_heads */
    readonly heads: number;
    /** num_key_value_heads */
    readonly kvHeads: number;
    /** head_dim */
    readonly headDim: number;
    /** vocab_size */
    readonly vocab: number;
    /** tie_word_embeddings: one matrix for the input embedding and the lm_head */
    readonly tiedEmbeddings: boolean;
    /** max_position_embeddings: vLLM's max model length when none is set */
    readonly maxPositions: number;
}

/** The recipes' models (and Qwen3-4B-Instruct-2507, TRL's opencode script's default model). */
export const MODEL_FACTS: Readonly<Record<string, ModelFacts>> = {
    "Qwen/Qwen3-1.7B": {
        layers: 28,
        hidden: 2048,
        intermediate: 6144,
        heads: 16,
        kvHeads: 8,
        headDim: 128,
        vocab: 151936,
        tiedEmbeddings: true,
        maxPositions: 40960,
    },
    "Qwen/Qwen3-4B-Instruct-2507": {
        layers: 36,
        hidden: 2560,
        intermediate: 9728,
        heads: 32,
        kvHeads: 8,
        headDim: 128,
        vocab: 151936,
        tiedEmbeddings: true,
        maxPositions: 262144,
    },
    "Qwen/Qwen3-8B": {
        layers: 36,
        hidden: 4096,
        intermediate: 12288,
        heads: 32,
        kvHeads: 8,
        headDim: 128,
        vocab: 151936,
        tiedEmbeddings: false,
        maxPositions: 40960,
    },
    "Qwen/Qwen3-32B": {
        layers: 64,
        hidden: 5120,
        intermediate: 25600,
        heads: 64,
        kvHeads: 8,
        headDim: 128,
        vocab: 151936,
        tiedEmbeddings: false,
        maxPositions: 40960,
    },
};

/**
 * Parameters of a Qwen3-style decoder (no biases; q/k RMSNorm per head; SwiGLU MLP): embeddings
 * (twice if untied) + per layer q, k, v, o, gate/up/down, two norms and the q/k norms + the final norm.
 * Matches transformers' count for the calibrated models exactly (Qwen3-1.7B 1,720,574,976;
 * Qwen3-8B 8,190,735,360; Qwen3-4B 4,022,468,096: bench/gpu/results/memory-calibration.jsonl).
 */
export function parameterCount(m: ModelFacts): number {
    const q = m.heads * m.headDim;
    const kv = m.kvHeads * m.headDim;
    const layer = m.hidden * q + 2 * m.hidden * kv + q * m.hidden + 3 * m.hidden * m.intermediate + 2 * m.hidden + 2 * m.headDim;
    return m.vocab * m.hidden * (m.tiedEmbeddings ? 1 : 2) + m.layers * layer + m.hidden;
}
