/**
 * A real Prometheus (Debian's prometheus 2.42, on 127.0.0.1, its data in a temp dir, killed at the
 * end) scraping what a run serves, each part real where it installs here:
 * - the ingress: real nginx with its metrics path on, real mtail over its JSON log, real
 *   nginx-prometheus-exporter over stub_status (a stub upstream stands in for vLLM behind it);
 * - an env: a real OpenEnv 0.10 server (create_app + the uvicorn CLI, python/tests/grpo_support.py's
 *   stand-in environment) with the session counter beside it, behind the real env router (nginx) and
 *   its capacity responder;
 * - vLLM: a vLLM-shaped /metrics stand-in (vLLM 0.29's series names; no GPU here), named as one,
 *   through the real metrics-only nginx;
 * - the trainer: the role runner over a trainer stand-in that writes the Trainer's progress bar.
 * It loads the generated alert rules and evaluates every dashboard panel's query: each must succeed
 * and return series; no series carries a per-session label; CAPACITY_REACHED fires its alert.
 * The agent-sandbox controller does not run here: its panels and rules are checked by promtool
 * (observability-rules.test.ts) only.
 * Run: node --import tsx --test test/observability/observability-prometheus.test.ts
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import WebSocket from "ws";
import { startLocalRouter, type LocalRouter } from "../../components/env/local";
import { startLocalIngress, type LocalIngress } from "../../components/ingress/local";
import {
    INGRESS_MTAIL,
    SESSION_COUNTER,
    alertRules,
    dashboardPanels,
    renderVllmMetricsProxy,
    rulesFileText,
    sessionCounterCommand,
    type ObservedStack,
} from "../../components/observability";
import { STACK_POD_LABEL, STACK_RELABELING, STACK_SERIES_LABEL, podLabelMeta } from "../../components/shared/metrics-pods";
import { ROLE_RUNNER } from "../../components/training";
import { freePort } from "../helpers/http";
import { defaultObservabilitySettings } from "../helpers/observability";
import { skipWithoutNginx } from "../helpers/nginx";
import { startProgram, statusOf, type Started } from "../helpers/processes";
import { LOCK_VENV_HINT, lockVenvPython } from "../helpers/stub-env";
import { startStubUpstream, type StubUpstream } from "../helpers/stub-upstream";
import { startVllmMetricsStandIn, type VllmMetricsStandIn } from "../helpers/stub-vllm-metrics";
import { scaled, scaledCount } from "../helpers/waits";

const REPO = path.resolve(__dirname, "..", "..");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const which = (bin: string) => spawnSync("sh", ["-c", `command -v ${bin}`], { encoding: "utf8" }).stdout.trim() || undefined;
const BINS = { prometheus: which("prometheus"), mtail: which("mtail"), exporter: which("prometheus-nginx-exporter") };
const python = lockVenvPython();
const missing = [
    ...(skipWithoutNginx ? [skipWithoutNginx] : []),
    ...(BINS.prometheus ? [] : ["needs prometheus (apt-get install -y prometheus)"]),
    ...(BINS.mtail ? [] : ["needs mtail (apt-get install -y mtail)"]),
    ...(BINS.exporter ? [] : ["needs prometheus-nginx-exporter (apt-get install -y prometheus-nginx-exporter)"]),
    ...(python ? [] : [`no trainer-side venv (${LOCK_VENV_HINT})`]),
];

const settings = defaultObservabilitySettings();
const stack: ObservedStack = {
    stack: "prom",
    namespaces: { training: "prom-training", ingress: "prom-ingress", envs: "prom-envs" },
    envs: [{ name: "coding", replicas: 1, sessionsPerReplica: 2, sessions: 2, demand: 2 }],
    vllm: true,
    trainer: true,
    ingress: true,
};
const KEY = "prom-key-0123456789abcdef0123456789";
/** Every label a scraped series may carry: Prometheus's own, the target labels given here, and each series' bounded labels. */
const ALLOWED_LABELS = new Set([
    "__name__",
    "job",
    "instance",
    "namespace",
    "pod",
    STACK_SERIES_LABEL,
    "env",
    "replica",
    "key",
    "status",
    "le",
    "model_name",
    "engine",
]);

interface PromResult {
    readonly metric: Record<string, string>;
    readonly value: [number, string];
}

