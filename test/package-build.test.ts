/**
 * The library as a plain-Node consumer gets it: `npm run build` (scripts/build.sh) compiles
 * components/ to CommonJS with declarations, and `require("agent-rl-infra")` through package.json
 * "exports" gives every component. Run: node --import tsx --test test/package-build.test.ts
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, test } from "node:test";

const REPO = path.resolve(__dirname, "..");
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
