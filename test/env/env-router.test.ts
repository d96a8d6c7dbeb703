/**
 * The session-aware env router, end to end with real nginx on 127.0.0.1 in front of stub OpenEnv
 * replicas, plus unit tests of the settings validation and config rendering.
 * Run: node --import tsx --test test/env/env-router.test.ts
 */
import { strict as assert } from "node:assert";
import { spawnSync } from "node:child_process";
import { after, before, describe, test } from "node:test";
import WebSocket from "ws";
import { startLocalRouter, type LocalRouter } from "../../components/env/local";
import {
    ROUTER_CAPACITY_CODE,
    ROUTER_NO_REPLICA_CODE,
    ROUTER_REPLICA_HEADER,
    capacityMessage,
    renderRouterConfig,
    routerErrorBodies,
    statefulSetReplicaAddresses,
    validateRouterSettings,
    versionAtLeast,
} from "../../components/env/router";
import type { RouterSettings } from "../../components/env/model";
import { CAPACITY_RESPONDER_SCRIPT_PATH, responderProbeCommand } from "../../components/env/responder";
import { freePort } from "../helpers/http";
import { CAPACITY_REACHED, LOCK_VENV_HINT, lockVenvPython, startStubEnv, type StubEnv } from "../helpers/stub-env";
import { scaled, scaledCount } from "../helpers/waits";

const K = 4;
const N = 3;
const OPEN_TIMEOUT_MS = 5000;

/** How one attempt to open an env session through the router ended. */
type SessionResult =
    | { readonly kind: "open"; readonly ws: WebSocket; readonly replica: string; readonly worker: string }
    | { readonly kind: "stub-rejected"; readonly replica: string; readonly worker: string; readonly message: string }
    /** The router's capacity responder: OpenEnv's CAPACITY_REACHED frame, with the router's code beside it. */
    | { readonly kind: "router-capacity"; readonly worker: string; readonly message: string; readonly data: Record<string, unknown> }
    | { readonly kind: "router-refused"; readonly status: number; readonly body: string; readonly replicaHeader: string };

/** Every client socket a test opened, so after() can close them even when a test fails. */
const clients = new Set<WebSocket>();

/** Opens one session and proves it live with a reset round trip; bounded by OPEN_TIMEOUT_MS. */
function openSession(url: string): Promise<SessionResult> {
    return new Promise((resolve, reject) => {
        const ws = new WebSocket(url);
        clients.add(ws);
        let replica = "";
        let worker = "";
        const timer = setTimeout(() => {
            ws.terminate();
            reject(new Error(`session through ${url} neither opened nor was refused within ${OPEN_TIMEOUT_MS} ms`));
        }, OPEN_TIMEOUT_MS);
        const done = (r: SessionResult): void => {
            clearTimeout(timer);
            resolve(r);
        };
        ws.on("upgrade", (res) => {
            replica = String(res.headers[ROUTER_REPLICA_HEADER.toLowerCase()] ?? "");
            worker = String(res.headers["x-env-router-worker"] ?? "");
        });
        ws.on("unexpected-response", (_req, res) => {
            let body = "";
            res.setEncoding("utf8");
            res.on("data", (c: string) => (body += c));
            res.on("end", () => {
                clients.delete(ws);
                done({
                    kind: "router-refused",
                    status: res.statusCode ?? 0,
                    body,
                    replicaHeader: String(res.headers[ROUTER_REPLICA_HEADER.toLowerCase()] ?? ""),
                });
            });
        });
        ws.on("open", () => ws.send(JSON.stringify({ type: "reset", data: {} })));
        ws.once("message", (raw) => {
            const msg = JSON.parse(String(raw)) as { type: string; data: { code?: string; message?: string; router_code?: string } };
            if (msg.type === "error" && msg.data.code === CAPACITY_REACHED) {
                ws.close();
                clients.delete(ws);
                if (msg.data.router_code === ROUTER_CAPACITY_CODE) done({ kind: "router-capacity", worker, message: msg.data.message ?? "", data: msg.data });
                else done({ kind: "stub-rejected", replica, worker, message: msg.data.message ?? "" });
            } else {
                done({ kind: "open", ws, replica, worker });
            }
        });
        ws.on("error", (e) => {
            clearTimeout(timer);
            reject(e);
        });
    });
}

