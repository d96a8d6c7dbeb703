/**
 * The training programs a recipe can run, as data: each program's command-line interface (every flag
 * with its argparse action, type, choices and default), where in the trainer image it sits, what it
 * fixes in code, and the upstream file and revision it was read from. The trainer's command line is
 * rendered from this table (components/training/program-args.ts) and the tests parse every rendered
 * command with an argparse parser built from it (python/tests/test_trainer_argv.py): the renderer and
 * the check cannot disagree, and a new upstream version is one diff here.
 *
 * `readFrom: "published-commands"`: the program's source was not readable; only the flags seen in
 * its published command lines are listed, and only those are rendered (plan.md says so).
 */
import type { Layout } from "./terms";

/** One argparse argument. */
export interface ProgramFlag {
    /** argparse action: `store` takes one value, `store_true` takes none (`--push-to-hub true` is an error). */
    readonly action: "store" | "store_true";
    /** argparse `type` (store only). */
    readonly type?: "str" | "int" | "float";
    /** argparse `choices`. */
    readonly choices?: readonly string[];
    /** The program's own default (documentation; the platform renders what a run needs). */
    readonly default?: string | number | boolean | null;
    /** argparse `required=True`. */
    readonly required?: boolean;
}

/** Where a program's facts were read. */
export interface ProgramSource {
    /** `huggingface:<repo>` (a Hub model repo) or `github:<owner>/<name>`. */
    readonly repo: string;
    readonly path: string;
    /** The revision read; `main (read 2026-12-01)` where the index gave no commit. */
    readonly revision: string;
}

/**
 * The platform settings a program can be told on its command line, by flag. A setting with no flag
 * here is refused when set for this program (or checked against `fixed`), never dropped.
 */
export interface ProgramArgMap {
    readonly model?: string;
    /** The one env server the program talks to (the stack's router URL). */
    readonly envUrl?: string;
    readonly datasetSize?: string;
    readonly evalSize?: string;
    readonly perDeviceTrainBatchSize?: string;
    readonly gradientAccumulationSteps?: string;
    readonly numGenerations?: string;
    readonly perDeviceEvalBatchSize?: string;
    readonly outputDir?: string;
    /** `--vllm-mode colocate|server`. */
    readonly vllmMode?: string;
    /** White box server layout: the vLLM server's URL. */
    readonly vllmServerUrl?: string;
    readonly trackioSpaceId?: string;
    readonly trackioProject?: string;
    /** store_true flag asking for a push at the end. */
    readonly pushToHub?: string;
    readonly hubModelId?: string;
    readonly maxSteps?: string;
    /** Black box: where the trainer reaches vLLM. */
    readonly vllmUrl?: string;
    /** Black box: where sandboxes reach vLLM (the ingress). */
    readonly sandboxVllmUrl?: string;
    readonly sandboxImage?: string;
    readonly maxInflight?: string;
    /** Black box: prompts in the run (the program's dataset size). */
    readonly nPrompts?: string;
    readonly maxCompletionLength?: string;
    readonly optim?: string;
    /** store_true flag. */
    readonly gradientCheckpointing?: string;
    readonly learningRate?: string;
    readonly warmupSteps?: string;
    readonly temperature?: string;
    readonly lrSchedulerType?: string;
    readonly numEpochs?: string;
    readonly seed?: string;
    readonly maxStaleness?: string;
}

/** Batch settings a program fixes in code (no flag): the capacity math must use these. */
export interface ProgramFixed {
    readonly perDeviceTrainBatchSize?: number;
    readonly gradientAccumulationSteps?: number;
    readonly numGenerations?: number;
    readonly perDeviceEvalBatchSize?: number;
}

