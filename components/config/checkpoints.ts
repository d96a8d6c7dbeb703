/**
 * The checkpoint volume's rules, as pure functions: what each program writes there, how large one
 * checkpoint is for a model, dtype and optimizer, and the size the volume needs for one run. Pure
 * data and arithmetic: no Pulumi, no I/O.
 *
 * What a checkpoint holds (transformers 5.24 `Trainer._save_checkpoint`): the model weights in the
 * dtype the model is held in (`save_model`), the optimizer state (`optimizer.pt`, unless
 * `save_only_model`), the scheduler, the RNG state, and `trainer_state.json`, written last.
 */
import { quantityValue } from "../shared/quantity";
import { CUSTOM_PROGRAM, programFacts } from "./programs";
import type { WeightDtype } from "./terms";
import type { PlatformConfig } from "./types";

const DTYPE_BYTES: Readonly<Record<WeightDtype, number>> = { float32: 4, bfloat16: 2, float16: 2 };

/**
 * Parameter counts of the models the recipes train (each model card's "Number of Parameters" on the
 * Hub: Qwen/Qwen3-1.7B 1.7B, Qwen/Qwen3-4B-Instruct-2507 4.0B, Qwen/Qwen3-8B 8.2B, Qwen/Qwen3-32B
 * 32.8B). Any other model: set training.checkpoints.parameters.
 */
export const KNOWN_PARAMETERS: Readonly<Record<string, number>> = {
    "Qwen/Qwen3-1.7B": 1.7e9,
    "Qwen/Qwen3-4B-Instruct-2507": 4.0e9,
    "Qwen/Qwen3-8B": 8.2e9,
    "Qwen/Qwen3-32B": 32.8e9,
};

/**
 * bitsandbytes' 8-bit two-state optimizers (Adam, AdamW, paged or not; bitsandbytes
 * `bitsandbytes/optim/optimizer.py`, `Optimizer2State.init_state`): `state1` and `state2` are uint8,
 * one byte per element each, plus one float32 `absmax` per block of 256 elements for each state.
 * Tensors under `min_8bit_size` (4096 elements: norms, biases) keep float32 states, a negligible share.
 */
export const BNB_8BIT_STATE_BYTES = 2 + (2 * 4) / 256;

/** One checkpoint's bytes per parameter, with the parts (plan.md shows them). */
export interface CheckpointBytes {
    readonly weights: number;
    readonly optimizer: number;
    readonly perParameter: number;
    /** How the optimizer's part was counted. */
    readonly optimizerRule: string;
}

/**
 * Bytes per parameter of one full checkpoint. torch's Adam/AdamW keep `exp_avg` and `exp_avg_sq`
 * in the parameter's dtype (`torch.zeros_like(p)`): fp32 weights + Adam = 4 + 8 = 12 bytes. (The
 * often quoted 16 bytes per parameter is training memory: it adds the fp32 gradients, which a
 * checkpoint does not hold.) An optimizer this table does not know is counted as two fp32 states.
 */
export function checkpointBytesPerParameter(dtype: WeightDtype, optim: string | undefined): CheckpointBytes {
    const weights = DTYPE_BYTES[dtype];
    const o = optim ?? "adamw_torch";
    let optimizer: number;
    let optimizerRule: string;
    if (/8bit/.test(o)) {
        optimizer = BNB_8BIT_STATE_BYTES;
        optimizerRule = `${o}: bitsandbytes 8-bit states, 2 x uint8 + 2 x fp32 absmax per 256 = ${BNB_8BIT_STATE_BYTES} bytes`;
    } else if (/^(adamw|adam)/.test(o) && !/4bit|lomo|apollo|galore/.test(o)) {
        optimizer = 2 * weights;
        optimizerRule = `${o}: exp_avg + exp_avg_sq in ${dtype} = ${2 * weights} bytes`;
    } else if (o === "sgd") {
        optimizer = 0;
        optimizerRule = "sgd: no state";
    } else {
        optimizer = 8;
        optimizerRule = `${o}: not in the table, counted as two fp32 states (8 bytes)`;
    }
    return { weights, optimizer, perParameter: weights + optimizer, optimizerRule };
}

/** What a program writes to the checkpoint volume over one run. */
export interface ProgramCheckpoints {
    /** Full checkpoints (weights + optimizer + trainer state) on the volume at once, at the peak. */
    readonly full: number;
    /** Weights-only saves (the final model, a push's local copy). */
    readonly weightsOnly: number;
    readonly why: string;
}

/** Headroom over the computed bytes: tokenizer and config files, logs, RNG and scheduler state, filesystem overhead. */
export const CHECKPOINT_MARGIN = 1.2;

/** The volume need of one run, or undefined where the parameter count is unknown. */
export interface CheckpointNeed {
    readonly parameters: number;
    readonly dtype: WeightDtype;
    readonly bytes: CheckpointBytes;
    readonly writes: ProgramCheckpoints;
    /** Bytes one run needs, margin included. */
    readonly runBytes: number;
    /** The same as a Kubernetes quantity, rounded up to whole Gi. */
    readonly runSize: string;
}

/**
 * The dtype the trainer holds its weights in: training.checkpoints.dtype, else the black-box
 * training.dtype (one dtype for trainer and vLLM; `auto` says nothing), else the program's, else
 * float32 (the largest).
 */
export function checkpointDtype(c: PlatformConfig): WeightDtype {
    const p = programFacts(c.training.program);
    const trainer = c.training.dtype !== undefined && c.training.dtype !== "auto" ? c.training.dtype : undefined;
    return c.training.checkpoints.dtype ?? trainer ?? (p?.checkpoints.dtype as WeightDtype | undefined) ?? "float32";
}

