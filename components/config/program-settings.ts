/**
 * Which setting of the stack feeds each flag the platform renders for a named program
 * (ProgramArgMap, components/config/programs.ts), and the flag a custom script gets for the knobs
 * (TrlParser: TRL's GRPOConfig / AsyncGRPOConfig fields). One table: the renderers
 * (components/training/program-args.ts, trl-args.ts) follow it, the messages name its settings, and
 * test/config/knobs.test.ts walks it against every program's facts and the schema. Data only.
 */
import type { ProgramArgMap } from "./programs";
import type { Layout } from "./terms";

/** Where a rendered flag's value comes from: a setting of the stack file, or the platform itself. */
export type ArgSource =
    /** A field of the platform object, as a dotted path (`training.learningRate`). */
    | { readonly setting: string }
    /** Derived by the platform (a URL, a path): nothing to set; what it is. */
    | { readonly platform: string };

export const ARG_SOURCES: { readonly [K in keyof Required<ProgramArgMap>]: ArgSource } = {
    model: { setting: "model.name" },
    envUrl: { platform: "the URL of the stack's one env (its router, or envs.<name>.external.url)" },
    datasetSize: { setting: "training.datasetSize" },
    evalSize: { setting: "training.evalSize" },
    perDeviceTrainBatchSize: { setting: "training.perDeviceTrainBatchSize" },
    gradientAccumulationSteps: { setting: "training.gradientAccumulationSteps" },
    numGenerations: { setting: "training.numGenerations" },
    perDeviceEvalBatchSize: { setting: "training.perDeviceEvalBatchSize" },
    outputDir: { platform: "the run's directory on the checkpoint volume, /checkpoints/<runId>" },
    vllmMode: { setting: "training.layout" },
    vllmServerUrl: { platform: "the URL of the stack's vLLM server (layout whitebox-server)" },
    trackioSpaceId: { setting: "training.trackioSpaceId" },
    trackioProject: { setting: "training.trackioProject" },
    pushToHub: { setting: "training.hubRepoId" },
    hubModelId: { setting: "training.hubRepoId" },
    maxSteps: { setting: "training.maxSteps" },
    vllmUrl: { platform: "the URL the trainer reaches the stack's vLLM server at" },
    sandboxVllmUrl: { platform: "the URL sandboxes reach vLLM through (the ingress, or the pool's key-holding forwarder)" },
    sandboxImage: { setting: "sandboxes.image" },
    maxInflight: { setting: "training.maxInflight" },
    nPrompts: { setting: "training.datasetSize" },
    maxCompletionLength: { setting: "training.maxCompletionLength" },
    optim: { setting: "training.optim" },
    gradientCheckpointing: { setting: "training.gradientCheckpointing" },
    learningRate: { setting: "training.learningRate" },
    warmupSteps: { setting: "training.warmupSteps" },
    temperature: { setting: "training.temperature" },
    lrSchedulerType: { setting: "training.lrSchedulerType" },
    numEpochs: { setting: "training.numEpochs" },
    seed: { setting: "training.seed" },
    maxStaleness: { setting: "training.maxStaleness" },
};

/** The optional training settings that only a program's flag carries (no capacity or layout rule reads them). */
export type KnobField =
    | "maxCompletionLength"
    | "optim"
    | "gradientCheckpointing"
    | "learningRate"
    | "warmupSteps"
    | "temperature"
    | "lrSchedulerType"
    | "numEpochs"
    | "seed"
    | "maxStaleness";

/**
 * Each knob's flag on a custom script (TRL's TrlParser field; transformers 5.24 TrainingArguments for
 * the optimizer ones), and the layouts whose TRL config has the field (unset: every layout).
 */
export const KNOBS: { readonly [K in KnobField]: { readonly trl: string; readonly layouts?: readonly Layout[] } } = {
    maxCompletionLength: { trl: "--max_completion_length" },
    optim: { trl: "--optim" },
    gradientCheckpointing: { trl: "--gradient_checkpointing" },
    learningRate: { trl: "--learning_rate" },
    warmupSteps: { trl: "--warmup_steps" },
    temperature: { trl: "--temperature" },
    lrSchedulerType: { trl: "--lr_scheduler_type" },
    numEpochs: { trl: "--num_train_epochs" },
    seed: { trl: "--seed" },
    // AsyncGRPOConfig.max_staleness (trl/experimental/async_grpo/async_grpo_config.py); GRPOConfig has none.
    maxStaleness: { trl: "--max_staleness", layouts: ["blackbox"] },
};
export const KNOB_FIELDS = Object.keys(KNOBS) as KnobField[];
