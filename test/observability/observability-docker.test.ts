/**
 * Observability on the docker target (issue #28 point 3, Docker): with observability.enabled every
 * container that serves metrics gets the same sidecars as its Kubernetes pod, each in the main
 * container's network namespace, and the metrics ports are published on the host's loopback only;
 * the offline plan writes prometheus.yml (those ports as static targets, with the labels the rules
 * and the dashboard select on), the rules file and the dashboard, and the real promtool (Debian's
 * prometheus) checks the config with its rule_files and the rules. Mocks (Pulumi's mock runtime).
 * Run: npx tsx --test test/observability/observability-docker.test.ts
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import { deepMerge } from "../../components/config";
import { renderReplicaMetricsRelay, REPLICA_METRICS_RELAY_PORT } from "../../components/env";
import { PROMETHEUS_CONFIG_FILE, RULES_FILE } from "../../components/observability";
import { Platform, resolvePlatform } from "../../components/platform";
import { METRICS_PROGRAM_DIR } from "../../components/shared/metrics-pods";
import { planToDir, type PlanResult } from "../../scripts/lib/plan";
import { runUnderMocks, type RecordedResource } from "../../scripts/lib/mockrun";
import { configProblems, parseWithTestImages } from "../helpers/config";
import { TEST_MTAIL_IMAGE } from "../helpers/observability";
import { startStubDns } from "../helpers/stub-dns";
import { freePort } from "../helpers/http";
import { startProgram } from "../helpers/processes";
import { policyResources } from "../helpers/guardrails-plan";
import { runPolicies } from "../../policy/run-local";
import { scaled, scaledCount } from "../helpers/waits";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-obs-docker-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));
const which = (cmd: string) => spawnSync("sh", ["-c", `command -v ${cmd}`], { encoding: "utf8" }).stdout.trim() || undefined;
const PROMTOOL = which("promtool");
const NGINX = which("nginx");

const CONTAINER = "docker:index/container:Container";
const ON = { observability: { enabled: true }, images: { mtail: TEST_MTAIL_IMAGE } };
/**
 * The recipes that plan on Docker with observability on: vLLM as a container of its own beside an env (white box, server
 * layout), an env (white-box colocate). Docker runs no black box (the docker sandbox pool and hosted sandboxes are refused),
 * so no Docker plan has an ingress: its exporter and mtail sidecars are checked on Kubernetes (observability-wiring).
 */
const RECIPES: Record<string, Record<string, unknown>> = { "mbpp-whitebox": { training: { layout: "whitebox-server", gpusOnNode: 2 } }, "wordle-whitebox": {} };

async function planDocker(
    recipe: string,
    extra: Record<string, unknown> = {},
    dir = `${recipe}-${Object.keys(extra).length}`,
): Promise<PlanResult & { dir: string }> {
    const out = path.join(tmp, dir);
    const r = await planToDir(
        { recipe, target: "docker" },
        { outDir: out, platformOverride: deepMerge(deepMerge(RECIPES[recipe] ?? {}, ON), extra) as Record<string, unknown> },
    );
    return { ...r, dir: out };
}

const containers = (r: PlanResult) => r.resources.filter((x) => x.type === CONTAINER);
const isSidecar = (c: RecordedResource) => (c.inputs.labels ?? []).some((l: any) => l.label === "app.kubernetes.io/component" && l.value === "metrics");
const portsOf = (c: RecordedResource): Array<{ internal: number; external: number; ip: string }> => c.inputs.ports ?? [];
const prometheusYml = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, "observability", PROMETHEUS_CONFIG_FILE), "utf8"));

