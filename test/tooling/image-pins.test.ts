/**
 * The images' pinned upstream inputs (images/<image>.pins.json) against the program facts, and the
 * lock (images/lock.json): the repository's pins agree with the facts, a pin changed on one side
 * only fails naming both sides, and a build with an unfilled or stale lock is refused naming the
 * command that fills it.
 * Run: node --import tsx --test test/tooling/image-pins.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, test } from "node:test";
import { BUILD_NETWORK_ENV, buildNetworkFrom, neededImages, SOURCE_OVERRIDES, sourceArgs } from "../../scripts/lib/images/build";
import { loadForImages, parseImagesArgs, writeImageRefs } from "../../scripts/images";
import { knownStacks } from "../../scripts/lib/plan";
import { loadRunStack } from "../../scripts/lib/load-stack";
import { docCommands, docStacks } from "../helpers/docs";
import { factSources, pyprojectOpenenvRevisions, repositoryRevisionProblems, revisionProblems } from "../../scripts/lib/images/facts";
import { buildArgs, IMAGE_NAMES, type ImagePins, type LockFile, pinnedArgs, readLock, readPins, REPO_ROOT } from "../../scripts/lib/images/pins";

const allPins = () => IMAGE_NAMES.map((n) => readPins(n));
const pyproject = () => fs.readFileSync(path.join(REPO_ROOT, "python", "pyproject.toml"), "utf8");
const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

describe("pins against the program facts", () => {
    test("the repository's pins, facts, default vLLM image and pyproject name one revision each", () => {
        assert.deepEqual(repositoryRevisionProblems(), []);
    });

    test("every program the images hold is covered by a pinned source", () => {
        const repos = new Set(allPins().flatMap((p) => p.sources.map((s) => s.repo)));
        for (const f of factSources()) assert.ok(repos.has(f.repo), `${f.program} (${f.repo}) has no pinned source`);
        // and every Dockerfile and fetch set the pins name exists
        const fetch = fs.readFileSync(path.join(REPO_ROOT, "trainer", "fetch-scripts.sh"), "utf8");
        // The kernel set is a folder: trainer/fetch_kernel.py holds its table (one variant, one digest).
        const kernel = fs.readFileSync(path.join(REPO_ROOT, "trainer", "fetch_kernel.py"), "utf8");
        const listed = (set: string | undefined, file: string, digestArg: string) =>
            set === "flash-attn3"
                ? kernel.includes(`DEFAULT_VARIANT = "${file.replace(/^build\//, "")}"`) && kernel.includes(`DIGEST_ARG = "${digestArg}"`)
                : fetch.includes(`${file}|${digestArg}`);
        for (const p of allPins()) {
            assert.ok(fs.existsSync(path.join(REPO_ROOT, p.dockerfile)), p.dockerfile);
            const dockerfile = fs.readFileSync(path.join(REPO_ROOT, p.dockerfile), "utf8");
            assert.match(dockerfile, new RegExp(`^ARG ${p.base.arg}\\b`, "m"), `${p.dockerfile} declares ARG ${p.base.arg}`);
            for (const arg of pinnedArgs(p)) assert.match(dockerfile, new RegExp(`^ARG ${arg}\\b`, "m"), `${p.dockerfile} declares ARG ${arg}`);
            for (const s of p.sources)
                for (const f of s.scripts)
                    assert.ok(listed(s.fetchSet, f.file, f.digestArg), `fetch-scripts.sh set ${s.fetchSet} lists ${f.file} as ${f.digestArg}`);
        }
    });

    test("TRL's revision changed in the pins only fails, naming the program and both revisions", () => {
        const pins = allPins();
        const black = clone(pins.find((p) => p.image === "trainer-blackbox") as ImagePins);
        const trl = black.sources.find((s) => s.name === "trl");
        assert.ok(trl);
        const next = "1111111111111111111111111111111111111111";
        (trl as { revision: string | null }).revision = next;
        (trl as { factsRevision: string }).factsRevision = next;
        const problems = revisionProblems([...pins.filter((p) => p.image !== "trainer-blackbox"), black], factSources(), pyproject());
        assert.deepEqual(problems, [
            `images/trainer-blackbox.pins.json sources.trl: pins ${next} but components/config/programs.ts reads opencode_hf_sandbox (examples/async_grpo_opencode/opencode_hf_sandbox.py) at 0a942020335908aaf7276f743ddce0c5f4602c30: update the pins and the facts together`,
        ]);
    });

    test("the facts' seed revision changed alone fails for each seed script", () => {
        const facts = factSources().map((f) => (f.repo.startsWith("huggingface:") ? { ...f, revision: "main (read 2027-01-01)" } : f));
        const problems = revisionProblems(allPins(), facts, pyproject());
        assert.equal(problems.length, 3);
        for (const p of problems)
            assert.match(
                p,
                /^images\/trainer-whitebox\.pins\.json sources\.seed: pins main \(read 2026-12-01; the index gave no commit\) but .* at main \(read 2027-01-01\)/,
            );
    });

    test("an OpenEnv revision on one side (pyproject, the sandbox base, the trainer) fails naming both", () => {
        const other = "2222222222222222222222222222222222222222";
        const moved = pyproject().replaceAll("86a180ede21e044f7929b9a7783ad83aa67d83a3", other);
        assert.deepEqual(pyprojectOpenenvRevisions(moved), [other]);
        assert.deepEqual(revisionProblems(allPins(), factSources(), moved), [
            `python/pyproject.toml (opencode extra) names OpenEnv ${other} but images/trainer-blackbox.pins.json sources.openenv names 86a180ede21e044f7929b9a7783ad83aa67d83a3: the sandbox's proxy and the trainer's harness must be one OpenEnv revision`,
        ]);
        const pins = allPins().map((p) =>
            p.image === "sandbox" ? { ...p, base: { ...p.base, ref: "ghcr.io/huggingface/openenv-opencode-sandbox:sha-4026f15" } } : p,
        );
        assert.deepEqual(revisionProblems(pins, factSources(), pyproject()), [
            "images/sandbox.pins.json base: ghcr.io/huggingface/openenv-opencode-sandbox:sha-4026f15 is not the sha-86a180e tag of OpenEnv 86a180ede21e044f7929b9a7783ad83aa67d83a3",
        ]);
    });

    test("a trainer base other than the stack's default vLLM fails", () => {
        assert.deepEqual(revisionProblems(allPins(), factSources(), pyproject(), "vllm/vllm-openai:v0.30.0"), [
            "images/trainer-whitebox.pins.json base: vllm/vllm-openai:v0.29.0 but the stack's default vLLM image (DEFAULT_VLLM_IMAGE) is vllm/vllm-openai:v0.30.0: the trainer's vLLM and the server's must be one version",
            "images/trainer-blackbox.pins.json base: vllm/vllm-openai:v0.29.0 but the stack's default vLLM image (DEFAULT_VLLM_IMAGE) is vllm/vllm-openai:v0.30.0: the trainer's vLLM and the server's must be one version",
        ]);
    });
});

describe("the lock", () => {
    const filled = (): LockFile => ({
        images: {
            "trainer-whitebox": {
                base: `vllm/vllm-openai:v0.29.0@sha256:${"a".repeat(64)}`,
                args: {
                    SEED_REVISION: "3".repeat(40),
                    SEED_SHA256_TRAIN_CODING_WHITEBOX_EVAL: "b".repeat(64),
                    SEED_SHA256_TRAIN_CODING_WHITEBOX: "c".repeat(64),
                    SEED_SHA256_TRAIN_WORDLE_WHITEBOX: "d".repeat(64),
                },
            },
            "trainer-blackbox": {
                base: `vllm/vllm-openai:v0.29.0@sha256:${"a".repeat(64)}`,
                args: {
                    TRL_REVISION: "0a942020335908aaf7276f743ddce0c5f4602c30",
                    TRL_SHA256_OPENCODE_HF_SANDBOX: "e".repeat(64),
                    OPENENV_REVISION: "86a180ede21e044f7929b9a7783ad83aa67d83a3",
                    KERNEL_FLASH_ATTN3_REVISION: "4".repeat(40),
                    KERNEL_FLASH_ATTN3_SHA256: "9".repeat(64),
                },
            },
            sandbox: { base: `ghcr.io/huggingface/openenv-opencode-sandbox:sha-86a180e@sha256:${"f".repeat(64)}`, args: {} },
            mtail: { base: `debian:bookworm-slim@sha256:${"0".repeat(64)}`, args: {} },
        },
    });

    test("a filled lock gives every build ARG, the base by digest", () => {
        for (const name of IMAGE_NAMES) {
            const pins = readPins(name);
            const { args, problems } = buildArgs(pins, filled());
            assert.deepEqual(problems, [], name);
            assert.deepEqual(Object.keys(args).sort(), [pins.base.arg, ...pinnedArgs(pins)].sort(), name);
        }
    });

    test("the committed lock's unfilled entries refuse the build, each naming the command", () => {
        const { problems } = buildArgs(readPins("trainer-whitebox"), readLock());
        assert.deepEqual(problems, [
            "images/lock.json images.trainer-whitebox.base: not filled: run 'npm run images -- lock trainer-whitebox' to record vllm/vllm-openai:v0.29.0 by digest",
            ...["SEED_REVISION", "SEED_SHA256_TRAIN_CODING_WHITEBOX_EVAL", "SEED_SHA256_TRAIN_CODING_WHITEBOX", "SEED_SHA256_TRAIN_WORDLE_WHITEBOX"].map(
                (a) =>
                    `images/lock.json images.trainer-whitebox.args.${a}: not filled: run 'npm run images -- lock trainer-whitebox' (trust on first use: read what it fetched, then commit the lock)`,
            ),
        ]);
    });

    test("a lock made for other pins is refused: another TRL commit, another base, a malformed digest, an ARG no source pins", () => {
        const lock = clone(filled()) as { images: Record<string, { base: string | null; args: Record<string, string | null> }> };
        const black = lock.images["trainer-blackbox"];
        assert.ok(black);
        black.args.TRL_REVISION = "1".repeat(40);
        black.args.TRL_SHA256_OPENCODE_HF_SANDBOX = "E".repeat(64);
        black.args.EXTRA = "x";
        black.base = `vllm/vllm-openai:v0.30.0@sha256:${"a".repeat(64)}`;
        assert.deepEqual(buildArgs(readPins("trainer-blackbox"), lock as unknown as LockFile).problems, [
            `images/lock.json images.trainer-blackbox.base: 'vllm/vllm-openai:v0.30.0@sha256:${"a".repeat(64)}' is not vllm/vllm-openai:v0.29.0@sha256:<64 hex>: the pins name another base; run 'npm run images -- lock trainer-blackbox' again`,
            `images/lock.json images.trainer-blackbox.args.TRL_REVISION: '${"1".repeat(40)}' but images/trainer-blackbox.pins.json pins 0a942020335908aaf7276f743ddce0c5f4602c30: the pins changed after the lock; run 'npm run images -- lock trainer-blackbox' again`,
            `images/lock.json images.trainer-blackbox.args.TRL_SHA256_OPENCODE_HF_SANDBOX: '${"E".repeat(64)}' is not a sha256 (64 lowercase hex)`,
            "images/lock.json images.trainer-blackbox.args.EXTRA: no source of images/trainer-blackbox.pins.json pins it: remove it or run 'npm run images -- lock trainer-blackbox'",
        ]);
    });
});

describe("npm run images", () => {
    test("a stack needs the trainer image of its layout, and the sandbox image on an agent-sandbox pool", () => {
        assert.deepEqual(neededImages(loadRunStack("dev").config), [{ image: "trainer-whitebox", field: ["images", "trainer"] }]);
        assert.deepEqual(neededImages(loadRunStack("staging").config), [
            { image: "trainer-blackbox", field: ["images", "trainer"] },
            { image: "sandbox", field: ["sandboxes", "image"] },
        ]);
    });

    test("a mirror reaches only a Dockerfile that declares its ARG, and every one is declared by a Dockerfile of the images", () => {
        const env = {
            AGENTRL_FETCH_BASE_URL: "http://mirror.example/scripts",
            AGENTRL_OPENENV_GIT_URL: "http://mirror.example/OpenEnv.git",
            AGENTRL_PIP_INDEX_URL: "http://mirror.example/simple",
            AGENTRL_DEBIAN_MIRROR: "http://mirror.example",
        };
        const dockerfile = (image: string) => fs.readFileSync(path.join(REPO_ROOT, readPins(image as (typeof IMAGE_NAMES)[number]).dockerfile), "utf8");
        assert.deepEqual(sourceArgs(dockerfile("trainer-blackbox"), env), {
            AGENTRL_FETCH_BASE_URL: env.AGENTRL_FETCH_BASE_URL,
            OPENENV_GIT_URL: env.AGENTRL_OPENENV_GIT_URL,
            PIP_INDEX_URL: env.AGENTRL_PIP_INDEX_URL,
        });
        assert.deepEqual(sourceArgs(dockerfile("mtail"), env), { DEBIAN_MIRROR: env.AGENTRL_DEBIAN_MIRROR });
        assert.deepEqual(sourceArgs(dockerfile("sandbox"), env), {});
        assert.deepEqual(sourceArgs(dockerfile("trainer-blackbox"), { AGENTRL_PIP_INDEX_URL: "" }), {}, "empty: not set");
        const declared = IMAGE_NAMES.flatMap((n) => Object.keys(sourceArgs(dockerfile(n), env)));
        for (const o of SOURCE_OVERRIDES) assert.ok(declared.includes(o.arg), `${o.arg} is declared by no Dockerfile`);
    });

    test("AGENTRL_BUILD_NETWORK names the builds' network; unset or empty leaves the daemon's default; another word is refused, naming the setting", () => {
        assert.equal(buildNetworkFrom({ [BUILD_NETWORK_ENV]: "host" }), "host");
        assert.equal(buildNetworkFrom({ [BUILD_NETWORK_ENV]: " mirror-net " }), "mirror-net");
        assert.equal(buildNetworkFrom({}), undefined);
        assert.equal(buildNetworkFrom({ [BUILD_NETWORK_ENV]: "" }), undefined);
        assert.throws(
            () => buildNetworkFrom({ [BUILD_NETWORK_ENV]: "host --privileged" }),
            /^Error: AGENTRL_BUILD_NETWORK: 'host --privileged' is not a network docker build takes: host, none, default or a network's name$/,
        );
        assert.match(fs.readFileSync(path.join(REPO_ROOT, "docs", "guides", "images.md"), "utf8"), /`AGENTRL_BUILD_NETWORK=host`/);
    });

    test("every `npm run images` in the docs parses, and names a stack of stacks/, one a guide's stack file creates, or the lock step", () => {
        const commands = docCommands().filter((c) => c.script === "images");
        assert.ok(commands.length >= 2, "docs/guides/images.md shows the lock and the build");
        const known = [...knownStacks(), ...docStacks().map((s) => s.name)];
        for (const c of commands) {
            const a = parseImagesArgs(c.args);
            if (a.kind === "build") assert.ok(known.includes(a.stack), `${c.doc}: ${c.line}`);
        }
        assert.throws(() => parseImagesArgs(["lock", "trainer"]), /unknown image trainer: known are trainer-whitebox, trainer-blackbox, sandbox, mtail/);
        assert.throws(() => parseImagesArgs(["dev", "--to", "https://registry.example.com"]), /--to must be <registry host>\/<path>/);
    });
});

describe("a stack that names no image yet", () => {
    test("loads with placeholders for the fields the step fills, and needs the same images", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-images-pins-"));
        try {
            const file = path.join(dir, "Pulumi.staging.yaml");
            const text = fs
                .readFileSync(path.join(REPO_ROOT, "stacks", "Pulumi.staging.yaml"), "utf8")
                .replace(/^ {4}images:\n {6}trainer: .*\n/m, "")
                .replace(/^ {6}image: registry\.example\.com\/agent-rl\/sandbox:.*\n/m, "");
            fs.writeFileSync(file, text);
            assert.throws(() => loadRunStack("staging", file), /sandboxes\.image: required for the agent-sandbox pool/);
            assert.throws(() => loadForImages("staging", file, undefined), /sandboxes\.image: required/, "without --to there is no placeholder");
            const config = loadForImages("staging", file, "registry.example.com/agent-rl");
            assert.deepEqual(
                neededImages(config).map((n) => n.image),
                ["trainer-blackbox", "sandbox"],
            );
            writeImageRefs(file, [
                { field: ["images", "trainer"], ref: `registry.example.com/agent-rl/trainer-blackbox@sha256:${"a".repeat(64)}` },
                { field: ["sandboxes", "image"], ref: `registry.example.com/agent-rl/sandbox@sha256:${"b".repeat(64)}` },
            ]);
            const loaded = loadRunStack("staging", file).config;
            assert.equal(loaded.images.trainer, `registry.example.com/agent-rl/trainer-blackbox@sha256:${"a".repeat(64)}`);
            assert.equal(loaded.sandboxes.image, `registry.example.com/agent-rl/sandbox@sha256:${"b".repeat(64)}`);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});
