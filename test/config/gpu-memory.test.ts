/**
 * The GPU memory model (components/config/gpu-memory.ts, gpu-fit.ts) against what was measured on a
 * real H200 (bench/gpu/results/memory-calibration.jsonl, written by bench/gpu/memory_calibration.py
 * with TRL 1.16's GRPOTrainer step): every estimate within 15% of its measured peak; the config
 * check's refusal of the black-box recipe on an 80 GB GPU, with the settings that fit, and its pass
 * on an H200; the override; plan.md's section for every recipe; the preflight's read of node labels.
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, test } from "node:test";
import { deepMerge, HARBOR_RECIPE_NAMES, RECIPES, type PlatformConfig } from "../../components/config";
import { GIB, trainerMemory } from "../../components/config/gpu-memory";
import { gpuMemoryPlan, validateGpuMemory } from "../../components/config/gpu-fit";
import { MODEL_FACTS, parameterCount } from "../../components/config/model-facts";
import { productGiB } from "../../components/config/gpu-products";
import { resolvePlatform } from "../../components/platform";
import { checkGpuMemory, nodeGpuGiB } from "../../components/preflight/kubernetes";
import { checkDockerGpuMemory, parseNvidiaSmi } from "../../components/preflight/docker";
import { gpuMemorySection } from "../../scripts/lib/plan-gpu-memory";
import { configProblems, parseWithTestImages } from "../helpers/config";

const RESULTS = path.join(__dirname, "..", "..", "bench", "gpu", "results");

interface Measured {
    readonly shape: string;
    readonly status: "ok" | "oom" | "error";
    readonly model: string;
    readonly dtype: "float32" | "bfloat16";
    readonly optim: string;
    readonly batch: number;
    readonly prompt: number;
    readonly completion: number;
    readonly gradient_checkpointing: boolean;
    readonly parameters: number;
    readonly peak_device_gib?: number;
    readonly torch_total_gib: number;
    readonly mode: string;
}

function read(file: string): Measured[] {
    return fs
        .readFileSync(path.join(RESULTS, file), "utf8")
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => JSON.parse(l) as Measured)
        .filter((m) => m.model !== "tiny");
}
/** The shapes the constants were fitted to, and those measured after, against predictions written first. */
const fitted = read("memory-calibration.jsonl");
const heldOut = read("memory-heldout.jsonl");
const measured = [...fitted, ...heldOut];

function estimate(m: Measured): number {
    return trainerMemory({
        model: MODEL_FACTS[m.model]!,
        dtype: m.dtype,
        optim: m.optim,
        gradientCheckpointing: m.gradient_checkpointing,
        batch: m.batch,
        promptTokens: m.prompt,
        completionTokens: m.completion,
        shards: 1,
    }).peak;
}

describe("the memory model against the H200 calibration", () => {
    test("the calibration holds 11 fitted and 5 held-out shapes, each measured with TRL's GRPOTrainer step", () => {
        assert.equal(fitted.length, 11);
        assert.equal(heldOut.length, 5);
        for (const m of measured) assert.equal(m.mode, "trl", m.shape);
    });

    test("the parameter count from the config facts is transformers' own count", () => {
        for (const m of measured) assert.equal(parameterCount(MODEL_FACTS[m.model]!), m.parameters, m.shape);
    });

    test("every estimate is within 15% of its measured device peak", () => {
        const ok = measured.filter((m) => m.status === "ok");
        assert.equal(ok.length, 15);
        for (const m of ok) {
            const err = (estimate(m) / GIB - m.peak_device_gib!) / m.peak_device_gib!;
            assert.ok(
                Math.abs(err) <= 0.15,
                `${m.shape}: estimate ${(estimate(m) / GIB).toFixed(1)} GiB vs measured ${m.peak_device_gib!.toFixed(1)} GiB (${(err * 100).toFixed(1)}%)`,
            );
        }
    });

    test("the shape that ran out of memory on the H200 is estimated above it", () => {
        const oom = measured.filter((m) => m.status === "oom");
        assert.deepEqual(
            oom.map((m) => m.shape),
            ["8b-fp32-adamw-1x4096"],
        );
        for (const m of oom) assert.ok(estimate(m) / GIB > m.torch_total_gib, `${m.shape}: ${(estimate(m) / GIB).toFixed(1)} GiB`);
    });

    test("the held-out shapes are estimated as predicted before they ran (the model has not moved since)", () => {
        const predicted = fs
            .readFileSync(path.join(RESULTS, "memory-heldout-predictions.txt"), "utf8")
            .split("\n")
            .filter((l) => l !== "" && !l.startsWith("#"))
            .map((l) => l.split(" "));
        assert.deepEqual(
            predicted.map(([shape]) => shape),
            heldOut.map((m) => m.shape),
        );
        for (const [shape, gibs] of predicted) assert.equal((estimate(heldOut.find((m) => m.shape === shape)!) / GIB).toFixed(1), gibs, shape);
    });

    test("the H200's usable memory in the product table is what torch reported there", () => {
        const total = measured[0]!.torch_total_gib;
        assert.ok(Math.abs(productGiB("NVIDIA-H200")! - total) < 0.05, `${productGiB("NVIDIA-H200")} vs ${total}`);
        assert.equal(productGiB("NVIDIA H200"), productGiB("NVIDIA-H200"), "nvidia-smi's name and the label agree");
        assert.equal(productGiB("NVIDIA-B9000"), undefined);
    });
});

