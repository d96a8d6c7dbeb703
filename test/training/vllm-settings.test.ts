/**
 * The vLLM server's settings (training.vllm, training.dtype): extra flags and env rendered where a
 * vLLM server runs, one dtype for vLLM and the black-box trainer, the tool-call parser per model, and
 * every refusal's message.
 * Run: node --import tsx --test test/training/vllm-settings.test.ts
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { platformNames, RESERVED_VLLM_FLAGS, type PlatformConfig } from "../../components/config";
import { resolveTrainingNode, type TrainingLinks } from "../../components/training";
import { blackboxServerArgs, whiteboxServerArgs } from "../../components/training/vllm-args";
import { vllmServerSettings } from "../../components/config/vllm-settings";
import { configProblems, parseWithTestImages } from "../helpers/config";

type Layout = "whitebox-colocate" | "whitebox-server" | "blackbox";

function raw(layout: Layout, training: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Record<string, unknown> {
    const base =
        layout === "blackbox"
            ? { recipe: "opencode-blackbox", training: { ...training } }
            : {
                  model: { name: "Qwen/Qwen3-1.7B" },
                  training: {
                      layout,
                      gpusOnNode: layout === "whitebox-server" ? 2 : 1,
                      numGenerations: 4,
                      datasetSize: 64,
                      program: "train_coding_whitebox_eval",
                      ...training,
                  },
                  envs: { coding: { catalog: "coding" } },
              };
    return { runId: "run-001", target: { kind: "kubernetes", context: "test" }, ...base, ...extra };
}

const parse = (r: Record<string, unknown>): PlatformConfig => parseWithTestImages(r, "test");

/** A custom black-box script (the TrlParser contract), as a user's own AsyncGRPO trainer. */
// A custom script writes checkpoints, so its volume is sized for them (the checkpoint-size rule).
const CUSTOM_BLACKBOX = { program: "custom", command: ["python", "/app/train.py"], optim: undefined, checkpoints: { size: "300Gi" } };

function described(config: PlatformConfig) {
    const names = platformNames(config);
    const links: TrainingLinks =
        config.training.layout === "blackbox"
            ? { envUrls: {}, sandbox: { url: names.ingress.sandboxUrl, trainerEnv: { SANDBOX_POOL: "pool-a" } } }
            : { envUrls: Object.fromEntries(Object.entries(names.envs).map(([k, v]) => [k, v.url])) };
    return resolveTrainingNode(config, names, links);
}

/** The value after `flag` in `args` (undefined when absent). */
function flagValue(args: readonly string[], flag: string): string | undefined {
    const i = args.indexOf(flag);
    return i < 0 ? undefined : args[i + 1];
}

describe("vLLM dtype: one dtype for the black-box trainer and vLLM", () => {
    test("a custom AsyncGRPO script with no dtype set: vLLM serves float32, AsyncGRPOConfig's default the trainer loads in", () => {
        const d = described(parse(raw("blackbox", CUSTOM_BLACKBOX)));
        assert.equal(flagValue(d.vllm!.args, "--dtype"), "float32");
        assert.equal(d.trainer.args.includes("--dtype"), false, "the trainer keeps AsyncGRPOConfig's own default");
    });

    test("training.dtype reaches both: the custom script's --dtype and vllm serve --dtype", () => {
        const d = described(parse(raw("blackbox", { ...CUSTOM_BLACKBOX, dtype: "bfloat16" })));
        assert.equal(flagValue(d.vllm!.args, "--dtype"), "bfloat16");
        assert.equal(flagValue(d.trainer.args, "--dtype"), "bfloat16");
    });

    test("TRL's opencode script (no dtype flag, float32): vLLM float32; another dtype refused, naming the fix", () => {
        assert.equal(flagValue(described(parse(raw("blackbox"))).vllm!.args, "--dtype"), "float32");
        assert.deepEqual(
            configProblems(() => parse(raw("blackbox", { dtype: "bfloat16" }))),
            [
                "training.dtype: opencode_hf_sandbox takes no dtype flag and trains in float32 (AsyncGRPOConfig's default), so vLLM must serve float32 too (a mismatch skews the importance weights): set training.dtype to float32 or remove it",
            ],
        );
    });

    test("white box: training.dtype refused (GRPOConfig has no dtype flag; both roles load the model's own dtype)", () => {
        assert.deepEqual(
            configProblems(() => parse(raw("whitebox-server", { dtype: "bfloat16" }))),
            [
                "training.dtype: only the black-box layout renders one dtype for both roles (AsyncGRPOConfig.dtype and vllm serve --dtype); with whitebox-server the trainer (GRPOConfig, no dtype flag) loads the model in its own dtype and vLLM serves it in `auto`, the same: remove training.dtype",
            ],
        );
    });
});

