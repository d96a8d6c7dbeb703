/**
 * A vLLM-shaped stand-in on 127.0.0.1 (no GPU here to run vLLM): `GET /metrics` in Prometheus text
 * format with vLLM 0.29's own series names and labels (vllm/v1/metrics/loggers.py: gauges
 * vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc; counters
 * vllm:prompt_tokens, vllm:generation_tokens, vllm:num_preemptions, vllm:prefix_cache_queries,
 * vllm:prefix_cache_hits, exported with prometheus_client's `_total`; histograms
 * vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds; labels model_name and engine),
 * and vLLM's other routes (/health, /update_weights, /pause, ...) answering 200 so a test can prove
 * a proxy never lets them through. Every request is recorded. The values are the test's to set.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";

/** The series values the stand-in serves; counters only ever grow (the test adds to them). */
export interface VllmStandInValues {
    running: number;
    waiting: number;
    kvCacheUsage: number;
    promptTokens: number;
    generationTokens: number;
    preemptions: number;
    prefixQueries: number;
    prefixHits: number;
    /** Observations of time to first token, seconds. */
    ttft: number[];
    /** Observations of inter-token latency, seconds. */
    itl: number[];
}

export interface VllmMetricsStandIn {
    readonly port: number;
    readonly address: string;
    /** Mutable: what the next scrape shows. */
    readonly values: VllmStandInValues;
    /** Every request as method and raw target. */
    readonly requests: Array<{ readonly method: string; readonly target: string }>;
    stop(): Promise<void>;
}

const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0];
const ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];

function histogram(name: string, help: string, labels: string, buckets: readonly number[], obs: readonly number[]): string[] {
    const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} histogram`];
    for (const le of buckets) lines.push(`${name}_bucket{${labels},le="${le}"} ${obs.filter((o) => o <= le).length}`);
    lines.push(
        `${name}_bucket{${labels},le="+Inf"} ${obs.length}`,
        `${name}_count{${labels}} ${obs.length}`,
        `${name}_sum{${labels}} ${obs.reduce((a, b) => a + b, 0)}`,
    );
    return lines;
}

/** The exposition text for the values (model_name as vLLM serves it, engine "0"). */
export function renderVllmMetrics(v: VllmStandInValues, model = "Qwen/Qwen3-1.7B"): string {
    const labels = `engine="0",model_name="${model}"`;
    const gauge = (name: string, help: string, value: number) => [`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, `${name}{${labels}} ${value}`];
    const counter = (name: string, help: string, value: number) => [
        `# HELP ${name}_total ${help}`,
        `# TYPE ${name}_total counter`,
        `${name}_total{${labels}} ${value}`,
    ];
    return `${[
        ...gauge("vllm:num_requests_running", "Number of requests in model execution batches.", v.running),
        ...gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", v.waiting),
        ...gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", v.kvCacheUsage),
        ...counter("vllm:prompt_tokens", "Number of prefill tokens processed.", v.promptTokens),
        ...counter("vllm:generation_tokens", "Number of generation tokens processed.", v.generationTokens),
        ...counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", v.preemptions),
        ...counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", v.prefixQueries),
        ...counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", v.prefixHits),
        ...histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels, TTFT_BUCKETS, v.ttft),
        ...histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", labels, ITL_BUCKETS, v.itl),
    ].join("\n")}\n`;
}

/** Starts the stand-in on a random 127.0.0.1 port. */
export async function startVllmMetricsStandIn(): Promise<VllmMetricsStandIn> {
    const values: VllmStandInValues = {
        running: 2,
        waiting: 0,
        kvCacheUsage: 0.25,
        promptTokens: 1000,
        generationTokens: 4000,
        preemptions: 0,
        prefixQueries: 1000,
        prefixHits: 400,
        ttft: [0.05, 0.2],
        itl: [0.02, 0.03],
    };
    const requests: Array<{ method: string; target: string }> = [];
    const server = http.createServer((req, res) => {
        requests.push({ method: req.method ?? "", target: req.url ?? "" });
        req.resume();
        req.on("end", () => {
            const body = req.url === "/metrics" && req.method === "GET" ? renderVllmMetrics(values) : JSON.stringify({ standIn: "vllm", path: req.url });
            res.writeHead(200, { "content-type": req.url === "/metrics" ? "text/plain; version=0.0.4" : "application/json" });
            res.end(body);
        });
    });
    await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(0, "127.0.0.1", () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    return {
        port,
        address: `127.0.0.1:${port}`,
        values,
        requests,
        stop: () =>
            new Promise<void>((resolve) => {
                server.closeAllConnections();
                server.close(() => resolve());
            }),
    };
}
