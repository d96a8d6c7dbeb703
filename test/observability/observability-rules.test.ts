/**
 * The alert rules and the run dashboard (components/observability/alerts.ts, dashboard.ts), checked by the
 * real promtool (Debian's prometheus package): `promtool check rules` on the generated groups, and
 * `promtool test rules` with one unit test per alert that fires on its condition and stays silent
 * otherwise, every threshold taken from the config's defaults.
 * Run: node --import tsx --test test/observability/observability-rules.test.ts
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import { stringify } from "yaml";
import {
    alertRules,
    dashboardPanels,
    durationSeconds,
    grafanaDashboard,
    type AlertRule,
    type ObservedStack,
    type RuleGroup,
} from "../../components/observability";
import { Platform, resolvePlatform } from "../../components/platform";
import { oneContainer } from "../../components/training";
import { observedStack } from "../../components/platform/observability";
import { runUnderMocks } from "../../scripts/lib/mockrun";
import { parseWithTestImages } from "../helpers/config";
import { defaultObservabilitySettings } from "../helpers/observability";
import { manifests } from "../helpers/manifests";
import { scaled } from "../helpers/waits";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-obs-rules-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));
const PROMTOOL = spawnSync("sh", ["-c", "command -v promtool"], { encoding: "utf8" }).stdout.trim() || undefined;

/** The defaults of the config's observability key, as a stack gets them. */
const settings = defaultObservabilitySettings();

const stack: ObservedStack = {
    stack: "obs",
    namespaces: { training: "obs-training", ingress: "obs-ingress", envs: "obs-envs" },
    envs: [{ name: "wordle", replicas: 5, sessionsPerReplica: 2, sessions: 10, demand: 8 }],
    vllm: true,
    trainer: true,
    ingress: true,
    // The recipe's --max-inflight 8 with one rollout worker, headroom 2 (components/config/pool-size.ts).
    sandboxPool: { template: "obs-sandbox", poolSize: 10, burst: 8 },
};

const allAlerts = (groups: readonly RuleGroup[]): AlertRule[] => groups.flatMap((g) => g.rules).filter((r): r is AlertRule => "alert" in r);

/** The annotations promtool expects: the rule's templates with $labels filled in. */
function expectedAnnotations(rule: AlertRule, labels: Record<string, string>): Record<string, string> {
    const fill = (t: string) => t.replace(/\{\{ \$labels\.([a-z_]+) \}\}/g, (_m, k: string) => labels[k] ?? "");
    return { summary: fill(rule.annotations.summary), description: fill(rule.annotations.description) };
}

interface Case {
    readonly alert: string;
    /** Series (promtool expanding notation) for the firing case and for the silent one. */
    readonly fires: Record<string, string>;
    readonly silent: Record<string, string>;
    readonly evalTime: string;
    /** The labels the fired alert carries besides severity and stack. */
    readonly labels: Record<string, string>;
}

const tr = 'namespace="obs-training"';
const vllmLabels = { namespace: "obs-training", model_name: "m", engine: "0" };
const vllm = (name: string) => `${name}{${tr},model_name="m",engine="0"}`;
const a = settings.alerts;
const buckets = (les: Record<string, string>) =>
    Object.fromEntries(
        Object.entries(les).map(([le, v]) => [
            `agent_sandbox_claim_controller_startup_latency_ms_bucket{sandbox_template="obs-sandbox",launch_type="cold",le="${le}"}`,
            v,
        ]),
    );

/** The unclaimed, Ready members of the stack's warm pool, labelled as the v1.0.1 controller's collector labels them (internal/metrics/sandbox_collector.go). */
const warmPoolReady =
    'agent_sandboxes{exported_namespace="obs-sandboxes",sandbox_template="obs-sandbox",owned_by="SandboxWarmPool",ready_condition="true",expired="false",launch_type="warm",created_by="controller"}';

