/**
 * The one-container supervisor (gpuSharing shared on Kubernetes) run for real under dash and
 * bash, with stand-ins for vLLM (a Python HTTP server answering /health) and the trainer: the
 * order (vLLM healthy first), exit codes, stopping the other role, SIGTERM, the load deadline,
 * the NCCL check gate, and per-process env. Also the NCCL check script's argument errors
 * (the GPU part runs on a GPU machine: bench/gpu/nccl-isolation.sh).
 * Run: node --import tsx --test test/training/training-supervisor.test.ts
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import { platformNames } from "../../components/config";
import { pidAlive } from "../helpers/apiserver";
import { freePort } from "../helpers/http";
import { parseWithTestImages as parsePlatformConfig } from "../helpers/config";
import {
    NCCL_CHECK_SCRIPT,
    ROLE_RUNNER,
    oneContainer,
    renderSupervisor,
    resolveTrainingNode,
    shellQuote,
    type SupervisorSpec,
} from "../../components/training";
import { scaled, scaledCount, scaledSeconds } from "../helpers/waits";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-supervisor-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

/**
 * A vLLM stand-in: records its env and pid, answers /health after `delay` s, exits `exitAfter` s in (if given).
 * `healthSeconds`: each /health takes that long to answer (a busy server); `hangAfter`: from that many
 * seconds after it first serves, /health never answers again; `ignoreTerm`: SIGTERM does nothing (a hung process).
 */
function fakeVllm(
    dir: string,
    port: number,
    opts: {
        delay?: number;
        exitAfter?: number;
        exitCode?: number;
        neverHealthy?: boolean;
        healthSeconds?: number;
        hangAfter?: number;
        ignoreTerm?: boolean;
    } = {},
): string[] {
    const code = `
import http.server, json, os, signal, sys, threading, time
open(${JSON.stringify(path.join(dir, "vllm.env"))}, "w").write(json.dumps(dict(os.environ)))
open(${JSON.stringify(path.join(dir, "vllm.pid"))}, "w").write(str(os.getpid()))
if ${opts.ignoreTerm ? "True" : "False"}:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if ${opts.exitAfter ?? -1} >= 0:
    threading.Timer(${opts.exitAfter ?? 0}, lambda: os._exit(${opts.exitCode ?? 7})).start()
time.sleep(${opts.delay ?? 0.3})
started = time.monotonic()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if ${opts.hangAfter ?? -1} >= 0 and time.monotonic() - started >= ${opts.hangAfter ?? 0}:
            time.sleep(3600)
        time.sleep(${opts.healthSeconds ?? 0})
        ok = self.path == "/health" and not ${opts.neverHealthy ? "True" : "False"}
        self.send_response(200 if ok else 503); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", ${port}), H).serve_forever()
`;
    return ["python3", "-c", code];
}

/** A trainer stand-in: records its env, sleeps, writes a marker, exits `code`. */
function fakeTrainer(dir: string, seconds: number, code: number): string[] {
    return [
        "sh",
        "-c",
        `env > ${shellQuote(path.join(dir, "trainer.env"))}; echo $$ > ${shellQuote(path.join(dir, "trainer.pid"))}; sleep ${seconds}; touch ${shellQuote(path.join(dir, "trainer.done"))}; exit ${code}`,
    ];
}

interface Run {
    code: number | null;
    signal: NodeJS.Signals | null;
    stderr: string;
    dir: string;
}