describe("observability on the docker target: the containers", () => {
    for (const recipe of Object.keys(RECIPES)) {
        test(`${recipe}: every metrics sidecar runs in its main container's network namespace, publishes nothing, its files read-only`, async () => {
            const r = await planDocker(recipe);
            const all = containers(r);
            const sidecars = all.filter(isSidecar);
            assert.ok(sidecars.length > 0, "no metrics sidecar");
            for (const s of sidecars) {
                const m = /^container:(.+)-id$/.exec(String(s.inputs.networkMode));
                assert.ok(m, `${s.name}: networkMode ${s.inputs.networkMode}`);
                const main = all.find((c) => c.name === m[1]);
                assert.ok(main, `${s.name}: no container ${m[1]}`);
                assert.ok(String(s.inputs.name).startsWith(`${main.inputs.name}-`), `${s.inputs.name} is not named after ${main.inputs.name}`);
                assert.equal(s.inputs.ports, undefined, `${s.name} publishes ports itself`);
                for (const u of s.inputs.uploads ?? []) {
                    assert.equal(path.posix.dirname(u.file), METRICS_PROGRAM_DIR, `${s.name}: ${u.file}`);
                    assert.equal(u.permissions, "0444", `${s.name}: ${u.file}`);
                }
                assert.doesNotMatch(String(s.inputs.user), /^0:/, `${s.name} runs as root`);
                assert.deepEqual(s.inputs.capabilities, { drops: ["ALL"] });
                assert.deepEqual(s.inputs.securityOpts, ["no-new-privileges:true"]);
            }
            const names = new Set(sidecars.map((s) => String(s.inputs.name).split("-").slice(-2).join("-")));
            // vLLM as a container of its own (the server layout) has its metrics sidecar.
            if (recipe === "mbpp-whitebox") assert.ok(names.has("vllm-metrics"), `no vllm-metrics sidecar: ${[...names]}`);
            {
                assert.ok(names.has("session-metrics"), `no session counter: ${[...names]}`);
                assert.ok(names.has("metrics-relay"), `no relay: ${[...names]}`);
                // One counter per replica, each told its replica's container name (the downward API's POD_NAME on Kubernetes).
                const replicas = all.filter((c) => /-replica-\d+$/.test(c.name));
                const counters = sidecars.filter((s) => String(s.inputs.name).endsWith("-session-metrics"));
                assert.equal(counters.length, replicas.length);
                for (const c of counters) {
                    const replica = replicas.find((x) => `container:${x.name}-id` === c.inputs.networkMode)!;
                    const argv: string[] = c.inputs.command;
                    assert.equal(argv[argv.indexOf("--replica") + 1], replica.inputs.name);
                }
            }
        });

        test(`${recipe}: the metrics ports are published on 127.0.0.1 only, exactly prometheus.yml's targets; vLLM's 8000 never`, async () => {
            const r = await planDocker(recipe);
            const cfg = prometheusYml(r.dir);
            const targets = new Set<string>(cfg.scrape_configs.flatMap((j: any) => j.static_configs.flatMap((s: any) => s.targets)));
            const metricsPublished = new Set<string>();
            for (const c of containers(r)) {
                for (const p of portsOf(c)) {
                    assert.notEqual(p.internal, 8000, `${c.name} publishes vLLM's port`);
                    const isIngressListen = c.name.endsWith("-ingress-proxy") && p.internal === r.plan.ingress?.port;
                    if (isIngressListen) continue;
                    assert.equal(p.ip, "127.0.0.1", `${c.name} publishes ${p.internal} on ${p.ip}`);
                    metricsPublished.add(`127.0.0.1:${p.external}`);
                }
            }
            assert.deepEqual([...metricsPublished].sort(), [...targets].sort());
            const vllm = containers(r).find((c) => c.name.endsWith("-training-vllm"));
            if (vllm) assert.deepEqual(portsOf(vllm), [{ internal: 9400, external: 19400, ip: "127.0.0.1", protocol: "tcp" }]);
        });
    }

    test("wordle-whitebox: the replicas' counters are relayed through the router (an internal network publishes nothing), each by its own path", async () => {
        const r = await planDocker("wordle-whitebox");
        const job = prometheusYml(r.dir).scrape_configs[0];
        const relayed = job.static_configs.filter((s: any) => s.labels.container === "session-metrics");
        const env = r.plan.envs.find((e) => e.kind === "deployed")!;
        assert.equal(env.kind, "deployed");
        if (env.kind !== "deployed") return;
        assert.deepEqual(
            relayed.map((s: any) => [s.targets[0], s.labels.pod, s.labels.__metrics_path__]),
            env.replicas.containerNames.map((n) => ["127.0.0.1:19411", n, `/replica/${n}/metrics`]),
        );
        const router = containers(r).find((c) => c.name.endsWith("-env-wordle-router"))!;
        assert.deepEqual(
            portsOf(router).map((p) => [p.internal, p.external, p.ip]),
            [
                [9403, 19410, "127.0.0.1"],
                [REPLICA_METRICS_RELAY_PORT, 19411, "127.0.0.1"],
            ],
        );
    });

    for (const recipe of Object.keys(RECIPES)) {
        test(`${recipe}: the policy pack passes the plan with observability on (zero violations)`, async () => {
            const r = await planDocker(recipe);
            const violations = await runPolicies(policyResources(r.resources), { config: {}, stack: r.plan.config.stack });
            assert.deepEqual(
                violations.map((v) => `[${v.policy}] ${v.message}`),
                [],
            );
        });
    }

    test("off: no sidecar, no published metrics port, no prometheus.yml", async () => {
        const r = await planDocker("mbpp-whitebox", { observability: { enabled: false } }, "off");
        assert.deepEqual(containers(r).filter(isSidecar), []);
        const vllm = containers(r).find((c) => c.name.endsWith("-training-vllm"))!;
        assert.deepEqual(portsOf(vllm), []);
        assert.equal(fs.existsSync(path.join(r.dir, "observability")), false);
    });

    test("the stack output prometheusConfig is the plan's prometheus.yml", async () => {
        const r = await planDocker("wordle-whitebox");
        const run = await runUnderMocks(
            async () => {
                const platform = new Platform("agentrl", { plan: resolvePlatform(r.plan.config, { hfToken: false }), secrets: { ingressKeys: {} } });
                return { ...platform.outputs };
            },
            { stack: r.plan.config.stack },
        );
        assert.equal(run.error, undefined, String(run.error));
        assert.equal(run.outputs?.prometheusConfig, fs.readFileSync(path.join(r.dir, "observability", PROMETHEUS_CONFIG_FILE), "utf8"));
    });
});