const CASES: Case[] = [
    {
        alert: "AgentRLEnvSessionsHigh",
        // 10 of 10 is above 0.9 of capacity; 9 of 10 is not (the rule is strictly above).
        fires: {
            'agentrl_env_sessions_in_use{namespace="obs-envs",env="wordle",replica="r-0"}': "10x20",
            'agentrl_env_sessions_capacity{namespace="obs-envs",env="wordle",replica="r-0"}': "10x20",
        },
        silent: {
            'agentrl_env_sessions_in_use{namespace="obs-envs",env="wordle",replica="r-0"}': "9x20",
            'agentrl_env_sessions_capacity{namespace="obs-envs",env="wordle",replica="r-0"}': "10x20",
        },
        evalTime: "10m",
        labels: { env: "wordle" },
    },
    {
        alert: "AgentRLEnvCapacityReached",
        fires: { 'agentrl_env_capacity_reached_total{namespace="obs-envs",env="wordle"}': "0 0 0 1 1 1 1" },
        silent: { 'agentrl_env_capacity_reached_total{namespace="obs-envs",env="wordle"}': "0x10" },
        evalTime: "5m",
        labels: { env: "wordle" },
    },
    {
        alert: "AgentRLIngressUnauthorized",
        // 120 per minute = 2/s above the default 1/s; 30 per minute = 0.5/s below.
        fires: { 'agentrl_ingress_requests_total{namespace="obs-ingress",status="401",key="none"}': "0+120x30" },
        silent: {
            'agentrl_ingress_requests_total{namespace="obs-ingress",status="401",key="none"}': "0+30x30",
            'agentrl_ingress_requests_total{namespace="obs-ingress",status="200",key="pool-a"}': "0+600x30",
        },
        evalTime: "15m",
        labels: { key: "none" },
    },
    {
        alert: "AgentRLIngressRateLimited",
        fires: { 'agentrl_ingress_requests_total{namespace="obs-ingress",status="429",key="pool-a"}': "0+120x30" },
        silent: { 'agentrl_ingress_requests_total{namespace="obs-ingress",status="429",key="pool-a"}': "0+30x30" },
        evalTime: "15m",
        labels: { key: "pool-a" },
    },
    {
        alert: "AgentRLVllmQueueGrowing",
        fires: { [vllm("vllm:num_requests_waiting")]: "1+1x30" },
        silent: { [vllm("vllm:num_requests_waiting")]: "5x30" },
        evalTime: "20m",
        labels: vllmLabels,
    },
    {
        alert: "AgentRLVllmKvCacheFull",
        fires: { [vllm("vllm:kv_cache_usage_perc")]: "0.95x20" },
        silent: { [vllm("vllm:kv_cache_usage_perc")]: "0.85x20" },
        evalTime: "10m",
        labels: vllmLabels,
    },
    {
        alert: "AgentRLTrainerStalled",
        // The last step at t=0, evaluated at 20m (past the default 15m); silent: a step every minute.
        fires: { [`agentrl_trainer_last_progress_timestamp_seconds{${tr},pod="p"}`]: "0x30", [`agentrl_trainer_up{${tr},pod="p"}`]: "1x30" },
        silent: { [`agentrl_trainer_last_progress_timestamp_seconds{${tr},pod="p"}`]: "0+60x30", [`agentrl_trainer_up{${tr},pod="p"}`]: "1x30" },
        evalTime: "20m",
        labels: { namespace: "obs-training", pod: "p" },
    },
    {
        alert: "AgentRLWarmPoolBelowBurst",
        // One fewer ready than the burst (8) fires; exactly the burst is silent (the next burst is served warm).
        fires: { [warmPoolReady]: "7x20" },
        silent: { [warmPoolReady]: "8x20" },
        evalTime: "10m",
        labels: {},
    },
    {
        alert: "AgentRLWarmPoolEmpty",
        // The collector reports only groups that exist: an empty pool has no ready series at all, only not-ready ones.
        fires: { 'agent_sandboxes{sandbox_template="obs-sandbox",owned_by="SandboxWarmPool",ready_condition="false",launch_type="warm"}': "2x20" },
        silent: { 'agent_sandboxes{sandbox_template="obs-sandbox",owned_by="SandboxWarmPool",ready_condition="true",launch_type="warm"}': "3x20" },
        evalTime: "10m",
        labels: {},
    },
    {
        alert: "AgentRLSandboxClaimSlow",
        // Ten claims a minute taking 30-60 s (p90 ~57 s > 30 s); silent: all under 10 s.
        fires: buckets({ "10000": "0x30", "30000": "0x30", "60000": "0+10x30", "+Inf": "0+10x30" }),
        silent: buckets({ "10000": "0+10x30", "30000": "0+10x30", "60000": "0+10x30", "+Inf": "0+10x30" }),
        evalTime: "15m",
        labels: {},
    },
];

