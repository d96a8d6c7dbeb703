/**
 * The run's sampling as its trainer runs it: the temperature and the longest completion, from the stack
 * setting, else the named program's flag default, else TRL's GRPOConfig default. One home: the GPU-memory
 * model (gpu-fit.ts) and the sandbox forwarder's `--temperature` / `--max-tokens` (components/sandbox) read
 * it, so the sampling the forwarder forces is the sampling the trainer checks (trusted_trace.check_sampling). Pure.
 */
import { programFacts } from "./programs";
import type { PlatformConfig } from "./types";

/** TRL GRPOConfig's max_completion_length default, for a program that sets none. */
export const TRL_MAX_COMPLETION = 512;
/** TRL GRPOConfig's temperature default (trl/trainer/grpo_config.py), for a program that sets none. */
export const TRL_TEMPERATURE = 1.0;

export interface RunSampling {
    /** The rollouts' sampling temperature. */
    readonly temperature: number;
    /** The most tokens one completion may have (the trainer's max_completion_length). */
    readonly maxCompletionTokens: number;
}

/** A program's flag default for one of its mapped settings, when it is a number. */
function programDefault(c: Pick<PlatformConfig, "training">, arg: "temperature" | "maxCompletionLength"): number | undefined {
    const p = programFacts(c.training.program);
    const flag = p?.args[arg];
    const value = flag !== undefined ? p?.flags[flag]?.default : undefined;
    return typeof value === "number" ? value : undefined;
}

export function runSampling(c: Pick<PlatformConfig, "training">): RunSampling {
    const t = c.training;
    return {
        temperature: t.temperature ?? programDefault(c, "temperature") ?? TRL_TEMPERATURE,
        maxCompletionTokens: t.maxCompletionLength ?? programDefault(c, "maxCompletionLength") ?? TRL_MAX_COMPLETION,
    };
}
