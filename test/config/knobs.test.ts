/**
 * Every setting a program takes is reachable (issue 43 point 2; docs/guides/knobs.md): the facts walk
 * (test/helpers/knobs-walk.ts) over every named program, the walk failing when a mapping is broken, the
 * knobs on a custom script, and training.extraArgs checked against the program's facts (type, choices,
 * store_true), with the messages' text. Run: npm test -- --no-setup test/config/knobs.test.ts
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { deepMerge, PROGRAMS, programLabel, type ProgramFacts } from "../../components/config";
import { extraArgProblems } from "../../components/config/extra-args";
import { ARG_SOURCES, KNOB_FIELDS, KNOBS } from "../../components/config/program-settings";
import * as fs from "node:fs";
import * as path from "node:path";
import { programArgs } from "../../components/training/program-args";
import { trlParserArgs } from "../../components/training/trl-args";
import { configProblems, parseWithTestImages } from "../helpers/config";
import { factsWalkProblems, type Render } from "../helpers/knobs-walk";

const K8S = { runId: "r1", target: { kind: "kubernetes", context: "test" } };
const problems = (raw: unknown) => configProblems(() => parseWithTestImages(raw, "test"));
const programs = PROGRAMS as unknown as Record<string, ProgramFacts>;

describe("the facts walk: every flag of every program is reachable", () => {
    test("every mapped flag has a schema field and renders; every other flag passes through training.extraArgs", () => {
        assert.deepEqual(factsWalkProblems(programs, ARG_SOURCES, programArgs), []);
    });

    test("the walk fails on a mapped field the schema lacks", () => {
        const sources = { ...ARG_SOURCES, learningRate: { setting: "training.learningRat" } };
        const got = factsWalkProblems(programs, sources, programArgs);
        assert.deepEqual(got, [
            "train_coding_whitebox_eval: --learning-rate is mapped from training.learningRat, which is no field of the schema",
            "opencode_hf_sandbox: --learning-rate is mapped from training.learningRat, which is no field of the schema",
        ]);
    });

    test("the walk fails on a mapped flag the renderer drops", () => {
        const dropsTemperature: Render = (p, c, l) => {
            const args = programArgs(p, c, l);
            const at = args.indexOf("--temperature");
            return at < 0 ? args : [...args.slice(0, at), ...args.slice(at + 2)];
        };
        assert.deepEqual(factsWalkProblems(programs, ARG_SOURCES, dropsTemperature), [
            "opencode_hf_sandbox: training.temperature set, but --temperature is not on its command line",
        ]);
    });

    test("the walk fails on a flag mapped from a key nothing feeds (extraArgs refuses a mapped flag, so nothing could set it)", () => {
        const eval_ = programs.train_coding_whitebox_eval;
        const broken = { train_coding_whitebox_eval: { ...eval_, args: { ...eval_.args, evalSteps: "--eval-steps" } } as ProgramFacts };
        assert.deepEqual(factsWalkProblems(broken, ARG_SOURCES, programArgs), [
            "train_coding_whitebox_eval: --eval-steps is mapped from 'evalSteps', which no setting or platform value feeds (ARG_SOURCES): nothing can set it",
        ]);
    });
});

describe("the published knobs render on every program that takes them", () => {
    const links = { outputDir: "/checkpoints/r1", vllmUrl: "VLLM", envUrls: { coding: "ENV" }, sandboxVllmUrl: "SBX" };
    const after = (args: string[], flag: string) => (args.includes(flag) ? args[args.indexOf(flag) + 1] : undefined);

    test("training.learningRate: --learning-rate on the MBPP eval seed and on opencode", () => {
        for (const recipe of ["mbpp-whitebox", "opencode-blackbox"]) {
            const c = parseWithTestImages({ recipe, ...K8S, training: { learningRate: 1e-6 } }, "test");
            assert.equal(after(programArgs(programs[c.training.program], c, links), "--learning-rate"), "0.000001", recipe);
        }
    });

    test("opencode: temperature, seed and max staleness as its own flags", () => {
        const c = parseWithTestImages({ recipe: "opencode-blackbox", ...K8S, training: { temperature: 0.8, seed: 11, maxStaleness: 1 } }, "test");
        const args = programArgs(programs.opencode_hf_sandbox, c, links);
        assert.deepEqual([after(args, "--temperature"), after(args, "--seed"), after(args, "--max-staleness")], ["0.8", "11", "1"]);
    });

    test("a custom script gets every knob as its TRL field (warmup included); max_staleness only in the black box", () => {
        const knobs = { learningRate: 2e-6, warmupSteps: 0.1, temperature: 0.9, lrSchedulerType: "cosine", numEpochs: 2, seed: 5, maxCompletionLength: 512 };
        const raw = { recipe: "mbpp-whitebox", ...K8S, training: { program: "custom", command: ["python", "/app/train.py"], evalSize: 0, ...knobs } };
        const args = trlParserArgs(parseWithTestImages(raw, "test"), "/out", "VLLM");
        assert.deepEqual(
            ["--learning_rate", "--warmup_steps", "--temperature", "--lr_scheduler_type", "--num_train_epochs", "--seed", "--max_completion_length"].map((f) =>
                after(args, f),
            ),
            ["0.000002", "0.1", "0.9", "cosine", "2", "5", "512"],
        );
        assert.deepEqual(problems(deepMerge(raw, { training: { maxStaleness: 2 } })), [
            "training.maxStaleness: a custom script gets it as --max_staleness, a field of TRL's AsyncGRPOConfig (layout blackbox); the whitebox-colocate layout's GRPOConfig has none: remove it",
        ]);
    });

    test("a knob the program has no flag for is refused, naming the program and its flags (never dropped)", () => {
        const p = programs.train_coding_whitebox;
        assert.deepEqual(problems({ recipe: "mbpp-whitebox-64", ...K8S, training: { learningRate: 1e-6, warmupSteps: 10 } }), [
            `training.learningRate: ${programLabel(p)} has no flag for it (its flags: ${Object.keys(p.flags).join(" ")}): remove it: the program uses its own value (its command line is known from published examples only)`,
            `training.warmupSteps: ${programLabel(p)} has no flag for it (its flags: ${Object.keys(p.flags).join(" ")}): remove it: the program uses its own value (its command line is known from published examples only)`,
        ]);
    });

    test("warmupSteps: whole steps or a fraction below 1", () => {
        assert.deepEqual(problems({ recipe: "mbpp-whitebox", ...K8S, training: { program: "custom", command: ["python", "/t.py"], warmupSteps: 1.5 } }), [
            "training.warmupSteps: must be a whole number of steps or a fraction of the run below 1, such as 0.1",
        ]);
    });
});

describe("training.extraArgs is checked against the program's facts", () => {
    const p = programs.train_coding_whitebox_eval;
    const label = programLabel(p);
    const flags = Object.keys(p.flags).join(" ");
    const extra = (extraArgs: string[]) => problems({ recipe: "mbpp-whitebox", ...K8S, training: { extraArgs } });

    test("the program's own unmapped flags pass, with values of their types", () => {
        assert.deepEqual(extra(["--eval-steps", "10", "--num-generations-eval", "8", "--logging-steps=5"]), []);
    });

    test("a flag the platform renders names the setting to use instead", () => {
        assert.deepEqual(extra(["--learning-rate", "1e-6", "--vllm-server-url", "http://x"]), [
            "training.extraArgs: --learning-rate is rendered by the platform from training.learningRate: set training.learningRate instead of passing --learning-rate",
            "training.extraArgs: --vllm-server-url is rendered by the platform (the URL of the stack's vLLM server (layout whitebox-server)): remove it",
        ]);
    });

    test("type, choices, store_true, missing values, strays, repeats and misspellings: each its own line", () => {
        assert.deepEqual(extra(["--eval-steps", "five", "--num-generations-eval", "2.5", "--logging-steps", "--eval-step", "3", "oops", "--eval-steps", "4"]), [
            "training.extraArgs: --eval-steps takes a whole number (argparse type=int), got 'five'",
            "training.extraArgs: --num-generations-eval takes a whole number (argparse type=int), got '2.5'",
            "training.extraArgs: --logging-steps takes a value: add it after --logging-steps",
            `training.extraArgs: --eval-step is not a flag of ${label} (its flags: ${flags}): did you mean --eval-steps?`,
            "training.extraArgs: 'oops' is not a flag and follows no flag that takes a value: each entry is a --flag or the value after one",
            "training.extraArgs: --eval-steps is given twice (argparse keeps the last): keep one",
        ]);
    });

    test("a switch takes no value; a misspelled flag gets its near miss", () => {
        const o = programs.opencode_hf_sandbox;
        const oc = (extraArgs: string[]) => problems({ recipe: "opencode-blackbox", ...K8S, training: { extraArgs } });
        assert.deepEqual(oc(["--sandbox-flavor", "cpu-upgrade"]), []);
        assert.deepEqual(oc(["--gradient-checkpointing=true"]), [
            "training.extraArgs: --gradient-checkpointing is rendered by the platform from training.gradientCheckpointing: set training.gradientCheckpointing instead of passing --gradient-checkpointing",
            "training.extraArgs: --gradient-checkpointing is a switch (argparse store_true) and takes no value: pass '--gradient-checkpointing' alone, or leave it out for false",
        ]);
        assert.deepEqual(oc(["--sandbox-flavr", "x"]), [
            `training.extraArgs: --sandbox-flavr is not a flag of ${programLabel(o)} (its flags: ${Object.keys(o.flags).join(" ")}): did you mean --sandbox-flavor?`,
        ]);
    });
});

describe("extraArgProblems: argparse's reading of types and choices", () => {
    /** A program made up for the check (no real program has an unmapped float or choices flag). */
    const made: ProgramFacts = {
        ...programs.train_coding_whitebox_eval,
        flags: { "--beta": { action: "store", type: "float" }, "--loss": { action: "store", type: "str", choices: ["grpo", "dapo"] } },
        args: {},
    };
    test("float: Python's float() syntax (exponents, a leading dot, inf) passes; words do not", () => {
        assert.deepEqual(extraArgProblems(made, "made.py", ["--beta", "1e-3", "--beta=.5"]), [
            "training.extraArgs: --beta is given twice (argparse keeps the last): keep one",
        ]);
        assert.deepEqual(extraArgProblems(made, "made.py", ["--beta", "inf"]), []);
        assert.deepEqual(extraArgProblems(made, "made.py", ["--beta", "0.1.2"]), [
            "training.extraArgs: --beta takes a number (argparse type=float), got '0.1.2'",
        ]);
    });
    test("choices: one of them", () => {
        assert.deepEqual(extraArgProblems(made, "made.py", ["--loss", "dapo"]), []);
        assert.deepEqual(extraArgProblems(made, "made.py", ["--loss", "ppo"]), ["training.extraArgs: --loss takes one of grpo, dapo, got 'ppo'"]);
    });
});

