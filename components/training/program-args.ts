/**
 * A named program's command line, rendered from its facts (components/config/programs.ts): every
 * flag comes from the program's own table, so a flag the program does not take cannot be rendered.
 * Settings it has no flag for were refused before this runs (components/config/program-rules.ts).
 */
import type { ProgramArgMap, ProgramFacts } from "../config/programs";
import { DEFAULT_MODEL_REVISION } from "../config/program-rules";
import type { TrainingConfig } from "./model";

/** Where the args check sits in the trainer image (trainer/*\/Dockerfile copies it there; not under /opt/agentrl, where the NCCL check and the program files are mounted). */
export const ARGS_CHECK_PATH = "/usr/local/lib/agentrl/args_check.py";
/** Where a pinned model revision is downloaded to, under the model cache (see modelSource). */
export const PINNED_MODELS_DIR = "/cache/models";

/** What the rendered command needs from the rest of the training node. */
export interface ProgramLinks {
    readonly outputDir: string;
    /** Where the trainer reaches vLLM (server layouts). */
    readonly vllmUrl: string;
    /** The stack's env servers: name -> router URL. */
    readonly envUrls: Readonly<Record<string, string>>;
    /** Black box: where sandboxes reach vLLM (the ingress). */
    readonly sandboxVllmUrl?: string;
}

/**
 * The model a program loads. A pinned revision reaches a program with no revision flag as a local
 * directory the model cache holds (downloaded at pod start with `hf download --revision`), so the
 * program loads exactly that commit; `main` is passed by name.
 */
export interface ModelSource {
    /** What `--model` gets: the Hub name, or the pinned revision's directory. */
    readonly arg: string;
    /** The download step, when a revision is pinned. */
    readonly download?: readonly string[];
}

export function modelSource(model: TrainingConfig["model"]): ModelSource {
    if (model.revision === DEFAULT_MODEL_REVISION) return { arg: model.name };
    const dir = `${PINNED_MODELS_DIR}/${model.name.replace(/\//g, "--")}@${model.revision}`;
    return { arg: dir, download: ["hf", "download", model.name, "--revision", model.revision, "--local-dir", dir, "--quiet"] };
}

/** The program's own arguments for a run (no launcher). */
export function programArgs(p: ProgramFacts, config: TrainingConfig, links: ProgramLinks): string[] {
    const t = config.training;
    const a: ProgramArgMap = p.args;
    const out: string[] = [];
    const put = (flag: string | undefined, value: string | number | undefined) => {
        if (flag !== undefined && value !== undefined) out.push(flag, String(value));
    };
    const on = (flag: string | undefined, value: boolean | undefined) => {
        if (flag !== undefined && value === true) out.push(flag);
    };
    put(a.model, modelSource(config.model).arg);
    put(a.envUrl, Object.values(links.envUrls)[0]);
    // Always explicit: the seeds' scripts default to different sizes (120 vs 170).
    put(a.datasetSize, t.datasetSize);
    put(a.nPrompts, t.datasetSize);
    if (t.evalSize > 0) put(a.evalSize, t.evalSize);
    put(a.perDeviceTrainBatchSize, t.perDeviceTrainBatchSize);
    put(a.gradientAccumulationSteps, t.gradientAccumulationSteps);
    put(a.numGenerations, t.numGenerations);
    if (t.evalSize > 0) put(a.perDeviceEvalBatchSize, t.perDeviceEvalBatchSize);
    put(a.outputDir, links.outputDir);
    if (t.layout !== "blackbox") put(a.vllmMode, t.layout === "whitebox-server" ? "server" : "colocate");
    if (t.layout === "whitebox-server") put(a.vllmServerUrl, links.vllmUrl);
    if (t.layout === "blackbox") {
        put(a.vllmUrl, links.vllmUrl);
        put(a.sandboxVllmUrl, links.sandboxVllmUrl);
        if (config.sandboxes.image !== "") put(a.sandboxImage, config.sandboxes.image);
        put(a.maxInflight, t.maxInflight);
    }
    put(a.maxSteps, t.maxSteps);
    // The knobs (components/config/program-settings.ts KNOBS); config refused any the program has no flag for.
    put(a.maxCompletionLength, t.maxCompletionLength);
    put(a.optim, t.optim);
    on(a.gradientCheckpointing, t.gradientCheckpointing);
    put(a.learningRate, t.learningRate);
    put(a.warmupSteps, t.warmupSteps);
    put(a.temperature, t.temperature);
    put(a.lrSchedulerType, t.lrSchedulerType);
    put(a.numEpochs, t.numEpochs);
    put(a.seed, t.seed);
    put(a.maxStaleness, t.maxStaleness);
    put(a.trackioProject, t.trackioProject);
    put(a.trackioSpaceId, t.trackioSpaceId);
    if (t.hubRepoId !== undefined) {
        on(a.pushToHub, true);
        put(a.hubModelId, t.hubRepoId);
    }
    return [...out, ...t.extraArgs];
}

/**
 * The launcher of a named program: `python <file>` (the resolve step, launcher.ts, turns it into `accelerate launch
 * --num_processes N` for more than one process), or `accelerate launch --config_file <file>`.
 */
export function programLauncher(p: ProgramFacts, config: TrainingConfig): string[] {
    const cfg = config.training.accelerateConfig;
    return cfg === undefined ? ["python", p.file] : ["accelerate", "launch", "--config_file", cfg, p.file];
}

/**
 * Steps before the program starts: the pinned model's download, then the program's own parser over the
 * command line (training.argsCheck). Returns the command unchanged when there are none.
 */
export function withStartChecks(command: readonly string[], argsCheck: boolean, download: readonly string[] | undefined): string[] {
    const checked = argsCheck ? ["python", ARGS_CHECK_PATH, "--then-exec", ...command] : [...command];
    if (download === undefined) return checked;
    return ["/bin/sh", "-c", `${download.map(shellWord).join(" ")} && exec "$@"`, "agentrl-model-download", ...checked];
}

function shellWord(word: string): string {
    return /^[A-Za-z0-9_./:=,@%+-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
