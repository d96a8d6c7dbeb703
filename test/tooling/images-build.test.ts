/**
 * The image step for real: a dockerd (test/helpers/dockerd.ts) and Debian's docker-registry with
 * htpasswd auth on the daemon's loopback, the lock step and the build step run against them
 * (test/helpers/images-driver.ts, inside the daemon's network namespace), and every image a recipe
 * needs built from the repository's own Dockerfiles: the white-box trainer and the sandbox image for
 * the dev stack; then docs/guides/zero-to-up.md's commands 2 to 5 as the page writes them (the
 * registry host and credentials the test's), as CLI processes in a scratch copy of this repository
 * holding the page's stack file: `npm run images -- lock` fills the copy's images/lock.json,
 * the registry-auth.json line, `npm run images -- <stack> --to ...` builds and pushes the black-box
 * trainer (the sandbox image is the white-box run's: same inputs) and names both in the stack file by
 * digest, and `npm run plan -- <stack>` plans them by digest. The same stack with observability on
 * builds mtail alone (the other two are in the registry already). Each image is pulled back by digest.
 *
 * Stand-ins, named:
 *   - the base images (test/images/standin-base.sh, Debian bookworm minbase + python3), served by a
 *     STAND-IN pull-through mirror (a second docker-registry, anonymous, on the daemon's loopback) under
 *     the upstream names the pins give, reached as a user reaches theirs, through
 *     AGENTRL_BASE_REGISTRY_MIRRORS: its trainer variant (git, a stub vllm 0.29.0 distribution) as
 *     vllm/vllm-openai:v0.29.0 and debian:bookworm-slim; its sandbox variant (Debian's fastapi,
 *     uvicorn, httpx and a stand-in opencode) as ghcr.io/huggingface/openenv-opencode-sandbox:sha-86a180e.
 *     None of them can be pulled here.
 *   - the seed scripts and TRL's opencode_hf_sandbox.py: stand-in files served where the Hub and
 *     raw.githubusercontent.com serve them (the TRL one holds just the lines trainer/use_agent_sandbox.py
 *     changes), with the Hub's commit lists.
 *   - the packed-attention kernel (kernels-community/flash-attn3): a STAND-IN build variant (STANDIN_KERNEL:
 *     a Python __init__.py and a metadata.json of the shape kernels 0.18.3 parses, no CUDA code) served as the
 *     Hub serves a kernel repository: its v1 commit list (the lock step), its tree listing and files at the
 *     commit (trainer/fetch_kernel.py). The trainer base's stand-in torch (test/images/standin-base.sh: the
 *     version facts of torch 2.11 + CUDA 13.0 only) is what kernels' variant resolver reads.
 *   - OpenEnv: a git repository made here (STANDIN_OPENENV) under OpenEnv's package names (openenv at
 *     the root, openenv-opencode-env in envs/opencode_env) holding only the modules the Dockerfile's
 *     import check names, committed, served over git's smart HTTP as GitHub serves it
 *     (test/images/serve.py); the test's pins (and the scratch copy's images/trainer-blackbox.pins.json)
 *     name its commit instead of OpenEnv's 86a180e, so the Dockerfile's pip install from git at a full
 *     commit runs for real.
 *   - the trainer lock (trainer/requirements.txt, the heavy pip set): for the white-box trainer an
 *     empty stand-in lock; for the black-box trainer (and as the scratch copy's trainer/requirements.txt)
 *     the part of the real lock its own checks import (k8s-agent-sandbox, kernels and what they need,
 *     setuptools for the builds), as real wheels of PyPI served from loopback (test/images/pypi-subset.sh).
 *     install-lock.sh runs its real steps on either.
 * The page's commands reach what is served through the documented settings (docs/guides/images.md
 * "Mirrors"): AGENTRL_BASE_REGISTRY_MIRRORS, AGENTRL_HF_ENDPOINT, the source overrides
 * (AGENTRL_FETCH_BASE_URL, AGENTRL_OPENENV_GIT_URL, AGENTRL_PIP_INDEX_URL, AGENTRL_DEBIAN_MIRROR) and
 * AGENTRL_BUILD_NETWORK=host (the servers listen on the daemon's loopback).
 * Not stand-ins: mtail is Debian bookworm's, installed by the Dockerfile's apt from a signed subset of
 * deb.debian.org served from loopback (test/images/debian-subset.sh; apt checks Debian's signature
 * and hashes); the wheels above are PyPI's.
 * Run: npm test -- --no-setup test/tooling/images-build.test.ts (root; dockerd, docker-registry, htpasswd, debootstrap, git, npm;
 * the first run downloads the bases' packages, the PyPI subset and the Debian subset into ~/.cache/agent-rl-infra/images-standin)
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import YAML from "yaml";
import { mirroredRef, parseBaseMirrors } from "../../scripts/lib/images/base-mirrors";
import { buildAndPush, neededImages } from "../../scripts/lib/images/build";
import { IMAGE_NAMES, type ImageName, type LockFile, lockPath, readLock, readPins, REPO_ROOT } from "../../scripts/lib/images/pins";
import { loadRunStack } from "../../scripts/lib/load-stack";
import { planToDir } from "../../scripts/lib/plan";
import { writeImageRefs } from "../../scripts/images";
import { docStacks, pageCommands, readDoc, ZERO_TO_UP } from "../helpers/docs";
import { type Dockerd, dockerdMissing, startDockerd } from "../helpers/dockerd";
import type { DriverRequest } from "../helpers/images-driver";
import { runWatched } from "../helpers/processes";
import { scaled, scaledCount } from "../helpers/waits";

const REGISTRY = "127.0.0.1:5000";
const USER = "agentrl";
const PASSWORD = "registry-password-for-the-test";
/** The STAND-IN pull-through mirror of Docker Hub and ghcr.io: an anonymous registry holding the stand-in bases under the pins' names. */
const MIRROR = "127.0.0.1:5001";
const BASE_MIRRORS = `docker.io=${MIRROR}/dockerhub,ghcr.io=${MIRROR}/ghcr`;
/** Where the mirror serves an image's pinned base (`vllm/vllm-openai:v0.29.0` -> `127.0.0.1:5001/dockerhub/vllm/vllm-openai:v0.29.0`). */
const standinBase = (image: ImageName) => mirroredRef(readPins(image).base.ref, parseBaseMirrors(BASE_MIRRORS));
const STANDIN_VLLM = standinBase("trainer-whitebox");
const STANDIN_SANDBOX = standinBase("sandbox");
const STANDIN_DEBIAN = standinBase("mtail");
/** The port the page's commands find the stand-in sources on (the driver serves its own, test/helpers/images-driver.ts). */
const SOURCES_PORT = 8766;
const SEEDS = "sergiopaniego/rl-envs-youtube-livestream-4-scripts";
/** The Hub's commits of the seeds' main: the lock must take the newest at or before 2026-12-01. */
const SEED_COMMIT = "5".repeat(40);
const LATER_COMMIT = "6".repeat(40);
/** The TRL commit the pins name (images/trainer-blackbox.pins.json): the stand-in script is served there. */
const TRL_REVISION = "0a942020335908aaf7276f743ddce0c5f4602c30";
const OPENENV_REVISION = "86a180ede21e044f7929b9a7783ad83aa67d83a3";
const TRL_SCRIPT = `huggingface/trl/${TRL_REVISION}/examples/async_grpo_opencode/opencode_hf_sandbox.py`;
/** The packed-attention kernel the black-box pins name, the branch its lock resolves and the build variant it bakes in. */
const KERNEL_PIN = (
    JSON.parse(fs.readFileSync(path.join(REPO_ROOT, "images", "trainer-blackbox.pins.json"), "utf8")) as {
        sources: Array<{ fetchSet?: string; repo: string; resolve?: { branch: string }; scripts: Array<{ file: string }> }>;
    }
).sources.find((s) => s.fetchSet === "flash-attn3");
const KERNEL_REPO = "kernels-community/flash-attn3";
const KERNEL_VARIANT = (KERNEL_PIN?.scripts[0]?.file ?? "").replace(/^build\//, "");
/** The Hub's commits of the kernel's v1: the lock must take the newest at or before the pins' asOf (2026-12-07T23:59:59Z). */
const KERNEL_COMMIT = "7".repeat(40);
const KERNEL_LATER_COMMIT = "8".repeat(40);
/** The Hub's commit lists, served as files where the Hub serves them (GET /api/<type>s/<repo>/commits/<branch>: resolveHubCommit). */
const HUB_COMMITS: Record<string, Array<{ id: string; date: string }>> = {
    [`models/${SEEDS}/commits/main`]: [
        { id: LATER_COMMIT, date: "2026-12-02T09:00:00.000Z" },
        { id: SEED_COMMIT, date: "2026-11-30T17:00:00.000Z" },
    ],
    [`kernels/${KERNEL_REPO}/commits/${KERNEL_PIN?.resolve?.branch}`]: [
        { id: KERNEL_LATER_COMMIT, date: "2026-12-08T09:00:00.000Z" },
        { id: KERNEL_COMMIT, date: "2026-12-05T12:00:00.000Z" },
    ],
};
/** STAND-IN for the kernel's build variant: what kernels 0.18.3 resolves and imports (a metadata.json of its shape), no CUDA code. */
const STANDIN_KERNEL: Record<string, string> = {
    "__init__.py": [
        '"""STAND-IN for kernels-community/flash-attn3 (test/tooling/images-build.test.ts): not the kernel."""',
        "STANDIN = True",
        "",
        "",
        "def flash_attn_varlen_func(*args, **kwargs):",
        '    return "stand-in flash_attn_varlen_func"',
        "",
    ].join("\n"),
    "metadata.json": JSON.stringify({
        id: "_flash_attn3_standin",
        name: "flash-attn3",
        version: 1,
        license: "Apache-2.0",
        "python-depends": [],
        backend: { type: "cuda", archs: ["8.0", "9.0a"] },
    }),
};
/** trainer/fetch_kernel.py's tree digest: sha256 of `sha256sum` lines over the variant's files, sorted by path. */
const kernelDigest = (files: Record<string, string>) =>
    sha256(
        Object.keys(files)
            .sort()
            .map((f) => `${sha256(files[f] as string)}  ${f}\n`)
            .join(""),
    );
/** The STAND-IN OpenEnv repository: OpenEnv's package names, only the modules trainer/blackbox/Dockerfile imports. */
const STANDIN_OPENENV: Record<string, string> = {
    "README.md": "STAND-IN for huggingface/OpenEnv, made by test/tooling/images-build.test.ts: not OpenEnv.\n",
    "pyproject.toml": [
        "[build-system]",
        'requires = ["setuptools>=68"]',
        'build-backend = "setuptools.build_meta"',
        "[project]",
        'name = "openenv"',
        'version = "0.10.0"',
        'description = "STAND-IN for OpenEnv (test/tooling/images-build.test.ts)"',
        "[tool.setuptools]",
        'packages = ["openenv", "openenv.core", "openenv.core.harness"]',
        "",
    ].join("\n"),
    "openenv/__init__.py": '"""STAND-IN for OpenEnv (test/tooling/images-build.test.ts): not OpenEnv."""\n',
    "openenv/core/__init__.py": "",
    "openenv/core/harness/__init__.py": 'STANDIN = "openenv.core.harness"\n',
    "envs/opencode_env/pyproject.toml": [
        "[build-system]",
        'requires = ["setuptools>=68"]',
        'build-backend = "setuptools.build_meta"',
        "[project]",
        'name = "openenv-opencode-env"',
        'version = "0.1.0"',
        'description = "STAND-IN for OpenEnv envs/opencode_env (test/tooling/images-build.test.ts)"',
        "[tool.setuptools]",
        'packages = ["opencode_env"]',
        "",
    ].join("\n"),
    "envs/opencode_env/opencode_env/__init__.py": '"""STAND-IN for OpenEnv\'s opencode env (test/tooling/images-build.test.ts)."""\n',
    "envs/opencode_env/opencode_env/harness.py": 'STANDIN = "opencode_env.harness"\n',
};
/** STAND-IN for TRL's script: the lines trainer/use_agent_sandbox.py changes, and nothing else of it. */
const STANDIN_TRL_SCRIPT = [
    "# STAND-IN for huggingface/trl examples/async_grpo_opencode/opencode_hf_sandbox.py (test/tooling/images-build.test.ts)",
    "from opencode_env.sandbox import HFSandboxBackend",
    "",
    "",
    "def build_factory(image, flavor):",
    "    inner = dict(",
    "        sandbox_backend=HFSandboxBackend(image=image, flavor=flavor),",
    "    )",
    "    return OpencodeTaskFactory(inner)",
    "",
].join("\n");

function which(bin: string): boolean {
    return spawnSync("sh", ["-c", `command -v ${bin}`], { env: { ...process.env, PATH: `${process.env.PATH}:/usr/sbin:/sbin` } }).status === 0;
}
function missing(): string | undefined {
    const d = dockerdMissing();
    if (d) return d;
    const bins = ["docker-registry", "htpasswd", "nsenter", "debootstrap", "git", "gpgv", "xz", "npm"].filter((b) => !which(b));
    return bins.length > 0
        ? `missing ${bins.join(", ")}: apt-get install -y docker-registry apache2-utils util-linux debootstrap git gpgv xz-utils (npm comes with Node.js: the page's commands run through it)`
        : undefined;
}
const auth = (password: string) => JSON.stringify({ auths: { [REGISTRY]: { auth: Buffer.from(`${USER}:${password}`).toString("base64") } } });
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

const STANDIN_CACHE = path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "agent-rl-infra", "images-standin");
/** Runs a fixture script of test/images, bounded by its progress (its output and its download logs), failing with its stderr. */
async function fixture(script: string, args: readonly string[]): Promise<void> {
    const r = await runWatched(`test/images/${script} ${args[0]}`, "bash", [path.join(__dirname, "..", "images", script), ...args], {
        stallMs: 180_000,
        budgetMs: 1_200_000,
        watch: ["debootstrap.log", "pypi.log"].map((f) => path.join(STANDIN_CACHE, f)),
    });
    assert.equal(r.status, 0, `test/images/${script}: ${r.stderr}`);
    if (r.stderr.trim()) process.stderr.write(r.stderr);
}

