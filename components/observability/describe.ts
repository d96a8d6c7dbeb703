/**
 * What a run shows and when it alerts, as data: the PrometheusRule groups and the Grafana run
 * dashboard for one stack, from its observability settings and its plan's capacity numbers.
 * Pure (no Pulumi): the component (observability.ts), `npm run plan`, promtool and the real
 * Prometheus in the tests all read the same output.
 *
 * Upstream series, by the source they were read from:
 * - vLLM 0.29 (vllm/v1/metrics/loggers.py; prometheus_client adds `_total` to counters), labels
 *   model_name and engine: vllm:num_requests_running, vllm:num_requests_waiting,
 *   vllm:kv_cache_usage_perc, vllm:prompt_tokens_total, vllm:generation_tokens_total,
 *   vllm:num_preemptions_total, vllm:prefix_cache_queries_total, vllm:prefix_cache_hits_total,
 *   vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds (histograms).
 * - agent-sandbox v0.5.6 controller (internal/metrics/metrics.go, sandbox_collector.go):
 *   agent_sandboxes{ready_condition, owned_by, sandbox_template, launch_type, ...} (a count per
 *   group), agent_sandbox_claim_startup_latency_ms{launch_type, sandbox_template} (histogram, ms).
 *   Its own `namespace` label becomes exported_namespace when the controller's pod is scraped, so
 *   the stack's sandboxes are selected by their template's name.
 * - nginx-prometheus-exporter 0.11 (collector/nginx.go): nginx_up, nginx_connections_active,
 *   nginx_connections_accepted, nginx_connections_handled, nginx_http_requests_total.
 * - the project's own (components/shared/metrics.ts SERIES).
 */
import { SERIES } from "../shared/metrics";
import { STACK_SERIES_LABEL } from "../shared/metrics-pods";
import type { PlatformConfig } from "../config/resolve";

/** The observability settings (the config's `observability` key, defaulted). */
export type ObservabilitySettings = PlatformConfig["observability"];

/** One deployed env's capacity as the plan states it. */
export interface EnvPlan {
    /** The env's name (label env of its series). */
    readonly name: string;
    readonly replicas: number;
    readonly sessionsPerReplica: number;
    /** replicas x sessionsPerReplica. */
    readonly sessions: number;
    /** Sessions training opens at once. */
    readonly demand: number;
}

/** What the stack runs, narrowed to what its signals need. */
export interface ObservedStack {
    /**
     * The stack's prefix: titles, object names, and the STACK_SERIES_LABEL every scraped series of the
     * stack carries (the monitors copy it from the pods' STACK_POD_LABEL; Docker: set on each target).
     */
    readonly stack: string;
    /** The namespaces the stack's pods run in (Docker: the same names, set as the `namespace` label of each target). */
    readonly namespaces: { readonly training: string; readonly ingress: string; readonly envs: string };
    /** Deployed envs (external ones serve no series of ours). */
    readonly envs: readonly EnvPlan[];
    /** vLLM serves /metrics (false in colocate, where vLLM runs inside the trainer and serves no HTTP). */
    readonly vllm: boolean;
    /** The supervisor's role runner serves the agentrl_trainer_* series. */
    readonly trainer: boolean;
    /** The authenticated ingress runs (black box). */
    readonly ingress: boolean;
    /** An agent-sandbox warm pool (black box on Kubernetes): its template's name and its size. */
    readonly sandboxPool?: { readonly template: string; readonly poolSize: number };
}

export interface AlertRule {
    readonly alert: string;
    readonly expr: string;
    readonly for?: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations: { readonly summary: string; readonly description: string };
}

export interface RuleGroup {
    readonly name: string;
    readonly rules: readonly AlertRule[];
}

/** Seconds of a Prometheus duration such as 15m (the schema admits one number and one unit). */
export function durationSeconds(d: string): number {
    const m = /^([1-9][0-9]*)(s|m|h)$/.exec(d);
    if (!m) throw new Error(`not a Prometheus duration: ${d}`);
    return Number(m[1]) * { s: 1, m: 60, h: 3600 }[m[2] as "s" | "m" | "h"];
}

function sel(matchers: Readonly<Record<string, string>>): string {
    return `{${Object.entries(matchers)
        .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
        .join(",")}}`;
}

/**
 * The matchers of one part's series of this stack: its namespace and the stack's label, since a
 * team's run stacks share the team's namespaces (README "Teams") and `namespace` alone would sum them.
 */
function ownSeries(s: ObservedStack, part: keyof ObservedStack["namespaces"], extra: Readonly<Record<string, string>> = {}): string {
    return sel({ namespace: s.namespaces[part], [STACK_SERIES_LABEL]: s.stack, ...extra });
}

/** The label matchers selecting each part's series of this stack. */
export function selectors(s: ObservedStack) {
    return {
        training: ownSeries(s, "training"),
        ingress: ownSeries(s, "ingress"),
        envs: ownSeries(s, "envs"),
        warmPool: s.sandboxPool ? sel({ sandbox_template: s.sandboxPool.template, owned_by: "SandboxWarmPool", ready_condition: "true" }) : "",
        claims: s.sandboxPool ? sel({ sandbox_template: s.sandboxPool.template }) : "",
    };
}

