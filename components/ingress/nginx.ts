// Pure, target-neutral rendering of the VllmIngress nginx configuration.
// No Pulumi imports: the same functions feed the Pulumi component, `npm run ingress:local`, tests and benchmarks.
//
// Why a proxy at all: vLLM's --api-key guards only /v1/* (vllm docs/usage/security.md); /pause, /update_weights,
// /collective_rpc, /metrics, /tokenize, /init_weight_transfer_engine ... stay open, so sandboxes must never reach
// vLLM directly. The proxy allow-lists a few canonical routes and authenticates them with per-sandbox Bearer keys.

import { validateKeys, type IngressKey } from "../config/keys";
import { INGRESS_LIMIT_DEFAULTS } from "../config/ingress-defaults";
import { rolloutKeyMaps, rolloutRouteLines, rolloutSourceZone, rolloutVerifierUpstream, rolloutVerifyLocation } from "./rollout-keys";

export { validateKeys, type IngressKey };

/** Settings of the nginx reverse proxy in front of vLLM; every optional field has a safe default. */
export interface ProxySettings {
    /** TCP port nginx listens on; >1024 so a non-root container needs no NET_BIND_SERVICE. @default 8080 */
    readonly listenPort?: number;
    /** IPv4 address to bind ("0.0.0.0" = all interfaces). @default "0.0.0.0" */
    readonly listenAddress?: string;
    /** Terminate TLS on the listen port (certificate and key files must exist when nginx starts). @default false */
    readonly tlsEnabled?: boolean;
    /** PEM certificate chain used when tlsEnabled (kubernetes.io/tls Secret key "tls.crt"). @default "/etc/nginx/tls/tls.crt" */
    readonly tlsCertFile?: string;
    /** PEM private key used when tlsEnabled (kubernetes.io/tls Secret key "tls.key"). @default "/etc/nginx/tls/tls.key" */
    readonly tlsKeyFile?: string;
    /** vLLM server as "host:port" (e.g. a ClusterIP Service DNS name, resolved once when nginx starts unless upstreamResolver is set). */
    readonly upstream: string;
    /**
     * DNS server(s) nginx asks for the upstream's address while it runs (nginx `resolver`), e.g. Docker's embedded DNS
     * "127.0.0.11": a vLLM container recreated under the same name with a new address is found again, and nginx starts
     * even before vLLM exists (502 until it does). The price: no upstream keep-alive (a resolved proxy_pass opens one
     * connection per request). Unset: the name resolves once at start and connections are kept alive (a ClusterIP
     * Service's address never changes). @default undefined
     */
    readonly upstreamResolver?: string;
    /**
     * The per-rollout key verifier as "host:port" (python/agent_rl_sandbox/rollout_keys.py, docs/design/rollout-keys.md):
     * a Bearer key of the rollout-key shape (`rk1.` + 43 characters) is then accepted on the authenticated routes while
     * the verifier says it is live (auth_request), and rate-limited on its own. Operators' keys work as before.
     * Unset: only the keys file's keys. @default undefined
     */
    readonly rolloutKeyVerifier?: string;
    /** Path of the keys file (output of renderKeysFile) included at http level; it defines $ingress_key_name. @default "/etc/nginx/keys/keys.conf" */
    readonly keysFile?: string;
    /** Also allow POST /v1/completions (legacy text completions). @default false */
    readonly allowCompletions?: boolean;
    /** Serve GET /health without a key (proxied to vLLM /health) for load-balancer probes. @default false */
    readonly healthUnauthenticated?: boolean;
    /** Largest accepted request body in nginx size syntax ("512k", "4m"); larger bodies get 413. @default "4m" */
    readonly maxBodySize?: string;
    /** Per-key request rate (integer requests per second) enforced with limit_req; excess gets 429. @default 200 */
    readonly rateLimitPerSecond?: number;
    /** Requests above the rate a key may send at once before 429 (limit_req burst, nodelay). @default 1000 */
    readonly rateLimitBurst?: number;
    /** Idle keep-alive connections to vLLM cached per nginx worker (upstream keepalive). @default 256 */
    readonly upstreamKeepalive?: number;
    /** Seconds an idle upstream connection is kept; below uvicorn's 5 s timeout_keep_alive so nginx never reuses a socket vLLM is closing. @default 4 */
    readonly upstreamKeepaliveTimeoutSeconds?: number;
    /** Seconds to establish the TCP connection to vLLM. @default 5 */
    readonly connectTimeoutSeconds?: number;
    /** Seconds between two reads from vLLM; long because a generation may be silent until it finishes. @default 600 */
    readonly readTimeoutSeconds?: number;
    /** Seconds between two writes of the request body to vLLM. @default 600 */
    readonly sendTimeoutSeconds?: number;
    /** The only directory nginx writes to (pid file, client body / proxy temp dirs); an emptyDir so the root FS can be read-only. @default "/tmp/nginx" */
    readonly runtimeDir?: string;
    /** Error log target: "stderr" or a file path (the file's directory must be writable). @default "stderr" */
    readonly errorLog?: string;
    /** Access log target: "/dev/stdout", "off" or a file path; lines never contain a key, only its name. @default "/dev/stdout" */
    readonly accessLog?: string;
    /**
     * A second access log with the same JSON lines, for the log-to-metrics sidecar (mtail reads it from a
     * shared emptyDir: INGRESS_ACCESS_LOG_FILE); "off" or a file path. The stdout log stays as it is. @default "off"
     */
    readonly metricsAccessLog?: string;
    /**
     * "127.0.0.1:<port>" where nginx serves `GET /stub_status` (the connection counts nginx-prometheus-exporter
     * reads), loopback only so no policy need admit it; "off" for none. @default "off"
     */
    readonly stubStatusListen?: string;
    /** nginx worker processes; a number rather than "auto" because auto counts host CPUs, not the container's limit. @default 2 */
    readonly workerProcesses?: number;
    /** Connections per worker; each streaming request holds two (client + upstream). @default 4096 */
    readonly workerConnections?: number;
}

