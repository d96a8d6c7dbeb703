/**
 * The env router's session cap against every path that can upgrade to a websocket (issue 42,
 * point 4), with real nginx in front of a real OpenEnv 0.10 server (create_app + the uvicorn CLI,
 * python/tests/grpo_support.py's stand-in environment, named as one there), one session per replica.
 *
 * The side door this closes: only `location = /ws` carries `max_conns`, but `location /` forwarded
 * the client's Upgrade too, and the server upgrades on more than the exact route: Starlette's route
 * regex `^/ws$` also matches "/ws\n" (Python's `$` matches before a trailing newline), so
 * `/ws%0A` (nginx decodes it, `= /ws` does not match, `location /` forwards it) opened a session
 * the router never counted; OpenEnv's `/mcp` and `/harness` websockets each create a session too.
 * Measured on main: `/ws`, `/ws`, `/ws%0A`, `/ws%0a?x=1`, `/ws%0A` answered 101 (replica), capacity,
 * 101, 101, 101 (replica).
 *
 * What must hold for each path: no upgrade is answered by the replica beyond the cap (the router
 * answers every one itself: the capacity responder's frame on the exact route, a 400 elsewhere),
 * and with the replica's slot free, no path but `/ws` opens a session the cap does not count.
 * Run: node --import tsx --test test/env/env-router-upgrade.test.ts
 */
import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import { request } from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import WebSocket from "ws";
import { startLocalRouter, type LocalRouter } from "../../components/env/local";
import { ROUTER_CAPACITY_CODE, ROUTER_REPLICA_HEADER, ROUTER_UPGRADE_REFUSED_CODE, routerErrorBodies, renderRouterConfig } from "../../components/env/router";
import { freePort } from "../helpers/http";
import { skipWithoutNginx } from "../helpers/nginx";
import { startProgram, type Started } from "../helpers/processes";
import { LOCK_VENV_HINT, lockVenvPython } from "../helpers/stub-env";
import { scaled } from "../helpers/waits";

const REPO = path.resolve(__dirname, "..", "..");
const python = lockVenvPython();
const skip = skipWithoutNginx || (python === undefined ? `no trainer-side venv (${LOCK_VENV_HINT})` : false);

/**
 * The paths tried: the encodings, other spellings nginx does not map to `= /ws`, OpenEnv's
 * other websocket routes, and spellings nginx does normalise to `/ws` (those reach the capped route).
 */
const SIDE_DOORS = ["/ws%0A", "/ws%0a?x=1", "/ws%0A", "/ws%0D", "/ws%0A%0A", "/ws/", "/ws%20", "/WS", "/mcp", "/harness", "/ws.json"];
// (Dot segments are left out: the client's URL parser resolves them before sending.)
const NORMALISED_TO_WS = ["//ws", "/%77s", "/ws?x=1"];

/** How one upgrade attempt through the router ended. */
type Outcome =
    /** 101 from the replica: a session on it (its first frame, or none within the wait). */
    | { readonly kind: "replica-session"; readonly replicaHeader: string; readonly frame: string }
    /** 101 from the router's capacity responder: OpenEnv's CAPACITY_REACHED frame with the router's code. */
    | { readonly kind: "router-capacity" }
    /** No upgrade: the router's (or the server's) HTTP answer. */
    | { readonly kind: "refused"; readonly status: number; readonly body: string };

const sockets = new Set<WebSocket>();

/**
 * Opens `wsPath` through the router and sends OpenEnv's reset; classifies the answer. A replica
 * session is left open (the caller closes it) so it holds its slot as a trainer's would.
 */
function attempt(base: string, wsPath: string): Promise<Outcome> {
    return new Promise((resolve, reject) => {
        const ws = new WebSocket(`${base}${wsPath}`);
        sockets.add(ws);
        let replicaHeader = "";
        const timer = setTimeout(() => {
            ws.terminate();
            reject(new Error(`${wsPath}: neither answered nor refused within ${scaled(10_000)} ms`));
        }, scaled(10_000));
        const done = (o: Outcome) => {
            clearTimeout(timer);
            resolve(o);
        };
        ws.on("upgrade", (res) => (replicaHeader = String(res.headers[ROUTER_REPLICA_HEADER.toLowerCase()] ?? "")));
        ws.on("unexpected-response", (_req, res) => {
            let body = "";
            res.setEncoding("utf8");
            res.on("data", (c: string) => (body += c));
            res.on("end", () => {
                sockets.delete(ws);
                done({ kind: "refused", status: res.statusCode ?? 0, body });
            });
        });
        ws.on("open", () => ws.send(JSON.stringify({ type: "reset", data: {} })));
        ws.once("message", (raw) => {
            const text = String(raw);
            const msg = JSON.parse(text) as { type: string; data?: { router_code?: string } };
            if (msg.type === "error" && msg.data?.router_code === ROUTER_CAPACITY_CODE) {
                ws.close();
                sockets.delete(ws);
                done({ kind: "router-capacity" });
            } else done({ kind: "replica-session", replicaHeader, frame: text.slice(0, 300) });
        });
        // The server's own refusal of a route it has no websocket for: a close without a frame.
        ws.on("close", (code) => done({ kind: "refused", status: 101, body: `closed ${code} before any frame` }));
        ws.on("error", (e) => {
            clearTimeout(timer);
            reject(e);
        });
    });
}

