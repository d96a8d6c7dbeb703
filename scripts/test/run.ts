/**
 * `npm test`: the whole test suite, set-up included, so a fresh machine needs nothing but
 * `npm ci && npm test`. In order:
 *
 * 1. Prerequisites: nginx (nginx-light), openssl, Prometheus with promtool (prometheus), mtail,
 *    nginx-prometheus-exporter (prometheus-nginx-exporter), a Docker engine (docker.io), a registry with
 *    htpasswd (docker-registry, apache2-utils; as root), Python >= 3.11
 *    with venv, Go >= 1.26. Missing Debian packages are installed (as root, with apt-get);
 *    otherwise the run stops at once with one message listing what is missing and the command
 *    that gets it.
 *    As root on Linux also the node fixture's packages (ipset, containernetworking-plugins,
 *    busybox-static, debootstrap, runc, iptables, iproute2, gettext-base); elsewhere the node test skips.
 * 2. The Go-built fixtures, each cached outside the repo by its own build script (API server,
 *    real engine, agent-sandbox and JobSet controllers; as root on Linux the node fixture,
 *    test/node/build.sh: forky's containerd 2 unpacked, kubelet, kube-proxy, controller-manager,
 *    scheduler, CoreDNS, the GPU stand-in device plugin, kube-router's NetworkPolicy controller,
 *    the images), the Python venv of the trainer-side lock (python/run-tests.sh --venv-only;
 *    vLLM + TRL + openenv, about 8 GB), and the Harbor fixture (test/harbor/build.sh: Debian trixie's
 *    python3.13 unpacked, a venv with harbor 0.25.0 and openenv 0.10.0, and the stand-in sandbox image's mini-swe-agent venv),
 *    all started at once in the background (startFixtures says
 *    in which order they follow each other).
 * 3. Meanwhile `tsc --noEmit`, the formatter and linter (Biome) and the folder-direction rule
 *    (scripts/lint/layers.ts), then the tests as jobs (testJobs: each TypeScript file, the Python
 *    files that start a simulated cluster, the other Python tests), each started as soon as the
 *    fixtures it needs are built (scripts/test/schedule.ts): one at a time while the API server
 *    and engine fixtures build (the run's longest chain), then up to four, two of them with a
 *    simulated cluster (the engine tests' lock slots), the Python jobs one at a time.
 * 4. A summary that counts skips and names each with its reason; with CI=true any skip fails
 *    the run. Tests deselected on purpose are named apart, with the reason, and are not skips:
 *    the Python tests marked openenv_source need OpenEnv's source tree (OPENENV_SRC, not on
 *    PyPI) and are deselected (-m "not openenv_source") where it is absent, as in CI. Then a
 *    check that no service the tests started (API servers, dockerd, nginx, pulumi, ...) is left
 *    running, and (as root on Linux) that the node fixture left no process, network namespace,
 *    cgroup, mount, veth, CNI cache or host iptables/ipset change (test/node/down.sh --check);
 *    leftovers are named, removed, and fail the run.
 *
 * Arguments: test files to run instead of every test/<folder>/*.test.ts (testFiles in
 * scripts/test/schedule.ts; the Python tests run only when no
 * file is named, or with --python). --no-setup skips steps 1 and 2.
 */
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { NODE_LOCK, nodeLockHolder } from "../../test/helpers/node";
import { FIXTURES, type Fixture, fixturesNeeded, type JobSpec, type Limits, runJobs, testFiles } from "./schedule";

const ROOT = path.resolve(__dirname, "..", "..");
const CI = process.env.CI === "true" || process.env.CI === "1";
const started = Date.now();

function log(msg: string): void {
    process.stderr.write(`[npm test] ${msg}\n`);
}

function has(cmd: string, args: string[] = ["--version"]): boolean {
    const r = spawnSync(cmd, args, { stdio: "ignore" });
    return r.error === undefined && r.status === 0;
}

function which(cmd: string): string | undefined {
    for (const dir of ["/usr/sbin", "/sbin", ...(process.env.PATH ?? "").split(path.delimiter)]) {
        if (dir === "") continue;
        const p = path.join(dir, cmd);
        try {
            fs.accessSync(p, fs.constants.X_OK);
            return p;
        } catch {
            // next
        }
    }
    return undefined;
}

interface Prerequisite {
    readonly what: string;
    readonly present: () => boolean;
    /** Debian packages that provide it. */
    readonly apt?: readonly string[];
    /** How to get it when apt cannot. */
    readonly manual: string;
    /** Needed only as root on Linux (the node fixture; elsewhere its test skips). */
    readonly onlyAsRoot?: boolean;
}

function debInstalled(pkgs: readonly string[]): boolean {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's format field, not a JS template
    const r = spawnSync("dpkg-query", ["-W", "-f=${Status}\\n", ...pkgs], { encoding: "utf8" });
    return r.status === 0 && (r.stdout ?? "").split("\n").filter((l) => l.endsWith("install ok installed")).length === pkgs.length;
}

