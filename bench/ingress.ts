// Ingress benchmarks (issue "Benchmarks", figures 1 and 2): the VllmIngress nginx config, started exactly like
// `npm run ingress:local` starts it (startLocalIngress + renderNginxConfig), TLS on, in front of the stub upstream
// (test/helpers/stub-upstream.ts, in its own process: bench/stub-server.ts), loaded with wrk directly and through the
// proxy in alternating rounds. Every loop is bounded by a count and by the run's deadline; every process is tracked
// (bench/lib.ts) and stopped, also on failure.
import { fork, type ChildProcess } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { childPids, startLocalIngress, type LocalIngress, type LocalProxyOverrides } from "../components/ingress/local";
import { PROXY_DEFAULTS, type IngressKey } from "../components/ingress/nginx";
import { INGRESS_MTAIL } from "../components/observability";
import { selfSignedCert } from "../test/helpers/tls";
import {
    BENCH_DIR,
    atLeast,
    atMost,
    checkLine,
    cpuSeconds,
    cpuWindow,
    fmt,
    isShuttingDown,
    killAfter,
    mean,
    median,
    onCleanup,
    quantile,
    runWrk,
    sleep,
    spawnTracked,
    table,
    wrkSocketErrors,
    type TargetCheck,
    type WrkResult,
} from "./lib";

export interface IngressBenchOptions {
    /** Epoch ms by which everything must be done (rounds are skipped past it). */
    readonly deadline: number;
    /** Seconds per wrk round. @default 5 */
    readonly roundSeconds?: number;
    /** Rounds per mode and concurrency. @default 2 */
    readonly rounds?: number;
    /** Rounds per mode of the metrics-path figure (its p99 difference needs more pairs than the overhead's ratio). @default 6 */
    readonly metricsRounds?: number;
    /** Sequential SSE streams per path. @default 200 */
    readonly streams?: number;
    /** Extra diagnostic rounds with settings overrides (never in the headline). @default true */
    readonly diagnose?: boolean;
    readonly log: (line: string) => void;
}

export interface IngressBenchResult {
    readonly markdown: string;
    readonly checks: TargetCheck[];
}

const CONCURRENCIES = [16, 64, 256] as const;
const D_REF = "deployed settings (reference for this table)";
const D_WP1 = "workerProcesses 1";
const D_NOTLS = "TLS off (plain HTTP)";
const D_KA = "upstreamKeepalive 256";
const D_NOTLS_KA = "TLS off and upstreamKeepalive 256";
const CHAT_LUA = path.join(BENCH_DIR, "wrk", "chat.lua");
const WRONG_KEY_LUA = path.join(BENCH_DIR, "wrk", "wrong-key.lua");
/** The realistic upstream: 20 ms per JSON answer (a short generation); SSE: 20 ms to the first chunk, then one chunk per 10 ms. */
const REALISTIC = { delayMs: 20, streamIntervalMs: 10, streamChunks: 4 } as const;
/** Highest request rate any round can reach (256 connections x 1 / 20 ms), which the keys must carry under the per-key limit. */
const MAX_RPS = (Math.max(...CONCURRENCIES) * 1000) / REALISTIC.delayMs;

// ---------------------------------------------------------------------------------------------------------------
// Stub upstream child

interface StubSample {
    readonly connections: number;
    readonly requests: number;
    readonly cpuSeconds: number;
}

interface StubChild {
    readonly url: string;
    readonly pid: number;
    sample(): Promise<StubSample>;
    stop(): Promise<void>;
}

