// VllmIngress against a real nginx: run with `node --import tsx --test test/ingress/ingress-nginx.test.ts`.
// Needs nginx (apt-get install -y nginx-light) and openssl; all traffic stays on 127.0.0.1.
import { after, before, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { childPids, findNginx, localPaths, parseKeysText, startLocalIngress, type LocalIngress } from "../../components/ingress/local";
import {
    INVALID_CLIENT_REQUEST_ID,
    PROXY_DEFAULTS,
    PROXY_PATH_FIELDS,
    renderKeysFile,
    renderNginxConfig,
    resolveProxySettings,
    validateProxySettings,
    type ProxySettings,
} from "../../components/ingress/nginx";
import { request } from "../helpers/http";
import { startStubUpstream, type StubUpstream } from "../helpers/stub-upstream";
import { selfSignedCert } from "../helpers/tls";
import { scaled, scaledCount } from "../helpers/waits";

const KEY_A = "kA1.b+c_d~e/f=g-h0123456789abcdef";
const KEY_B = "Bb2Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0";
const KEY_C = "cccccccccccccccc-rotation-new-key";
const ALL_KEYS = [KEY_A, KEY_B, KEY_C];
const ALLOWED_UPSTREAM_PATHS = new Set(["/v1/chat/completions", "/v1/models", "/v1/completions", "/health"]);
const CHAT_BODY = JSON.stringify({ model: "stub-model", messages: [{ role: "user", content: "hi" }] });
const REPO = path.resolve(__dirname, "..", "..");

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

/** Send bytes exactly as given over a raw socket (no client-side path normalisation); returns status and body. */
function rawRequest(port: number, text: string): Promise<{ status: number; raw: string }> {
    return new Promise((resolve, reject) => {
        const sock = net.connect({ host: "127.0.0.1", port });
        const parts: Buffer[] = [];
        const timer = setTimeout(() => sock.destroy(new Error("raw request timed out")), 5000);
        sock.on("connect", () => sock.write(text));
        sock.on("data", (b: Buffer) => parts.push(b));
        sock.on("error", (e) => {
            clearTimeout(timer);
            reject(e);
        });
        sock.on("close", () => {
            clearTimeout(timer);
            const raw = Buffer.concat(parts).toString("utf8");
            const m = /^HTTP\/1\.[01] (\d{3})/.exec(raw);
            resolve({ status: m ? Number(m[1]) : 0, raw });
        });
    });
}

function rawLine(method: string, target: string, key: string | undefined, body?: string): string {
    const lines = [`${method} ${target} HTTP/1.1`, "Host: 127.0.0.1", "Connection: close"];
    if (key !== undefined) lines.push(`Authorization: Bearer ${key}`);
    if (body !== undefined) lines.push("Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`);
    return `${lines.join("\r\n")}\r\n\r\n${body ?? ""}`;
}

function assertJsonError(r: { status: number; headers?: http.IncomingHttpHeaders; body: string }, status: number): void {
    assert.equal(r.status, status, `expected ${status}, got ${r.status}: ${r.body}`);
    if (r.headers) assert.match(String(r.headers["content-type"]), /application\/json/);
    const parsed = JSON.parse(r.body) as { error: { code: number; message: string } };
    assert.equal(parsed.error.code, status === 497 ? 400 : status);
    assert.ok(parsed.error.message.length > 0);
}

function makeTempDir(): string {
    return fs.mkdtempSync(path.join(os.tmpdir(), "ingress-test-"));
}

// ---------------------------------------------------------------------------------------------------------------
describe("pure rendering and validation", () => {
    test("renderKeysFile renders a case-sensitive exact Bearer map with several keys", () => {
        const text = renderKeysFile([
            { name: "pool-a", key: KEY_A },
            { name: "pool-b", key: KEY_B },
        ]);
        assert.match(text, /^map \$http_authorization \$ingress_key_name \{$/m);
        assert.match(text, /^ {4}default "";$/m);
        // '.' and '+' are escaped as character classes, the entry is anchored and names the key.
        assert.ok(text.includes('"~^Bearer kA1[.]b[+]c_d~e/f=g-h0123456789abcdef$" "pool-a";'));
        assert.ok(text.includes(`"~^Bearer ${KEY_B}$" "pool-b";`));
    });

    test("renderKeysFile rejects bad names and keys with a clear message that never echoes the key", () => {
        const bad: Array<[Array<{ name: string; key: string }>, RegExp]> = [
            [[], /at least one/],
            [[{ name: "Pool_A", key: KEY_A }], /keys\[0\]\.name: "Pool_A" must match \[a-z0-9-\]/],
            [[{ name: "a", key: "short" }], /keys\[0\]\.key \("a"\): must be 16\.\.512 characters/],
            [[{ name: "a", key: 'abcdefghijklmnop"; }' }], /keys\[0\]\.key \("a"\)/],
            [[{ name: "a", key: "abcdefghijklmnop qrs" }], /keys\[0\]\.key/],
            [[{ name: "a", key: "abcdefghijklmnop$host" }], /keys\[0\]\.key/],
            [
                [
                    { name: "a", key: KEY_A },
                    { name: "a", key: KEY_B },
                ],
                /keys\[1\]\.name: "a" is used twice/,
            ],
            [
                [
                    { name: "a", key: KEY_A },
                    { name: "b", key: KEY_A },
                ],
                /keys\[1\]\.key \("b"\): same secret/,
            ],
        ];
        for (const [keys, re] of bad) {
            assert.throws(
                () => renderKeysFile(keys),
                (e: Error) => {
                    assert.match(e.message, re);
                    for (const k of keys) if (k.key.length > 0) assert.ok(!e.message.includes(k.key), "error message must not contain the key");
                    return true;
                },
            );
        }
    });

    test("parseKeysText reads 'name key' lines with comments and reports line numbers", () => {
        assert.deepEqual(parseKeysText(`# comment\n\npool-a ${KEY_A}\n  pool-b   ${KEY_B}  \n`), [
            { name: "pool-a", key: KEY_A },
            { name: "pool-b", key: KEY_B },
        ]);
        assert.throws(() => parseKeysText(`pool-a ${KEY_A} extra\n`, "k.txt"), /k\.txt:1: expected "name key"/);
        assert.throws(() => parseKeysText("# nothing\n", "k.txt"), /at least one/);
    });

    test("validateProxySettings accepts defaults and reports every problem with field and fix", () => {
        assert.deepEqual(validateProxySettings({ upstream: "vllm.rl.svc.cluster.local:8000" }), []);
        const errs = validateProxySettings({
            upstream: "http://vllm:8000/v1",
            listenPort: 70000,
            listenAddress: "localhost",
            maxBodySize: "4 MB",
            rateLimitPerSecond: 0,
            rateLimitBurst: -1,
            upstreamKeepalive: 0,
            readTimeoutSeconds: 1.5,
            keysFile: "relative/keys.conf",
            runtimeDir: "/tmp/with space",
            accessLog: "/var/log/../x",
            workerProcesses: 0,
        } as ProxySettings);
        const expect: Array<[string, RegExp]> = [
            ["upstream", /upstream: "http:\/\/vllm:8000\/v1" must be "host:port" without scheme or path/],
            ["listenPort", /listenPort: 70000 must be an integer 1\.\.65535/],
            ["listenAddress", /listenAddress: "localhost" must be an IPv4 address/],
            ["maxBodySize", /maxBodySize: "4 MB" must be a positive nginx size like "512k" or "4m"/],
            ["rateLimitPerSecond", /rateLimitPerSecond: 0 must be an integer > 0/],
            ["rateLimitBurst", /rateLimitBurst: -1 must be an integer >= 0/],
            ["upstreamKeepalive", /upstreamKeepalive: 0 must be an integer > 0/],
            ["readTimeoutSeconds", /readTimeoutSeconds: 1\.5 must be an integer/],
            ["keysFile", /keysFile: "relative\/keys\.conf" must be an absolute path/],
            ["runtimeDir", /runtimeDir: "\/tmp\/with space" must be an absolute path/],
            ["accessLog", /accessLog: "\/var\/log\/\.\.\/x" must be an absolute path .* without "\.\."/],
            ["workerProcesses", /workerProcesses: 0 must be an integer 1\.\.256/],
        ];
        for (const [field, re] of expect)
            assert.ok(
                errs.some((e) => re.test(e)),
                `no message for ${field} in:\n${errs.join("\n")}`,
            );
        assert.equal(errs.length, expect.length, errs.join("\n"));
        assert.throws(() => renderNginxConfig({ upstream: "vllm:8000", maxBodySize: "huge" }), /invalid ingress proxy settings:\n {2}- maxBodySize/);
    });

    test("?? defaults keep explicit values and fill the rest", () => {
        const r = resolveProxySettings({ upstream: "v:1", rateLimitBurst: 0, allowCompletions: false, maxBodySize: undefined });
        assert.equal(r.rateLimitBurst, 0);
        assert.equal(r.maxBodySize, PROXY_DEFAULTS.maxBodySize);
        assert.equal(r.readTimeoutSeconds, 600);
    });

    /** Three settings variants and the config each renders. */
    const rendered = (): Array<[ProxySettings, string]> => {
        const base: ProxySettings = { upstream: "vllm.rl.svc:8000" };
        const variants: ProxySettings[] = [base, { ...base, allowCompletions: true }, { ...base, healthUnauthenticated: true, tlsEnabled: true }];
        return variants.map((v) => [v, renderNginxConfig(v)]);
    };

    test("rendered config never contains a key, and its access log never the request line, args or headers", () => {
        for (const [, text] of rendered()) {
            for (const k of ALL_KEYS) assert.ok(!text.includes(k));
            assert.doesNotMatch(text, /Bearer (?!realm=)[A-Za-z0-9]/, "no Bearer value in the config");
            const logFormat = text.slice(text.indexOf("log_format"), text.indexOf("access_log"));
            assert.doesNotMatch(
                logFormat,
                /\$request\b|\$request_uri|\$http_|\$args|\$query_string|\$arg_/,
                "log format must not use request line, args or headers",
            );
            assert.match(logFormat, /\$ingress_key_name/);
        }
    });

    test("rendered config: keys from the included file, Authorization stripped upstream, keep-alive, unbuffered streams, 429, long reads", () => {
        for (const [, text] of rendered()) {
            assert.ok(text.includes("include /etc/nginx/keys/keys.conf;"));
            assert.ok(text.includes('proxy_set_header Authorization "";'));
            assert.ok(text.includes("keepalive 256;"));
            assert.ok(text.includes("proxy_buffering off;"));
            assert.ok(text.includes("limit_req_status 429;"));
            assert.ok(text.includes("proxy_read_timeout 600s;"));
        }
    });

    test("rendered config allow-lists routes per settings (completions, unauthenticated health) and listens with TLS when asked", () => {
        for (const [v, text] of rendered()) {
            assert.equal(text.includes("location = /v1/completions"), v.allowCompletions === true);
            assert.equal(text.includes("location = /health"), v.healthUnauthenticated === true);
            assert.equal(text.includes("listen 0.0.0.0:8080 ssl;"), v.tlsEnabled === true);
        }
    });

    test("every variant of the rendered config passes `nginx -t` (paths localised)", () => {
        const dir = makeTempDir();
        try {
            const cert = selfSignedCert(dir);
            const paths = localPaths(dir);
            fs.writeFileSync(paths.keysFile, renderKeysFile([{ name: "a", key: KEY_A }]));
            fs.copyFileSync(cert.certFile, paths.tlsCertFile);
            fs.copyFileSync(cert.keyFile, paths.tlsKeyFile);
            for (const tlsEnabled of [false, true]) {
                for (const allowCompletions of [false, true]) {
                    for (const healthUnauthenticated of [false, true]) {
                        const conf = path.join(dir, "nginx.conf");
                        fs.writeFileSync(
                            conf,
                            renderNginxConfig({
                                upstream: "127.0.0.1:9",
                                ...paths,
                                listenAddress: "127.0.0.1",
                                listenPort: 18999,
                                tlsEnabled,
                                allowCompletions,
                                healthUnauthenticated,
                            }),
                        );
                        const r = spawnSync("nginx", ["-t", "-q", "-p", `${dir}/`, "-e", paths.errorLog, "-c", conf], {
                            encoding: "utf8",
                            timeout: scaled(15000),
                        });
                        assert.equal(
                            r.status,
                            0,
                            `nginx -t failed for tls=${tlsEnabled} completions=${allowCompletions} health=${healthUnauthenticated}: ${r.stderr}`,
                        );
                    }
                }
            }
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});

// ---------------------------------------------------------------------------------------------------------------
describe("real nginx: authentication, allow-list, forwarding", () => {
    let stub: StubUpstream;
    let ing: LocalIngress;
    before(async () => {
        stub = await startStubUpstream();
        ing = await startLocalIngress({
            upstream: stub.url,
            keys: [
                { name: "pool-a", key: KEY_A },
                { name: "pool-b", key: KEY_B },
            ],
            settings: { maxBodySize: "64k" },
        });
    });
    after(async () => {
        await ing?.stop();
        await stub?.stop();
    });

    test("valid key → 200; upstream sees the canonical path, proper Host and no Authorization", async () => {
        const before = stub.requests.length;
        const r = await request(`${ing.url}/v1/chat/completions`, { method: "POST", headers: auth(KEY_A), body: CHAT_BODY });
        assert.equal(r.status, 200, r.body);
        assert.equal((JSON.parse(r.body) as { object: string }).object, "chat.completion");
        const m = await request(`${ing.url}/v1/models`, { headers: auth(KEY_B) });
        assert.equal(m.status, 200, m.body);
        const seen = stub.requests.slice(before);
        assert.deepEqual(
            seen.map((s) => `${s.method} ${s.rawUrl}`),
            ["POST /v1/chat/completions", "GET /v1/models"],
        );
        for (const s of seen) {
            assert.equal(s.headers.authorization, undefined, "Authorization must not be forwarded");
            assert.ok(!s.rawHeaders.some((h) => ALL_KEYS.some((k) => h.includes(k))), "no header carries a key");
            assert.equal(s.headers.host, `127.0.0.1:${stub.port}`);
        }
        assert.equal(seen[0]!.body, CHAT_BODY);
    });

    test("no key, wrong key, key in query string, non-Bearer scheme → 401 JSON with WWW-Authenticate", async () => {
        const before = stub.requests.length;
        const cases: Array<[string, string, Record<string, string>]> = [
            ["no key", "/v1/chat/completions", {}],
            ["wrong key", "/v1/chat/completions", auth("x".repeat(32))],
            ["key prefix", "/v1/chat/completions", auth(KEY_A.slice(0, -1))],
            ["key plus suffix", "/v1/chat/completions", auth(`${KEY_A}x`)],
            ["key with different case", "/v1/chat/completions", auth(KEY_B.toLowerCase())],
            ["regex metachar not literal", "/v1/chat/completions", auth(KEY_A.replace(".", "x"))],
            ["key in query string", `/v1/chat/completions?api_key=${KEY_A}`, {}],
            ["key in query string (models)", `/v1/models?key=${KEY_A}`, {}],
            ["lower-case scheme", "/v1/chat/completions", { authorization: `bearer ${KEY_A}` }],
            ["Token scheme", "/v1/chat/completions", { authorization: `Token ${KEY_A}` }],
            ["Basic scheme", "/v1/chat/completions", { authorization: `Basic ${Buffer.from(`u:${KEY_A}`).toString("base64")}` }],
            ["bare key", "/v1/chat/completions", { authorization: KEY_A }],
            ["double space", "/v1/chat/completions", { authorization: `Bearer  ${KEY_A}` }],
            ["x-api-key header", "/v1/chat/completions", { "x-api-key": KEY_A }],
        ];
        for (const [label, p, headers] of cases) {
            const method = p.startsWith("/v1/models") ? "GET" : "POST";
            const r = await request(`${ing.url}${p}`, { method, headers, ...(method === "POST" ? { body: CHAT_BODY } : {}) });
            assert.equal(r.status, 401, `${label}: ${r.status} ${r.body}`);
            assertJsonError(r, 401);
            assert.match(String(r.headers["www-authenticate"]), /^Bearer/, label);
        }
        assert.equal(stub.requests.length, before, "nothing reached the upstream");
    });

    test("non-allow-listed paths, wrong methods and path tricks are refused (raw socket), whatever the key", async () => {
        const before = stub.requests.length;
        const cases: Array<[string, string, number | undefined]> = [
            ["POST", "/pause", 404],
            ["POST", "/resume", 404],
            ["POST", "/update_weights", 404],
            ["POST", "/collective_rpc", 404],
            ["POST", "/init_weight_transfer_engine", 404],
            ["GET", "/metrics", 404],
            ["POST", "/tokenize", 404],
            ["POST", "/detokenize", 404],
            ["GET", "/health", 404],
            ["POST", "/v1/completions", 404],
            ["POST", "/v1/embeddings", 404],
            ["GET", "/", 404],
            ["GET", "/docs", 404],
            ["POST", "/v1/chat/completions/../../pause", 404],
            ["POST", "/v1/%2e%2e/pause", 404],
            ["POST", "/v1/chat/completions/..%2f..%2fpause", 404],
            ["POST", "/v1/chat%2fcompletions", 404],
            ["POST", "//v1/chat/completions", 404],
            ["POST", "/v1//chat/completions", 404],
            ["POST", "/v1/./chat/completions", 404],
            ["POST", "/v1/chat/completions;x", 404],
            ["POST", "/v1/chat/completions/", 404],
            ["POST", "/v1/chat/completions%00", 400],
            ["POST", "/v1/models%00?x=1", 400],
            ["GET", "/_ingress/bad-request", 400],
            ["POST", "/v1/chat/completions%20", 404],
            ["POST", "/v1/chat/completions?x=1", 404],
            ["POST", "/v1/chat/completions#frag", undefined],
            ["GET", "/v1/./models/../../metrics", 404],
            ["GET", "/V1/models", 404],
            ["GET", "/v1/MODELS", 404],
            ["GET", "/%76%31/models", 404],
            ["GET", "/v1/models/", 404],
            ["GET", "/v1/models?x=1", 404],
            ["GET", "/../v1/models", 400],
            ["POST", "http://127.0.0.1/pause", 404],
            ["POST", "http://127.0.0.1/v1/chat/completions/../../pause", 404],
            ["GET", "http://vllm:8000/metrics", 404],
            ["GET", "/v1/chat/completions", 405],
            ["PUT", "/v1/chat/completions", 405],
            ["DELETE", "/v1/models", 405],
            ["HEAD", "/v1/models", 405],
            ["OPTIONS", "/v1/chat/completions", 405],
            ["POST", "/v1/models", 405],
            ["GET", "*", undefined],
        ];
        for (const key of [KEY_A, undefined]) {
            for (const [method, target, expected] of cases) {
                const withBody = method === "POST" || method === "PUT";
                const r = await rawRequest(ing.port, rawLine(method, target, key, withBody ? CHAT_BODY : undefined));
                const label = `${method} ${target} key=${key ? "valid" : "none"} → ${r.status}`;
                assert.ok(r.status >= 400 && r.status < 500, label);
                // Without a key, a trick that normalises onto an allowed route is refused with 401 before the raw-target check.
                if (expected !== undefined) assert.ok(r.status === expected || (key === undefined && r.status === 401), `${label}, want ${expected}`);
                if (method !== "HEAD") {
                    const body = r.raw.slice(r.raw.indexOf("\r\n\r\n") + 4);
                    assert.doesNotThrow(() => JSON.parse(body), `${label}: JSON body`);
                }
            }
        }
        assert.deepEqual(
            stub.requests.slice(before).map((s) => s.rawUrl),
            [],
            "no refused request reached the upstream",
        );
    });

    test("absolute-form request line for an allowed path reaches upstream only as the canonical path", async () => {
        const before = stub.requests.length;
        const r = await rawRequest(ing.port, rawLine("POST", "http://127.0.0.1/v1/chat/completions", KEY_A, CHAT_BODY));
        assert.ok(r.status === 200 || (r.status >= 400 && r.status < 500), `status ${r.status}`);
        for (const s of stub.requests.slice(before)) assert.equal(s.rawUrl, "/v1/chat/completions");
    });

    test("over-size body → 413 JSON, nothing forwarded", async () => {
        const before = stub.requests.length;
        const big = JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(100 * 1024) }] });
        const r = await request(`${ing.url}/v1/chat/completions`, { method: "POST", headers: auth(KEY_A), body: big });
        assertJsonError(r, 413);
        const ok = await request(`${ing.url}/v1/chat/completions`, {
            method: "POST",
            headers: auth(KEY_A),
            body: JSON.stringify({ m: "x".repeat(60 * 1024) }),
        });
        assert.equal(ok.status, 200, "a body just under the limit passes");
        assert.deepEqual(
            stub.requests.slice(before).map((s) => s.body.length),
            [60 * 1024 + 8],
        );
    });

    test("after all of that, the upstream log holds only canonical allowed paths and no query strings", () => {
        assert.ok(stub.requests.length > 0);
        for (const s of stub.requests) {
            assert.ok(ALLOWED_UPSTREAM_PATHS.has(s.rawUrl), `upstream saw ${s.method} ${s.rawUrl}`);
            assert.ok(["/v1/chat/completions", "/v1/models"].includes(s.rawUrl), `allowCompletions/health are off here: ${s.rawUrl}`);
            assert.equal(s.headers.authorization, undefined);
        }
    });

    test("access and error logs contain key names but never a key", () => {
        const access = fs.readFileSync(ing.accessLogPath, "utf8");
        const errors = fs.existsSync(ing.errorLogPath) ? fs.readFileSync(ing.errorLogPath, "utf8") : "";
        for (const k of ALL_KEYS) {
            assert.ok(!access.includes(k), "access log contains a key");
            assert.ok(!errors.includes(k), "error log contains a key");
            assert.ok(!access.includes(encodeURIComponent(k)), "access log contains an encoded key");
        }
        const lines = access
            .trim()
            .split("\n")
            .map((l) => JSON.parse(l) as { key: string; path: string; status: number });
        assert.ok(lines.some((l) => l.key === "pool-a" && l.status === 200));
        assert.ok(lines.some((l) => l.key === "pool-b" && l.status === 200));
        assert.ok(
            lines.some((l) => l.path === "other" && l.status === 404),
            "refused paths are logged as 'other'",
        );
    });

    test("the keys file is private and the config text has no key", () => {
        assert.equal(fs.statSync(ing.keysPath).mode & 0o777, 0o600);
        for (const k of ALL_KEYS) assert.ok(!ing.configText.includes(k));
        assert.equal(fs.readFileSync(ing.configPath, "utf8"), ing.configText);
    });

    test("the config ingress:local serves is the one the component renders for the same settings, identical apart from file paths", () => {
        // Deploy-side paths (what the Pulumi component mounts) vs the local run dir.
        const deployPaths = {
            keysFile: "/etc/nginx/keys/keys.conf",
            tlsCertFile: "/etc/nginx/tls/tls.crt",
            tlsKeyFile: "/etc/nginx/tls/tls.key",
            runtimeDir: "/tmp/nginx",
            errorLog: "/tmp/nginx/error.log",
            accessLog: "/dev/stdout",
        };
        const deployed = renderNginxConfig({ ...ing.settings, ...deployPaths });
        assert.notEqual(deployed, ing.configText);
        let mapped = deployed;
        const pairs = PROXY_PATH_FIELDS.map((f) => [deployPaths[f], ing.settings[f]] as const).sort((a, b) => b[0].length - a[0].length);
        for (const [from, to] of pairs) mapped = mapped.split(from).join(to);
        assert.equal(mapped, ing.configText);
    });
});

// ---------------------------------------------------------------------------------------------------------------
describe("real nginx: X-Request-Id (vLLM's request id)", () => {
    let stub: StubUpstream;
    let ing: LocalIngress;
    before(async () => {
        stub = await startStubUpstream();
        ing = await startLocalIngress({ upstream: stub.url, keys: [{ name: "pool-a", key: KEY_A }] });
    });
    after(async () => {
        await ing?.stop();
        await stub?.stop();
    });

    const NGINX_ID = /^[0-9a-f]{32}$/; // nginx $request_id: 16 random bytes in hex
    /** The nginx startLocalIngress runs: >= 1.23 joins repeated headers in $http_* with ", "; 1.22 (Debian bookworm) returns the first. */
    const nginxJoinsRepeatedHeaders = (() => {
        const m = /nginx\/(\d+)\.(\d+)/.exec(spawnSync(findNginx(), ["-v"], { encoding: "utf8" }).stderr ?? "");
        return m !== null && (Number(m[1]) > 1 || Number(m[2]) >= 23);
    })();

    /** Send a chat completion with exactly these X-Request-Id header lines; return what vLLM saw and the access-log line. */
    async function send(ids: string[]): Promise<{ upstream: string[]; log: { request_id: string; client_request_id: string; ingress_request_id: string } }> {
        const reqBefore = stub.requests.length;
        const logBefore = fs.existsSync(ing.accessLogPath) ? fs.readFileSync(ing.accessLogPath, "utf8").length : 0;
        const head = rawLine("POST", "/v1/chat/completions", KEY_A, CHAT_BODY).split("\r\n\r\n")[0]!;
        const r = await rawRequest(ing.port, `${head}\r\n${ids.map((v) => `X-Request-Id: ${v}\r\n`).join("")}\r\n${CHAT_BODY}`);
        assert.equal(r.status, 200, `ids ${JSON.stringify(ids)}: ${r.raw}`);
        const seen = stub.requests.slice(reqBefore);
        assert.equal(seen.length, 1);
        const raw = seen[0]!.rawHeaders;
        const upstream = raw.filter((_, i) => i % 2 === 1 && raw[i - 1]!.toLowerCase() === "x-request-id");
        let line = "";
        for (let i = 0; i < scaledCount(40) && line === ""; i++) {
            line = fs.readFileSync(ing.accessLogPath, "utf8").slice(logBefore).trim();
            if (line === "") await sleep(25);
        }
        assert.equal(line.split("\n").length, 1, line);
        return { upstream, log: JSON.parse(line) as { request_id: string; client_request_id: string; ingress_request_id: string } };
    }

    test("a well-formed client id reaches vLLM unchanged and is logged next to nginx's own id", async () => {
        for (const id of ["rollout-7:step.3_a", "x", "A".repeat(128), "0123456789abcdef0123456789abcdef", "run:1.2_3-4"]) {
            const { upstream, log } = await send([id]);
            assert.deepEqual(upstream, [id], "vLLM takes its request id from X-Request-Id: the harness's id must survive");
            assert.equal(log.request_id, id);
            assert.equal(log.client_request_id, id);
            assert.match(log.ingress_request_id, NGINX_ID);
        }
    });

    test("no client id: nginx generates one, sends it upstream and logs it", async () => {
        const a = await send([]);
        const b = await send([]);
        assert.equal(a.upstream.length, 1);
        assert.match(a.upstream[0]!, NGINX_ID);
        assert.notEqual(a.upstream[0], b.upstream[0], "a fresh id per request");
        assert.deepEqual(a.log, { ...a.log, request_id: a.upstream[0], client_request_id: "", ingress_request_id: a.upstream[0] });
    });

    test("a malformed client id (too long, bad characters, empty) never reaches vLLM: a generated id replaces it", async () => {
        const bad = ["A".repeat(129), "a b", "a,b", "a;b", "a/b", 'a"b', "$request_id", "{x}", "%41", "a=b", "\u00e9t\u00e9", "a\tb", "", " "];
        for (const id of bad) {
            const { upstream, log } = await send([id]);
            assert.equal(upstream.length, 1, `${JSON.stringify(id)}: exactly one X-Request-Id upstream`);
            assert.match(upstream[0]!, NGINX_ID, `${JSON.stringify(id)} replaced by a generated id`);
            assert.equal(log.request_id, upstream[0]);
            assert.equal(log.ingress_request_id, upstream[0]);
            // nginx trims surrounding whitespace, so " " arrives as an absent header.
            assert.equal(log.client_request_id, id.trim() === "" ? "" : INVALID_CLIENT_REQUEST_ID, JSON.stringify(id));
        }
    });

    test("several X-Request-Id headers never reach vLLM as they were sent", async () => {
        const { upstream, log } = await send(["bad id", "good-id"]);
        assert.equal(upstream.length, 1);
        assert.match(upstream[0]!, NGINX_ID, "first value malformed: generated on every nginx version");
        assert.equal(log.client_request_id, INVALID_CLIENT_REQUEST_ID);
        const two = await send(["id-a", "id-b"]);
        assert.equal(two.upstream.length, 1, "one header upstream, never both");
        if (nginxJoinsRepeatedHeaders) {
            assert.match(two.upstream[0]!, NGINX_ID, '"id-a, id-b" fails the pattern: generated');
            assert.equal(two.log.client_request_id, INVALID_CLIENT_REQUEST_ID);
        } else {
            assert.equal(two.upstream[0], "id-a", "nginx < 1.23 reads only the first header line");
        }
    });
});

// ---------------------------------------------------------------------------------------------------------------
describe("real nginx: optional routes, rate limit, rotation, upstream down", () => {
    let stub: StubUpstream;
    const ingresses: LocalIngress[] = [];
    before(async () => {
        stub = await startStubUpstream();
    });
    after(async () => {
        for (const i of ingresses) await i.stop().catch(() => undefined);
        await stub?.stop();
    });

    test("allowCompletions and healthUnauthenticated open exactly their route", async () => {
        const ing = await startLocalIngress({
            upstream: stub.url,
            keys: [{ name: "a", key: KEY_A }],
            settings: { allowCompletions: true, healthUnauthenticated: true },
        });
        ingresses.push(ing);
        const before = stub.requests.length;
        const c = await request(`${ing.url}/v1/completions`, { method: "POST", headers: auth(KEY_A), body: JSON.stringify({ prompt: "hi" }) });
        assert.equal(c.status, 200, c.body);
        assertJsonError(await request(`${ing.url}/v1/completions`, { method: "POST", body: "{}" }), 401);
        const h = await request(`${ing.url}/health`);
        assert.equal(h.status, 200, h.body);
        assert.equal(JSON.parse(h.body).reached, "/health");
        assertJsonError(await request(`${ing.url}/health`, { method: "POST", body: "{}" }), 405);
        assert.equal((await rawRequest(ing.port, rawLine("GET", "/health?x=1", undefined))).status, 404);
        assert.equal((await rawRequest(ing.port, rawLine("GET", "/health/../metrics", undefined))).status, 404);
        assert.deepEqual(
            stub.requests.slice(before).map((s) => `${s.method} ${s.rawUrl}`),
            ["POST /v1/completions", "GET /health"],
        );
    });

    test("per-key rate limit → 429 JSON for a bounded burst, other keys unaffected", async () => {
        const ing = await startLocalIngress({
            upstream: stub.url,
            keys: [
                { name: "a", key: KEY_A },
                { name: "b", key: KEY_B },
            ],
            settings: { rateLimitPerSecond: 1, rateLimitBurst: 3 },
        });
        ingresses.push(ing);
        const results = await Promise.all(
            Array.from({ length: 20 }, () => request(`${ing.url}/v1/chat/completions`, { method: "POST", headers: auth(KEY_A), body: CHAT_BODY })),
        );
        const ok = results.filter((r) => r.status === 200).length;
        const limited = results.filter((r) => r.status === 429);
        assert.equal(ok + limited.length, 20, results.map((r) => r.status).join(","));
        assert.ok(ok >= 1 && ok <= 5, `expected about 1 + burst(3) successes, got ${ok}`);
        assert.ok(limited.length >= 15);
        assertJsonError(limited[0]!, 429);
        assert.equal(limited[0]!.headers["retry-after"], "1");
        const other = await request(`${ing.url}/v1/chat/completions`, { method: "POST", headers: auth(KEY_B), body: CHAT_BODY });
        assert.equal(other.status, 200, "the limit is per key");
    });

    test("key rotation: two keys valid at once, then one removed + reload → only the other works", async () => {
        const ing = await startLocalIngress({
            upstream: stub.url,
            keys: [
                { name: "old", key: KEY_A },
                { name: "new", key: KEY_C },
            ],
        });
        ingresses.push(ing);
        const chat = (key: string) => request(`${ing.url}/v1/chat/completions`, { method: "POST", headers: auth(key), body: CHAT_BODY });
        assert.equal((await chat(KEY_A)).status, 200);
        assert.equal((await chat(KEY_C)).status, 200);
        assert.equal((await chat(KEY_B)).status, 401);
        await ing.setKeys([{ name: "new", key: KEY_C }]);
        assert.equal(fs.statSync(ing.keysPath).mode & 0o777, 0o600);
        assert.ok(!fs.readFileSync(ing.keysPath, "utf8").includes(KEY_A));
        assertJsonError(await chat(KEY_A), 401);
        assert.equal((await chat(KEY_C)).status, 200);
        await assert.rejects(ing.setKeys([{ name: "Bad Name", key: KEY_A }]), /keys\[0\]\.name/);
        assert.equal((await chat(KEY_C)).status, 200, "a rejected rotation leaves the running keys in place");
    });

    test("upstream down → 502 JSON", async () => {
        const dead = await startStubUpstream();
        const port = dead.port;
        await dead.stop();
        const ing = await startLocalIngress({
            upstream: `http://127.0.0.1:${port}`,
            keys: [{ name: "a", key: KEY_A }],
            settings: { connectTimeoutSeconds: 2 },
        });
        ingresses.push(ing);
        assertJsonError(await request(`${ing.url}/v1/models`, { headers: auth(KEY_A) }), 502);
    });
});

// ---------------------------------------------------------------------------------------------------------------
describe("real nginx: streaming, keep-alive, TLS", () => {
    let streamStub: StubUpstream;
    let kaStub: StubUpstream;
    let tlsDir: string;
    const ingresses: LocalIngress[] = [];
    before(async () => {
        streamStub = await startStubUpstream({ streamIntervalMs: 200, streamChunks: 5 });
        kaStub = await startStubUpstream();
        tlsDir = makeTempDir();
    });
    after(async () => {
        for (const i of ingresses) await i.stop().catch(() => undefined);
        await streamStub?.stop();
        await kaStub?.stop();
        if (tlsDir) fs.rmSync(tlsDir, { recursive: true, force: true });
    });

    /** POST a streaming chat completion and time each SSE event's arrival from the request start. */
    async function sseArrivals(url: string, ca?: string): Promise<{ status: number; arrivals: number[]; text: string }> {
        const t0 = Date.now();
        const arrivals: number[] = [];
        let text = "";
        const mod = url.startsWith("https:") ? https : http;
        const status = await new Promise<number>((resolve, reject) => {
            const req = mod.request(
                `${url}/v1/chat/completions`,
                {
                    method: "POST",
                    headers: { ...auth(KEY_A), "content-type": "application/json" },
                    agent: false,
                    timeout: scaled(10000),
                    ...(ca !== undefined ? { ca } : {}),
                },
                (res) => {
                    res.on("data", (b: Buffer) => {
                        const s = b.toString("utf8");
                        for (let i = 0; i < (s.match(/^data: /gm) ?? []).length; i++) arrivals.push(Date.now() - t0);
                        text += s;
                    });
                    res.on("end", () => resolve(res.statusCode ?? 0));
                    res.on("error", reject);
                },
            );
            req.on("timeout", () => req.destroy(new Error("SSE timeout")));
            req.on("error", reject);
            req.end(JSON.stringify({ model: "m", stream: true, messages: [] }));
        });
        return { status, arrivals, text };
    }

    /** 5 chunks 200 ms apart: the first must arrive long before the last, as vLLM wrote it. */
    function assertUnbuffered({ status, arrivals, text }: { status: number; arrivals: number[]; text: string }): void {
        assert.equal(status, 200);
        assert.equal(arrivals.length, 6, text);
        assert.ok(text.endsWith("data: [DONE]\n\n"));
        const first = arrivals[0]!;
        const last = arrivals[arrivals.length - 1]!;
        assert.ok(last >= 750, `stream lasted ${last} ms (5 chunks at 200 ms)`);
        assert.ok(first < 400, `first chunk after ${first} ms; buffered proxies deliver it only at the end (${last} ms)`);
        assert.ok(last - first >= 600, `chunks spread over ${last - first} ms`);
    }

    test("SSE chunks arrive unbuffered: first chunk well before the stream ends", async () => {
        const ing = await startLocalIngress({ upstream: streamStub.url, keys: [{ name: "a", key: KEY_A }] });
        ingresses.push(ing);
        assertUnbuffered(await sseArrivals(ing.url));
    });

    test("SSE over TLS arrives unbuffered too (with proxy_buffering on, plain HTTP still streamed but TLS held every chunk to the end)", async () => {
        const cert = selfSignedCert(tlsDir);
        const ing = await startLocalIngress({
            upstream: streamStub.url,
            keys: [{ name: "a", key: KEY_A }],
            tls: { certFile: cert.certFile, keyFile: cert.keyFile },
        });
        ingresses.push(ing);
        assert.ok(ing.url.startsWith("https://"));
        assertUnbuffered(await sseArrivals(ing.url, cert.ca));
    });

    test("keep-alive: 200 sequential + parallel requests use far fewer upstream TCP connections", async () => {
        // 200 requests from one key as fast as they go: above a stack's default limit (50/s, burst 100),
        // which is not what this test is about.
        const ing = await startLocalIngress({
            upstream: kaStub.url,
            keys: [{ name: "a", key: KEY_A }],
            settings: { rateLimitPerSecond: 10_000, rateLimitBurst: 10_000 },
        });
        ingresses.push(ing);
        const c0 = kaStub.connections();
        const agent = new http.Agent({ keepAlive: true, maxSockets: 10 });
        try {
            for (let i = 0; i < 100; i++) {
                const r = await request(`${ing.url}/v1/chat/completions`, { method: "POST", headers: auth(KEY_A), body: CHAT_BODY, agent });
                assert.equal(r.status, 200);
            }
            for (let batch = 0; batch < 10; batch++) {
                const rs = await Promise.all(Array.from({ length: 10 }, () => request(`${ing.url}/v1/models`, { headers: auth(KEY_A), agent })));
                assert.ok(rs.every((r) => r.status === 200));
            }
        } finally {
            agent.destroy();
        }
        const used = kaStub.connections() - c0;
        assert.ok(used >= 1 && used <= 20, `200 requests opened ${used} upstream connections (want ≤ 10%)`);
    });

    test("TLS with a self-signed certificate: https works, plain HTTP to the TLS port is refused", async () => {
        const cert = selfSignedCert(tlsDir);
        const ing = await startLocalIngress({
            upstream: kaStub.url,
            keys: [{ name: "a", key: KEY_A }],
            tls: { certFile: cert.certFile, keyFile: cert.keyFile },
        });
        ingresses.push(ing);
        assert.ok(ing.url.startsWith("https://127.0.0.1:"));
        const r = await request(`${ing.url}/v1/chat/completions`, { method: "POST", headers: auth(KEY_A), body: CHAT_BODY, ca: cert.ca });
        assert.equal(r.status, 200, r.body);
        const denied = await request(`${ing.url}/v1/chat/completions`, { method: "POST", body: CHAT_BODY, ca: cert.ca });
        assertJsonError(denied, 401);
        const plain = await request(`http://127.0.0.1:${ing.port}/v1/models`, { headers: auth(KEY_A) });
        assert.equal(plain.status, 400);
        assertJsonError({ status: 497, body: plain.body }, 497);
        await assert.rejects(request(`${ing.url}/v1/models`, { headers: auth(KEY_A) }), /self.signed|certificate/i, "an untrusted cert is rejected by default");
    });
});

// ---------------------------------------------------------------------------------------------------------------
describe("non-root: nginx writes only under runtimeDir", () => {
    test("every writable path in the deploy config is under runtimeDir (or stderr / stdout)", () => {
        const text = renderNginxConfig({ upstream: "vllm:8000", runtimeDir: "/run/ingress", tlsEnabled: true });
        const writers = [
            "pid",
            "client_body_temp_path",
            "proxy_temp_path",
            "fastcgi_temp_path",
            "uwsgi_temp_path",
            "scgi_temp_path",
            "error_log",
            "access_log",
        ];
        for (const d of writers) {
            const m = new RegExp(`^\\s*${d} (\\S+)`, "m").exec(text);
            assert.ok(m, `${d} is set explicitly (compiled-in defaults point at /var/lib/nginx, /var/log/nginx, /run)`);
            assert.ok(m[1]!.startsWith("/run/ingress/") || m[1] === "stderr" || m[1] === "/dev/stdout", `${d} ${m[1]}`);
        }
    });

    const canDrop = process.getuid?.() === 0 && spawnSync("setpriv", ["--help"]).status === 0;
    test("runs as uid 65534 with config and keys read-only, writing only its runtimeDir", {
        skip: canDrop ? false : "needs root + setpriv to drop privileges",
    }, async () => {
        const stub = await startStubUpstream({ streamIntervalMs: 20 });
        const base = makeTempDir();
        fs.chmodSync(base, 0o755);
        const confDir = path.join(base, "etc");
        const runDir = path.join(base, "run");
        fs.mkdirSync(confDir, { mode: 0o755 });
        fs.mkdirSync(runDir, { mode: 0o700 });
        fs.chownSync(runDir, 65534, 65534); // the emptyDir: the only directory the process may write
        const keysFile = path.join(confDir, "keys.conf");
        fs.writeFileSync(keysFile, renderKeysFile([{ name: "a", key: KEY_A }]), { mode: 0o400 });
        fs.chownSync(keysFile, 65534, 65534); // like a Secret volume with defaultMode 0400 and runAsUser
        const port = await (async () => {
            const p = await startStubUpstream();
            await p.stop();
            return p.port;
        })();
        const conf = path.join(confDir, "nginx.conf");
        fs.writeFileSync(
            conf,
            renderNginxConfig({
                upstream: `127.0.0.1:${stub.port}`,
                listenAddress: "127.0.0.1",
                listenPort: port,
                keysFile,
                runtimeDir: runDir,
                errorLog: "stderr",
                accessLog: `${runDir}/access.log`,
            }),
            { mode: 0o444 },
        );
        const before = fs.readdirSync(confDir).sort();
        const child = spawn(
            "setpriv",
            ["--reuid=65534", "--regid=65534", "--clear-groups", "--", "nginx", "-p", `${runDir}/`, "-e", "stderr", "-c", conf, "-g", "daemon off;"],
            {
                stdio: ["ignore", "pipe", "pipe"],
            },
        );
        let err = "";
        child.stderr!.on("data", (b: Buffer) => (err += b.toString()));
        const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
        try {
            let up = false;
            for (let i = 0; i < scaledCount(100) && !up && child.exitCode === null; i++) {
                up = await new Promise<boolean>((resolve) => {
                    const s = net.connect({ host: "127.0.0.1", port }, () => {
                        s.destroy();
                        resolve(true);
                    });
                    s.on("error", () => resolve(false));
                });
                if (!up) await sleep(50);
            }
            assert.ok(up, `nginx as nobody did not start: ${err}`);
            const r = await request(`http://127.0.0.1:${port}/v1/chat/completions`, {
                method: "POST",
                headers: auth(KEY_A),
                body: JSON.stringify({ stream: true, pad: "x".repeat(200 * 1024) }),
            });
            assert.equal(r.status, 200, r.body);
            assert.match(r.body, /data: \[DONE\]/);
            assertJsonError(await request(`http://127.0.0.1:${port}/pause`, { method: "POST", headers: auth(KEY_A), body: "{}" }), 404);
            const workers = childPids(child.pid!)
                .flatMap((p) => childPids(p))
                .concat(childPids(child.pid!));
            const uids = workers.map((p) => /^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${p}/status`, "utf8"))?.[1]);
            assert.ok(uids.length > 0 && uids.every((u) => u === "65534"), `uids ${uids.join(",")}`);
            assert.deepEqual(fs.readdirSync(confDir).sort(), before, "nothing written next to config/keys");
            const written = fs.readdirSync(runDir).sort();
            assert.deepEqual(written, ["access.log", "client_body", "fastcgi", "nginx.pid", "proxy", "scgi", "uwsgi"]);
            assert.doesNotMatch(err, /\[(emerg|alert|crit)\]/, err);
        } finally {
            child.kill("SIGTERM");
            await Promise.race([exited, sleep(5000)]);
            if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
            await stub.stop();
            fs.rmSync(base, { recursive: true, force: true });
        }
    });
});

// ---------------------------------------------------------------------------------------------------------------
describe("npm run ingress:local (scripts/ingress-local.ts)", () => {
    let stub: StubUpstream;
    let dir: string;
    let keysFile: string;
    const children: Array<ReturnType<typeof spawn>> = [];
    const script = path.join(REPO, "scripts", "ingress-local.ts");
    const run = (args: string[]) => spawnSync(process.execPath, ["--import", "tsx", script, ...args], { encoding: "utf8", cwd: REPO, timeout: scaled(30000) });
    before(async () => {
        stub = await startStubUpstream();
        dir = makeTempDir();
        keysFile = path.join(dir, "keys.txt");
        fs.writeFileSync(keysFile, `# sandbox keys\npool-a ${KEY_A}\n`, { mode: 0o600 });
    });
    after(async () => {
        for (const c of children) {
            if (c.exitCode !== null || c.signalCode !== null) continue;
            c.kill("SIGTERM"); // lets the script stop nginx and remove its dir
            await Promise.race([new Promise((r) => c.once("exit", r)), sleep(5000)]);
            if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
        }
        await stub?.stop();
        if (dir) fs.rmSync(dir, { recursive: true, force: true });
    });

    test("bad arguments → exit 2 with a clear message, nothing started", () => {
        const cases: Array<[string[], RegExp]> = [
            [["--listen", "127.0.0.1:18080", "--upstream", stub.url, "--keys-file", keysFile, "--bogus"], /unknown argument "--bogus"/],
            [["--listen", "127.0.0.1:18080", "--keys-file", keysFile], /--upstream: required/],
            [["--listen", "localhost:80", "--upstream", stub.url, "--keys-file", keysFile], /--listen: "localhost:80" must be IPv4:port/],
            [["--listen", "127.0.0.1:18080", "--upstream", "https://x:1", "--keys-file", keysFile], /--upstream: "https:\/\/x:1"/],
            [["--listen", "127.0.0.1:18080", "--upstream", stub.url, "--keys-file", path.join(dir, "missing")], /--keys-file: .*ENOENT/],
            [
                ["--listen", "127.0.0.1:18080", "--upstream", stub.url, "--keys-file", keysFile, "--tls-cert", keysFile],
                /--tls-cert and --tls-key must be given together/,
            ],
            [["--listen"], /--listen: missing value/],
        ];
        for (const [args, re] of cases) {
            const r = run(args);
            assert.equal(r.status, 2, `${args.join(" ")}: ${r.stderr}`);
            assert.match(r.stderr, re);
            assert.match(r.stderr, /usage: npm run ingress:local/);
            assert.equal(r.stdout, "");
        }
    });

    test("--print-config prints the rendered config without keys and starts nothing", () => {
        const r = run(["--listen", "127.0.0.1:18080", "--upstream", stub.url, "--keys-file", keysFile, "--health", "--print-config"]);
        assert.equal(r.status, 0, r.stderr);
        assert.match(r.stdout, /listen 127\.0\.0\.1:18080;/);
        assert.match(r.stdout, /location = \/health/);
        assert.ok(!r.stdout.includes(KEY_A));
    });

    test("runs nginx in the foreground, serves requests, stops and cleans up on SIGTERM", async () => {
        const probe = await startStubUpstream();
        const port = probe.port; // a free port on 127.0.0.1
        await probe.stop();
        const child = spawn(process.execPath, ["--import", "tsx", script, "--listen", `127.0.0.1:${port}`, "--upstream", stub.url, "--keys-file", keysFile], {
            cwd: REPO,
            stdio: ["ignore", "pipe", "pipe"],
        });
        children.push(child);
        let out = "";
        let err = "";
        child.stderr!.on("data", (b: Buffer) => (err += b.toString()));
        const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
        const ready = await new Promise<string>((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error(`not ready in 20 s: ${out} ${err}`)), 20000);
            child.stdout!.on("data", (b: Buffer) => {
                out += b.toString();
                const m = /ingress:local ready (\S+) .*dir (\S+)\)/.exec(out);
                if (m) {
                    clearTimeout(timer);
                    resolve(m[2]!);
                }
            });
            void exited.then((code) => {
                clearTimeout(timer);
                reject(new Error(`exited early (${String(code)}): ${err}`));
            });
        });
        assert.ok(fs.existsSync(path.join(ready, "nginx.conf")));
        const ok = await request(`http://127.0.0.1:${port}/v1/chat/completions`, { method: "POST", headers: auth(KEY_A), body: CHAT_BODY });
        assert.equal(ok.status, 200, ok.body);
        assert.equal((await request(`http://127.0.0.1:${port}/pause`, { method: "POST", headers: auth(KEY_A), body: "{}" })).status, 404);
        child.kill("SIGTERM");
        const code = await Promise.race([exited, sleep(scaled(10_000)).then(() => "timeout" as const)]);
        assert.equal(code, 0, err);
        assert.ok(!fs.existsSync(ready), "run dir removed");
        await assert.rejects(request(`http://127.0.0.1:${port}/v1/models`, { headers: auth(KEY_A) }), /ECONNREFUSED/);
    });
});