/** Closes a session and resolves once the router has closed the client connection too. */
function closeSession(ws: WebSocket): Promise<void> {
    return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("session did not close within 5 s")), 5000);
        ws.once("close", () => {
            clearTimeout(timer);
            clients.delete(ws);
            resolve();
        });
        ws.close(1000);
    });
}

function openOnes(results: readonly SessionResult[]): Extract<SessionResult, { kind: "open" }>[] {
    return results.filter((r): r is Extract<SessionResult, { kind: "open" }> => r.kind === "open");
}

function summary(stubs: readonly StubEnv[]): string {
    return stubs.map((s) => `${s.address}: active=${s.active()} peak=${s.peak()} rejected=${s.rejected()}`).join("; ");
}

async function closeAllClients(): Promise<void> {
    for (const ws of clients) ws.terminate();
    clients.clear();
}

async function startStubs(n: number): Promise<StubEnv[]> {
    const stubs: StubEnv[] = [];
    for (let i = 0; i < n; i++) stubs.push(await startStubEnv({ maxSessions: K }));
    return stubs;
}

const valid: RouterSettings = {
    envName: "my_env",
    replicas: ["10.0.0.1:8000", "echo-1.echo-headless.envs.svc.cluster.local:8000"],
    sessionsPerReplica: 4,
};

describe("validateRouterSettings", () => {
    test("accepts good settings", () => {
        assert.deepEqual(validateRouterSettings(valid), []);
        assert.deepEqual(validateRouterSettings({ ...valid, replicas: ["[::1]:8000"], workerProcesses: "auto", resolver: "10.96.0.10" }), []);
    });

    test("collects every problem at once, each naming its field and fix", () => {
        const problems = validateRouterSettings({
            envName: "bad name!",
            replicas: [],
            sessionsPerReplica: 0,
            listenPort: 70000,
            listenAddress: "example.com",
            readTimeoutSeconds: 10,
            sendTimeoutSeconds: 1.5,
            runDir: "tmp/router",
            workerProcesses: 0,
            resolver: "  ",
        });
        for (const field of [
            "envName",
            "replicas is empty",
            "sessionsPerReplica",
            "listenPort",
            "listenAddress",
            "readTimeoutSeconds",
            "sendTimeoutSeconds",
            "runDir",
            "workerProcesses",
            "resolver",
        ]) {
            assert.ok(
                problems.some((p) => p.includes(field)),
                `no problem mentions ${field}: ${problems.join(" | ")}`,
            );
        }
        assert.match(problems.find((p) => p.startsWith("sessionsPerReplica")) ?? "", /MAX_CONCURRENT_ENVS/);
        assert.match(problems.find((p) => p.startsWith("readTimeoutSeconds")) ?? "", />= 60/);
    });

    test("names each bad replica address and how to write it", () => {
        const problems = validateRouterSettings({
            ...valid,
            replicas: ["http://a:8000/", "b", "c:99999", "d:8000", "d:8000", "localhost:8000", "bad_host:80"],
        });
        assert.ok(
            problems.some((p) => p.includes("replicas[0]") && p.includes("URL scheme") && p.includes('"a:8000"')),
            problems.join("\n"),
        );
        assert.ok(problems.some((p) => p.includes("replicas[1]") && p.includes("no port") && p.includes('"b:8000"')));
        assert.ok(problems.some((p) => p.includes("replicas[2]") && p.includes("outside 1-65535")));
        assert.ok(problems.some((p) => p.includes("replicas[4]") && p.includes("listed twice")));
        assert.ok(problems.some((p) => p.includes("replicas[5]") && p.includes("127.0.0.1:8000")));
        assert.ok(problems.some((p) => p.includes("replicas[6]") && p.includes("not a DNS name")));
    });

    test("renderRouterConfig refuses invalid settings with every problem", () => {
        assert.throws(
            () => renderRouterConfig({ ...valid, sessionsPerReplica: 0, replicas: [] }),
            /sessionsPerReplica[\s\S]*replicas is empty|replicas is empty[\s\S]*sessionsPerReplica/,
        );
    });
});