describe("docs/guides/knobs.md", () => {
    test("its knob table says, for every knob and program, the flag the facts map (or refused) and a custom script's TRL flag", () => {
        const md = fs.readFileSync(path.join(__dirname, "..", "..", "docs", "guides", "knobs.md"), "utf8");
        const header = md.split("\n").find((l) => l.startsWith("| setting | MBPP eval seed"))!;
        const columns = header
            .split("|")
            .slice(2, -2)
            .map((c) => /`(\w+)`/.exec(c)![1]);
        assert.deepEqual(columns, Object.keys(programs));
        for (const f of KNOB_FIELDS) {
            const row = md.split("\n").find((l) => l.startsWith(`| \`training.${f}\` |`));
            assert.ok(row, `a row for training.${f}`);
            const cells = row
                .split("|")
                .slice(2, -1)
                .map((c) => c.trim());
            columns.forEach((name, i) => {
                const flag = (programs[name].args as Record<string, string | undefined>)[f];
                if (flag === undefined) assert.equal(cells[i], "refused", `${f} on ${name}`);
                else assert.ok(cells[i].startsWith(`\`${flag}\``), `${f} on ${name}: ${cells[i]}`);
            });
            assert.ok(cells[columns.length].startsWith(`\`${KNOBS[f].trl}\``), `${f} on a custom script: ${cells[columns.length]}`);
        }
    });
});
