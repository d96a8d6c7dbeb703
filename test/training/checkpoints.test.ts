/**
 * Checkpoints: the resume wrapper and the listing run for real (python, as in the trainer's
 * container) over a temp volume holding complete, half-written and other runs' checkpoints; the
 * size rule's arithmetic; every refusal's message.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import { HARBOR_RECIPE_NAMES, platformNames, RECIPES } from "../../components/config";
import { quantityValue } from "../../components/shared/quantity";
import { BNB_8BIT_STATE_BYTES, checkpointBytesPerParameter, checkpointNeed, recipeCheckpointSize } from "../../components/config/checkpoints";
import { listCheckpointsCommand, resumeCommand } from "../../components/training/checkpoint-select";
import { resolveTrainingNode } from "../../components/training";
import { configProblems, parseWithTestImages } from "../helpers/config";

const roots: string[] = [];
after(() => {
    for (const r of roots) fs.rmSync(r, { recursive: true, force: true });
});

/** A checkpoint directory: `state` writes trainer_state.json; `shards` are listed in an index, `present` of them written. */
function checkpoint(root: string, rel: string, opts: { state?: boolean; shards?: string[]; present?: string[]; single?: boolean; fsdp?: boolean } = {}): void {
    const d = path.join(root, rel);
    fs.mkdirSync(d, { recursive: true });
    if (opts.state ?? true) fs.writeFileSync(path.join(d, "trainer_state.json"), "{}");
    if (opts.shards) {
        const weightMap = Object.fromEntries(opts.shards.map((s, i) => [`layer.${i}.weight`, s]));
        fs.writeFileSync(path.join(d, "model.safetensors.index.json"), JSON.stringify({ metadata: {}, weight_map: weightMap }));
        for (const s of opts.present ?? opts.shards) fs.writeFileSync(path.join(d, s), "x");
    }
    if (opts.single) fs.writeFileSync(path.join(d, "model.safetensors"), "x");
    if (opts.fsdp) {
        fs.mkdirSync(path.join(d, "pytorch_model_fsdp_0"));
        fs.writeFileSync(path.join(d, "pytorch_model_fsdp_0", ".metadata"), "x");
    }
}

