/**
 * The library as a plain-Node consumer gets it: `npm run build` (scripts/build.sh) compiles
 * components/ to CommonJS with declarations, and `require("agent-rl-infra")` through package.json
 * "exports" gives every component; and `npm pack`'s tarball installs into a fresh project (offline, from
 * the npm cache: helpers/consumer.ts) that type-checks against it under moduleResolution node
 * (typesVersions), node16 and bundler, and runs it. Run: node --import tsx --test test/tooling/package-build.test.ts
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, test } from "node:test";
import { ALL_RECIPE_NAMES } from "../../components/config";
import { writeConsumerProject } from "../helpers/consumer";
import { scaled } from "../helpers/waits";

const REPO = path.resolve(__dirname, "..", "..");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-pkg-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

test("the built package loads in plain Node through its exports, with declarations, and every component is there", () => {
    const build = spawnSync("bash", [path.join(REPO, "scripts", "build.sh")], { cwd: REPO, encoding: "utf8" });
    assert.equal(build.status, 0, build.stderr);
    for (const f of ["dist/components/index.js", "dist/components/index.d.ts", "dist/components/training/gpu/nccl_check.py"])
        assert.ok(fs.existsSync(path.join(REPO, f)), f);
    // A consumer project: node_modules/agent-rl-infra is this repository (as `npm install <path>` links it).
    const consumer = path.join(tmp, "consumer");
    fs.mkdirSync(path.join(consumer, "node_modules"), { recursive: true });
    fs.symlinkSync(REPO, path.join(consumer, "node_modules", "agent-rl-infra"), "dir");
    const script = `
        const lib = require("agent-rl-infra");
        const config = require("agent-rl-infra/config");
        const platform = require("agent-rl-infra/platform");
        const want = ["TrainingNode", "resolveTrainingNode", "EnvSpace", "resolveEnvSpace", "VllmIngress", "resolveVllmIngress", "SandboxPool", "resolveSandboxPool", "Platform", "resolvePlatform", "parsePlatformConfig", "RECIPES"];
        const missing = want.filter((k) => typeof lib[k] === "undefined");
        if (missing.length) { console.error("missing: " + missing.join(", ")); process.exit(1); }
        if (typeof config.parsePlatformConfig !== "function" || typeof platform.Platform !== "function") process.exit(2);
        console.log(require.resolve("agent-rl-infra"));
    `;
    const run = spawnSync(process.execPath, ["-e", script], { cwd: consumer, encoding: "utf8" });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(
        fs.realpathSync(run.stdout.trim()),
        path.join(REPO, "dist", "components", "index.js"),
        "resolved through exports to the compiled file, not the .ts source",
    );
    const nccl = spawnSync(
        process.execPath,
        ["-e", `console.log(require(${JSON.stringify(path.join(REPO, "dist/components/training/nccl-check.js"))}).ncclCheckSource().length)`],
        { encoding: "utf8" },
    );
    assert.equal(nccl.status, 0, nccl.stderr);
    assert.ok(Number(nccl.stdout) > 1000, "the compiled module reads the shipped check script");
});

/** What a consumer writes: the root, the two subpaths, values and types from each. */
const CONSUMER_SOURCE = `import * as pulumi from "@pulumi/pulumi";
import { Platform, resolvePlatform, TrainingNode } from "agent-rl-infra";
import { parsePlatformConfig, type PlatformConfig, RECIPES } from "agent-rl-infra/config";
import { dockerHostNeeds, type DockerHostNeeds } from "agent-rl-infra/platform";

const config: PlatformConfig = parsePlatformConfig(
    { recipe: "mbpp-whitebox", runId: "r1", target: { kind: "docker" }, images: { trainer: "registry.test/trainer:1" } },
    pulumi.getStack() || "dev",
);
const needs: DockerHostNeeds | undefined = dockerHostNeeds(resolvePlatform(config, { hfToken: false }));
const recipes: string[] = Object.keys(RECIPES);
export const summary = { containers: needs?.containers, recipes: recipes.length, platform: typeof Platform, node: typeof TrainingNode };
`;

/**
 * tsconfigs of a consumer project: strict, no skipLibCheck (the library's declarations are checked
 * too). esModuleInterop: zod 4's own declarations need it under moduleResolution node (zod alone
 * fails there with TS1259 without it).
 */