export interface ProgramFacts {
    /** What it is, one line (plan.md). */
    readonly description: string;
    readonly source: ProgramSource;
    readonly readFrom: "source" | "published-commands";
    /** Where the trainer image holds it (trainer/*\/Dockerfile puts it there). */
    readonly file: string;
    /** `python <file>` or `accelerate launch --num_processes N <file>`. */
    readonly launcher: "python" | "accelerate";
    /** Layouts the program runs in. */
    readonly layouts: readonly Layout[];
    /** Every flag of the program's parser (or, for published-commands, every flag seen). */
    readonly flags: Readonly<Record<string, ProgramFlag>>;
    readonly args: ProgramArgMap;
    readonly fixed: ProgramFixed;
    /** Env vars the published runs set for this program (value, why). */
    readonly env: Readonly<Record<string, string>>;
    /** Where the program sends metrics and logged completions when no trackio Space is set. */
    readonly trackioDefault?: string;
    /**
     * Black box: the dtype the trainer trains in when the program has no flag for it; vLLM is served in
     * the same dtype (`vllm serve --dtype`), as the trainer asks.
     */
    readonly trainerDtype?: string;
    /** What the program writes to the checkpoint volume, and whether a run of it can resume. */
    readonly checkpoints: ProgramCheckpointFacts;
}

/** A program's checkpoints, as its source fixes them. */
export interface ProgramCheckpointFacts {
    /** Whether a run can resume from what it saved (a resume flag, and checkpoints before the end). */
    readonly resumable: boolean;
    /** Full checkpoints (weights + optimizer state) on the volume at once, at the peak. */
    readonly full: number;
    /** Weights-only saves over a run (the final model), a Hub push not counted. */
    readonly weightsOnly: number;
    /** Why, from the source (messages name it). */
    readonly why: string;
    /** The dtype the trainer holds its weights in (sizes the checkpoints). */
    readonly dtype: "float32" | "bfloat16";
    /** The optimizer when the stack sets none (transformers 5.24 TrainingArguments: adamw_torch_fused on torch >= 2.8). */
    readonly optim: string;
}

/** Seeds' Hub repo (a model repo holding the scripts). */
const SEEDS = "huggingface:sergiopaniego/rl-envs-youtube-livestream-4-scripts";
const SEEDS_READ = "main (read 2026-12-01; the index gave no commit)";
/**
 * The seeds' launch commands set it (the seeds' README: `hf jobs uv run ... -e VLLM_USE_FLASHINFER_SAMPLER=0`);
 * the scripts never read it: the colocated vLLM engine does.
 */
const SEED_ENV = { VLLM_USE_FLASHINFER_SAMPLER: "0" } as const;
/** The seeds' scripts' saving, as their source / published commands show it. */
const SEED_SAVES =
    "it sets no save_steps, so transformers' default 500 saves only the final step of its run (DefaultFlowCallback saves at the end with save_strategy 'steps'; 42 steps in the MBPP recipe)";
/** What the seeds' scripts save (the same for all three: GRPOTrainer with its defaults). */
const SEED_CHECKPOINTS = {
    resumable: false,
    full: 1,
    weightsOnly: 0,
    why: SEED_SAVES,
    // TRL 1.16 GRPOTrainer leaves dtype to transformers v5, which takes the model config's (bfloat16 for Qwen3).
    dtype: "bfloat16",
    optim: "adamw_torch_fused",
} as const;
const str: ProgramFlag = { action: "store", type: "str" };
const int = (d: number): ProgramFlag => ({ action: "store", type: "int", default: d });

