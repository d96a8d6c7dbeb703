/**
 * Session-aware router for OpenEnv environment replicas: renders a complete nginx.conf.
 *
 * An OpenEnv server holds at most k websocket sessions (MAX_CONCURRENT_ENVS) and answers
 * session k+1 with a CAPACITY_REACHED error. A Kubernetes Service spreads connections blindly,
 * so replicas×k == demand still overfills some replicas. This router sends each `WS /ws` to the
 * replica with the fewest open sessions (`least_conn`), never more than k per replica
 * (`max_conns=k`, counted in a shared-memory `zone` so the cap holds across nginx workers),
 * and when every replica is full hands the session to the capacity responder
 * (capacity_responder.py: OpenEnv's CAPACITY_REACHED frame naming env, capacity and fix), or
 * without one answers HTTP 503 itself with ROUTER_CAPACITY_REACHED.
 * See ROUTER.md for the capacity math, the multi-router analysis and the DNS decision.
 *
 * Pure functions only: no Pulumi, no I/O.
 */

import type { RouterSettings } from "./model";

/** RouterSettings with every default filled in. */
export type ResolvedRouterSettings = Required<Omit<RouterSettings, "resolver" | "capacityResponder" | "demand">> & {
    readonly resolver: string | undefined;
    readonly capacityResponder: string | undefined;
    readonly demand: number | undefined;
};

/** Port OpenEnv servers listen on; the router takes the same one. */
export const ROUTER_DEFAULT_PORT = 8000;
/** First open-source nginx with `server … resolve` in an upstream (with a zone). */
export const NGINX_MIN_VERSION_FOR_RESOLVE = "1.27.3";
/** Router-local liveness route; `/health` itself is proxied to a replica. */
export const ROUTER_HEALTH_PATH = "/router/health";
/** Error code in the router's 503 body when every replica holds k sessions. */
export const ROUTER_CAPACITY_CODE = "ROUTER_CAPACITY_REACHED";
/** Error code in the router's 503 body when no replica accepts a connection at all. */
export const ROUTER_NO_REPLICA_CODE = "ROUTER_NO_REPLICA_AVAILABLE";
/**
 * Error code in the router's 400 body for a websocket upgrade outside the exact session route:
 * only `= /ws` counts sessions (max_conns), so no other path may upgrade (ROUTER.md, "Upgrades").
 */
export const ROUTER_UPGRADE_REFUSED_CODE = "ROUTER_UPGRADE_REFUSED";
/** The one path a websocket session may open on (OpenEnv's `/ws`); the session cap is applied there. */
export const ROUTER_SESSION_PATH = "/ws";
/** Response header naming the replica (`host:port`) a request or session was sent to. */
export const ROUTER_REPLICA_HEADER = "X-Env-Replica";

/** The code OpenEnv's own servers send at capacity; the responder's frame carries it so clients matching on it still do. */
export const OPENENV_CAPACITY_CODE = "CAPACITY_REACHED";
/** Where the capacity responder listens beside nginx (loopback of the router pod / container). */
export const CAPACITY_RESPONDER_ADDRESS = "127.0.0.1:8081";

/** Upstream names; one env per nginx.conf, so fixed names are unique. */
const SESSIONS_UPSTREAM = "env_sessions";
const HTTP_UPSTREAM = "env_http";

/** Fills in defaults; does not validate (call validateRouterSettings first). */
export function resolveRouterSettings(s: RouterSettings): ResolvedRouterSettings {
    return {
        envName: s.envName,
        replicas: s.replicas,
        sessionsPerReplica: s.sessionsPerReplica,
        listenPort: s.listenPort ?? ROUTER_DEFAULT_PORT,
        listenAddress: s.listenAddress ?? "0.0.0.0",
        readTimeoutSeconds: s.readTimeoutSeconds ?? 3600,
        sendTimeoutSeconds: s.sendTimeoutSeconds ?? 3600,
        connectTimeoutSeconds: s.connectTimeoutSeconds ?? 5,
        failTimeoutSeconds: s.failTimeoutSeconds ?? 10,
        runDir: s.runDir ?? "/tmp/env-router",
        logToFiles: s.logToFiles ?? false,
        workerProcesses: s.workerProcesses ?? 2,
        resolver: s.resolver,
        resolverValidSeconds: s.resolverValidSeconds ?? 10,
        capacityResponder: s.capacityResponder,
        demand: s.demand,
    };
}