async function startStub(opts: { delayMs: number; streamIntervalMs?: number; streamChunks?: number }): Promise<StubChild> {
    if (isShuttingDown()) throw new Error("bench is shutting down: not starting the stub");
    const child: ChildProcess = fork(path.join(BENCH_DIR, "stub-server.ts"), [JSON.stringify(opts)], {
        execArgv: ["--import", "tsx"],
        stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    const stop = async () => {
        if (child.exitCode === null && child.signalCode === null) {
            if (child.connected) child.send({ cmd: "stop" });
            else child.kill("SIGTERM");
            const t = await Promise.race([exited.then(() => "exit"), sleep(3000).then(() => "timeout")]);
            if (t === "timeout") child.kill("SIGKILL");
            await Promise.race([exited, sleep(2000)]);
        }
    };
    const unregister = onCleanup(stop);
    const disarm = killAfter(child, 30000);
    const ready = await new Promise<{ url: string }>((resolve, reject) => {
        child.once("message", (m: { type?: string; url?: string }) =>
            m?.type === "ready" ? resolve({ url: m.url! }) : reject(new Error("stub: unexpected message")),
        );
        child.once("exit", (c) => reject(new Error(`stub exited during startup (${String(c)})`)));
    });
    disarm();
    const sample = () =>
        new Promise<StubSample>((resolve, reject) => {
            const t = setTimeout(() => reject(new Error("stub sample timed out")), 5000);
            const onMsg = (m: { type?: string } & StubSample) => {
                if (m?.type !== "sample") return;
                clearTimeout(t);
                child.off("message", onMsg);
                resolve({ connections: m.connections, requests: m.requests, cpuSeconds: m.cpuSeconds });
            };
            child.on("message", onMsg);
            child.send({ cmd: "sample" });
        });
    return {
        url: ready.url,
        pid: child.pid!,
        sample,
        stop: async () => {
            unregister();
            await stop();
        },
    };
}

// ---------------------------------------------------------------------------------------------------------------
// Proxy

/** The recipe and target whose proxy settings the benchmark measures. */
const DEPLOYED_SOURCE = "ingressProxySettings() of recipe opencode-blackbox (kubernetes, tls.mode secret), via localOverrides()";

/**
 * The settings the VllmIngress component deploys for opencode-blackbox on Kubernetes with TLS, as startLocalIngress
 * overrides. Throws when they cannot be derived: figures measured with other settings would not describe a deployment.
 */
async function deployedOverrides(): Promise<{ overrides: LocalProxyOverrides; source: string }> {
    try {
        const config = await import("../components/config");
        const proxySettings = await import("../components/ingress/proxy-settings");
        // The trainer and sandbox images have no default; the proxy settings do not depend on them: placeholders.
        const { parseWithTestImages } = await import("../test/helpers/config");
        const c = parseWithTestImages(
            {
                recipe: "opencode-blackbox",
                runId: "bench",
                target: { kind: "kubernetes", context: "test" },
                ingress: { tls: { mode: "secret", secretName: "bench-tls" } },
            },
            "bench",
        );
        const s = proxySettings.ingressProxySettings(c, config.platformNames(c));
        return { overrides: proxySettings.localOverrides(s), source: DEPLOYED_SOURCE };
    } catch (e) {
        throw new Error(
            `cannot load the deployed proxy settings (${DEPLOYED_SOURCE}): ${(e as Error).message}. ` +
                "The ingress figures measure those settings, so the benchmark stops rather than fall back to the library defaults (PROXY_DEFAULTS); " +
                "fix the config or the ingress describe step and rerun.",
            { cause: e },
        );
    }
}

interface Proxy {
    readonly ingress: LocalIngress;
    stop(): Promise<void>;
    /** nginx master + current workers. */
    pids(): number[];
}

async function startProxy(
    upstream: string,
    keys: readonly IngressKey[],
    tls: { certFile: string; keyFile: string } | undefined,
    settings: LocalProxyOverrides,
): Promise<Proxy> {
    if (isShuttingDown()) throw new Error("bench is shutting down: not starting nginx");
    const ingress = await startLocalIngress({ upstream, keys, tls, settings });
    const unregister = onCleanup(() => ingress.stop());
    return {
        ingress,
        pids: () => [ingress.pid, ...childPids(ingress.pid)],
        stop: async () => {
            unregister();
            await ingress.stop();
        },
    };
}

// ---------------------------------------------------------------------------------------------------------------
// Time to first SSE chunk

interface StreamSample {
    readonly firstChunkMs: number;
    readonly totalMs: number;
    readonly chunks: number;
}

const STREAM_BODY = JSON.stringify({ model: "stub-model", stream: true, messages: [{ role: "user", content: "Guess a five-letter word." }], max_tokens: 16 });

function streamOnce(url: string, key: string, agent: http.Agent): Promise<StreamSample> {
    const u = new URL("/v1/chat/completions", url);
    const mod = u.protocol === "https:" ? https : http;
    return new Promise((resolve, reject) => {
        const t0 = process.hrtime.bigint();
        let first = -1;
        let chunks = 0;
        const req = mod.request(
            u,
            {
                method: "POST",
                agent,
                headers: { "content-type": "application/json", authorization: `Bearer ${key}`, "content-length": Buffer.byteLength(STREAM_BODY) },
                timeout: 10000,
            },
            (res) => {
                if (res.statusCode !== 200) {
                    res.resume();
                    reject(new Error(`stream: HTTP ${String(res.statusCode)} from ${u.origin}`));
                    return;
                }
                res.on("data", () => {
                    chunks++;
                    if (first < 0) first = Number(process.hrtime.bigint() - t0) / 1e6;
                });
                res.on("end", () => resolve({ firstChunkMs: first, totalMs: Number(process.hrtime.bigint() - t0) / 1e6, chunks }));
                res.on("error", reject);
            },
        );
        req.on("timeout", () => req.destroy(new Error("stream timed out")));
        req.on("error", reject);
        req.end(STREAM_BODY);
    });
}

// ---------------------------------------------------------------------------------------------------------------

/** A wrk round plus the cores other processes on the machine used during it. */
type Measured = WrkResult & { readonly foreignCores: number; readonly busyCores: number };

interface RoundPair {
    readonly direct: Measured[];
    readonly proxied: Measured[];
    /** Upstream connections opened / requests received during each proxied round. */
    readonly upstreamConns: number[];
    readonly upstreamReqs: number[];
}

const us2ms = (us: number) => us / 1000;
const rpsOf = (rs: readonly WrkResult[]) => rs.reduce((s, r) => s + r.requests, 0) / rs.reduce((s, r) => s + r.durationUs / 1e6, 0);

function wrkProblems(label: string, r: WrkResult, expectStatusErrors = 0): string[] {
    const out: string[] = [];
    if (r.requests === 0) out.push(`${label}: no request completed`);
    if (wrkSocketErrors(r) > 0)
        out.push(`${label}: socket errors connect ${r.connectErrors} read ${r.readErrors} write ${r.writeErrors} timeout ${r.timeouts}`);
    if (r.statusErrors !== expectStatusErrors) out.push(`${label}: ${r.statusErrors} responses with status >= 400 (expected ${expectStatusErrors})`);
    return out;
}

// ---------------------------------------------------------------------------------------------------------------
// What every figure shares

/** The run's settings, keys and deadline, and the wrk runner every figure loads the two paths with. */
interface Bench {
    readonly roundSeconds: number;
    readonly rounds: number;
    readonly metricsRounds: number;
    readonly streams: number;
    readonly log: (line: string) => void;
    /** What went wrong or was skipped while measuring (listed under the figures). */
    readonly problems: string[];
    readonly overrides: LocalProxyOverrides;
    /** Where the overrides come from, in words. */
    readonly source: string;
    /** PROXY_DEFAULTS with the overrides on top: what nginx runs. */
    readonly effective: typeof PROXY_DEFAULTS;
    /** The per-key rate limit (requests/s) and burst. */
    readonly rate: number;
    readonly burst: number;
    readonly tls: { readonly certFile: string; readonly keyFile: string };
    /** The certificate the SSE client trusts (self-signed: the cert itself). */
    readonly ca: string;
    readonly keys: readonly IngressKey[];
    readonly keyStrings: readonly string[];
    readonly wrongKey: string;
    /** How many of the keys a round at `c` connections rotates over. */
    keysFor(c: number): number;
    /** Seconds left before the deadline. */
    timeLeft(): number;
    /** Seconds still needed by the saturation figure and by the SSE streams (later phases skip what would not fit them). */
    readonly reserveSaturation: number;
    readonly reserveStreams: number;
    /** Names the processes of this run that are live in the next rounds: the machine's other busy time is "other load". */
    watch(pids: () => number[]): void;
    /** One wrk round, plus the cores other processes used during it. */
    wrk(url: string, c: number, seconds: number, script?: string, keys?: readonly string[]): Promise<Measured>;
    /** The most other load any round saw, in cores. */
    maxForeign(): number;
}

function prepareBench(
    o: IngressBenchOptions,
    cert: { certFile: string; keyFile: string; ca: string },
    deployed: { overrides: LocalProxyOverrides; source: string },
): Bench {
    const roundSeconds = o.roundSeconds ?? 5;
    const { overrides } = deployed;
    const rate = overrides.rateLimitPerSecond ?? PROXY_DEFAULTS.rateLimitPerSecond;
    // The proxy limits each key to `rate` requests/s (limit_req, per replica). A load test far above that would measure
    // 429s, so the load is spread over enough keys; the nginx config itself is exactly the deployed one.
    // nginx evaluates the key map's regexes in order, so a request costs one regex per key listed before its own: each
    // round uses the first keysFor(c) keys only (as many as its highest possible rate needs), not all of them.
    const nKeys = Math.max(2, Math.ceil(MAX_RPS / rate));
    const keysFor = (c: number) => Math.min(nKeys, Math.max(2, Math.ceil((c * 1000) / REALISTIC.delayMs / rate)));
    const keys: IngressKey[] = Array.from({ length: nKeys }, (_, i) => ({
        name: `bench-${String(i).padStart(4, "0")}`,
        key: crypto.randomBytes(24).toString("hex"),
    }));
    const keyStrings = keys.map((k) => k.key);
    // Every wrk round also measures how many cores processes this run did not start kept busy meanwhile (the machine
    // may be shared): a round with other load is reported as such, not silently averaged in.
    let livePids: () => number[] = () => [];
    let maxForeign = 0;
    return {
        roundSeconds,
        rounds: o.rounds ?? 2,
        metricsRounds: o.metricsRounds ?? 6,
        streams: o.streams ?? 200,
        log: o.log,
        problems: [],
        overrides,
        source: deployed.source,
        effective: { ...PROXY_DEFAULTS, ...overrides },
        rate,
        burst: overrides.rateLimitBurst ?? PROXY_DEFAULTS.rateLimitBurst,
        tls: { certFile: cert.certFile, keyFile: cert.keyFile },
        ca: cert.ca,
        keys,
        keyStrings,
        wrongKey: `wrong-${crypto.randomBytes(16).toString("hex")}`,
        keysFor,
        timeLeft: () => (o.deadline - Date.now()) / 1000,
        reserveSaturation: 4 * (roundSeconds + 0.5) + 12,
        reserveStreams: 25,
        watch: (pids) => {
            livePids = pids;
        },
        wrk: async (url, c, seconds, script = CHAT_LUA, k = keyStrings.slice(0, keysFor(c))) => {
            const end = cpuWindow(livePids);
            const r = await runWrk({ url, script, connections: c, threads: 2, durationSeconds: seconds, keys: k });
            const { foreignCores, busyCores } = end();
            maxForeign = Math.max(maxForeign, foreignCores);
            return { ...r, foreignCores, busyCores };
        },
        maxForeign: () => maxForeign,
    };
}

/** Markdown lines and the targets they evaluate, for one figure. */
interface Section {
    readonly markdown: string[];
    readonly checks: TargetCheck[];
}

// ---------------------------------------------------------------------------------------------------------------
// Figure 1: overhead with a realistic upstream (throughput, latency and upstream connections per concurrency)

/** Alternating direct / proxied wrk rounds at each concurrency, with the upstream connections each proxied round opened. */
async function measureOverhead(b: Bench, stub: StubChild, proxiedUrl: string): Promise<Map<number, RoundPair>> {
    // Warm-up (not counted): JIT of the stub, TLS sessions, nginx worker caches.
    await b.wrk(stub.url, 64, 1);
    await b.wrk(proxiedUrl, 64, 1);

    const pairs = new Map<number, RoundPair>();
    for (const c of CONCURRENCIES) {
        const pair: RoundPair = { direct: [], proxied: [], upstreamConns: [], upstreamReqs: [] };
        pairs.set(c, pair);
        for (let r = 0; r < b.rounds; r++) {
            if (b.timeLeft() < 2 * (b.roundSeconds + 0.5) + b.reserveStreams + b.reserveSaturation) {
                b.problems.push(`time budget: skipped round ${r + 1} at ${c} connections`);
                break;
            }
            const d = await b.wrk(stub.url, c, b.roundSeconds);
            b.problems.push(...wrkProblems(`direct c=${c} round ${r + 1}`, d));
            pair.direct.push(d);
            const before = await stub.sample();
            const p = await b.wrk(proxiedUrl, c, b.roundSeconds);
            const after = await stub.sample();
            b.problems.push(...wrkProblems(`proxied c=${c} round ${r + 1}`, p));
            pair.proxied.push(p);
            pair.upstreamConns.push(after.connections - before.connections);
            pair.upstreamReqs.push(after.requests - before.requests);
            b.log(
                `ingress: c=${c} round ${r + 1}: direct ${fmt(d.rps, 0)} req/s p99 ${fmt(us2ms(d.p99Us))} ms; proxied ${fmt(p.rps, 0)} req/s p99 ${fmt(us2ms(p.p99Us))} ms, ` +
                    `${after.connections - before.connections} upstream conns for ${p.requests} req; machine busy ${fmt(d.busyCores)} / ${fmt(p.busyCores)} cores, other load ${fmt(d.foreignCores)} / ${fmt(p.foreignCores)} cores`,
            );
        }
    }
    return pairs;
}

function overheadSection(b: Bench, pairs: ReadonlyMap<number, RoundPair>, diagBy: ReadonlyMap<string, DiagnosticFigures>): Section {
    const md: string[] = [];
    const checks: TargetCheck[] = [];
    const { effective } = b;
    md.push("## 1. Ingress overhead, realistic upstream", "");
    md.push(
        `What: the VllmIngress nginx config (rendered by \`renderNginxConfig\`, started by \`startLocalIngress\` like \`npm run ingress:local\`) with **TLS on** ` +
            `(openssl self-signed P-256 cert) in front of the stub upstream, which holds each JSON answer ${REALISTIC.delayMs} ms and streams SSE ` +
            `(${REALISTIC.delayMs} ms to the first chunk, then one chunk per ${REALISTIC.streamIntervalMs} ms). wrk (\`-t 2 -d ${b.roundSeconds}s --latency\`, ` +
            `\`bench/wrk/chat.lua\`: POST /v1/chat/completions, JSON body, Bearer key) loads the stub directly (plain HTTP) and through the proxy (HTTPS), ` +
            `alternating direct/proxied, ${b.rounds} rounds each per concurrency; throughput = requests / seconds summed over the rounds, latencies = mean of the rounds' wrk percentiles.`,
        "",
        `Proxy settings: ${b.source}: worker_processes ${effective.workerProcesses}, upstream keepalive ${effective.upstreamKeepalive} per worker ` +
            `(timeout ${effective.upstreamKeepaliveTimeoutSeconds} s), rate limit ${b.rate}/s burst ${b.burst} per key. ` +
            `The load rotates over ${b.keys.length} keys so no key exceeds its ${b.rate}/s limit (a single key would measure 429s, not the proxy); ` +
            `every proxied response had to be 2xx (checked per round).`,
        "",
        "Command: `npm run bench` (bench/ingress.ts); single wrk round by hand: `BENCH_KEYS=<key> wrk -t 2 -c 64 -d 5s --latency -s bench/wrk/chat.lua https://127.0.0.1:<port>`",
        "",
    );
    const rows: string[][] = [];
    for (const c of CONCURRENCIES) {
        const p = pairs.get(c)!;
        if (p.direct.length === 0 || p.proxied.length === 0) {
            rows.push([String(c), "skipped", "", "", "", "", "", "", "", "", "", ""]);
            continue;
        }
        const dr = rpsOf(p.direct);
        const pr = rpsOf(p.proxied);
        const ratio = pr / dr;
        const dp50 = mean(p.direct.map((r) => us2ms(r.p50Us)));
        const pp50 = mean(p.proxied.map((r) => us2ms(r.p50Us)));
        const dp99 = mean(p.direct.map((r) => us2ms(r.p99Us)));
        const pp99 = mean(p.proxied.map((r) => us2ms(r.p99Us)));
        const totalReq = p.proxied.reduce((s, r) => s + r.requests, 0);
        const conns = p.upstreamConns.reduce((a, b) => a + b, 0);
        const per1000 = (conns / totalReq) * 1000;
        rows.push([
            String(c),
            fmt(dr, 0),
            fmt(pr, 0),
            fmt(ratio, 3),
            `${fmt(dp50)} / ${fmt(pp50)}`,
            fmt(pp50 - dp50),
            `${fmt(dp99)} / ${fmt(pp99)}`,
            fmt(pp99 - dp99),
            `${conns} / ${totalReq}`,
            fmt(per1000, 1),
            `${fmt(mean(p.direct.map((r) => r.busyCores)))} / ${fmt(mean(p.proxied.map((r) => r.busyCores)))}`,
            fmt(Math.max(...p.direct.map((r) => r.foreignCores), ...p.proxied.map((r) => r.foreignCores))),
        ]);
        if (c === 64 || c === 256) checks.push(atLeast(`throughput ratio proxied/direct at ${c} connections`, ratio, 0.97));
        checks.push(atMost(`added p99 latency at ${c} connections`, pp99 - dp99, 3, " ms"));
        checks.push(atMost(`upstream connections per 1000 requests at ${c} connections`, per1000, 10, "", 1));
    }
    md.push(
        table(
            [
                "connections",
                "direct req/s",
                "proxied req/s",
                "ratio",
                "p50 ms direct / proxied",
                "added p50 ms",
                "p99 ms direct / proxied",
                "added p99 ms",
                "upstream conns / proxied req",
                "upstream conns per 1000 req",
                "machine CPU busy, cores direct / proxied",
                "other load, cores (max)",
            ],
            rows,
        ),
        "",
    );
    md.push(...overheadReading(b, pairs, diagBy));
    md.push(
        '"other load" = cores that processes this run did not start kept busy during the round (machine busy time from /proc/stat minus this run\'s ' +
            "own process tree); the machine may be shared, and a round with other load above ~0.2 cores is disturbed: compare ratios, rerun on a quiet machine for final numbers.",
        "",
    );
    return { markdown: md, checks };
}

/** What the overhead table means on this machine, read with the diagnostic rows (empty when 256 connections were skipped). */
function overheadReading(b: Bench, pairs: ReadonlyMap<number, RoundPair>, diagBy: ReadonlyMap<string, DiagnosticFigures>): string[] {
    const worst = pairs.get(256);
    if (!worst || worst.direct.length === 0 || worst.proxied.length === 0) return [];
    const { effective } = b;
    const perWorker = 256 / effective.workerProcesses;
    const ref = diagBy.get(D_REF);
    const noTls = diagBy.get(D_NOTLS);
    const ka = diagBy.get(D_KA);
    const wp1 = diagBy.get(D_WP1);
    const both = diagBy.get(D_NOTLS_KA);
    const lines = [
        `What it means: at 16 and 64 connections the machine has CPU to spare (${[16, 64].map((c) => fmt(mean(pairs.get(c)?.proxied.map((r) => r.busyCores) ?? [NaN]))).join(" and ")} cores busy in the proxied rounds) ` +
            `and the proxy adds ${[16, 64].map((c) => fmt(mean(pairs.get(c)?.proxied.map((r) => us2ms(r.p50Us)) ?? [NaN]) - mean(pairs.get(c)?.direct.map((r) => us2ms(r.p50Us)) ?? [NaN]))).join(" and ")} ms at p50. ` +
            `At 256 connections the proxied rounds keep ${fmt(mean(worst.proxied.map((r) => r.busyCores)))} of ${os.cpus().length} cores busy ` +
            `(direct: ${fmt(mean(worst.direct.map((r) => r.busyCores)))}): ` +
            (mean(worst.proxied.map((r) => r.busyCores)) >= 0.75 * os.cpus().length ? "close to CPU-bound, " : "") +
            `wrk (2 threads), the stub and nginx (${effective.workerProcesses} workers) queue for the same cores and every proxied request crosses three processes, so the ratio and ` +
            `p99 there measure CPU sharing on a ${os.cpus().length}-core machine as much as the proxy. TLS is paid twice on that path (nginx and wrk both encrypt).`,
    ];
    const clear = (a: number, b: number, rel: number) => Math.abs(a - b) > rel * Math.max(Math.abs(a), Math.abs(b));
    if (ref && noTls) {
        lines.push(
            `- TLS: plain HTTP gives ratio ${fmt(noTls.ratio, 3)} (reference row ${fmt(ref.ratio, 3)}), added p99 ${fmt(noTls.addedP99)} ms (reference ${fmt(ref.addedP99)} ms)` +
                (noTls.ratio > ref.ratio + 0.05 ? ": TLS is a visible part of the cost in this run." : ": within the noise of single rounds in this run."),
        );
    }
    if (ref && ka) {
        lines.push(
            `- Upstream connections: \`keepalive ${effective.upstreamKeepalive}\` caches at most ${effective.upstreamKeepalive} idle connections per worker while 256 connections over ${effective.workerProcesses} workers ` +
                `keep ~${perWorker} requests in flight per worker; a response that finishes while the cache is full closes its upstream connection (nginx upstream keepalive docs). ` +
                `Reference row ${fmt(ref.connsPer1000, 1)} per 1000 requests, upstreamKeepalive 256: ${fmt(ka.connsPer1000, 1)}` +
                (ref.connsPer1000 > 1.5 * ka.connsPer1000 ? " (a larger pool removes most of the churn)." : " (no clear difference in this run)."),
        );
    }
    if (ref && wp1) {
        lines.push(
            `- One worker instead of ${effective.workerProcesses}: ratio ${fmt(wp1.ratio, 3)}, ${fmt(wp1.connsPer1000, 1)} upstream connections per 1000 requests (one worker's pool of ${effective.upstreamKeepalive} for all 256)` +
                (clear(wp1.ratio, ref.ratio, 0.05) && wp1.ratio < ref.ratio ? "; fewer workers do not help on 2 shared cores." : "."),
        );
    }
    if (both)
        lines.push(
            `- Plain HTTP and keepalive 256 together (the issue author's hand-written reference had keep-alive, TLS not stated): ratio ${fmt(both.ratio, 3)}, added p99 ${fmt(both.addedP99)} ms, ${fmt(both.connsPer1000, 1)} upstream connections per 1000 requests.`,
        );
    lines.push(
        "- Diagnostic rows are single 4 s rounds including the cold start: at 256 connections on 2 shared cores the ratio moves by ~0.1 between runs, " +
            "so only effects larger than that (or the upstream-connection counts) are findings; the robust observation is the machine-CPU column.",
    );
    return [...lines, ""];
}

// ---------------------------------------------------------------------------------------------------------------
// Wrong key: every response must be 401 and nothing may reach the stub

interface WrongKeyFigures {
    readonly wk: Measured;
    /** Requests that reached the stub during the round. */
    readonly upstream: number;
    readonly non401: number;
}

async function measureWrongKey(b: Bench, stub: StubChild, proxiedUrl: string): Promise<WrongKeyFigures> {
    const before = await stub.sample();
    const wk = await b.wrk(proxiedUrl, 64, Math.min(3, b.roundSeconds), WRONG_KEY_LUA, [b.wrongKey]);
    const after = await stub.sample();
    const upstream = after.requests - before.requests;
    const non401 = (wk.statusOther ?? NaN) + (wk.requests - (wk.status401 ?? 0) - (wk.statusOther ?? 0));
    b.log(`ingress: wrong key: ${wk.requests} requests, ${wk.status401} x 401, ${wk.statusOther} other, ${upstream} reached the stub`);
    return { wk, upstream, non401 };
}

function wrongKeySection(b: Bench, { wk, upstream, non401 }: WrongKeyFigures): Section {
    const wrongOk = wk.requests > 0 && wk.status401 === wk.requests && non401 === 0 && upstream === 0;
    return {
        markdown: [
            "### Wrong key",
            "",
            `What: one ${Math.min(3, b.roundSeconds)} s wrk round at 64 connections through the proxy with an unknown key (\`bench/wrk/wrong-key.lua\`; its response() hook counts 401 and every other status per thread, done() sums the threads).`,
            "",
            table(
                ["requests", "401", "non-401", "requests that reached the stub", "req/s"],
                [[String(wk.requests), String(wk.status401), String(non401), String(upstream), fmt(wk.rps, 0)]],
            ),
            "",
        ],
        checks: [
            {
                name: "wrong key: every response 401, none reached the upstream",
                met: wrongOk,
                detail: `${non401} non-401 of ${wk.requests}, ${upstream} upstream requests`,
            },
        ],
    };
}

// ---------------------------------------------------------------------------------------------------------------
// Time to first SSE chunk, alternating direct / proxied, keep-alive connections on both paths

interface FirstChunkFigures {
    readonly direct: StreamSample[];
    readonly proxied: StreamSample[];
}

async function measureFirstChunk(b: Bench, stub: StubChild, proxiedUrl: string): Promise<FirstChunkFigures> {
    const directAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const proxiedAgent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: b.ca });
    const sd: StreamSample[] = [];
    const sp: StreamSample[] = [];
    try {
        await streamOnce(stub.url, b.keyStrings[0]!, directAgent);
        await streamOnce(proxiedUrl, b.keyStrings[0]!, proxiedAgent);
        for (let i = 0; i < b.streams && b.timeLeft() > b.reserveSaturation; i++) {
            const key = b.keyStrings[i % b.keyStrings.length]!;
            sd.push(await streamOnce(stub.url, key, directAgent));
            sp.push(await streamOnce(proxiedUrl, key, proxiedAgent));
        }
    } finally {
        directAgent.destroy();
        proxiedAgent.destroy();
    }
    if (sd.length < b.streams) b.problems.push(`time budget: ${sd.length} of ${b.streams} SSE streams per path`);
    b.log(`ingress: SSE first chunk: direct median ${fmt(median(sd.map((s) => s.firstChunkMs)))} ms, proxied ${fmt(median(sp.map((s) => s.firstChunkMs)))} ms`);
    return { direct: sd, proxied: sp };
}

