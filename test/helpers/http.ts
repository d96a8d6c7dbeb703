// Loopback HTTP for the tests: a free port and one request on a fresh connection. Needs no fixture.
import * as http from "node:http";
import * as https from "node:https";
import * as net from "node:net";
import { scaled } from "./waits";

/** A TCP port free on 127.0.0.1 right now (the OS picks it). */
export function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
        const srv = net.createServer();
        srv.unref();
        srv.on("error", reject);
        srv.listen(0, "127.0.0.1", () => {
            const addr = srv.address();
            const port = typeof addr === "object" && addr ? addr.port : 0;
            srv.close(() => resolve(port));
        });
    });
}

export interface Resp {
    status: number;
    headers: http.IncomingHttpHeaders;
    body: string;
}

/** One HTTP(S) request with node:http; `agent: false` = fresh connection. */
export function request(
    url: string,
    opts: { method?: string; headers?: Record<string, string>; body?: string; agent?: http.Agent | false; ca?: string } = {},
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