/** The stand-in OpenEnv as a committed git repository (fixed author and dates: one commit id for one content), served bare. */
function standinOpenenv(dir: string, served: string): string {
    const git = (args: readonly string[], cwd: string) => {
        const r = spawnSync("git", ["-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", ...args], {
            cwd,
            encoding: "utf8",
            timeout: scaled(60_000),
            env: {
                ...process.env,
                GIT_AUTHOR_NAME: "stand-in",
                GIT_AUTHOR_EMAIL: "standin@example.invalid",
                GIT_COMMITTER_NAME: "stand-in",
                GIT_COMMITTER_EMAIL: "standin@example.invalid",
                GIT_AUTHOR_DATE: "2026-12-01T00:00:00Z",
                GIT_COMMITTER_DATE: "2026-12-01T00:00:00Z",
            },
        });
        assert.equal(r.status, 0, `git ${args.join(" ")}: ${r.stderr}`);
        return r.stdout.trim();
    };
    for (const [rel, body] of Object.entries(STANDIN_OPENENV)) {
        fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
        fs.writeFileSync(path.join(dir, rel), body);
    }
    git(["init", "-q", "."], dir);
    git(["add", "-A"], dir);
    git(["commit", "-q", "-m", "STAND-IN for huggingface/OpenEnv (test/tooling/images-build.test.ts)"], dir);
    fs.mkdirSync(path.dirname(served), { recursive: true });
    git(["clone", "-q", "--bare", dir, served], path.dirname(served));
    git(["update-server-info"], served);
    return git(["rev-parse", "HEAD"], dir);
}