export const PROGRAMS = {
    // Read from the source: plain argparse, parse_args(), dashed flags only; reads no env vars (the env
    // URL only from --env-url, default the public Space); no step count (length = dataset x epochs);
    // report_to="trackio" and log_completions=True are fixed in code.
    train_coding_whitebox_eval: {
        description: "the seeds' MBPP white-box trainer with a held-out eval curve (TRL GRPOTrainer + environment_factory, OpenEnv coding_env client)",
        source: { repo: SEEDS, path: "train_coding_whitebox_eval.py", revision: SEEDS_READ },
        readFrom: "source",
        file: "/app/train_coding_whitebox_eval.py",
        launcher: "python",
        layouts: ["whitebox-colocate", "whitebox-server"],
        flags: {
            "--model": { ...str, default: "Qwen/Qwen3-1.7B" },
            "--env-url": { ...str, default: "https://sergiopaniego-coding-env.hf.space" },
            "--dataset-size": int(170),
            "--eval-size": int(64),
            "--eval-steps": int(5),
            "--per-device-eval-batch-size": int(8),
            "--num-generations-eval": int(4),
            "--num-generations": int(4),
            "--num-epochs": int(1),
            "--learning-rate": { action: "store", type: "float", default: 1e-6 },
            "--gradient-accumulation-steps": int(2),
            "--per-device-train-batch-size": int(8),
            "--logging-steps": int(1),
            "--max-completion-length": int(1024),
            "--lr-scheduler-type": { ...str, default: "linear" },
            "--output-dir": { ...str, default: null },
            "--trackio-space-id": { ...str, default: "coding-grpo" },
            "--vllm-mode": { ...str, choices: ["colocate", "server"], default: "colocate" },
            "--push-to-hub": { action: "store_true", default: false },
            "--hub-model-id": { ...str, default: null },
            "--vllm-server-url": { ...str, default: "http://localhost:8000" },
        },
        args: {
            model: "--model",
            envUrl: "--env-url",
            datasetSize: "--dataset-size",
            evalSize: "--eval-size",
            perDeviceTrainBatchSize: "--per-device-train-batch-size",
            gradientAccumulationSteps: "--gradient-accumulation-steps",
            numGenerations: "--num-generations",
            perDeviceEvalBatchSize: "--per-device-eval-batch-size",
            outputDir: "--output-dir",
            vllmMode: "--vllm-mode",
            vllmServerUrl: "--vllm-server-url",
            trackioSpaceId: "--trackio-space-id",
            pushToHub: "--push-to-hub",
            hubModelId: "--hub-model-id",
            maxCompletionLength: "--max-completion-length",
            learningRate: "--learning-rate",
            lrSchedulerType: "--lr-scheduler-type",
            numEpochs: "--num-epochs",
        },
        fixed: {},
        checkpoints: SEED_CHECKPOINTS,
        env: SEED_ENV,
        trackioDefault: "the Space 'coding-grpo' under the HF token's user",
    },
    // Source not readable: only the flags of the README's command line (--model --env-url
    // --trackio-space-id --push-to-hub --hub-model-id) and --dataset-size, which the README names
    // (default 120). The README gives its batch: 8 x 8 with 4 generations, 64 live sessions.
    train_coding_whitebox: {
        description: "the seeds' plain MBPP white-box trainer (TRL GRPOTrainer + environment_factory, OpenEnv coding_env client)",
        source: { repo: SEEDS, path: "train_coding_whitebox.py", revision: SEEDS_READ },
        readFrom: "published-commands",
        file: "/app/train_coding_whitebox.py",
        launcher: "python",
        layouts: ["whitebox-colocate"],
        flags: {
            "--model": str,
            "--env-url": str,
            "--dataset-size": int(120),
            "--trackio-space-id": str,
            "--push-to-hub": { action: "store_true", default: false },
            "--hub-model-id": str,
        },
        args: {
            model: "--model",
            envUrl: "--env-url",
            datasetSize: "--dataset-size",
            trackioSpaceId: "--trackio-space-id",
            pushToHub: "--push-to-hub",
            hubModelId: "--hub-model-id",
        },
        fixed: { perDeviceTrainBatchSize: 8, gradientAccumulationSteps: 8, numGenerations: 4 },
        checkpoints: SEED_CHECKPOINTS,
        env: SEED_ENV,
        trackioDefault: "a Space under the HF token's user (the script's default; not published)",
    },
    // Source not readable: only the flags of the README's command line (--model --env-url
    // --trackio-space-id --dataset-size --push-to-hub --hub-model-id). Its batch is not published.
    train_wordle_whitebox: {
        description: "the seeds' Wordle white-box trainer (TRL GRPOTrainer + environment_factory, OpenEnv textarena client)",
        source: { repo: SEEDS, path: "train_wordle_whitebox.py", revision: SEEDS_READ },
        readFrom: "published-commands",
        file: "/app/train_wordle_whitebox.py",
        launcher: "python",
        layouts: ["whitebox-colocate"],
        flags: {
            "--model": str,
            "--env-url": str,
            "--dataset-size": { action: "store", type: "int" },
            "--trackio-space-id": str,
            "--push-to-hub": { action: "store_true", default: false },
            "--hub-model-id": str,
        },
        args: {
            model: "--model",
            envUrl: "--env-url",
            datasetSize: "--dataset-size",
            trackioSpaceId: "--trackio-space-id",
            pushToHub: "--push-to-hub",
            hubModelId: "--hub-model-id",
        },
        fixed: {},
        checkpoints: SEED_CHECKPOINTS,
        env: SEED_ENV,
        trackioDefault: "a Space under the HF token's user (the script's default; not published)",
    },
    // TRL's black-box trainer, read from the source at 0a942020: plain argparse, dashed flags; it
    // hard-codes per_device_train_batch_size=4, save_strategy="no" (no checkpoint), SANDBOX_HOME=/root,
    // HFSandboxBackend(image=, flavor=) (the one line a user changes to run on the stack's pool), and
    // sets no dtype: TRL 1.16's AsyncGRPOConfig.dtype defaults to float32
    // (trl/experimental/async_grpo/async_grpo_config.py). The docstring launches it with plain python.
    opencode_hf_sandbox: {
        description: "TRL's AsyncGRPO opencode trainer on sandboxes (examples/async_grpo_opencode), its backend line pointed at the stack's pool",
        source: {
            repo: "github:huggingface/trl",
            path: "examples/async_grpo_opencode/opencode_hf_sandbox.py",
            revision: "0a942020335908aaf7276f743ddce0c5f4602c30",
        },
        readFrom: "source",
        file: "/app/opencode_hf_sandbox.py",
        launcher: "python",
        layouts: ["blackbox"],
        flags: {
            "--model": { ...str, default: "Qwen/Qwen3-4B-Instruct-2507" },
            "--vllm-url": { ...str, default: "http://localhost:8000" },
            "--sandbox-vllm-url": { ...str, required: true },
            "--sandbox-image": { ...str, default: "ghcr.io/huggingface/openenv-opencode-sandbox:latest" },
            "--sandbox-flavor": { ...str, default: "cpu-basic" },
            "--num-generations": int(8),
            "--max-inflight": int(8),
            "--max-completion-length": int(16384),
            "--max-steps": int(100),
            "--n-prompts": int(64),
            "--learning-rate": { action: "store", type: "float", default: 1e-5 },
            "--temperature": { action: "store", type: "float", default: 1.0 },
            "--max-staleness": int(4),
            "--seed": int(0),
            "--output-dir": { ...str, default: "async_grpo_opencode_hf_sandbox" },
            "--project": { ...str, default: "opencode-hf-sandbox" },
            "--trackio-space-id": { ...str, default: null },
            "--push-to-hub": { action: "store_true", default: false },
            "--hub-model-id": { ...str, default: null },
            "--optim": { ...str, default: "adamw_torch" },
            "--gradient-checkpointing": { action: "store_true", default: false },
            "--gradient-accumulation-steps": int(1),
        },
        args: {
            model: "--model",
            vllmUrl: "--vllm-url",
            sandboxVllmUrl: "--sandbox-vllm-url",
            sandboxImage: "--sandbox-image",
            numGenerations: "--num-generations",
            maxInflight: "--max-inflight",
            maxCompletionLength: "--max-completion-length",
            maxSteps: "--max-steps",
            nPrompts: "--n-prompts",
            learningRate: "--learning-rate",
            temperature: "--temperature",
            maxStaleness: "--max-staleness",
            seed: "--seed",
            outputDir: "--output-dir",
            trackioProject: "--project",
            trackioSpaceId: "--trackio-space-id",
            pushToHub: "--push-to-hub",
            hubModelId: "--hub-model-id",
            optim: "--optim",
            gradientCheckpointing: "--gradient-checkpointing",
            gradientAccumulationSteps: "--gradient-accumulation-steps",
        },
        fixed: { perDeviceTrainBatchSize: 4 },
        env: {},
        trainerDtype: "float32",
        checkpoints: {
            resumable: false,
            full: 0,
            weightsOnly: 0,
            why: 'it hard-codes save_strategy="no" (no checkpoint at all; only trainer.push_to_hub() saves the final model, locally first)',
            dtype: "float32",
            optim: "adamw_torch",
        },
    },
} as const satisfies Record<string, ProgramFacts>;

export type ProgramName = keyof typeof PROGRAMS;
export const PROGRAM_NAMES = Object.keys(PROGRAMS) as ProgramName[];
/** `custom`: the user's own script, with the TrlParser flag contract (docs/reference/training-node.md "The trainer program"). */
export const CUSTOM_PROGRAM = "custom";

export function programFacts(name: string): ProgramFacts | undefined {
    return (PROGRAMS as Record<string, ProgramFacts>)[name];
}