/** The node fixture's Debian packages (test/node/env.sh's BOOKWORM_PACKAGES). */
const NODE_PACKAGES = [
    "ipset",
    "containernetworking-plugins",
    "busybox-static",
    "debootstrap",
    "runc",
    "iptables",
    "iproute2",
    "openssl",
    "ca-certificates",
    "gettext-base",
] as const;

function goVersionOk(): boolean {
    const r = spawnSync("go", ["env", "GOVERSION"], { encoding: "utf8" });
    const m = /^go(\d+)\.(\d+)/.exec(r.stdout ?? "");
    return m !== null && (Number(m[1]) > 1 || Number(m[2]) >= 26);
}

function pythonOk(): boolean {
    const r = spawnSync("python3", ["-c", "import sys, venv, ensurepip; sys.exit(0 if sys.version_info >= (3, 11) else 1)"], { stdio: "ignore" });
    return r.status === 0;
}

const PREREQUISITES: readonly Prerequisite[] = [
    {
        what: "nginx (the ingress and env-router tests serve the generated config)",
        present: () => which("nginx") !== undefined,
        apt: ["nginx-light"],
        manual: "apt-get install -y nginx-light",
    },
    { what: "openssl (test certificates)", present: () => has("openssl", ["version"]), apt: ["openssl"], manual: "apt-get install -y openssl" },
    {
        what: "Prometheus and promtool (the observability tests: rules checked and unit-tested, a real Prometheus scraping the stack's parts)",
        present: () => which("prometheus") !== undefined && which("promtool") !== undefined,
        apt: ["prometheus"],
        manual: "apt-get install -y prometheus",
    },
    {
        what: "mtail and nginx-prometheus-exporter (the ingress's metrics path)",
        present: () => which("mtail") !== undefined && which("prometheus-nginx-exporter") !== undefined,
        apt: ["mtail", "prometheus-nginx-exporter"],
        manual: "apt-get install -y mtail prometheus-nginx-exporter",
    },
    {
        what: "a Docker engine (the Docker lifecycle test starts its own dockerd)",
        present: () => which("dockerd") !== undefined && which("docker") !== undefined,
        apt: ["docker.io"],
        manual: "apt-get install -y docker.io",
    },
    {
        what: "a registry and htpasswd, debootstrap, git, gpgv and xz (the image step's real build, push and pull: test/tooling/images-build.test.ts)",
        present: () => ["docker-registry", "htpasswd", "debootstrap", "git", "gpgv", "xz"].every((b) => which(b) !== undefined),
        apt: ["docker-registry", "apache2-utils", "debootstrap", "git", "gpgv", "xz-utils"],
        manual: "apt-get install -y docker-registry apache2-utils debootstrap git gpgv xz-utils",
        onlyAsRoot: true,
    },
    {
        what: "Python >= 3.11 with venv (the sandbox backend's tests)",
        present: pythonOk,
        apt: ["python3", "python3-venv"],
        manual: "apt-get install -y python3 python3-venv (Python >= 3.11)",
    },
    {
        what: "the node fixture's packages: ipset, CNI plugins, busybox-static, debootstrap, runc, iptables, iproute2, gettext-base (test/node/)",
        present: () => debInstalled(NODE_PACKAGES),
        apt: NODE_PACKAGES,
        manual: `apt-get install -y --no-install-recommends ${NODE_PACKAGES.join(" ")}`,
        onlyAsRoot: true,
    },
    {
        what: "Go >= 1.26 with the Go module proxy (the API server, engine and controller fixtures)",
        present: goVersionOk,
        manual: "install Go 1.26 or newer from https://go.dev/dl/ (Debian's golang package is older)",
    },
];

function isDebianRoot(): boolean {
    return process.getuid?.() === 0 && fs.existsSync("/etc/debian_version") && which("apt-get") !== undefined;
}

function isLinuxRoot(): boolean {
    return process.platform === "linux" && process.getuid?.() === 0;
}

function ensurePrerequisites(): void {
    const needed = PREREQUISITES.filter((p) => !p.onlyAsRoot || isLinuxRoot());
    let missing = needed.filter((p) => !p.present());
    const installable = missing.filter((p) => p.apt !== undefined);
    if (installable.length > 0 && isDebianRoot()) {
        const pkgs = [...new Set(installable.flatMap((p) => p.apt!))];
        log(`installing ${pkgs.join(" ")} (apt-get)`);
        const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
        for (const args of [["update"], ["install", "-y", "--no-install-recommends", ...pkgs]]) {
            const r = spawnSync("apt-get", args, { stdio: ["ignore", "ignore", "inherit"], env });
            if (r.status !== 0) {
                log(`apt-get ${args.join(" ")} failed (exit ${r.status})`);
                process.exit(1);
            }
        }
        missing = needed.filter((p) => !p.present());
    }
    if (missing.length > 0) {
        log("missing prerequisites:");
        for (const p of missing) log(`  - ${p.what}: ${p.manual}`);
        if (missing.some((p) => p.apt) && !isDebianRoot()) log("(as root on Debian, npm test installs the apt packages itself)");
        process.exit(1);
    }
}