/** Settings with every default filled in (upstreamResolver stays optional: unset means resolve once at start). */
export type ResolvedProxySettings = Required<Omit<ProxySettings, "upstreamResolver" | "rolloutKeyVerifier">> & {
    readonly upstreamResolver: string | undefined;
    readonly rolloutKeyVerifier: string | undefined;
};

/** Seconds nginx trusts a resolved upstream address when upstreamResolver is set (Docker's DNS answers with TTL 600). */
export const UPSTREAM_RESOLVER_VALID_SECONDS = 5;

/** Defaults of every optional ProxySettings field. */
export const PROXY_DEFAULTS: Omit<ResolvedProxySettings, "upstream"> = {
    listenPort: 8080,
    listenAddress: "0.0.0.0",
    tlsEnabled: false,
    tlsCertFile: "/etc/nginx/tls/tls.crt",
    tlsKeyFile: "/etc/nginx/tls/tls.key",
    upstreamResolver: undefined,
    rolloutKeyVerifier: undefined,
    keysFile: "/etc/nginx/keys/keys.conf",
    allowCompletions: false,
    healthUnauthenticated: false,
    // The same limits as a deployed stack's defaults (one home: config/ingress-defaults.ts).
    ...INGRESS_LIMIT_DEFAULTS,
    // Idle upstream connections kept per worker: at or above the requests one worker has in
    // flight, else each burst opens new connections to vLLM (bench/results.md, 256 connections).
    upstreamKeepalive: 256,
    upstreamKeepaliveTimeoutSeconds: 4,
    connectTimeoutSeconds: 5,
    sendTimeoutSeconds: 600,
    runtimeDir: "/tmp/nginx",
    errorLog: "stderr",
    accessLog: "/dev/stdout",
    metricsAccessLog: "off",
    stubStatusListen: "off",
    workerProcesses: 2,
    workerConnections: 4096,
};

/** Fields holding file-system paths: the only ones that differ between the deployed and the local config. */
export const PROXY_PATH_FIELDS = ["keysFile", "tlsCertFile", "tlsKeyFile", "runtimeDir", "errorLog", "accessLog"] as const;
export type ProxyPathField = (typeof PROXY_PATH_FIELDS)[number];

/** Fill in defaults (`??`, so an explicit false/0 is kept and then validated). */
export function resolveProxySettings(s: ProxySettings): ResolvedProxySettings {
    const out: Record<string, unknown> = { ...PROXY_DEFAULTS, upstream: s.upstream };
    for (const [k, v] of Object.entries(s)) out[k] = v ?? (PROXY_DEFAULTS as Record<string, unknown>)[k];
    return out as unknown as ResolvedProxySettings;
}

/** The routes the proxy lets through; everything else is 404 (allow-list, deny by default). */
export interface Route {
    /** Exact path matched and the only URI ever sent upstream. */
    readonly path: string;
    /** The single accepted method; other methods get 405. */
    readonly method: "GET" | "POST";
    /** Whether a valid Bearer key is required. */
    readonly authenticated: boolean;
}