/**
 * A case's series as run stack `owner` serves them: the stack's label (which its PodMonitors copy from
 * the pods) on every series with a namespace, and its own SandboxTemplate's name on the controller's.
 */
function servedBy(owner: string, series: Record<string, string>): Record<string, string> {
    return Object.fromEntries(
        Object.entries(series).map(([k, v]) => [
            k.replace(/\{(?=[^}]*namespace=)/, `{agentrl_stack="${owner}",`).replace('sandbox_template="obs-sandbox"', `sandbox_template="${owner}-sandbox"`),
            v,
        ]),
    );
}
/** The labels a fired alert carries: those of its case, and the stack's label where the alert keeps the series' namespace. */
const firedLabels = (c: Case) => ({ severity: "warning", stack: "obs", ...c.labels, ...(c.labels.namespace !== undefined ? { agentrl_stack: "obs" } : {}) });

/** promtool's unit tests, run on the rule groups; each test's name says what it checks. */
function promtoolTest(groups: readonly RuleGroup[], tests: readonly Record<string, unknown>[], file: string): { status: number | null; out: string } {
    const rulesFile = path.join(tmp, `${file}.yaml`);
    fs.writeFileSync(rulesFile, stringify({ groups }));
    const testFile = path.join(tmp, `${file}.test.yaml`);
    fs.writeFileSync(testFile, stringify({ rule_files: [rulesFile], evaluation_interval: "1m", tests }));
    const run = spawnSync(PROMTOOL!, ["test", "rules", testFile], { encoding: "utf8", timeout: scaled(60_000) });
    return { status: run.status, out: run.stdout + run.stderr };
}

const seriesOf = (s: Record<string, string>) => Object.entries(s).map(([series, values]) => ({ series, values }));

