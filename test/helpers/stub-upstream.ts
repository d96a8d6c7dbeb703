// Stub OpenAI-compatible upstream (stands in for vLLM) on 127.0.0.1: records every request exactly as received
// and counts TCP connections, so tests and benchmarks can prove what the ingress forwards and how it reuses sockets.
import * as http from "node:http";
import type { AddressInfo } from "node:net";

/** Options of startStubUpstream. */
export interface StubUpstreamOptions {
    /** Milliseconds before answering a (non-streaming) completion, or before the first SSE chunk. @default 0 */
    readonly delayMs?: number;
    /** Milliseconds between SSE chunks when the body has "stream": true. @default 10 */
    readonly streamIntervalMs?: number;
    /** Number of SSE content chunks before "data: [DONE]". @default 5 */
    readonly streamChunks?: number;
    /** Port to listen on (0 = random). @default 0 */
    readonly port?: number;
}

/** One request as the stub saw it. */
export interface StubRequest {
    readonly method: string;
    /** The request target exactly as received on the request line (path + query string, or absolute form). */
    readonly rawUrl: string;
    readonly headers: http.IncomingHttpHeaders;
    /** Raw header name/value pairs, in order. */
    readonly rawHeaders: ReadonlyArray<string>;
    readonly body: string;
}

export interface StubUpstream {
    readonly port: number;
    readonly url: string;
    /** Every request received, in order. */
    readonly requests: StubRequest[];
    /** TCP connections accepted so far (server 'connection' event). */
    connections(): number;
    stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function json(res: http.ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
}

/** Start the stub on 127.0.0.1. */
export async function startStubUpstream(opts: StubUpstreamOptions = {}): Promise<StubUpstream> {
    const delayMs = opts.delayMs ?? 0;
    const interval = opts.streamIntervalMs ?? 10;
    const chunks = opts.streamChunks ?? 5;
    const requests: StubRequest[] = [];
    let connections = 0;
    let seq = 0;

    const server = http.createServer((req, res) => {
        const parts: Buffer[] = [];
        req.on("data", (b: Buffer) => parts.push(b));
        req.on("end", () => {
            const body = Buffer.concat(parts).toString("utf8");
            const rawUrl = req.url ?? "";
            requests.push({ method: req.method ?? "", rawUrl, headers: req.headers, rawHeaders: req.rawHeaders, body });
            void handle(req.method ?? "", rawUrl, body, res).catch(() => res.destroy());
        });
    });
    server.on("connection", () => {
        connections++;
    });

    async function handle(method: string, rawUrl: string, body: string, res: http.ServerResponse): Promise<void> {
        const id = `stub-${++seq}`;
        if (method === "GET" && rawUrl === "/v1/models") {
            json(res, 200, { object: "list", data: [{ id: "stub-model", object: "model", owned_by: "stub" }] });
            return;
        }
        if (method === "POST" && (rawUrl === "/v1/chat/completions" || rawUrl === "/v1/completions")) {
            let parsed: { stream?: unknown } = {};
            try {
                parsed = JSON.parse(body) as { stream?: unknown };
            } catch {
                json(res, 400, { error: { message: "invalid JSON body", type: "invalid_request_error", code: 400 } });
                return;
            }
            const chat = rawUrl === "/v1/chat/completions";
            if (delayMs > 0) await sleep(delayMs);
            if (parsed.stream === true) {
                res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
                for (let i = 0; i < chunks; i++) {
                    if (i > 0) await sleep(interval);
                    const choice = chat ? { index: 0, delta: { content: `tok${i} ` } } : { index: 0, text: `tok${i} ` };
                    res.write(
                        `data: ${JSON.stringify({ id, object: chat ? "chat.completion.chunk" : "text_completion", choices: [choice], t: Date.now() })}\n\n`,
                    );
                }
                res.end("data: [DONE]\n\n");
                return;
            }
            const choice = chat
                ? { index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }
                : { index: 0, text: "ok", finish_reason: "stop" };
            json(res, 200, { id, object: chat ? "chat.completion" : "text_completion", model: "stub-model", choices: [choice] });
            return;
        }
        // Anything else "succeeds" and names the path it reached, so a test can detect a leak through the proxy.
        const pathOnly = rawUrl.split("?")[0] ?? rawUrl;
        json(res, 200, { reached: pathOnly });
    }

    await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(opts.port ?? 0, "127.0.0.1", () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    return {
        port,
        url: `http://127.0.0.1:${port}`,
        requests,
        connections: () => connections,
        stop: () =>
            new Promise<void>((resolve) => {
                server.close(() => resolve());
                server.closeAllConnections();
            }),
    };
}
