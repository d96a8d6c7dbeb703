/**
 * vLLM's command line in the two layouts that run it as a server (`vllm serve <args>`), decided once
 * for both targets.
 */
import { VLLM_PORT } from "../config/names";
import type { VllmServerSettings } from "../config/vllm-settings";
import type { TrainingConfig } from "./model";

/** What both server layouts start with: the model at its revision, on every interface, on vLLM's port. */
function servedModel(config: TrainingConfig): string[] {
    return [config.model.name, "--revision", config.model.revision, "--host", "0.0.0.0", "--port", String(VLLM_PORT)];
}

/**
 * White box, server layout: what `trl vllm-serve` builds and execs in TRL 1.16 (deprecated there,
 * removed in TRL 2.0; trl/scripts/vllm_serve.py build_command): vLLM's own server with the NCCL
 * weight-transfer engine, processed logprobs and no logprob cap. Nothing here changes at TRL 2.0,
 * which drops only the wrapper.
 */
export function whiteboxServerArgs(config: TrainingConfig, settings: VllmServerSettings, servedNames: readonly string[]): string[] {
    const t = config.training;
    return [
        ...servedModel(config),
        "--tensor-parallel-size",
        String(t.vllmGpus),
        "--data-parallel-size",
        "1",
        "--gpu-memory-utilization",
        String(t.gpuMemoryUtilization),
        ...(t.maxModelLen !== undefined ? ["--max-model-len", String(t.maxModelLen)] : []),
        ...servedNames,
        "--weight-transfer-config",
        '{"backend": "nccl"}',
        "--logprobs-mode",
        "processed_logprobs",
        "--max-logprobs",
        "-1",
        ...settings.extraArgs,
    ];
}

/**
 * Black box: the launch of TRL's `examples/async_grpo_opencode/opencode_hf_sandbox.py` docstring
 * (vllm >= 0.22). Never --api-key: it guards only /v1 and the trainer sends no key; the ingress
 * authenticates. `settings.dtype`: one dtype for both roles, the trainer's (AsyncGRPOConfig.dtype); the
 * tool-call parser is the model's (components/config/vllm-settings.ts); the user's extra flags come last.
 */
export function blackboxServerArgs(config: TrainingConfig, settings: VllmServerSettings, servedNames: readonly string[]): string[] {
    const t = config.training;
    return [
        ...servedModel(config),
        ...(settings.toolCallParser !== undefined ? ["--enable-auto-tool-choice", "--tool-call-parser", settings.toolCallParser] : []),
        "--logprobs-mode",
        "processed_logprobs",
        "--return-tokens-as-token-ids",
        ...(t.maxModelLen !== undefined ? ["--max-model-len", String(t.maxModelLen)] : []),
        "--weight-transfer-config",
        '{"backend":"nccl"}',
        "--gpu-memory-utilization",
        String(t.gpuMemoryUtilization),
        ...(t.vllmGpus > 1 ? ["--tensor-parallel-size", String(t.vllmGpus)] : []),
        ...(settings.dtype !== undefined ? ["--dtype", settings.dtype] : []),
        ...servedNames,
        ...settings.extraArgs,
    ];
}
