/**
 * plan.md tells the truth: every stack and every recipe on both targets is planned, and each
 * plan.md is scanned for numbers that are not numbers (Infinity, NaN, undefined), capacity rows
 * the program's rule does not use, warnings about parts the stack does not deploy, pointers to
 * files or README sections that do not exist, and a prerequisites list that hides the preflight.
 * The dev stack is planned against the host its stack file names.
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import { ALL_RECIPE_NAMES, MULTI_NODE_RECIPE_NAMES, type PlatformConfig, RECIPES, type RecipeName, programFacts } from "../../components/config";
import { ENV_CATALOG, OPENENV_UPSTREAM } from "../../components/config/catalog";
import { grpoBatchRuleApplies } from "../../components/config/program-rules";
import { isClusterStack, knownStacks, type PlanSource, planClusterToDir, planToDir, REPO_ROOT } from "../../scripts/lib/plan";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-plan-truth-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Paths plan.md may name that live upstream, not in this repo: each program's source, each catalog env's app and Dockerfile. */
function upstreamPaths(): Set<string> {
    const out = new Set<string>();
    for (const recipe of ALL_RECIPE_NAMES) {
        const p = programFacts(RECIPES[recipe].training.program);
        if (p !== undefined) out.add(p.source.path);
    }
    for (const e of Object.values(ENV_CATALOG)) {
        out.add(e.upstream.app);
        out.add(e.upstream.dockerfile);
    }
    return out;
}

/**
 * Repo-relative paths a text names: a token with a slash that ends in a file name with an extension,
 * a Dockerfile, or a slash (a folder). Absolute paths (image paths such as /app/x.py) and tokens whose
 * first part has a dot (registries, URLs, label keys) are not repo pointers.
 */
export function namedPaths(text: string): string[] {
    const out = new Set<string>();
    const noUrls = text.replace(/[a-z][a-z0-9+.-]*:\/\/\S+/gi, " ");
    for (const m of noUrls.matchAll(
        /(?<![\w./:@<-])((?:[A-Za-z0-9_-][A-Za-z0-9_.-]*\/)+(?:[A-Za-z0-9_-][A-Za-z0-9_.-]*\.(?:md|ts|py|ya?ml|json|sh|txt|mtail)|Dockerfile)?)(?![\w/<])/g,
    )) {
        const p = m[1];
        if (p.split("/")[0].includes(".")) continue;
        if (!p.endsWith("/") && !/(\.[a-z]+|Dockerfile)$/.test(p)) continue;
        out.add(p);
    }
    return [...out];
}