describe("env router: the session cap holds on every path that can upgrade, in front of a real OpenEnv server", { skip }, () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-router-upgrade-"));
    const events = path.join(tmp, "events.jsonl");
    let env: Started | undefined;
    let router: LocalRouter | undefined;
    let replica = "";

    /** Sessions the real server opened and has not closed (its environment's own open/close events). */
    const openOnReplica = (): number => {
        const lines = fs.existsSync(events)
            ? fs
                  .readFileSync(events, "utf8")
                  .split("\n")
                  .filter((l) => l.trim() !== "")
            : [];
        let n = 0;
        for (const l of lines) n += (JSON.parse(l) as { event: string }).event === "open" ? 1 : -1;
        return n;
    };

    before(async () => {
        const port = await freePort();
        replica = `127.0.0.1:${port}`;
        env = await startProgram(path.join(path.dirname(python!), "uvicorn"), ["grpo_support:app", "--host", "127.0.0.1", "--port", String(port)], {
            readyUrl: `http://${replica}/health`,
            cwd: path.join(REPO, "python", "tests"),
            // The replica's own cap is above the router's on purpose: a session the router lets past its
            // cap then opens for real (an environment created) instead of being refused by the server.
            env: { PATH: process.env.PATH ?? "", HOME: tmp, LANG: "C.UTF-8", HF_HUB_OFFLINE: "1", MAX_CONCURRENT_ENVS: "16", STANDIN_EVENTS: events },
            timeoutMs: 60_000,
        });
        router = await startLocalRouter({ envName: "coding", replicas: [replica], sessionsPerReplica: 1 });
    });

    after(async () => {
        for (const ws of sockets) ws.terminate();
        await router?.stop();
        await env?.stop();
        fs.rmSync(tmp, { recursive: true, force: true });
    });

    const base = () => (router as LocalRouter).wsUrl.replace(/\/ws$/, "");

    test("the rendered config refuses an upgrade outside `= /ws` and forwards no Upgrade from `location /`", () => {
        const conf = renderRouterConfig({ envName: "coding", replicas: [replica || "127.0.0.1:8000"], sessionsPerReplica: 1 });
        const root = conf.slice(conf.indexOf("        location / {"));
        assert.match(root, /if \(\$http_upgrade != ""\) \{\n\s+return 400 /);
        assert.match(root, /proxy_set_header Upgrade "";/);
        assert.doesNotMatch(root.slice(0, root.indexOf("location @http_unavailable")), /\$http_upgrade;|\$connection_upgrade/);
    });

    test("with the replica's slot free, no path but /ws opens a session: each is refused with the router's 400", { timeout: scaled(120_000) }, async () => {
        const seen: string[] = [];
        for (const p of SIDE_DOORS) {
            const o = await attempt(base(), p);
            seen.push(`${p}: ${JSON.stringify(o)}`);
        }
        for (const ws of sockets) ws.terminate();
        sockets.clear();
        const opened = seen.filter((s) => s.includes('"replica-session"'));
        assert.deepEqual(opened, [], `sessions opened outside the cap:\n${seen.join("\n")}`);
        for (const s of seen) {
            assert.match(s, /"kind":"refused","status":400/, s);
            assert.ok(s.includes(ROUTER_UPGRADE_REFUSED_CODE), s);
        }
        assert.equal(openOnReplica(), 0, "the server created no environment");
    });

    test("at the cap (one session on the replica), every path is answered by the router, none by the replica", { timeout: scaled(120_000) }, async () => {
        const first = await attempt(base(), "/ws");
        assert.equal(first.kind, "replica-session", JSON.stringify(first));
        if (first.kind === "replica-session") assert.equal(first.replicaHeader, replica, "the session is the replica's");
        assert.equal(openOnReplica(), 1);
        const results: string[] = [];
        for (const p of ["/ws", ...SIDE_DOORS, ...NORMALISED_TO_WS]) {
            const o = await attempt(base(), p);
            results.push(`${p}: ${JSON.stringify(o)}`);
        }
        const past = results.filter((r) => r.includes('"replica-session"'));
        assert.deepEqual(past, [], `answered by the replica beyond the cap of 1:\n${results.join("\n")}`);
        assert.equal(openOnReplica(), 1, `the replica holds exactly the one session:\n${results.join("\n")}`);
        // The exact route and what nginx normalises to it reach the capped location: the responder's frame.
        for (const r of results.filter((x) => ["/ws:", ...NORMALISED_TO_WS.map((p) => `${p}:`)].some((p) => x.startsWith(p)))) {
            assert.match(r, /"kind":"router-capacity"/, r);
        }
        for (const r of results.filter((x) => SIDE_DOORS.some((p) => x.startsWith(`${p}:`)))) assert.match(r, /"status":400/, r);
    });

    test("plain HTTP still reaches the replica (no Upgrade header): /health, POST /reset", async () => {
        const http = base().replace(/^ws/, "http");
        const health = await fetch(`${http}/health`);
        assert.equal(health.status, 200);
        assert.equal(health.headers.get(ROUTER_REPLICA_HEADER), replica);
        const reset = await fetch(`${http}/reset`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
        assert.equal(reset.status, 200, await reset.clone().text());
        // A plain upgrade request (fetch refuses an Upgrade header): the router's 400 with its body.
        const refused = await new Promise<{ status: number; body: string }>((resolve, reject) => {
            const req = request(`${http}/ws%0A`, { headers: { upgrade: "websocket", connection: "Upgrade" } }, (res) => {
                let body = "";
                res.setEncoding("utf8");
                res.on("data", (c: string) => (body += c));
                res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
            });
            req.on("upgrade", () => reject(new Error("the router switched protocols on /ws%0A")));
            req.on("error", reject);
            req.end();
        });
        assert.equal(refused.status, 400);
        assert.equal(refused.body, routerErrorBodies({ envName: "coding", replicas: [replica], sessionsPerReplica: 1 }).upgradeRefused);
    });
});