function firstChunkSection({ direct: sd, proxied: sp }: FirstChunkFigures): Section {
    const fd = sd.map((s) => s.firstChunkMs);
    const fp = sp.map((s) => s.firstChunkMs);
    const paired = sd.map((s, i) => sp[i]!.firstChunkMs - s.firstChunkMs);
    const addedMedian = median(fp) - median(fd);
    const addedP99 = quantile(fp, 0.99) - quantile(fd, 0.99);
    return {
        markdown: [
            "### Time to first SSE chunk",
            "",
            `What: ${sd.length} sequential streamed completions (\`"stream": true\`) per path, alternating direct / proxied, one keep-alive connection per path ` +
                `(node http / https client, the TLS handshake happens once), time from sending the request to the first body chunk.`,
            "",
            table(
                ["path", "streams", "median ms", "p99 ms", "chunks per stream (median)", "whole stream median ms"],
                [
                    [
                        "direct (HTTP)",
                        String(sd.length),
                        fmt(median(fd)),
                        fmt(quantile(fd, 0.99)),
                        fmt(median(sd.map((s) => s.chunks)), 0),
                        fmt(median(sd.map((s) => s.totalMs))),
                    ],
                    [
                        "proxied (HTTPS)",
                        String(sp.length),
                        fmt(median(fp)),
                        fmt(quantile(fp, 0.99)),
                        fmt(median(sp.map((s) => s.chunks)), 0),
                        fmt(median(sp.map((s) => s.totalMs))),
                    ],
                    ["added (proxied - direct)", "", fmt(addedMedian), fmt(addedP99), "", ""],
                    ["added, paired per stream", "", fmt(median(paired)), fmt(quantile(paired, 0.99)), "", ""],
                ],
            ),
            "",
            "Chunks per stream near the stub's chunk count (one `data:` event each, plus `[DONE]`) on both paths means the proxy does not buffer the stream (`proxy_buffering off`).",
            "",
        ],
        checks: [atMost("added time to first SSE chunk (median)", addedMedian, 1, " ms")],
    };
}

