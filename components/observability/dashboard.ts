/**
 * The Grafana run dashboard of one stack: the plan's capacity numbers beside their live values, then
 * each part's health. Pure (no Pulumi); the series it reads are listed in alerts.ts's header.
 */
import { SERIES } from "../shared/metrics";
import type { EnvPlan, ObservabilitySettings, ObservedStack, Panel } from "./model";
import { ownSeries, poolTemplates, selectors } from "./selectors";

type Alerts = ObservabilitySettings["alerts"];
type Selectors = ReturnType<typeof selectors>;

/**
 * Why no panel shows sessions reaped idle (OpenEnv 0.10 http_server.py `_reap_idle_sessions`, on only where
 * the env's app sets ConcurrencyConfig.session_timeout): the reaper destroys the session and frees its slot
 * but sends no close frame, leaves the WebSocket and its connection open, and logs nothing, and no route
 * serves the server's session count. Proven against the real server in test/observability/observability-programs.test.ts.
 */
export const REAPED_NOT_VISIBLE =
    "Not visible: sessions the env server reaped idle (OpenEnv's idle reaper, where the env's app turns it on, frees the slot but keeps the WebSocket open and logs nothing): they count here as in use until their connection closes.";

/** The run dashboard's panels: the plan's capacity numbers beside their live values, then each part's health. */
export function dashboardPanels(settings: ObservabilitySettings, s: ObservedStack): Panel[] {
    const a = settings.alerts;
    const q = selectors(s);
    const panels: Panel[] = [];
    for (const e of s.envs) panels.push(...envPanels(a, s, e));
    if (s.envs.length > 0) panels.push(envRefusedPanel(q));
    if (s.sandboxPool) panels.push(...sandboxPanels(a, q, s.sandboxPool));
    if (s.vllm) panels.push(...vllmPanels(a, q));
    if (s.ingress) panels.push(...ingressPanels(a, q));
    if (s.trainer) panels.push(trainerPanel(a, q));
    return panels;
}

/** One env's panels: its sessions against the planned and live capacity, then per replica. */
function envPanels(a: Alerts, s: ObservedStack, e: EnvPlan): Panel[] {
    const env = ownSeries(s, "envs", { env: e.name });
    return [
        {
            title: `env ${e.name}: sessions in use / capacity (plan: ${e.replicas} x ${e.sessionsPerReplica} = ${e.sessions}, demand ${e.demand})`,
            description: `Open sessions against the replicas' capacity. Plan: ${e.sessions} sessions for a demand of ${e.demand}; the alert fires above ${a.envSessionsFraction * 100}% of the live capacity. ${REAPED_NOT_VISIBLE}`,
            unit: "short",
            part: "envs",
            queries: [
                { expr: `sum(${SERIES.envSessionsInUse}${env})`, legend: "in use" },
                { expr: `sum(${SERIES.envSessionsCapacity}${env})`, legend: "capacity (live)" },
                { expr: `vector(${e.sessions})`, legend: "capacity (plan)", plan: true },
                { expr: `vector(${e.demand})`, legend: "demand (plan)", plan: true },
            ],
        },
        {
            title: `env ${e.name}: sessions per replica (plan: ${e.sessionsPerReplica} each)`,
            description: "Sessions on each replica: the router fills them least-connections first, so one full replica is normal; all full is not.",
            unit: "short",
            part: "envs",
            queries: [
                { expr: `${SERIES.envSessionsInUse}${env}`, legend: "{{replica}}" },
                { expr: `vector(${e.sessionsPerReplica})`, legend: "per replica (plan)", plan: true },
            ],
        },
    ];
}

/** Sessions every env refused with CAPACITY_REACHED. */
function envRefusedPanel(q: Selectors): Panel {
    return {
        title: "env sessions refused with CAPACITY_REACHED (per minute)",
        description: "Every refusal is a failed rollout. Any at all: raise the env's replicas.",
        unit: "short",
        part: "envs",
        queries: [{ expr: `sum by (env) (rate(${SERIES.envCapacityReached}${q.envs}[5m])) * 60`, legend: "{{env}}" }],
    };
}

