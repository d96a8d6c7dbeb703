/**
 * The image step for real: a dockerd (test/helpers/dockerd.ts) and Debian's docker-registry with
 * htpasswd auth on the daemon's loopback, the lock step and the build step run against them
 * (test/helpers/images-driver.ts, inside the daemon's network namespace), the white-box trainer and
 * the sandbox images built from the repository's own Dockerfiles, pushed with a registryAuth, named by
 * digest in a stack file and pulled back by digest.
 *
 * Stand-ins, named: the base image (test/images/standin-base.sh: Debian bookworm + python3, a stub
 * vllm 0.29.0 distribution and a stand-in opencode) is pushed as the stand-in of both
 * vllm/vllm-openai:v0.29.0 and ghcr.io/huggingface/openenv-opencode-sandbox:sha-86a180e, which cannot
 * be pulled here; the seed scripts are stand-in files served as the Hub lays them out; and the trainer
 * lock (trainer/requirements.txt, the heavy pip set) is replaced by an empty stand-in lock, so
 * install-lock.sh runs its real steps (hold the base's vllm, install, compare, pip check) on nothing.
 * Not built here: the black-box trainer (OpenEnv from GitHub) and mtail (apt in the build): no network
 * inside the daemon's namespace.
 * Run: npm test -- --no-setup test/images-build.test.ts (root; dockerd, docker-registry, htpasswd, debootstrap)
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import { buildAndPush } from "../scripts/lib/images/build";
import { IMAGE_NAMES, type LockFile, readLock, REPO_ROOT } from "../scripts/lib/images/pins";
import { loadRunStack } from "../scripts/lib/load-stack";
import { writeImageRefs } from "../scripts/images";
import { type Dockerd, dockerdMissing, startDockerd } from "./helpers/dockerd";
import type { DriverRequest } from "./helpers/images-driver";
import { scaled, scaledCount } from "./helpers/waits";

const REGISTRY = "127.0.0.1:5000";
const USER = "agentrl";
const PASSWORD = "registry-password-for-the-test";
const SEEDS = "sergiopaniego/rl-envs-youtube-livestream-4-scripts";
/** The Hub's commits of the seeds' main: the lock must take the newest at or before 2026-12-01. */
const SEED_COMMIT = "5".repeat(40);
const LATER_COMMIT = "6".repeat(40);
const STANDIN_VLLM = `${REGISTRY}/standin/vllm-openai:v0.29.0`;
const STANDIN_SANDBOX = `${REGISTRY}/standin/openenv-opencode-sandbox:sha-86a180e`;

function which(bin: string): boolean {
    return spawnSync("sh", ["-c", `command -v ${bin}`], { env: { ...process.env, PATH: `${process.env.PATH}:/usr/sbin:/sbin` } }).status === 0;
}
function missing(): string | undefined {
    const d = dockerdMissing();
    if (d) return d;
    const bins = ["docker-registry", "htpasswd", "nsenter", "debootstrap"].filter((b) => !which(b));
    return bins.length > 0 ? `missing ${bins.join(", ")}: apt-get install -y docker-registry apache2-utils util-linux debootstrap` : undefined;
}
const auth = (password: string) => JSON.stringify({ auths: { [REGISTRY]: { auth: Buffer.from(`${USER}:${password}`).toString("base64") } } });
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