/** Allow-listed routes for the given settings, in config order. */
export function allowedRoutes(s: ProxySettings): Route[] {
    const r = resolveProxySettings(s);
    const routes: Route[] = [
        { path: "/v1/chat/completions", method: "POST", authenticated: true },
        { path: "/v1/models", method: "GET", authenticated: true },
    ];
    if (r.allowCompletions) routes.push({ path: "/v1/completions", method: "POST", authenticated: true });
    if (r.healthUnauthenticated) routes.push({ path: "/health", method: "GET", authenticated: false });
    return routes;
}

/**
 * A client's X-Request-Id that is passed through to vLLM (which takes its request id from that header,
 * vllm entrypoints/openai serving `_base_request_id`); any other value is replaced by nginx's `$request_id`.
 */
export const CLIENT_REQUEST_ID_PATTERN = "^[A-Za-z0-9._:-]{1,128}$";
/** What the access log's client_request_id shows when the client sent an X-Request-Id that was not passed through. */
export const INVALID_CLIENT_REQUEST_ID = "(invalid)";

const SIZE_RE = /^[1-9][0-9]*[kKmM]?$/;
const IPV4_RE = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const HOST_RE = /^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/;
// A resolver address: IPv4 or host name, optional port; nothing nginx would read as another parameter.
const RESOLVER_RE = /^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(:[0-9]{1,5})?$/;
// Paths land unquoted in directives: forbid whitespace, quotes, ';', braces, '$', '#', '\\'.
const PATH_RE = /^\/[A-Za-z0-9._/+@=-]*$/;

function isInt(n: unknown, min: number, max: number): boolean {
    return typeof n === "number" && Number.isInteger(n) && n >= min && n <= max;
}

