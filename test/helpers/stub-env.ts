/**
 * A stub OpenEnv server on 127.0.0.1 for router tests.
 *
 * Mirrors OpenEnv's http_server.py: `WS /ws` is accepted first, then a session is created; past
 * max_concurrent_envs the server sends `{"type":"error","data":{"code":"CAPACITY_REACHED",...}}`
 * and closes (it does not refuse the upgrade). `GET /health` answers `{"status":"healthy"}`.
 * Every session and rejection is counted so a test can prove where sessions landed.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import type { AddressInfo } from "node:net";
import { WebSocketServer, type WebSocket } from "ws";

/** Options for one stub replica. */
export interface StubEnvOptions {
    /** Sessions this replica holds at once (MAX_CONCURRENT_ENVS). */
    readonly maxSessions: number;
}

/** A running stub replica and its counters. */
export interface StubEnv {
    /** Port on 127.0.0.1. */
    readonly port: number;
    /** `127.0.0.1:<port>`, the form the router wants. */
    readonly address: string;
    /** Sessions open now. */
    active(): number;
    /** Most sessions ever open at once. */
    peak(): number;
    /** Sessions refused with CAPACITY_REACHED. */
    rejected(): number;
    /** Sessions ever accepted. */
    accepted(): number;
    /** Closes every session and the listener; safe to call twice. */
    stop(): Promise<void>;
}

/** The capacity error OpenEnv sends before closing an over-capacity websocket. */
export const CAPACITY_REACHED = "CAPACITY_REACHED";

/** Starts a stub env on a random 127.0.0.1 port. */
export async function startStubEnv(opts: StubEnvOptions): Promise<StubEnv> {
    let active = 0;
    let peak = 0;
    let rejected = 0;
    let accepted = 0;
    let port = 0;

    const server = http.createServer((req, res) => {
        const path = (req.url ?? "/").split("?")[0];
        const body = path === "/health" ? { status: "healthy" } : { path, method: req.method, port };
        // Drain the request body so keep-alive connections stay usable.
        req.resume();
        req.on("end", () => {
            res.writeHead(200, { "content-type": "application/json" });
            res.end(JSON.stringify(body));
        });
    });
    const wss = new WebSocketServer({ server, path: "/ws" });
    const sockets = new Set<WebSocket>();

    wss.on("connection", (ws: WebSocket) => {
        sockets.add(ws);
        ws.on("close", () => sockets.delete(ws));
        if (active >= opts.maxSessions) {
            rejected++;
            const message = `Server at capacity: ${active}/${opts.maxSessions} sessions active`;
            ws.send(JSON.stringify({ type: "error", data: { message, code: CAPACITY_REACHED, active_sessions: active, max_sessions: opts.maxSessions } }));
            ws.close(1000);
            return;
        }
        active++;
        accepted++;
        peak = Math.max(peak, active);
        let steps = 0;
        ws.on("message", (raw) => {
            let type = "";
            try {
                type = String((JSON.parse(String(raw)) as { type?: unknown }).type ?? "");
            } catch {
                ws.send(JSON.stringify({ type: "error", data: { message: "Invalid JSON", code: "INVALID_JSON" } }));
                return;
            }
            if (type === "close") {
                ws.close(1000);
                return;
            }
            if (type === "step") steps++;
            ws.send(JSON.stringify({ type: "observation", data: { observation: { port, steps }, reward: 0, done: false } }));
        });
        ws.on("close", () => {
            active--;
        });
    });

    await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(0, "127.0.0.1", () => resolve());
    });
    port = (server.address() as AddressInfo).port;

    let stopped: Promise<void> | undefined;
    const stop = (): Promise<void> => {
        stopped ??= new Promise<void>((resolve) => {
            for (const ws of sockets) ws.terminate();
            wss.close();
            server.closeAllConnections();
            server.close(() => resolve());
        });
        return stopped;
    };

    return {
        port,
        address: `127.0.0.1:${port}`,
        active: () => active,
        peak: () => peak,
        rejected: () => rejected,
        accepted: () => accepted,
        stop,
    };
}

/** How to get the trainer-side venv the lock-based tests use. */
export const LOCK_VENV_HINT = "bash python/run-tests.sh --venv-only, or AGENT_RL_PYTHON_VENV=<venv with python/requirements-test.txt>";

/**
 * The python of the trainer-side lock's venv (openenv, uvicorn, websockets): AGENT_RL_PYTHON_VENV,
 * else where python/run-tests.sh makes it; undefined when it is not there.
 */
export function lockVenvPython(): string | undefined {
    const requirements = path.join(__dirname, "..", "..", "python", "requirements-test.txt");
    const cache = path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "agent-rl-infra");
    let venv = process.env.AGENT_RL_PYTHON_VENV;
    if (venv === undefined || venv === "") {
        if (!fs.existsSync(requirements)) return undefined;
        venv = path.join(cache, `python-venv-${createHash("sha256").update(fs.readFileSync(requirements)).digest("hex").slice(0, 12)}`);
    }
    const python = path.join(venv, "bin", "python");
    return fs.existsSync(python) ? python : undefined;
}