describe("alert rules from the config", () => {
    const groups = alertRules(settings, stack);

    test("one rule per condition of the issue, for every part the stack runs; each threshold the config's", () => {
        assert.deepEqual(
            allAlerts(groups)
                .map((r) => r.alert)
                .sort(),
            CASES.map((c) => c.alert).sort(),
        );
        const expr = Object.fromEntries(allAlerts(groups).map((r) => [r.alert, r.expr]));
        assert.match(expr.AgentRLEnvSessionsHigh!, new RegExp(`> ${a.envSessionsFraction} \\* sum by \\(env\\)`));
        assert.match(expr.AgentRLVllmKvCacheFull!, new RegExp(`> ${a.vllmKvCacheUsage}$`));
        assert.match(expr.AgentRLTrainerStalled!, new RegExp(`> ${durationSeconds(a.trainerStalledFor)} and`));
        assert.match(expr.AgentRLSandboxClaimSlow!, new RegExp(`/ 1000 > ${a.sandboxClaimLatencySeconds}$`));
        assert.match(expr.AgentRLVllmQueueGrowing!, new RegExp(`\\[${a.vllmQueueGrowingFor}\\]`));
        assert.match(expr.AgentRLWarmPoolBelowBurst!, / < 8$/, "the run's burst, not the pool's size");
        const custom = alertRules(
            {
                ...settings,
                alerts: { ...a, envSessionsFraction: 0.5, vllmKvCacheUsage: 0.75, trainerStalledFor: "2h", sandboxClaimLatencySeconds: 7, for: "1m" },
            },
            stack,
        );
        const c = Object.fromEntries(allAlerts(custom).map((r) => [r.alert, r]));
        assert.match(c.AgentRLEnvSessionsHigh!.expr, /> 0\.5 \*/);
        assert.match(c.AgentRLVllmKvCacheFull!.expr, /> 0\.75$/);
        assert.match(c.AgentRLTrainerStalled!.expr, /> 7200 and/);
        assert.match(c.AgentRLSandboxClaimSlow!.expr, /> 7$/);
        assert.equal(c.AgentRLVllmKvCacheFull!.for, "1m");
        const other = Object.fromEntries(
            allAlerts(
                alertRules(
                    { ...settings, alerts: { ...a, warmPoolRefillFor: "3m" } },
                    { ...stack, sandboxPool: { template: "obs-sandbox", poolSize: 34, burst: 32 } },
                ),
            ).map((r) => [r.alert, r]),
        );
        assert.match(other.AgentRLWarmPoolBelowBurst!.expr, / < 32$/);
        assert.equal(other.AgentRLWarmPoolBelowBurst!.for, "3m");
    });

    test("colocate (no vLLM HTTP), no ingress, no pool, no env: no rule for what does not run", () => {
        const bare = alertRules(settings, { ...stack, vllm: false, ingress: false, sandboxPool: undefined, envs: [], trainer: false });
        assert.deepEqual(bare, []);
        const panels = dashboardPanels(settings, { ...stack, vllm: false, ingress: false, sandboxPool: undefined, envs: [], trainer: false });
        assert.deepEqual(panels, []);
    });

    test("no per-session or per-request label in any rule or panel", () => {
        const text = JSON.stringify([groups, grafanaDashboard(settings, stack)]);
        for (const bad of ["session_id", "episode", "request_id", "claim_name", "sandbox_name", "exported_pod"]) assert.ok(!text.includes(bad), bad);
    });

    test("the dashboard: the plan's capacity numbers beside their live values", () => {
        const d = grafanaDashboard(settings, stack) as { panels: Array<{ title: string; targets: Array<{ expr: string; legendFormat: string }> }> };
        const env = d.panels.find((p) => p.title.startsWith("env wordle: sessions in use"))!;
        assert.match(env.title, /plan: 5 x 2 = 10, demand 8/);
        assert.deepEqual(
            env.targets.map((t) => [t.legendFormat, t.expr]),
            [
                ["in use", 'sum(agentrl_env_sessions_in_use{namespace="obs-envs",agentrl_stack="obs",env="wordle"})'],
                ["capacity (live)", 'sum(agentrl_env_sessions_capacity{namespace="obs-envs",agentrl_stack="obs",env="wordle"})'],
                ["capacity (plan)", "vector(10)"],
                ["demand (plan)", "vector(8)"],
            ],
        );
        const pool = d.panels.find((p) => p.title.startsWith("sandboxes: warm pool ready"))!;
        assert.match(pool.title, /plan: 10, burst 8/);
        assert.ok(pool.targets.some((t) => t.expr === "vector(10)"));
        assert.ok(pool.targets.some((t) => t.expr === "vector(8)" && t.legendFormat === "burst (plan)"));
    });

    test("promtool check rules, then promtool test rules: each alert fires on its condition and stays silent otherwise", {
        skip: PROMTOOL ? false : "needs promtool (apt-get install -y prometheus)",
    }, () => {
        const rulesFile = path.join(tmp, "rules.yaml");
        fs.writeFileSync(rulesFile, stringify({ groups }));
        const check = spawnSync(PROMTOOL!, ["check", "rules", rulesFile], { encoding: "utf8", timeout: scaled(30_000) });
        assert.equal(check.status, 0, check.stdout + check.stderr);
        assert.match(check.stdout, new RegExp(`SUCCESS: ${allAlerts(groups).length} rules found`));
        const rule = Object.fromEntries(allAlerts(groups).map((r) => [r.alert, r]));
        const tests = CASES.flatMap((c) => {
            const fired = firedLabels(c);
            const series = (s: Record<string, string>) => seriesOf(servedBy("obs", s));
            return [
                {
                    name: `${c.alert} fires`,
                    interval: "1m",
                    input_series: series(c.fires),
                    alert_rule_test: [
                        {
                            eval_time: c.evalTime,
                            alertname: c.alert,
                            exp_alerts: [{ exp_labels: fired, exp_annotations: expectedAnnotations(rule[c.alert]!, fired) }],
                        },
                    ],
                },
                {
                    name: `${c.alert} silent`,
                    interval: "1m",
                    input_series: series(c.silent),
                    alert_rule_test: [{ eval_time: c.evalTime, alertname: c.alert, exp_alerts: [] }],
                },
            ];
        });
        const run = promtoolTest(groups, tests, "rules");
        assert.equal(run.status, 0, run.out);
        assert.match(run.out, /SUCCESS/);
    });

    test("a burst draining the pool: the pool-drain alert fires while warm sandboxes are left, minutes before the pool is empty; bursts the pool refills after stay silent (promtool)", {
        skip: PROMTOOL ? false : "needs promtool (apt-get install -y prometheus)",
    }, () => {
        // The controller's gauge scraped every 30 s (the default scrapeInterval); the pool of 10 serves bursts of 8.
        // Healthy: a burst every 3 min takes 8 and the pool is full again by the next scrape (the refill takes seconds,
        // bench/results.md section 6). Draining: claims come faster than the refill (pods that do not start): 10, 2,
        // then a partial refill eaten by the next claims, down to 0 at 5.5 min.
        const healthy = Array.from({ length: 41 }, (_, i) => (i % 6 === 5 ? "2" : "10")).join(" ");
        const draining = "10 10 10 2 7 6 5 4 3 2 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0";
        const fired = (alert: string) => [
            { exp_labels: { severity: "warning", stack: "obs" }, exp_annotations: expectedAnnotations(allAlerts(groups).find((r) => r.alert === alert)!, {}) },
        ];
        const at = (t: string, alert: string, firing: boolean) => ({ eval_time: t, alertname: alert, exp_alerts: firing ? fired(alert) : [] });
        const tests = [
            {
                name: "healthy bursts: the pool back above the burst by the next scrape",
                interval: "30s",
                input_series: [{ series: warmPoolReady, values: healthy }],
                alert_rule_test: ["1m", "3m", "5m", "6m", "9m", "12m", "15m", "18m", "20m"].flatMap((t) => [
                    at(t, "AgentRLWarmPoolBelowBurst", false),
                    at(t, "AgentRLWarmPoolEmpty", false),
                ]),
            },
            {
                name: "draining: below the burst from 1.5 min (7 ready), firing at 3 min with 4 left; empty from 5.5 min, that alert only 5 min later",
                interval: "30s",
                input_series: [{ series: warmPoolReady, values: draining }],
                alert_rule_test: [
                    at("2m", "AgentRLWarmPoolBelowBurst", false), // below for under warmPoolRefillFor (1m)
                    at("3m", "AgentRLWarmPoolBelowBurst", true), // 4 ready: the pool-drain alert, before any claim has to wait
                    at("3m", "AgentRLWarmPoolEmpty", false),
                    at("8m", "AgentRLWarmPoolEmpty", false),
                    at("11m", "AgentRLWarmPoolEmpty", true),
                    at("11m", "AgentRLWarmPoolBelowBurst", true),
                ],
            },
        ];
        const run = promtoolTest(groups, tests, "drain");
        assert.equal(run.status, 0, run.out);
        assert.match(run.out, /SUCCESS/);
    });

    test("two run stacks in one team's namespaces: run obs's alerts never fire on run other's series, nor sum them with its own (promtool)", {
        skip: PROMTOOL ? false : "needs promtool (apt-get install -y prometheus)",
    }, () => {
        // target.team: both stacks deploy into the same namespaces; only the stack label tells their series apart.
        const tests = CASES.flatMap((c) => [
            {
                name: `${c.alert}: the other run's firing series alone`,
                // An empty warm pool serves no ready series, so the pool's alerts fire on absence: they get this run's quiet ones too.
                interval: "1m",
                input_series: seriesOf(
                    c.alert === "AgentRLWarmPoolEmpty" || c.alert === "AgentRLWarmPoolBelowBurst"
                        ? { ...servedBy("obs", c.silent), ...servedBy("other", c.fires) }
                        : servedBy("other", c.fires),
                ),
                alert_rule_test: [{ eval_time: c.evalTime, alertname: c.alert, exp_alerts: [] }],
            },
            {
                name: `${c.alert}: this run's quiet series beside the other run's firing ones`,
                interval: "1m",
                input_series: seriesOf({ ...servedBy("obs", c.silent), ...servedBy("other", c.fires) }),
                alert_rule_test: [{ eval_time: c.evalTime, alertname: c.alert, exp_alerts: [] }],
            },
            {
                name: `${c.alert}: this run's firing series beside the other run's quiet ones`,
                interval: "1m",
                input_series: seriesOf({ ...servedBy("obs", c.fires), ...servedBy("other", c.silent) }),
                alert_rule_test: [
                    {
                        eval_time: c.evalTime,
                        alertname: c.alert,
                        exp_alerts: [
                            {
                                exp_labels: firedLabels(c),
                                exp_annotations: expectedAnnotations(allAlerts(groups).find((r) => r.alert === c.alert)!, firedLabels(c)),
                            },
                        ],
                    },
                ],
            },
        ]);
        const run = promtoolTest(groups, tests, "two-stacks");
        assert.equal(run.status, 0, run.out);
        assert.match(run.out, /SUCCESS/);
    });

    test("every rule and panel query selects the stack's own series (its label beside the namespace)", () => {
        const exprs = [...allAlerts(groups).map((r) => r.expr), ...dashboardPanels(settings, stack).flatMap((p) => p.queries.map((q) => q.expr))];
        for (const e of exprs) for (const m of e.matchAll(/\{[^}]*namespace="[^"]*"[^}]*\}/g)) assert.match(m[0], /agentrl_stack="obs"/, `${e}: ${m[0]}`);
        // Every selector of a series names its namespace (and so the stack), or the stack's own SandboxTemplate.
        for (const e of exprs)
            for (const m of e.matchAll(/[a-z_:]+\{[^}]*\}/g)) assert.match(m[0], /agentrl_stack="obs"|sandbox_template="obs-sandbox"/, `${e}: ${m[0]}`);
    });
});