/** A recipe on a Kubernetes target pinned to `gpuProduct`. */
function onProduct(recipe: keyof typeof RECIPES, gpuProduct: string, over: Record<string, unknown> = {}): PlatformConfig {
    return parseWithTestImages(deepMerge({ recipe, runId: "r1", target: { kind: "kubernetes", context: "c", gpuProduct } }, over), "dev");
}

const A100 = "NVIDIA-A100-SXM4-80GB";

/** A Docker stack on two GPUs: the MBPP white-box recipe with vLLM served on a GPU of its own, the trainer on the other. */
const WHITEBOX_SERVER_ON_DOCKER = { recipe: "mbpp-whitebox", runId: "r1", target: { kind: "docker" }, training: { layout: "whitebox-server", gpusOnNode: 2 } };
const REFUSAL =
    "training.gpuMemory: the trainer needs an estimated 128.5 GiB per GPU, more than the 79.4 GiB it has on NVIDIA-A100-SXM4-80GB (79.4 GiB usable) (the whole GPU): " +
    "Qwen/Qwen3-8B, float32, paged_adamw_8bit, batch 4 x (512 prompt + 4096 completion) tokens, gradient checkpointing on = " +
    "weights 30.5 + gradients 30.5 + paged optimizer state 19.1 + activations 47.1 + CUDA context and slack 1.4 GiB. " +
    "Settings that fit: your own script (program custom) with training.dtype: bfloat16 (opencode_hf_sandbox trains in float32 only) (59.3 GiB); " +
    "training.trainerGpus: 4 with an FSDP accelerate config in training.accelerateConfig (e.g. /app/fsdp2.yaml in the black-box trainer image): the state sharded over 4 processes (72.2 GiB per GPU); " +
    "or, if you know better (e.g. CPU offload), set training.gpuMemory.enforce: false to deploy anyway";