/** The warm pool's ready sandboxes against its planned size, and the claims' latency. */
function sandboxPanels(a: Alerts, q: Selectors, pool: NonNullable<ObservedStack["sandboxPool"]>): Panel[] {
    const pools = poolTemplates(pool).length;
    return [
        pools === 1
            ? {
                  title: `sandboxes: warm pool ready (plan: ${pool.poolSize}, burst ${pool.burst})`,
                  description:
                      "Ready sandboxes waiting in the warm pool against the planned size and the run's burst; below the burst the next burst's extra claims cold-start, 0 means every claim does.",
                  unit: "short",
                  part: "sandboxes",
                  queries: [
                      { expr: `sum(agent_sandboxes${q.warmPool}) or vector(0)`, legend: "ready (live)" },
                      { expr: `vector(${pool.poolSize})`, legend: "pool size (plan)", plan: true },
                      { expr: `vector(${pool.burst})`, legend: "burst (plan)", plan: true },
                  ],
              }
            : {
                  title: `sandboxes: warm pools ready, one per task image (plan: ${pools} x ${pool.poolSize}, burst ${pool.burst})`,
                  description:
                      "Ready sandboxes waiting in each task image's warm pool against the planned size and the run's burst; below the burst that image's next burst cold-starts its extra claims, 0 means all of them.",
                  unit: "short",
                  part: "sandboxes",
                  queries: [
                      { expr: `sum by (sandbox_template) (agent_sandboxes${q.warmPool})`, legend: "{{sandbox_template}} ready (live)" },
                      { expr: `vector(${pool.poolSize})`, legend: "each pool's size (plan)", plan: true },
                      { expr: `vector(${pool.burst})`, legend: "burst (plan)", plan: true },
                  ],
              },
        {
            title: `sandboxes: claim-to-ready latency p50 / p90 (budget ${a.sandboxClaimLatencySeconds} s)`,
            description: "From SandboxClaim creation to Ready, by launch type (warm from the pool, cold otherwise).",
            unit: "s",
            part: "sandboxes",
            queries: [
                {
                    expr: `histogram_quantile(0.5, sum by (le, launch_type) (rate(agent_sandbox_claim_controller_startup_latency_ms_bucket${q.claims}[10m]))) / 1000`,
                    legend: "p50 {{launch_type}}",
                },
                {
                    expr: `histogram_quantile(0.9, sum by (le, launch_type) (rate(agent_sandbox_claim_controller_startup_latency_ms_bucket${q.claims}[10m]))) / 1000`,
                    legend: "p90 {{launch_type}}",
                },
            ],
        },
    ];
}

/** vLLM's queue, KV cache, latency and throughput. */
function vllmPanels(a: Alerts, q: Selectors): Panel[] {
    const t = q.training;
    return [
        {
            title: "vLLM: requests running / waiting",
            description: "Waiting that keeps growing means generation is the bottleneck.",
            unit: "short",
            part: "vllm",
            queries: [
                { expr: `sum(vllm:num_requests_running${t})`, legend: "running" },
                { expr: `sum(vllm:num_requests_waiting${t})`, legend: "waiting" },
            ],
        },
        {
            title: `vLLM: KV-cache usage (alert above ${a.vllmKvCacheUsage})`,
            description: "1 is a full cache; near it, requests are preempted.",
            unit: "percentunit",
            part: "vllm",
            queries: [
                { expr: `max(vllm:kv_cache_usage_perc${t})`, legend: "usage" },
                { expr: `vector(${a.vllmKvCacheUsage})`, legend: "alert threshold", plan: true },
            ],
        },
        {
            title: "vLLM: time to first token and inter-token latency, p90",
            description: "Latency seen by each rollout's requests.",
            unit: "s",
            part: "vllm",
            queries: [
                { expr: `histogram_quantile(0.9, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket${t}[5m])))`, legend: "TTFT p90" },
                { expr: `histogram_quantile(0.9, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket${t}[5m])))`, legend: "ITL p90" },
            ],
        },
        {
            title: "vLLM: tokens per second, preemptions, prefix-cache hit rate",
            description:
                "Prompt and generated tokens per second; preemptions per second (KV cache pressure); share of prompt tokens served from the prefix cache.",
            unit: "short",
            part: "vllm",
            queries: [
                { expr: `sum(rate(vllm:prompt_tokens_total${t}[5m]))`, legend: "prompt tokens/s" },
                { expr: `sum(rate(vllm:generation_tokens_total${t}[5m]))`, legend: "generated tokens/s" },
                { expr: `sum(rate(vllm:num_preemptions_total${t}[5m]))`, legend: "preemptions/s" },
                {
                    expr: `sum(rate(vllm:prefix_cache_hits_total${t}[5m])) / sum(rate(vllm:prefix_cache_queries_total${t}[5m]))`,
                    legend: "prefix-cache hit rate",
                },
            ],
        },
    ];
}

