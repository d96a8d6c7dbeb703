/**
 * Recipes: typed presets that reproduce the published runs (numbers from the seeds, see
 * README "Recipes"). A stack names one and overrides fields; the merge happens before
 * parsing, so a recipe goes through exactly the same checks as a hand-written stack.
 */
import type { PlatformConfigInput } from "./schema";

/** A recipe fixes everything but where it runs and the run id. */
export type Recipe = Omit<PlatformConfigInput, "target" | "runId" | "recipe"> & { readonly description: string };

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
            maxSteps: 42,
            command: ["python", "/app/train_coding_whitebox_eval.py"],
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
            datasetSize: 170,
            command: ["python", "/app/train_coding_whitebox.py"],
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
            command: ["python", "/app/train_wordle_whitebox.py"],
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
            perDeviceTrainBatchSize: 8,
            gradientAccumulationSteps: 1,
            numGenerations: 8,
            perDeviceEvalBatchSize: 8,
            datasetSize: 32,
            maxSteps: 10,
            maxInflight: 8,
            maxModelLen: 32768,
            command: ["accelerate", "launch", "/app/opencode_async_grpo.py"],
        },
        sandboxes: { headroom: 2, cpu: "2", memory: "4Gi" },
        ingress: { enabled: true },
    },
} as const satisfies Record<string, Recipe>;

export type RecipeName = keyof typeof RECIPES;
export const RECIPE_NAMES = Object.keys(RECIPES) as RecipeName[];