describe("vLLM tool-call parser, per model", () => {
    test("Qwen: hermes by default; Qwen3-Coder: qwen3_coder; a set parser wins", () => {
        assert.equal(flagValue(described(parse(raw("blackbox"))).vllm!.args, "--tool-call-parser"), "hermes");
        const coder = parse(raw("blackbox", {}, { model: { name: "Qwen/Qwen3-Coder-30B-A3B-Instruct" } }));
        assert.equal(flagValue(described(coder).vllm!.args, "--tool-call-parser"), "qwen3_coder");
        const set = parse(raw("blackbox", { vllm: { toolCallParser: "qwen3_xml" } }));
        assert.equal(flagValue(described(set).vllm!.args, "--tool-call-parser"), "qwen3_xml");
    });

    test("a model with no default needs the setting; with it, the parser is rendered after --enable-auto-tool-choice", () => {
        assert.deepEqual(
            configProblems(() => parse(raw("blackbox", {}, { model: { name: "meta-llama/Llama-3.1-8B-Instruct" } }))),
            [
                "training.vllm.toolCallParser: required for meta-llama/Llama-3.1-8B-Instruct: the agent's tool calls are parsed by vLLM and the parser is per model family (only Qwen models have a default, hermes): set it to your model's parser, e.g. llama3_json (Llama 3.1+), mistral, openai (gpt-oss)",
            ],
        );
        const llama = parse(raw("blackbox", { vllm: { toolCallParser: "llama3_json" } }, { model: { name: "meta-llama/Llama-3.1-8B-Instruct" } }));
        const args = described(llama).vllm!.args;
        assert.equal(args[args.indexOf("--tool-call-parser") - 1], "--enable-auto-tool-choice");
        assert.equal(flagValue(args, "--tool-call-parser"), "llama3_json");
    });

    test("an unknown parser and a parser in the white-box server layout are refused", () => {
        const problems = configProblems(() => parse(raw("blackbox", { vllm: { toolCallParser: "hermes2" } })));
        assert.equal(problems.length, 1);
        assert.match(
            problems[0],
            /^training\.vllm\.toolCallParser: 'hermes2' is not a tool-call parser of vLLM 0\.29 \(one of: apertus, .*hermes, .*\): set one of them$/,
        );
        assert.deepEqual(
            configProblems(() => parse(raw("whitebox-server", { vllm: { toolCallParser: "hermes" } }))),
            ["training.vllm.toolCallParser: the white-box trainer reads completions, not tool calls, so vLLM parses none: remove training.vllm.toolCallParser"],
        );
    });
});

