/**
 * The trainer's command line: the script's arguments (a named program's own flags, or a custom
 * script's TRL flags), its launcher, and what wraps them (the checkpoint resume, the model download
 * and the args check). Pure; refusals go to `problems`.
 */
import type { ProgramFacts } from "../config/programs";
import { resumeCommand } from "./checkpoint-select";
import { launcher, multiNodeLauncher } from "./launcher";
import { CHECKPOINT_ROOT, type MultiNodeDescription, type TrainingConfig, type TrainingLinks } from "./model";
import { modelSource, programArgs, programLauncher, withStartChecks } from "./program-args";
import { trlParserArgs } from "./trl-args";
import { runOutputDir } from "./volumes";

/** The trainer container's entrypoint override (undefined keeps the image's) and its arguments. */
export interface TrainerCommand {
    readonly command: string[] | undefined;
    readonly args: string[];
}

/** What the command needs from the rest of the node. */
export interface TrainerCommandLinks {
    /** Where the trainer reaches vLLM. */
    readonly vllmUrl: string;
    readonly links: TrainingLinks;
    readonly multiNode?: MultiNodeDescription;
}

/** The script's own arguments: a named program's flags, or a custom script's TrlParser flags and extraArgs. */
function scriptArguments(config: TrainingConfig, program: ProgramFacts | undefined, vllmUrl: string, links: TrainingLinks, problems: string[]): string[] {
    const t = config.training;
    const blackbox = t.layout === "blackbox";
    const outputDir = runOutputDir(config.runId);
    let scriptArgs: string[];
    // What the agent's side of a sandbox calls: its pod's key-holding forwarder (SANDBOX_UPSTREAM_URL,
    // components/sandbox/trainer-env.ts); the ingress URL only where a caller's links carry no pool env.
    const sandboxVllmUrl = links.sandbox?.trainerEnv.SANDBOX_UPSTREAM_URL ?? links.sandbox?.url;
    if (program !== undefined) {
        // A named program: its own flags only (components/config/programs.ts); refusals were made in config.
        scriptArgs = programArgs(program, config, { outputDir, vllmUrl, envUrls: links.envUrls, sandboxVllmUrl });
    } else {
        scriptArgs = trlParserArgs(config, outputDir, vllmUrl);
    }
    if (blackbox && links.sandbox === undefined) {
        problems.push(`training.layout: the black-box trainer needs the ingress URL sandboxes reach vLLM through: the Platform must pass links.sandbox`);
    } else if (blackbox && program === undefined) {
        scriptArgs.push("--sandbox-vllm-url", sandboxVllmUrl!);
    }
    if (program === undefined) scriptArgs.push(...t.extraArgs);
    return scriptArgs;
}

/** The trainer's command and arguments, wrapped by whatever must run before the script. */
export function trainerCommand(config: TrainingConfig, program: ProgramFacts | undefined, node: TrainerCommandLinks, problems: string[]): TrainerCommand {
    const t = config.training;
    const scriptArgs = scriptArguments(config, program, node.vllmUrl, node.links, problems);
    // A named program gets a pinned revision as a downloaded directory (it has no revision flag).
    const modelDownload = program !== undefined ? modelSource(config.model).download : undefined;
    const command = program !== undefined ? programLauncher(program, config) : t.command;
    const launch = node.multiNode ? multiNodeLauncher(command, node.multiNode, problems) : launcher(command, t.numProcesses, problems);
    if (t.resumeFromCheckpoint !== false) {
        // Config refused it for a program that cannot resume and without the volume (config/checkpoints.ts).
        if (launch === undefined) problems.push(`training.command: resumeFromCheckpoint wraps the trainer's command line: set training.command`);
        const source = typeof t.resumeFromCheckpoint === "string" ? t.resumeFromCheckpoint : undefined;
        return { command: resumeCommand(config.runId, source, [...(launch ?? []), ...scriptArgs], CHECKPOINT_ROOT), args: [] };
    }
    if (launch !== undefined && (t.argsCheck || modelDownload !== undefined)) {
        // The pinned model's download and the program's own parser run first, in the trainer's container.
        return { command: withStartChecks([...launch, ...scriptArgs], t.argsCheck, modelDownload), args: [] };
    }
    return { command: launch, args: scriptArgs };
}