describe("renderRouterConfig", () => {
    test("caps each replica at k in a shared zone, least_conn, websocket upgrade, long timeouts", () => {
        const conf = renderRouterConfig(valid);
        assert.equal(conf.match(/ max_conns=4 /g)?.length, 2);
        assert.match(conf, /upstream env_sessions \{\n\s+zone env_sessions \d+k;\n\s+least_conn;/);
        assert.match(conf, /listen 0\.0\.0\.0:8000 reuseport;/);
        assert.match(conf, /proxy_set_header Upgrade \$http_upgrade;/);
        assert.match(conf, /proxy_read_timeout 3600s;/);
        assert.match(conf, /proxy_next_upstream error timeout;/);
        assert.doesNotMatch(conf, /http_50[234]/, "a replica's own 5xx must never be retried onto the others");
        assert.doesNotMatch(conf, /^\s*server \S+ resolve/m);
        assert.doesNotMatch(conf, /^\s*resolver /m);
        assert.match(conf, /pid \/tmp\/env-router\/nginx\.pid;/);
        assert.ok(conf.includes(JSON.stringify(routerErrorBodies(valid).capacity).replace(/^"|"$/g, "")), "capacity body rendered verbatim");
    });

    test("with a resolver, replica names are re-resolved (nginx >= 1.27.3)", () => {
        const conf = renderRouterConfig({ ...valid, resolver: "kube-dns.kube-system.svc.cluster.local", resolverValidSeconds: 5 });
        assert.match(conf, /resolver kube-dns\.kube-system\.svc\.cluster\.local valid=5s ipv6=off;/);
        assert.equal(conf.match(/ resolve max_conns=4 /g)?.length, 2);
    });

    test("helpers: StatefulSet addresses and version compare", () => {
        assert.deepEqual(statefulSetReplicaAddresses({ statefulSet: "echo", headlessService: "echo-hl", namespace: "envs", replicas: 2 }), [
            "echo-0.echo-hl.envs.svc.cluster.local:8000",
            "echo-1.echo-hl.envs.svc.cluster.local:8000",
        ]);
        assert.equal(versionAtLeast("1.22.1", "1.27.3"), false);
        assert.equal(versionAtLeast("1.27.3", "1.27.3"), true);
        assert.equal(versionAtLeast("1.29.0", "1.27.3"), true);
    });
});

describe(`router with 2 workers in front of ${N} replicas x k=${K}`, () => {
    let stubs: StubEnv[] = [];
    let router: LocalRouter | undefined;
    let settings: RouterSettings;
    let metricsPort = 0;
    const sessions: Extract<SessionResult, { kind: "open" }>[] = [];

    before(async () => {
        stubs = await startStubs(N);
        settings = { envName: "echo", replicas: stubs.map((s) => s.address), sessionsPerReplica: K, workerProcesses: 2 };
        metricsPort = await freePort();
        router = await startLocalRouter({ ...settings, responderMetricsPort: metricsPort });
    });

    /** The responder's CAPACITY_REACHED counter as scraped from its /metrics (and the exposition's only sample line). */
    async function refusals(): Promise<number> {
        const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
        assert.equal(res.status, 200);
        const samples = (await res.text()).split("\n").filter((l) => l !== "" && !l.startsWith("#"));
        assert.equal(samples.length, 1, `one series, labelled by env only (no per-session label): ${samples.join(" | ")}`);
        const m = /^agentrl_env_capacity_reached_total\{env="echo"\} (\d+)$/.exec(samples[0]!);
        assert.ok(m, samples[0]);
        return Number(m[1]);
    }

    after(async () => {
        await closeAllClients();
        await router?.stop();
        await Promise.all(stubs.map((s) => s.stop()));
    });

    test("runs 2 nginx workers", () => {
        assert.equal(router?.workerPids().length, 2, router?.errorLog());
    });

    test(`N x k = ${N * K} parallel sessions: exactly k on every replica, no rejection, both workers used`, { timeout: scaled(30_000) }, async () => {
        const r = router as LocalRouter;
        const results = await Promise.all(Array.from({ length: N * K }, () => openSession(r.wsUrl)));
        sessions.push(...openOnes(results));
        assert.equal(sessions.length, N * K, `not all sessions opened: ${JSON.stringify(results.map((x) => x.kind))}; ${summary(stubs)}`);
        for (const s of stubs) {
            assert.equal(s.active(), K, summary(stubs));
            assert.equal(s.rejected(), 0, summary(stubs));
        }
        const perReplica = new Map<string, number>();
        for (const s of sessions) perReplica.set(s.replica, (perReplica.get(s.replica) ?? 0) + 1);
        assert.deepEqual([...perReplica.keys()].sort(), stubs.map((s) => s.address).sort(), "the replica header names the replica");
        assert.ok([...perReplica.values()].every((v) => v === K));
        // Both workers admitted sessions, so the per-replica cap held across workers.
        const workers = new Set(sessions.map((s) => s.worker));
        assert.equal(workers.size, 2, `sessions came through workers ${[...workers].join(", ")}`);
        assert.equal(await refusals(), 0, "no refusal while every session found a replica");
    });

    test("session N x k + 1 (and more) gets OpenEnv's CAPACITY_REACHED frame naming env, capacity and fix; no replica sees it", {
        timeout: scaled(30_000),
    }, async () => {
        const r = router as LocalRouter;
        const extra = await Promise.all(Array.from({ length: 4 }, () => openSession(r.wsUrl)));
        for (const x of extra) {
            assert.equal(x.kind, "router-capacity", JSON.stringify(x));
            if (x.kind !== "router-capacity") continue;
            assert.equal(x.message, capacityMessage(settings));
            assert.match(x.message, /^env 'echo' is at capacity: all 12 sessions are in use \(3 replicas x 4 sessions per replica\)/);
            assert.match(x.message, /Fix: raise envs\.echo\.replicas or envs\.echo\.sessionsPerReplica/);
            assert.equal(x.data.code, CAPACITY_REACHED, "clients matching on OpenEnv's code still match");
            assert.equal(x.data.max_sessions, N * K);
        }
        for (const s of stubs) {
            assert.equal(s.rejected(), 0, summary(stubs));
            assert.equal(s.active(), K, summary(stubs));
            assert.equal(s.peak(), K, summary(stubs));
        }
        assert.equal(await refusals(), 4, "the responder counts each CAPACITY_REACHED frame it sent");
    });

    test("a plain HTTP GET /ws at capacity gets the 503 JSON body (not counted as a refused session)", async () => {
        const before = await refusals();
        const res = await fetch((router as LocalRouter).wsUrl.replace(/^ws/, "http"));
        assert.equal(res.status, 503);
        assert.equal(res.headers.get("retry-after"), "5");
        assert.equal(await res.text(), routerErrorBodies(settings).capacity);
        assert.equal(await refusals(), before);
    });

    test("the responder's metrics port serves GET /metrics only", async () => {
        const base = `http://127.0.0.1:${metricsPort}`;
        assert.equal((await fetch(`${base}/`)).status, 404);
        assert.equal((await fetch(`${base}/responder/health`)).status, 404, "the responder's own routes stay on its loopback port");
        const post = await fetch(`${base}/metrics`, { method: "POST", body: "x" });
        assert.equal(post.status, 405);
        assert.equal(post.headers.get("allow"), "GET");
    });

    test("OpenEnv's own client (openenv 0.10.0) raises the message, not a bare HTTP 503", { timeout: scaled(60_000) }, (t) => {
        const python = lockVenvPython();
        if (python === undefined) return t.skip(`no trainer-side venv (${LOCK_VENV_HINT})`);
        const script = [
            "import sys",
            "from openenv.core.generic_client import GenericEnvClient",
            "client = GenericEnvClient(base_url=sys.argv[1]).sync()",
            "try:",
            "    client.reset()",
            "    print('OPENED')",
            "except Exception as e:",
            "    print(type(e).__name__ + ': ' + str(e))",
        ].join("\n");
        const out = spawnSync(python, ["-c", script, (router as LocalRouter).url], { encoding: "utf8", timeout: scaled(50_000) });
        assert.equal(out.status, 0, out.stderr);
        assert.equal(out.stdout.trim(), `RuntimeError: Server error: ${capacityMessage(settings)} (code: CAPACITY_REACHED)`);
        for (const s of stubs) assert.equal(s.rejected(), 0, summary(stubs));
    });

    test("HTTP routes pass through while every session slot is taken", async () => {
        const r = router as LocalRouter;
        const health = await fetch(`${r.url}/health`);
        assert.equal(health.status, 200);
        assert.deepEqual(await health.json(), { status: "healthy" });
        assert.ok(stubs.some((s) => s.address === health.headers.get(ROUTER_REPLICA_HEADER)));
        const reset = await fetch(`${r.url}/reset`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
        assert.equal(reset.status, 200);
        assert.equal(((await reset.json()) as { path: string }).path, "/reset");
        const own = await fetch(`${r.url}/router/health`);
        assert.equal(own.status, 200);
        assert.equal(((await own.json()) as { role: string }).role, "router");
    });

    test("closing one session frees its replica and the next session lands there", { timeout: scaled(30_000) }, async () => {
        const r = router as LocalRouter;
        const target = stubs[1] as StubEnv;
        const victim = sessions.find((s) => s.replica === target.address);
        assert.ok(victim !== undefined);
        await closeSession(victim.ws);
        sessions.splice(sessions.indexOf(victim), 1);
        // The replica sees the TCP close a moment after the client does; nginx freed the slot before closing the client.
        for (let i = 0; i < scaledCount(100) && target.active() !== K - 1; i++) await new Promise((r) => setTimeout(r, 20));
        assert.equal(target.active(), K - 1, summary(stubs));
        const next = await openSession(r.wsUrl);
        assert.equal(next.kind, "open", JSON.stringify(next));
        if (next.kind !== "open") return;
        sessions.push(next);
        assert.equal(next.replica, target.address);
        for (const s of stubs) assert.equal(s.active(), K, summary(stubs));
        assert.ok(
            stubs.every((s) => s.rejected() === 0),
            summary(stubs),
        );
    });
});

describe("router skips a replica that is down", () => {
    let stubs: StubEnv[] = [];
    let router: LocalRouter | undefined;

    before(async () => {
        stubs = await startStubs(N);
        router = await startLocalRouter({ envName: "echo", replicas: stubs.map((s) => s.address), sessionsPerReplica: K, workerProcesses: 2 });
        await (stubs[2] as StubEnv).stop();
    });

    after(async () => {
        await closeAllClients();
        await router?.stop();
        await Promise.all(stubs.map((s) => s.stop()));
    });

    test("sessions go to the live replicas; then the router's capacity frame", { timeout: scaled(30_000) }, async () => {
        const r = router as LocalRouter;
        const live = stubs.slice(0, 2);
        const results = await Promise.all(Array.from({ length: 2 * K }, () => openSession(r.wsUrl)));
        assert.equal(openOnes(results).length, 2 * K, `${JSON.stringify(results.map((x) => x.kind))}; ${summary(stubs)}`);
        for (const s of live) assert.equal(s.active(), K, summary(stubs));
        const extra = await openSession(r.wsUrl);
        assert.equal(extra.kind, "router-capacity", JSON.stringify(extra));
        assert.ok(
            live.every((s) => s.rejected() === 0),
            summary(stubs),
        );
    });

    test("with every replica down, HTTP gets 503 ROUTER_NO_REPLICA_AVAILABLE", async () => {
        await closeAllClients();
        for (const s of stubs) await s.stop();
        const res = await fetch(`${(router as LocalRouter).url}/health`);
        assert.equal(res.status, 503);
        assert.equal(((await res.json()) as { code: string }).code, ROUTER_NO_REPLICA_CODE);
    });
});

describe("capacity responder down: nginx's own 503 with the capacity body", () => {
    let stubs: StubEnv[] = [];
    let router: LocalRouter | undefined;
    let settings: RouterSettings;

    before(async () => {
        stubs = await startStubs(1);
        settings = { envName: "echo", replicas: stubs.map((s) => s.address), sessionsPerReplica: 1, workerProcesses: 1 };
        router = await startLocalRouter(settings);
    });

    after(async () => {
        await closeAllClients();
        await router?.stop();
        await Promise.all(stubs.map((s) => s.stop()));
    });

    test("the full router still refuses, with ROUTER_CAPACITY_REACHED, and ROUTER_NO_REPLICA_AVAILABLE stays distinct; the responder's probe fails", {
        timeout: scaled(30_000),
    }, async () => {
        const r = router as LocalRouter;
        const first = await openSession(r.wsUrl);
        assert.equal(first.kind, "open");
        // Its probe (the pod's exec readiness/liveness, Docker's healthcheck): healthy while it serves, failing once it is gone.
        const [py, ...probeArgs] = responderProbeCommand({ scriptPath: CAPACITY_RESPONDER_SCRIPT_PATH, address: r.responder!.address, timeoutSeconds: 2 });
        const healthy = spawnSync(py!, probeArgs, { encoding: "utf8", timeout: scaled(10_000) });
        assert.equal(healthy.status, 0, `probe of a serving responder: ${healthy.stderr}`);
        r.responder?.kill();
        await new Promise((done) => setTimeout(done, 200));
        const gone = spawnSync(py!, probeArgs, { encoding: "utf8", timeout: scaled(10_000) });
        assert.equal(gone.status, 1, `probe of a killed responder: ${gone.stderr}`);
        assert.match(gone.stderr, /capacity-responder: probe 127\.0\.0\.1:\d+: .*(refused|Connection)/);
        const extra = await openSession(r.wsUrl);
        assert.equal(extra.kind, "router-refused", JSON.stringify(extra));
        if (extra.kind === "router-refused") {
            assert.equal(extra.status, 503);
            assert.equal(extra.body, routerErrorBodies(settings).capacity);
        }
        assert.match(r.errorLog(), /connect\(\) failed/);
        await closeAllClients();
        for (const s of stubs) await s.stop();
        const res = await fetch(`${r.url}/ws`);
        assert.equal(res.status, 503);
        assert.equal(((await res.json()) as { code: string }).code, ROUTER_NO_REPLICA_CODE);
    });
});

describe("control: without the shared zone, 2 workers overfill replicas", () => {
    let stubs: StubEnv[] = [];
    let router: LocalRouter | undefined;

    before(async () => {
        stubs = await startStubs(N);
        router = await startLocalRouter({
            envName: "echo",
            replicas: stubs.map((s) => s.address),
            sessionsPerReplica: K,
            workerProcesses: 2,
            transformConfig: (c) => c.replace(/^\s*zone env_sessions \d+k;\n/m, ""),
        });
    });

    after(async () => {
        await closeAllClients();
        await router?.stop();
        await Promise.all(stubs.map((s) => s.stop()));
    });

    test("each worker counts alone, so replicas see more than k and reject", { timeout: scaled(30_000) }, async () => {
        const r = router as LocalRouter;
        assert.doesNotMatch(r.configText, /zone env_sessions/);
        const results = await Promise.all(Array.from({ length: 2 * N * K }, () => openSession(r.wsUrl)));
        // Every session the router admitted (opened or refused by a replica) names its worker.
        const workers = new Set(results.flatMap((x) => (x.kind === "router-refused" ? [] : [x.worker])));
        const stubRejected = stubs.reduce((n, s) => n + s.rejected(), 0);
        assert.equal(workers.size, 2, "both workers must take sessions for this control to mean anything");
        assert.ok(stubRejected > 0, `expected replica-side CAPACITY_REACHED without the zone; ${summary(stubs)}`);
    });
});
