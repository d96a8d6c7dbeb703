/**
 * What a named training program can be told, checked before anything registers: a setting the
 * program has no flag for is refused (naming the field), or checked against the value the program
 * fixes in code; never silently dropped. The flags themselves are data in programs.ts.
 */
import { extraArgProblems } from "./extra-args";
import { KNOB_FIELDS, KNOBS } from "./program-settings";
import { CUSTOM_PROGRAM, type ProgramArgMap, type ProgramFacts, programFacts } from "./programs";
import type { PlatformConfig } from "./types";

/** The model revision every stack gets unless it pins one (schema default). */
export const DEFAULT_MODEL_REVISION = "main";

/**
 * Whether TRL's GRPOConfig batch rule binds the stack's trainer: the generation batch
 * (per-device batch x processes x steps per generation) and the eval batch must each be divisible
 * by num_generations (trl/trainer/grpo_config.py). GRPOTrainer (the white-box layouts) has it;
 * AsyncGRPO (layout blackbox) has none: a micro-batch may hold fewer groups than rows
 * (trl/experimental/async_grpo/async_grpo_trainer.py, the micro-batch partitioning). Validation
 * and plan.md's capacity rows both ask this, so a row never claims a rule the check skips.
 */
export function grpoBatchRuleApplies(t: Pick<PlatformConfig["training"], "layout">): boolean {
    return t.layout !== "blackbox";
}

type BatchField = "perDeviceTrainBatchSize" | "gradientAccumulationSteps" | "numGenerations" | "perDeviceEvalBatchSize";
const BATCH_FIELDS: readonly BatchField[] = ["perDeviceTrainBatchSize", "gradientAccumulationSteps", "numGenerations", "perDeviceEvalBatchSize"];

/** `train_x.py (huggingface:org/repo, main ...)`: how messages name a program. */
export function programLabel(p: ProgramFacts): string {
    return `${p.source.path} (${p.source.repo} @ ${p.source.revision})`;
}

function flagList(p: ProgramFacts): string {
    return Object.keys(p.flags).join(" ");
}

/** Every problem of a stack's training settings for its program, together. */
export function validateProgram(c: PlatformConfig): string[] {
    const t = c.training;
    if (t.program === CUSTOM_PROGRAM) return customKnobProblems(c);
    const p = programFacts(t.program);
    if (p === undefined) return [`training.program: unknown program '${t.program}'`];
    const label = programLabel(p);
    const errors: string[] = [];
    const has = (k: keyof ProgramArgMap) => (p.args as ProgramArgMap)[k] !== undefined;
    const noFlag = (field: string, fix: string) => errors.push(`training.${field}: ${label} has no flag for it (its flags: ${flagList(p)}): ${fix}`);

    if (!p.layouts.includes(t.layout)) {
        errors.push(`training.layout: ${label} runs in ${p.layouts.join(" or ")}, not ${t.layout}: set training.layout to ${p.layouts[0]}`);
    }
    if (t.command !== undefined) {
        errors.push(
            `training.command: set by training.program '${t.program}' (${p.launcher === "accelerate" ? "accelerate launch " : "python "}${p.file}): remove it, or set training.program to '${CUSTOM_PROGRAM}' to run your own script`,
        );
    }
    if (t.maxSteps !== undefined && !has("maxSteps")) noFlag("maxSteps", "remove it (the run's length follows datasetSize and the program's epochs)");
    if (t.stepsPerGeneration !== t.gradientAccumulationSteps) {
        errors.push(
            `training.stepsPerGeneration: ${label} leaves TRL's steps_per_generation at gradient_accumulation_steps (${t.gradientAccumulationSteps}); it has no flag for ${t.stepsPerGeneration}: remove stepsPerGeneration`,
        );
    }
    for (const f of KNOB_FIELDS) {
        if (t[f] === undefined || has(f)) continue;
        const known = p.readFrom === "published-commands" ? " (its command line is known from published examples only)" : "";
        noFlag(f, `remove it: the program uses its own value${known}`);
    }
    if (t.trackioProject !== undefined && !has("trackioProject")) noFlag("trackioProject", "remove it (set trackioSpaceId for where metrics go)");
    if (t.evalSize > 0 && !has("evalSize")) noFlag("evalSize", "set it to 0");
    if (t.hubRepoId !== undefined && !(has("pushToHub") && has("hubModelId"))) noFlag("hubRepoId", "remove it");
    for (const f of BATCH_FIELDS) {
        if (has(f)) continue;
        const fixed = p.fixed[f];
        if (fixed !== undefined && t[f] !== fixed) {
            errors.push(
                `training.${f}: ${label} fixes it at ${fixed} in code (no flag): set training.${f} to ${fixed}, so the env sessions are sized for what the program opens`,
            );
        }
    }
    if (has("envUrl")) {
        const envs = c.envs.map((e) => e.name);
        if (envs.length !== 1) {
            errors.push(
                `envs: ${label} talks to one env server (--env-url), but the stack defines ${envs.length === 0 ? "none" : `${envs.length} (${envs.join(", ")})`}: define exactly one env`,
            );
        }
    }
    errors.push(...extraArgProblems(p, label, t.extraArgs));
    return errors;
}

/** A custom script's knobs: each renders as its TRL field, which the layout's TRL config must have. */
function customKnobProblems(c: PlatformConfig): string[] {
    const t = c.training;
    return KNOB_FIELDS.flatMap((f) => {
        const layouts = KNOBS[f].layouts;
        if (t[f] === undefined || layouts === undefined || layouts.includes(t.layout)) return [];
        return [
            `training.${f}: a custom script gets it as ${KNOBS[f].trl}, a field of TRL's AsyncGRPOConfig (layout ${layouts.join(" or ")}); the ${t.layout} layout's GRPOConfig has none: remove it`,
        ];
    });
}

/**
 * plan.md's warnings for a named program: where a program's command line was only checked against
 * published examples, where its batch is its own, where completions go.
 */
export function programWarnings(c: PlatformConfig): string[] {
    const t = c.training;
    const p = programFacts(t.program);
    if (p === undefined) return [];
    const label = programLabel(p);
    const warnings: string[] = [];
    if (p.readFrom === "published-commands") {
        warnings.push(
            `${label}: command line checked against published examples only (the source was not readable); the args check at pod start runs the program's own parser`,
        );
    }
    const unknown = BATCH_FIELDS.filter((f) => !(p.args as ProgramArgMap)[f] && p.fixed[f] === undefined);
    // The batch sizes the env sessions; a stack with no env has none to size.
    if (unknown.length > 0 && c.envs.length > 0) {
        warnings.push(
            `${label} takes no flag for ${unknown.join(", ")} and its own values are not published: the env sessions are sized for the stack's (${unknown.map((f) => `${f} ${t[f]}`).join(", ")}); check them against the script before a long run`,
        );
    }
    if (p.trackioDefault !== undefined && t.trackioSpaceId === undefined) {
        warnings.push(
            `${label} always reports to trackio and logs completions: with no training.trackioSpaceId they go to ${p.trackioDefault}; set training.trackioSpaceId`,
        );
    }
    return warnings;
}