/** README "Section" pointers. */
export function readmeSections(text: string): string[] {
    return [...new Set([...text.matchAll(/README "([^"]+)"/g)].map((m) => m[1]))];
}

const README_HEADINGS = new Set(
    fs
        .readFileSync(path.join(REPO_ROOT, "README.md"), "utf8")
        .split("\n")
        .filter((l) => /^#{1,6} /.test(l))
        .map((l) => l.replace(/^#+ /, "").trim()),
);

/** Every problem of one plan.md, for the plan's config. */
export function planProblems(md: string, outDir: string, config: PlatformConfig | undefined): string[] {
    const problems: string[] = [];
    for (const bad of ["Infinity", "NaN", "undefined", "[object Object]"]) {
        const at = md.split("\n").find((l) => l.includes(bad));
        if (at !== undefined) problems.push(`holds ${bad}: ${at.slice(0, 200)}`);
    }
    const upstream = upstreamPaths();
    for (const p of namedPaths(md)) {
        if (upstream.has(p)) continue;
        if (!fs.existsSync(path.join(REPO_ROOT, p)) && !fs.existsSync(path.join(outDir, p)))
            problems.push(`names ${p}, which is neither in the repo nor beside plan.md`);
    }
    for (const s of readmeSections(md)) if (!README_HEADINGS.has(s)) problems.push(`points at README "${s}", which README.md has no heading for`);
    if (config === undefined) return problems;
    const hasBatchRow = /^\| generation batch \|/m.test(md);
    if (hasBatchRow !== grpoBatchRuleApplies(config.training))
        problems.push(
            `${hasBatchRow ? "has" : "lacks"} the generation batch row, but TRL's batch rule ${grpoBatchRuleApplies(config.training) ? "binds" : "does not bind"} layout ${config.training.layout}`,
        );
    const warnings = md.includes("## Warnings") ? md.split("## Warnings")[1].split("\n## ")[0] : "";
    if (config.envs.length === 0 && /env sessions|env server/.test(warnings)) problems.push("warns about env sessions in a stack with no env");
    if (!config.envs.some((e) => !e.external) && /changing an env server/.test(warnings))
        problems.push("warns about env restarts in a stack that deploys no env");
    if (md.includes("## Prerequisites")) {
        const section = md.split("## Prerequisites")[1].split("\n## ")[0];
        if (!section.includes("npm run preflight")) problems.push("the prerequisites do not name npm run preflight, the live check");
        if (/Nothing checks these/.test(section)) problems.push("the prerequisites say nothing checks them");
    }
    return problems;
}

/** Every plan the project documents: the run stacks, the cluster stack, every recipe on both targets. */
function sources(): Array<{ name: string; source: PlanSource; override?: Record<string, unknown> }> {
    const out: Array<{ name: string; source: PlanSource; override?: Record<string, unknown> }> = knownStacks().map((stack) => ({
        name: `stack ${stack}`,
        source: { stack },
    }));
    for (const recipe of ALL_RECIPE_NAMES) {
        for (const target of ["kubernetes", "docker"] as const) {
            // Multi-node recipes are refused on Docker (one host), and so is a black box (the docker sandbox pool and hosted
            // sandboxes): there is no plan.md to read.
            if (target === "docker" && (MULTI_NODE_RECIPE_NAMES as RecipeName[]).includes(recipe)) continue;
            if (target === "docker" && RECIPES[recipe].training.layout === "blackbox") continue;
            out.push({ name: `recipe ${recipe} on ${target}`, source: { recipe, target } });
        }
    }
    return out;
}

describe("plan.md tells the truth, for every stack and recipe on both targets", () => {
    for (const { name, source, override } of sources()) {
        test(name, async () => {
            const outDir = path.join(tmp, name.replace(/\W+/g, "-"));
            let config: PlatformConfig | undefined;
            if ("stack" in source && isClusterStack(source)) await planClusterToDir(source, { outDir });
            else config = (await planToDir(source, { outDir, platformOverride: override })).plan.config;
            const md = fs.readFileSync(path.join(outDir, "plan.md"), "utf8");
            assert.deepEqual(planProblems(md, outDir, config), []);
        });
    }

    test("the black box: no batch row, a note saying why, no 0.5 prompts; the checkpoint volume it leaves empty says so", async () => {
        const outDir = path.join(tmp, "blackbox-truth");
        await planToDir({ recipe: "opencode-blackbox", target: "kubernetes" }, { outDir });
        const md = fs.readFileSync(path.join(outDir, "plan.md"), "utf8");
        assert.doesNotMatch(md, /prompts per generation/);
        assert.match(md, /No batch row: TRL's rule that the generation and eval batches divide by numGenerations \(GRPOConfig\) does not bind layout blackbox/);
        assert.match(
            md,
            /\| one run needs \| nothing: the program saves no checkpoint and the stack sets no training\.hubRepoId, so this run leaves the volume empty; with training\.hubRepoId set, the push's local copy needs 37Gi = 8\.2B parameters x \(0 full checkpoints .* \+ 1 weights-only x 4\) x 1\.2 margin; the volume holds 3 such run\(s\) \|/,
        );
        assert.match(
            md,
            /sandboxes\.image: registry\.example\.com\/agent-rl\/sandbox:plan is the example registry .*: npm run images -- <stack> --to <registry>\/<path> builds sandbox \(python\/Dockerfile; docs\/guides\/images\.md\)/,
        );
        assert.match(
            md,
            /images\.trainer: .*: npm run images -- <stack> --to <registry>\/<path> builds trainer-blackbox \(trainer\/blackbox\/Dockerfile; docs\/guides\/images\.md\)/,
        );
        assert.match(md, /`npm run preflight -- <stack>` checks them against the live target before `pulumi up`/);
    });

    test("a white-box plan keeps its batch rows and names the env image's app upstream", async () => {
        const outDir = path.join(tmp, "whitebox-truth");
        await planToDir({ recipe: "mbpp-whitebox", target: "kubernetes" }, { outDir });
        const md = fs.readFileSync(path.join(outDir, "plan.md"), "utf8");
        assert.match(
            md,
            /\| generation batch \| perDeviceTrainBatchSize 8 x numProcesses 1 x stepsPerGeneration 2 \| 16 \| divisible by numGenerations 4: 4 prompts per generation \|/,
        );
        assert.ok(md.includes(`(${OPENENV_UPSTREAM.repo} envs/coding_env/server/app.py sets no session_timeout)`));
    });

    test("the scan can fail: a false row, Infinity, a missing path, an unknown README section, a hidden preflight", () => {
        const blackbox = { training: { layout: "blackbox" }, envs: [] } as unknown as PlatformConfig;
        const md = [
            "| generation batch | x | 4 | divisible by numGenerations 8: 0.5 prompts per generation |",
            'the volume holds Infinity such run(s); build trainer/nothing/Dockerfile (trainer/README.md); README "No such section"',
            "## Prerequisites this stack does not create",
            "Nothing checks these before `pulumi up`.",
            "## Warnings",
            "- x takes no flag for perDeviceEvalBatchSize: the env sessions are sized for the stack's",
            "",
        ].join("\n");
        assert.deepEqual(planProblems(md, tmp, blackbox), [
            'holds Infinity: the volume holds Infinity such run(s); build trainer/nothing/Dockerfile (trainer/README.md); README "No such section"',
            "names trainer/nothing/Dockerfile, which is neither in the repo nor beside plan.md",
            'points at README "No such section", which README.md has no heading for',
            "has the generation batch row, but TRL's batch rule does not bind layout blackbox",
            "warns about env sessions in a stack with no env",
            "the prerequisites do not name npm run preflight, the live check",
            "the prerequisites say nothing checks them",
        ]);
    });

    test("the path reader: repo pointers only (not image paths, registries, URLs, labels or models)", () => {
        assert.deepEqual(
            namedPaths(
                "build trainer/whitebox/Dockerfile (trainer/README.md); policy/ and policy/config.prod.json; /app/train.py; registry.example.com/a/b.py; https://x.io/y/z.yaml; Qwen/Qwen3-8B; /checkpoints/<runId>; agentrl.dev/run=demo",
            ).sort(),
            ["policy/", "policy/config.prod.json", "trainer/README.md", "trainer/whitebox/Dockerfile"],
        );
    });
});

/** The host a stack file's header names: "Fits one GPU host with N GPU(s), N CPUs and N GiB of memory". */
export function namedHost(stackFileText: string): { gpus: number; cpus: number; memoryGiB: number } | undefined {
    const m = /Fits one GPU host with (\d+) GPUs?, (\d+) CPUs and (\d+) GiB of memory/.exec(stackFileText.replace(/\n#\s*/g, " "));
    return m ? { gpus: Number(m[1]), cpus: Number(m[2]), memoryGiB: Number(m[3]) } : undefined;
}

/** plan.md's Docker host totals: the total row and the GPUs line. */
export function dockerHostTotals(md: string): { containers: number; cpus: number; memoryGiB: number; gpus: number } {
    const total = /^\| \*\*total\*\* \| (\d+) \| {2}\| {2}\| \*\*([\d.]+)\*\* \| \*\*([\d.]+) (GiB|MiB)\*\* \|$/m.exec(md);
    assert.ok(total, "plan.md has the Docker host total row");
    const gpus = /^GPUs: (none|(\d+) \(host devices)/m.exec(md);
    assert.ok(gpus, "plan.md names the GPUs the stack takes");
    return {
        containers: Number(total[1]),
        cpus: Number(total[2]),
        memoryGiB: Number(total[3]) / (total[4] === "MiB" ? 1024 : 1),
        gpus: gpus[1] === "none" ? 0 : Number(gpus[2]),
    };
}

/** What the named host keeps for itself (kernel, dockerd, page cache): the containers' memory limits must leave it. */
const HOST_OWN_GIB = 8;

describe("the dev stack plans within the host it names", () => {
    test("plan.md's Docker host totals fit the host in stacks/Pulumi.dev.yaml's header, which docs/guides/dev-host.md names too", async () => {
        const text = fs.readFileSync(path.join(REPO_ROOT, "stacks", "Pulumi.dev.yaml"), "utf8");
        const host = namedHost(text);
        assert.ok(host, "stacks/Pulumi.dev.yaml names the host it fits");
        const guide = fs.readFileSync(path.join(REPO_ROOT, "docs", "guides", "dev-host.md"), "utf8");
        assert.ok(
            guide.includes(`${host.gpus} GPU${host.gpus === 1 ? "" : "s"}, ${host.cpus} CPUs and ${host.memoryGiB} GiB of memory`),
            "the guide names the same host",
        );
        const outDir = path.join(tmp, "dev-host");
        await planToDir({ stack: "dev" }, { outDir });
        const t = dockerHostTotals(fs.readFileSync(path.join(outDir, "plan.md"), "utf8"));
        assert.ok(t.gpus <= host.gpus, `${t.gpus} GPUs planned, the host has ${host.gpus}`);
        assert.ok(t.cpus <= host.cpus, `${t.cpus} CPUs of limits planned, the host has ${host.cpus}`);
        assert.ok(
            t.memoryGiB <= host.memoryGiB - HOST_OWN_GIB,
            `${t.memoryGiB} GiB of memory limits planned: the host has ${host.memoryGiB} GiB and keeps ${HOST_OWN_GIB} for itself`,
        );
    });

    test("the totals reader and the host reader read what plan.md and the header say (and fail on the old dev plan)", () => {
        const old = ["| **total** | 20 |  |  | **42.6** | **132.3 GiB** |", "", "GPUs: 1 (host devices 0). These are Docker limits"].join("\n");
        assert.deepEqual(dockerHostTotals(old), { containers: 20, cpus: 42.6, memoryGiB: 132.3, gpus: 1 });
        assert.deepEqual(namedHost("# Fits one GPU host with 1 GPU, 16 CPUs and 64 GiB\n# of memory (x)"), { gpus: 1, cpus: 16, memoryGiB: 64 });
        const host = { gpus: 1, cpus: 16, memoryGiB: 64 };
        assert.ok(dockerHostTotals(old).memoryGiB > host.memoryGiB - HOST_OWN_GIB, "the old dev plan does not fit");
    });
});
