/**
 * Recipes: typed presets that reproduce the published runs (numbers from the seeds, see
 * docs/reference/stack-file.md "Recipes"). A stack names one and overrides fields; the merge happens before
 * parsing, so a recipe goes through exactly the same checks as a hand-written stack.
 */
import type { PlatformConfigInput } from "./schema";

/** A recipe fixes everything but where it runs and the run id. */
export type Recipe = Omit<PlatformConfigInput, "target" | "runId" | "recipe"> & { readonly description: string };

/**
 * The seeds' scripts on Qwen3-1.7B: one full bf16 checkpoint at the end (6 bytes per parameter) and a
 * push's local copy need 46Gi for 3 runs (the rule in components/config/checkpoints.ts; the tests
 * recompute it). The recipes keep the 100Gi they deployed with before the rule: a claim cannot
 * shrink, so a smaller default would refuse the next `up` of every stack already running them.
 */
const SEED_CHECKPOINTS = "100Gi";

/**
 * Where the Harbor recipe's trainer image holds its training script (program custom): a script of the
 * project's own, since no upstream one trains a Harbor agent under AsyncGRPO (docs/guides/harbor.md).
 */
export const HARBOR_TRAINER_SCRIPT = "/app/harbor_async_grpo.py";

export const RECIPES = {
    // The published MBPP run: train_coding_whitebox_eval.py defaults, one A100 80 GB, vLLM
    // colocated, 8 x 2 = 16 live env sessions, 4 generations (4 prompts per step),
    // --dataset-size 170, 42 steps, 64-problem held-out eval.
    "mbpp-whitebox": {
        description: "MBPP coding, white box, Qwen3-1.7B on 1 GPU with vLLM colocated: 16 live sessions, 4 generations, 170 problems, 42 steps",
        model: { name: "Qwen/Qwen3-1.7B" },
        training: {
            layout: "whitebox-colocate",
            gpusOnNode: 1,
            perDeviceTrainBatchSize: 8,
            gradientAccumulationSteps: 2,
            numGenerations: 4,
            perDeviceEvalBatchSize: 8,
            datasetSize: 170,
            evalSize: 64,
            // 42 steps = 170 prompts / 4 per step over the script's one epoch: it has no step flag.
            program: "train_coding_whitebox_eval",
            checkpoints: { size: SEED_CHECKPOINTS },
            // The seeds' jobs ran on HF Jobs' a100-large (one A100 80 GB): the memory check sizes for it.
            gpuMemory: { product: "NVIDIA-A100-SXM4-80GB" },
        },
        envs: { coding: { catalog: "coding" } },
    },
    // The plain script train_coding_whitebox.py: 8 x 8 = 64 live sessions, 16 prompts per step.
    "mbpp-whitebox-64": {
        description: "MBPP coding, white box, the plain script's 8 x 8 = 64 live sessions (16 prompts per step, 4 generations)",
        model: { name: "Qwen/Qwen3-1.7B" },
        training: {
            layout: "whitebox-colocate",
            gpusOnNode: 1,
            perDeviceTrainBatchSize: 8,
            gradientAccumulationSteps: 8,
            numGenerations: 4,
            perDeviceEvalBatchSize: 8,
            // Explicit: the plain script defaults to 120 problems (seeds' README).
            datasetSize: 170,
            program: "train_coding_whitebox",
            checkpoints: { size: SEED_CHECKPOINTS },
            // The seeds' jobs ran on HF Jobs' a100-large (one A100 80 GB): the memory check sizes for it.
            gpuMemory: { product: "NVIDIA-A100-SXM4-80GB" },
        },
        envs: { coding: { catalog: "coding" } },
    },
    // Wordle: the seeds give no batch sizes. Chosen here: 8 x 4 = 32 live sessions,
    // 8 generations (4 prompts per step), eval off; the env holds 8 sessions per replica.
    "wordle-whitebox": {
        description:
            "Wordle (textarena), white box, Qwen3-1.7B on 1 GPU colocated: chosen 8 x 4 = 32 live sessions, 8 generations, 2000 prompts, env at 8 sessions per replica",
        model: { name: "Qwen/Qwen3-1.7B" },
        training: {
            layout: "whitebox-colocate",
            gpusOnNode: 1,
            perDeviceTrainBatchSize: 8,
            gradientAccumulationSteps: 4,
            numGenerations: 8,
            perDeviceEvalBatchSize: 8,
            datasetSize: 2000,
            program: "train_wordle_whitebox",
            checkpoints: { size: SEED_CHECKPOINTS },
            // The seeds' jobs ran on HF Jobs' a100-large (one A100 80 GB): the memory check sizes for it.
            gpuMemory: { product: "NVIDIA-A100-SXM4-80GB" },
        },
        envs: { wordle: { catalog: "textarena", sessionsPerReplica: 8, settings: { TEXTARENA_ENV_ID: "Wordle-v0" } } },
    },
    // opencode black box: Qwen3-8B full fine-tune, 2 x H200 (vLLM 1 GPU, trainer 1 GPU),
    // 32 prompts, 10 steps, 8 generations, one sandbox per in-flight rollout (8).
    "opencode-blackbox": {
        description: "opencode agent, black box, Qwen3-8B on 2 x H200 (vLLM 1 GPU, trainer 1 GPU): 8 generations, 8 rollouts in flight, 32 prompts, 10 steps",
        model: { name: "Qwen/Qwen3-8B" },
        training: {
            layout: "blackbox",
            gpusOnNode: 2,
            vllmGpus: 1,
            trainerGpus: 1,
            // TRL's script fixes per_device_train_batch_size at 4.
            perDeviceTrainBatchSize: 4,
            gradientAccumulationSteps: 1,
            numGenerations: 8,
            datasetSize: 32,
            maxSteps: 10,
            maxInflight: 8,
            maxModelLen: 32768,
            program: "opencode_hf_sandbox",
            // The published run: "full fine-tuned on a single trainer GPU with an 8-bit optimizer and
            // gradient checkpointing". The script sets no dtype, so TRL 1.16 trains in float32: measured on
            // one H200 (Qwen3-8B shape, batch 1), fp32 + paged_adamw_8bit peaks at 67.5 GiB at 4096 tokens
            // and runs out of memory at 16384 (the script's default): completions capped at 4096.
            optim: "paged_adamw_8bit",
            gradientCheckpointing: true,
            maxCompletionLength: 4096,
            // save_strategy="no": only a push's local copy, fp32 8.2B = 32.8 GB; room for 3 runs.
            checkpoints: { size: "110Gi" },
            // The published run's GPUs (H200): the memory check sizes for them (an 80 GB GPU cannot hold this trainer).
            gpuMemory: { product: "NVIDIA-H200" },
        },
        sandboxes: { headroom: 2, cpu: "2", memory: "4Gi" },
        ingress: { enabled: true },
    },
    // A policy one node cannot train: Qwen3-32B full fine-tune, the trainer sharded (FSDP through the
    // accelerate config baked into the trainer image) over 2 nodes x 8 GPUs = 16 processes, vLLM with
    // tensor parallelism 8 on a third node. Batch: TRL's fixed 4 per device x 16 processes x 4 = 256 rows per step,
    // 8 generations, 16 rollouts in flight. The script saves no checkpoint (save_strategy="no"): the
    // volume holds a push's local copy, fp32 32.8B = 131 GB, for 3 runs (components/config/checkpoints.ts).
    "opencode-blackbox-32b": {
        description:
            "opencode agent, black box, Qwen3-32B on 3 GPU nodes of 8: trainer 2 x 8 GPUs (JobSet, 16 processes), vLLM 1 x 8 (TP 8): 8 generations, 16 rollouts in flight, 64 prompts, 10 steps",
        model: { name: "Qwen/Qwen3-32B" },
        training: {
            layout: "blackbox",
            nodes: 2,
            gpusOnNode: 8,
            vllmGpus: 8,
            trainerGpus: 8,
            // TRL's script fixes per_device_train_batch_size at 4; AsyncGRPO's token budget bounds a micro-batch.
            perDeviceTrainBatchSize: 4,
            gradientAccumulationSteps: 4,
            numGenerations: 8,
            datasetSize: 64,
            maxSteps: 10,
            maxInflight: 16,
            maxModelLen: 32768,
            program: "opencode_hf_sandbox",
            accelerateConfig: "/app/fsdp2.yaml",
            optim: "paged_adamw_8bit",
            gradientCheckpointing: true,
            maxCompletionLength: 4096,
            shmSize: "64Gi",
            trainerCpu: "96",
            trainerMemory: "1536Gi",
            vllmCpu: "32",
            vllmMemory: "512Gi",
            // The rule needs 440Gi for 3 runs; the 2Ti this recipe deployed with is kept (a claim cannot shrink).
            checkpoints: { size: "2Ti" },
            // The published run's GPUs (H200): the memory check sizes for them (an 80 GB GPU cannot hold this trainer).
            gpuMemory: { product: "NVIDIA-H200" },
        },
        sandboxes: { headroom: 4, cpu: "2", memory: "4Gi" },
        ingress: { enabled: true },
    },
    // The Harbor path (docs/guides/harbor.md): any validated Harbor agent (harbor.agent, default here
    // opencode) trained black box under TRL's async GRPO, each trial a claim of the warm pool of its task's
    // image, its model calls agent -> forwarder -> ingress -> vLLM. The model, GPUs and batch are the
    // opencode black box's. The stack lists its task images (harbor.taskImages): one pool each, each sized
    // for the whole burst (8 in flight x 1 rollout worker + 2 headroom). No upstream script trains a
    // Harbor agent under AsyncGRPO: the program is custom, with the TrlParser contract of a black-box
    // script (docs/reference/training-node.md) plus HARBOR_AGENT and SANDBOX_TASK_POOLS.
    "harbor-blackbox": {
        description:
            "a Harbor agent (harbor.agent: opencode, pi, claude-code, codex, ...), black box, Qwen3-8B on 2 x H200: one warm pool per task image (harbor.taskImages), 8 generations, 8 rollouts in flight, 32 prompts, 10 steps",
        model: { name: "Qwen/Qwen3-8B" },
        training: {
            layout: "blackbox",
            gpusOnNode: 2,
            vllmGpus: 1,
            trainerGpus: 1,
            perDeviceTrainBatchSize: 4,
            gradientAccumulationSteps: 1,
            numGenerations: 8,
            datasetSize: 32,
            maxSteps: 10,
            maxInflight: 8,
            maxModelLen: 32768,
            program: "custom",
            command: ["python", HARBOR_TRAINER_SCRIPT],
            optim: "paged_adamw_8bit",
            gradientCheckpointing: true,
            maxCompletionLength: 4096,
            // A custom script saves checkpoints (save_total_limit 2): one run of fp32 8.2B with 8-bit
            // Adam writes 203Gi by the rule (components/config/checkpoints.ts); the volume holds 3 runs (608Gi), as every recipe's does.
            checkpoints: { size: "610Gi" },
            gpuMemory: { product: "NVIDIA-H200" },
        },
        sandboxes: { headroom: 2, cpu: "2", memory: "4Gi" },
        ingress: { enabled: true },
        harbor: { agent: "opencode" },
    },
} as const satisfies Record<string, Recipe>;

export type RecipeName = keyof typeof RECIPES;
/** Recipes that need several GPU nodes (training.nodes > 1): Kubernetes with JobSet only, refused on Docker. */
export const MULTI_NODE_RECIPE_NAMES = (Object.keys(RECIPES) as RecipeName[]).filter((r) => (RECIPES[r].training as { nodes?: number }).nodes !== undefined);
/**
 * Recipes of the Harbor path (a `harbor` section): Kubernetes with agent-sandbox only (one warm pool per task
 * image), refused on Docker; their task images are the stack's (harbor.taskImages).
 */
export const HARBOR_RECIPE_NAMES = (Object.keys(RECIPES) as RecipeName[]).filter((r) => (RECIPES[r] as Recipe).harbor !== undefined);
/** Recipes that fit one node and run on either target. */
export const RECIPE_NAMES = (Object.keys(RECIPES) as RecipeName[]).filter((r) => !MULTI_NODE_RECIPE_NAMES.includes(r) && !HARBOR_RECIPE_NAMES.includes(r));
/** Every recipe a stack may name. */
export const ALL_RECIPE_NAMES = Object.keys(RECIPES) as RecipeName[];