const ENV_NAME = /^[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?$/;
const HOSTNAME = /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;
const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const IPV6_BRACKETED = /^\[[0-9A-Fa-f:.]+\]$/;
// Characters that would end or escape an nginx directive argument.
const NGINX_UNSAFE = /[\s;{}"'\\$#]/;

function isPort(n: unknown): boolean {
    return typeof n === "number" && Number.isInteger(n) && n >= 1 && n <= 65535;
}

function isPositiveInt(n: unknown): boolean {
    return typeof n === "number" && Number.isInteger(n) && n >= 1;
}

/** Splits `host:port` (IPv6 as `[addr]:port`); undefined when it has no port. */
export function splitHostPort(address: string): { host: string; port: number } | undefined {
    const m = /^(\[[^\]]*\]|[^:]+):(\d+)$/.exec(address);
    if (m === null) return undefined;
    return { host: m[1] ?? "", port: Number(m[2]) };
}

/** The replicas' problems: none listed, listed twice, a URL, no port, a bad host or port, or "localhost". */
function replicaAddressProblems(list: RouterSettings["replicas"]): string[] {
    const problems: string[] = [];
    const replicas: readonly unknown[] = Array.isArray(list) ? list : [];
    if (replicas.length === 0) {
        problems.push('replicas is empty: list every replica as host:port (e.g. "echo-0.echo-headless.envs.svc.cluster.local:8000")');
    }
    const seen = new Set<string>();
    replicas.forEach((r, i) => {
        if (typeof r !== "string") {
            problems.push(`replicas[${i}] is not a string: give host:port`);
            return;
        }
        if (seen.has(r)) problems.push(`replicas[${i}] "${r}" is listed twice: each replica once, or it would get 2k sessions`);
        seen.add(r);
        if (/^[a-z]+:\/\//i.test(r)) {
            problems.push(`replicas[${i}] "${r}" has a URL scheme: give plain host:port (e.g. "${r.replace(/^[a-z]+:\/\//i, "").replace(/\/.*$/, "")}")`);
            return;
        }
        const hp = splitHostPort(r);
        if (hp === undefined) {
            problems.push(`replicas[${i}] "${r}" has no port: give host:port (OpenEnv listens on 8000, e.g. "${r}:8000")`);
            return;
        }
        if (!HOSTNAME.test(hp.host) && !IPV4.test(hp.host) && !IPV6_BRACKETED.test(hp.host)) {
            problems.push(`replicas[${i}] "${r}": host "${hp.host}" is not a DNS name, IPv4 address or [IPv6] address`);
        }
        if (!isPort(hp.port)) problems.push(`replicas[${i}] "${r}": port ${hp.port} is outside 1-65535`);
        // nginx makes one peer per resolved address, each with its own max_conns: "localhost" (127.0.0.1 and ::1) would allow 2k.
        if (hp.host.toLowerCase() === "localhost") {
            problems.push(
                `replicas[${i}] "${r}": "localhost" resolves to two addresses (127.0.0.1 and ::1), each capped separately; use "127.0.0.1:${hp.port}"`,
            );
        }
    });
    return problems;
}

/** The timeouts' problems: whole seconds, a read timeout long enough for an idle session, a connect timeout shorter than it. */
function timeoutProblems(s: RouterSettings): string[] {
    const problems: string[] = [];
    const timeouts = [
        ["readTimeoutSeconds", s.readTimeoutSeconds],
        ["sendTimeoutSeconds", s.sendTimeoutSeconds],
        ["connectTimeoutSeconds", s.connectTimeoutSeconds],
        ["failTimeoutSeconds", s.failTimeoutSeconds],
        ["resolverValidSeconds", s.resolverValidSeconds],
    ] as const;
    for (const [field, value] of timeouts) {
        if (value !== undefined && !isPositiveInt(value)) problems.push(`${field} ${String(value)} must be a whole number of seconds >= 1`);
    }
    if (isPositiveInt(s.readTimeoutSeconds) && (s.readTimeoutSeconds ?? 0) < 60) {
        problems.push(
            `readTimeoutSeconds ${s.readTimeoutSeconds} would cut any env session idle that long (e.g. while the policy generates): use >= 60, default 3600`,
        );
    }
    if (isPositiveInt(s.connectTimeoutSeconds) && isPositiveInt(s.readTimeoutSeconds) && (s.connectTimeoutSeconds ?? 0) > (s.readTimeoutSeconds ?? 0)) {
        problems.push(
            `connectTimeoutSeconds ${s.connectTimeoutSeconds} is longer than readTimeoutSeconds ${s.readTimeoutSeconds}: a connect should fail fast (default 5) so a dead replica is skipped`,
        );
    }
    return problems;
}

/** Every problem with the settings, each naming the field and the fix; empty when usable. */
export function validateRouterSettings(s: RouterSettings): string[] {
    const problems: string[] = [];
    if (typeof s.envName !== "string" || !ENV_NAME.test(s.envName)) {
        problems.push(
            `envName ${JSON.stringify(s.envName)} is not a usable name: use 1-63 letters, digits, '_' or '-', starting and ending with a letter or digit (e.g. "my_env")`,
        );
    }
    problems.push(...replicaAddressProblems(s.replicas));
    if (!isPositiveInt(s.sessionsPerReplica)) {
        problems.push(`sessionsPerReplica ${String(s.sessionsPerReplica)} must be a whole number >= 1: set it to the replica's MAX_CONCURRENT_ENVS`);
    }
    if (s.listenPort !== undefined && !isPort(s.listenPort)) {
        problems.push(`listenPort ${String(s.listenPort)} must be a whole number in 1-65535 (default ${ROUTER_DEFAULT_PORT}, the env's own port)`);
    }
    if (s.listenAddress !== undefined && !IPV4.test(s.listenAddress) && !IPV6_BRACKETED.test(s.listenAddress) && s.listenAddress !== "*") {
        problems.push(`listenAddress "${s.listenAddress}" must be an IPv4 address, a bracketed IPv6 address ("[::]") or "*" (default "0.0.0.0")`);
    }
    problems.push(...timeoutProblems(s));
    if (s.runDir !== undefined && (!s.runDir.startsWith("/") || NGINX_UNSAFE.test(s.runDir))) {
        problems.push(
            `runDir "${s.runDir}" must be an absolute path without spaces, quotes, ';', '$' or braces (default "/tmp/env-router", mount an emptyDir there)`,
        );
    }
    if (s.workerProcesses !== undefined && s.workerProcesses !== "auto" && !(isPositiveInt(s.workerProcesses) && s.workerProcesses <= 64)) {
        problems.push(`workerProcesses ${String(s.workerProcesses)} must be "auto" or a whole number in 1-64 (default 2)`);
    }
    if (s.capacityResponder !== undefined) {
        const hp = splitHostPort(s.capacityResponder);
        if (hp === undefined || !IPV4.test(hp.host) || !isPort(hp.port) || hp.port === (s.listenPort ?? ROUTER_DEFAULT_PORT)) {
            problems.push(
                `capacityResponder "${s.capacityResponder}" must be an IPv4 host:port other than the router's own port (default ${CAPACITY_RESPONDER_ADDRESS}, loopback beside nginx)`,
            );
        }
    }
    if (s.demand !== undefined && !(Number.isInteger(s.demand) && s.demand >= 0)) {
        problems.push(`demand ${String(s.demand)} must be a whole number of sessions >= 0 (the sessions training holds at once)`);
    }
    if (s.resolver !== undefined) {
        const parts = s.resolver.trim().split(/\s+/);
        if (s.resolver.trim() === "" || parts.some((p) => NGINX_UNSAFE.test(p))) {
            problems.push(
                `resolver "${s.resolver}" must be space-separated DNS server addresses (e.g. "kube-dns.kube-system.svc.cluster.local" or "10.96.0.10"), or unset to resolve replica names once at start`,
            );
        }
    }
    return problems;
}

/** Quotes a string as an nginx double-quoted argument. */
function q(text: string): string {
    return `"${text.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}

/** The JSON bodies the router answers with itself; exported so tests and clients agree on them. */
export function routerErrorBodies(s: Pick<RouterSettings, "envName" | "replicas" | "sessionsPerReplica">): {
    capacity: string;
    noReplica: string;
    upgradeRefused: string;
} {
    const replicas = s.replicas.length;
    const sessions = replicas * s.sessionsPerReplica;
    return {
        capacity: JSON.stringify({
            error: `env '${s.envName}' is at capacity: ${sessions} sessions across ${replicas} replicas`,
            code: ROUTER_CAPACITY_CODE,
            env: s.envName,
            sessions,
            replicas,
            detail: "every replica holds its maximum of sessions; replicas that failed a connection moments ago are skipped too; retry after a session closes",
        }),
        noReplica: JSON.stringify({
            error: `env '${s.envName}': no replica accepted a connection (${replicas} configured); they are down or not ready`,
            code: ROUTER_NO_REPLICA_CODE,
            env: s.envName,
            replicas,
        }),
        upgradeRefused: JSON.stringify({
            error: `env '${s.envName}': websocket sessions open only at exactly ${ROUTER_SESSION_PATH}; an upgrade on any other path is refused (the session cap is counted there alone)`,
            code: ROUTER_UPGRADE_REFUSED_CODE,
            env: s.envName,
        }),
    };
}

/**
 * The message a trainer reads when every replica is full: the env, its capacity (replicas x
 * sessions per replica), the planned demand when known, and the fix (config field names).
 */
export function capacityMessage(s: Pick<RouterSettings, "envName" | "replicas" | "sessionsPerReplica" | "demand">): string {
    const replicas = s.replicas.length;
    const sessions = replicas * s.sessionsPerReplica;
    const planned = s.demand !== undefined ? `; the plan expects at most ${s.demand} at once` : "";
    return (
        `env '${s.envName}' is at capacity: all ${sessions} sessions are in use (${replicas} replicas x ${s.sessionsPerReplica} sessions per replica)${planned}, so this session was refused by the env router. ` +
        `Training holds more sessions at once than the env serves (a larger batch or eval batch, a second trainer, or sessions of a crashed client not yet freed by the server's ping). ` +
        `Fix: raise envs.${s.envName}.replicas or envs.${s.envName}.sessionsPerReplica so that replicas x sessionsPerReplica covers the demand plus headroom, or lower the batch.`
    );
}

/** The capacity responder's config (capacity_responder.py --config): OpenEnv's error frame and the HTTP 503 body. */
export function renderResponderConfig(s: Pick<RouterSettings, "envName" | "replicas" | "sessionsPerReplica" | "demand">): string {
    const replicas = s.replicas.length;
    const sessions = replicas * s.sessionsPerReplica;
    const data = {
        message: capacityMessage(s),
        code: OPENENV_CAPACITY_CODE,
        router_code: ROUTER_CAPACITY_CODE,
        env: s.envName,
        replicas,
        sessions_per_replica: s.sessionsPerReplica,
        // OpenEnv's own fields (SessionCapacityError), so clients reading them see the env-wide numbers.
        active_sessions: sessions,
        max_sessions: sessions,
        ...(s.demand !== undefined ? { demand: s.demand } : {}),
    };
    return `${JSON.stringify({ env: s.envName, ws_frame: { type: "error", data }, http_body: routerErrorBodies(s).capacity }, null, 2)}\n`;
}

/** The nginx lines of `@sessions_unavailable`: nginx's own 503s, or the responder at capacity. */
function sessionsUnavailable(s: ResolvedRouterSettings, bodies: { capacity: string; noReplica: string }): string {
    const headers = [
        "            add_header Retry-After 5 always;",
        `            add_header ${ROUTER_REPLICA_HEADER} $upstream_addr always;`,
        "            add_header X-Env-Router-Worker $pid always;",
    ].join("\n");
    if (s.capacityResponder === undefined) {
        return `        location @sessions_unavailable {
${headers}
            if ($env_router_at_capacity) {
                return 503 ${q(bodies.capacity)};
            }
            return 503 ${q(bodies.noReplica)};
        }`;
    }
    return `        location @sessions_unavailable {
${headers}
            if ($env_router_at_capacity = 0) {
                return 503 ${q(bodies.noReplica)};
            }
            # Every replica is full: the responder completes the upgrade and sends OpenEnv's
            # CAPACITY_REACHED frame with the env, its capacity and the fix (a refused upgrade
            # reaches OpenEnv's client as a bare "HTTP 503"). Plain HTTP gets the 503 body there.
            proxy_pass http://${s.capacityResponder};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $host;
            proxy_buffering off;
            proxy_connect_timeout 2s;
            proxy_read_timeout 15s;
            proxy_send_timeout 15s;
            # The responder down or over its bound: nginx's own 503 with the same body.
            error_page 502 504 = @sessions_full;
        }

        location @sessions_full {
${headers}
            return 503 ${q(bodies.capacity)};
        }`;
}

/** Full nginx.conf for one env's router; throws if the settings do not validate. */
export function renderRouterConfig(settings: RouterSettings): string {
    const problems = validateRouterSettings(settings);
    if (problems.length > 0) throw new Error(`invalid router settings:\n- ${problems.join("\n- ")}`);
    const s = resolveRouterSettings(settings);
    const replicaCount = s.replicas.length;
    const totalSessions = replicaCount * s.sessionsPerReplica;
    // Each session holds a client and an upstream connection; any one worker may end up with all of them.
    const workerConnections = Math.max(1024, 2 * totalSessions + 256);
    const bodies = routerErrorBodies(s);
    const dir = s.runDir.replace(/\/+$/, "");
    const resolve = s.resolver !== undefined ? " resolve" : "";
    const serverLines = (cap: boolean): string =>
        s.replicas
            .map((r) => `        server ${r}${resolve}${cap ? ` max_conns=${s.sessionsPerReplica}` : ""} max_fails=1 fail_timeout=${s.failTimeoutSeconds}s;`)
            .join("\n");
    const errorLog = s.logToFiles ? `${dir}/error.log info` : "stderr warn";
    const accessLog = s.logToFiles ? `${dir}/access.log env_router` : "/dev/stdout env_router";
    const listen = `${s.listenAddress}:${s.listenPort}`;
    const timeouts = [
        `        proxy_connect_timeout ${s.connectTimeoutSeconds}s;`,
        `        proxy_read_timeout ${s.readTimeoutSeconds}s;`,
        `        proxy_send_timeout ${s.sendTimeoutSeconds}s;`,
    ].join("\n");
    const proxyCommon = [
        "        proxy_http_version 1.1;",
        "        proxy_set_header Upgrade $http_upgrade;",
        "        proxy_set_header Connection $connection_upgrade;",
        "        proxy_set_header Host $host;",
        "        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
        "        proxy_set_header X-Forwarded-Proto $scheme;",
        "        proxy_buffering off;",
        timeouts,
        `        add_header ${ROUTER_REPLICA_HEADER} $upstream_addr always;`,
        "        add_header X-Env-Router-Worker $pid always;",
    ].join("\n");
    // Stateless HTTP: the client's Upgrade and Connection never reach a replica (no protocol switch there).
    const proxyHttp = proxyCommon
        .replace("proxy_set_header Upgrade $http_upgrade;", 'proxy_set_header Upgrade "";')
        .replace("proxy_set_header Connection $connection_upgrade;", "proxy_set_header Connection close;");
    const resolverLine =
        s.resolver !== undefined
            ? `    # Re-resolve replica names at runtime (server ... resolve, nginx >= ${NGINX_MIN_VERSION_FOR_RESOLVE}).\n    resolver ${s.resolver.trim()} valid=${s.resolverValidSeconds}s ipv6=off;\n    resolver_timeout 5s;\n`
            : `    # No resolver: replica names resolve once when nginx starts (see ROUTER.md, DNS).\n`;

    return `# Generated by components/env/router.ts; do not edit.
# Env '${s.envName}': ${replicaCount} replicas x ${s.sessionsPerReplica} sessions = ${totalSessions} sessions.
# Run: nginx -p ${dir} -c <this file> -e stderr   (daemon off is set below)
daemon off;
worker_processes ${s.workerProcesses};
worker_rlimit_nofile ${workerConnections + 256};
# Bounded so a stop never hangs on long-lived websocket sessions.
worker_shutdown_timeout 10s;
pid ${dir}/nginx.pid;
error_log ${errorLog};

events {
    worker_connections ${workerConnections};
}

http {
    # Every writable path under runDir: the image's root FS is read-only.
    client_body_temp_path ${dir}/client_body;
    proxy_temp_path ${dir}/proxy;
    fastcgi_temp_path ${dir}/fastcgi;
    uwsgi_temp_path ${dir}/uwsgi;
    scgi_temp_path ${dir}/scgi;

    log_format env_router '$remote_addr [$time_local] "$request" $status $body_bytes_sent '
                          'replica=$upstream_addr replica_status=$upstream_status '
                          'duration=$request_time worker=$pid';
    access_log ${accessLog};
    server_tokens off;
    # Env actions and observations can be large (code, files); 0 would remove the cap entirely.
    client_max_body_size 64m;

    map $http_upgrade $connection_upgrade {
        default upgrade;
        ""      close;
    }

    # "no live upstreams" records the upstream's own name as the last address: every
    # replica was at max_conns (or marked failed), as opposed to connections that errored.
    map $upstream_addr $env_router_at_capacity {
        default 0;
        "~(^|, )${SESSIONS_UPSTREAM}$" 1;
    }

${resolverLine}
    # Websocket sessions: at most ${s.sessionsPerReplica} per replica, counted in shared memory so
    # the cap holds across all worker processes (without a zone each worker counts alone).
    upstream ${SESSIONS_UPSTREAM} {
        zone ${SESSIONS_UPSTREAM} 256k;
        least_conn;
${serverLines(true)}
    }

    # Stateless HTTP routes (/health, /reset, /step, /state, /metadata, /schema): no session
    # cap, so they neither use up nor wait for websocket slots.
    upstream ${HTTP_UPSTREAM} {
        zone ${HTTP_UPSTREAM} 256k;
        least_conn;
${serverLines(false)}
    }

    server {
        listen ${listen} reuseport;
        default_type application/json;

        # Router liveness only; GET /health is answered by a replica (env readiness).
        location = ${ROUTER_HEALTH_PATH} {
            return 200 ${q(JSON.stringify({ status: "healthy", role: "router", env: s.envName, replicas: replicaCount, sessionsPerReplica: s.sessionsPerReplica }))};
        }

        location = ${ROUTER_SESSION_PATH} {
            proxy_pass http://${SESSIONS_UPSTREAM};
${proxyCommon.replace(/^ {8}/gm, "            ")}
            # Retry another replica only when the connection failed; a replica's own HTTP error
            # answer (e.g. 503) is passed on, never retried onto the others.
            proxy_next_upstream error timeout;
            proxy_next_upstream_tries ${replicaCount};
            # Only nginx's own 502/504 land here (proxy_intercept_errors is off).
            error_page 502 504 = @sessions_unavailable;${s.capacityResponder !== undefined ? "\n            # Lets @sessions_unavailable fall back to @sessions_full when the responder is down (nginx decides this here, at the first redirect).\n            recursive_error_pages on;" : ""}
        }

${sessionsUnavailable(s, bodies)}

        location / {
            # Only "location = ${ROUTER_SESSION_PATH}" counts sessions (max_conns). Any other path that could upgrade
            # (e.g. "/ws%0A": the server's route regex matches "/ws" and a trailing newline) would
            # open a session outside the cap, so an upgrade here is refused and none is forwarded.
            if ($http_upgrade != "") {
                return 400 ${q(bodies.upgradeRefused)};
            }
            proxy_pass http://${HTTP_UPSTREAM};
${proxyHttp.replace(/^ {8}/gm, "            ")}
            # Non-idempotent requests (POST /step) are never re-sent once a replica got them.
            proxy_next_upstream error timeout;
            proxy_next_upstream_tries ${replicaCount};
            error_page 502 504 = @http_unavailable;
        }

        location @http_unavailable {
            add_header Retry-After 5 always;
            return 503 ${q(bodies.noReplica)};
        }
    }
}
`;
}

/** argv to run the router in a container (config written to confPath, e.g. from a ConfigMap). */
export function routerCommand(settings: RouterSettings, confPath: string): string[] {
    const dir = resolveRouterSettings(settings).runDir;
    return ["nginx", "-p", dir, "-c", confPath, "-e", "stderr"];
}

/** Replica addresses of a StatefulSet behind a headless Service (stable per-pod DNS names). */
export function statefulSetReplicaAddresses(args: {
    readonly statefulSet: string;
    readonly headlessService: string;
    readonly namespace: string;
    readonly replicas: number;
    readonly port?: number;
    readonly clusterDomain?: string;
}): string[] {
    const port = args.port ?? ROUTER_DEFAULT_PORT;
    const domain = args.clusterDomain ?? "cluster.local";
    return Array.from({ length: args.replicas }, (_, i) => `${args.statefulSet}-${i}.${args.headlessService}.${args.namespace}.svc.${domain}:${port}`);
}

/** Compares dotted versions ("1.22.1" < "1.27.3"); true when `version` >= `minimum`. */
export function versionAtLeast(version: string, minimum: string): boolean {
    const a = version.split(".").map(Number);
    const b = minimum.split(".").map(Number);
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
        const x = a[i] ?? 0;
        const y = b[i] ?? 0;
        if (x !== y) return x > y;
    }
    return true;
}