/** What the stack's program writes over one run. */
export function programCheckpoints(c: PlatformConfig): ProgramCheckpoints {
    const t = c.training;
    const p = programFacts(t.program);
    const push = t.hubRepoId !== undefined ? 1 : 0;
    if (t.program === CUSTOM_PROGRAM || p === undefined) {
        const keep = t.checkpoints.keepLast ?? DEFAULT_KEEP_LAST;
        return {
            full: keep + 1,
            weightsOnly: 1,
            why: `--save_total_limit ${keep}: ${keep} kept + 1 being written before the oldest is removed (transformers rotates after saving), and the final model`,
        };
    }
    return {
        full: p.checkpoints.full,
        weightsOnly: p.checkpoints.weightsOnly + push,
        why: p.checkpoints.why + (push ? "; the push saves the model locally first" : ""),
    };
}

/** Bytes in Gi, rounded up, as a quantity. */
function giCeil(bytes: number): string {
    return `${Math.max(1, Math.ceil(bytes / 1024 ** 3))}Gi`;
}

/** One run's need on the checkpoint volume (undefined: parameter count unknown). */
export function checkpointNeed(c: PlatformConfig): CheckpointNeed | undefined {
    const parameters = c.training.checkpoints.parameters ?? KNOWN_PARAMETERS[c.model.name];
    if (parameters === undefined) return undefined;
    const dtype = checkpointDtype(c);
    const bytes = checkpointBytesPerParameter(dtype, c.training.optim ?? programFacts(c.training.program)?.checkpoints.optim);
    const writes = programCheckpoints(c);
    const runBytes = Math.ceil(parameters * (writes.full * bytes.perParameter + writes.weightsOnly * bytes.weights) * CHECKPOINT_MARGIN);
    return { parameters, dtype, bytes, writes, runBytes, runSize: giCeil(runBytes) };
}

/**
 * A recipe's checkpoint size: room for `runs` runs of the rule, each counted with a Hub push (a stack
 * on the recipe may set hubRepoId); older runs are pruned with `npm run checkpoints`.
 */
export function recipeCheckpointSize(c: PlatformConfig, runs: number): string {
    const need = checkpointNeed(withHubPush(c));
    if (need === undefined) throw new Error(`recipeCheckpointSize: no parameter count for ${c.model.name}`);
    return giCeil(need.runBytes * runs);
}

/** The config as if it pushed to the Hub (a push saves the model on the volume first): what a stack on it may set. */
export function withHubPush(c: PlatformConfig): PlatformConfig {
    return { ...c, training: { ...c.training, hubRepoId: c.training.hubRepoId ?? "recipe/push" } };
}

/** Every problem of the checkpoint settings, together. */
export function validateCheckpoints(c: PlatformConfig): string[] {
    const t = c.training;
    const problems: string[] = [];
    const p = programFacts(t.program);
    if (t.resumeFromCheckpoint !== false && p !== undefined && !p.checkpoints.resumable) {
        problems.push(
            `training.resumeFromCheckpoint: ${p.source.path} cannot resume: ${p.checkpoints.why}, and it takes no resume flag: set it to false (or run your own script, program '${CUSTOM_PROGRAM}', that saves checkpoints and takes --resume_from_checkpoint)`,
        );
    }
    if (t.resumeFromCheckpoint !== false && !t.checkpoints.enabled)
        problems.push(`training.resumeFromCheckpoint: resuming needs the checkpoint volume: set training.checkpoints.enabled to true`);
    if (typeof t.resumeFromCheckpoint === "string" && t.resumeFromCheckpoint.split("/")[0] === c.runId && !t.resumeFromCheckpoint.includes("/"))
        problems.push(
            `training.resumeFromCheckpoint: '${t.resumeFromCheckpoint}' is this run's own id: set it to true (this run's latest complete checkpoint)`,
        );
    if (t.checkpoints.keepLast !== undefined && p !== undefined)
        problems.push(`training.checkpoints.keepLast: ${p.source.path} takes no --save_total_limit (${p.checkpoints.why}): remove it`);
    const need = t.checkpoints.enabled ? checkpointNeed(c) : undefined;
    if (need !== undefined && need.runBytes > quantityValue(t.checkpoints.size)) {
        problems.push(
            `training.checkpoints.size: ${t.checkpoints.size} holds less than one run of ${c.model.name} writes (${need.runSize}: ${describeNeed(need)}): raise it to at least ${need.runSize}${p === undefined ? " or lower training.checkpoints.keepLast" : ""}`,
        );
    }
    return problems;
}

/** The default retention for a custom script (`--save_total_limit`). */
export const DEFAULT_KEEP_LAST = 2;

/** `8.2e9 params x (2 full x 6.03 + 1 weights x 4) bytes x 1.2`: the arithmetic, for messages and plan.md. */
export function describeNeed(n: CheckpointNeed): string {
    const billions = `${Number((n.parameters / 1e9).toFixed(2))}B`;
    return (
        `${billions} parameters x (${n.writes.full} full checkpoint${n.writes.full === 1 ? "" : "s"} x ${Number(n.bytes.perParameter.toFixed(3))} bytes ` +
        `[${n.dtype} weights ${n.bytes.weights} + ${n.bytes.optimizerRule}] + ${n.writes.weightsOnly} weights-only x ${n.bytes.weights}) x ${CHECKPOINT_MARGIN} margin`
    );
}