describe("images: a real build, push and pull", { skip: missing() }, () => {
    let d: Dockerd;
    let registry: ChildProcess | undefined;
    let scratch: string;
    let netns: string;
    let pinsRoot: string;
    let scriptsDir: string;

    /** Runs the driver in the daemon's network namespace. */
    function drive(req: Omit<DriverRequest, "pinsRoot" | "root" | "scriptsDir" | "hubCommits">): {
        ok: boolean;
        result?: any;
        message?: string;
        stderr: string;
    } {
        const file = path.join(scratch, `request-${Date.now()}.json`);
        const full: DriverRequest = {
            ...req,
            pinsRoot,
            root: REPO_ROOT,
            scriptsDir,
            hubCommits: {
                [SEEDS]: [
                    { id: LATER_COMMIT, date: "2026-12-02T09:00:00.000Z" },
                    { id: SEED_COMMIT, date: "2026-11-30T17:00:00.000Z" },
                ],
            },
        };
        fs.writeFileSync(file, JSON.stringify(full));
        const r = spawnSync(
            "nsenter",
            [`--net=${netns}`, "--", process.execPath, "--import", "tsx", path.join(__dirname, "helpers", "images-driver.ts"), file],
            {
                encoding: "utf8",
                cwd: REPO_ROOT,
                timeout: scaled(900_000),
                env: { ...process.env, DOCKER_HOST: `unix://${d.socket}`, DOCKER_BUILDKIT: "0" },
                maxBuffer: 64 * 1024 * 1024,
            },
        );
        const line = r.stdout.trim().split("\n").pop() ?? "";
        try {
            return { ...JSON.parse(line), stderr: r.stderr };
        } catch {
            throw new Error(`the driver printed no result (exit ${r.status}):\n${r.stderr}\n${r.stdout}`);
        }
    }

    before(async () => {
        scratch = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-images-"));
        d = await startDockerd();
        const pid = fs.readFileSync(path.join(path.dirname(d.socket), "dockerd.pid"), "utf8").trim();
        netns = `/proc/${pid}/ns/net`;
        // The registry, with htpasswd (bcrypt) auth, on the daemon's loopback.
        const htpasswd = spawnSync("htpasswd", ["-Bbn", USER, PASSWORD], { encoding: "utf8" });
        assert.equal(htpasswd.status, 0, htpasswd.stderr);
        fs.writeFileSync(path.join(scratch, "htpasswd"), htpasswd.stdout);
        fs.writeFileSync(
            path.join(scratch, "registry.yml"),
            [
                "version: 0.1",
                "log: { level: warn }",
                `storage: { filesystem: { rootdirectory: ${scratch}/registry-data } }`,
                `http: { addr: "${REGISTRY}" }`,
                `auth: { htpasswd: { realm: agentrl-test, path: ${scratch}/htpasswd } }`,
                "",
            ].join("\n"),
        );
        registry = spawn("nsenter", [`--net=${netns}`, "--", "docker-registry", "serve", path.join(scratch, "registry.yml")], {
            stdio: ["ignore", "ignore", fs.openSync(path.join(scratch, "registry.log"), "a")],
        });
        let status = "";
        for (let i = 0; i < scaledCount(100) && status !== "401"; i++) {
            status = spawnSync("nsenter", [`--net=${netns}`, "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", `http://${REGISTRY}/v2/`], {
                encoding: "utf8",
            }).stdout;
            if (status !== "401") await new Promise((r) => setTimeout(r, 200));
        }
        assert.equal(status, "401", `the registry did not ask for credentials on ${REGISTRY}:\n${fs.readFileSync(path.join(scratch, "registry.log"), "utf8")}`);

        // The stand-in base, pushed under both stand-in names (the CLI's own login: the daemon's config dir).
        const base = spawnSync("bash", [path.join(__dirname, "images", "standin-base.sh"), path.join(scratch, "base.tar")], {
            encoding: "utf8",
            timeout: scaled(1_200_000),
        });
        assert.equal(base.status, 0, base.stderr);
        fs.mkdirSync(path.join(path.dirname(d.socket), "cli"), { recursive: true });
        fs.writeFileSync(path.join(path.dirname(d.socket), "cli", "config.json"), auth(PASSWORD));
        d.docker(["import", path.join(scratch, "base.tar"), STANDIN_VLLM], { timeoutMs: 600_000 });
        d.docker(["tag", STANDIN_VLLM, STANDIN_SANDBOX]);
        d.docker(["push", STANDIN_VLLM], { timeoutMs: 600_000 });
        d.docker(["push", STANDIN_SANDBOX], { timeoutMs: 600_000 });

        // The pins with the stand-in bases, and the repository's (unfilled) lock.
        pinsRoot = path.join(scratch, "pins");
        fs.mkdirSync(path.join(pinsRoot, "images"), { recursive: true });
        for (const name of IMAGE_NAMES) {
            const pins = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, "images", `${name}.pins.json`), "utf8"));
            if (name.startsWith("trainer-")) pins.base.ref = STANDIN_VLLM;
            if (name === "sandbox") pins.base.ref = STANDIN_SANDBOX;
            fs.writeFileSync(path.join(pinsRoot, "images", `${name}.pins.json`), JSON.stringify(pins));
        }
        fs.copyFileSync(path.join(REPO_ROOT, "images", "lock.json"), path.join(pinsRoot, "images", "lock.json"));
        // The stand-in seed scripts, where the Hub serves a file at a commit.
        scriptsDir = path.join(scratch, "scripts");
        const at = path.join(scriptsDir, SEEDS, "resolve", SEED_COMMIT);
        fs.mkdirSync(at, { recursive: true });
        for (const f of ["train_coding_whitebox_eval.py", "train_coding_whitebox.py", "train_wordle_whitebox.py"])
            fs.writeFileSync(path.join(at, f), `# STAND-IN for the seeds' ${f} (test/images-build.test.ts)\nprint("${f}")\n`);
        fs.writeFileSync(path.join(scratch, "requirements-standin.txt"), "# STAND-IN trainer lock (test/images-build.test.ts): nothing to install\n");
    });

    after(async () => {
        registry?.kill("SIGKILL");
        await d?.stop();
        if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
    });

    const replace = () => ({ "trainer/requirements.txt": path.join(scratch, "requirements-standin.txt") });

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

    test("the lock step records each base by digest, the seeds' commit as of the facts' day and each script's sha256", () => {
        const r = drive({ mode: "lock", images: ["trainer-whitebox", "sandbox"], to: "", dockerConfigJson: auth(PASSWORD) });
        assert.ok(r.ok, `${r.message}\n${r.stderr}`);
        const lock = readLock(pinsRoot) as LockFile;
        const pushed = d.docker(["inspect", "--format", "{{index .RepoDigests 0}}", STANDIN_VLLM]).stdout.trim();
        assert.equal(lock.images["trainer-whitebox"].base, `${STANDIN_VLLM}@${pushed.split("@")[1]}`);
        assert.match(lock.images.sandbox.base ?? "", /^127\.0\.0\.1:5000\/standin\/openenv-opencode-sandbox:sha-86a180e@sha256:[0-9a-f]{64}$/);
        assert.equal(lock.images["trainer-whitebox"].args.SEED_REVISION, SEED_COMMIT);
        const script = fs.readFileSync(path.join(scriptsDir, SEEDS, "resolve", SEED_COMMIT, "train_wordle_whitebox.py"), "utf8");
        assert.equal(lock.images["trainer-whitebox"].args.SEED_SHA256_TRAIN_WORDLE_WHITEBOX, sha256(script));
        // The images it was not asked to lock keep the repository's (unfilled) entries.
        assert.equal(lock.images["trainer-blackbox"].args.TRL_SHA256_OPENCODE_HF_SANDBOX, null);
    });

    test("a wrong registry password fails before any build, naming the registry and the user", () => {
        const r = drive({ mode: "build", images: ["sandbox"], to: `${REGISTRY}/agent-rl`, dockerConfigJson: auth("wrong-password") });
        assert.equal(r.ok, false);
        assert.equal(
            r.message,
            `sandbox: ${REGISTRY}: refused the registryAuth credentials of user '${USER}' (wrong password?): fix auths["${REGISTRY}"] in registryAuth`,
        );
    });

    let refs: Record<string, string> = {};
    test("builds the white-box trainer and the sandbox image from the real Dockerfiles and pushes them; the same inputs push nothing new", () => {
        const first = drive({
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
        assert.match(first.stderr, /trainer-whitebox: install-lock: holding 1 packages of the base image \(vllm==0\.29\.0, \)/);
        refs = Object.fromEntries(first.result.map((b: { image: string; ref: string }) => [b.image, b.ref]));
        const again = drive({
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

    test("the stack names them by digest, and the Docker target pulls them by digest", () => {
        assert.ok(refs["trainer-whitebox"], "built above");
        const stackFile = path.join(scratch, "Pulumi.images-dev.yaml");
        fs.copyFileSync(path.join(REPO_ROOT, "stacks", "Pulumi.dev.yaml"), stackFile);
        writeImageRefs(stackFile, [{ field: ["images", "trainer"], ref: refs["trainer-whitebox"] as string }]);
        assert.equal(loadRunStack("images-dev", stackFile).config.images.trainer, refs["trainer-whitebox"]);
        assert.match(fs.readFileSync(stackFile, "utf8"), /# Your trainer image: TRL 1\.16/, "the stack file's comments stay");
        // As the Docker provider's RemoteImage pulls: by the name the stack gives, from a daemon that lacks it.
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
    });

    test("a changed script fails the build naming the file and both digests", () => {
        const file = path.join(scriptsDir, SEEDS, "resolve", SEED_COMMIT, "train_wordle_whitebox.py");
        const pinned = sha256(fs.readFileSync(file, "utf8"));
        fs.appendFileSync(file, "# changed upstream after the lock\n");
        // Another repository, so the inputs' tag is not found and the build runs.
        const r = drive({ mode: "build", images: ["trainer-whitebox"], to: `${REGISTRY}/elsewhere`, dockerConfigJson: auth(PASSWORD), replace: replace() });
        assert.equal(r.ok, false);
        assert.match(r.message ?? "", /^trainer-whitebox: docker build -f trainer\/whitebox\/Dockerfile failed/);
        assert.ok(
            r.message?.includes(`train_wordle_whitebox.py (`) &&
                r.message.includes(`sha256 mismatch: expected ${pinned} (SEED_SHA256_TRAIN_WORDLE_WHITEBOX), got ${sha256(fs.readFileSync(file, "utf8"))}`),
            r.message,
        );
    });
});