const RESOLUTIONS = {
    node: { module: "commonjs", moduleResolution: "node", esModuleInterop: true },
    node16: { module: "node16", moduleResolution: "node16" },
    bundler: { module: "esnext", moduleResolution: "bundler" },
} as const;

test("npm pack: the tarball installs into a fresh project offline, type-checks under node, node16 and bundler, and runs", {
    timeout: scaled(10 * 60_000),
}, () => {
    const npm = (args: string[], cwd: string) =>
        spawnSync("npm", args, { cwd, encoding: "utf8", env: { ...process.env, npm_config_update_notifier: "false" } });
    const packDir = path.join(tmp, "pack");
    fs.mkdirSync(packDir);
    // prepack builds dist/ (scripts/build.sh), so a bare npm pack ships the library.
    const pack = npm(["pack", "--pack-destination", packDir, "--json"], REPO);
    assert.equal(pack.status, 0, pack.stderr);
    const [info] = JSON.parse(pack.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    const files = info!.files.map((f) => f.path);
    for (const f of [
        "package.json",
        "README.md",
        "dist/components/index.js",
        "dist/components/index.d.ts",
        "dist/components/config/index.d.ts",
        "dist/components/platform/index.d.ts",
        "dist/components/training/gpu/nccl_check.py",
        "dist/components/env/capacity_responder.py",
        "dist/components/training/role_runner.py",
        "dist/components/observability/session_counter.py",
        "dist/components/shared/metrics_http.py",
        "schema/stack-config.schema.json",
    ])
        assert.ok(files.includes(f), `the tarball holds ${f}`);
    assert.deepEqual(
        files.filter((f) => !f.startsWith("dist/components/") && f !== "package.json" && f !== "README.md" && f !== "schema/stack-config.schema.json"),
        [],
        "nothing but the built library (no tests, scripts, stacks or the stack program)",
    );
    const pkg = JSON.parse(fs.readFileSync(path.join(REPO, "package.json"), "utf8"));
    assert.equal(pkg.main, "./dist/components/index.js", "main is the library; Pulumi.yaml names the program");
    assert.match(fs.readFileSync(path.join(REPO, "Pulumi.yaml"), "utf8"), /^main: index\.ts$/m);

    const consumer = path.join(tmp, "fresh");
    writeConsumerProject(REPO, path.join(packDir, info!.filename), consumer);
    const install = npm(["ci", "--offline", "--ignore-scripts", "--no-audit", "--no-fund"], consumer);
    assert.equal(install.status, 0, `npm ci --offline: ${install.stderr}`);
    assert.ok(!fs.lstatSync(path.join(consumer, "node_modules", "agent-rl-infra")).isSymbolicLink(), "installed from the tarball, not linked");
    fs.writeFileSync(path.join(consumer, "index.ts"), CONSUMER_SOURCE);
    const tsc = path.join(consumer, "node_modules", "typescript", "bin", "tsc");
    for (const [name, options] of Object.entries(RESOLUTIONS)) {
        const file = path.join(consumer, `tsconfig.${name}.json`);
        const compilerOptions = { strict: true, target: "es2022", types: ["node"], noEmit: true, ...options };
        fs.writeFileSync(file, JSON.stringify({ compilerOptions, files: ["index.ts"] }));
        const check = spawnSync(process.execPath, [tsc, "-p", file], { cwd: consumer, encoding: "utf8" });
        assert.equal(check.status, 0, `moduleResolution ${name}: ${check.stdout}${check.stderr}`);
    }
    // And it runs: the compiled library with the consumer's own dependencies.
    const emit = spawnSync(process.execPath, [tsc, "-p", path.join(consumer, "tsconfig.node.json"), "--noEmit", "false", "--outDir", "bin"], {
        cwd: consumer,
        encoding: "utf8",
    });
    assert.equal(emit.status, 0, emit.stdout);
    const run = spawnSync(process.execPath, ["-e", "console.log(JSON.stringify(require('./bin/index.js').summary))"], { cwd: consumer, encoding: "utf8" });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout), { containers: 20, recipes: ALL_RECIPE_NAMES.length, platform: "function", node: "function" });
});