/** Runs a build script in the background, its stderr shown as it comes; exits the run when it fails. */
async function buildStep(label: string, cmd: string, args: string[]): Promise<void> {
    const t0 = Date.now();
    const code = await inGroup(cmd, args, "inherit");
    if (code !== 0) {
        log(`${label} failed (exit ${code}): run \`${cmd} ${args.join(" ")}\` to see why`);
        process.exit(1);
    }
    log(`${label}: ready (${Math.round((Date.now() - t0) / 1000)} s)`);
}

/**
 * Process groups of background work still running (builds, test jobs): ended if the run stops
 * before they do (a failed build exits the run while tests may be running).
 */
const backgroundGroups = new Set<number>();
process.on("exit", () => {
    for (const pgid of backgroundGroups) {
        try {
            process.kill(-pgid, "SIGTERM");
        } catch {
            // already gone
        }
    }
});

/** Runs a command in its own process group (ended if the run stops first), stdout ignored, stderr to `stderr`; resolves to its exit code. */
function inGroup(cmd: string, args: string[], stderr: "inherit" | number): Promise<number> {
    return new Promise((resolve) => {
        const child = spawn(cmd, args, { cwd: ROOT, stdio: ["ignore", "ignore", stderr], detached: true });
        if (child.pid !== undefined) backgroundGroups.add(child.pid);
        let finished = false;
        const done = (code: number) => {
            if (finished) return; // 'error' and 'close' may both come
            finished = true;
            if (child.pid !== undefined) backgroundGroups.delete(child.pid);
            resolve(code);
        };
        child.on("error", () => done(127));
        child.on("close", (code) => done(code ?? 1));
    });
}

/** Runs a command in the background (its own process group), its stderr into a log file; resolves to its exit code and the log's path. */
async function background(cmd: string, args: string[]): Promise<{ code: number; log: string }> {
    const logFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-bg-")), "stderr.log");
    const out = fs.openSync(logFile, "w");
    try {
        return { code: await inGroup(cmd, args, out), log: logFile };
    } finally {
        fs.closeSync(out);
    }
}

/** The node fixture's images that need no Go program (debootstrap, pip: network and disk). */
const NODE_EARLY_IMAGES = ["busybox", "sandbox-runtime", "nginx", "openenv-echo", "trainer-standin"];

interface FixtureBuilds {
    /** Each fixture, resolved when it is ready (a failed build exits the run). */
    readonly ready: ReadonlyMap<Fixture, Promise<void>>;
    /** Resolved when the two large builds (API server, engine) are done. */
    readonly large: Promise<void>;
}

/**
 * Starts the fixture builds, each cached by its own script: the API server and engine fixtures side
 * by side (the engine's kube-controller-manager and kube-scheduler, which share the API server's
 * k8s.io/kubernetes packages, come last in its script, by when the API server's are compiled), the
 * agent-sandbox and JobSet controllers after the API server, the node fixture (as root on Linux)
 * after the engine (its kubelet and kube-proxy share those packages too). The Python venv and the
 * node images (network and disk more than CPU) from the start.
 */