describe("agentrl:observability:Observability on the Platform (mocks)", () => {
    const ON = { observability: { enabled: true, monitorLabels: { release: "kube-prometheus" } }, images: { mtail: "registry.test/agent-rl/mtail:test" } };
    async function planOf(extra: Record<string, unknown>, target: Record<string, unknown> = { kind: "kubernetes", context: "test" }) {
        const config = parseWithTestImages({ recipe: "opencode-blackbox", runId: "r1", target, ...extra }, "staging");
        const run = await runUnderMocks(
            async () => {
                const platform = new Platform("agentrl", { plan: resolvePlatform(config, { hfToken: false }), secrets: { ingressKeys: {} } });
                return { ...platform.outputs };
            },
            { stack: "staging" },
        );
        assert.equal(run.error, undefined, String(run.error));
        return { config, run, ms: manifests(run.resources) };
    }

    test("form operator: a PrometheusRule labelled for the ruleSelector, the dashboard ConfigMap labelled for the sidecar", async () => {
        const { config, run, ms } = await planOf(ON);
        assert.ok(run.resources.some((r) => r.type === "agentrl:observability:Observability"));
        const rule = ms.find((m) => m.kind === "PrometheusRule")!;
        assert.equal(rule.apiVersion, "monitoring.coreos.com/v1");
        assert.equal(rule.metadata.labels.release, "kube-prometheus");
        assert.equal(rule.metadata.namespace, "arl-staging-training");
        const plan = resolvePlatform(config, { hfToken: false });
        assert.deepEqual(rule.spec.groups, alertRules(config.observability, observedStack(plan)));
        // The black box deploys no env server (its rollouts run in sandboxes): no env rule.
        assert.deepEqual(rule.spec.groups.flatMap((g: RuleGroup) => g.rules.map((r) => ("alert" in r ? r.alert : r.record))).sort(), [
            "AgentRLIngressRateLimited",
            "AgentRLIngressUnauthorized",
            "AgentRLSandboxClaimSlow",
            "AgentRLTrainerStalled",
            "AgentRLVllmKvCacheFull",
            "AgentRLVllmQueueGrowing",
            "AgentRLWarmPoolBelowBurst",
            "AgentRLWarmPoolEmpty",
        ]);
        // The burst the plan computed (components/config/pool-size.ts), rendered into the rule.
        const belowBurst = rule.spec.groups.flatMap((g: RuleGroup) => g.rules).find((r: AlertRule) => r.alert === "AgentRLWarmPoolBelowBurst");
        assert.match(belowBurst.expr, new RegExp(` < ${plan.sandboxes!.sizing.burst}$`));
        const dash = ms.find((m) => m.kind === "ConfigMap" && m.metadata.labels?.grafana_dashboard === "1")!;
        assert.ok(dash, "the dashboard ConfigMap carries observability.dashboardLabels");
        assert.deepEqual(Object.keys(dash.data), ["agentrl-run-dashboard.json"]);
        assert.equal(JSON.parse(dash.data["agentrl-run-dashboard.json"]).title, "agent-rl run: arl-staging");
    });

    test("form annotations: the rules in a ConfigMap to load by hand, no PrometheusRule; observability off: nothing", async () => {
        const { ms } = await planOf({ ...ON, observability: { enabled: true, form: "annotations" } });
        assert.equal(ms.filter((m) => m.kind === "PrometheusRule").length, 0);
        const rules = ms.find((m) => m.kind === "ConfigMap" && m.data?.["agentrl-rules.yaml"] !== undefined)!;
        assert.ok(JSON.parse(rules.data["agentrl-rules.yaml"]).groups.length > 0);
        const off = await planOf({});
        assert.ok(!off.run.resources.some((r) => r.type === "agentrl:observability:Observability"));
        assert.ok(!off.ms.some((m) => m.kind === "PrometheusRule" || m.metadata?.labels?.grafana_dashboard !== undefined));
    });
});