describe("the config check", () => {
    test("the black-box recipe on an 80 GB GPU is refused with the numbers and the settings that fit", () => {
        assert.deepEqual(
            configProblems(() => onProduct("opencode-blackbox", A100)),
            [REFUSAL],
        );
    });

    test("the sharding it names does fit: the recipe with 4 FSDP trainer GPUs passes on the 80 GB GPU", () => {
        const sharded = { training: { gpusOnNode: 5, trainerGpus: 4, accelerateConfig: "/app/fsdp2.yaml" } };
        assert.deepEqual(
            configProblems(() => onProduct("opencode-blackbox", A100, sharded)),
            [],
        );
        assert.equal(gpuMemoryPlan(onProduct("opencode-blackbox", A100, sharded)).trainerShape!.shards, 4);
    });

    test("the black-box recipe passes on an H200 (target.gpuProduct)", () => {
        assert.deepEqual(
            configProblems(() => onProduct("opencode-blackbox", "NVIDIA-H200")),
            [],
        );
    });

    test("on Docker (no target.gpuProduct) the recipe's own product sizes each role: the white-box recipe's A100, vLLM and trainer on a GPU each", () => {
        const docker = parseWithTestImages(WHITEBOX_SERVER_ON_DOCKER, "dev");
        const plan = gpuMemoryPlan(docker);
        assert.match(plan.gpu!.what, /^NVIDIA-A100-SXM4-80GB /);
        assert.deepEqual(
            plan.roles.map((r) => [r.role, r.fits]),
            [
                ["trainer", true],
                ["vllm", true],
            ],
        );
    });

    test("training.gpuMemory.enforce false lets the misfit through, and plan.md still shows it", () => {
        const c = onProduct("opencode-blackbox", A100, { training: { gpuMemory: { enforce: false } } });
        assert.deepEqual(validateGpuMemory(c), []);
        const md = gpuMemorySection(c).join("\n");
        assert.match(md, /\*\*does not fit\*\*: short by 49\.1 GiB/);
        assert.match(md, /training\.gpuMemory\.enforce is false: a misfit is not refused\./);
    });

    test("training.gpuMemory.gib wins over the product; a smaller GPU also refuses vLLM with what would fit", () => {
        const problems = configProblems(() => onProduct("opencode-blackbox", "NVIDIA-H200", { training: { gpuMemory: { gib: 40 } } }));
        assert.equal(problems.length, 2);
        assert.match(
            problems[0]!,
            /^training\.gpuMemory: the trainer needs an estimated 128\.5 GiB per GPU, more than the 40\.0 GiB it has on training\.gpuMemory\.gib 40 /,
        );
        assert.match(problems[0]!, /No single setting fits: combine them/);
        assert.equal(
            problems[1],
            "training.gpuMemory: vLLM needs an estimated 42.5 GiB per GPU to start, more than the 36.0 GiB it may take on training.gpuMemory.gib 40 (--gpu-memory-utilization 0.9 of the GPU): " +
                "weights 30.5 + KV cache of one 32768-token sequence 9.0 + vLLM overhead 3.0 (float32, TP 1) GiB. " +
                "Settings that fit: training.maxModelLen: 9055 or less; your own script (program custom) with training.dtype: bfloat16 (opencode_hf_sandbox trains in float32 only); training.vllmGpus: 2 (tensor parallel); or, if you know better (e.g. CPU offload), set training.gpuMemory.enforce: false to deploy anyway",
        );
    });

    test("a model outside the table is sized from training.gpuMemory.model, and unknown without it", () => {
        const facts = { ...MODEL_FACTS["Qwen/Qwen3-8B"]! };
        const c = onProduct("opencode-blackbox", "NVIDIA-H200", { model: { name: "Qwen/Qwen3-8B-sft" }, training: { gpuMemory: { model: facts } } });
        assert.equal(gpuMemoryPlan(c).trainer!.peak, gpuMemoryPlan(onProduct("opencode-blackbox", "NVIDIA-H200")).trainer!.peak);
        const unknown = onProduct("opencode-blackbox", "NVIDIA-H200", { model: { name: "Qwen/Qwen3-8B-sft" } });
        assert.deepEqual(gpuMemoryPlan(unknown).roles, []);
        assert.match(gpuMemorySection(unknown).join("\n"), /Qwen\/Qwen3-8B-sft is not in the model table .* training\.gpuMemory\.model/);
    });

    test("FSDP shards the trainer's state over every trainer process (the 32B recipe: 2 nodes x 8)", () => {
        const c = onProduct("opencode-blackbox-32b", "NVIDIA-H200");
        const plan = gpuMemoryPlan(c);
        assert.equal(plan.trainerShape!.shards, 16);
        assert.ok(Math.abs(plan.trainer!.weights - (parameterCount(MODEL_FACTS["Qwen/Qwen3-32B"]!) * 4) / 16) < 1);
        assert.deepEqual(validateGpuMemory(c), []);
        assert.equal(configProblems(() => onProduct("opencode-blackbox-32b", A100)).length, 1);
    });
});