describe("observability on the docker target: prometheus.yml and the rules, through the real promtool", () => {
    for (const recipe of Object.keys(RECIPES)) {
        test(`${recipe}: every namespace and stack the rules select on are a target's labels`, async () => {
            const r = await planDocker(recipe);
            const rules = JSON.parse(fs.readFileSync(path.join(r.dir, "observability", RULES_FILE), "utf8"));
            const targets: Array<Record<string, string>> = prometheusYml(r.dir).scrape_configs[0].static_configs.map((s: any) => s.labels);
            const selectors = rules.groups.flatMap((g: any) =>
                g.rules.flatMap((x: any) => [...String(x.expr).matchAll(/\{([^}]*namespace="[^"]+"[^}]*)\}/g)].map((m) => m[1]!)),
            );
            assert.ok(selectors.length > 0, "no rule selects a namespace");
            for (const sel of selectors) {
                const matchers = Object.fromEntries([...String(sel).matchAll(/(namespace|agentrl_stack)="([^"]+)"/g)].map((m) => [m[1], m[2]]));
                assert.ok(matchers.agentrl_stack !== undefined, `no stack matcher in {${sel}}`);
                assert.ok(
                    targets.some((t) => t.namespace === matchers.namespace && t.agentrl_stack === matchers.agentrl_stack),
                    `rules select {${sel}}, no target carries it`,
                );
            }
        });

        test(`${recipe}: promtool check config (rule_files: the rules beside it) and promtool check rules`, {
            skip: PROMTOOL ? false : "needs promtool (apt-get install -y prometheus)",
        }, async () => {
            const r = await planDocker(recipe);
            const dir = path.join(r.dir, "observability");
            const config = spawnSync(PROMTOOL!, ["check", "config", path.join(dir, PROMETHEUS_CONFIG_FILE)], { encoding: "utf8", timeout: scaled(30_000) });
            assert.equal(config.status, 0, config.stdout + config.stderr);
            assert.match(config.stdout + config.stderr, /SUCCESS: 1 rule files found/);
            const rules = spawnSync(PROMTOOL!, ["check", "rules", path.join(dir, RULES_FILE)], { encoding: "utf8", timeout: scaled(30_000) });
            assert.equal(rules.status, 0, rules.stdout + rules.stderr);
            assert.match(rules.stdout, /SUCCESS: [1-9][0-9]* rules found/);
        });
    }

    test("promtool refuses a prometheus.yml whose rules file is missing (the check reads rule_files)", {
        skip: PROMTOOL ? false : "needs promtool",
    }, async () => {
        const r = await planDocker("wordle-whitebox");
        fs.rmSync(path.join(r.dir, "observability", RULES_FILE));
        const config = spawnSync(PROMTOOL!, ["check", "config", path.join(r.dir, "observability", PROMETHEUS_CONFIG_FILE)], {
            encoding: "utf8",
            timeout: scaled(30_000),
        });
        assert.notEqual(config.status, 0, config.stdout + config.stderr);
    });
});

/** Listens `a` on base+10 and `b` on base+11 for the first base from `from` (step 20, below `to`) where both are free; that base. */
async function listenPair(a: http.Server, b: http.Server, from: number, to: number): Promise<number> {
    const listen = (srv: http.Server, port: number) =>
        new Promise<boolean>((ok, no) => {
            const onError = (e: NodeJS.ErrnoException) => (e.code === "EADDRINUSE" ? ok(false) : no(e));
            srv.once("error", onError).listen(port, "127.0.0.1", () => {
                srv.off("error", onError);
                ok(true);
            });
        });
    for (let base = from; base + 11 < to; base += 20) {
        if (!(await listen(a, base + 10))) continue;
        if (await listen(b, base + 11)) return base;
        await new Promise<void>((ok) => a.close(() => ok()));
    }
    throw new Error(`no base from ${from} to ${to} with base+10 and base+11 free on 127.0.0.1`);
}

describe("observability on the docker target: a real Prometheus reads the generated prometheus.yml", () => {
    const PROMETHEUS = which("prometheus");
    test("its targets, the relayed replicas by their own path, carry the labels the dashboard's queries select on (stand-in counters, named as such)", {
        skip: PROMETHEUS ? false : "needs prometheus (apt-get install -y prometheus)",
    }, async () => {
        // Stand-ins for what the router publishes: the responder (base+10) and the replicas' relay (base+11).
        // The replicas' names come from the plan, which needs the base: the relay reads them when asked.
        let replicaNames: readonly string[] = [];
        const responder = http.createServer((_req, res) => res.end('agentrl_env_capacity_reached_total{env="wordle"} 0\n'));
        const relay = http.createServer((req, res) => {
            const m = /^\/replica\/([a-z0-9-]+)\/metrics$/.exec(req.url ?? "");
            if (!m || !replicaNames.includes(m[1]!)) return void res.writeHead(404).end();
            res.end(`agentrl_env_sessions_in_use{env="wordle",replica="${m[1]}"} 1\nagentrl_env_sessions_capacity{env="wordle",replica="${m[1]}"} 8\n`);
        });
        // A base below the kernel's ephemeral range (32768 up: another test's outgoing connection can hold
        // any port there) and above the free-port ranges (TypeScript 12400-19999, Python 20000-27999), taken
        // by listening on its two ports: the first base whose both are free.
        const base = await listenPair(responder, relay, 28_000, 32_000);
        // From here on the two listeners are open: every way out closes them.
        let prom: Awaited<ReturnType<typeof startProgram>> | undefined;
        try {
            const r = await planDocker("wordle-whitebox", { observability: { enabled: true, hostPortBase: base, scrapeInterval: "1s" } }, "prometheus");
            const env = r.plan.envs.find((e) => e.kind === "deployed");
            if (env?.kind !== "deployed") return assert.fail("no deployed env");
            replicaNames = env.replicas.containerNames;
            const dir = path.join(r.dir, "observability");
            const promPort = await freePort();
            prom = await startProgram(
                PROMETHEUS!,
                [
                    `--config.file=${path.join(dir, PROMETHEUS_CONFIG_FILE)}`,
                    `--storage.tsdb.path=${path.join(dir, "data")}`,
                    `--web.listen-address=127.0.0.1:${promPort}`,
                ],
                { readyUrl: `http://127.0.0.1:${promPort}/-/ready`, timeoutMs: 30_000 },
            );
            const query = async (expr: string) =>
                ((await (await fetch(`http://127.0.0.1:${promPort}/api/v1/query?query=${encodeURIComponent(expr)}`)).json()) as any).data.result as Array<{
                    metric: Record<string, string>;
                    value: [number, string];
                }>;
            const dashboard = JSON.parse(fs.readFileSync(path.join(dir, "agentrl-run-dashboard.json"), "utf8"));
            const inUse = dashboard.panels[0].targets[0].expr as string;
            assert.match(inUse, /agentrl_env_sessions_in_use\{namespace=.*agentrl_stack=/);
            // Bounded: scrapes every 1 s.
            let got: Array<{ metric: Record<string, string>; value: [number, string] }> = [];
            for (let i = 0; i < scaledCount(60); i++) {
                got = await query(inUse);
                if (got.length === 1 && Number(got[0]!.value[1]) === env.replicas.containerNames.length) break;
                await new Promise((res) => setTimeout(res, 250));
            }
            assert.equal(Number(got[0]?.value[1]), env.replicas.containerNames.length, `${inUse}: ${JSON.stringify(got)}\n${prom.output().slice(-2000)}`);
            const pods = (await query(`agentrl_env_sessions_in_use`)).map((x) => [x.metric.pod, x.metric.replica, x.metric.container, x.metric.job]);
            assert.deepEqual(pods.sort(), env.replicas.containerNames.map((n) => [n, n, "session-metrics", "env-replica"]).sort());
            // Every target's `up` series: the sum above can be complete one scrape before the last
            // target's first `up` sample is (measured: 5 of 6 once, in a fresh-clone CI run). Bounded as above.
            let up = await query("up");
            for (let i = 0; i < scaledCount(60) && up.length !== env.replicas.containerNames.length + 1; i++) {
                await new Promise((res) => setTimeout(res, 250));
                up = await query("up");
            }
            assert.equal(up.length, env.replicas.containerNames.length + 1, JSON.stringify(up));
            assert.ok(
                up.every((x) => x.value[1] === "1"),
                JSON.stringify(up),
            );
        } finally {
            await prom?.stop();
            await new Promise((res) => responder.close(res));
            await new Promise((res) => relay.close(res));
        }
    });
});

describe("observability on the docker target: the refusals, each with its message", () => {
    test("a base that puts the last port above 65535", () => {
        assert.deepEqual(
            configProblems(() =>
                resolvePlatform(
                    parseWithTestImages(
                        { recipe: "wordle-whitebox", runId: "r1", target: { kind: "docker" }, ...ON, observability: { enabled: true, hostPortBase: 65530 } },
                        "dev",
                    ),
                ),
            ),
            [
                "observability.hostPortBase: 65530 puts the last metrics port at 65541 (10 ports, then 2 per deployed env), above 65535: lower hostPortBase (default 19400)",
            ],
        );
    });
});

describe("the replicas' relay config", () => {
    test("nginx -t accepts it", { skip: NGINX ? false : "needs nginx" }, () => {
        const dir = fs.mkdtempSync(path.join(tmp, "relay-"));
        const conf = path.join(dir, "relay.conf");
        // The runtime paths point at the test's own directory (the container's are /tmp).
        fs.writeFileSync(conf, renderReplicaMetricsRelay(["env-a-replica-0", "env-a-replica-1"]).replaceAll("/tmp/", `${dir}/`));
        const t = spawnSync(NGINX!, ["-t", "-p", dir, "-e", "stderr", "-c", conf], { encoding: "utf8", timeout: scaled(30_000) });
        assert.equal(t.status, 0, t.stdout + t.stderr);
        assert.match(t.stderr, /test is successful/);
    });

    test("real nginx relays GET /replica/<name>/metrics to that replica's counter and nothing else (stub DNS and counters, named as such)", {
        skip: NGINX ? false : "needs nginx",
    }, async () => {
        const dns = await startStubDns();
        // Stand-ins for two replicas' session counters: the same port on two loopback addresses, as two containers.
        const counter = (host: string, port: number, name: string) =>
            new Promise<http.Server>((resolve) => {
                const s = http.createServer((req, res) => res.end(`${req.method} ${req.url} agentrl_env_sessions_in_use{replica="${name}"} 1\n`));
                s.listen(port, host, () => resolve(s));
            });
        const first = await counter("127.0.0.2", 0, "replica-0");
        const port = (first.address() as { port: number }).port;
        const servers = [first, await counter("127.0.0.3", port, "replica-1")];
        dns.records.set("env-a-replica-0", "127.0.0.2");
        dns.records.set("env-a-replica-1", "127.0.0.3");
        const dir = fs.mkdtempSync(path.join(tmp, "relay-run-"));
        const probe = http.createServer().listen(0, "127.0.0.1");
        await new Promise((r) => probe.once("listening", r));
        const listen = (probe.address() as { port: number }).port;
        await new Promise((r) => probe.close(r));
        // The deployed config but for the resolver's address, the listen address and the runtime paths.
        const deployed = renderReplicaMetricsRelay(["env-a-replica-0", "env-a-replica-1"], port);
        const conf = path.join(dir, "relay.conf");
        fs.writeFileSync(
            conf,
            deployed
                .replace("resolver 127.0.0.11 ", `resolver ${dns.address} `)
                .replace(`listen 0.0.0.0:${REPLICA_METRICS_RELAY_PORT};`, `listen 127.0.0.1:${listen};`)
                .replaceAll("/tmp/", `${dir}/`),
        );
        const nginx = spawn(NGINX!, ["-p", dir, "-e", "stderr", "-c", conf, "-g", "daemon off;"], { stdio: ["ignore", "ignore", "pipe"] });
        let stderr = "";
        nginx.stderr.on("data", (b) => (stderr += b));
        const ask = (method: string, p: string) =>
            new Promise<{ status: number; body: string }>((resolve, reject) => {
                const req = http.request({ host: "127.0.0.1", port: listen, method, path: p, agent: false, headers: { Connection: "close" } }, (res) => {
                    let body = "";
                    res.on("data", (c) => (body += c));
                    res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
                });
                req.on("error", reject);
                req.end();
            });
        try {
            // Bounded wait for nginx to listen.
            let up = false;
            for (let i = 0; i < scaledCount(50) && !up; i++) {
                up = await ask("GET", "/").then(
                    () => true,
                    async () => {
                        await new Promise((r) => setTimeout(r, 100));
                        return false;
                    },
                );
            }
            assert.ok(up, `nginx did not listen: ${stderr}`);
            const zero = await ask("GET", "/replica/env-a-replica-0/metrics");
            assert.equal(zero.status, 200, zero.body + stderr);
            assert.equal(zero.body, 'GET /metrics agentrl_env_sessions_in_use{replica="replica-0"} 1\n');
            assert.match((await ask("GET", "/replica/env-a-replica-1/metrics")).body, /replica="replica-1"/);
            assert.equal((await ask("POST", "/replica/env-a-replica-0/metrics")).status, 405);
            for (const p of [
                "/replica/env-a-replica-0/metrics?x=1",
                "/replica/env-a-replica-0/../env-a-replica-1/metrics",
                "/replica/other/metrics",
                "/metrics",
                "//replica/env-a-replica-0/metrics",
            ])
                assert.equal((await ask("GET", p)).status, 404, p);
        } finally {
            nginx.kill("SIGTERM");
            await new Promise((r) => nginx.once("exit", r));
            for (const sv of servers) await new Promise((r) => sv.close(r));
            await dns.stop();
        }
    });

    test("refuses a name that is not a container name", () => {
        assert.throws(() => renderReplicaMetricsRelay(["bad name"]), /replica metrics relay: "bad name" is not a container name \(DNS-1123 label\)/);
    });
});
