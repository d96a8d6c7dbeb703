/**
 * A custom script's command line (training.program `custom`): TRL's parser flags, rendered here.
 * - GRPOConfig fields (`vllm_mode`, `vllm_server_base_url`, `vllm_group_port` 51216,
 *   `steps_per_generation`): trl `trl/trainer/grpo_config.py`; AsyncGRPOConfig
 *   (`vllm_server_base_url`, `max_inflight_tasks`, no `vllm_mode`/`steps_per_generation`):
 *   trl `trl/experimental/async_grpo/async_grpo_config.py`.
 *
 * What a `custom` script must accept (white box: TRL's `TrlParser` over `GRPOConfig`,
 * TRL's `ModelConfig` and the script's own dataclass; black box: `TrlParser` over
 * `AsyncGRPOConfig` and the script's own dataclass, NOT `ModelConfig`: both define `--dtype`
 * and one parser over the two fails with "conflicting option string"):
 * - `--model_name_or_path`, `--model_revision` (ModelConfig in white box; the script's own
 *   dataclass fields in black box).
 * - TrainingArguments/GRPOConfig: `--output_dir`, `--per_device_train_batch_size`,
 *   `--gradient_accumulation_steps`, `--num_generations`, `--per_device_eval_batch_size`,
 *   `--max_steps`, `--push_to_hub`, `--hub_model_id`, `--report_to trackio`, `--project`,
 *   `--trackio_space_id`, `--save_total_limit`, `--resume_from_checkpoint` (the script must hand it to
 *   `trainer.train(resume_from_checkpoint=...)`).
 * - white box (GRPOConfig): `--steps_per_generation`, `--use_vllm`, `--vllm_mode`, and in
 *   server mode `--vllm_server_base_url`, `--vllm_group_port`.
 * - black box (AsyncGRPOConfig): `--vllm_server_base_url`, `--max_inflight_tasks`.
 * - the script's own arguments (seed-specific, dashed): `--dataset-size` (the MBPP seed
 *   defaults to 120 unless `--dataset-size 170` is passed), `--eval-size` (held-out
 *   problems, only when > 0), black box `--sandbox-vllm-url` (the URL sandboxes reach vLLM
 *   through: the pod's forwarder). Env servers arrive as env vars `ENV_<NAME>_URL` (name upper-cased,
 *   `-` -> `_`), the sandbox pool as `SANDBOX_PROVIDER` + the pool's own vars. The trainer holds no
 *   ingress key: each sandbox pod's forwarder does (python/agent_rl_sandbox/forwarder.py).
 */
import { DEFAULT_KEEP_LAST } from "../config/checkpoints";
import { KNOB_FIELDS, KNOBS } from "../config/program-settings";
import { vllmServerSettings } from "../config/vllm-settings";
import { TRL_GROUP_PORT, type TrainingConfig } from "./model";

/**
 * A custom script's arguments: the TrlParser flag contract (docs/reference/training-node.md "The trainer program"): TRL's
 * `GRPOConfig` (white box) or `AsyncGRPOConfig` (black box) fields with underscores, plus the seeds'
 * dashed `--dataset-size` / `--eval-size`.
 */
export function trlParserArgs(config: TrainingConfig, outputDir: string, vllmUrl: string): string[] {
    const t = config.training;
    const args: string[] = [
        "--model_name_or_path",
        config.model.name,
        "--model_revision",
        config.model.revision,
        "--dataset-size",
        String(t.datasetSize),
        ...(t.evalSize > 0 ? ["--eval-size", String(t.evalSize)] : []),
        "--output_dir",
        outputDir,
        "--per_device_train_batch_size",
        String(t.perDeviceTrainBatchSize),
        "--gradient_accumulation_steps",
        String(t.gradientAccumulationSteps),
        "--num_generations",
        String(t.numGenerations),
        "--per_device_eval_batch_size",
        String(t.perDeviceEvalBatchSize),
    ];
    if (t.layout === "whitebox-colocate") {
        // vllm_gpu_memory_utilization stays TRL's colocate default (0.3): training shares the GPU, so
        // training.gpuMemoryUtilization (a server setting, 0.9) would starve it; override via extraArgs.
        args.push("--steps_per_generation", String(t.stepsPerGeneration), "--use_vllm", "true", "--vllm_mode", "colocate");
    } else if (t.layout === "whitebox-server") {
        args.push(
            "--steps_per_generation",
            String(t.stepsPerGeneration),
            "--use_vllm",
            "true",
            "--vllm_mode",
            "server",
            "--vllm_server_base_url",
            vllmUrl,
            "--vllm_group_port",
            String(TRL_GROUP_PORT),
        );
    } else {
        // AsyncGRPOConfig has no vllm_mode / steps_per_generation; rollouts in flight = sandboxes in use.
        args.push("--vllm_server_base_url", vllmUrl, "--max_inflight_tasks", String(t.maxInflight));
        // The dtype vLLM is served in too (AsyncGRPOConfig.dtype; unset: its float32, which vLLM gets).
        const dtype = vllmServerSettings(config).trainerDtypeArg;
        if (dtype !== undefined) args.push("--dtype", dtype);
    }
    // Retention on the shared volume (transformers rotates the oldest out after each save).
    args.push("--save_total_limit", String(t.checkpoints.keepLast ?? DEFAULT_KEEP_LAST));
    if (t.maxSteps !== undefined) args.push("--max_steps", String(t.maxSteps));
    // The knobs, as their TRL fields (components/config/program-settings.ts KNOBS; config refused a field the layout's config lacks).
    for (const f of KNOB_FIELDS) {
        const value = t[f];
        if (value !== undefined) args.push(KNOBS[f].trl, String(value));
    }
    if (t.hubRepoId !== undefined) args.push("--push_to_hub", "true", "--hub_model_id", t.hubRepoId);
    if (t.trackioProject !== undefined) args.push("--report_to", "trackio", "--project", t.trackioProject);
    if (t.trackioSpaceId !== undefined) args.push("--trackio_space_id", t.trackioSpaceId);
    return args;
}
