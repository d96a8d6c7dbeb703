/**
 * The programs behind the project's own series (components/observability/), each run for real:
 * - the metrics-only nginx in front of vLLM (real nginx, a vLLM-shaped stand-in behind it, named so);
 * - the ingress's metrics path: real nginx writing its JSON log also to a file and serving stub_status
 *   on loopback, real mtail (Debian's) over the file, real nginx-prometheus-exporter (Debian's) over
 *   stub_status;
 * - the session counter beside a real OpenEnv 0.10 server (create_app, the uvicorn CLI, from the
 *   trainer-side venv) with real WebSocket sessions opened and closed.
 * - the session counter, the capacity responder and the role runner from directories holding exactly
 *   their ConfigMaps' files (the shared /metrics server beside each), as python3 -I -B runs them.
 * The supervisor's role runner is tested in training-supervisor.test.ts, the capacity responder's
 * counter in env-router.test.ts.
 * Run: node --import tsx --test test/observability/observability-programs.test.ts
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import WebSocket from "ws";
import { startLocalIngress, type LocalIngress } from "../../components/ingress/local";
import { rotatingAccessLogCommand } from "../../components/ingress/metrics";
import { renderNginxConfig, validateProxySettings } from "../../components/ingress/nginx";
import { INGRESS_MTAIL, SESSION_COUNTER, renderVllmMetricsProxy, sessionCounterCommand, validateVllmMetricsProxy } from "../../components/observability";
import { SERIES } from "../../components/shared/metrics";
import { responderCommand } from "../../components/env/responder";
import { projectMetricsPrograms } from "../../components/platform/observability";
import { parseWithTestImages } from "../helpers/config";
import { platformManifests } from "../helpers/observability";
import { OBSERVABILITY_ON } from "../helpers/observability";
import { pidAlive } from "../helpers/apiserver";
import { freePort } from "../helpers/http";
import { skipWithoutNginx } from "../helpers/nginx";
import { sampleValue, scrape, startProgram, type Started, stopAll } from "../helpers/processes";
import { LOCK_VENV_HINT, lockVenvPython } from "../helpers/stub-env";
import { startStubUpstream, type StubUpstream } from "../helpers/stub-upstream";
import { startVllmMetricsStandIn, type VllmMetricsStandIn } from "../helpers/stub-vllm-metrics";
import { pollUntil, scaled } from "../helpers/waits";

const REPO = path.resolve(__dirname, "..", "..");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-obs-programs-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function which(bin: string): string | undefined {
    const r = spawnSync("sh", ["-c", `command -v ${bin}`], { encoding: "utf8" });
    return r.status === 0 ? r.stdout.trim() : undefined;
}
const MTAIL = which("mtail");
const EXPORTER = which("prometheus-nginx-exporter");

/** Waits (bounded, scaled by the machine's load: waits.ts) until `check` holds, else throws the last failure. */
async function eventually(what: string, check: () => Promise<void>, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + scaled(timeoutMs);
    for (;;) {
        try {
            await check();
            return;
        } catch (e) {
            if (Date.now() > deadline) throw new Error(`${what}: ${(e as Error).message}`);
            await sleep(150);
        }
    }
}

describe("settings of the metrics paths: every problem named with its fix", () => {
    test("ingress: metricsAccessLog and stubStatusListen", () => {
        const errs = validateProxySettings({ upstream: "v:8000", metricsAccessLog: "/var/log/../x", stubStatusListen: "0.0.0.0:9114" });
        assert.deepEqual(errs, [
            'metricsAccessLog: "/var/log/../x" must be an absolute path of [A-Za-z0-9._/+@=-] without ".." (or "off")',
            'stubStatusListen: "0.0.0.0:9114" must be a loopback "127.x.y.z:port" other than the listen port (e.g. "127.0.0.1:9114"), or "off": stub_status is read by the exporter beside nginx, never by a client',
        ]);
        assert.equal(validateProxySettings({ upstream: "v:8000", stubStatusListen: "127.0.0.1:8080" }).length, 1, "the listen port itself is refused");
        const off = renderNginxConfig({ upstream: "v:8000" });
        assert.doesNotMatch(off, /stub_status|access\.json/, "both off by default");
    });

    test("vLLM metrics proxy: listen, upstream, runtime dir", () => {
        assert.deepEqual(validateVllmMetricsProxy({ listenAddress: "all", listenPort: 70000, upstream: "localhost", runtimeDir: "/tmp/x/" }), [
            'listenAddress: "all" must be an IPv4 address such as "0.0.0.0"',
            "listenPort: 70000 must be an integer 1..65535",
            'upstream: "localhost" must be "ipv4:port" of vLLM on the pod\'s loopback, e.g. "127.0.0.1:8000"',
            'runtimeDir: "/tmp/x/" must be an absolute path of [A-Za-z0-9._/+@=-] without ".." or a trailing "/"',
        ]);
        assert.deepEqual(validateVllmMetricsProxy({ listenPort: 8000 }), [
            "listenPort: 8000 is vLLM's own port; the metrics listener needs a port of its own (default 9400)",
        ]);
        assert.throws(() => renderVllmMetricsProxy({ listenPort: 0 }), /listenPort: 0 must be an integer 1\.\.65535/);
    });
});