// ---------------------------------------------------------------------------------------------------------------
// The cost of seeing (issue 28): the same proxy with its metrics path on (the JSON log also to a file, tailed by a
// real mtail, and the loopback stub_status server) beside off, alternating rounds at 64 connections.

/** Connections of the metrics-path rounds: the headline load where the machine still has CPU to spare. */
const METRICS_PATH_CONNECTIONS = 64;

interface MetricsPathFigures {
    readonly off: Measured[];
    readonly on: Measured[];
    /** Responses mtail counted (agentrl_ingress_requests_total summed) against the requests the on-rounds sent. */
    readonly counted: number;
    readonly sent: number;
    readonly skipped?: string;
}

function which(bin: string): string | undefined {
    for (const d of (process.env.PATH ?? "").split(path.delimiter)) {
        const p = path.join(d, bin);
        if (d !== "" && fs.existsSync(p)) return p;
    }
    return undefined;
}

async function measureMetricsPath(b: Bench, stub: StubChild, tmp: string): Promise<MetricsPathFigures> {
    const none = { off: [], on: [], counted: 0, sent: 0 };
    const mtailBin = which("mtail");
    if (mtailBin === undefined) return { ...none, skipped: "mtail not installed (apt-get install -y mtail)" };
    if (b.timeLeft() < 2 * b.metricsRounds * (b.roundSeconds + 0.5) + 10 + b.reserveStreams + b.reserveSaturation) return { ...none, skipped: "time budget" };
    const dir = fs.mkdtempSync(path.join(tmp, "metrics-path-"));
    const logFile = path.join(dir, "access.json");
    fs.mkdirSync(path.join(dir, "progs"));
    fs.copyFileSync(INGRESS_MTAIL.sourcePath, path.join(dir, "progs", INGRESS_MTAIL.file));
    const stubStatusPort = await freeLoopbackPort();
    const off = await startProxy(stub.url, b.keys, b.tls, b.overrides);
    const on = await startProxy(stub.url, b.keys, b.tls, { ...b.overrides, metricsAccessLog: logFile, stubStatusListen: `127.0.0.1:${stubStatusPort}` });
    const mtailPort = await freeLoopbackPort();
    const mtail = spawnTracked(
        mtailBin,
        ["-progs", path.join(dir, "progs"), "-logs", logFile, "-address", "127.0.0.1", "-port", String(mtailPort), "-emit_prog_label=false", "-logtostderr"],
        { stdio: "ignore" },
    );
    const scrapeCount = async (): Promise<number> => {
        const text = await (await fetch(`http://127.0.0.1:${mtailPort}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
        return text
            .split("\n")
            .filter((l) => l.startsWith("agentrl_ingress_requests_total{"))
            .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
    };
    try {
        for (let i = 0; i < 100; i++) {
            try {
                await scrapeCount();
                break;
            } catch {
                if (mtail.exitCode !== null) throw new Error(`mtail exited (${mtail.exitCode})`);
                await sleep(100);
            }
        }
        b.watch(() => [stub.pid, ...off.pids(), ...on.pids(), ...(mtail.pid !== undefined ? [mtail.pid] : [])]);
        // Warm-up (not counted), then let mtail catch up before its count is taken.
        await b.wrk(off.ingress.url, METRICS_PATH_CONNECTIONS, 1);
        await b.wrk(on.ingress.url, METRICS_PATH_CONNECTIONS, 1);
        // The warm-up's lines counted before the baseline: wait (bounded) until two scrapes a second apart agree.
        let counted0 = await scrapeCount();
        for (let i = 0; i < 20; i++) {
            await sleep(1000);
            const now = await scrapeCount();
            if (now === counted0) break;
            counted0 = now;
        }
        const out: MetricsPathFigures & { off: Measured[]; on: Measured[] } = { off: [], on: [], counted: 0, sent: 0 };
        for (let r = 0; r < b.metricsRounds; r++) {
            const x = await b.wrk(off.ingress.url, METRICS_PATH_CONNECTIONS, b.roundSeconds);
            b.problems.push(...wrkProblems(`metrics path off round ${r + 1}`, x));
            out.off.push(x);
            const y = await b.wrk(on.ingress.url, METRICS_PATH_CONNECTIONS, b.roundSeconds);
            b.problems.push(...wrkProblems(`metrics path on round ${r + 1}`, y));
            out.on.push(y);
            b.log(
                `ingress: metrics path round ${r + 1}: off ${fmt(x.rps, 0)} req/s p99 ${fmt(us2ms(x.p99Us))} ms; on ${fmt(y.rps, 0)} req/s p99 ${fmt(us2ms(y.p99Us))} ms`,
            );
        }
        // mtail reads the file as it grows: give it a moment, bounded, to reach the last line.
        const sent = out.on.reduce((n, r) => n + r.requests, 0);
        let counted = (await scrapeCount()) - counted0;
        for (let i = 0; i < 100 && counted < sent; i++) {
            await sleep(100);
            counted = (await scrapeCount()) - counted0;
        }
        return { ...out, counted, sent };
    } finally {
        mtail.kill("SIGTERM");
        await on.stop();
        await off.stop();
    }
}

function freeLoopbackPort(): Promise<number> {
    return new Promise((resolve, reject) => {
        const srv = net.createServer();
        srv.once("error", reject);
        srv.listen(0, "127.0.0.1", () => {
            const port = (srv.address() as net.AddressInfo).port;
            srv.close(() => resolve(port));
        });
    });
}

function metricsPathSection(b: Bench, f: MetricsPathFigures): Section {
    const head = "### The cost of seeing: the metrics path on vs off";
    if (f.skipped !== undefined || f.off.length === 0 || f.on.length === 0)
        return { markdown: [head, "", `Not measured: ${f.skipped ?? "no round ran"}.`, ""], checks: [] };
    const p = (rs: readonly Measured[], k: "p50Us" | "p99Us") => mean(rs.map((r) => us2ms(r[k])));
    const ratio = rpsOf(f.on) / rpsOf(f.off);
    // Each on-round runs right after its off-round: the pair's difference cancels what drifted between pairs (other
    // load, the stub's warm-up), and the median of the pairs' differences is what the check reads, not one outlier.
    const paired = (k: "p50Us" | "p99Us") => f.on.slice(0, f.off.length).map((r, i) => us2ms(r[k]) - us2ms(f.off[i][k]));
    const addedP99 = median(paired("p99Us"));
    const addedP50 = median(paired("p50Us"));
    const list = (xs: readonly number[]) => xs.map((x) => fmt(x)).join(", ");
    const row = (name: string, rs: readonly Measured[]) => [
        name,
        fmt(rpsOf(rs), 0),
        fmt(p(rs, "p50Us")),
        fmt(p(rs, "p99Us")),
        fmt(mean(rs.map((r) => r.busyCores))),
    ];
    return {
        markdown: [
            head,
            "",
            `What: two proxies with the settings above (TLS on), one as deployed with observability off, one with its metrics path on as observability.enabled renders it ` +
                `(the same JSON access log written also to a file, \`metricsAccessLog\`, which a real mtail (Debian 3.0.0~rc50, components/observability/ingress.mtail) tails; ` +
                `\`stub_status\` served on loopback, \`stubStatusListen\`), alternating wrk rounds (${b.metricsRounds} each, ${b.roundSeconds} s) at ${METRICS_PATH_CONNECTIONS} connections against the realistic stub. ` +
                "mtail shares the machine's cores with nginx, wrk and the stub, as it shares the ingress pod's node.",
            "",
            table(["metrics path", "req/s", "p50 ms", "p99 ms", "machine CPU busy, cores"], [row("off", f.off), row("on", f.on)]),
            "",
            `Added latency per pair of rounds (on minus the off-round just before it): p50 ${list(paired("p50Us"))} ms (median ${fmt(addedP50)}); ` +
                `p99 ${list(paired("p99Us"))} ms (median ${fmt(addedP99)}).`,
            "",
            `Ratio on/off ${fmt(ratio, 3)}, added p99 (median of the pairs) ${fmt(addedP99)} ms. mtail counted ${f.counted} responses for the ${f.sent} requests wrk completed in the on-rounds ` +
                `(the difference: requests in flight when wrk stopped, at most ${METRICS_PATH_CONNECTIONS * f.on.length}, which nginx logs and wrk does not count).`,
            "",
        ],
        checks: [
            atLeast(`throughput ratio metrics path on/off at ${METRICS_PATH_CONNECTIONS} connections`, ratio, 0.95),
            atMost(`added p99 latency with the metrics path on at ${METRICS_PATH_CONNECTIONS} connections (median of paired rounds)`, addedP99, 2, " ms"),
            // wrk counts requests completed within its duration; the ones in flight when it stops (at most one per connection
            // per round) still reach nginx's log (200, or 499 when the client closed first), so mtail may count up to that many more.
            atLeast("responses mtail counted minus requests wrk completed (none lost)", f.counted - f.sent, 0, "", 0),
            atMost(
                "responses mtail counted beyond the requests in flight when wrk stopped",
                f.counted - f.sent - METRICS_PATH_CONNECTIONS * f.on.length,
                0,
                "",
                0,
            ),
        ],
    };
}

// ---------------------------------------------------------------------------------------------------------------
// Diagnostics (settings overrides; never the headline): one nginx per variant, same realistic stub, 256 connections

/** The figures of one diagnostic variant that the overhead reading cites. */
interface DiagnosticFigures {
    readonly ratio: number;
    readonly addedP99: number;
    readonly connsPer1000: number;
    readonly busyProxied: number;
}

interface Diagnostics {
    /** Table rows, in the order run. */
    readonly rows: string[][];
    readonly byLabel: Map<string, DiagnosticFigures>;
    /** Seconds per round. */
    readonly seconds: number;
}

async function measureDiagnostics(b: Bench, stub: StubChild): Promise<Diagnostics> {
    const out: Diagnostics = { rows: [], byLabel: new Map(), seconds: Math.min(4, b.roundSeconds) };
    const { overrides } = b;
    await diagnosticRound(b, stub, out, D_REF, overrides, true);
    await diagnosticRound(b, stub, out, D_WP1, { ...overrides, workerProcesses: 1 }, true);
    await diagnosticRound(b, stub, out, D_NOTLS, overrides, false);
    await diagnosticRound(b, stub, out, D_KA, { ...overrides, upstreamKeepalive: 256 }, true);
    await diagnosticRound(b, stub, out, D_NOTLS_KA, { ...overrides, upstreamKeepalive: 256 }, false);
    return out;
}

async function diagnosticRound(b: Bench, stub: StubChild, out: Diagnostics, label: string, settings: LocalProxyOverrides, useTls: boolean): Promise<void> {
    const c = 256;
    if (b.timeLeft() < 2 * out.seconds + 4 + b.reserveSaturation) {
        b.problems.push(`time budget: skipped diagnostic "${label}"`);
        return;
    }
    const px = await startProxy(stub.url, b.keys, useTls ? b.tls : undefined, settings);
    b.watch(() => [stub.pid, ...px.pids()]);
    try {
        const url = px.ingress.url;
        const ks = b.keyStrings.slice(0, b.keysFor(c));
        await b.wrk(url, c, 1, CHAT_LUA, ks);
        const d = await b.wrk(stub.url, c, out.seconds, CHAT_LUA, ks);
        const before = await stub.sample();
        const cpu0 = cpuSeconds(px.pids());
        const p = await b.wrk(url, c, out.seconds, CHAT_LUA, ks);
        const cpu1 = cpuSeconds(px.pids());
        const after = await stub.sample();
        const bad = [...wrkProblems(`diag ${label} direct`, d), ...wrkProblems(`diag ${label} proxied`, p)];
        const connsPer1000 = ((after.connections - before.connections) / Math.max(1, p.requests)) * 1000;
        out.byLabel.set(label, { ratio: p.rps / d.rps, addedP99: us2ms(p.p99Us - d.p99Us), connsPer1000, busyProxied: p.busyCores });
        out.rows.push([
            label,
            String(c),
            fmt(p.rps / d.rps, 3),
            fmt(us2ms(p.p50Us - d.p50Us)),
            fmt(us2ms(p.p99Us - d.p99Us)),
            fmt(connsPer1000, 1),
            fmt(((cpu1 - cpu0) / Math.max(1, p.requests)) * 10000, 2),
            `${fmt(d.busyCores)} / ${fmt(p.busyCores)}`,
            fmt(Math.max(d.foreignCores, p.foreignCores)),
            bad.length === 0 ? "ok" : bad.join("; "),
        ]);
        b.log(`ingress: diag ${label}: ratio ${fmt(p.rps / d.rps, 3)}, +p99 ${fmt(us2ms(p.p99Us - d.p99Us))} ms`);
    } finally {
        await px.stop();
    }
}

function diagnosticsSection(diag: Diagnostics): Section {
    if (diag.rows.length === 0) return { markdown: [], checks: [] };
    return {
        markdown: [
            "### Diagnostics (settings overrides; not the headline)",
            "",
            `What: one ${diag.seconds} s direct round, then one proxied round, per row, same realistic stub, 256 connections; each row starts its own nginx. ` +
                "These runs pass `settings` overrides to startLocalIngress (or turn TLS off) only to explain the headline numbers. " +
                "Single short rounds that include the cold start (256 TLS handshakes, an empty upstream pool): ratios move by about ±0.1 between runs at 256 connections; " +
                "the p99 and upstream-connection columns, which differ by large factors, are the signal.",
            "",
            table(
                [
                    "variant",
                    "connections",
                    "ratio",
                    "added p50 ms",
                    "added p99 ms",
                    "upstream conns per 1000 req",
                    "nginx CPU-s per 10k req",
                    "machine CPU busy, cores direct / proxied",
                    "other load, cores",
                    "checks",
                ],
                diag.rows,
            ),
            "",
        ],
        checks: [],
    };
}

// ---------------------------------------------------------------------------------------------------------------
// Figure 2: saturation with an instant upstream (throughput and CPU per request)

interface SaturationFigures {
    readonly direct: Measured[];
    readonly proxied: Measured[];
    /** CPU-s per 10k requests of nginx and of the stub, per round. */
    readonly nginxCpu: number[];
    readonly stubCpuDirect: number[];
    readonly stubCpuProxied: number[];
    /** nginx workers during the rounds. */
    workers: number;
    /** The diagnostic with the deployment's key count (2) and the rate limit lifted, when run. */
    twoKeys?: { rps: number; cpu: number; p50: number; p99: number; foreign: number };
}

async function measureSaturation(b: Bench, diagnose: boolean): Promise<SaturationFigures> {
    b.log("ingress: saturation with an instant stub, 64 connections");
    const fast = await startStub({ delayMs: 0 });
    try {
        const figures = await saturationRounds(b, fast);
        // Diagnostic: the same load with the deployment's key count (2) and the rate limit lifted, i.e. without the cost
        // of scanning the long key map this benchmark needs (settings override; not the headline).
        if (diagnose && b.timeLeft() > b.roundSeconds + 3) figures.twoKeys = await saturationTwoKeys(b, fast);
        return figures;
    } finally {
        await fast.stop();
    }
}

async function saturationRounds(b: Bench, fast: StubChild): Promise<SaturationFigures> {
    const sat = await startProxy(fast.url, b.keys, b.tls, b.overrides);
    b.watch(() => [fast.pid, ...sat.pids()]);
    const f: SaturationFigures = { direct: [], proxied: [], nginxCpu: [], stubCpuDirect: [], stubCpuProxied: [], workers: 0 };
    try {
        const satUrl = sat.ingress.url;
        await b.wrk(fast.url, 64, 1, CHAT_LUA, b.keyStrings);
        await b.wrk(satUrl, 64, 1, CHAT_LUA, b.keyStrings);
        for (let r = 0; r < b.rounds; r++) {
            if (b.timeLeft() < 2 * (b.roundSeconds + 0.5)) {
                b.problems.push(`time budget: skipped saturation round ${r + 1}`);
                break;
            }
            const s0 = await fast.sample();
            const d = await b.wrk(fast.url, 64, b.roundSeconds, CHAT_LUA, b.keyStrings);
            const s1 = await fast.sample();
            b.problems.push(...wrkProblems(`saturation direct round ${r + 1}`, d));
            const pids = sat.pids();
            f.workers = pids.length - 1;
            const c0 = cpuSeconds(pids);
            const p = await b.wrk(satUrl, 64, b.roundSeconds, CHAT_LUA, b.keyStrings);
            const c1 = cpuSeconds(pids);
            const s2 = await fast.sample();
            b.problems.push(...wrkProblems(`saturation proxied round ${r + 1}`, p));
            f.direct.push(d);
            f.proxied.push(p);
            f.nginxCpu.push(((c1 - c0) / p.requests) * 10000);
            f.stubCpuDirect.push(((s1.cpuSeconds - s0.cpuSeconds) / d.requests) * 10000);
            f.stubCpuProxied.push(((s2.cpuSeconds - s1.cpuSeconds) / p.requests) * 10000);
            b.log(
                `ingress: saturation round ${r + 1}: direct ${fmt(d.rps, 0)} req/s, proxied ${fmt(p.rps, 0)} req/s, nginx ${fmt(f.nginxCpu.at(-1)!, 3)} CPU-s/10k req`,
            );
        }
    } finally {
        await sat.stop();
    }
    return f;
}

async function saturationTwoKeys(b: Bench, fast: StubChild): Promise<SaturationFigures["twoKeys"]> {
    const two = await startProxy(fast.url, b.keys.slice(0, 2), b.tls, { ...b.overrides, rateLimitPerSecond: 1_000_000, rateLimitBurst: 1_000_000 });
    b.watch(() => [fast.pid, ...two.pids()]);
    try {
        const ks = b.keyStrings.slice(0, 2);
        await b.wrk(two.ingress.url, 64, 1, CHAT_LUA, ks);
        const pids = two.pids();
        const c0 = cpuSeconds(pids);
        const p = await b.wrk(two.ingress.url, 64, b.roundSeconds, CHAT_LUA, ks);
        const c1 = cpuSeconds(pids);
        b.problems.push(...wrkProblems("saturation diagnostic (2 keys)", p));
        const twoKeys = { rps: p.rps, cpu: ((c1 - c0) / p.requests) * 10000, p50: us2ms(p.p50Us), p99: us2ms(p.p99Us), foreign: p.foreignCores };
        b.log(`ingress: saturation diagnostic, 2 keys: ${fmt(p.rps, 0)} req/s, nginx ${fmt(twoKeys.cpu, 3)} CPU-s/10k req`);
        return twoKeys;
    } finally {
        await two.stop();
    }
}

function saturationSection(b: Bench, f: SaturationFigures): Section {
    const md: string[] = [];
    const nKeys = b.keys.length;
    md.push("## 2. Ingress saturation, instant upstream", "");
    md.push(
        `What: the stub answers at once; wrk at 64 connections (\`-t 2 -d ${b.roundSeconds}s\`), ${b.rounds} rounds, direct (HTTP) and through the proxy (HTTPS, deployed settings, load rotated over ${nKeys} keys) alternating. ` +
            `Proxy CPU = utime + stime of the nginx master and its ${f.workers} worker(s) from /proc/<pid>/stat before and after each proxied round (clock ticks / \`getconf CLK_TCK\`), per 10,000 requests.`,
        "",
        "**On this 2-core machine wrk (2 threads), the stub (node, 1 thread) and nginx (2 workers) share the same 2 cores: the figures are what the proxy does while competing for CPU, not the proxy alone.**",
        "",
    );
    if (f.proxied.length === 0) {
        md.push("(skipped: time budget)", "");
        return { markdown: md, checks: [] };
    }
    const dr = rpsOf(f.direct);
    const pr = rpsOf(f.proxied);
    const two = f.twoKeys;
    md.push(
        table(
            ["path", "req/s", "p50 ms", "p99 ms", "nginx CPU-s per 10k req", "stub CPU-s per 10k req", "other load, cores (max)"],
            [
                [
                    "direct (HTTP)",
                    fmt(dr, 0),
                    fmt(mean(f.direct.map((r) => us2ms(r.p50Us)))),
                    fmt(mean(f.direct.map((r) => us2ms(r.p99Us)))),
                    "-",
                    fmt(mean(f.stubCpuDirect), 3),
                    fmt(Math.max(...f.direct.map((r) => r.foreignCores))),
                ],
                [
                    "proxied (HTTPS)",
                    fmt(pr, 0),
                    fmt(mean(f.proxied.map((r) => us2ms(r.p50Us)))),
                    fmt(mean(f.proxied.map((r) => us2ms(r.p99Us)))),
                    fmt(mean(f.nginxCpu), 3),
                    fmt(mean(f.stubCpuProxied), 3),
                    fmt(Math.max(...f.proxied.map((r) => r.foreignCores))),
                ],
                ...(two
                    ? [
                          [
                              "diagnostic: proxied, 2 keys, rate limit lifted (1 round)",
                              fmt(two.rps, 0),
                              fmt(two.p50),
                              fmt(two.p99),
                              fmt(two.cpu, 3),
                              "-",
                              fmt(two.foreign),
                          ],
                      ]
                    : []),
            ],
        ),
        "",
        `Ratio proxied/direct: ${fmt(pr / dr, 3)}. nginx CPU per request: ${fmt((mean(f.nginxCpu) / 10000) * 1e6, 1)} µs (TLS, both HTTP legs, the scan of the ${nKeys}-entry key map, limit_req, the access-log write)` +
            (two ? `; with 2 keys (the deployment's count) ${fmt((two.cpu / 10000) * 1e6, 1)} µs.` : "."),
        "",
    );
    return { markdown: md, checks: [] };
}

// ---------------------------------------------------------------------------------------------------------------

/**
 * Figures 1 and 2 with their parts: the realistic upstream (overhead rounds, wrong key, time to first SSE chunk,
 * then the diagnostic variants), then the instant upstream (saturation). Throws when the deployed settings cannot be
 * loaded. The report lists the figures in a fixed order, then the problems and the targets.
 */
export async function runIngressBench(o: IngressBenchOptions): Promise<IngressBenchResult> {
    const deployed = await deployedOverrides();
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "bench-ingress-"));
    const unregisterTmp = onCleanup(async () => fs.rmSync(tmp, { recursive: true, force: true }));
    try {
        const b = prepareBench(o, selfSignedCert(tmp), deployed);

        b.log(`ingress: realistic stub (${REALISTIC.delayMs} ms per answer), proxy with TLS, ${b.keys.length} keys`);
        const stub = await startStub(REALISTIC);
        let overhead: Map<number, RoundPair>;
        let wrongKey: WrongKeyFigures;
        let firstChunk: FirstChunkFigures;
        let diagnostics: Diagnostics = { rows: [], byLabel: new Map(), seconds: Math.min(4, b.roundSeconds) };
        let metricsPath: MetricsPathFigures = { off: [], on: [], counted: 0, sent: 0, skipped: "not reached" };
        try {
            const proxy = await startProxy(stub.url, b.keys, b.tls, b.overrides);
            const proxiedUrl = proxy.ingress.url; // https://127.0.0.1:<port>
            b.log(`ingress: stub ${stub.url}, proxy ${proxiedUrl} (pid ${proxy.ingress.pid}, workers ${childPids(proxy.ingress.pid).join(",")})`);
            b.watch(() => [stub.pid, ...proxy.pids()]);
            try {
                overhead = await measureOverhead(b, stub, proxiedUrl);
                wrongKey = await measureWrongKey(b, stub, proxiedUrl);
                firstChunk = await measureFirstChunk(b, stub, proxiedUrl);
            } finally {
                await proxy.stop();
            }
            metricsPath = await measureMetricsPath(b, stub, tmp);
            if (o.diagnose !== false) diagnostics = await measureDiagnostics(b, stub);
        } finally {
            await stub.stop();
        }
        const saturation = await measureSaturation(b, o.diagnose !== false);

        const sections = [
            overheadSection(b, overhead, diagnostics.byLabel),
            firstChunkSection(firstChunk),
            wrongKeySection(b, wrongKey),
            metricsPathSection(b, metricsPath),
            diagnosticsSection(diagnostics),
            saturationSection(b, saturation),
        ];
        if (b.maxForeign() > 0.2)
            b.problems.push(
                `other processes kept up to ${fmt(b.maxForeign())} cores busy during some rounds (see the "other load" columns): those rounds are disturbed`,
            );
        const checks = sections.flatMap((s) => s.checks);
        const md = sections.flatMap((s) => s.markdown);
        if (b.problems.length > 0) md.push("### Problems during the ingress runs", "", ...b.problems.map((p) => `- ${p}`), "");
        md.push("### Targets (ingress)", "", ...checks.map(checkLine), "");
        return { markdown: md.join("\n"), checks };
    } finally {
        await fs.promises.rm(tmp, { recursive: true, force: true });
        unregisterTmp();
    }
}
