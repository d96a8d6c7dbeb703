/**
 * When a run alerts, as data: the PrometheusRule groups for one stack, from its observability
 * settings and its plan's capacity numbers (the run dashboard beside them is dashboard.ts).
 * Pure (no Pulumi): the component (observability.ts), `npm run plan`, promtool and the real
 * Prometheus in the tests all read the same output.
 *
 * Upstream series, by the source they were read from:
 * - vLLM 0.29 (vllm/v1/metrics/loggers.py; prometheus_client adds `_total` to counters), labels
 *   model_name and engine: vllm:num_requests_running, vllm:num_requests_waiting,
 *   vllm:kv_cache_usage_perc, vllm:prompt_tokens_total, vllm:generation_tokens_total,
 *   vllm:num_preemptions_total, vllm:prefix_cache_queries_total, vllm:prefix_cache_hits_total,
 *   vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds (histograms).
 * - agent-sandbox v1.0.1 controller, as v0.5.6 (internal/metrics/metrics.go, sandbox_collector.go):
 *   agent_sandboxes{ready_condition, owned_by, sandbox_template, launch_type, ...} (a count per
 *   group, listed at each scrape; a warm pool's unclaimed members are owned_by="SandboxWarmPool", and
 *   the controller exports no other pool gauge: no replicas or ready-replicas series),
 *   agent_sandbox_claim_controller_startup_latency_ms{launch_type, sandbox_template} (histogram,
 *   ms, from the controller's first sight of a claim, its agents.x-k8s.io/controller-first-observed-at
 *   annotation, to Ready; every claim). Not agent_sandbox_claim_startup_latency_ms: it is recorded only
 *   for claims a mutating webhook stamped (agents.x-k8s.io/webhook-first-observed-at), which no
 *   release manifest installs (extensions/controllers/sandboxclaim_controller.go recordClaimStartupLatency).
 *   Its own `namespace` label becomes exported_namespace when the controller's pod is scraped, so
 *   the stack's sandboxes are selected by their template's name.
 * - nginx-prometheus-exporter 0.11 (collector/nginx.go): nginx_up, nginx_connections_active,
 *   nginx_connections_accepted, nginx_connections_handled, nginx_http_requests_total.
 * - the project's own (components/shared/metrics.ts SERIES).
 */
import { SERIES } from "../shared/metrics";
import { WARM_POOL_WANTED_LABEL } from "../shared/metrics";
import type { AlertRule, ObservabilitySettings, ObservedStack, RecordingRule, RuleGroup } from "./model";
import { ownSeries, poolTemplates, selectors, templateSeries, WARM_READY } from "./selectors";

type Alerts = ObservabilitySettings["alerts"];
type RuleLabels = AlertRule["labels"];

/** Seconds of a Prometheus duration such as 15m (the schema admits one number and one unit). */
export function durationSeconds(d: string): number {
    const m = /^([1-9][0-9]*)(s|m|h)$/.exec(d);
    if (!m) throw new Error(`not a Prometheus duration: ${d}`);
    return Number(m[1]) * { s: 1, m: 60, h: 3600 }[m[2] as "s" | "m" | "h"];
}

/** The alert rules of one stack, every threshold from `settings.alerts`; only for the parts it runs. */
export function alertRules(settings: ObservabilitySettings, s: ObservedStack): RuleGroup[] {
    const a = settings.alerts;
    const labels = { severity: "warning", stack: s.stack };
    const groups: RuleGroup[] = [];
    if (s.envs.length > 0) groups.push(envRules(a, s, labels));
    if (s.ingress) groups.push(ingressRules(a, s, labels));
    if (s.vllm) groups.push(vllmRules(a, s, labels));
    if (s.trainer) groups.push(trainerRules(a, s, labels));
    if (s.sandboxPool) groups.push(sandboxRules(a, s, s.sandboxPool, labels));
    if (s.sandboxPool?.autoscale) groups.push(warmPoolWantedRules(s, s.sandboxPool, s.sandboxPool.autoscale));
    return groups;
}

