/**
 * The trainer's env vars: what the platform sets from the run's config and links (reserved: a user's
 * training.extraEnv may not set them), the user's extra env, and the NCCL settings of the GPU split.
 */
import type { ProgramFacts } from "../config/programs";
import { plainEnv } from "../config/secrets";
import { type GpuSplit, visibleDevices } from "./gpus";
import type { MultiNodeDescription, SecretName, TrainingConfig, TrainingLinks } from "./model";
import { modelCacheEnv, runOutputDir } from "./volumes";

/** What the reserved env is built from, beside the config and links. */
export interface TrainerEnvParts {
    readonly program?: ProgramFacts;
    /** Where the trainer reaches vLLM. */
    readonly vllmUrl: string;
    readonly gpus: GpuSplit;
    readonly multiNode?: MultiNodeDescription;
}

/** Env var name for an env server's URL: `ENV_<NAME>_URL`. */
export function envUrlVar(envName: string): string {
    return `ENV_${envName.toUpperCase().replace(/[^A-Z0-9]+/g, "_")}_URL`;
}

/** The env the platform sets on the trainer from the run's config and links. */
export function reservedTrainerEnv(config: TrainingConfig, links: TrainingLinks, parts: TrainerEnvParts): Record<string, string> {
    const multiNode = parts.multiNode;
    const reservedEnv: Record<string, string> = {
        ...modelCacheEnv(),
        ...(parts.program?.env ?? {}),
        RUN_ID: config.runId,
        OUTPUT_DIR: runOutputDir(config.runId),
        VLLM_URL: parts.vllmUrl,
        ...visibleDevices(parts.gpus, parts.gpus.trainer),
        ...(multiNode ? { ...multiNode.derivedEnv, ...Object.fromEntries(Object.keys(multiNode.labelEnv).map((k) => [k, "(downward API)"])) } : {}),
    };
    for (const [envName, url] of Object.entries(links.envUrls)) reservedEnv[envUrlVar(envName)] = url;
    if (links.sandbox) {
        for (const [k, v] of Object.entries(links.sandbox.trainerEnv)) reservedEnv[k] = v;
    }
    return reservedEnv;
}

/** training.extraEnv keys the platform sets itself, or that break the GPU split. */
export function extraEnvProblems(
    config: TrainingConfig,
    gpus: GpuSplit,
    reservedEnv: Readonly<Record<string, string>>,
    secretEnv: Readonly<Record<string, SecretName>>,
): string[] {
    const problems: string[] = [];
    const shared = gpus.sharing.mode === "shared";
    for (const k of Object.keys(config.training.extraEnv)) {
        if (shared && k === "CUDA_DEVICE_ORDER") {
            problems.push(
                `training.extraEnv.CUDA_DEVICE_ORDER: gpuSharing 'shared' splits the GPUs by host index and needs PCI_BUS_ID order: remove it from extraEnv`,
            );
        } else if (k in reservedEnv || k in secretEnv) {
            problems.push(
                `training.extraEnv.${k}: ${k} is set by the platform (${k in secretEnv ? "a secret" : "from the run's config and links"}): remove it from extraEnv`,
            );
        }
    }
    return problems;
}

/** The trainer's plain env: NCCL settings, then the user's, then the reserved; label-fed vars come from the downward API (kubernetes.ts), not as literals. */
export function trainerEnv(
    config: TrainingConfig,
    gpus: GpuSplit,
    reservedEnv: Readonly<Record<string, string>>,
    multiNode?: MultiNodeDescription,
): Record<string, string> {
    return omit({ ...gpus.sharing.env, ...plainEnv(config.training.extraEnv), ...reservedEnv }, Object.keys(multiNode?.labelEnv ?? {}));
}

function omit(env: Readonly<Record<string, string>>, keys: readonly string[]): Record<string, string> {
    return Object.fromEntries(Object.entries(env).filter(([k]) => !keys.includes(k)));
}