describe("the trainer's series: which runner serves them", () => {
    const base = {
        runId: "r1",
        target: { kind: "kubernetes", context: "test" },
        observability: { enabled: true },
        images: { mtail: "registry.test/agent-rl/mtail:test" },
    };

    test("gpuSharing shared: the supervisor starts vLLM and the trainer each under the role runner, the trainer's with its metrics port only with observability on", () => {
        const plan = resolvePlatform(parseWithTestImages({ recipe: "opencode-blackbox", ...base, training: { gpuSharing: "shared" } }, "staging"), {
            hfToken: false,
        });
        assert.equal(plan.training.gpuSharing.oneContainer, true);
        const script = oneContainer(plan.training).command![2]!;
        assert.match(script, /python3 -I -B \/opt\/agentrl\/observability\/role_runner\.py --role vllm -- /);
        assert.match(script, /role_runner\.py --role trainer --metrics-listen 0\.0\.0\.0:9401 --vllm-health-url http:\/\/127\.0\.0\.1:8000\/health -- /);
        const off = resolvePlatform(
            parseWithTestImages({ recipe: "opencode-blackbox", ...base, observability: { enabled: false }, training: { gpuSharing: "shared" } }, "staging"),
            {
                hfToken: false,
            },
        );
        // Off: each line still says which role wrote it (docs/guides/observability.md "Logs"), but no listener and no port declared.
        const offContainer = oneContainer(off.training);
        assert.match(offContainer.command![2]!, /python3 -I -B \/opt\/agentrl\/observability\/role_runner\.py --role vllm -- /);
        assert.match(offContainer.command![2]!, /role_runner\.py --role trainer -- /);
        assert.doesNotMatch(offContainer.command![2]!, /--metrics-listen|--vllm-health-url/);
        assert.equal(offContainer.metricsPorts, undefined);
        assert.equal(off.training.metrics, undefined);
    });

    test("gpuSharing isolated (vLLM a sidecar): the trainer's command wrapped, vLLM's health polled on loopback", () => {
        const plan = resolvePlatform(parseWithTestImages({ recipe: "opencode-blackbox", ...base, training: { gpuSharing: "isolated" } }, "staging"), {
            hfToken: false,
        });
        assert.equal(plan.training.gpuSharing.oneContainer, false);
        assert.deepEqual(plan.training.trainer.command!.slice(0, 11), [
            "python3",
            "-I",
            "-B",
            "/opt/agentrl/observability/role_runner.py",
            "--role",
            "trainer",
            "--metrics-listen",
            "0.0.0.0:9401",
            "--vllm-health-url",
            "http://127.0.0.1:8000/health",
            "--",
        ]);
        assert.deepEqual(observedStack(plan).trainer, true);
    });
});