describe("vLLM extra flags and env", () => {
    test("appended after the platform's flags on both server layouts; env on vLLM's container only", () => {
        const extra = {
            vllm: {
                extraArgs: ["--enable-prefix-caching", "--max-num-seqs", "64"],
                extraEnv: { VLLM_USE_FLASHINFER_SAMPLER: "0", VLLM_LOGGING_LEVEL: "DEBUG" },
            },
        };
        for (const layout of ["whitebox-server", "blackbox"] as const) {
            const d = described(parse(raw(layout, { ...extra, gpuSharing: "isolated" })));
            assert.deepEqual(d.vllm!.args.slice(-3), ["--enable-prefix-caching", "--max-num-seqs", "64"], layout);
            assert.equal(d.vllm!.env.VLLM_LOGGING_LEVEL, "DEBUG", layout);
            assert.equal(d.vllm!.env.VLLM_SERVER_DEV_MODE, "1", layout);
            assert.equal(d.trainer.env.VLLM_LOGGING_LEVEL, undefined, `${layout}: the trainer's env is its own`);
        }
    });

    test("reserved flags (as --flag or --flag=value) and env vars are refused, each naming the setting to use", () => {
        const problems = configProblems(() =>
            parse(
                raw("blackbox", {
                    vllm: {
                        extraArgs: [
                            "--port=9000",
                            "--tensor-parallel-size",
                            "2",
                            "--enable-prefix-caching",
                            "--api-key",
                            "k",
                            "--dtype",
                            "half",
                            "--weight-transfer-config",
                            "{}",
                        ],
                        extraEnv: { VLLM_SERVER_DEV_MODE: "0", NCCL_DEBUG: "INFO", VLLM_LOGGING_LEVEL: "DEBUG" },
                    },
                }),
            ),
        );
        assert.deepEqual(problems, [
            "training.vllm.extraArgs: --port is reserved (the platform renders it or the weight sync depends on it): remove it; set nothing: the trainer, the Service and the ingress all reach vLLM on 8000",
            "training.vllm.extraArgs: --tensor-parallel-size is reserved (the platform renders it or the weight sync depends on it): remove it; set training.vllmGpus",
            "training.vllm.extraArgs: --api-key is reserved (the platform renders it or the weight sync depends on it): remove it; set nothing: the trainer sends no key (vLLM's key guards only /v1); the ingress authenticates (ingress.keys)",
            "training.vllm.extraArgs: --dtype is reserved (the platform renders it or the weight sync depends on it): remove it; set training.dtype (one dtype for vLLM and the trainer)",
            "training.vllm.extraArgs: --weight-transfer-config is reserved (the platform renders it or the weight sync depends on it): remove it; set nothing: the NCCL weight transfer is the trainer's contract (trl weight_transfer.py)",
            "training.vllm.extraEnv.VLLM_SERVER_DEV_MODE: reserved (the platform sets it or the weight sync depends on it): remove it; set nothing: dev mode opens the weight-transfer routes the trainer calls",
            "training.vllm.extraEnv.NCCL_DEBUG: vLLM and the trainer must agree on NCCL settings: move it to training.extraEnv (its NCCL_* variables reach both roles)",
        ]);
    });

    test("a leading value, a secret-looking env var, and any setting in colocate are refused", () => {
        assert.deepEqual(
            configProblems(() => parse(raw("blackbox", { vllm: { extraArgs: ["Qwen/Qwen3-4B"], extraEnv: { WANDB_API_KEY: "x" } } }))),
            [
                "training.vllm.extraArgs: 'Qwen/Qwen3-4B' is not a flag; each entry is a --flag or the value after one (the model is model.name)",
                "training.vllm.extraEnv.WANDB_API_KEY: looks like a secret (its name holds APIKEY, API_KEY, PRIVATE_KEY, ACCESS_KEY or AUTH_KEY, or ends in KEY: a key that authenticates (OPENAI_API_KEY, SSH_PRIVATE_KEY, STRIPE_KEY)), but training.vllm.extraEnv is plain text in the stack file and the pod spec: remove the value; pass it as a reference instead: WANDB_API_KEY: { secret: envSecret-<name> } and pulumi config set --secret envSecret-<name>",
            ],
        );
        assert.deepEqual(
            configProblems(() => parse(raw("whitebox-colocate", { vllm: { extraArgs: ["--enable-prefix-caching"], extraEnv: { A: "1" } } }))),
            [
                "training.vllm.extraArgs, training.vllm.extraEnv: the whitebox-colocate layout runs no vLLM server (vLLM runs inside the training script, configured by its own vllm_* flags): remove training.vllm, pass the script's flags in training.extraArgs, or use layout whitebox-server or blackbox",
            ],
        );
    });

    test("every flag the platform renders for vLLM is reserved (vllm-args.ts and the reserved list cannot drift)", () => {
        for (const layout of ["whitebox-server", "blackbox"] as const) {
            const config = parse(raw(layout, { maxModelLen: 4096, vllmGpus: 2, gpusOnNode: 3 }));
            const settings = vllmServerSettings(config);
            const args =
                layout === "blackbox"
                    ? blackboxServerArgs(config, settings, ["--served-model-name", "a", "b"])
                    : whiteboxServerArgs(config, settings, ["--served-model-name", "a", "b"]);
            const flags = args.filter((a) => a.startsWith("--"));
            assert.ok(flags.length >= 8, layout);
            for (const flag of flags) assert.ok(RESERVED_VLLM_FLAGS[flag] !== undefined, `${layout}: ${flag} is rendered but not reserved`);
        }
    });
});