/** The env group: sessions near capacity, sessions refused. */
function envRules(a: Alerts, s: ObservedStack, labels: RuleLabels): RuleGroup {
    const q = selectors(s);
    return {
        name: `agentrl-${s.stack}-envs`,
        rules: [
            {
                alert: "AgentRLEnvSessionsHigh",
                expr: `sum by (env) (${SERIES.envSessionsInUse}${q.envs}) > ${a.envSessionsFraction} * sum by (env) (${SERIES.envSessionsCapacity}${q.envs})`,
                for: a.for,
                labels,
                annotations: {
                    summary: `env {{ $labels.env }}: sessions in use above ${a.envSessionsFraction * 100}% of capacity`,
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
    };
}

/** The ingress group: 401s and 429s per key. */
function ingressRules(a: Alerts, s: ObservedStack, labels: RuleLabels): RuleGroup {
    const rate = (status: string) => `sum by (key) (rate(${SERIES.ingressRequests}${ownSeries(s, "ingress", { status })}[5m]))`;
    return {
        name: `agentrl-${s.stack}-ingress`,
        rules: [
            {
                alert: "AgentRLIngressUnauthorized",
                expr: `${rate("401")} > ${a.ingressUnauthorizedPerSecond}`,
                for: a.for,
                labels,
                annotations: {
                    summary: `ingress: 401 responses above ${a.ingressUnauthorizedPerSecond}/s`,
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
                    summary: `ingress: key {{ $labels.key }} rate-limited above ${a.ingressRateLimitedPerSecond}/s`,
                    description: "Rollouts are refused with 429: raise ingress.rateLimitPerSecond / rateLimitBurst for the run's concurrency, or lower it.",
                },
            },
        ],
    };
}

/** The vLLM group: a growing queue, a full KV cache. */
function vllmRules(a: Alerts, s: ObservedStack, labels: RuleLabels): RuleGroup {
    const q = selectors(s);
    const waiting = `vllm:num_requests_waiting${q.training}`;
    return {
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
    };
}

/** The trainer group: no optimizer step for too long. */
function trainerRules(a: Alerts, s: ObservedStack, labels: RuleLabels): RuleGroup {
    const q = selectors(s);
    return {
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
    };
}

/** The sandbox group: a pool below the run's burst (before claims go cold), an empty warm pool, slow claims. */
function sandboxRules(a: Alerts, s: ObservedStack, pool: NonNullable<ObservedStack["sandboxPool"]>, labels: RuleLabels): RuleGroup {
    const q = selectors(s);
    const templates = poolTemplates(pool);
    // The Harbor path: the rules per task image's pool (each sized for the whole burst), since one drained pool
    // cold-starts its tasks while the others are full.
    const readyOf = (template: string | undefined) =>
        `(sum(agent_sandboxes${template === undefined ? q.warmPool : templateSeries([template], WARM_READY)}) or vector(0))`;
    const named = (template: string | undefined) => (template === undefined ? "the warm pool" : `the warm pool of template ${template}`);
    const belowBurst = (template: string | undefined): AlertRule => ({
        // Every burst takes up to `burst` sandboxes at once and the pool refills in seconds; one that stays below
        // the burst for longer than a refill makes the next burst's claims beyond the ready ones wait on cold
        // starts (bench/results.md section 6: seconds each instead of milliseconds), while none has yet.
        alert: "AgentRLWarmPoolBelowBurst",
        expr: `${readyOf(template)} < ${pool.burst}`,
        for: a.warmPoolRefillFor,
        labels: template === undefined ? labels : { ...labels, sandbox_template: template },
        annotations: {
            summary: `sandboxes: ${named(template)} holds fewer ready sandboxes than the run's burst of ${pool.burst} (pool ${pool.poolSize} planned)`,
            description: `It has not refilled within ${a.warmPoolRefillFor}: the next burst of claims waits on cold starts for those beyond the ready ones. Look for pods that do not start (image pull, quota, node capacity) or claims that are not released; raise sandboxes.poolSize or sandboxes.headroom if claims come faster than the refill.`,
        },
    });
    const emptyPool = (template: string | undefined): AlertRule => ({
        alert: "AgentRLWarmPoolEmpty",
        expr: `${readyOf(template)} < 1`,
        for: a.for,
        labels: template === undefined ? labels : { ...labels, sandbox_template: template },
        annotations: {
            summary: `sandboxes: ${named(template)} (${pool.poolSize} planned) has no ready sandbox`,
            description:
                "Every claim now waits for a cold start (or the controller is not scraped). Raise sandboxes.poolSize, or look for pods that do not start (image pull, quota, node capacity).",
        },
    });
    const each: ReadonlyArray<string | undefined> = templates.length === 1 ? [undefined] : templates;
    return {
        name: `agentrl-${s.stack}-sandboxes`,
        rules: [
            ...each.map(belowBurst),
            ...each.map(emptyPool),
            {
                alert: "AgentRLSandboxClaimSlow",
                expr: `histogram_quantile(0.9, sum by (le) (rate(agent_sandbox_claim_controller_startup_latency_ms_bucket${q.claims}[10m]))) / 1000 > ${a.sandboxClaimLatencySeconds}`,
                for: a.for,
                labels,
                annotations: {
                    summary: `sandboxes: 90% of claims take more than ${a.sandboxClaimLatencySeconds} s to be ready`,
                    description:
                        "Claims miss the warm pool (cold starts) or pods start slowly: raise sandboxes.poolSize, pre-pull the image, check the controller's log.",
                },
            },
        ],
    };
}

/**
 * The autoscaled pools' wanted size, one recording rule per pool (its template's name as the label the HPA selects):
 * the sandboxes claimed now (the next burst: each claims again when its rollout ends; agent_sandboxes owned_by
 * SandboxClaim) + the claims of the last 2 minutes per second x the refill time (the replacements on their way,
 * agent_sandbox_claim_creation_total, every claim whether warm or cold) + the spare. At the planned load it is the
 * planned pool (burst + claim rate x refill + headroom, config/pool-size.ts); more runs or teams claiming raise it.
 */
export function warmPoolWantedRule(template: string, autoscale: { readonly refillSeconds: number; readonly headroom: number }): RecordingRule {
    const t = templateSeries([template]);
    const claimed = templateSeries([template], { owned_by: "SandboxClaim" });
    return {
        record: SERIES.sandboxWarmPoolWanted,
        expr:
            `(sum(agent_sandboxes${claimed}) or vector(0))` +
            ` + (sum(rate(agent_sandbox_claim_creation_total${t}[2m])) or vector(0)) * ${autoscale.refillSeconds}` +
            ` + ${autoscale.headroom}`,
        labels: { [WARM_POOL_WANTED_LABEL]: template },
    };
}

function warmPoolWantedRules(
    s: ObservedStack,
    pool: NonNullable<ObservedStack["sandboxPool"]>,
    autoscale: NonNullable<NonNullable<ObservedStack["sandboxPool"]>["autoscale"]>,
): RuleGroup {
    return { name: `agentrl-${s.stack}-sandbox-autoscale`, rules: poolTemplates(pool).map((t) => warmPoolWantedRule(t, autoscale)) };
}
