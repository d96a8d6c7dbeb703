/**
 * The trainer's container: its command (trainer-command.ts) under the role runner where one runs
 * (role-runner.ts), its env and secrets (trainer-env.ts, secrets.ts), GPUs and mounts. Pure; refusals go to `problems`.
 */
import type { ProgramFacts } from "../config/programs";
import { containerDevices, type GpuSplit } from "./gpus";
import {
    CONTAINER,
    type ContainerDescription,
    type MultiNodeDescription,
    type RoleRunner,
    type TrainingConfig,
    type TrainingLinks,
    type TrainingMetrics,
    type TrainingNames,
    type VolumeMount,
} from "./model";
import { trainerRunner } from "./role-runner";
import { referencedSecretEnv, trainerSecretEnv } from "./secrets";
import { trainerCommand } from "./trainer-command";
import { extraEnvProblems, reservedTrainerEnv, trainerEnv } from "./trainer-env";

/** What the trainer is built from, beside the config, names and links. */
export interface TrainerParts {
    readonly program?: ProgramFacts;
    /** Where the trainer reaches vLLM. */
    readonly vllmUrl: string;
    readonly gpus: GpuSplit;
    readonly mounts: readonly VolumeMount[];
    readonly multiNode?: MultiNodeDescription;
    readonly metrics?: TrainingMetrics;
    /** Whether vLLM runs as a server beside the trainer (every layout but colocate). */
    readonly vllmServes: boolean;
}

/** The trainer's container, its role runner, and the host's Docker socket where it gets one. */
export interface TrainerDescription {
    readonly container: ContainerDescription;
    readonly roleRunner?: RoleRunner;
}

export function trainerOf(config: TrainingConfig, names: TrainingNames, links: TrainingLinks, parts: TrainerParts, problems: string[]): TrainerDescription {
    const t = config.training;
    const { gpus, multiNode, metrics } = parts;
    const command = trainerCommand(config, parts.program, { vllmUrl: parts.vllmUrl, links, multiNode }, problems);
    const reservedEnv = reservedTrainerEnv(config, links, { program: parts.program, vllmUrl: parts.vllmUrl, gpus, multiNode });
    const platformSecretEnv = trainerSecretEnv(config, links);
    problems.push(...extraEnvProblems(config, gpus, reservedEnv, platformSecretEnv));
    const secretEnv = { ...referencedSecretEnv(t.extraEnv), ...platformSecretEnv };
    const runner = trainerRunner(
        config,
        { sharing: gpus.sharing, metrics, vllmServes: parts.vllmServes, multiNode: multiNode !== undefined },
        command.command,
        problems,
    );
    const container: ContainerDescription = {
        name: CONTAINER.trainer,
        dockerName: names.training.job,
        image: config.images.trainer,
        command: runner.command,
        args: command.args,
        env: trainerEnv(config, gpus, reservedEnv, multiNode),
        secretEnv,
        gpus: gpus.trainer.length,
        gpuDevices: containerDevices(gpus, gpus.trainer),
        // Colocate: the in-process vLLM listens nowhere; server modes: nothing listens in the trainer
        // that others need (NCCL rendezvous stays on loopback).
        ports: [],
        ...(metrics ? { metricsPorts: [metrics.trainer] } : {}),
        cpu: t.trainerCpu,
        memory: t.trainerMemory,
        mounts: parts.mounts,
    };
    return { container, roleRunner: runner.roleRunner };
}