/** The alert rules of one stack, every threshold from `settings.alerts`; only for the parts it runs. */
export function alertRules(settings: ObservabilitySettings, s: ObservedStack): RuleGroup[] {
    const a = settings.alerts;
    const q = selectors(s);
    const labels = { severity: "warning", stack: s.stack };
    const groups: RuleGroup[] = [];
    if (s.envs.length > 0) {
        groups.push({
            name: `agentrl-${s.stack}-envs`,
            rules: [
                {
                    alert: "AgentRLEnvSessionsHigh",
                    expr: `sum by (env) (${SERIES.envSessionsInUse}${q.envs}) > ${a.envSessionsFraction} * sum by (env) (${SERIES.envSessionsCapacity}${q.envs})`,
                    for: a.for,
                    labels,
                    annotations: {
                        summary: "env {{ $labels.env }}: sessions in use above " + `${a.envSessionsFraction * 100}% of capacity`,
                        description:
                            "The next burst may meet CAPACITY_REACHED. Raise envs.{{ $labels.env }}.replicas or sessionsPerReplica between runs, or lower the batch.",
                    },
                },
                {
                    alert: "AgentRLEnvCapacityReached",
                    expr: `sum by (env) (increase(${SERIES.envCapacityReached}${q.envs}[${a.for}])) > 0`,
                    labels,
                    annotations: {
                        summary: "env {{ $labels.env }}: the router refused sessions with CAPACITY_REACHED",
                        description: `Every replica was full within the last ${a.for}: those rollouts failed. Raise envs.{{ $labels.env }}.replicas (or sessionsPerReplica) so capacity covers the demand plus headroom.`,
                    },
                },
            ],
        });
    }
    if (s.ingress) {
        const rate = (status: string) => `sum by (key) (rate(${SERIES.ingressRequests}${ownSeries(s, "ingress", { status })}[5m]))`;
        groups.push({
            name: `agentrl-${s.stack}-ingress`,
            rules: [
                {
                    alert: "AgentRLIngressUnauthorized",
                    expr: `${rate("401")} > ${a.ingressUnauthorizedPerSecond}`,
                    for: a.for,
                    labels,
                    annotations: {
                        summary: "ingress: 401 responses above " + `${a.ingressUnauthorizedPerSecond}/s`,
                        description:
                            "Clients send no key or a wrong one (key {{ $labels.key }}): a sandbox pool with a rotated or revoked key. Check the pool's key Secret against the ingress's keys.",
                    },
                },
                {
                    alert: "AgentRLIngressRateLimited",
                    expr: `${rate("429")} > ${a.ingressRateLimitedPerSecond}`,
                    for: a.for,
                    labels,
                    annotations: {
                        summary: "ingress: key {{ $labels.key }} rate-limited above " + `${a.ingressRateLimitedPerSecond}/s`,
                        description: "Rollouts are refused with 429: raise ingress.rateLimitPerSecond / rateLimitBurst for the run's concurrency, or lower it.",
                    },
                },
            ],
        });
    }
    if (s.vllm) {
        const waiting = `vllm:num_requests_waiting${q.training}`;
        groups.push({
            name: `agentrl-${s.stack}-vllm`,
            rules: [
                {
                    alert: "AgentRLVllmQueueGrowing",
                    expr: `min_over_time(${waiting}[${a.vllmQueueGrowingFor}]) > 0 and deriv(${waiting}[${a.vllmQueueGrowingFor}]) > 0`,
                    labels,
                    annotations: {
                        summary: `vLLM: requests waiting and growing for ${a.vllmQueueGrowingFor}`,
                        description: "Generation is the bottleneck. Lower the rollout concurrency or give vLLM more GPUs (vllm.tensorParallelSize).",
                    },
                },
                {
                    alert: "AgentRLVllmKvCacheFull",
                    expr: `vllm:kv_cache_usage_perc${q.training} > ${a.vllmKvCacheUsage}`,
                    for: a.for,
                    labels,
                    annotations: {
                        summary: `vLLM: KV cache above ${a.vllmKvCacheUsage * 100}%`,
                        description:
                            "Requests will be preempted (vllm:num_preemptions_total): raise vllm.gpuMemoryUtilization, lower max model length or concurrency.",
                    },
                },
            ],
        });
    }
    if (s.trainer) {
        groups.push({
            name: `agentrl-${s.stack}-trainer`,
            rules: [
                {
                    alert: "AgentRLTrainerStalled",
                    expr: `time() - ${SERIES.trainerLastProgress}${q.training} > ${durationSeconds(a.trainerStalledFor)} and on (namespace, pod) ${SERIES.trainerUp}${q.training} == 1`,
                    labels,
                    annotations: {
                        summary: `trainer: no optimizer step for ${a.trainerStalledFor}`,
                        description:
                            "The trainer runs but its progress bar has not moved (before the first step: since it started). Check the [trainer] lines of the training pod's log: a hung rollout, a stuck weight sync, an env or sandbox that never answers.",
                    },
                },
            ],
        });
    }
    if (s.sandboxPool) {
        groups.push({
            name: `agentrl-${s.stack}-sandboxes`,
            rules: [
                {
                    alert: "AgentRLWarmPoolEmpty",
                    expr: `(sum(agent_sandboxes${q.warmPool}) or vector(0)) < 1`,
                    for: a.for,
                    labels,
                    annotations: {
                        summary: `sandboxes: the warm pool (${s.sandboxPool.poolSize} planned) has no ready sandbox`,
                        description:
                            "Every claim now waits for a cold start (or the controller is not scraped). Raise sandboxes.poolSize, or look for pods that do not start (image pull, quota, node capacity).",
                    },
                },
                {
                    alert: "AgentRLSandboxClaimSlow",
                    expr: `histogram_quantile(0.9, sum by (le) (rate(agent_sandbox_claim_startup_latency_ms_bucket${q.claims}[10m]))) / 1000 > ${a.sandboxClaimLatencySeconds}`,
                    for: a.for,
                    labels,
                    annotations: {
                        summary: `sandboxes: 90% of claims take more than ${a.sandboxClaimLatencySeconds} s to be ready`,
                        description:
                            "Claims miss the warm pool (cold starts) or pods start slowly: raise sandboxes.poolSize, pre-pull the image, check the controller's log.",
                    },
                },
            ],
        });
    }
    return groups;
}