/** Check settings; returns every problem (empty array = valid), each naming the field and the fix. */
export function validateProxySettings(s: ProxySettings): string[] {
    const r = resolveProxySettings(s);
    const errs: string[] = [];
    if (!isInt(r.listenPort, 1, 65535)) errs.push(`listenPort: ${String(r.listenPort)} must be an integer 1..65535 (use >1024 to run without root)`);
    if (typeof r.listenAddress !== "string" || !IPV4_RE.test(r.listenAddress))
        errs.push(`listenAddress: "${String(r.listenAddress)}" must be an IPv4 address such as "0.0.0.0" or "127.0.0.1"`);
    if (typeof r.upstream !== "string") {
        errs.push('upstream: required, as "host:port" (e.g. "vllm.rl.svc.cluster.local:8000")');
    } else {
        const m = /^(.+):(\d+)$/.exec(r.upstream);
        if (!m || !HOST_RE.test(m[1]!) || !isInt(Number(m[2]), 1, 65535)) {
            errs.push(`upstream: "${r.upstream}" must be "host:port" without scheme or path (e.g. "vllm.rl.svc.cluster.local:8000")`);
        }
    }
    for (const f of PROXY_PATH_FIELDS) {
        const v = r[f];
        if (f === "errorLog" && v === "stderr") continue;
        if (f === "accessLog" && v === "off") continue;
        if (typeof v !== "string" || !PATH_RE.test(v) || v.split("/").includes("..")) {
            errs.push(
                `${f}: "${String(v)}" must be an absolute path of [A-Za-z0-9._/+@=-] without ".."${f === "errorLog" ? ' (or "stderr")' : f === "accessLog" ? ' (or "off")' : ""}`,
            );
        }
    }
    if (
        r.metricsAccessLog !== "off" &&
        (typeof r.metricsAccessLog !== "string" || !PATH_RE.test(r.metricsAccessLog) || r.metricsAccessLog.split("/").includes(".."))
    )
        errs.push(`metricsAccessLog: "${String(r.metricsAccessLog)}" must be an absolute path of [A-Za-z0-9._/+@=-] without ".." (or "off")`);
    if (r.stubStatusListen !== "off") {
        const m = typeof r.stubStatusListen === "string" ? /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3}):(\d{1,5})$/.exec(r.stubStatusListen) : null;
        if (!m || [m[1], m[2], m[3]].some((o) => Number(o) > 255) || !isInt(Number(m[4]), 1, 65535) || Number(m[4]) === r.listenPort)
            errs.push(
                `stubStatusListen: "${String(r.stubStatusListen)}" must be a loopback "127.x.y.z:port" other than the listen port (e.g. "127.0.0.1:9114"), or "off": stub_status is read by the exporter beside nginx, never by a client`,
            );
    }
    if (r.rolloutKeyVerifier !== undefined) {
        const m = typeof r.rolloutKeyVerifier === "string" ? /^(.+):(\d+)$/.exec(r.rolloutKeyVerifier) : null;
        if (!m || !HOST_RE.test(m[1]!) || !isInt(Number(m[2]), 1, 65535))
            errs.push(
                `rolloutKeyVerifier: "${String(r.rolloutKeyVerifier)}" must be "host:port" of the rollout key verifier (e.g. "trainer.rl.svc.cluster.local:7200"), or unset for operators' keys only`,
            );
    }
    if (r.upstreamResolver !== undefined) {
        const servers = typeof r.upstreamResolver === "string" ? r.upstreamResolver.trim().split(/\s+/) : [];
        if (servers.length === 0 || servers.some((a) => !RESOLVER_RE.test(a))) {
            errs.push(
                `upstreamResolver: "${String(r.upstreamResolver)}" must be space-separated DNS server addresses, each "ipv4[:port]" or "host[:port]" (e.g. Docker's "127.0.0.11"), or unset to resolve the upstream once at start`,
            );
        }
    }
    if (typeof r.runtimeDir === "string" && r.runtimeDir.length > 1 && r.runtimeDir.endsWith("/"))
        errs.push(`runtimeDir: "${r.runtimeDir}" must not end with "/"`);
    if (typeof r.tlsEnabled !== "boolean") errs.push("tlsEnabled: must be true or false");
    if (typeof r.allowCompletions !== "boolean") errs.push("allowCompletions: must be true or false");
    if (typeof r.healthUnauthenticated !== "boolean") errs.push("healthUnauthenticated: must be true or false");
    if (typeof r.maxBodySize !== "string" || !SIZE_RE.test(r.maxBodySize))
        errs.push(`maxBodySize: "${String(r.maxBodySize)}" must be a positive nginx size like "512k" or "4m" (digits with optional k/m suffix)`);
    if (!isInt(r.rateLimitPerSecond, 1, 1_000_000))
        errs.push(`rateLimitPerSecond: ${String(r.rateLimitPerSecond)} must be an integer > 0 (requests per second per key)`);
    if (!isInt(r.rateLimitBurst, 0, 1_000_000)) errs.push(`rateLimitBurst: ${String(r.rateLimitBurst)} must be an integer >= 0`);
    if (!isInt(r.upstreamKeepalive, 1, 100_000))
        errs.push(`upstreamKeepalive: ${String(r.upstreamKeepalive)} must be an integer > 0 (idle upstream connections per worker)`);
    if (!isInt(r.upstreamKeepaliveTimeoutSeconds, 1, 3600))
        errs.push(
            `upstreamKeepaliveTimeoutSeconds: ${String(r.upstreamKeepaliveTimeoutSeconds)} must be an integer 1..3600, below vLLM's keep-alive timeout (uvicorn default 5)`,
        );
    if (!isInt(r.connectTimeoutSeconds, 1, 3600)) errs.push(`connectTimeoutSeconds: ${String(r.connectTimeoutSeconds)} must be an integer 1..3600`);
    if (!isInt(r.readTimeoutSeconds, 1, 86400))
        errs.push(`readTimeoutSeconds: ${String(r.readTimeoutSeconds)} must be an integer 1..86400 (long generations need minutes)`);
    if (!isInt(r.sendTimeoutSeconds, 1, 86400)) errs.push(`sendTimeoutSeconds: ${String(r.sendTimeoutSeconds)} must be an integer 1..86400`);
    if (!isInt(r.workerProcesses, 1, 256)) errs.push(`workerProcesses: ${String(r.workerProcesses)} must be an integer 1..256 (match the container CPU limit)`);
    if (!isInt(r.workerConnections, 64, 1_000_000)) errs.push(`workerConnections: ${String(r.workerConnections)} must be an integer >= 64`);
    return errs;
}

/** Regex-escape a validated key: only '.' and '+' of the allowed alphabet are PCRE metacharacters. */
function keyRegex(key: string): string {
    return key.replace(/[.+]/g, (c) => `[${c}]`);
}

/**
 * Render the keys file: a `map` from the Authorization header to the key name ("" = unauthenticated).
 * Regex entries ("~" = case-sensitive) because plain map strings are matched case-insensitively by nginx's hash.
 * Several entries may be valid at once (rotation: add the new key, roll clients, remove the old one, reload).
 */
