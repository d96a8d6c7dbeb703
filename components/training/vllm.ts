/**
 * vLLM's container in the two layouts that run it as a server (absent in colocate, where vLLM runs
 * inside the trainer): image, command (vllm-args.ts), env, GPUs and probes. Upstream facts:
 * - black box `vllm serve` flags and `VLLM_SERVER_DEV_MODE=1`: trl
 *   `examples/async_grpo_opencode/opencode_hf_sandbox.py` docstring (vllm >= 0.22).
 * - `trl vllm-serve` flags: trl `trl/scripts/vllm_serve.py`; in trl 1.16 it execs `vllm serve`, whose
 *   health route is `GET /health` (`/health/` answers 307).
 */
import type { ProgramFacts } from "../config/programs";
import { vllmServerSettings } from "../config/vllm-settings";
import { containerDevices, type GpuSplit, visibleDevices } from "./gpus";
import { CONTAINER, type ContainerDescription, type MultiNodeDescription, type TrainingConfig, type TrainingNames, VLLM_PORT, type VolumeMount } from "./model";
import { healthProbes } from "./probes";
import { modelSource } from "./program-args";
import { plainEnv } from "../config/secrets";
import { hfSecretEnv, referencedSecretEnv } from "./secrets";
import { blackboxServerArgs, whiteboxServerArgs } from "./vllm-args";
import { modelCacheEnv } from "./volumes";

/** What vLLM's container is built from, beside the config and names. */
export interface VllmParts {
    readonly gpus: GpuSplit;
    /** Every role's mounts; vLLM takes all but the checkpoints. */
    readonly mounts: readonly VolumeMount[];
    readonly program?: ProgramFacts;
    readonly multiNode?: MultiNodeDescription;
}

/** vLLM's container, or undefined in colocate. */
export function vllmContainer(config: TrainingConfig, names: TrainingNames, parts: VllmParts): ContainerDescription | undefined {
    const t = config.training;
    const { gpus, program } = parts;
    const vllmSettings = vllmServerSettings(config);
    const cacheEnv = modelCacheEnv();
    const vllmBase = {
        name: CONTAINER.vllm,
        dockerName: names.training.vllm,
        secretEnv: { ...referencedSecretEnv(vllmSettings.extraEnv), ...hfSecretEnv() },
        gpus: gpus.vllm.length,
        gpuDevices: containerDevices(gpus, gpus.vllm),
        ports: [VLLM_PORT],
        cpu: t.vllmCpu,
        memory: t.vllmMemory,
        mounts: parts.mounts.filter((m) => m.volume !== "checkpoints"),
    };
    // A named program loading a pinned revision from its directory asks vLLM for the model under that
    // path: vLLM answers to both names (--served-model-name takes several).
    const pinnedDir = program !== undefined ? modelSource(config.model).download && modelSource(config.model).arg : undefined;
    const servedNames = pinnedDir ? ["--served-model-name", config.model.name, pinnedDir] : [];
    if (t.layout === "whitebox-server") {
        // What `trl vllm-serve` execs in TRL 1.16, in dev mode (trl/scripts/vllm_serve.py main).
        return {
            ...vllmBase,
            image: config.images.trainer, // the TRL image carries vllm (colocate needs it anyway)
            command: ["vllm", "serve"],
            args: whiteboxServerArgs(config, vllmSettings, servedNames),
            env: {
                ...cacheEnv,
                ...gpus.sharing.env,
                ...visibleDevices(gpus, gpus.vllm),
                ...(program?.env ?? {}),
                ...plainEnv(vllmSettings.extraEnv),
                VLLM_SERVER_DEV_MODE: "1",
            },
            probes: healthProbes("/health", t.modelLoadSeconds, parts.multiNode !== undefined),
        };
    }
    if (t.layout === "blackbox") {
        return {
            ...vllmBase,
            image: config.images.vllm,
            command: ["vllm", "serve"],
            args: blackboxServerArgs(config, vllmSettings, servedNames),
            // Dev mode opens the weight-transfer routes the AsyncGRPO trainer calls; only here, and
            // only reachable on loopback / through the ingress allow-list.
            env: { ...cacheEnv, ...gpus.sharing.env, ...visibleDevices(gpus, gpus.vllm), ...plainEnv(vllmSettings.extraEnv), VLLM_SERVER_DEV_MODE: "1" },
            probes: healthProbes("/health", t.modelLoadSeconds, parts.multiNode !== undefined),
        };
    }
    return undefined;
}