describe("the metrics-only nginx in front of a vLLM-shaped stand-in", { skip: skipWithoutNginx }, () => {
    let standIn: VllmMetricsStandIn;
    let nginx: Started;
    let base = "";
    before(async () => {
        standIn = await startVllmMetricsStandIn();
        const port = await freePort();
        const dir = fs.mkdtempSync(path.join(tmp, "vllm-metrics-"));
        const conf = path.join(dir, "nginx.conf");
        fs.writeFileSync(conf, renderVllmMetricsProxy({ listenAddress: "127.0.0.1", listenPort: port, upstream: standIn.address, runtimeDir: dir }));
        base = `http://127.0.0.1:${port}`;
        nginx = await startProgram("nginx", ["-p", dir, "-c", conf, "-e", "stderr", "-g", "daemon off;"], { readyUrl: `${base}/metrics` });
    });
    after(async () => {
        await stopAll(
            () => nginx?.stop(),
            () => standIn?.stop(),
        );
    });

    test("GET /metrics is vLLM's own exposition", async () => {
        standIn.requests.length = 0;
        const res = await fetch(`${base}/metrics`);
        assert.equal(res.status, 200);
        assert.match(await res.text(), /^vllm:kv_cache_usage_perc\{engine="0",model_name="[^"]+"\} 0\.25$/m);
        assert.deepEqual(standIn.requests, [{ method: "GET", target: "/metrics" }]);
    });

    test("the weight-sync routes, other paths, other methods and other spellings of /metrics never reach vLLM", async () => {
        standIn.requests.length = 0;
        const refused: Array<[string, string, number]> = [
            ["POST", "/update_weights", 404],
            ["POST", "/pause", 404],
            ["POST", "/resume", 404],
            ["POST", "/collective_rpc", 404],
            ["POST", "/init_weight_transfer_engine", 404],
            ["GET", "/health", 404],
            ["POST", "/v1/chat/completions", 404],
            ["POST", "/metrics", 405],
            ["PUT", "/metrics", 405],
            ["HEAD", "/metrics", 405],
            ["GET", "/metrics?name[]=x", 404],
            ["GET", "/metrics/", 404],
            ["GET", "//metrics", 404],
            ["GET", "/%6detrics", 404],
            ["GET", "/x/../metrics", 404],
        ];
        for (const [method, target, status] of refused) {
            const res = await rawRequest(base, method, target);
            assert.equal(res, status, `${method} ${target}`);
        }
        assert.deepEqual(standIn.requests, [], "nothing but GET /metrics is ever forwarded");
    });
});

/** One request with the exact target on the wire (fetch would normalise it); resolves with the status. */
async function rawRequest(base: string, method: string, target: string): Promise<number> {
    const u = new URL(base);
    const net = await import("node:net");
    return new Promise((resolve, reject) => {
        const s = net.connect(Number(u.port), u.hostname, () => {
            s.write(`${method} ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
        });
        let data = "";
        s.setTimeout(5000, () => s.destroy(new Error(`${method} ${target}: no answer in 5 s`)));
        s.on("data", (d) => (data += d.toString()));
        s.on("end", () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0)));
        s.on("error", reject);
    });
}

const INGRESS_KEY = "obs-key-0123456789abcdef0123456789";
const skipIngress =
    skipWithoutNginx ||
    (MTAIL === undefined ? "needs mtail (apt-get install -y mtail)" : false) ||
    (EXPORTER === undefined ? "needs prometheus-nginx-exporter (apt-get install -y prometheus-nginx-exporter)" : false);

describe("the ingress's metrics path: JSON log to a file + mtail, stub_status + nginx-prometheus-exporter", { skip: skipIngress }, () => {
    let upstream: StubUpstream;
    let ing: LocalIngress;
    let mtail: Started;
    let exporter: Started;
    let mtailUrl = "";
    let exporterUrl = "";
    let logFile = "";

    before(async () => {
        upstream = await startStubUpstream();
        const dir = fs.mkdtempSync(path.join(tmp, "ingress-"));
        logFile = path.join(dir, "access.json");
        const progs = path.join(dir, "progs");
        fs.mkdirSync(progs);
        fs.copyFileSync(INGRESS_MTAIL.sourcePath, path.join(progs, INGRESS_MTAIL.file));
        const stubPort = await freePort();
        ing = await startLocalIngress({
            upstream: upstream.url,
            keys: [{ name: "pool-a", key: INGRESS_KEY }],
            settings: { metricsAccessLog: logFile, stubStatusListen: `127.0.0.1:${stubPort}`, rateLimitPerSecond: 1, rateLimitBurst: 0 },
        });
        const mtailPort = await freePort();
        mtailUrl = `http://127.0.0.1:${mtailPort}/metrics`;
        mtail = await startProgram(
            MTAIL!,
            ["-progs", progs, "-logs", logFile, "-address", "127.0.0.1", "-port", String(mtailPort), "-emit_prog_label=false", "-logtostderr"],
            { readyUrl: mtailUrl },
        );
        const exporterPort = await freePort();
        exporterUrl = `http://127.0.0.1:${exporterPort}/metrics`;
        exporter = await startProgram(
            EXPORTER!,
            [`-nginx.scrape-uri=http://127.0.0.1:${stubPort}/stub_status`, `-web.listen-address=127.0.0.1:${exporterPort}`],
            { readyUrl: exporterUrl },
        );
    });
    after(async () => {
        await stopAll(
            () => exporter?.stop(),
            () => mtail?.stop(),
            () => ing?.stop(),
            () => upstream?.stop(),
        );
    });

    test("responses by status and key name (never the key), durations by key, with the stdout log unchanged", { timeout: scaled(30_000) }, async () => {
        // mtail reads a file from its end: wait for it to tail the (empty) log nginx created, then send.
        await eventually("mtail tails the log", async () => assert.match(mtail.output(), /Tailing .*access\.json/));
        const chat = (key?: string) =>
            fetch(`${ing.url}/v1/chat/completions`, {
                method: "POST",
                headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
                body: JSON.stringify({ model: "m", messages: [] }),
            }).then(async (r) => {
                await r.text();
                return r.status;
            });
        assert.equal(await chat(INGRESS_KEY), 200);
        assert.equal(await chat(INGRESS_KEY), 429, "rate limit 1/s, burst 0");
        assert.equal(await chat(), 401);
        assert.equal(await chat("wrong-key"), 401);
        assert.equal((await fetch(`${ing.url}/nope`)).status, 404);
        await eventually("mtail counted every response", async () => {
            const s = await scrape(mtailUrl);
            assert.equal(sampleValue(s, SERIES.ingressRequests, { status: "200", key: "pool-a" }), 1);
            assert.equal(sampleValue(s, SERIES.ingressRequests, { status: "429", key: "pool-a" }), 1);
            assert.equal(sampleValue(s, SERIES.ingressRequests, { status: "401", key: "none" }), 2);
            assert.equal(sampleValue(s, SERIES.ingressRequests, { status: "404", key: "none" }), 1);
            assert.equal(sampleValue(s, `${SERIES.ingressRequestSeconds}_count`, { key: "pool-a" }), 2);
            assert.equal(sampleValue(s, `${SERIES.ingressRequestSeconds}_bucket`, { key: "none", le: "+Inf" }), 3);
            // A 0.000 s response still lands in the first bucket (see ingress.mtail).
            assert.equal(sampleValue(s, `${SERIES.ingressRequestSeconds}_bucket`, { key: "none", le: "0.005" }), 3);
            const own = s.filter((x) => x.name.startsWith("agentrl_"));
            for (const x of own) {
                assert.deepEqual(
                    Object.keys(x.labels)
                        .filter((k) => k !== "le")
                        .sort(),
                    x.name === SERIES.ingressRequests ? ["key", "status"] : ["key"],
                    x.name,
                );
                assert.ok(!Object.values(x.labels).some((v) => v.includes(INGRESS_KEY) || v === "wrong-key"), "never a key, only its name");
            }
        });
        const fileLines = fs.readFileSync(logFile, "utf8").trim().split("\n");
        const stdoutLines = fs.readFileSync(ing.accessLogPath, "utf8").trim().split("\n");
        assert.equal(fileLines.length, 5);
        assert.deepEqual(fileLines, stdoutLines, "the same JSON lines in both logs");
    });

    test("nginx-prometheus-exporter reads stub_status on loopback; the public port has no stub_status", async () => {
        const s = await scrape(exporterUrl);
        assert.equal(sampleValue(s, "nginx_up"), 1);
        assert.ok((sampleValue(s, "nginx_http_requests_total") ?? 0) >= 5);
        assert.ok((sampleValue(s, "nginx_connections_active") ?? 0) >= 1);
        assert.equal((await fetch(`${ing.url}/stub_status`)).status, 404);
        assert.match(ing.configText, /listen 127\.0\.0\.1:\d+;\n\s+access_log off;\n\s+location = \/stub_status/);
    });
});

describe("the ingress's JSON access log stays bounded: rotated beside nginx as the pod does, every line still counted", { skip: skipIngress }, () => {
    let upstream: StubUpstream;
    let ing: LocalIngress;
    let mtail: Started;
    let mtailUrl = "";
    let logFile = "";
    let dir = "";
    // Small, so a few requests cross it: every 300 ms, above 1000 bytes (about 4 lines).
    const rotation = () => ({ file: logFile, maxBytes: 1000, everySeconds: 0.3 });

    before(async () => {
        upstream = await startStubUpstream();
        // nginx's workers reopen the log themselves (nginx docs, Rotating Log-files): run as root here, nginx
        // runs them as nobody, who must reach the directory (the pod runs master and workers as one uid).
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-obs-rotated-"));
        fs.chmodSync(dir, 0o755);
        logFile = path.join(dir, "access.json");
        const progs = path.join(dir, "progs");
        fs.mkdirSync(progs);
        fs.copyFileSync(INGRESS_MTAIL.sourcePath, path.join(progs, INGRESS_MTAIL.file));
        // The deployed container's command line (rotatingAccessLogCommand) around nginx's.
        ing = await startLocalIngress({
            upstream: upstream.url,
            keys: [{ name: "pool-a", key: INGRESS_KEY }],
            settings: { metricsAccessLog: logFile },
            launcher: (nginx) => rotatingAccessLogCommand(nginx, rotation()),
        });
        const mtailPort = await freePort();
        mtailUrl = `http://127.0.0.1:${mtailPort}/metrics`;
        mtail = await startProgram(
            MTAIL!,
            ["-progs", progs, "-logs", logFile, "-address", "127.0.0.1", "-port", String(mtailPort), "-emit_prog_label=false", "-logtostderr"],
            { readyUrl: mtailUrl },
        );
    });
    after(async () => {
        await stopAll(
            () => mtail?.stop(),
            () => ing?.stop(),
            () => upstream?.stop(),
            async () => {
                if (dir !== "") fs.rmSync(dir, { recursive: true, force: true });
            },
        );
    });

    test("three rounds of 10 responses, each past the limit: the file replaced, nginx writing to the new one, mtail counting all 30; stdout holds all 30", {
        timeout: scaled(60_000),
    }, async () => {
        await eventually("mtail tails the log", async () => assert.match(mtail.output(), /Tailing .*access\.json/));
        for (let round = 1; round <= 3; round++) {
            for (let i = 0; i < 10; i++) {
                const r = await fetch(`${ing.url}/v1/chat/completions`, {
                    method: "POST",
                    headers: { "content-type": "application/json", authorization: `Bearer ${INGRESS_KEY}` },
                    body: "{}",
                });
                await r.text();
                assert.equal(r.status, 200);
            }
            // Rounds 2 and 3 land in files put in place by a rotation: counted only if nginx reopened the path.
            await eventually(`mtail counted round ${round}`, async () =>
                assert.equal(sampleValue(await scrape(mtailUrl), SERIES.ingressRequests, { status: "200", key: "pool-a" }), 10 * round),
            );
            // 10 lines are past 1000 bytes: within a few checks the loop puts a new file in its place.
            await eventually(`round ${round}: the log replaced`, async () => assert.ok(fs.statSync(logFile).size < 1000, `${fs.statSync(logFile).size} bytes`));
        }
        assert.equal(fs.readFileSync(ing.accessLogPath, "utf8").trim().split("\n").length, 30, "the stdout log is not rotated");
        assert.ok(fs.readFileSync(logFile, "utf8").split("\n").length < 10, "the file holds only the lines since the last rotation");
        // nginx still answers, under the same master (the shell exec'd it).
        assert.equal((await fetch(`${ing.url}/nope`)).status, 404);
    });
});

const python = lockVenvPython();

describe("the session counter beside a real OpenEnv 0.10 server", { skip: python === undefined ? `no trainer-side venv (${LOCK_VENV_HINT})` : false }, () => {
    let server: Started;
    let counter: Started;
    let envPort = 0;
    let metricsUrl = "";
    const sockets: WebSocket[] = [];

    before(async () => {
        envPort = await freePort();
        const uvicorn = path.join(path.dirname(python!), "uvicorn");
        // OpenEnv's create_app serving the tests' stand-in environment (python/tests/grpo_support.py), as the images run it.
        server = await startProgram(uvicorn, ["grpo_support:app", "--host", "127.0.0.1", "--port", String(envPort)], {
            readyUrl: `http://127.0.0.1:${envPort}/health`,
            cwd: path.join(REPO, "python", "tests"),
            env: { PATH: process.env.PATH ?? "", HOME: tmp, LANG: "C.UTF-8", HF_HUB_OFFLINE: "1", MAX_CONCURRENT_ENVS: "4" },
            timeoutMs: 60_000,
        });
        const metricsPort = await freePort();
        metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
        const [bin, ...args] = sessionCounterCommand({
            scriptPath: SESSION_COUNTER.sourcePath,
            envName: "coding",
            replica: "env-coding-replicas-0",
            replicaPort: envPort,
            capacity: 4,
            listen: `127.0.0.1:${metricsPort}`,
        });
        counter = await startProgram(bin!, args, { readyUrl: metricsUrl });
    });
    after(async () => {
        for (const ws of sockets) ws.terminate();
        await counter?.stop();
        await server?.stop();
    });

    /** Opens one session (WS /ws, then a reset answered with an observation). */
    function openSession(): Promise<WebSocket> {
        return new Promise((resolve, reject) => {
            const ws = new WebSocket(`ws://127.0.0.1:${envPort}/ws`);
            sockets.push(ws);
            const timer = setTimeout(() => reject(new Error("session did not open within 10 s")), 10_000);
            ws.on("open", () => ws.send(JSON.stringify({ type: "reset", data: {} })));
            ws.once("message", (raw) => {
                clearTimeout(timer);
                const msg = JSON.parse(String(raw)) as { type: string };
                if (msg.type === "error") reject(new Error(String(raw)));
                else resolve(ws);
            });
            ws.on("error", reject);
        });
    }

    async function inUse(): Promise<number | undefined> {
        const s = await scrape(metricsUrl);
        for (const x of s) assert.deepEqual(Object.keys(x.labels).sort(), ["env", "replica"], "one series per replica, no per-session label");
        assert.equal(sampleValue(s, SERIES.envSessionsCapacity, { env: "coding", replica: "env-coding-replicas-0" }), 4);
        return sampleValue(s, SERIES.envSessionsInUse, { env: "coding", replica: "env-coding-replicas-0" });
    }

    test("counts the sessions open now: 0, then 3, then 1 after two close, then 0", { timeout: scaled(60_000) }, async () => {
        assert.equal(await inUse(), 0);
        const open = [await openSession(), await openSession(), await openSession()];
        assert.equal(await inUse(), 3);
        for (const ws of open.slice(0, 2)) {
            const closed = new Promise((r) => ws.once("close", r));
            ws.close(1000);
            await closed;
        }
        await eventually("two sessions closed", async () => assert.equal(await inUse(), 1));
        open[2]!.terminate();
        await eventually("the last session dropped", async () => assert.equal(await inUse(), 0));
    });

    test("sessions reaped idle cannot be counted: OpenEnv frees the slot but keeps the WebSocket open, and logs nothing", {
        timeout: scaled(90_000),
    }, async () => {
        // The same server with its idle reaper on (1 s; OpenEnv 0.10 http_server.py _reap_idle_sessions checks every
        // max(timeout / 4, 5) s), one session per replica, and the counter beside it.
        const port = await freePort();
        const reaping = await startProgram(path.join(path.dirname(python!), "uvicorn"), ["grpo_support:app", "--host", "127.0.0.1", "--port", String(port)], {
            readyUrl: `http://127.0.0.1:${port}/health`,
            cwd: path.join(REPO, "python", "tests"),
            env: { PATH: process.env.PATH ?? "", HOME: tmp, LANG: "C.UTF-8", HF_HUB_OFFLINE: "1", MAX_CONCURRENT_ENVS: "1", SESSION_IDLE_TIMEOUT_S: "1" },
            timeoutMs: 60_000,
        });
        const countPort = await freePort();
        const [bin, ...args] = sessionCounterCommand({
            scriptPath: SESSION_COUNTER.sourcePath,
            envName: "coding",
            replica: "env-coding-replicas-0",
            replicaPort: port,
            capacity: 1,
            listen: `127.0.0.1:${countPort}`,
        });
        const reapCounter = await startProgram(bin!, args, { readyUrl: `http://127.0.0.1:${countPort}/metrics` });
        const open = (): Promise<{ ws: WebSocket; first: string; closed: () => boolean }> =>
            new Promise((resolve, reject) => {
                const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`);
                sockets.push(ws);
                let closed = false;
                ws.on("close", () => (closed = true));
                const timer = setTimeout(() => reject(new Error("no answer in 10 s")), 10_000);
                ws.on("open", () => ws.send(JSON.stringify({ type: "reset", data: {} })));
                ws.once("message", (raw) => {
                    clearTimeout(timer);
                    resolve({ ws, first: String((JSON.parse(String(raw)) as { type: string }).type), closed: () => closed });
                });
                ws.on("error", reject);
            });
        try {
            const idle = await open();
            assert.equal(idle.first, "observation");
            const logBefore = reaping.output();
            // Past the reaper's first pass (5 s) with the session idle.
            await sleep(7_000);
            // The server reaped it: a second session fits into the one slot, while the first socket is still open.
            const second = await open();
            assert.equal(second.first, "observation", "the idle session's slot was freed");
            assert.equal(idle.closed(), false, "no close frame: the reaped session's WebSocket stays open");
            const s = await scrape(`http://127.0.0.1:${countPort}/metrics`);
            // Both connections established: the counter counts the reaped one as in use.
            assert.equal(sampleValue(s, SERIES.envSessionsInUse, { env: "coding", replica: "env-coding-replicas-0" }), 2);
            // Nothing in the server's output says a session was reaped (only the second connection's lines).
            assert.doesNotMatch(reaping.output().slice(logBefore.length), /reap|idle|timeout|expired/i);
        } finally {
            await reapCounter.stop();
            await reaping.stop();
        }
    });

    test("a bad command line exits 2 with the fix; only GET /metrics is served", async () => {
        const r = spawnSync(
            "python3",
            [SESSION_COUNTER.sourcePath, "--port", "8000", "--env", 'x"y', "--replica", "r", "--capacity", "1", "--listen", "127.0.0.1:1"],
            {
                encoding: "utf8",
            },
        );
        assert.equal(r.status, 2);
        assert.match(r.stderr, /--env 'x"y' must be 1-253 characters of \[A-Za-z0-9_.:-\]/);
        assert.equal((await fetch(metricsUrl.replace("/metrics", "/"))).status, 404);
        assert.equal((await fetch(metricsUrl, { method: "POST", body: "x" })).status, 405);
        assert.ok(pidAlive(counter.pid));
    });
});

/**
 * The Python programs as the cluster runs them: each from a directory holding exactly the files its
 * ConfigMap mounts (the stack's own programs, rendered under Pulumi's mocks), with `python3 -I -B`,
 * which leaves the script's directory out of sys.path: the shared /metrics server
 * (components/shared/metrics_http.py) must be mounted beside each and found there. Every /metrics
 * answer keeps the Prometheus text format 0.0.4 and the same refusals.
 */
describe("the Python programs from their mounted directories (python3 -I -B, only the ConfigMap's files)", () => {
    const config = (recipe: string, extra: Record<string, unknown>) =>
        parseWithTestImages({ recipe, runId: "r1", target: { kind: "kubernetes", context: "test" }, ...extra }, "staging");
    /** Writes a ConfigMap's data into a fresh directory, as the kubelet mounts it. */
    function mounted(ms: ReadonlyArray<Record<string, any>>, key: string): string {
        const cm = ms.find((m) => m.kind === "ConfigMap" && m.data?.[key] !== undefined);
        assert.ok(cm, `a ConfigMap holds ${key}`);
        const dir = fs.mkdtempSync(path.join(tmp, "mounted-"));
        for (const [file, text] of Object.entries(cm.data as Record<string, string>)) fs.writeFileSync(path.join(dir, file), text, { mode: 0o444 });
        return dir;
    }
    /** The answers every program's /metrics gives besides the series: 404, 405 (HEAD too) with Allow, its Server name. */
    async function assertServesOnlyMetrics(url: string, server: string): Promise<string> {
        const ok = await fetch(url);
        assert.equal(ok.status, 200);
        assert.equal(ok.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
        assert.match(ok.headers.get("server") ?? "", new RegExp(`^${server} Python/3\\.`));
        const body = await ok.text();
        const other = await fetch(url.replace(/\/metrics$/, "/other"));
        assert.equal(other.status, 404);
        assert.equal(await other.text(), "only GET /metrics is served\n");
        for (const method of ["POST", "HEAD"]) {
            const refused = await fetch(url, { method, ...(method === "POST" ? { body: "x" } : {}) });
            assert.equal(refused.status, 405, method);
            assert.equal(refused.headers.get("allow"), "GET");
        }
        return body;
    }

    test("the env router's capacity responder and the replicas' session counter (observability on)", { timeout: scaled(60_000) }, async () => {
        const ms = await platformManifests(config("mbpp-whitebox", OBSERVABILITY_ON), projectMetricsPrograms());
        const routerDir = mounted(ms, "capacity_responder.py");
        assert.ok(fs.existsSync(path.join(routerDir, "metrics_http.py")), "the shared module beside the responder");
        const [listen, metricsPort] = [await freePort(), await freePort()];
        const env = (JSON.parse(fs.readFileSync(path.join(routerDir, "responder.json"), "utf8")) as { env: string }).env;
        const responder = await startProgram(
            "python3",
            responderCommand({
                scriptPath: path.join(routerDir, "capacity_responder.py"),
                configPath: path.join(routerDir, "responder.json"),
                listen: `127.0.0.1:${listen}`,
                metricsListen: `127.0.0.1:${metricsPort}`,
            }).slice(1),
            { readyUrl: `http://127.0.0.1:${listen}/responder/health` },
        );
        try {
            const body = await assertServesOnlyMetrics(`http://127.0.0.1:${metricsPort}/metrics`, "agentrl-capacity-responder");
            assert.equal(
                body,
                "# HELP agentrl_env_capacity_reached_total WebSocket sessions the env router refused with CAPACITY_REACHED (every replica full).\n" +
                    "# TYPE agentrl_env_capacity_reached_total counter\n" +
                    `agentrl_env_capacity_reached_total{env="${env}"} 0\n`,
            );
        } finally {
            await responder.stop();
        }

        const counterDir = mounted(ms, "session_counter.py");
        assert.deepEqual(fs.readdirSync(counterDir).sort(), ["metrics_http.py", "session_counter.py"]);
        // A socket table of one ESTABLISHED connection to port 8000 (0x1F40) and one LISTEN (0A): in use 1.
        const procNet = fs.mkdtempSync(path.join(tmp, "proc-net-"));
        const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
        fs.writeFileSync(
            path.join(procNet, "tcp"),
            `${header}   0: 0100007F:1F40 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 1 1 0\n` +
                `   1: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 2 1 0\n`,
        );
        fs.writeFileSync(path.join(procNet, "tcp6"), header);
        const port = await freePort();
        const [bin, ...args] = sessionCounterCommand({
            scriptPath: path.join(counterDir, "session_counter.py"),
            envName: "coding",
            replica: "r-0",
            replicaPort: 8000,
            capacity: 4,
            listen: `127.0.0.1:${port}`,
        });
        const counter = await startProgram(bin!, [...args, "--proc-net", procNet], { readyUrl: `http://127.0.0.1:${port}/metrics` });
        try {
            const body = await assertServesOnlyMetrics(`http://127.0.0.1:${port}/metrics`, "agentrl-session-counter");
            assert.equal(
                body,
                "# HELP agentrl_env_sessions_in_use Established TCP connections to the env replica's port (one per open session).\n" +
                    "# TYPE agentrl_env_sessions_in_use gauge\n" +
                    'agentrl_env_sessions_in_use{env="coding",replica="r-0"} 1\n' +
                    "# HELP agentrl_env_sessions_capacity Sessions the env replica holds at most (MAX_CONCURRENT_ENVS).\n" +
                    "# TYPE agentrl_env_sessions_capacity gauge\n" +
                    'agentrl_env_sessions_capacity{env="coding",replica="r-0"} 4\n',
            );
            // A table it cannot read: 500 with the reason, and the counter keeps serving.
            fs.rmSync(path.join(procNet, "tcp6"));
            const failed = await fetch(`http://127.0.0.1:${port}/metrics`);
            assert.equal(failed.status, 500);
            assert.match(await failed.text(), /^cannot read the socket tables .*tcp6.*No such file/);
            assert.ok(pidAlive(counter.pid));
        } finally {
            await counter.stop();
        }
    });

    test("the shared training container's role runner, observability off: every line says its role, and nothing listens", {
        timeout: scaled(30_000),
    }, async () => {
        const ms = await platformManifests(config("opencode-blackbox", { training: { gpuSharing: "shared" } }));
        const dir = mounted(ms, "role_runner.py");
        assert.deepEqual(fs.readdirSync(dir).sort(), ["metrics_http.py", "role_runner.py"]);
        // The role runs for 1.5 s (scaled: waits.ts) after its first lines: the runner is inspected while it runs.
        const role = `printf 'out one\\nout two\\n'; echo err one >&2; printf ' 10%%|#|1/10 [\\r 20%%|#|2/10 [\\n'; sleep ${scaled(1500) / 1000}; echo last`;
        const child = spawn("python3", ["-I", "-B", path.join(dir, "role_runner.py"), "--role", "trainer", "--", "/bin/sh", "-c", role], {
            stdio: ["ignore", "pipe", "pipe"],
        });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (d) => (stdout += d));
        child.stderr.on("data", (d) => (stderr += d));
        const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
        await pollUntil("the role's first lines through the runner", async () => stdout.includes("[trainer] out two\n"), { budgetMs: 10_000, intervalMs: 50 });
        // The runner's sockets while its role runs (Node's stdio pipes are Unix sockets): none is a TCP listener.
        const inodes = fs
            .readdirSync(`/proc/${child.pid}/fd`)
            .map((fd) => /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${child.pid}/fd/${fd}`))?.[1])
            .filter((i) => i !== undefined);
        assert.ok(inodes.length > 0, "the stdio sockets are seen");
        const listening = ["tcp", "tcp6"].flatMap((t) =>
            fs
                .readFileSync(`/proc/net/${t}`, "utf8")
                .split("\n")
                .slice(1)
                .map((l) => l.trim().split(/\s+/))
                .filter((f) => f[3] === "0A")
                .map((f) => f[9]),
        );
        assert.deepEqual(
            inodes.filter((i) => listening.includes(i)),
            [],
            "no TCP listener (no metrics port with observability off)",
        );
        assert.equal(await exited, 0, stderr);
        assert.equal(stdout, "[trainer] out one\n[trainer] out two\n[trainer]  10%|#|1/10 [\r[trainer]  20%|#|2/10 [\n[trainer] last\n");
        assert.equal(stderr, "[trainer] err one\n");
    });
});