export function renderKeysFile(keys: ReadonlyArray<IngressKey>): string {
    const errs = validateKeys(keys);
    if (errs.length > 0) throw new Error(`invalid ingress keys:\n  - ${errs.join("\n  - ")}`);
    const lines = [
        "# Generated by agent-rl-infra VllmIngress (renderKeysFile). Contains secrets: mount from a Secret, mode 0400/0600.",
        "map $http_authorization $ingress_key_name {",
        '    default "";',
        ...keys.map((k) => `    "~^Bearer ${keyRegex(k.key)}$" "${k.name}";`),
        "}",
        "",
    ];
    return lines.join("\n");
}

/** Body of a JSON error in the OpenAI error shape, safe inside a single-quoted nginx string. */
function jsonError(code: number, type: string, message: string): string {
    const body = JSON.stringify({ error: { message, type, code } });
    if (/['$\\]/.test(body)) throw new Error(`internal: error body for ${code} contains a character nginx would interpret`);
    return `'${body}\\n'`; // nginx unescapes \n in quoted strings: one trailing newline
}

const E = {
    400: jsonError(400, "invalid_request_error", "bad request"),
    401: jsonError(401, "authentication_error", "missing or invalid API key: send Authorization: Bearer <key>"),
    403: jsonError(403, "permission_error", "this key may not call this route"),
    404: jsonError(404, "not_found_error", "not found: only the allow-listed OpenAI routes are served"),
    405: jsonError(405, "invalid_request_error", "method not allowed on this route"),
    413: jsonError(413, "invalid_request_error", "request body too large"),
    429: jsonError(429, "rate_limit_error", "rate limit exceeded for this key; retry later"),
    497: jsonError(400, "invalid_request_error", "plain HTTP request sent to the HTTPS port"),
    500: jsonError(500, "server_error", "internal proxy error"),
    502: jsonError(502, "server_error", "upstream model server unavailable"),
    503: jsonError(503, "server_error", "service unavailable"),
    504: jsonError(504, "server_error", "upstream model server timed out"),
} as const;

function routeLocation(route: Route, upstreamHost: string, rolloutKeys: boolean): string[] {
    const isLong = route.path !== "/health" && route.path !== "/v1/models";
    const lines = [
        `        location = ${route.path} {`,
        `            if ($request_method != ${route.method}) {`,
        `                add_header Allow ${route.method} always;`,
        `                return 405 ${E[405]};`,
        "            }",
    ];
    if (route.authenticated) {
        lines.push(
            // With rollout keys, a header of the rollout-key shape passes here and is checked by the verifier below.
            `            if (${rolloutKeys ? "$ingress_limit_key" : "$ingress_key_name"} = "") {`,
            "                add_header WWW-Authenticate 'Bearer realm=\"vllm-ingress\"' always;",
            `                return 401 ${E[401]};`,
            "            }",
        );
    }
    lines.push(
        "            # Raw request target must be the canonical path itself: no query string, %-encoding, '//' or dot segments.",
        `            if ($request_uri != "${route.path}") {`,
        `                return 404 ${E[404]};`,
        "            }",
    );
    if (route.authenticated) lines.push("            limit_req zone=ingress_per_key burst=$BURST nodelay;");
    if (route.authenticated && rolloutKeys) lines.push(...rolloutRouteLines(" burst=$BURST"));
    lines.push(
        "            # proxy_pass with a variable sends exactly this URI and never appends the client's query string (nginx proxy_pass docs).",
        `            set $ingress_upstream_uri ${route.path};`,
        `            proxy_pass http://${upstreamHost}$ingress_upstream_uri;`,
    );
    if (!isLong) lines.push("            proxy_read_timeout 30s;");
    lines.push("        }");
    return lines;
}

/** The loopback-only server answering GET /stub_status for nginx-prometheus-exporter (none when stubStatusListen is "off"). */
function stubStatusServer(r: ResolvedProxySettings): string[] {
    if (r.stubStatusListen === "off") return [];
    return [
        "    # Connection counts for nginx-prometheus-exporter beside nginx; loopback only, never a client's route.",
        "    server {",
        `        listen ${r.stubStatusListen};`,
        "        access_log off;",
        "        location = /stub_status {",
        "            if ($request_method != GET) {",
        `                return 405 ${E[405]};`,
        "            }",
        "            stub_status;",
        "        }",
        "        location / {",
        `            return 404 ${E[404]};`,
        "        }",
        "    }",
        "",
    ];
}

/** The main context: workers, the pid file under runtimeDir, the error log and the events block. */
function mainContext(r: ResolvedProxySettings, dir: string): string[] {
    return [
        "# Generated by agent-rl-infra VllmIngress (renderNginxConfig). Keys live only in the included keys file.",
        "# vLLM's --api-key guards only /v1/* (vllm docs/usage/security.md): this proxy allow-lists routes and authenticates them.",
        `worker_processes ${r.workerProcesses};`,
        "# All writable paths sit under runtimeDir so nginx runs as non-root on a read-only root filesystem.",
        `pid ${dir}/nginx.pid;`,
        `error_log ${r.errorLog} warn;`,
        "",
        "events {",
        `    worker_connections ${r.workerConnections};`,
        "}",
        "",
    ];
}

/** The http block's opening: temp paths under runtimeDir, body limits, and the included keys file. */
function httpSettings(r: ResolvedProxySettings, dir: string): string[] {
    return [
        "http {",
        `    client_body_temp_path ${dir}/client_body;`,
        `    proxy_temp_path ${dir}/proxy;`,
        "    # Unused modules still create their temp dirs at startup (defaults under /var/lib/nginx): point them at runtimeDir too.",
        `    fastcgi_temp_path ${dir}/fastcgi;`,
        `    uwsgi_temp_path ${dir}/uwsgi;`,
        `    scgi_temp_path ${dir}/scgi;`,
        "",
        "    server_tokens off;",
        "    default_type application/json;",
        "    keepalive_timeout 75s;",
        "    keepalive_requests 10000;",
        "    # Bodies up to the limit stay in memory: no temp-file I/O for normal prompts.",
        `    client_max_body_size ${r.maxBodySize};`,
        `    client_body_buffer_size ${r.maxBodySize};`,
        "",
        '    # Keys file: `map $http_authorization $ingress_key_name { ... }` (renderKeysFile); "" means not authenticated.',
        `    include ${r.keysFile};`,
        "",
    ];
}

/** The request id sent to vLLM and the client's id for the log. */
function requestIdMaps(): string[] {
    return [
        "    # Request id sent to vLLM: the client's X-Request-Id when well-formed (harness rollout ids survive), else nginx's own.",
        '    # Several X-Request-Id headers arrive joined by ", " (nginx >= 1.23; 1.22 reads the first) and so fail the pattern.',
        "    map $http_x_request_id $ingress_request_id {",
        "        default $request_id;",
        `        "~${CLIENT_REQUEST_ID_PATTERN}" $http_x_request_id;`,
        "    }",
        '    # The client\'s id for the log: "" when absent, a fixed marker when malformed (never the raw, unbounded value).',
        "    map $http_x_request_id $ingress_client_request_id {",
        `        default "${INVALID_CLIENT_REQUEST_ID}";`,
        '        "" "";',
        `        "~${CLIENT_REQUEST_ID_PATTERN}" $http_x_request_id;`,
        "    }",
        "",
    ];
}

/** The log-safe path map, the JSON log format and the access logs. */
function accessLogs(r: ResolvedProxySettings, routes: readonly Route[]): string[] {
    const accessLog = r.accessLog === "off" ? "off" : `${r.accessLog} ingress`;
    const rolloutKeys = r.rolloutKeyVerifier !== undefined;
    const keyField = rolloutKeys ? "$ingress_client_name" : "$ingress_key_name";
    // With rollout keys, which rollout a request came from (never its key).
    const rolloutField = rolloutKeys ? ',"rollout":"$ingress_rollout_id"' : "";
    return [
        '    # Log-safe path: only allow-listed paths are logged verbatim, anything else as "other" (a key pasted into a URL never reaches the log).',
        "    map $uri $ingress_log_path {",
        '        default "other";',
        ...routes.map((rt) => `        ${rt.path} ${rt.path};`),
        "    }",
        "    # Never log $request, $request_uri, $args or $http_authorization: they may carry the key.",
        `    log_format ingress escape=json '{"time":"$time_iso8601","remote":"$remote_addr","key":"${keyField}",'`,
        '        \'"method":"$request_method","path":"$ingress_log_path","status":$status,"bytes_in":$request_length,\'',
        '        \'"bytes_out":$bytes_sent,"request_time":$request_time,"upstream_connect_time":"$upstream_connect_time",\'',
        '        \'"upstream_time":"$upstream_response_time","request_id":"$ingress_request_id",\'',
        `        '"client_request_id":"$ingress_client_request_id","ingress_request_id":"$request_id"${rolloutField}}';`,
        // "access_log off" cancels every access_log of its level (nginx ngx_http_log_module docs): then the metrics one alone.
        ...(r.accessLog === "off" && r.metricsAccessLog !== "off" ? [] : [`    access_log ${accessLog};`]),
        ...(r.metricsAccessLog === "off" ? [] : [`    access_log ${r.metricsAccessLog} ingress;`]),
        "",
    ];
}

/** The per-key rate limit zone. */
function rateLimitZone(r: ResolvedProxySettings): string[] {
    const key = r.rolloutKeyVerifier !== undefined ? "$ingress_limit_key" : "$ingress_key_name";
    return [
        "    # Per-key rate limit; the empty key (unauthenticated) is never counted (nginx limit_req docs), those requests get 401 first.",
        `    limit_req_zone ${key} zone=ingress_per_key:10m rate=${r.rateLimitPerSecond}r/s;`,
        ...(r.rolloutKeyVerifier !== undefined ? rolloutSourceZone(r.rateLimitPerSecond) : []),
        "    limit_req_status 429;",
        "    limit_req_log_level warn;",
        "",
    ];
}

/** How nginx reaches vLLM: a resolver looked up per request, or an upstream group with keep-alive. */
function upstreamBlock(r: ResolvedProxySettings): string[] {
    return r.upstreamResolver !== undefined
        ? [
              "    # vLLM's address is looked up while nginx runs (upstreamResolver), not once at start: a vLLM container",
              "    # recreated under the same name with a new address is found again. No upstream group, so no keep-alive.",
              `    resolver ${r.upstreamResolver.trim()} valid=${UPSTREAM_RESOLVER_VALID_SECONDS}s ipv6=off;`,
              "    resolver_timeout 5s;",
          ]
        : [
              "    upstream vllm_upstream {",
              `        server ${r.upstream} max_fails=0;`,
              "        # Reuse TCP connections to vLLM instead of one connect per request.",
              `        keepalive ${r.upstreamKeepalive};`,
              `        keepalive_timeout ${r.upstreamKeepaliveTimeoutSeconds}s;`,
              "        keepalive_requests 10000;",
              "    }",
          ];
}

/** The proxy server's opening: its listen port, the upstream host variable, and TLS when it terminates it. */
function serverHead(r: ResolvedProxySettings): string[] {
    const listen = `${r.listenAddress}:${r.listenPort}${r.tlsEnabled ? " ssl" : ""}`;
    return [
        "    server {",
        `        listen ${listen};`,
        "        server_name _;",
        ...(r.upstreamResolver !== undefined ? [`        set $ingress_upstream_host ${r.upstream};`] : []),
        ...(r.tlsEnabled
            ? [
                  `        ssl_certificate ${r.tlsCertFile};`,
                  `        ssl_certificate_key ${r.tlsKeyFile};`,
                  "        ssl_protocols TLSv1.2 TLSv1.3;",
                  "        ssl_prefer_server_ciphers off;",
                  "        ssl_session_cache shared:ingress_tls:10m;",
                  "        ssl_session_timeout 1h;",
              ]
            : []),
    ];
}

/** The proxy defaults every route shares: keep-alive, headers, streaming, timeouts. */
function proxyDefaults(r: ResolvedProxySettings): string[] {
    return [
        "",
        "        # Upstream keep-alive needs HTTP/1.1 and an empty Connection header (nginx upstream keepalive docs).",
        "        proxy_http_version 1.1;",
        '        proxy_set_header Connection "";',
        `        proxy_set_header Host ${r.upstream};`,
        "        # The client's key must never reach vLLM (it would also satisfy vLLM's own --api-key).",
        '        proxy_set_header Authorization "";',
        "        # Replaces every X-Request-Id the client sent (proxy_set_header drops the client's headers of that name).",
        "        proxy_set_header X-Request-Id $ingress_request_id;",
        "        # Server-sent events: pass every chunk as soon as vLLM writes it.",
        "        proxy_buffering off;",
        "        proxy_cache off;",
        "        proxy_request_buffering on;",
        "        proxy_intercept_errors off;",
        "        proxy_redirect off;",
        '        add_header X-Accel-Buffering "no" always;',
        `        proxy_connect_timeout ${r.connectTimeoutSeconds}s;`,
        `        proxy_read_timeout ${r.readTimeoutSeconds}s;`,
        `        proxy_send_timeout ${r.sendTimeoutSeconds}s;`,
        "",
    ];
}

/** JSON bodies for the errors nginx itself produces, and the deny-by-default location. */
function errorPages(rolloutKeys: boolean): string[] {
    // A refused rollout key: the verifier's 401/403 come back through auth_request as error pages.
    const rolloutPages = rolloutKeys
        ? [
              "        error_page 401 @ingress_401;",
              "        error_page 403 @ingress_403;",
              `        location @ingress_401 { add_header WWW-Authenticate 'Bearer realm="vllm-ingress"' always; return 401 ${E[401]}; }`,
              `        location @ingress_403 { return 403 ${E[403]}; }`,
          ]
        : [];
    return [
        ...rolloutPages,
        "        # JSON bodies for errors nginx itself produces (body too large, rate limit, upstream down, bad request).",
        "        # 400 goes to a URI, not a named location: a request line nginx cannot parse has no URI to keep, and a named",
        '        # location would then fail with 500 ("empty URI in redirect to named location").',
        "        error_page 400 494 /_ingress/bad-request;",
        "        error_page 497 @ingress_497;",
        "        error_page 413 @ingress_413;",
        "        error_page 429 @ingress_429;",
        "        error_page 500 @ingress_500;",
        "        error_page 502 @ingress_502;",
        "        error_page 503 @ingress_503;",
        "        error_page 504 @ingress_504;",
        `        location = /_ingress/bad-request { return 400 ${E[400]}; }`,
        `        location @ingress_497 { return 400 ${E[497]}; }`,
        `        location @ingress_413 { return 413 ${E[413]}; }`,
        `        location @ingress_429 { add_header Retry-After 1 always; return 429 ${E[429]}; }`,
        `        location @ingress_500 { return 500 ${E[500]}; }`,
        `        location @ingress_502 { return 502 ${E[502]}; }`,
        `        location @ingress_503 { return 503 ${E[503]}; }`,
        `        location @ingress_504 { return 504 ${E[504]}; }`,
        "",
        "        # Deny by default: every path that is not an exact allow-listed location (after nginx normalisation) is 404, whatever the key.",
        "        location / {",
        `            return 404 ${E[404]};`,
        "        }",
        "",
    ];
}

/** One exact location per allow-listed route. */
function routeLocations(r: ResolvedProxySettings, routes: readonly Route[]): string[] {
    // With a resolver the host is a variable, which nginx resolves per request (nginx proxy_pass docs); else the upstream group.
    const upstreamHost = r.upstreamResolver !== undefined ? "$ingress_upstream_host" : "vllm_upstream";
    // nginx refuses "burst=0" ([emerg] invalid burst value): no burst parameter is nginx's burst of 0.
    const burst = r.rateLimitBurst === 0 ? "" : ` burst=${r.rateLimitBurst}`;
    const rolloutKeys = r.rolloutKeyVerifier !== undefined;
    return routes.flatMap((rt) => [...routeLocation(rt, upstreamHost, rolloutKeys).map((l) => l.replace(" burst=$BURST", burst)), ""]);
}

/** Render a complete nginx.conf (events + http). It includes `keysFile` and never contains a key itself. */
export function renderNginxConfig(s: ProxySettings): string {
    const errs = validateProxySettings(s);
    if (errs.length > 0) throw new Error(`invalid ingress proxy settings:\n  - ${errs.join("\n  - ")}`);
    const r = resolveProxySettings(s);
    const dir = r.runtimeDir === "/" ? "" : r.runtimeDir;
    const routes = allowedRoutes(r);
    return [
        ...mainContext(r, dir),
        ...httpSettings(r, dir),
        ...requestIdMaps(),
        ...(r.rolloutKeyVerifier !== undefined ? rolloutKeyMaps() : []),
        ...accessLogs(r, routes),
        ...rateLimitZone(r),
        ...upstreamBlock(r),
        ...(r.rolloutKeyVerifier !== undefined ? rolloutVerifierUpstream(r.rolloutKeyVerifier, r.upstreamResolver !== undefined) : []),
        "",
        ...stubStatusServer(r),
        ...serverHead(r),
        ...proxyDefaults(r),
        ...errorPages(r.rolloutKeyVerifier !== undefined),
        ...(r.rolloutKeyVerifier !== undefined ? [...rolloutVerifyLocation(r.rolloutKeyVerifier, r.upstreamResolver !== undefined), ""] : []),
        ...routeLocations(r, routes),
        "    }",
        "}",
        "",
    ].join("\n");
}