/** The ingress's responses by status and by key, and nginx's connections. */
function ingressPanels(a: Alerts, q: Selectors): Panel[] {
    const i = q.ingress;
    return [
        {
            title: "ingress: responses per second by status",
            description: `401: a wrong or missing key (alert above ${a.ingressUnauthorizedPerSecond}/s); 429: rate-limited (alert above ${a.ingressRateLimitedPerSecond}/s); 413: a body above ingress.maxBodySize; 5xx: vLLM down or slow.`,
            unit: "reqps",
            part: "ingress",
            queries: [{ expr: `sum by (status) (rate(${SERIES.ingressRequests}${i}[5m]))`, legend: "{{status}}" }],
        },
        {
            title: "ingress: responses per second and p90 time by key name",
            description: "Per sandbox pool key (its name, never the key).",
            unit: "s",
            part: "ingress",
            queries: [
                { expr: `sum by (key) (rate(${SERIES.ingressRequests}${i}[5m]))`, legend: "{{key}} req/s" },
                { expr: `histogram_quantile(0.9, sum by (le, key) (rate(${SERIES.ingressRequestSeconds}_bucket${i}[5m])))`, legend: "{{key}} p90" },
            ],
        },
        {
            title: "ingress: nginx connections (stub_status)",
            description: "Client connections open at the ingress and whether the exporter reads nginx (nginx_up).",
            unit: "short",
            part: "ingress",
            queries: [
                { expr: `sum(nginx_connections_active${i})`, legend: "active" },
                { expr: `min(nginx_up${i})`, legend: "nginx up" },
            ],
        },
    ];
}

/** The trainer's step and progress, from the supervisor's role runner. */
function trainerPanel(a: Alerts, q: Selectors): Panel {
    const t = q.training;
    return {
        title: `trainer: step, seconds since the last step (alert after ${a.trainerStalledFor}), up, vLLM healthy`,
        description:
            "From the supervisor's role runner: the step the Trainer's progress bar shows. Not visible: rewards and loss (trackio), where a stalled step hangs.",
        unit: "short",
        part: "trainer",
        queries: [
            { expr: `max(${SERIES.trainerStep}${t})`, legend: "step" },
            { expr: `time() - max(${SERIES.trainerLastProgress}${t})`, legend: "seconds since the last step" },
            { expr: `max(${SERIES.trainerUp}${t})`, legend: "up" },
            { expr: `max(${SERIES.trainerVllmHealthy}${t})`, legend: "vLLM healthy" },
        ],
    };
}

/** The Grafana dashboard JSON (schemaVersion 39) of the panels, for the dashboard sidecar or a file. */
export function grafanaDashboard(settings: ObservabilitySettings, s: ObservedStack): Record<string, unknown> {
    // Grafana's own variable syntax (the dashboard's `datasource` template variable), not a JS template.
    const datasource = { type: "prometheus", uid: ["$", "{datasource}"].join("") };
    const panels = dashboardPanels(settings, s).map((p, i) => ({
        id: i + 1,
        type: "timeseries",
        title: p.title,
        description: p.description,
        datasource,
        gridPos: { x: (i % 2) * 12, y: Math.floor(i / 2) * 8, w: 12, h: 8 },
        fieldConfig: { defaults: { unit: p.unit }, overrides: [] },
        options: { legend: { displayMode: "list", placement: "bottom" }, tooltip: { mode: "multi" } },
        targets: p.queries.map((qq, j) => ({
            refId: String.fromCharCode(65 + j),
            expr: qq.expr,
            legendFormat: qq.legend,
            datasource,
        })),
    }));
    return {
        title: `agent-rl run: ${s.stack}`,
        uid: `agentrl-${s.stack}`.slice(0, 40),
        tags: ["agent-rl-infra"],
        schemaVersion: 39,
        editable: false,
        refresh: settings.scrapeInterval,
        time: { from: "now-3h", to: "now" },
        templating: { list: [{ name: "datasource", type: "datasource", query: "prometheus", label: "Prometheus" }] },
        panels,
    };
}