/** A volume: run r1 (another run: newest of all by step and mtime), run r2 (this run) with a half-written newest checkpoint. */
function volume(): string {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "ckpt-"));
    roots.push(root);
    checkpoint(root, "r2/checkpoint-10", { shards: ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"] });
    checkpoint(root, "r2/checkpoint-20", { single: true });
    // The crash: the weights were written, trainer_state.json never was.
    checkpoint(root, "r2/checkpoint-30", { state: false, single: true });
    // Newer by step, but a shard is missing.
    checkpoint(root, "r2/checkpoint-40", {
        shards: ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"],
        present: ["model-00001-of-00002.safetensors"],
    });
    // Another run's checkpoint, written last (newest mtime, highest step).
    checkpoint(root, "r1/checkpoint-90", { fsdp: true });
    checkpoint(root, "r1/checkpoint-95", { state: false, single: true });
    return root;
}

/** Runs the rendered resume wrapper with `echo` as the trainer: what it would exec, and its messages. */
function runResume(root: string, runId: string, source: string | undefined): { status: number | null; argv: string; stderr: string; stdout: string } {
    const cmd = resumeCommand(runId, source, ["echo", "TRAIN", "--output_dir", `${root}/${runId}`], root);
    const r = spawnSync(cmd[0], cmd.slice(1), { encoding: "utf8" });
    const lines = r.stdout.trim().split("\n");
    return { status: r.status, argv: lines.find((l) => l.startsWith("TRAIN")) ?? "", stderr: r.stderr, stdout: r.stdout };
}

describe("the resume wrapper (run on a temp volume)", () => {
    test("resumes this run's latest complete checkpoint: skips the half-written and the shard-less, never another run's", () => {
        const root = volume();
        const r = runResume(root, "r2", undefined);
        assert.equal(r.status, 0, r.stderr);
        assert.equal(r.argv, `TRAIN --output_dir ${root}/r2 --resume_from_checkpoint ${root}/r2/checkpoint-20`);
        assert.match(r.stderr, /skipping .*r2\/checkpoint-40: missing model-00002-of-00002.safetensors of model.safetensors.index.json/);
        assert.match(r.stderr, /skipping .*r2\/checkpoint-30: no trainer_state.json/);
    });

    test("a new run with no checkpoint of its own starts from the base model, even with other runs on the volume", () => {
        const root = volume();
        const r = runResume(root, "r3", undefined);
        assert.equal(r.status, 0, r.stderr);
        assert.equal(r.argv, `TRAIN --output_dir ${root}/r3`);
        assert.match(r.stdout, /no complete checkpoint of run r3/);
    });

    test("a named run: its latest complete checkpoint (an FSDP sharded state counts, the newer half-written one does not)", () => {
        const root = volume();
        const r = runResume(root, "r3", "r1");
        assert.equal(r.status, 0, r.stderr);
        assert.equal(r.argv, `TRAIN --output_dir ${root}/r3 --resume_from_checkpoint ${root}/r1/checkpoint-90`);
    });

    test("a restarted run prefers its own progress over the named source", () => {
        const root = volume();
        const r = runResume(root, "r2", "r1");
        assert.equal(r.argv, `TRAIN --output_dir ${root}/r2 --resume_from_checkpoint ${root}/r2/checkpoint-20`);
    });

    test("a named checkpoint: exactly it; incomplete or missing, the pod fails with the reason instead of training from scratch", () => {
        const root = volume();
        assert.equal(runResume(root, "r3", "r2/checkpoint-10").argv, `TRAIN --output_dir ${root}/r3 --resume_from_checkpoint ${root}/r2/checkpoint-10`);
        const half = runResume(root, "r3", "r2/checkpoint-30");
        assert.equal(half.status, 1);
        assert.equal(half.argv, "");
        assert.match(half.stderr, /r2\/checkpoint-30 cannot be resumed: no trainer_state.json/);
        const missing = runResume(root, "r3", "r9/checkpoint-5");
        assert.equal(missing.status, 1);
        assert.match(missing.stderr, /r9\/checkpoint-5 cannot be resumed: not found/);
        const noRun = runResume(root, "r3", "r9");
        assert.equal(noRun.status, 1);
        assert.match(noRun.stderr, /run r9 has no complete checkpoint/);
    });

    test("the listing names each checkpoint complete or why not", () => {
        const root = volume();
        const cmd = listCheckpointsCommand(root);
        const r = spawnSync(cmd[0], cmd.slice(1), { encoding: "utf8" });
        assert.equal(r.status, 0, r.stderr);
        assert.deepEqual(r.stdout.trim().split("\n"), [
            "r1/checkpoint-95\tincomplete: no trainer_state.json (written last)",
            "r1/checkpoint-90\tcomplete",
            "r2/checkpoint-40\tincomplete: missing model-00002-of-00002.safetensors of model.safetensors.index.json",
            "r2/checkpoint-30\tincomplete: no trainer_state.json (written last)",
            "r2/checkpoint-20\tcomplete",
            "r2/checkpoint-10\tcomplete",
        ]);
    });
});

const custom = (training: Record<string, unknown> = {}, model = "Qwen/Qwen3-1.7B") =>
    parseWithTestImages(
        {
            runId: "r2",
            target: { kind: "docker" },
            model: { name: model },
            training: { layout: "whitebox-colocate", gpusOnNode: 1, datasetSize: 8, program: "custom", command: ["python", "/app/train.py"], ...training },
            envs: { coding: { catalog: "coding" } },
        },
        "dev",
    );

describe("the checkpoint size rule", () => {
    test("bytes per parameter: fp32 + AdamW 12 (not training memory's 16), bf16 + AdamW 6, 8-bit bitsandbytes states", () => {
        assert.equal(checkpointBytesPerParameter("float32", "adamw_torch").perParameter, 12);
        assert.equal(checkpointBytesPerParameter("bfloat16", "adamw_torch_fused").perParameter, 6);
        assert.equal(BNB_8BIT_STATE_BYTES, 2.03125);
        assert.equal(checkpointBytesPerParameter("float32", "paged_adamw_8bit").perParameter, 4 + 2.03125);
        assert.equal(checkpointBytesPerParameter("float32", "adafactor").optimizer, 8);
    });

    test("a custom script: (keepLast + 1) full checkpoints and the final model, with the margin", () => {
        const need = checkpointNeed(custom({ optim: "adamw_torch" }))!;
        // 1.7e9 x (3 x 12 + 1 x 4) x 1.2 = 81.6e9 bytes = 76 Gi.
        assert.equal(need.runBytes, Math.ceil(1.7e9 * 40 * 1.2));
        assert.equal(need.runSize, "76Gi");
        assert.equal(checkpointNeed(custom({ checkpoints: { size: "200Gi", keepLast: 1 } }))!.writes.full, 2);
        assert.equal(checkpointNeed(custom({}, "org/unknown-model")), undefined);
        assert.equal(checkpointNeed(custom({ checkpoints: { size: "1Ti", parameters: 3e9 } }, "org/unknown-model"))!.parameters, 3e9);
    });

    test("a volume below one run is refused, naming the size, the arithmetic and the fix", () => {
        const problems = configProblems(() => custom({ checkpoints: { size: "50Gi" } }));
        assert.deepEqual(problems, [
            "training.checkpoints.size: 50Gi holds less than one run of Qwen/Qwen3-1.7B writes (76Gi: 1.7B parameters x (3 full checkpoints x 12 bytes [float32 weights 4 + adamw_torch: exp_avg + exp_avg_sq in float32 = 8 bytes] + 1 weights-only x 4) x 1.2 margin): raise it to at least 76Gi or lower training.checkpoints.keepLast",
        ]);
        assert.deepEqual(
            configProblems(() => custom({ checkpoints: { size: "76Gi" } })),
            [],
        );
        assert.deepEqual(
            configProblems(() => custom({ checkpoints: { size: "50Gi", dtype: "bfloat16" } })),
            [],
        );
    });

    /** The recipes' checkpoint sizes before the rule (100Gi default; the 32B recipe 2Ti). */
    const BEFORE_THE_RULE: Record<string, string> = {
        "mbpp-whitebox": "100Gi",
        "mbpp-whitebox-64": "100Gi",
        "wordle-whitebox": "100Gi",
        "opencode-blackbox": "100Gi",
        "opencode-blackbox-32b": "2Ti",
    };
    test("every recipe's volume holds what its program writes, sized by the rule, and never shrinks", () => {
        for (const [name, recipe] of Object.entries(RECIPES)) {
            // Multi-node, Harbor and black-box recipes run on Kubernetes only (the config refuses a black box on Docker).
            const kubernetesOnly =
                Boolean((recipe.training as { nodes?: number }).nodes) ||
                (HARBOR_RECIPE_NAMES as string[]).includes(name) ||
                recipe.training.layout === "blackbox";
            const target = kubernetesOnly ? { kind: "kubernetes", context: "c" } : { kind: "docker" };
            const c = parseWithTestImages({ recipe: name, runId: "r1", target }, "dev");
            const need = checkpointNeed(c)!;
            assert.ok(need, `${name}: parameter count known`);
            const size = quantityValue(c.training.checkpoints.size);
            assert.ok(size >= quantityValue(recipeCheckpointSize(c, 3)), `${name}: holds 3 runs by the rule`);
            // Never below what the recipe deployed with before the rule: a claim cannot shrink (the next up would be refused).
            assert.ok(size >= quantityValue(BEFORE_THE_RULE[name] ?? "0"), `${name}: not smaller than its earlier ${BEFORE_THE_RULE[name]}`);
        }
    });
});

describe("resume refusals", () => {
    const named = (program: string, layout = "whitebox-colocate") =>
        configProblems(() =>
            parseWithTestImages(
                {
                    runId: "r2",
                    target: { kind: "docker" },
                    model: { name: "Qwen/Qwen3-1.7B" },
                    training: { layout, gpusOnNode: 1, datasetSize: 8, program, resumeFromCheckpoint: true, checkpoints: { size: "1Ti", keepLast: 3 } },
                    envs: { coding: { catalog: "coding" } },
                },
                "dev",
            ),
        );

    test("a seeds script cannot resume: no save_steps (only the final step is saved) and no resume flag; nor keep N", () => {
        assert.deepEqual(named("train_coding_whitebox_eval"), [
            "training.resumeFromCheckpoint: train_coding_whitebox_eval.py cannot resume: it sets no save_steps, so transformers' default 500 saves only the final step of its run (DefaultFlowCallback saves at the end with save_strategy 'steps'; 42 steps in the MBPP recipe), and it takes no resume flag: set it to false (or run your own script, program 'custom', that saves checkpoints and takes --resume_from_checkpoint)",
            "training.checkpoints.keepLast: train_coding_whitebox_eval.py takes no --save_total_limit (it sets no save_steps, so transformers' default 500 saves only the final step of its run (DefaultFlowCallback saves at the end with save_strategy 'steps'; 42 steps in the MBPP recipe)): remove it",
        ]);
    });

    test("TRL's opencode script cannot resume: save_strategy='no'", () => {
        const p = configProblems(() =>
            parseWithTestImages(
                {
                    recipe: "opencode-blackbox",
                    runId: "r2",
                    target: { kind: "kubernetes", context: "c" },
                    training: { resumeFromCheckpoint: "r1" },
                },
                "dev",
            ),
        );
        assert.deepEqual(p, [
            `training.resumeFromCheckpoint: examples/async_grpo_opencode/opencode_hf_sandbox.py cannot resume: it hard-codes save_strategy="no" (no checkpoint at all; only trainer.push_to_hub() saves the final model, locally first), and it takes no resume flag: set it to false (or run your own script, program 'custom', that saves checkpoints and takes --resume_from_checkpoint)`,
        ]);
    });

    test("resuming without the volume, naming this run's own id, or a bad name is refused", () => {
        assert.deepEqual(
            configProblems(() => custom({ resumeFromCheckpoint: true, checkpoints: { enabled: false, size: "1Gi" } })),
            ["training.resumeFromCheckpoint: resuming needs the checkpoint volume: set training.checkpoints.enabled to true"],
        );
        assert.deepEqual(
            configProblems(() => custom({ resumeFromCheckpoint: "r2" })),
            ["training.resumeFromCheckpoint: 'r2' is this run's own id: set it to true (this run's latest complete checkpoint)"],
        );
        const bad = configProblems(() => custom({ resumeFromCheckpoint: "../r1" }));
        assert.equal(bad.length, 1);
        assert.match(bad[0], /training\.resumeFromCheckpoint/);
    });

    test("a custom script gets --save_total_limit (keepLast, default 2) and the resume wrapper with the named source", () => {
        const c = custom({ resumeFromCheckpoint: "r1/checkpoint-20", checkpoints: { size: "200Gi", keepLast: 1 } });
        const d = resolveTrainingNode(c, platformNames(c), { envUrls: { coding: "http://coding" } });
        const cmd = d.trainer.command!;
        assert.deepEqual(cmd.slice(3, 8), ["resume", "/checkpoints", "r2", "r1/checkpoint-20", "--"]);
        assert.equal(cmd[cmd.indexOf("--save_total_limit") + 1], "1");
        const plain = custom();
        const args = resolveTrainingNode(plain, platformNames(plain), { envUrls: { coding: "http://coding" } }).trainer.args;
        assert.equal(args[args.indexOf("--save_total_limit") + 1], "2");
    });
});

describe("npm run checkpoints: the way out without the Hub", () => {
    test("Kubernetes: a schema-valid helper pod on the claim (read-only unless pruning), and a listing that runs as printed", async () => {
        const { loadManifestSchemas, validateManifestStrict } = await import("../helpers/k8s-schema");
        const { loadRunStack } = await import("../../scripts/lib/load-stack");
        const { checkpointAccess } = await import("../../scripts/lib/checkpoints");
        await loadManifestSchemas();
        const { plan } = loadRunStack("staging");
        const ro = checkpointAccess(plan);
        assert.deepEqual(validateManifestStrict(ro.pod), []);
        assert.equal(ro.pod!.metadata.namespace, "arl-staging-training");
        assert.deepEqual(ro.pod!.spec.volumes, [{ name: "checkpoints", persistentVolumeClaim: { claimName: "checkpoints", readOnly: true } }]);
        assert.doesNotMatch(ro.script, /rm -rf/);
        const prune = checkpointAccess(plan, { prune: "r0" });
        assert.equal(prune.pod!.spec.containers[0].volumeMounts[0].readOnly, false);
        assert.match(prune.script, /exec arl-staging-checkpoints -- rm -rf \/checkpoints\/r0$/m);
        assert.match(ro.script, /cp arl-staging-checkpoints:\/checkpoints\/<runId>\/checkpoint-<step> /);
        // The printed exec line, run by a shell against a temp volume in place of the pod's mount.
        const exec = ro.script.split("\n# ")[1]!.split("\n").slice(1).join("\n");
        const inPod = exec.slice(exec.indexOf(" -- ") + 4).replace(/ \/checkpoints$/, "");
        const root = volume();
        const r = spawnSync("/bin/sh", ["-c", `${inPod} ${root}`], { encoding: "utf8" });
        assert.equal(r.status, 0, r.stderr);
        assert.match(r.stdout, /^r2\/checkpoint-20\tcomplete$/m);
    });

    test("Docker: the host directory, listed by the trainer image and copied with cp / scp", async () => {
        const { resolvePlatform } = await import("../../components/platform");
        const { checkpointAccess } = await import("../../scripts/lib/checkpoints");
        const c = custom({ checkpoints: { size: "100Gi" } });
        const a = checkpointAccess(resolvePlatform(c));
        assert.equal(a.pod, undefined);
        assert.match(a.script, /run --rm -v \/srv\/agent-rl\/arl-dev-checkpoints:\/checkpoints:ro --entrypoint python /);
        assert.match(a.script, /^cp -a \/srv\/agent-rl\/arl-dev-checkpoints\/<runId>\/checkpoint-<step> \.\/$/m);
    });
});