/** One dashboard query: its PromQL and its legend. */
export interface PanelQuery {
    readonly expr: string;
    readonly legend: string;
    /** The plan's number drawn beside the live value (a constant `vector(n)`), for the tests to tell apart. */
    readonly plan?: boolean;
}

export interface Panel {
    readonly title: string;
    readonly description: string;
    readonly unit: string;
    readonly queries: readonly PanelQuery[];
    /** The part of the stack the panel shows (which test target serves it). */
    readonly part: "envs" | "ingress" | "vllm" | "trainer" | "sandboxes";
}

/**
 * Why no panel shows sessions reaped idle (OpenEnv 0.10 http_server.py `_reap_idle_sessions`, on only where
 * the env's app sets ConcurrencyConfig.session_timeout): the reaper destroys the session and frees its slot
 * but sends no close frame, leaves the WebSocket and its connection open, and logs nothing, and no route
 * serves the server's session count. Proven against the real server in test/observability-programs.test.ts.
 */
export const REAPED_NOT_VISIBLE =
    "Not visible: sessions the env server reaped idle (OpenEnv's idle reaper, where the env's app turns it on, frees the slot but keeps the WebSocket open and logs nothing): they count here as in use until their connection closes.";

/** The run dashboard's panels: the plan's capacity numbers beside their live values, then each part's health. */
export function dashboardPanels(settings: ObservabilitySettings, s: ObservedStack): Panel[] {
    const a = settings.alerts;
    const q = selectors(s);
    const panels: Panel[] = [];
    for (const e of s.envs) {
        const env = ownSeries(s, "envs", { env: e.name });
        panels.push(
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
        );
    }
    if (s.envs.length > 0)
        panels.push({
            title: "env sessions refused with CAPACITY_REACHED (per minute)",
            description: "Every refusal is a failed rollout. Any at all: raise the env's replicas.",
            unit: "short",
            part: "envs",
            queries: [{ expr: `sum by (env) (rate(${SERIES.envCapacityReached}${q.envs}[5m])) * 60`, legend: "{{env}}" }],
        });
    if (s.sandboxPool)
        panels.push(
            {
                title: `sandboxes: warm pool ready (plan: ${s.sandboxPool.poolSize})`,
                description: "Ready sandboxes waiting in the warm pool against the planned size; 0 means every claim cold-starts.",
                unit: "short",
                part: "sandboxes",
                queries: [
                    { expr: `sum(agent_sandboxes${q.warmPool}) or vector(0)`, legend: "ready (live)" },
                    { expr: `vector(${s.sandboxPool.poolSize})`, legend: "pool size (plan)", plan: true },
                ],
            },
            {
                title: `sandboxes: claim-to-ready latency p50 / p90 (budget ${a.sandboxClaimLatencySeconds} s)`,
                description: "From SandboxClaim creation to Ready, by launch type (warm from the pool, cold otherwise).",
                unit: "s",
                part: "sandboxes",
                queries: [
                    {
                        expr: `histogram_quantile(0.5, sum by (le, launch_type) (rate(agent_sandbox_claim_startup_latency_ms_bucket${q.claims}[10m]))) / 1000`,
                        legend: "p50 {{launch_type}}",
                    },
                    {
                        expr: `histogram_quantile(0.9, sum by (le, launch_type) (rate(agent_sandbox_claim_startup_latency_ms_bucket${q.claims}[10m]))) / 1000`,
                        legend: "p90 {{launch_type}}",
                    },
                ],
            },
        );
    if (s.vllm) {
        const t = q.training;
        panels.push(
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
        );
    }
    if (s.ingress) {
        const i = q.ingress;
        panels.push(
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
        );
    }
    if (s.trainer) {
        const t = q.training;
        panels.push({
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
        });
    }
    return panels;
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
