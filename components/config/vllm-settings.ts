/**
 * The vLLM server's own settings (`training.vllm`, `training.dtype`): extra flags and env vars, the
 * served dtype and the tool-call parser, checked against what the platform renders so a setting can
 * never break the weight-sync contract between vLLM and the trainer. Pure data and rules: the
 * training component renders from `vllmServerSettings`, the config checks with `validateVllmSettings`.
 */
import { programFacts } from "./programs";
import type { PlatformConfig } from "./types";
import type { Dtype } from "./terms";
import type { EnvValue } from "./secrets";

/**
 * AsyncGRPOConfig.dtype's default in TRL 1.16 (same file): the trainer loads the model in float32 and
 * asks for vLLM to be served in the same dtype (`vllm serve --dtype`).
 */
export const ASYNC_GRPO_DEFAULT_DTYPE: Dtype = "float32";

/**
 * `vllm serve` flags the platform renders (components/training/vllm-args.ts) or that would break the
 * contract with the trainer, each with the setting to use instead. A test holds vllm-args.ts to it:
 * every flag it renders is here.
 */
export const RESERVED_VLLM_FLAGS: Readonly<Record<string, string>> = {
    "--model": "model.name",
    "--revision": "model.revision",
    "--served-model-name": "model.name (the platform serves the model under its name)",
    "--host": "nothing: vLLM listens on every interface of its pod/container, reached only on the private network and through the ingress",
    "--port": "nothing: the trainer, the Service and the ingress all reach vLLM on 8000",
    "--api-key": "nothing: the trainer sends no key (vLLM's key guards only /v1); the ingress authenticates (ingress.keys)",
    "--max-model-len": "training.maxModelLen",
    "--tensor-parallel-size": "training.vllmGpus",
    "-tp": "training.vllmGpus",
    "--data-parallel-size": "nothing: the trainer's weight update speaks to one data-parallel rank",
    "-dp": "nothing: the trainer's weight update speaks to one data-parallel rank",
    "--gpu-memory-utilization": "training.gpuMemoryUtilization",
    "--weight-transfer-config": "nothing: the NCCL weight transfer is the trainer's contract (trl weight_transfer.py)",
    "--logprobs-mode": "nothing: the trainer needs processed_logprobs",
    "--return-tokens-as-token-ids": "nothing: the black-box trainer needs token ids",
    "--max-logprobs": "nothing: the white-box trainer needs uncapped logprobs",
    "--enable-auto-tool-choice": "training.vllm.toolCallParser",
    "--tool-call-parser": "training.vllm.toolCallParser",
    "--dtype": "training.dtype (one dtype for vLLM and the trainer)",
    "--config": "the individual settings (a vLLM config file could set any flag above)",
};

/** Env vars of the vLLM server the platform sets or that would break the contract, each with the setting to use instead. */
export const RESERVED_VLLM_ENV: Readonly<Record<string, string>> = {
    VLLM_SERVER_DEV_MODE: "nothing: dev mode opens the weight-transfer routes the trainer calls",
    VLLM_API_KEY: "nothing: the trainer sends no key; the ingress authenticates (ingress.keys)",
    CUDA_VISIBLE_DEVICES: "training.vllmGpus / training.trainerGpus (the platform splits the GPUs)",
    CUDA_DEVICE_ORDER: "nothing: the platform numbers GPUs as nvidia-smi does",
    HF_HOME: "training.modelCache",
    HF_TOKEN: "the hfToken secret",
};

/** Env var prefixes both roles must agree on: set them once in training.extraEnv. */
const SHARED_ENV_PREFIXES = ["NCCL_"] as const;

/**
 * vLLM's tool-call parsers in the default image's release (vllm 0.29.0, vllm/tool_parsers/__init__.py,
 * the names registered there).
 */
