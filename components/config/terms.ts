/**
 * The config's vocabulary: the literal sets and small types every other file of this folder shares
 * (layouts, dtypes, GPU sharing, target kinds). The ground floor: it imports nothing from this folder.
 */

/** What AsyncGRPOConfig.dtype takes (trl 1.16 trl/experimental/async_grpo/async_grpo_config.py, field `dtype`). */
export const DTYPES = ["auto", "bfloat16", "float16", "float32"] as const;
export type Dtype = (typeof DTYPES)[number];

export const LAYOUTS = ["whitebox-colocate", "whitebox-server", "blackbox"] as const;
export type Layout = (typeof LAYOUTS)[number];
/** GPU sharing between vLLM and the trainer (see training.gpuSharing). */
export const GPU_SHARING = ["shared", "isolated"] as const;
export type GpuSharing = (typeof GPU_SHARING)[number];

/** Dtypes the trainer may hold its weights in. */
export const WEIGHT_DTYPES = ["float32", "bfloat16", "float16"] as const;
export type WeightDtype = (typeof WEIGHT_DTYPES)[number];

export const TARGET_KINDS = ["kubernetes", "docker"] as const;
export type TargetKind = (typeof TARGET_KINDS)[number];

/**
 * The names `sandboxes.provider` takes. Each has one record in sandbox-providers.ts (what the config knows of it)
 * and one module in components/sandbox/providers/ (what it renders); both tables are typed over this list, so a
 * name added here without its record and module fails `npm run typecheck`.
 */
export const SANDBOX_PROVIDER_NAMES = ["agent-sandbox", "docker", "hf", "none"] as const;
export type SandboxProviderName = (typeof SANDBOX_PROVIDER_NAMES)[number];