function startFixtures(): FixtureBuilds {
    const t0 = Date.now();
    const venv = background("bash", ["python/run-tests.sh", "--venv-only"]).then(({ code, log: venvLog }) => {
        if (code !== 0) {
            process.stderr.write(fs.readFileSync(venvLog, "utf8").slice(-4000));
            log(`Python venv (the trainer-side lock) failed (exit ${code}): run \`bash python/run-tests.sh --venv-only\` to see why`);
            process.exit(1);
        }
        log(`Python venv (the trainer-side lock): ready (${Math.round((Date.now() - t0) / 1000)} s)`);
    });
    // As the venv; build.sh's own images step waits for it (images.sh's lock) and then finds them
    // current. A failure here is not final: build.sh builds them again and reports its own error.
    const images = isLinuxRoot()
        ? background("bash", ["test/node/images.sh", ...NODE_EARLY_IMAGES]).then((r) =>
              log(`node images (${NODE_EARLY_IMAGES.join(", ")}): ${r.code === 0 ? "ready" : `failed (exit ${r.code}; build.sh tries again; log: ${r.log})`}`),
          )
        : Promise.resolve();
    const apiserver = buildStep("API server fixture", "bash", ["test/apiserver/build.sh"]);
    const engine = buildStep("engine fixture", "bash", ["test/engine/build.sh"]);
    const sandbox = apiserver.then(() => buildStep("agent-sandbox controller", "bash", ["test/sandbox-controller/build.sh"]));
    const jobset = sandbox.then(() => buildStep("JobSet controller", "bash", ["test/jobset-controller/build.sh"]));
    const node = isLinuxRoot()
        ? Promise.all([apiserver, engine, images]).then(() =>
              buildStep(
                  "node fixture (containerd 2, kubelet, kube-proxy, controller-manager, scheduler, CoreDNS, GPU stand-in, kube-router netpol, images)",
                  "bash",
                  ["test/node/build.sh"],
              ),
          )
        : Promise.resolve(log("node fixture: not built (needs root on Linux; test/stack/node.test.ts skips)"));
    // Debian trixie's python3.13, the harbor 0.25 venv and mini-swe-agent's (network and disk, about 1.5 CPU-minutes); it needs apt-get and dpkg-deb.
    const harbor =
        harborMissing() === undefined
            ? buildStep("Harbor fixture (trixie's python3.13, the harbor 0.25 venv, the stand-in image's mini-swe-agent venv)", "bash", [
                  "test/harbor/build.sh",
              ])
            : Promise.resolve(log(`Harbor fixture: not built (${harborMissing()}; python/harbor_tests skips)`));
    const ready = new Map<Fixture, Promise<void>>([
        ["harbor", harbor],
        ["apiserver", apiserver],
        ["engine", engine],
        ["sandbox", sandbox],
        ["jobset", jobset],
        ["node", node],
        ["venv", venv],
    ]);
    return { ready, large: Promise.all([apiserver, engine]).then(() => undefined) };
}

/** Why the Harbor fixture cannot be built here (it fetches Debian trixie's python3.13 with apt-get and dpkg-deb), or undefined. */
function harborMissing(): string | undefined {
    return which("apt-get") !== undefined && which("dpkg-deb") !== undefined ? undefined : "needs apt-get and dpkg-deb (Debian)";
}

/** Nothing to build (--no-setup): every fixture counts as ready. */
function noFixtures(): FixtureBuilds {
    const done = Promise.resolve();
    return { ready: new Map(FIXTURES.map((f) => [f, done])), large: done };
}

/** OpenEnv's opencode env source (not on PyPI), as python/tests/conftest.py resolves it. */
function openenvSourceMissing(): string | undefined {
    const src = process.env.OPENENV_SRC || path.join(os.homedir(), ".cache", "agent-rl-infra", "openenv-src", "envs");
    if (fs.existsSync(path.join(src, "opencode_env", "harness.py"))) return undefined;
    return `OpenEnv's opencode env not found under OPENENV_SRC=${src} (not on PyPI: point OPENENV_SRC at <OpenEnv checkout>/envs)`;
}

interface Skip {
    readonly name: string;
    readonly file: string;
    readonly reason: string;
}

/**
 * Runs a command, its stdout shown as it comes and returned whole. With `lane`, each line shown
 * (stdout and stderr) is prefixed with it, whole lines only, so jobs' reports side by side
 * stay readable.
 */
function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env, lane?: string): Promise<{ code: number; output: string }> {
    return new Promise((resolve) => {
        // Its own process group, ended if the run stops first (a failed fixture build exits the run).
        const child = spawn(cmd, args, { cwd: ROOT, env, stdio: ["ignore", "pipe", lane === undefined ? "inherit" : "pipe"], detached: true });
        if (child.pid !== undefined) backgroundGroups.add(child.pid);
        let output = "";
        const out = prefixedLines(process.stdout, lane);
        const err = prefixedLines(process.stderr, lane);
        // Decoded as UTF-8 by the streams, so a character split across two chunks stays whole.
        child.stdout?.setEncoding("utf8");
        child.stderr?.setEncoding("utf8");
        child.stdout?.on("data", (d: string) => {
            output += d;
            out.data(d);
        });
        child.stderr?.on("data", (d: string) => err.data(d));
        child.on("close", (code) => {
            if (child.pid !== undefined) backgroundGroups.delete(child.pid);
            out.end();
            err.end();
            resolve({ code: code ?? 1, output });
        });
    });
}

/** A writer that passes data on, or with `lane` whole lines prefixed with it (`end` flushes a last partial line). */
function prefixedLines(to: NodeJS.WriteStream, lane: string | undefined): { data(d: string): void; end(): void } {
    let partial = "";
    return {
        data(d) {
            if (lane === undefined) {
                to.write(d);
                return;
            }
            const lines = (partial + d).split("\n");
            partial = lines.pop() ?? "";
            if (lines.length > 0) to.write(lines.map((l) => `${lane} | ${l}\n`).join(""));
        },
        end() {
            if (lane !== undefined && partial !== "") to.write(`${lane} | ${partial}\n`);
            partial = "";
        },
    };
}