export const VLLM_TOOL_CALL_PARSERS = [
    "apertus",
    "cohere_command3",
    "cohere_command4",
    "deepseek_v3",
    "deepseek_v31",
    "deepseek_v32",
    "deepseek_v4",
    "dots",
    "ernie45",
    "functiongemma",
    "gemma4",
    "gigachat3",
    "glm45",
    "glm47",
    "granite",
    "granite-20b-fc",
    "granite4",
    "hermes",
    "hunyuan_a13b",
    "hy_v3",
    "hy_v4",
    "inkling",
    "internlm",
    "jamba",
    "kimi_k2",
    "kimi_k3",
    "lfm2",
    "ling3",
    "llama3_json",
    "llama4_json",
    "llama4_pythonic",
    "longcat",
    "mimo",
    "minicpm5",
    "minimax_m2",
    "minimax_m3",
    "mistral",
    "muse_glimmer",
    "olmo3",
    "openai",
    "phi4_mini_json",
    "poolside_v1",
    "pythonic",
    "qwen3_coder",
    "qwen3_xml",
    "seed_oss",
    "step3",
    "step3p5",
    "xlam",
] as const;

/**
 * Default parser by model id prefix, first match wins: Qwen3-Coder writes XML tool calls (vLLM's
 * qwen3_coder parser); other Qwen chat models the hermes format (Qwen's vLLM deployment guide,
 * TRL's opencode example launches Qwen3 with hermes).
 */
const DEFAULT_TOOL_CALL_PARSERS: ReadonlyArray<{ readonly prefix: string; readonly parser: string }> = [
    { prefix: "qwen/qwen3-coder", parser: "qwen3_coder" },
    { prefix: "qwen/", parser: "hermes" },
];

/** The tool-call parser vLLM gets for `model` when training.vllm.toolCallParser is unset (undefined: no default). */
export function defaultToolCallParser(model: string): string | undefined {
    const id = model.toLowerCase();
    return DEFAULT_TOOL_CALL_PARSERS.find((d) => id.startsWith(d.prefix))?.parser;
}

/** What the vLLM server is given beyond the platform's own flags. */
export interface VllmServerSettings {
    /** `--dtype` of `vllm serve` (black box: the trainer's; white box: vLLM's own `auto`, unrendered). */
    readonly dtype?: Dtype;
    /** The trainer's `--dtype` flag, when the platform renders it (a custom black-box script). */
    readonly trainerDtypeArg?: Dtype;
    /** `--tool-call-parser` (black box only). */
    readonly toolCallParser?: string;
    readonly extraArgs: readonly string[];
    /** Plain values, or references to a stack secret (`{ secret: envSecret-<name> }`). */
    readonly extraEnv: Readonly<Record<string, EnvValue>>;
}

/**
 * The one decision of the vLLM server's extra settings. Black box: vLLM is served in the trainer's
 * dtype (training.dtype, else the program's fixed one, else AsyncGRPOConfig's float32), and a custom
 * script is handed the same dtype when training.dtype is set.
 */
export function vllmServerSettings(c: Pick<PlatformConfig, "training" | "model">): VllmServerSettings {
    const t = c.training;
    if (t.layout === "whitebox-colocate") return { extraArgs: [], extraEnv: {} };
    const v = t.vllm;
    if (t.layout !== "blackbox") return { extraArgs: v.extraArgs, extraEnv: v.extraEnv };
    const program = programFacts(t.program);
    const dtype = (t.dtype ?? (program?.trainerDtype as Dtype | undefined) ?? ASYNC_GRPO_DEFAULT_DTYPE) as Dtype;
    return {
        dtype,
        trainerDtypeArg: program === undefined ? t.dtype : undefined,
        toolCallParser: v.toolCallParser ?? defaultToolCallParser(c.model.name),
        extraArgs: v.extraArgs,
        extraEnv: v.extraEnv,
    };
}

/** The flag an extra argument names (`--flag=value` or `--flag`), undefined for a value. */
function flagOf(arg: string): string | undefined {
    return arg.startsWith("-") && !/^-\d/.test(arg) ? arg.split("=")[0] : undefined;
}