describe("a real Prometheus scraping the run's parts", { skip: missing.length > 0 ? missing.join("; ") : false }, () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-obs-prom-"));
    const started: Started[] = [];
    const sockets: WebSocket[] = [];
    let standIn: VllmMetricsStandIn;
    let upstream: StubUpstream;
    let ingress: LocalIngress;
    let router: LocalRouter;
    let prom = "";

    async function query(expr: string): Promise<PromResult[]> {
        const res = await fetch(`${prom}/api/v1/query?query=${encodeURIComponent(expr)}`);
        const body = (await res.json()) as { status: string; error?: string; data?: { resultType: string; result: PromResult[] } };
        assert.equal(body.status, "success", `${expr}: ${body.error}`);
        return body.data!.result;
    }

    before(async () => {
        const port = async () => freePort();
        const targets: Array<{ job: string; address: string; labels: Record<string, string> }> = [];
        // vLLM: the stand-in behind the real metrics-only nginx.
        standIn = await startVllmMetricsStandIn();
        const vllmPort = await port();
        const vllmDir = fs.mkdtempSync(path.join(tmp, "vllm-"));
        fs.writeFileSync(
            path.join(vllmDir, "nginx.conf"),
            renderVllmMetricsProxy({ listenAddress: "127.0.0.1", listenPort: vllmPort, upstream: standIn.address, runtimeDir: vllmDir }),
        );
        started.push(
            await startProgram("nginx", ["-p", vllmDir, "-c", path.join(vllmDir, "nginx.conf"), "-e", "stderr", "-g", "daemon off;"], {
                readyUrl: `http://127.0.0.1:${vllmPort}/metrics`,
            }),
        );
        targets.push({ job: "vllm", address: `127.0.0.1:${vllmPort}`, labels: { namespace: stack.namespaces.training, pod: "trainer-0" } });

        // The ingress with mtail and the exporter.
        upstream = await startStubUpstream();
        const ingDir = fs.mkdtempSync(path.join(tmp, "ingress-"));
        const logFile = path.join(ingDir, "access.json");
        fs.mkdirSync(path.join(ingDir, "progs"));
        fs.copyFileSync(INGRESS_MTAIL.sourcePath, path.join(ingDir, "progs", INGRESS_MTAIL.file));
        const stubStatus = await port();
        ingress = await startLocalIngress({
            upstream: upstream.url,
            keys: [{ name: "pool-a", key: KEY }],
            settings: { metricsAccessLog: logFile, stubStatusListen: `127.0.0.1:${stubStatus}` },
        });
        const mtailPort = await port();
        const mtail = await startProgram(
            BINS.mtail!,
            [
                "-progs",
                path.join(ingDir, "progs"),
                "-logs",
                logFile,
                "-address",
                "127.0.0.1",
                "-port",
                String(mtailPort),
                "-emit_prog_label=false",
                "-logtostderr",
            ],
            { readyUrl: `http://127.0.0.1:${mtailPort}/metrics` },
        );
        started.push(mtail);
        const exporterPort = await port();
        started.push(
            await startProgram(
                BINS.exporter!,
                [`-nginx.scrape-uri=http://127.0.0.1:${stubStatus}/stub_status`, `-web.listen-address=127.0.0.1:${exporterPort}`],
                {
                    readyUrl: `http://127.0.0.1:${exporterPort}/metrics`,
                },
            ),
        );
        targets.push({ job: "ingress-log", address: `127.0.0.1:${mtailPort}`, labels: { namespace: stack.namespaces.ingress, pod: "ingress-0" } });
        targets.push({ job: "ingress-nginx", address: `127.0.0.1:${exporterPort}`, labels: { namespace: stack.namespaces.ingress, pod: "ingress-0" } });

        // The env: a real OpenEnv server, its session counter, the router and its responder.
        const envPort = await port();
        started.push(
            await startProgram(path.join(path.dirname(python!), "uvicorn"), ["grpo_support:app", "--host", "127.0.0.1", "--port", String(envPort)], {
                readyUrl: `http://127.0.0.1:${envPort}/health`,
                cwd: path.join(REPO, "python", "tests"),
                env: { PATH: process.env.PATH ?? "", HOME: tmp, LANG: "C.UTF-8", HF_HUB_OFFLINE: "1", MAX_CONCURRENT_ENVS: "2" },
                timeoutMs: 60_000,
            }),
        );
        const counterPort = await port();
        const [bin, ...args] = sessionCounterCommand({
            scriptPath: SESSION_COUNTER.sourcePath,
            envName: "coding",
            replica: "env-coding-replicas-0",
            replicaPort: envPort,
            capacity: 2,
            listen: `127.0.0.1:${counterPort}`,
        });
        started.push(await startProgram(bin!, args, { readyUrl: `http://127.0.0.1:${counterPort}/metrics` }));
        const responderPort = await port();
        router = await startLocalRouter({ envName: "coding", replicas: [`127.0.0.1:${envPort}`], sessionsPerReplica: 2, responderMetricsPort: responderPort });
        targets.push({ job: "env-replica", address: `127.0.0.1:${counterPort}`, labels: { namespace: stack.namespaces.envs, pod: "env-coding-replicas-0" } });
        targets.push({ job: "env-router", address: `127.0.0.1:${responderPort}`, labels: { namespace: stack.namespaces.envs, pod: "env-coding-router-0" } });
        // A second run stack of the team in the same namespace (target.team): the same counter scraped as its replica.
        targets.push({
            job: "env-replica-other-run",
            address: `127.0.0.1:${counterPort}`,
            labels: { namespace: stack.namespaces.envs, pod: "other-env-coding-replicas-0", [podLabelMeta(STACK_POD_LABEL)]: "other" },
        });

        // The trainer: the role runner over a stand-in writing the Trainer's bar (3 of 100 steps), then idling.
        const trainerPort = await port();
        const bar =
            "import sys, time\nfor i in range(4):\n    sys.stderr.write('\\r %d%%|#  | %d/100 [00:0%d<01:00,  1.00it/s]' % (i, i, i)); sys.stderr.flush(); time.sleep(0.2)\ntime.sleep(600)\n";
        started.push(
            await startProgram(
                "python3",
                [
                    ROLE_RUNNER.sourcePath,
                    "--role",
                    "trainer",
                    "--metrics-listen",
                    `127.0.0.1:${trainerPort}`,
                    "--vllm-health-url",
                    `http://${standIn.address}/health`,
                    "--",
                    "python3",
                    "-c",
                    bar,
                ],
                {
                    readyUrl: `http://127.0.0.1:${trainerPort}/metrics`,
                },
            ),
        );
        targets.push({ job: "trainer", address: `127.0.0.1:${trainerPort}`, labels: { namespace: stack.namespaces.training, pod: "trainer-0" } });

        // Prometheus: 1 s scrapes and rule evaluations, the generated rules.
        const promDir = fs.mkdtempSync(path.join(tmp, "prometheus-"));
        fs.writeFileSync(path.join(promDir, "rules.yaml"), rulesFileText(alertRules(settings, stack)));
        const config = {
            global: { scrape_interval: "1s", evaluation_interval: "1s" },
            rule_files: [path.join(promDir, "rules.yaml")],
            // Each target as a PodMonitor's: the pod's stack label (as Kubernetes discovery exposes it) copied by the monitors' relabeling.
            scrape_configs: targets.map((t) => ({
                job_name: t.job,
                static_configs: [{ targets: [t.address], labels: { [podLabelMeta(STACK_POD_LABEL)]: stack.stack, ...t.labels } }],
                relabel_configs: [{ source_labels: [...STACK_RELABELING.sourceLabels], target_label: STACK_RELABELING.targetLabel }],
            })),
        };
        fs.writeFileSync(path.join(promDir, "prometheus.yml"), JSON.stringify(config));
        const promPort = await port();
        prom = `http://127.0.0.1:${promPort}`;
        started.push(
            await startProgram(
                BINS.prometheus!,
                [
                    `--config.file=${path.join(promDir, "prometheus.yml")}`,
                    `--storage.tsdb.path=${path.join(promDir, "data")}`,
                    `--web.listen-address=127.0.0.1:${promPort}`,
                    "--storage.tsdb.retention.time=1h",
                ],
                { readyUrl: `${prom}/-/ready`, timeoutMs: 30_000 },
            ),
        );

        // Traffic: ingress responses (200, 401, 404), two env sessions through the router and one refused.
        for (const auth of [`Bearer ${KEY}`, `Bearer ${KEY}`, "", "Bearer wrong"])
            await fetch(`${ingress.url}/v1/chat/completions`, {
                method: "POST",
                headers: { "content-type": "application/json", ...(auth ? { authorization: auth } : {}) },
                body: "{}",
            }).then((r) => r.text());
        await fetch(`${ingress.url}/nope`).then((r) => r.text());
        const open = (): Promise<string> =>
            new Promise((resolve, reject) => {
                const ws = new WebSocket(router.wsUrl);
                sockets.push(ws);
                const timer = setTimeout(() => reject(new Error("no answer in 10 s")), 10_000);
                ws.on("open", () => ws.send(JSON.stringify({ type: "reset", data: {} })));
                ws.once("message", (raw) => {
                    clearTimeout(timer);
                    resolve(String((JSON.parse(String(raw)) as { type: string }).type));
                });
                ws.on("error", reject);
            });
        assert.deepEqual([await open(), await open()], ["observation", "observation"]);

        // Every target up (bounded).
        for (let i = 0; ; i++) {
            const up = await query("up");
            if (up.length === targets.length && up.every((r) => r.value[1] === "1")) break;
            if (i > scaledCount(100)) throw new Error(`targets not all up: ${JSON.stringify(up.map((r) => [r.metric.job, r.value[1]]))}`);
            await sleep(200);
        }
        // The third session is refused once Prometheus has scraped the counter at 0 (increase() counts from a first sample).
        await sleep(scaled(1500));
        assert.equal(await open(), "error", "every replica full: CAPACITY_REACHED");
        // A few more scrapes, so rate() windows hold two samples or more.
        await sleep(scaled(4000));
    });

    after(async () => {
        for (const ws of sockets) ws.terminate();
        for (const p of started.reverse()) await p.stop();
        await router?.stop();
        await ingress?.stop();
        await upstream?.stop();
        await standIn?.stop();
        fs.rmSync(tmp, { recursive: true, force: true });
    });

    test("every dashboard panel's query evaluates without error and returns series", async () => {
        const panels = dashboardPanels(settings, stack);
        assert.ok(panels.length >= 10, `${panels.length} panels`);
        for (const p of panels) for (const q of p.queries) assert.ok((await query(q.expr)).length > 0, `${p.title}: ${q.legend}: ${q.expr} returned no series`);
    });

    test("the live values are what runs: 2 of 2 sessions in use, 1 refusal, step 3, responses by status and key name", async () => {
        const one = async (expr: string) => {
            const r = await query(expr);
            assert.equal(r.length, 1, `${expr}: ${JSON.stringify(r)}`);
            return Number(r[0]!.value[1]);
        };
        assert.equal(await one('sum(agentrl_env_sessions_in_use{agentrl_stack="prom",env="coding"})'), 2);
        assert.equal(await one('sum(agentrl_env_sessions_capacity{agentrl_stack="prom",env="coding"})'), 2);
        // The other run in the namespace serves its own 2; the dashboard's panel counts this run's only.
        assert.equal(await one('sum(agentrl_env_sessions_in_use{env="coding"})'), 4);
        const inUse = dashboardPanels(settings, stack)
            .find((p) => p.title.startsWith("env coding: sessions in use"))!
            .queries.find((q) => q.legend === "in use")!;
        assert.equal(await one(inUse.expr), 2);
        assert.equal(await one('sum(agentrl_env_capacity_reached_total{env="coding"})'), 1);
        assert.equal(await one("max(agentrl_trainer_step)"), 3);
        assert.equal(await one("max(agentrl_trainer_vllm_healthy)"), 1);
        assert.equal(await one('sum(agentrl_ingress_requests_total{status="200",key="pool-a"})'), 2);
        assert.equal(await one('sum(agentrl_ingress_requests_total{status="401",key="none"})'), 2);
        assert.equal(await one("max(vllm:kv_cache_usage_perc)"), 0.25);
        assert.equal(await one("min(nginx_up)"), 1);
    });

    test("no per-session or per-request label on any series scraped", async () => {
        const match = encodeURIComponent('{__name__=~"agentrl_.*|vllm:.*|nginx_.*"}');
        const res = await fetch(`${prom}/api/v1/series?match[]=${match}`);
        const series = ((await res.json()) as { data: Array<Record<string, string>> }).data;
        assert.ok(series.length > 20, `${series.length} series`);
        const names = [...new Set(series.flatMap((s) => Object.keys(s)))].sort();
        assert.deepEqual(
            names.filter((n) => !ALLOWED_LABELS.has(n)),
            [],
            "label names beyond the bounded set",
        );
        // Bounded values: one series per replica and per env, never per session.
        assert.equal((await query('agentrl_env_sessions_in_use{agentrl_stack="prom"}')).length, 1);
        assert.equal((await query("agentrl_env_capacity_reached_total")).length, 1);
    });

    test("the generated rules load and evaluate without error; CAPACITY_REACHED fires its alert", async () => {
        for (let i = 0; ; i++) {
            const body = (await (await fetch(`${prom}/api/v1/rules`)).json()) as {
                data: { groups: Array<{ name: string; rules: Array<{ name: string; health: string; lastError?: string; state: string }> }> };
            };
            const rules = body.data.groups.flatMap((g) => g.rules);
            assert.deepEqual(
                rules.filter((r) => r.health === "err").map((r) => `${r.name}: ${r.lastError}`),
                [],
            );
            assert.equal(rules.length, alertRules(settings, stack).flatMap((g) => g.rules).length);
            const capacity = rules.find((r) => r.name === "AgentRLEnvCapacityReached")!;
            if (capacity.state === "firing") break;
            if (i > scaledCount(50)) assert.fail(`AgentRLEnvCapacityReached is ${capacity.state}, not firing`);
            await sleep(200);
        }
        // Nothing else fires: the trainer has moved within trainerStalledFor, the KV cache is at 0.25, ...
        const alerts = (await (await fetch(`${prom}/api/v1/alerts`)).json()) as { data: { alerts: Array<{ labels: { alertname: string }; state: string }> } };
        assert.deepEqual(
            alerts.data.alerts.filter((a) => a.state === "firing").map((a) => a.labels.alertname),
            ["AgentRLEnvCapacityReached"],
        );
        assert.equal(await statusOf(`${prom}/-/healthy`), 200);
    });
});