/** Every `image` a plan's manifests name. */
function imagesIn(manifests: unknown): Set<string> {
    const images = new Set<string>();
    const walk = (v: unknown): void => {
        if (Array.isArray(v)) v.forEach(walk);
        else if (v !== null && typeof v === "object")
            for (const [k, x] of Object.entries(v)) {
                if (k === "image" && typeof x === "string") images.add(x);
                else walk(x);
            }
    };
    walk(manifests);
    return images;
}

describe("images: a real build, push and pull", { skip: missing() }, () => {
    let d: Dockerd;
    /** The registry the images are pushed to, the stand-in mirror of the bases, the page's commands' source server. */
    const servers: ChildProcess[] = [];
    let scratch: string;
    let netns: string;
    let pinsRoot: string;
    let scriptsDir: string;
    let openenvCommit: string;

    /**
     * Runs the driver in the daemon's network namespace, bounded by its progress: what it logs and
     * every line docker prints (its .progress file); a build that goes silent (a fetch that never
     * ends) is killed and fails naming the step and docker's last lines.
     */
    async function drive(req: Omit<DriverRequest, "pinsRoot" | "root" | "scriptsDir"> & { pinsRoot?: string }): Promise<{
        ok: boolean;
        result?: any;
        message?: string;
        stderr: string;
    }> {
        const file = path.join(scratch, `request-${Date.now()}.json`);
        const full: DriverRequest = {
            pinsRoot,
            ...req,
            root: REPO_ROOT,
            scriptsDir,
        };
        fs.writeFileSync(file, JSON.stringify(full));
        const r = await runWatched(
            `the image step's ${req.mode} of ${req.images.join(", ")}`,
            "nsenter",
            [`--net=${netns}`, "--", process.execPath, "--import", "tsx", path.join(__dirname, "..", "helpers", "images-driver.ts"), file],
            {
                stallMs: 180_000,
                budgetMs: 900_000,
                watch: [`${file}.progress`],
                cwd: REPO_ROOT,
                env: { ...process.env, DOCKER_HOST: `unix://${d.socket}`, DOCKER_BUILDKIT: "0", AGENTRL_BASE_REGISTRY_MIRRORS: BASE_MIRRORS },
            },
        );
        const line = r.stdout.trim().split("\n").pop() ?? "";
        try {
            return { ...JSON.parse(line), stderr: r.stderr };
        } catch {
            throw new Error(`the driver printed no result (exit ${r.status}):\n${r.stderr}\n${r.stdout}`);
        }
    }

    /** Waits, bounded by a count of tries, until `url` answers `status` inside the daemon's namespace; fails naming `what` and its log. */
    async function untilAnswers(what: string, url: string, status: string, log: string): Promise<void> {
        let got = "";
        for (let i = 0; i < scaledCount(100) && got !== status; i++) {
            got = spawnSync("nsenter", [`--net=${netns}`, "--", "curl", "-s", "--max-time", "2", "-o", "/dev/null", "-w", "%{http_code}", url], {
                encoding: "utf8",
                timeout: scaled(10_000),
            }).stdout;
            if (got !== status) await new Promise((r) => setTimeout(r, 200));
        }
        assert.equal(got, status, `${what} did not answer ${status} on ${url}:\n${fs.existsSync(log) ? fs.readFileSync(log, "utf8") : ""}`);
    }

    /** Debian's docker-registry on the daemon's loopback at `addr`, with `auth` (a registry.yml line) or anonymous. */
    async function startRegistry(name: string, addr: string, status: string, auth?: string): Promise<void> {
        const config = path.join(scratch, `${name}.yml`);
        fs.writeFileSync(
            config,
            [
                "version: 0.1",
                "log: { level: warn }",
                `storage: { filesystem: { rootdirectory: ${scratch}/${name}-data } }`,
                `http: { addr: "${addr}" }`,
                ...(auth ? [auth] : []),
                "",
            ].join("\n"),
        );
        const log = path.join(scratch, `${name}.log`);
        servers.push(spawn("nsenter", [`--net=${netns}`, "--", "docker-registry", "serve", config], { stdio: ["ignore", "ignore", fs.openSync(log, "a")] }));
        await untilAnswers(`the ${name}`, `http://${addr}/v2/`, status, log);
    }

    before(async () => {
        scratch = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-images-"));
        d = await startDockerd();
        const pid = fs.readFileSync(path.join(path.dirname(d.socket), "dockerd.pid"), "utf8").trim();
        netns = `/proc/${pid}/ns/net`;
        // The registry, with htpasswd (bcrypt) auth, on the daemon's loopback; the stand-in mirror beside it, anonymous
        // (a pull-through cache of public images asks for no credentials).
        const htpasswd = spawnSync("htpasswd", ["-Bbn", USER, PASSWORD], { encoding: "utf8", timeout: scaled(60_000) });
        assert.equal(htpasswd.status, 0, htpasswd.stderr);
        fs.writeFileSync(path.join(scratch, "htpasswd"), htpasswd.stdout);
        await startRegistry("registry", REGISTRY, "401", `auth: { htpasswd: { realm: agentrl-test, path: ${scratch}/htpasswd } }`);
        await startRegistry("mirror", MIRROR, "200");

        // The stand-in bases, pushed to the mirror under the pins' names (the CLI's own login, the daemon's config dir, is the registry's).
        await fixture("standin-base.sh", ["trainer", path.join(scratch, "base-trainer.tar")]);
        await fixture("standin-base.sh", ["sandbox", path.join(scratch, "base-sandbox.tar")]);
        fs.mkdirSync(path.join(path.dirname(d.socket), "cli"), { recursive: true });
        fs.writeFileSync(path.join(path.dirname(d.socket), "cli", "config.json"), auth(PASSWORD));
        d.docker(["import", path.join(scratch, "base-trainer.tar"), STANDIN_VLLM], { timeoutMs: 600_000 });
        d.docker(["tag", STANDIN_VLLM, STANDIN_DEBIAN]);
        d.docker(["import", path.join(scratch, "base-sandbox.tar"), STANDIN_SANDBOX], { timeoutMs: 600_000 });
        for (const ref of [STANDIN_VLLM, STANDIN_DEBIAN, STANDIN_SANDBOX]) d.docker(["push", ref], { timeoutMs: 600_000 });

        // What the builds fetch, where the driver serves it: the stand-in seed scripts and TRL script
        // where the Hub and GitHub serve a file at a commit, the stand-in OpenEnv repository, the PyPI
        // subset and the Debian subset.
        scriptsDir = path.join(scratch, "scripts");
        for (const [list, commits] of Object.entries(HUB_COMMITS)) {
            const file = path.join(scriptsDir, "api", list);
            fs.mkdirSync(path.dirname(file), { recursive: true });
            fs.writeFileSync(file, JSON.stringify(commits));
        }
        const at = path.join(scriptsDir, SEEDS, "resolve", SEED_COMMIT);
        fs.mkdirSync(at, { recursive: true });
        for (const f of ["train_coding_whitebox_eval.py", "train_coding_whitebox.py", "train_wordle_whitebox.py"])
            fs.writeFileSync(path.join(at, f), `# STAND-IN for the seeds' ${f} (test/tooling/images-build.test.ts)\nprint("${f}")\n`);
        fs.mkdirSync(path.dirname(path.join(scriptsDir, TRL_SCRIPT)), { recursive: true });
        fs.writeFileSync(path.join(scriptsDir, TRL_SCRIPT), STANDIN_TRL_SCRIPT);
        // The stand-in kernel as the Hub serves a kernel repository (trainer/fetch_kernel.py asks both): the tree
        // listing of build/<variant> at the commit (its ?recursive=true query is not part of the file's path) and each file.
        const kernelListing = path.join(scriptsDir, "api", "kernels", KERNEL_REPO, "tree", KERNEL_COMMIT, "build", KERNEL_VARIANT);
        fs.mkdirSync(path.dirname(kernelListing), { recursive: true });
        fs.writeFileSync(kernelListing, JSON.stringify(Object.keys(STANDIN_KERNEL).map((f) => ({ type: "file", path: `build/${KERNEL_VARIANT}/${f}` }))));
        for (const [f, body] of Object.entries(STANDIN_KERNEL)) {
            const file = path.join(scriptsDir, "kernels", KERNEL_REPO, "resolve", KERNEL_COMMIT, "build", KERNEL_VARIANT, f);
            fs.mkdirSync(path.dirname(file), { recursive: true });
            fs.writeFileSync(file, body);
        }
        openenvCommit = standinOpenenv(path.join(scratch, "openenv-standin"), path.join(scriptsDir, "huggingface", "OpenEnv.git"));
        await fixture("pypi-subset.sh", [
            path.join(scriptsDir, "pypi"),
            path.join(REPO_ROOT, "trainer", "requirements.txt"),
            "k8s-agent-sandbox",
            "kernels",
            "setuptools",
        ]);
        fs.symlinkSync(path.join(scriptsDir, "pypi", "simple"), path.join(scriptsDir, "simple"));
        // mtail and its Depends (Debian bookworm's mtail 3.0.0~rc50: adduser, tzdata, init-system-helpers, libc6):
        // those a minbase lacks, as a slim image lacks them, are fetched from the mirror too.
        await fixture("debian-subset.sh", [path.join(scriptsDir, "debian-subset"), "bookworm", "mtail", "adduser", "tzdata", "init-system-helpers"]);
        fs.symlinkSync(path.join(scriptsDir, "debian-subset", "debian"), path.join(scriptsDir, "debian"));
        fs.writeFileSync(path.join(scratch, "requirements-standin.txt"), "# STAND-IN trainer lock (test/tooling/images-build.test.ts): nothing to install\n");
        fs.writeFileSync(
            path.join(scratch, "requirements-blackbox-standin.txt"),
            `# STAND-IN trainer lock (test/tooling/images-build.test.ts): the part of trainer/requirements.txt the black-box image's checks import\n${fs.readFileSync(path.join(scriptsDir, "pypi", "lock.txt"), "utf8")}`,
        );

        // The pins with the stand-in OpenEnv's commit (the bases keep their names: the mirror serves them), and the
        // repository's (unfilled) lock.
        pinsRoot = path.join(scratch, "pins");
        fs.mkdirSync(path.join(pinsRoot, "images"), { recursive: true });
        for (const name of IMAGE_NAMES) {
            const pins = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, "images", `${name}.pins.json`), "utf8"));
            for (const source of pins.sources) if (source.name === "openenv") source.revision = source.factsRevision = openenvCommit;
            fs.writeFileSync(path.join(pinsRoot, "images", `${name}.pins.json`), JSON.stringify(pins));
        }
        fs.copyFileSync(path.join(REPO_ROOT, "images", "lock.json"), path.join(pinsRoot, "images", "lock.json"));
    });

    after(async () => {
        for (const server of servers) server.kill("SIGKILL");
        await d?.stop();
        if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
    });

    const replace = (): DriverRequest["replace"] => ({
        "trainer-whitebox": { "trainer/requirements.txt": path.join(scratch, "requirements-standin.txt") },
        "trainer-blackbox": { "trainer/requirements.txt": path.join(scratch, "requirements-blackbox-standin.txt") },
    });

    test("an unfilled lock refuses the build, naming the command that fills it", async () => {
        await assert.rejects(
            buildAndPush("trainer-whitebox", { root: REPO_ROOT, pinsRoot, to: `${REGISTRY}/agent-rl`, dockerConfigJson: auth(PASSWORD) }),
            (e: Error) => {
                assert.match(e.message, /^trainer-whitebox: refused, the lock is not filled for it:/);
                assert.match(
                    e.message,
                    /images\/lock\.json images\.trainer-whitebox\.args\.SEED_REVISION: not filled: run 'npm run images -- lock trainer-whitebox'/,
                );
                return true;
            },
        );
    });

    test("a lock made for another OpenEnv commit than the pins' refuses the build, naming both and the command", async () => {
        assert.notEqual(openenvCommit, OPENENV_REVISION);
        await assert.rejects(
            buildAndPush("trainer-blackbox", { root: REPO_ROOT, pinsRoot, to: `${REGISTRY}/agent-rl`, dockerConfigJson: auth(PASSWORD) }),
            (e: Error) => {
                assert.ok(
                    e.message.includes(
                        `images/lock.json images.trainer-blackbox.args.OPENENV_REVISION: '${OPENENV_REVISION}' but images/trainer-blackbox.pins.json pins ${openenvCommit}: the pins changed after the lock; run 'npm run images -- lock trainer-blackbox' again`,
                    ),
                    e.message,
                );
                return true;
            },
        );
    });

    /** The digest the mirror holds a stand-in base under. */
    const mirrorDigest = (ref: string) => d.docker(["inspect", "--format", "{{index .RepoDigests 0}}", ref]).stdout.trim().split("@")[1];

    test("the lock step records each base by the mirror's digest under its upstream name, the seeds' commit as of the facts' day, each script's sha256 and the pinned OpenEnv commit", async () => {
        const r = await drive({ mode: "lock", images: ["trainer-whitebox", "sandbox"], to: "", dockerConfigJson: auth(PASSWORD) });
        assert.ok(r.ok, `${r.message}\n${r.stderr}`);
        const lock = readLock(pinsRoot) as LockFile;
        assert.equal(lock.images["trainer-whitebox"].base, `${readPins("trainer-whitebox").base.ref}@${mirrorDigest(STANDIN_VLLM)}`);
        assert.equal(lock.images.sandbox.base, `${readPins("sandbox").base.ref}@${mirrorDigest(STANDIN_SANDBOX)}`);
        assert.equal(lock.images["trainer-whitebox"].args.SEED_REVISION, SEED_COMMIT);
        const script = fs.readFileSync(path.join(scriptsDir, SEEDS, "resolve", SEED_COMMIT, "train_wordle_whitebox.py"), "utf8");
        assert.equal(lock.images["trainer-whitebox"].args.SEED_SHA256_TRAIN_WORDLE_WHITEBOX, sha256(script));
        // The images it was not asked to lock keep the repository's (unfilled) entries.
        assert.equal(lock.images["trainer-blackbox"].args.TRL_SHA256_OPENCODE_HF_SANDBOX, null);

        const rest = await drive({ mode: "lock", images: ["trainer-blackbox", "mtail"], to: "", dockerConfigJson: auth(PASSWORD) });
        assert.ok(rest.ok, `${rest.message}\n${rest.stderr}`);
        const next = readLock(pinsRoot) as LockFile;
        assert.deepEqual(next.images["trainer-whitebox"], lock.images["trainer-whitebox"]);
        assert.deepEqual(next.images["trainer-blackbox"].args, {
            TRL_REVISION,
            TRL_SHA256_OPENCODE_HF_SANDBOX: sha256(STANDIN_TRL_SCRIPT),
            OPENENV_REVISION: openenvCommit,
            KERNEL_FLASH_ATTN3_REVISION: KERNEL_COMMIT,
            KERNEL_FLASH_ATTN3_SHA256: kernelDigest(STANDIN_KERNEL),
        });
        assert.equal(next.images.mtail.base, `${readPins("mtail").base.ref}@${mirrorDigest(STANDIN_DEBIAN)}`);
    });

    test("a wrong registry password fails before any build, naming the registry and the user", async () => {
        const r = await drive({ mode: "build", images: ["sandbox"], to: `${REGISTRY}/agent-rl`, dockerConfigJson: auth("wrong-password") });
        assert.equal(r.ok, false);
        assert.equal(
            r.message,
            `sandbox: ${REGISTRY}: refused the registryAuth credentials of user '${USER}' (wrong password?): fix auths["${REGISTRY}"] in registryAuth`,
        );
    });

    const refs: Record<string, string> = {};
    test("builds the white-box trainer and the sandbox image from the real Dockerfiles and pushes them; the same inputs push nothing new", async () => {
        const first = await drive({
            mode: "build",
            images: ["trainer-whitebox", "sandbox"],
            to: `${REGISTRY}/agent-rl`,
            dockerConfigJson: auth(PASSWORD),
            replace: replace(),
        });
        assert.ok(first.ok, `${first.message}\n${first.stderr}`);
        for (const b of first.result) {
            assert.equal(b.pushed, true, b.image);
            assert.match(b.ref, new RegExp(`^127\\.0\\.0\\.1:5000/agent-rl/${b.image}@sha256:[0-9a-f]{64}$`));
        }
        // The real Dockerfile steps ran: the scripts checked at the lock's commit, the (stand-in) lock installed on the held vllm.
        assert.match(
            first.stderr,
            new RegExp(`trainer-whitebox: fetch-scripts: /app/train_wordle_whitebox\\.py \\(seed at ${SEED_COMMIT}, sha256 verified\\)`),
        );
        assert.match(first.stderr, /trainer-whitebox: install-lock: holding 2 packages of the base image \(vllm==0\.29\.0, torch==2\.11\.0\)/);
        assert.match(
            first.stderr,
            /trainer-whitebox: install-lock: installed requirements\.txt on vllm==0\.29\.0, torch==2\.11\.0 \(held packages unchanged\)/,
        );
        for (const b of first.result) refs[b.image] = b.ref;
        const again = await drive({
            mode: "build",
            images: ["trainer-whitebox", "sandbox"],
            to: `${REGISTRY}/agent-rl`,
            dockerConfigJson: auth(PASSWORD),
            replace: replace(),
        });
        assert.ok(again.ok, again.message);
        assert.deepEqual(
            again.result.map((b: { image: string; ref: string; pushed: boolean }) => [b.image, b.ref, b.pushed]),
            first.result.map((b: { image: string; ref: string }) => [b.image, b.ref, false]),
        );
        assert.doesNotMatch(again.stderr, /docker build|docker push/);
    });

    /** The page's stack file, as the page shows it; its name is the one the page's commands give. */
    const pageStack = docStacks().find((st) => st.doc === ZERO_TO_UP);
    /** A scratch copy of this repository (its files as they are here, node_modules linked), where the page's commands run. */
    let checkout = "";
    /**
     * Runs one of the page's command lines as a user types it, in the scratch copy, inside the daemon's
     * network namespace (where the registry, the mirror and the source server listen), with the
     * documented settings that point it at them; bounded by its progress (every line docker prints is
     * printed by the images step). Fails with its output on a non-zero exit.
     */
    async function pageCommand(line: string): Promise<{ stdout: string; stderr: string }> {
        const served = `http://127.0.0.1:${SOURCES_PORT}`;
        const r = await runWatched(line, "nsenter", [`--net=${netns}`, "--", "bash", "-c", line], {
            stallMs: 180_000,
            budgetMs: 900_000,
            cwd: checkout,
            env: {
                ...process.env,
                DOCKER_HOST: `unix://${d.socket}`,
                // The classic builder, as the driver runs the same builds.
                DOCKER_BUILDKIT: "0",
                AGENTRL_BASE_REGISTRY_MIRRORS: BASE_MIRRORS,
                AGENTRL_HF_ENDPOINT: served,
                AGENTRL_FETCH_BASE_URL: served,
                AGENTRL_OPENENV_GIT_URL: `${served}/huggingface/OpenEnv.git`,
                AGENTRL_PIP_INDEX_URL: `${served}/simple`,
                AGENTRL_DEBIAN_MIRROR: served,
                AGENTRL_BUILD_NETWORK: "host",
            },
        });
        assert.equal(r.status, 0, `${line} (exit ${r.status}):\n${r.stderr}\n${r.stdout}`);
        return r;
    }

    test(`${ZERO_TO_UP}, commands 2 to 5 as the page writes them (the registry and its credentials the test's): the lock filled, the black-box trainer built and pushed beside the white-box run's sandbox, the stack file and its plan naming both by digest`, async () => {
        assert.ok(refs.sandbox, "built above");
        assert.ok(pageStack, `${ZERO_TO_UP} shows its stack file`);
        const numbered = pageCommands(readDoc(ZERO_TO_UP)).filter((c) => c.n > 0);
        /** Command n of the page, which must have `shape`, with the page's registry host and credentials replaced by the test's. */
        const command = (n: number, shape: RegExp): string => {
            const line = numbered.find((c) => c.n === n)?.line ?? "";
            assert.match(line, shape, `${ZERO_TO_UP} command ${n}`);
            return line.replaceAll("registry.example.com", REGISTRY).replace("robot:TOKEN", `${USER}:${PASSWORD}`);
        };
        const lock = command(2, /^npm run images -- lock$/);
        const registryAuth = command(3, /^printf '\{"auths".* registry\.example\.com "\$\(printf '%s' 'robot:TOKEN' .*> registry-auth\.json$/);
        const build = command(
            4,
            new RegExp(`^npm run images -- ${pageStack.name} --to registry\\.example\\.com/agent-rl --registry-auth-file registry-auth\\.json$`),
        );
        const plan = command(5, new RegExp(`^npm run plan -- ${pageStack.name}$`));

        // The scratch copy: this repository's files, the page's stack file saved where the page says, and the named
        // stand-ins (the OpenEnv commit of the pins, the trainer lock); this repository's lock is never written.
        checkout = path.join(scratch, "checkout");
        const skipped = new Set(["node_modules", ".git", "out", ".cache", "dist"]);
        fs.cpSync(REPO_ROOT, checkout, {
            recursive: true,
            filter: (src) => {
                const rel = path.relative(REPO_ROOT, src);
                return !skipped.has(rel.split(path.sep)[0] as string) && !rel.split(path.sep).includes("__pycache__");
            },
        });
        fs.symlinkSync(path.join(REPO_ROOT, "node_modules"), path.join(checkout, "node_modules"));
        fs.copyFileSync(path.join(pinsRoot, "images", "trainer-blackbox.pins.json"), path.join(checkout, "images", "trainer-blackbox.pins.json"));
        fs.copyFileSync(path.join(scratch, "requirements-blackbox-standin.txt"), path.join(checkout, "trainer", "requirements.txt"));
        const stackFile = path.join(checkout, "stacks", `Pulumi.${pageStack.name}.yaml`);
        fs.writeFileSync(stackFile, pageStack.text);
        // The stand-in sources where the page's commands find them (the driver's server is its own).
        const log = path.join(scratch, "sources.log");
        servers.push(
            spawn("nsenter", [`--net=${netns}`, "--", "python3", path.join(__dirname, "..", "images", "serve.py"), String(SOURCES_PORT), scriptsDir], {
                stdio: ["ignore", "ignore", fs.openSync(log, "a")],
            }),
        );
        await untilAnswers("the source server", `http://127.0.0.1:${SOURCES_PORT}/`, "200", log);
        const repositoryLock = fs.readFileSync(lockPath(REPO_ROOT), "utf8");

        // 2. The lock step fills the copy's lock: every base by digest, every commit and digest; the same lock the
        // driver's lock step wrote from the same stand-ins.
        const locked = await pageCommand(lock);
        assert.match(locked.stderr, /images\/lock\.json written: read what it names/);
        const filled = readLock(checkout);
        for (const [image, entry] of Object.entries(filled.images)) {
            assert.ok(entry.base?.startsWith(`${readPins(image as ImageName).base.ref}@sha256:`), `${image}: ${entry.base}`);
            for (const [arg, v] of Object.entries(entry.args)) assert.ok(v, `${image}.${arg} filled`);
        }
        assert.deepEqual(filled.images, readLock(pinsRoot).images);
        assert.equal(fs.readFileSync(lockPath(REPO_ROOT), "utf8"), repositoryLock, "this repository's images/lock.json untouched");

        // 3. The registry's credentials, as inline auths.
        await pageCommand(registryAuth);
        assert.deepEqual(JSON.parse(fs.readFileSync(path.join(checkout, "registry-auth.json"), "utf8")), JSON.parse(auth(PASSWORD)));

        // 4. The build: the black-box trainer built and pushed, the sandbox image found (the white-box run pushed it:
        // same inputs), both written into the page's stack file by digest.
        const built = await pageCommand(build);
        const named = loadRunStack(pageStack.name, stackFile).config;
        refs["trainer-blackbox"] = named.images.trainer as string;
        assert.match(refs["trainer-blackbox"], /^127\.0\.0\.1:5000\/agent-rl\/trainer-blackbox@sha256:[0-9a-f]{64}$/);
        assert.equal(named.sandboxes.image, refs.sandbox, "the sandbox image the white-box run pushed: same inputs");
        assert.ok(built.stdout.includes(`images.trainer: ${refs["trainer-blackbox"]}\n`), built.stdout);
        assert.ok(built.stdout.includes(`sandboxes.image: ${refs.sandbox} (already pushed)\n`), built.stdout);
        assert.match(fs.readFileSync(stackFile, "utf8"), /# your kubeconfig context: never kubectl's current one/, "the stack file's comments stay");
        // The real Dockerfile steps ran: TRL's script checked at the pinned commit and changed, the lock and
        // OpenEnv installed from git at the pinned commit.
        assert.match(
            built.stderr,
            new RegExp(`trainer-blackbox: fetch-scripts: /app/opencode_hf_sandbox\\.py \\(trl-opencode at ${TRL_REVISION}, sha256 verified\\)`),
        );
        // install-lock.sh twice on the held vllm: the (stand-in) lock from the PyPI subset, then OpenEnv from git.
        assert.equal(
            built.stderr.match(/trainer-blackbox: install-lock: holding 2 packages of the base image \(vllm==0\.29\.0, torch==2\.11\.0\)/g)?.length,
            2,
        );
        for (const file of ["requirements", "openenv-git"])
            assert.match(
                built.stderr,
                new RegExp(`trainer-blackbox: install-lock: installed ${file}\\.txt on vllm==0\\.29\\.0, torch==2\\.11\\.0 \\(held packages unchanged\\)`),
            );
        assert.match(built.stderr, /trainer-blackbox: Successfully installed .*\bk8s-agent-sandbox-1\.0\.8\b/);
        assert.match(built.stderr, /trainer-blackbox: Successfully installed .*\bkernels-0\.18\.3\b/);
        // The kernel fetched at the locked commit and checked, then resolved by kernels for the (stand-in) torch 2.11 + CUDA 13.0.
        assert.ok(
            built.stderr.includes(
                `trainer-blackbox: fetch_kernel: /opt/agentrl/kernels/flash-attn3/build/${KERNEL_VARIANT} (${KERNEL_REPO} at ${KERNEL_COMMIT}, sha256 verified)`,
            ),
            built.stderr,
        );
        assert.ok(
            built.stderr.includes(
                `trainer-blackbox: kernels: LOCAL_KERNELS resolves ${KERNEL_REPO} version 1 to /opt/agentrl/kernels/flash-attn3/build/${KERNEL_VARIANT}`,
            ),
            built.stderr,
        );
        assert.match(built.stderr, /trainer-blackbox: Successfully installed openenv-0\.10\.0 openenv-opencode-env-0\.1\.0\n/);
        assert.match(built.stderr, /trainer-blackbox: use_agent_sandbox: \/app\/opencode_hf_sandbox\.py: HFSandboxBackend -> AgentSandboxBackend/);
        assert.match(built.stderr, new RegExp(`OPENENV_GIT_URL=http://127\\.0\\.0\\.1:${SOURCES_PORT}/huggingface/OpenEnv\\.git`));

        // 5. The offline plan of the stack file command 4 wrote: its manifests run both images by digest (the trainer,
        // the sandbox pool's template).
        await pageCommand(plan);
        const manifests = path.join(checkout, "out", pageStack.name, "manifests");
        const planned = imagesIn(fs.readdirSync(manifests).map((f) => YAML.parse(fs.readFileSync(path.join(manifests, f), "utf8"))));
        for (const image of ["trainer-blackbox", "sandbox"])
            assert.ok(planned.has(refs[image] as string), `${image}: ${refs[image]} in the plan's images: ${[...planned].join(", ")}`);

        // The same stack with observability on needs mtail too: command 4 on it builds mtail alone (Debian's, from its
        // signed archive); the other two, same inputs, are in the registry already. Its plan runs mtail beside the proxy.
        const observed = `${pageStack.name}-observability`;
        const observedFile = path.join(checkout, "stacks", `Pulumi.${observed}.yaml`);
        const doc = YAML.parseDocument(fs.readFileSync(stackFile, "utf8"));
        doc.setIn(["config", "agent-rl-infra:platform", "observability"], doc.createNode({ enabled: true }));
        fs.writeFileSync(observedFile, doc.toString());
        const more = await pageCommand(build.replace(` ${pageStack.name} `, ` ${observed} `));
        const config = loadRunStack(observed, observedFile).config;
        assert.deepEqual(
            neededImages(config).map((n) => n.image),
            ["trainer-blackbox", "sandbox", "mtail"],
        );
        refs.mtail = config.images.mtail as string;
        assert.match(refs.mtail, /^127\.0\.0\.1:5000\/agent-rl\/mtail@sha256:[0-9a-f]{64}$/);
        assert.ok(more.stdout.includes(`images.trainer: ${refs["trainer-blackbox"]} (already pushed)\n`), more.stdout);
        assert.ok(more.stdout.includes(`sandboxes.image: ${refs.sandbox} (already pushed)\n`), more.stdout);
        assert.ok(more.stdout.includes(`images.mtail: ${refs.mtail}\n`), more.stdout);
        assert.doesNotMatch(more.stderr, /images: (trainer-blackbox|sandbox): docker build/);
        assert.match(more.stderr, /mtail: mtail version 3\.0\.0~rc50/);
        const observedPlan = await planToDir(
            { stack: observed, stackFile: observedFile },
            { outDir: path.join(scratch, "plan"), secrets: { registryAuth: auth(PASSWORD) } },
        );
        const observedImages = imagesIn(observedPlan.manifests);
        for (const image of ["trainer-blackbox", "sandbox", "mtail"])
            assert.ok(observedImages.has(refs[image] as string), `${image}: ${refs[image]} in the plan's images: ${[...observedImages].join(", ")}`);
    });

    test("the stack names them by digest, and the Docker target pulls them by digest", () => {
        assert.ok(refs["trainer-whitebox"], "built above");
        const stackFile = path.join(scratch, "Pulumi.images-dev.yaml");
        fs.copyFileSync(path.join(REPO_ROOT, "stacks", "Pulumi.dev.yaml"), stackFile);
        writeImageRefs(stackFile, [{ field: ["images", "trainer"], ref: refs["trainer-whitebox"] as string }]);
        assert.equal(loadRunStack("images-dev", stackFile).config.images.trainer, refs["trainer-whitebox"]);
        assert.match(fs.readFileSync(stackFile, "utf8"), /# Your trainer image: TRL 1\.16/, "the stack file's comments stay");
        // As the Docker provider's RemoteImage pulls: by the name the stack gives, from a daemon that lacks it.
        assert.deepEqual(Object.keys(refs).sort(), ["mtail", "sandbox", "trainer-blackbox", "trainer-whitebox"]);
        for (const ref of Object.values(refs)) {
            const tagged = d
                .docker(["images", "--format", "{{.Repository}}:{{.Tag}}", ref.split("@")[0] as string])
                .stdout.trim()
                .split("\n")
                .filter(Boolean);
            for (const t of tagged) d.docker(["rmi", "-f", t]);
            d.docker(["pull", ref], { timeoutMs: 300_000 });
        }
        const app = d.docker(["run", "--rm", "--network", "none", refs["trainer-whitebox"] as string, "ls", "/app", "/usr/local/lib/agentrl"]).stdout;
        for (const f of ["train_coding_whitebox_eval.py", "train_coding_whitebox.py", "train_wordle_whitebox.py", "args_check.py"])
            assert.ok(app.includes(f), `${f} in ${app}`);
        const sandbox = d.docker([
            "run",
            "--rm",
            "--network",
            "none",
            refs.sandbox as string,
            "sh",
            "-c",
            "id -u && python3 -I /opt/agent-rl/runtime.py --help >/dev/null && ls /opt/agent-rl",
        ]).stdout;
        assert.match(sandbox, /^65532\n/);
        for (const f of ["runtime.py", "forwarder.py", "rollout_keys.py", "home"]) assert.ok(sandbox.includes(f), `${f} in ${sandbox}`);
        // The black-box trainer: OpenEnv's modules from the pinned commit, the stack's backend, TRL's script changed to use it.
        const black = d.docker([
            "run",
            "--rm",
            "--network",
            "none",
            refs["trainer-blackbox"] as string,
            "sh",
            "-c",
            "python3 -c 'import opencode_env.harness as h, openenv.core.harness as o, agent_rl_sandbox.agent_sandbox, k8s_agent_sandbox; print(h.STANDIN, o.STANDIN)' && grep -c AgentSandboxBackend /app/opencode_hf_sandbox.py && grep -c ForwarderTracedFactory /app/opencode_hf_sandbox.py && ls /app",
        ]).stdout;
        // Each name twice: its import and the line it changed.
        assert.match(black, /^opencode_env\.harness openenv\.core\.harness\n2\n2\n/);
        for (const f of ["opencode_hf_sandbox.py", "fsdp2.yaml"]) assert.ok(black.includes(f), `${f} in ${black}`);
        // The kernel where the image's LOCAL_KERNELS points, loaded by kernels' get_kernel as TRL asks for it
        // (version=1), with no network. check_arch=False: the arch check asks torch.cuda for the GPU's
        // capability (kernels 0.18.3 kernels/validate.py ArchValidator, kernels/archs.py), and there is neither a GPU nor a real torch here.
        const kernel = d.docker([
            "run",
            "--rm",
            "--network",
            "none",
            refs["trainer-blackbox"] as string,
            "sh",
            "-c",
            `echo "$LOCAL_KERNELS" && ls "\${LOCAL_KERNELS#*=}/build/${KERNEL_VARIANT}" && python3 -c "import kernels; k = kernels.get_kernel('${KERNEL_REPO}', version=1, check_arch=False); print(k.__file__, k.STANDIN, k.flash_attn_varlen_func())"`,
        ]).stdout;
        assert.equal(
            kernel,
            [
                `${KERNEL_REPO}=/opt/agentrl/kernels/flash-attn3`,
                "__init__.py",
                "metadata.json",
                `/opt/agentrl/kernels/flash-attn3/build/${KERNEL_VARIANT}/__init__.py True stand-in flash_attn_varlen_func`,
                "",
            ].join("\n"),
        );
        // mtail: Debian's binary, unprivileged.
        const mtail = d.docker([
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "sh",
            refs.mtail as string,
            "-c",
            "id -u && /usr/bin/mtail --version 2>&1",
        ]).stdout;
        assert.match(mtail, /^65534\nmtail version 3\.0\.0~rc50/);
    });

    test("pins and lock naming an OpenEnv commit the source does not hold fail the build, naming the commit", async () => {
        // OpenEnv's real commit, which the stand-in repository does not hold, in both the pins and the lock.
        const other = path.join(scratch, "pins-other-openenv");
        fs.mkdirSync(path.join(other, "images"), { recursive: true });
        for (const f of fs.readdirSync(path.join(pinsRoot, "images"))) fs.copyFileSync(path.join(pinsRoot, "images", f), path.join(other, "images", f));
        const pinsFile = path.join(other, "images", "trainer-blackbox.pins.json");
        fs.writeFileSync(pinsFile, fs.readFileSync(pinsFile, "utf8").replaceAll(openenvCommit, OPENENV_REVISION));
        const lockFile = path.join(other, "images", "lock.json");
        fs.writeFileSync(lockFile, fs.readFileSync(lockFile, "utf8").replaceAll(openenvCommit, OPENENV_REVISION));
        const r = await drive({
            mode: "build",
            images: ["trainer-blackbox"],
            pinsRoot: other,
            to: `${REGISTRY}/elsewhere`,
            dockerConfigJson: auth(PASSWORD),
            replace: replace(),
        });
        assert.equal(r.ok, false);
        assert.match(r.message ?? "", /^trainer-blackbox: docker build -f trainer\/blackbox\/Dockerfile failed/);
        // The source's own answer (git's smart HTTP, as GitHub gives it), through pip's clone at that commit.
        assert.ok(r.message?.includes(`not our ref ${OPENENV_REVISION}`), r.message);
    });

    test("a changed script fails the build naming the file and both digests", async () => {
        const file = path.join(scriptsDir, SEEDS, "resolve", SEED_COMMIT, "train_wordle_whitebox.py");
        const pinned = sha256(fs.readFileSync(file, "utf8"));
        fs.appendFileSync(file, "# changed upstream after the lock\n");
        // Another repository, so the inputs' tag is not found and the build runs.
        const r = await drive({
            mode: "build",
            images: ["trainer-whitebox"],
            to: `${REGISTRY}/elsewhere`,
            dockerConfigJson: auth(PASSWORD),
            replace: replace(),
        });
        assert.equal(r.ok, false);
        assert.match(r.message ?? "", /^trainer-whitebox: docker build -f trainer\/whitebox\/Dockerfile failed/);
        assert.ok(
            r.message?.includes(`train_wordle_whitebox.py (`) &&
                r.message.includes(`sha256 mismatch: expected ${pinned} (SEED_SHA256_TRAIN_WORDLE_WHITEBOX), got ${sha256(fs.readFileSync(file, "utf8"))}`),
            r.message,
        );
    });
});