/** training.vllm and training.dtype: every problem, each naming the field and the fix. */
export function validateVllmSettings(c: PlatformConfig): string[] {
    const t = c.training;
    const v = t.vllm;
    const errors: string[] = [];
    if (t.layout === "whitebox-colocate") {
        const set = [
            ...(v.extraArgs.length > 0 ? ["extraArgs"] : []),
            ...(Object.keys(v.extraEnv).length > 0 ? ["extraEnv"] : []),
            ...(v.toolCallParser !== undefined ? ["toolCallParser"] : []),
        ];
        if (set.length > 0) {
            errors.push(
                `training.vllm.${set.join(", training.vllm.")}: the whitebox-colocate layout runs no vLLM server (vLLM runs inside the training script, configured by its own vllm_* flags): remove training.vllm, pass the script's flags in training.extraArgs, or use layout whitebox-server or blackbox`,
            );
        }
    }
    if (t.dtype !== undefined && t.layout !== "blackbox") {
        errors.push(
            `training.dtype: only the black-box layout renders one dtype for both roles (AsyncGRPOConfig.dtype and vllm serve --dtype); with ${t.layout} the trainer (GRPOConfig, no dtype flag) loads the model in its own dtype${t.layout === "whitebox-server" ? " and vLLM serves it in `auto`, the same" : ""}: remove training.dtype`,
        );
    }
    const program = programFacts(t.program);
    if (t.layout === "blackbox" && t.dtype !== undefined && program?.trainerDtype !== undefined && t.dtype !== program.trainerDtype) {
        errors.push(
            `training.dtype: ${t.program} takes no dtype flag and trains in ${program.trainerDtype} (AsyncGRPOConfig's default), so vLLM must serve ${program.trainerDtype} too (a mismatch skews the importance weights): set training.dtype to ${program.trainerDtype} or remove it`,
        );
    }
    if (v.toolCallParser !== undefined && t.layout === "whitebox-server") {
        errors.push(
            `training.vllm.toolCallParser: the white-box trainer reads completions, not tool calls, so vLLM parses none: remove training.vllm.toolCallParser`,
        );
    }
    if (t.layout === "blackbox") {
        const parser = v.toolCallParser ?? defaultToolCallParser(c.model.name);
        if (parser === undefined) {
            errors.push(
                `training.vllm.toolCallParser: required for ${c.model.name}: the agent's tool calls are parsed by vLLM and the parser is per model family (only Qwen models have a default, hermes): set it to your model's parser, e.g. llama3_json (Llama 3.1+), mistral, openai (gpt-oss)`,
            );
        } else if (!(VLLM_TOOL_CALL_PARSERS as readonly string[]).includes(parser)) {
            errors.push(
                `training.vllm.toolCallParser: '${parser}' is not a tool-call parser of vLLM 0.29 (one of: ${VLLM_TOOL_CALL_PARSERS.join(", ")}): set one of them`,
            );
        }
    }
    for (const arg of v.extraArgs) {
        const flag = flagOf(arg);
        const instead = flag !== undefined ? RESERVED_VLLM_FLAGS[flag] : undefined;
        if (instead !== undefined) {
            errors.push(`training.vllm.extraArgs: ${flag} is reserved (the platform renders it or the weight sync depends on it): remove it; set ${instead}`);
        }
    }
    if (v.extraArgs.length > 0 && flagOf(v.extraArgs[0]) === undefined) {
        errors.push(`training.vllm.extraArgs: '${v.extraArgs[0]}' is not a flag; each entry is a --flag or the value after one (the model is model.name)`);
    }
    for (const name of Object.keys(v.extraEnv)) {
        const instead = RESERVED_VLLM_ENV[name];
        if (instead !== undefined)
            errors.push(`training.vllm.extraEnv.${name}: reserved (the platform sets it or the weight sync depends on it): remove it; set ${instead}`);
        else if (SHARED_ENV_PREFIXES.some((p) => name.startsWith(p)))
            errors.push(
                `training.vllm.extraEnv.${name}: vLLM and the trainer must agree on NCCL settings: move it to training.extraEnv (its NCCL_* variables reach both roles)`,
            );
    }
    return errors;
}
