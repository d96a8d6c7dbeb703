// Loopback HTTP for the tests: a free port and one request on a fresh connection. Needs no fixture.
import * as http from "node:http";
import * as https from "node:https";
import * as net from "node:net";
import { scaled } from "./waits";

/**
 * Where freePort draws from: below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768
 * up by default), where the OS's own pick (listen on port 0) lands and where every outgoing connection
 * of every process on the machine takes its local port. A port the OS picked and this helper released
 * could be taken by another test's connect() before the caller listened on it (EADDRINUSE, seen in CI
 * under load); a port from here is only ever taken by a listener. Above the fixtures' fixed ports
 * (the node's 10250s, 12345), below the Python tests' range (python/tests/conftest.py, 20000-27999)
 * and the observability test's bases (from 28000).
 */
export const FREE_PORT_RANGE = { from: 12_400, to: 20_000 } as const;

/** Ports this process has handed out: never handed out twice, even after the caller closes it. */
const handedOut = new Set<number>();

function canListen(port: number): Promise<boolean> {
    return new Promise((resolve, reject) => {
        const srv = net.createServer();
        srv.unref();
        srv.once("error", (e: NodeJS.ErrnoException) => (e.code === "EADDRINUSE" || e.code === "EACCES" ? resolve(false) : reject(e)));
        // 0.0.0.0 is the stricter check: it fails when any address on the port is held, 127.0.0.1 included.
        srv.listen({ port, host: "0.0.0.0", exclusive: true }, () => srv.close(() => resolve(true)));
    });
}

/**
 * A TCP port free on every local address right now, from `from` (inclusive) to `to` (exclusive):
 * the first from offset `start` upward (wrapping), skipping held ports and ports this process already
 * handed out. Throws naming the range when none is left.
 */
export async function freePortIn(from: number, to: number, start: number): Promise<number> {
    const size = to - from;
    for (let i = 0; i < size; i++) {
        const port = from + ((start + i) % size);
        if (handedOut.has(port)) continue;
        if (await canListen(port)) {
            handedOut.add(port);
            return port;
        }
    }
    throw new Error(`freePort: no free TCP port from ${from} to ${to - 1} on this machine`);
}

/** A free TCP port from FREE_PORT_RANGE, from a random start (test processes running at once rarely try the same ports). */
export function freePort(): Promise<number> {
    const { from, to } = FREE_PORT_RANGE;
    return freePortIn(from, to, Math.floor(Math.random() * (to - from)));
}

export interface Resp {
    status: number;
    headers: http.IncomingHttpHeaders;
    body: string;
}

/** One HTTP(S) request with node:http; `agent: false` = fresh connection; `localAddress`: the client's source address (a loopback one in tests). */
export function request(
    url: string,
    opts: { method?: string; headers?: Record<string, string>; body?: string; agent?: http.Agent | false; ca?: string; localAddress?: string } = {},
): Promise<Resp> {
    const u = new URL(url);
    const mod = u.protocol === "https:" ? https : http;
    return new Promise((resolve, reject) => {
        const req = mod.request(
            u,
            {
                method: opts.method ?? "GET",
                headers: { ...(opts.body !== undefined ? { "content-type": "application/json" } : {}), ...(opts.headers ?? {}) },
                agent: opts.agent ?? false,
                ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
                ...(opts.localAddress !== undefined ? { localAddress: opts.localAddress } : {}),
                timeout: scaled(10000),
            },
            (res) => {
                const parts: Buffer[] = [];
                res.on("data", (b: Buffer) => parts.push(b));
                res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString("utf8") }));
                res.on("error", reject);
            },
        );
        req.on("timeout", () => req.destroy(new Error(`timeout: ${url}`)));
        req.on("error", reject);
        req.end(opts.body);
    });
}