/**
 * A test file that starts a simulated cluster through test/helpers/engine-checks.ts takes one of
 * the engine tests' lock slots (each starts its own cluster).
 */
const TAKES_ENGINE_LOCK = /\bstart(HarnessCluster|EngineHarness)\(/;

interface JobResult {
    readonly label: string;
    readonly code: number;
    readonly seconds: number;
    /** node:test's own counts (TypeScript jobs), from its report's summary lines. */
    readonly counts?: { tests: number; pass: number; fail: number };
    readonly skips: Skip[];
    readonly python?: PythonRun;
}

/** The count after `ℹ <name>` in a node:test spec report. */
function reportCount(output: string, name: string): number {
    const m = new RegExp(`^\\u2139 ${name} (\\d+)$`, "m").exec(output);
    return m ? Number(m[1]) : 0;
}

/** Node's test runner over one file, its report lines prefixed with `label`; its counts and the skips it names. */
async function runTestFile(file: string, label: string, reportDir: string): Promise<JobResult> {
    const skipsFile = path.join(reportDir, `skips-${label}.jsonl`);
    const t0 = Date.now();
    const r = await run(
        process.execPath,
        [
            "--import",
            "tsx",
            "--test",
            // Exit once every test and hook has finished: a handle a failed hook left open (a stub
            // server) would otherwise keep the file's process, and the whole run, waiting for ever.
            "--test-force-exit",
            "--test-reporter=spec",
            "--test-reporter-destination=stdout",
            `--test-reporter=${path.join(ROOT, "scripts", "test", "skips-reporter.mjs")}`,
            `--test-reporter-destination=${skipsFile}`,
            file,
        ],
        process.env,
        label,
    );
    const seconds = Math.round((Date.now() - t0) / 1000);
    log(`${file}: ${r.code === 0 ? "passed" : "FAILED"} in ${seconds} s`);
    const skips = fs.existsSync(skipsFile)
        ? fs
              .readFileSync(skipsFile, "utf8")
              .split("\n")
              .filter((l) => l.trim() !== "")
              .map((l) => JSON.parse(l) as Skip)
        : [];
    const counts = { tests: reportCount(r.output, "tests"), pass: reportCount(r.output, "pass"), fail: reportCount(r.output, "fail") };
    return { label, code: r.code, seconds, counts, skips };
}

/**
 * At most two simulated clusters at once (the engine tests' lock slots), four jobs at once in all
 * once the large builds are done, one while they run: the builds are the run's longest chain, and
 * a job beside them takes its CPU from them.
 */
const LIMITS: Limits = { total: 4, cluster: 2, whileBuilding: 1 };

/**
 * A Python test file that starts a simulated cluster: python/tests/cluster_up.ts itself, or
 * test_controller.py's fixture through an import. Such files take the engine tests' lock.
 */
const STARTS_PYTHON_CLUSTER = /cluster_up\.ts|^\s*(import|from) test_controller\b/m;

/** A Python test file that also runs the Harbor fixture's venv (test_harbor_trial.py: Harbor trials on the simulated cluster). */
const USES_HARBOR_FIXTURE = /test\/harbor\/build\.sh/;

/**
 * The Python test files that take the engine tests' lock (STARTS_PYTHON_CLUSTER), as
 * TAKES_ENGINE_LOCK finds the TypeScript ones: each a job of its own; the other Python tests are
 * one job.
 */
function pythonClusterFiles(): string[] {
    const dir = path.join("python", "tests");
    return fs
        .readdirSync(path.join(ROOT, dir))
        .filter((f) => /^test_.*\.py$/.test(f))
        .sort()
        .map((f) => path.join(dir, f))
        .filter((f) => STARTS_PYTHON_CLUSTER.test(fs.readFileSync(path.join(ROOT, f), "utf8")));
}

interface PythonRun {
    readonly code: number;
    readonly output: string;
    readonly noOpenenv: string | undefined;
}

/**
 * python/run-tests.sh with `args` (files, --ignore); without OpenEnv's source, the tests that need it are deselected.
 * `script`: test/harbor/run-tests.sh for the Harbor environment's tests (Python 3.13), which need no OpenEnv source.
 */
async function runPython(lane: string, args: readonly string[], script = "python/run-tests.sh"): Promise<PythonRun> {
    const pyArgs = [script, "-q", "-rs", ...args];
    const noOpenenv = script === "python/run-tests.sh" ? openenvSourceMissing() : undefined;
    if (noOpenenv !== undefined) pyArgs.push("-m", "not openenv_source");
    const t0 = Date.now();
    const py = await run("bash", pyArgs, { ...process.env, CI: CI ? "true" : (process.env.CI ?? "") }, lane);
    log(`${lane}: exit ${py.code} in ${Math.round((Date.now() - t0) / 1000)} s`);
    return { ...py, noOpenenv };
}

/** What the Python runs report: one summary line each, their skips and the tests deselected on purpose. */
function pythonReport(runs: readonly PythonRun[]): { failed: boolean; summary: string; skips: Skip[]; excluded: Skip[] } {
    const skips: Skip[] = [];
    const excluded: Skip[] = [];
    const summaries: string[] = [];
    for (const py of runs) {
        const last =
            py.output
                .trim()
                .split("\n")
                .reverse()
                .find((l) => /\b(passed|failed|error|skipped)\b/.test(l)) ?? "";
        summaries.push(last.replace(/=/g, "").trim() || `exit ${py.code}`);
        for (const m of py.output.matchAll(/^SKIPPED \[\d+\] ([^:]+:\d+): (.*)$/gm)) skips.push({ name: m[1]!, file: "python", reason: m[2]! });
        // Named by python/tests/conftest.py, one EXCLUDED line per deselected test.
        if (py.noOpenenv !== undefined)
            for (const m of py.output.matchAll(/^EXCLUDED (\S+): /gm)) excluded.push({ name: `python/${m[1]!}`, file: "", reason: py.noOpenenv });
    }
    const noOpenenv = runs.find((r) => r.noOpenenv !== undefined)?.noOpenenv;
    if (noOpenenv !== undefined && excluded.length === 0) excluded.push({ name: "python: the tests marked openenv_source", file: "", reason: noOpenenv });
    return { failed: runs.some((r) => r.code !== 0), summary: summaries.join("; "), skips, excluded };
}

/**
 * The jobs, longest first where known: the files that start a simulated cluster (the Python ones,
 * about 250 s each, first), then the Python tests that need none (one pytest run, about 700 s),
 * the node fixture's file (about 500 s), then the other TypeScript files in name order. Each
 * needs what fixturesNeeded finds in it and the modules it imports. The Python jobs run one at a
 * time (group "python": their sessions' proxy listens on a fixed loopback port, 7000).
 */
function testJobs(files: readonly string[], python: boolean, reportDir: string): Array<JobSpec & { start(): Promise<JobResult> }> {
    const pyCluster = python ? pythonClusterFiles() : [];
    const pyJob = (label: string, args: readonly string[], script?: string) => async (): Promise<JobResult> => {
        const t0 = Date.now();
        const py = await runPython(label, args, script);
        return { label, code: py.code, seconds: Math.round((Date.now() - t0) / 1000), skips: [], python: py };
    };
    const tsJob = (file: string) => {
        const label = path.basename(file).replace(/\.test\.ts$/, "");
        return {
            label,
            needs: fixturesNeeded(path.resolve(ROOT, file)),
            cluster: TAKES_ENGINE_LOCK.test(fs.readFileSync(path.resolve(ROOT, file), "utf8")),
            start: () => runTestFile(file, label, reportDir),
        };
    };
    const ts = files.map(tsJob);
    const clusterNeeds: Fixture[] = ["apiserver", "engine", "sandbox", "venv"];
    return [
        ...pyCluster.map((f) => {
            const label = `python-cluster:${path.basename(f, ".py")}`;
            const needs: Fixture[] = USES_HARBOR_FIXTURE.test(fs.readFileSync(path.join(ROOT, f), "utf8")) ? [...clusterNeeds, "harbor"] : clusterNeeds;
            return { label, needs, cluster: true, group: "python", start: pyJob(label, [f]) };
        }),
        ...ts.filter((j) => j.cluster),
        ...(python
            ? [
                  {
                      label: "python",
                      needs: ["venv"] as Fixture[],
                      cluster: false,
                      group: "python",
                      start: pyJob(
                          "python",
                          pyCluster.map((f) => `--ignore=${f}`),
                      ),
                  },
                  // The Harbor environment under harbor 0.25 and 0.26 (python/harbor_tests in both fixture venvs, Python 3.13; the summary is the 0.26 run's last line, a failure in either fails the job); a counted skip where the fixture cannot be built.
                  {
                      label: "python-harbor",
                      needs: ["harbor"] as Fixture[],
                      cluster: false,
                      start:
                          harborMissing() === undefined
                              ? pyJob("python-harbor", [], "test/harbor/run-tests.sh")
                              : async (): Promise<JobResult> => ({
                                    label: "python-harbor",
                                    code: 0,
                                    seconds: 0,
                                    skips: [{ name: "python/harbor_tests", file: "python", reason: `the Harbor fixture ${harborMissing()}` }],
                                }),
                  },
              ]
            : []),
        ...ts.filter((j) => !j.cluster && j.label === "node"),
        ...ts.filter((j) => !j.cluster && j.label !== "node"),
    ];
}

/** Services tests start: any of these alive and started during this run is a leftover. */
const SERVICE =
    /(^|\/)(etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kwok|dockerd|containerd|kubelet|kube-proxy|coredns|kube-router-netpol|gpu-standin|nginx|prometheus|prometheus-nginx-exporter|mtail|docker-registry|pulumi|pulumi-resource-[a-z]+|pulumi-language-[a-z]+|agent-sandbox-controller|jobset-controller)(\s|$)|agent_rl_sandbox\.runtime|(session_counter|role_runner)\.py/;

interface ProcessRow {
    readonly pid: number;
    readonly ppid: number;
    readonly etimes: number;
    readonly args: string;
}

function processTable(): ProcessRow[] {
    const r = spawnSync("ps", ["-eo", "pid=,ppid=,etimes=,args="], { encoding: "utf8" });
    return (r.stdout ?? "")
        .split("\n")
        .map((line) => /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(.*)$/.exec(line))
        .filter((m): m is RegExpExecArray => m !== null)
        .map((m) => ({ pid: Number(m[1]), ppid: Number(m[2]), etimes: Number(m[3]), args: m[4]! }));
}

/** Whether `pid` runs below this runner (`parent`: pid to ppid, from processTable). */
function belowThisRunner(parent: ReadonlyMap<number, number>, pid: number): boolean {
    for (let p = parent.get(pid), hops = 0; p !== undefined && p > 1 && hops < 64; p = parent.get(p), hops++) {
        if (p === process.pid) return true;
    }
    return false;
}

function leftovers(): Array<{ pid: number; args: string }> {
    const runSeconds = (Date.now() - started) / 1000;
    const rows = processTable();
    const parent = new Map(rows.map((p) => [p.pid, p.ppid]));
    // Ours: below this runner, or orphaned (re-parented to init) after this run began. Another
    // session's services on the same machine are neither, and are left alone.
    const ours = (pid: number): boolean => parent.get(pid) === 1 || belowThisRunner(parent, pid);
    return rows
        .filter((p) => p.pid !== process.pid && p.etimes <= runSeconds && ours(p.pid))
        .filter((p) => SERVICE.test(p.args.split(/\s+/)[0] ?? "") || /agent_rl_sandbox\.runtime/.test(p.args))
        .map((p) => ({ pid: p.pid, args: p.args.slice(0, 160) }));
}

/**
 * What the node fixture left (its processes, network namespace, cgroups, mounts, veths, CNI cache,
 * host iptables/ipset changes), named by `test/node/down.sh --check`; when anything is, down.sh
 * removes it. Root on Linux only (elsewhere the node test never ran).
 */
function nodeLeftovers(killed: readonly number[]): string[] {
    if (!isLinuxRoot()) return [];
    const holder = nodeLockHolder();
    const parent = new Map(processTable().map((p) => [p.pid, p.ppid]));
    // A holder this run just killed (re-parented to init before it is gone) is this run's.
    if (holder !== undefined && !killed.includes(holder) && !belowThisRunner(parent, holder)) {
        // Another run's node (a second checkout's npm test on this machine): not ours to check or remove.
        log(`the node fixture is held by pid ${holder} (${NODE_LOCK}), not this run: not checked`);
        return [];
    }
    const check = spawnSync("bash", [path.join(ROOT, "test", "node", "down.sh"), "--check"], { encoding: "utf8" });
    if (check.status === 0) return [];
    const named = (check.stdout ?? "")
        .split("\n")
        .filter((l) => l.startsWith("node fixture left over: "))
        .map((l) => l.slice("node fixture left over: ".length));
    spawnSync("bash", [path.join(ROOT, "test", "node", "down.sh")], { stdio: "ignore" });
    return named.length > 0 ? named : [`test/node/down.sh --check exited ${check.status}: ${(check.stderr ?? "").trim().slice(-300)}`];
}

async function main(): Promise<void> {
    const argv = process.argv.slice(2);
    const setup = !argv.includes("--no-setup");
    const files = argv.filter((a) => !a.startsWith("--"));
    const python = files.length === 0 || argv.includes("--python");
    const everyFile = testFiles(ROOT);
    // A file named by a path it no longer has (test/ was flat before its folders): say where it is now.
    const missing = files.filter((f) => !fs.existsSync(path.resolve(ROOT, f)));
    if (missing.length > 0) {
        for (const f of missing) {
            const now = everyFile.filter((t) => path.basename(t) === path.basename(f));
            log(`${f}: no such file${now.length > 0 ? `; did you mean ${now.join(" or ")}?` : ""}`);
        }
        process.exit(1);
    }
    const chosen = files.length > 0 ? files : everyFile;
    if (setup) ensurePrerequisites();
    // The builds start first and run while everything below does; a failed build exits the run.
    const builds = setup ? startFixtures() : noFixtures();
    // Every test process this run starts may hold a cluster in one of LIMITS.cluster lock slots.
    process.env.AGENT_RL_ENGINE_LOCK_SLOTS = String(LIMITS.cluster);

    let failed = false;
    const tsc = await run(process.execPath, [path.join(ROOT, "node_modules", "typescript", "bin", "tsc"), "--noEmit", "-p", "."]);
    if (tsc.code !== 0) {
        log("tsc --noEmit failed");
        process.exit(1);
    }

    // The formatter and linter (Biome), and the folder-direction rule.
    const lint = await run(process.execPath, [path.join(ROOT, "node_modules", "@biomejs", "biome", "bin", "biome"), "check", "--max-diagnostics=50", "."]);
    const layers = await run(process.execPath, ["--import", "tsx", path.join(ROOT, "scripts", "lint", "layers.ts")]);
    if (lint.code !== 0 || layers.code !== 0) {
        log("lint failed: `npm run format` fixes formatting; the messages above say the rest");
        process.exit(1);
    }

    const reportDir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-test-"));
    const jobs = testJobs(chosen, python, reportDir);
    log(
        `${jobs.length} jobs (${chosen.length} TypeScript file(s)${python ? ", the Python tests" : ""}), each started once the fixtures it needs are built: at most ${LIMITS.whileBuilding} at once while the API server and engine fixtures build, then ${LIMITS.total}, ${LIMITS.cluster} of them with a simulated cluster. Each line of their reports starts with the job's name`,
    );
    for (const j of jobs) log(`  ${j.label}${j.cluster ? " (simulated cluster)" : ""}: needs ${j.needs.length > 0 ? j.needs.join(", ") : "no fixture"}`);
    const results = await runJobs(jobs, builds.ready, builds.large, LIMITS);
    // Every build finished (a job may not have needed the last ones).
    await Promise.all(builds.ready.values());

    const ts = results.filter((r) => r.counts !== undefined);
    const tsFailed = ts.filter((r) => r.code !== 0);
    if (tsFailed.length > 0) failed = true;
    // The TypeScript files' skips, and those of jobs that could not run here at all (python-harbor without apt-get).
    const skips: Skip[] = [...ts, ...results.filter((r) => r.counts === undefined && r.python === undefined)].flatMap((r) => r.skips);
    const pyRuns = results.flatMap((r) => (r.python ? [r.python] : []));
    const total = (k: "tests" | "pass" | "fail") => ts.reduce((n, r) => n + (r.counts?.[k] ?? 0), 0);
    const tsSummary = `${tsFailed.length === 0 ? "passed" : `FAILED (${tsFailed.map((r) => r.label).join(", ")})`}: ${total("tests")} tests, ${total("pass")} passed, ${total("fail")} failed, in ${ts.length} file(s)`;
    log(
        `jobs by time: ${[...results]
            .sort((a, b) => b.seconds - a.seconds)
            .map((r) => `${r.label} ${r.seconds} s`)
            .join(", ")}`,
    );

    let pythonSummary = "not run";
    const excluded: Skip[] = [];
    if (pyRuns.length > 0) {
        const report = pythonReport(pyRuns);
        if (report.failed) failed = true;
        pythonSummary = report.summary;
        skips.push(...report.skips);
        excluded.push(...report.excluded);
    }

    const left = leftovers();
    for (const p of left) {
        try {
            process.kill(p.pid, "SIGKILL");
        } catch {
            // gone meanwhile
        }
    }
    const nodeLeft = nodeLeftovers(left.map((p) => p.pid));

    process.stdout.write("\n");
    log(`TypeScript tests: ${tsSummary}; Python tests: ${pythonSummary}`);
    if (excluded.length > 0) {
        log(`excluded on purpose (deselected, not run, not skips): ${excluded.length}`);
        for (const e of excluded) log(`  - ${e.name}: ${e.reason}`);
    }
    log(`skipped: ${skips.length}`);
    for (const s of skips) log(`  - ${s.file ? `${path.relative(ROOT, s.file) || s.file}: ` : ""}${s.name}: ${s.reason}`);
    if (CI && skips.length > 0) {
        log("CI=true: every skip is a failure (a CI machine must run everything)");
        failed = true;
    }
    if (left.length > 0) {
        log(`left running by the tests (now killed): ${left.length}`);
        for (const p of left) log(`  - ${p.pid} ${p.args}`);
        failed = true;
    } else {
        log("nothing the tests started is left running");
    }
    if (nodeLeft.length > 0) {
        log(`left by the node fixture (now removed by test/node/down.sh): ${nodeLeft.length}`);
        for (const l of nodeLeft) log(`  - ${l}`);
        failed = true;
    }
    log(`${failed ? "FAILED" : "passed"} in ${Math.round((Date.now() - started) / 1000)} s`);
    process.exit(failed ? 1 : 0);
}

void main();