async function runSupervisor(
    shell: string,
    spec: (dir: string, port: number) => SupervisorSpec,
    opts: { sigtermAfterMs?: number; env?: Record<string, string> } = {},
): Promise<Run> {
    const dir = fs.mkdtempSync(path.join(tmp, "run-"));
    const port = await freePort();
    const script = renderSupervisor(spec(dir, port));
    const child = spawn(shell, ["-c", script, "agentrl-supervisor"], { env: { ...process.env, ...(opts.env ?? {}) }, stdio: ["ignore", "inherit", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (d) => (stderr += d));
    if (opts.sigtermAfterMs !== undefined) {
        const t = setTimeout(() => child.kill("SIGTERM"), opts.sigtermAfterMs);
        child.on("exit", () => clearTimeout(t));
    }
    const killer = setTimeout(() => child.kill("SIGKILL"), scaled(30_000));
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on("exit", (c, s) => resolve([c, s])));
    clearTimeout(killer);
    return { code, signal, stderr, dir };
}

function alive(pidFile: string): boolean {
    return fs.existsSync(pidFile) && pidAlive(Number(fs.readFileSync(pidFile, "utf8").trim()));
}

async function gone(pidFile: string): Promise<boolean> {
    for (let i = 0; i < scaledCount(50) && alive(pidFile); i++) await new Promise((r) => setTimeout(r, 100));
    return !alive(pidFile);
}

const base = (dir: string, port: number): Omit<SupervisorSpec, "trainer"> => ({
    vllm: fakeVllm(dir, port),
    vllmEnv: { CUDA_VISIBLE_DEVICES: "0", VLLM_SERVER_DEV_MODE: "1" },
    vllmUnset: ["SANDBOX_API_KEY"],
    trainerEnv: { CUDA_VISIBLE_DEVICES: "1" },
    healthUrl: `http://127.0.0.1:${port}/health`,
    loadSeconds: scaledSeconds(20), // the stand-in vLLM's start: a budget, scaled (waits.ts)
    pollSeconds: 0.2,
});

for (const shell of ["/usr/bin/dash", "/usr/bin/bash"].filter((s) => fs.existsSync(s))) {
    describe(`supervisor under ${path.basename(shell)}`, () => {
        test("vLLM first, the trainer once /health answers; exits with the trainer's code and stops vLLM; env per process", async () => {
            for (const code of [0, 3]) {
                const r = await runSupervisor(shell, (dir, port) => ({ ...base(dir, port), trainer: fakeTrainer(dir, 0.2, code) }), {
                    env: { SANDBOX_API_KEY: "sbx-secret", SHARED: "yes" },
                });
                assert.equal(r.code, code, r.stderr);
                assert.ok(fs.existsSync(path.join(r.dir, "trainer.done")));
                assert.ok(await gone(path.join(r.dir, "vllm.pid")), "vLLM is stopped when the trainer ends");
                const vllmEnv = JSON.parse(fs.readFileSync(path.join(r.dir, "vllm.env"), "utf8"));
                assert.equal(vllmEnv.CUDA_VISIBLE_DEVICES, "0");
                assert.equal(vllmEnv.VLLM_SERVER_DEV_MODE, "1");
                assert.equal(vllmEnv.SANDBOX_API_KEY, undefined, "vLLM never sees the trainer's sandbox key");
                assert.equal(vllmEnv.SHARED, "yes");
                const trainerEnv = fs.readFileSync(path.join(r.dir, "trainer.env"), "utf8");
                assert.match(trainerEnv, /^CUDA_VISIBLE_DEVICES=1$/m);
                assert.match(trainerEnv, /^SANDBOX_API_KEY=sbx-secret$/m);
                assert.doesNotMatch(trainerEnv, /^VLLM_SERVER_DEV_MODE=/m);
                assert.match(r.stderr, /vLLM is healthy: starting the trainer/);
            }
        });

        test("vLLM exiting before it is healthy: exit 1, the trainer never starts", async () => {
            const r = await runSupervisor(shell, (dir, port) => ({
                ...base(dir, port),
                vllm: fakeVllm(dir, port, { delay: 5, exitAfter: 0.3, exitCode: 7 }),
                trainer: fakeTrainer(dir, 0, 0),
            }));
            assert.equal(r.code, 1);
            assert.match(r.stderr, /vLLM exited \(7\) before it was healthy/);
            assert.ok(!fs.existsSync(path.join(r.dir, "trainer.env")), "trainer never started");
        });

        test("vLLM dying during training: the trainer is stopped, exit 1", async () => {
            const r = await runSupervisor(shell, (dir, port) => ({
                ...base(dir, port),
                vllm: fakeVllm(dir, port, { delay: 0.1, exitAfter: 2, exitCode: 9 }),
                trainer: fakeTrainer(dir, scaledSeconds(20), 0),
            }));
            assert.equal(r.code, 1);
            assert.match(r.stderr, /vLLM exited during training: stopping the trainer/);
            assert.ok(!fs.existsSync(path.join(r.dir, "trainer.done")));
            assert.ok(await gone(path.join(r.dir, "trainer.pid")));
        });

        test("SIGTERM (pod deletion): both roles stopped, exit 143", async () => {
            const r = await runSupervisor(shell, (dir, port) => ({ ...base(dir, port), trainer: fakeTrainer(dir, scaledSeconds(20), 0) }), {
                sigtermAfterMs: scaled(2500),
            });
            assert.equal(r.code, 143, r.stderr);
            assert.ok(await gone(path.join(r.dir, "vllm.pid")));
            assert.ok(await gone(path.join(r.dir, "trainer.pid")));
        });

        test("vLLM never healthy within loadSeconds: vLLM stopped, exit 1, no trainer", async () => {
            const r = await runSupervisor(shell, (dir, port) => ({
                ...base(dir, port),
                vllm: fakeVllm(dir, port, { neverHealthy: true }),
                loadSeconds: 2,
                trainer: fakeTrainer(dir, 0, 0),
            }));
            assert.equal(r.code, 1);
            assert.match(r.stderr, /vLLM not healthy after 2 s \(training.modelLoadSeconds\)/);
            assert.ok(await gone(path.join(r.dir, "vllm.pid")));
            assert.ok(!fs.existsSync(path.join(r.dir, "trainer.env")));
        });

        test("a busy vLLM (each /health answers in 2 s, longer than the poll) does not end the run", async () => {
            const r = await runSupervisor(shell, (dir, port) => ({
                ...base(dir, port),
                vllm: fakeVllm(dir, port, { healthSeconds: 2 }),
                unansweredSeconds: 4,
                trainer: fakeTrainer(dir, 9, 0),
            }));
            assert.equal(r.code, 0, r.stderr);
            assert.ok(fs.existsSync(path.join(r.dir, "trainer.done")), "the trainer ran to its end");
            assert.doesNotMatch(r.stderr, /has not answered/);
        });

        test("a vLLM that stops answering /health (and ignores SIGTERM) ends the run after the bound: trainer and vLLM stopped, exit 1", async () => {
            const t0 = Date.now();
            const r = await runSupervisor(shell, (dir, port) => ({
                ...base(dir, port),
                vllm: fakeVllm(dir, port, { hangAfter: scaledSeconds(1), ignoreTerm: true }),
                unansweredSeconds: 3,
                stopGraceSeconds: 2,
                trainer: fakeTrainer(dir, scaledSeconds(25), 0),
            }));
            const took = (Date.now() - t0) / 1000;
            assert.equal(r.code, 1, r.stderr);
            assert.match(r.stderr, /vLLM has not answered http:\/\/127\.0\.0\.1:\d+\/health for 3 s: stopping the trainer and vLLM/);
            assert.ok(!fs.existsSync(path.join(r.dir, "trainer.done")), "the trainer did not run on");
            assert.ok(await gone(path.join(r.dir, "trainer.pid")));
            assert.ok(await gone(path.join(r.dir, "vllm.pid")), "vLLM killed after the grace even though it ignores SIGTERM");
            // Healthy for ~1 s (scaled: the supervisor must see it healthy once), then 3 s without an answer, 2 s of grace (the behaviour), plus polling slack (scaled).
            assert.ok(took >= 4 && took < 5 + scaledSeconds(1) + scaledSeconds(9), `ended after ${took.toFixed(1)} s`);
        });

        test("a failing NCCL check stops everything before vLLM starts", async () => {
            const r = await runSupervisor(shell, (dir, port) => ({
                ...base(dir, port),
                check: ["sh", "-c", "echo 'Cuda failure 101' >&2; exit 1"],
                trainer: fakeTrainer(dir, 0, 0),
            }));
            assert.equal(r.code, 1);
            assert.match(r.stderr, /NCCL check failed \(exit 1\)/);
            assert.ok(!fs.existsSync(path.join(r.dir, "vllm.pid")), "vLLM never started");
        });
    });
}

/** A trainer stand-in writing the Trainer's tqdm bar (no description, total 4) to stderr, one step per `stepSeconds`, then idling `tailSeconds`. */
function barTrainer(dir: string, steps: number, stepSeconds: number, tailSeconds: number, code: number): string[] {
    const bar = Array.from(
        { length: steps },
        (_, i) => `sleep ${stepSeconds}; printf '\\r %d%%|#   | ${i + 1}/4 [00:0${i + 1}<00:03,  1.00it/s]' ${(i + 1) * 25} >&2`,
    ).join("; ");
    return [
        "sh",
        "-c",
        `echo $$ > ${shellQuote(path.join(dir, "trainer.pid"))}; echo "loading the policy"; printf '\\r  0%%|    | 0/4 [00:00<?, ?it/s]' >&2; ${bar}; echo "{'loss': 0.1}"; sleep ${tailSeconds}; exit ${code}`,
    ];
}

async function scrape(port: number): Promise<Record<string, number>> {
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    assert.equal(res.status, 200);
    const out: Record<string, number> = {};
    for (const line of (await res.text()).split("\n")) {
        const m = /^(agentrl_[a-z_]+) ([0-9.e+-]+)$/.exec(line);
        if (m) out[m[1]!] = Number(m[2]);
    }
    return out;
}

describe("supervisor with the role runner (components/training/role_runner.py)", () => {
    const withRunner = (dir: string, port: number, metricsPort: number): Omit<SupervisorSpec, "trainer"> => ({
        ...base(dir, port),
        roleRunner: { path: ROLE_RUNNER.sourcePath, metricsListen: `127.0.0.1:${metricsPort}` },
    });

    test("every line says which role wrote it; the trainer's liveness, step and vLLM health on /metrics; the trainer's exit code", {
        timeout: scaled(60_000),
    }, async () => {
        const metricsPort = await freePort();
        const seen: Record<string, number>[] = [];
        const sampling = (async () => {
            for (let i = 0; i < scaledCount(80); i++) {
                await new Promise((r) => setTimeout(r, 100));
                try {
                    const m = await scrape(metricsPort);
                    seen.push(m);
                    if (m.agentrl_trainer_step === 2) break;
                } catch {
                    // not serving yet
                }
            }
        })();
        const t0 = Date.now() / 1000;
        const runP = runSupervisor("/bin/sh", (dir, port) => ({
            ...withRunner(dir, port, metricsPort),
            trainer: barTrainer(dir, 2, 0.3, 2, 0),
        }));
        await sampling;
        const r = await runP;
        assert.equal(r.code, 0, r.stderr);
        const last = seen.at(-1)!;
        assert.equal(last.agentrl_trainer_up, 1);
        assert.equal(last.agentrl_trainer_step, 2, JSON.stringify(seen));
        assert.equal(last.agentrl_trainer_vllm_healthy, 1);
        assert.ok(last.agentrl_trainer_last_progress_timestamp_seconds! >= t0, "the last step's time is when it was seen");
        assert.equal(seen[0]!.agentrl_trainer_step, 0, "0 before the first step");
        // Supervisor lines keep their own prefix; each role's line carries its role.
        for (const line of r.stderr.split(/[\r\n]/).filter((l) => l !== "")) assert.match(line, /^(agentrl-supervisor: |\[vllm\] |\[trainer\] )/, line);
        assert.match(r.stderr, /\[trainer\] {2}50%\|# {3}\| 2\/4 \[/);
    });

    test("observability off (the runner without a metrics address): each role's lines still prefixed, no listener flags", {
        timeout: scaled(60_000),
    }, async () => {
        const r = await runSupervisor("/bin/sh", (dir, port) => ({
            ...base(dir, port),
            roleRunner: { path: ROLE_RUNNER.sourcePath },
            trainer: barTrainer(dir, 2, 0.3, 2, 0),
        }));
        assert.equal(r.code, 0, r.stderr);
        const lines = r.stderr.split(/[\r\n]/).filter((l) => l !== "");
        for (const line of lines) assert.match(line, /^(agentrl-supervisor: |\[vllm\] |\[trainer\] )/, line);
        assert.ok(
            lines.some((l) => l.startsWith("[trainer] ")),
            r.stderr,
        );
        const script = renderSupervisor({ ...base("/x", 1), roleRunner: { path: "/opt/r.py" }, trainer: ["train"] });
        assert.match(script, /python3 -I -B \/opt\/r\.py --role trainer -- train/);
        assert.doesNotMatch(script, /--metrics-listen|--vllm-health-url/);
    });

    test("exit codes, vLLM dying, SIGTERM and a hung vLLM behave as without the runner; nothing is left behind", { timeout: scaled(90_000) }, async () => {
        const metricsPort = await freePort();
        const ok = await runSupervisor("/bin/sh", (dir, port) => ({ ...withRunner(dir, port, metricsPort), trainer: fakeTrainer(dir, 0.2, 3) }));
        assert.equal(ok.code, 3, ok.stderr);
        assert.ok(await gone(path.join(ok.dir, "vllm.pid")));

        const dying = await runSupervisor("/bin/sh", (dir, port) => ({
            ...withRunner(dir, port, metricsPort),
            vllm: fakeVllm(dir, port, { delay: 0.1, exitAfter: 2, exitCode: 9 }),
            trainer: fakeTrainer(dir, scaledSeconds(20), 0),
        }));
        assert.equal(dying.code, 1);
        assert.match(dying.stderr, /vLLM exited during training: stopping the trainer/);
        assert.ok(await gone(path.join(dying.dir, "trainer.pid")));

        const term = await runSupervisor(
            "/bin/sh",
            (dir, port) => ({ ...withRunner(dir, port, metricsPort), trainer: fakeTrainer(dir, scaledSeconds(20), 0) }),
            {
                sigtermAfterMs: scaled(2500),
            },
        );
        assert.equal(term.code, 143, term.stderr);
        assert.ok(await gone(path.join(term.dir, "vllm.pid")));
        assert.ok(await gone(path.join(term.dir, "trainer.pid")));

        // The supervisor KILLs the runner of a vLLM that ignores SIGTERM: vLLM dies with it (PR_SET_PDEATHSIG).
        const hung = await runSupervisor("/bin/sh", (dir, port) => ({
            ...withRunner(dir, port, metricsPort),
            vllm: fakeVllm(dir, port, { hangAfter: scaledSeconds(1), ignoreTerm: true }),
            unansweredSeconds: 3,
            stopGraceSeconds: 2,
            trainer: fakeTrainer(dir, scaledSeconds(25), 0),
        }));
        assert.equal(hung.code, 1, hung.stderr);
        assert.ok(await gone(path.join(hung.dir, "trainer.pid")));
        assert.ok(await gone(path.join(hung.dir, "vllm.pid")), "vLLM killed with its runner although it ignores SIGTERM");
    });
});

test("the rendered one-container command parses under sh -n for every server layout (quoting of JSON flags)", () => {
    for (const recipe of ["opencode-blackbox"]) {
        for (const layout of ["blackbox", "whitebox-server"] as const) {
            const raw: Record<string, unknown> =
                layout === "blackbox"
                    ? {
                          recipe,
                          runId: "r1",
                          target: { kind: "kubernetes", context: "test" },
                          training: {
                              ncclCheck: true,
                              resumeFromCheckpoint: true,
                              program: "custom",
                              command: ["python", "/app/train.py"],
                              checkpoints: { size: "203Gi" },
                          },
                      }
                    : {
                          runId: "r1",
                          model: { name: "Qwen/Qwen3-1.7B" },
                          target: { kind: "kubernetes", context: "test" },
                          training: { layout, gpusOnNode: 4, vllmGpus: 2, datasetSize: 10, numGenerations: 8, command: ["python", "/app/it's.py"] },
                          envs: { coding: { catalog: "coding" } },
                      };
            const config = parsePlatformConfig(raw, "test");
            const names = platformNames(config);
            const links =
                layout === "blackbox"
                    ? { envUrls: {}, sandbox: { url: names.ingress.sandboxUrl, provider: "agent-sandbox", trainerEnv: {} } }
                    : { envUrls: Object.fromEntries(Object.entries(names.envs).map(([k, v]) => [k, v.url])) };
            const c = oneContainer(resolveTrainingNode(config, names, links));
            const script = c.command![2];
            const r = spawnSync("/bin/sh", ["-n", "-c", script]);
            assert.equal(r.status, 0, `${layout}: ${r.stderr}`);
            if (layout === "whitebox-server") {
                assert.ok(script.includes("CUDA_VISIBLE_DEVICES=0,1") && script.includes("env CUDA_VISIBLE_DEVICES=2,3"), "2 + 2 GPUs split");
                assert.ok(script.includes(`'/app/it'\\''s.py'`), "single quotes survive");
            } else {
                assert.ok(script.includes(`'{"backend":"nccl"}'`));
            }
        }
    }
});

describe("nccl_check.py arguments (no GPU needed)", () => {
    const run = (...args: string[]) => spawnSync("python3", [NCCL_CHECK_SCRIPT, ...args], { encoding: "utf8" });
    test("overlapping GPU sets, missing sets and bad numbers exit 3 with a message", () => {
        let r = run("--spawn", "--vllm-devices", "0,1", "--trainer-devices", "1");
        assert.equal(r.status, 3);
        assert.match(r.stderr, /overlap: the roles need disjoint GPUs/);
        r = run("--spawn");
        assert.equal(r.status, 3);
        assert.match(r.stderr, /--spawn needs --vllm-devices and --trainer-devices/);
        r = run("--rank", "0", "--size-gib", "0");
        assert.equal(r.status, 3);
        r = run("--spawn", "--vllm-devices", "x", "--trainer-devices", "1");
        assert.notEqual(r.status, 0);
        assert.match(r.stderr, /bad device list 'x'/);
    });
});