describe("plan.md's GPU memory section", () => {
    test("every recipe shows each role's estimate against its GPU, and fits the GPU it was published on", () => {
        for (const name of Object.keys(RECIPES) as Array<keyof typeof RECIPES>) {
            const recipe = RECIPES[name];
            // Multi-node, Harbor and black-box recipes run on Kubernetes only (the black box's sandboxes are agent-sandbox's).
            const kubernetesOnly =
                Boolean((recipe.training as { nodes?: number }).nodes) ||
                (HARBOR_RECIPE_NAMES as string[]).includes(name) ||
                recipe.training.layout === "blackbox";
            const target = kubernetesOnly ? { kind: "kubernetes", context: "c" } : { kind: "docker" };
            const c = parseWithTestImages({ recipe: name, runId: "r1", target }, "dev");
            const md = gpuMemorySection(c).join("\n");
            assert.match(md, /^## GPU memory$/m, name);
            assert.match(md, /^\| trainer \| .* GiB = weights .* \| fits, [\d.]+ GiB to spare \|$/m, name);
            assert.match(md, /^\| vLLM \| .* GiB to start = weights .* \| fits, [\d.]+ GiB to spare \|$/m, name);
        }
    });

    test("the white-box colocate recipe: the trainer gets the GPU less TRL's 0.3, vLLM the 0.3", () => {
        const c = parseWithTestImages({ recipe: "mbpp-whitebox", runId: "r1", target: { kind: "docker" } }, "dev");
        const md = gpuMemorySection(c).join("\n");
        assert.match(
            md,
            /\| trainer \| 1 GPU shared with vLLM, per GPU \| 17\.9 GiB = .*batch 8 x \(1024 prompt \+ 1024 completion\).* \| 55\.6 GiB \(the GPU less vLLM's colocated share 0\.3\) \| fits, 37\.7 GiB to spare \|/,
        );
        assert.match(md, /\| vLLM \| inside the trainer process \| .* \| 23\.8 GiB \(TRL's colocate share 0\.3 of the GPU\) \|/);
    });

    test("the section names the trainer the estimate describes: GRPOTrainer's step, and for the black box that AsyncGRPOTrainer's is unmeasured", () => {
        const white = gpuMemorySection(parseWithTestImages({ recipe: "mbpp-whitebox", runId: "r1", target: { kind: "docker" } }, "dev")).join("\n");
        assert.ok(white.includes("This run's trainer is TRL's GRPOTrainer: the step the estimate was calibrated on."), white);
        for (const [recipe, whose] of [
            ["opencode-blackbox", "AsyncGRPOTrainer"],
            ["harbor-blackbox", "your script's trainer (TRL's opencode and Harbor scripts run AsyncGRPOTrainer)"],
        ] as const) {
            const md = gpuMemorySection(parseWithTestImages({ recipe, runId: "r1", target: { kind: "kubernetes", context: "c" } }, "dev")).join("\n");
            assert.ok(md.includes(`**The estimate describes GRPOTrainer's step; this run's trainer is ${whose}**`), `${recipe}: ${md}`);
            assert.match(md, /was never measured: .* may over-state its peak; unproven until measured \(docs\/design\/gpu-memory\.md\)/, recipe);
        }
    });

    test("the refusal is in the section when the check refuses (a config the check would refuse, as a preview sees it)", () => {
        const c = onProduct("opencode-blackbox", A100, { training: { gpuMemory: { enforce: false } } });
        const md = gpuMemorySection({ ...c, training: { ...c.training, gpuMemory: { ...c.training.gpuMemory, enforce: undefined } } }).join("\n");
        assert.ok(md.includes(`Refused by the config check:\n- ${REFUSAL}`), md);
    });
});

describe("the preflight reads the GPU nodes' labels", () => {
    const gpuNode = (name: string, labels: Record<string, string>) => ({
        metadata: { name, labels: { "nvidia.com/gpu.present": "true", ...labels } },
        spec: { taints: [] },
        status: { allocatable: { cpu: "192", memory: "2Ti", "nvidia.com/gpu": "8" }, conditions: [{ type: "Ready", status: "True" }] },
    });
    /** The recipe with no target.gpuProduct (no nodeSelector on the product): the recipe's own H200 passes the config check, the nodes decide. */
    const plan = () =>
        resolvePlatform(parseWithTestImages({ recipe: "opencode-blackbox", runId: "r1", target: { kind: "kubernetes", context: "c" } }, "dev"), {
            hfToken: true,
        });

    test("nvidia.com/gpu.memory (MiB) wins over the product; the product table otherwise", () => {
        assert.deepEqual(nodeGpuGiB(gpuNode("a", { "nvidia.com/gpu.memory": "81920", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB" })), {
            gib: 79.4,
            from: "nvidia.com/gpu.memory=81920 (NVIDIA-A100-SXM4-80GB)",
        });
        assert.equal(nodeGpuGiB(gpuNode("b", { "nvidia.com/gpu.product": "NVIDIA-H200" }))!.from, "nvidia.com/gpu.product=NVIDIA-H200");
        assert.equal(nodeGpuGiB(gpuNode("c", {})), undefined);
    });

    test("an H200 node: ok; an A100 node: fail with the settings that fit; no label: warn", () => {
        const h200 = checkGpuMemory(plan(), [gpuNode("h", { "nvidia.com/gpu.product": "NVIDIA-H200" })])!;
        assert.equal(h200.status, "ok");
        assert.match(
            h200.found,
            /^each role fits on h \(nvidia\.com\/gpu\.product=NVIDIA-H200: 139\.8 GiB per GPU\): trainer 128\.5 of 139\.8 GiB, vllm 42\.5 of 125\.8 GiB$/,
        );
        const a100 = checkGpuMemory(plan(), [gpuNode("h", { "nvidia.com/gpu.product": "NVIDIA-H200" }), gpuNode("a", { "nvidia.com/gpu.product": A100 })])!;
        assert.equal(a100.status, "fail");
        assert.match(
            a100.found,
            /^on a \(nvidia\.com\/gpu\.product=NVIDIA-A100-SXM4-80GB: 79\.4 GiB per GPU\), the smallest GPU the training pod can land on: trainer 128\.5 of 79\.4 GiB/,
        );
        assert.match(a100.fix, /Settings that fit: your own script \(program custom\) with training\.dtype: bfloat16 .*\(59\.3 GiB\)/);
        const none = checkGpuMemory(plan(), [gpuNode("x", {})])!;
        assert.equal(none.status, "warn");
        assert.match(none.fix, /GPU feature discovery/);
    });
});

describe("the Docker preflight reads the host's nvidia-smi", () => {
    /** vLLM on GPU 0, the trainer on GPU 1: trainer 17.9 GiB (Qwen3-1.7B, bf16, AdamW), vLLM 10.6 GiB to start. */
    const plan = () => resolvePlatform(parseWithTestImages(WHITEBOX_SERVER_ON_DOCKER, "dev"), { hfToken: true });

    test("nvidia-smi's csv lines", () => {
        assert.deepEqual(parseNvidiaSmi("NVIDIA H200, 143771\nNVIDIA A100-SXM4-80GB, 81920\n\ngarbage\n"), [
            { name: "NVIDIA H200", mib: 143771 },
            { name: "NVIDIA A100-SXM4-80GB", mib: 81920 },
        ]);
    });

    test("two A100s: ok; a 16 GB T4 among the two the stack uses: fail; a third, unused GPU does not count; nvidia-smi failing: warn", () => {
        const a100 = { name: "NVIDIA A100-SXM4-80GB", mib: 81920 };
        const t4 = { name: "Tesla T4", mib: 15360 };
        const both = checkDockerGpuMemory(plan(), { ok: true, value: [a100, a100] })!;
        assert.equal(both.status, "ok");
        assert.equal(both.found, "each role fits on GPU 0 NVIDIA A100-SXM4-80GB (81920 MiB: 79.4 GiB usable): trainer 17.9 of 79.4 GiB, vllm 10.6 of 71.5 GiB");
        // The smallest GPU the stack uses decides, whichever role lands on it.
        for (const [gpus, index] of [
            [[a100, t4], 1],
            [[t4, a100], 0],
        ] as const) {
            const mixed = checkDockerGpuMemory(plan(), { ok: true, value: gpus })!;
            assert.equal(mixed.status, "fail");
            assert.equal(mixed.found, `on GPU ${index} Tesla T4 (15360 MiB: 14.4 GiB usable): trainer 17.9 of 14.4 GiB, vllm 10.6 of 13.0 GiB`);
            assert.match(mixed.fix, /^the trainer needs an estimated 17\.9 GiB per GPU, more than the 14\.4 GiB it has on GPU \d Tesla T4 /);
            assert.match(mixed.fix, /Settings that fit: training\.trainerGpus: 2 with an FSDP accelerate config/);
        }
        assert.equal(checkDockerGpuMemory(plan(), { ok: true, value: [a100, a100, t4] })!.status, "ok");
        const broken = checkDockerGpuMemory(plan(), { ok: false, error: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver" })!;
        assert.equal(broken.status, "warn");
        assert.match(broken.found, /^nvidia-smi on the host failed: NVIDIA-SMI has failed/);
    });
});
