/**
 * Observability's wiring (issue #28): with observability.enabled the pods of every Kubernetes recipe
 * declare their metrics endpoints (vLLM's metrics-only listener wherever vLLM serves HTTP, the
 * trainer's port, the ingress's exporter and mtail, each env replica's session counter, the
 * responder's port), restricted where the namespace is; off, nothing changes; every refusal of the
 * setting is tested by its message. Mocks (Pulumi's mock runtime), the objects against the 1.36 schema.
 * Run: npx tsx --test test/observability/observability-wiring.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import { planToDir } from "../../scripts/lib/plan";
import { runPolicies } from "../../policy/run-local";
import { policyResources } from "../helpers/guardrails-plan";
import { stackRequests } from "../../components/preflight/kubernetes/needs";
import { quantityValue } from "../../components/shared/quantity";
import {
    ALL_RECIPE_NAMES,
    deepMerge,
    HARBOR_RECIPE_NAMES,
    MULTI_NODE_RECIPE_NAMES,
    parseClusterConfig,
    POD_SECURITY,
    RECIPE_NAMES,
    type PlatformConfig,
} from "../../components/config";
import { ClusterBase } from "../../components/cluster";
import { runUnderMocks } from "../../scripts/lib/mockrun";
import { manifests } from "../helpers/manifests";
import { resolvePlatform } from "../../components/platform";
import { INGRESS_MTAIL, SESSION_COUNTER, programText } from "../../components/observability";
import { roleRunnerFiles } from "../../components/training";
import { projectMetricsPrograms } from "../../components/platform/observability";
import { configProblems, parseWithTestImages } from "../helpers/config";
import { validateCustomResource } from "../helpers/crd-schema";
import { STACK_POD_LABEL } from "../../components/shared/metrics-pods";
import { loadManifestSchemas, validateManifestStrict } from "../helpers/k8s-schema";
import { OBSERVABILITY_ON, platformManifests, STAND_IN_PROGRAMS, TEST_MTAIL_IMAGE } from "../helpers/observability";

const K8S = { kind: "kubernetes", context: "test" } as const;
const MTAIL = TEST_MTAIL_IMAGE;
const manifestsOf = platformManifests;

function configOf(recipe: string, extra: Record<string, unknown> = {}, stack = "staging"): PlatformConfig {
    return parseWithTestImages({ recipe, runId: "r1", target: K8S, ...extra }, stack);
}

const ON = OBSERVABILITY_ON;

interface PodOf {
    readonly kind: string;
    readonly name: string;
    readonly namespace: string;
    readonly labels: Record<string, string>;
    readonly spec: Record<string, any>;
}

/** Every pod template of the manifests (Deployments, StatefulSets, Jobs, the JobSet's replicated jobs). */
function podsOf(ms: ReadonlyArray<Record<string, any>>): PodOf[] {
    const out: PodOf[] = [];
    for (const m of ms) {
        const ns = m.metadata?.namespace;
        if (["Deployment", "StatefulSet", "Job"].includes(m.kind))
            out.push({ kind: m.kind, name: m.metadata.name, namespace: ns, labels: m.spec.template.metadata.labels, spec: m.spec.template.spec });
        if (m.kind === "JobSet")
            for (const rj of m.spec.replicatedJobs)
                out.push({
                    kind: `JobSet/${rj.name}`,
                    name: m.metadata.name,
                    namespace: ns,
                    labels: rj.template.spec.template.metadata.labels,
                    spec: rj.template.spec.template.spec,
                });
    }
    return out;
}

const containersOf = (p: PodOf) => [...(p.spec.initContainers ?? []), ...p.spec.containers] as Array<Record<string, any>>;
const metricsPortsOf = (p: PodOf) =>
    containersOf(p).flatMap((c) =>
        (c.ports ?? []).filter((port: any) => String(port.name).startsWith("metrics-")).map((port: any) => `${c.name}:${port.name}:${port.containerPort}`),
    );
const role = (p: PodOf) => p.labels["app.kubernetes.io/name"];

before(async () => {
    await loadManifestSchemas();
});

describe("observability off: nothing changes", () => {
    for (const recipe of [...RECIPE_NAMES, ...MULTI_NODE_RECIPE_NAMES, ...HARBOR_RECIPE_NAMES]) {
        test(`${recipe}: the objects are the same with observability written but disabled, and no pod has a metrics port`, async () => {
            const plain = await manifestsOf(configOf(recipe), undefined);
            const disabled = await manifestsOf(
                configOf(recipe, { observability: { enabled: false, scraper: { namespace: "prom" }, scrapeInterval: "15s" }, images: { mtail: MTAIL } }),
                undefined,
            );
            assert.deepEqual(disabled, plain);
            for (const p of podsOf(plain)) assert.deepEqual(metricsPortsOf(p), [], `${p.kind} ${p.name}`);
        });
    }
});

describe("observability on: every pod's metrics endpoints", () => {
    test("mbpp-whitebox (colocate): vLLM runs inside the script, so no listener: the trainer's port and the env's counter and responder", async () => {
        const ms = await manifestsOf(configOf("mbpp-whitebox", ON));
        // The programs listen where the ports are declared: the responder's counter on 9403, the counter on 9402, the trainer's runner on 9401.
        const router = podsOf(ms).find((p) => role(p) === "env-router")!;
        const responder = router.spec.containers.find((c: any) => c.name === "capacity-responder");
        assert.deepEqual(responder.command.slice(-2), ["--metrics-listen", "0.0.0.0:9403"]);
        const replica = podsOf(ms).find((p) => role(p) === "env-replica")!;
        assert.deepEqual(replica.spec.containers.find((c: any) => c.name === "session-metrics").args.slice(0, 2), ["--listen", "0.0.0.0:9402"]);
        const byRole = Object.fromEntries(podsOf(ms).map((p) => [role(p), metricsPortsOf(p)]));
        assert.deepEqual(byRole, {
            trainer: ["trainer:metrics-trainer:9401"],
            "env-replica": ["session-metrics:metrics-session:9402"],
            "env-router": ["capacity-responder:metrics-router:9403"],
        });
        const cm = ms.find((m) => m.kind === "ConfigMap" && m.metadata.namespace.endsWith("-training") && m.metadata.name.endsWith("-programs"))!;
        assert.deepEqual(
            Object.keys(cm.data).sort(),
            ["metrics_http.py", "role_runner.py"],
            "no listener config in colocate: only the trainer's role runner and its module",
        );
        // The trainer runs under the role runner, which serves metrics-trainer (no vLLM HTTP to watch in colocate).
        const trainer = podsOf(ms).find((p) => role(p) === "trainer")!;
        const main = trainer.spec.containers[0];
        assert.deepEqual(main.command.slice(0, 9), [
            "python3",
            "-I",
            "-B",
            "/opt/agentrl/observability/role_runner.py",
            "--role",
            "trainer",
            "--metrics-listen",
            "0.0.0.0:9401",
            "--",
        ]);
        assert.ok(main.volumeMounts.some((v: any) => v.name === "metrics-programs" && v.mountPath === "/opt/agentrl/observability" && v.readOnly));
    });

    test("opencode-blackbox: the listener a native sidecar of the training pod, started first; the ingress's exporter and mtail share the access log", async () => {
        const ms = await manifestsOf(configOf("opencode-blackbox", ON));
        const pods = podsOf(ms);
        const trainer = pods.find((p) => role(p) === "trainer")!;
        assert.deepEqual(metricsPortsOf(trainer), ["vllm-metrics:metrics-vllm:9400", "trainer:metrics-trainer:9401"]);
        const listener = trainer.spec.initContainers[0];
        assert.equal(listener.name, "vllm-metrics");
        assert.equal(listener.restartPolicy, "Always", "a native sidecar: the Job still completes when the trainer exits");
        assert.deepEqual(listener.command, ["nginx", "-e", "stderr", "-c", "/opt/agentrl/observability/vllm-metrics.conf", "-g", "daemon off;"]);
        const cm = ms.find(
            (m) => m.kind === "ConfigMap" && m.metadata.name === trainer.spec.volumes.find((v: any) => v.name === "metrics-programs").configMap.name,
        )!;
        assert.deepEqual(cm.data, {
            "vllm-metrics.conf": STAND_IN_PROGRAMS.vllmListener.text,
            ...Object.fromEntries(roleRunnerFiles().map((f) => [f.file, f.text])),
        });
        // vLLM's own port is never a metrics port.
        assert.ok(!metricsPortsOf(trainer).some((p) => p.endsWith(":8000")));

        const ingress = pods.find((p) => role(p) === "vllm-ingress")!;
        assert.deepEqual(metricsPortsOf(ingress), ["nginx-exporter:metrics-nginx:9113", "log-metrics:metrics-log:3903"]);
        const [nginx, exporter, mtail] = ingress.spec.containers;
        assert.deepEqual(exporter.args, ["--nginx.scrape-uri=http://127.0.0.1:9114/stub_status", "--web.listen-address=:9113"]);
        assert.equal(mtail.image, MTAIL);
        assert.deepEqual(mtail.args, [
            "--progs",
            "/opt/agentrl/observability",
            "--logs",
            "/var/log/agentrl-ingress/access.json",
            "--port",
            "3903",
            "--logtostderr",
            "--emit_prog_label=false",
        ]);
        const logVolume = ingress.spec.volumes.find((v: any) => v.name === "access-log");
        assert.ok(logVolume.emptyDir.sizeLimit, "the access log's emptyDir is bounded");
        // nginx runs under the access log's rotation (64 MiB, every 10 s; the shell execs nginx), which keeps the file below it.
        assert.deepEqual(nginx.command.slice(0, 2), ["sh", "-c"]);
        assert.deepEqual(nginx.command.slice(3), [
            "rotate-access-log",
            "/var/log/agentrl-ingress/access.json",
            String(64 * 1024 * 1024),
            "10",
            "nginx",
            "-e",
            "stderr",
            "-c",
            "/etc/nginx/ingress/nginx.conf",
            "-g",
            "daemon off;",
        ]);
        assert.deepEqual(
            nginx.volumeMounts.find((m: any) => m.name === "access-log"),
            { name: "access-log", mountPath: "/var/log/agentrl-ingress" },
            "nginx writes the log",
        );
        assert.deepEqual(
            mtail.volumeMounts.find((m: any) => m.name === "access-log"),
            { name: "access-log", mountPath: "/var/log/agentrl-ingress", readOnly: true },
        );
    });

    test("opencode-blackbox-32b: the listener in vLLM's own pod; the trainer pods serve the trainer's port only", async () => {
        const ms = await manifestsOf(configOf("opencode-blackbox-32b", ON, "gpu-team"));
        const pods = podsOf(ms);
        assert.deepEqual(metricsPortsOf(pods.find((p) => p.kind === "JobSet/vllm")!), ["vllm-metrics:metrics-vllm:9400"]);
        assert.deepEqual(metricsPortsOf(pods.find((p) => p.kind === "JobSet/node")!), ["trainer:metrics-trainer:9401"]);
        const vllmPod = pods.find((p) => p.kind === "JobSet/vllm")!;
        assert.equal(vllmPod.spec.initContainers[0].restartPolicy, "Always");
        assert.ok(vllmPod.spec.volumes.some((v: any) => v.name === "metrics-programs"));
    });

    test("gpuSharing isolated: the listener before vLLM's own sidecar, so it never waits for the model", async () => {
        const ms = await manifestsOf(configOf("opencode-blackbox", { ...ON, training: { gpuSharing: "isolated" } }));
        const trainer = podsOf(ms).find((p) => role(p) === "trainer")!;
        assert.deepEqual(
            trainer.spec.initContainers.map((c: any) => c.name),
            ["vllm-metrics", "vllm"],
        );
    });

    for (const recipe of ALL_RECIPE_NAMES) {
        test(`${recipe}: port names fit (IANA_SVC_NAME, <= 15), pods in restricted namespaces stay restricted, every object passes the 1.36 schema`, async () => {
            const config = configOf(recipe, ON, recipe.includes("32b") ? "gpu-team" : "staging");
            const ms = await manifestsOf(config);
            const restricted = new Set(
                ms
                    .filter((m) => m.kind === "Namespace" && POD_SECURITY[m.metadata.labels["agentrl.dev/role"] as keyof typeof POD_SECURITY] === "restricted")
                    .map((m) => m.metadata.name),
            );
            for (const p of podsOf(ms)) {
                for (const c of containersOf(p)) {
                    for (const port of c.ports ?? [])
                        assert.match(port.name, /^(?=.{1,15}$)[a-z0-9]([a-z0-9-]*[a-z0-9])?$/, `${p.name}/${c.name}: ${port.name}`);
                    if (!String(c.name).includes("metrics") && !["nginx-exporter", "log-metrics", "vllm-metrics", "session-metrics"].includes(c.name)) continue;
                    const sc = c.securityContext;
                    assert.equal(sc.runAsNonRoot, true, `${p.name}/${c.name}`);
                    assert.equal(sc.readOnlyRootFilesystem, true, `${p.name}/${c.name}`);
                    assert.equal(sc.allowPrivilegeEscalation, false, `${p.name}/${c.name}`);
                    assert.deepEqual(sc.capabilities.drop, ["ALL"], `${p.name}/${c.name}`);
                    assert.equal(sc.seccompProfile.type, "RuntimeDefault", `${p.name}/${c.name}`);
                    assert.deepEqual(c.resources.requests, c.resources.limits, `${p.name}/${c.name}: requests = limits`);
                }
                if (restricted.has(p.namespace)) {
                    for (const c of containersOf(p)) {
                        assert.equal(c.securityContext?.runAsNonRoot ?? p.spec.securityContext?.runAsNonRoot, true, `${p.name}/${c.name}`);
                        assert.equal(c.securityContext?.allowPrivilegeEscalation, false, `${p.name}/${c.name}`);
                        assert.deepEqual(c.securityContext?.capabilities?.drop, ["ALL"], `${p.name}/${c.name}`);
                    }
                }
            }
            // Kubernetes' own kinds (the CRDs' objects are the API server test's: apiserver-plans).
            const core = ms.filter(
                (m) =>
                    !String(m.apiVersion).includes(".") ||
                    (String(m.apiVersion).split("/")[0]!.endsWith(".k8s.io") && !String(m.apiVersion).includes("x-k8s.io")),
            );
            const problems = core.flatMap((m) => validateManifestStrict(m).map((x) => `${m.kind} ${m.metadata?.name}: ${x}`));
            assert.deepEqual(problems, []);
        });
    }
});

describe("observability: the refusals, each with its message", () => {
    const cases: Array<{ what: string; raw: Record<string, unknown>; stack?: string; message?: string; messages?: string[] }> = [
        {
            what: "form annotations on the docker target",
            raw: {
                recipe: "wordle-whitebox",
                runId: "r1",
                target: { kind: "docker" },
                observability: { enabled: true, form: "annotations" },
                images: { mtail: MTAIL },
            },
            stack: "dev",
            messages: [
                "observability.form: 'annotations' are prometheus.io/* pod annotations, which only a Kubernetes Prometheus reads (the docker target has no pods): remove form",
            ],
        },
        {
            what: "the Docker host-port base on the kubernetes target",
            raw: { recipe: "mbpp-whitebox", runId: "r1", target: K8S, observability: { enabled: true, hostPortBase: 20000 } },
            message:
                "observability.hostPortBase: not carried out on the kubernetes target: it places the metrics ports on a Docker host's loopback: on Kubernetes Prometheus scrapes the pods' metrics ports: remove it",
        },
        {
            what: "the scraper in one of the stack's own namespaces",
            raw: {
                recipe: "opencode-blackbox",
                runId: "r1",
                target: K8S,
                observability: { enabled: true, scraper: { namespace: "arl-staging-sandboxes" } },
                images: { mtail: MTAIL },
            },
            message:
                "observability.scraper.namespace: 'arl-staging-sandboxes' is this stack's own sandboxes namespace, so the scrape rule would admit the stack's own pods that carry the scraper's labels to every metrics port: run Prometheus in a namespace of its own (default monitoring) and name it here",
        },
        {
            what: "no scraper labels",
            raw: { recipe: "mbpp-whitebox", runId: "r1", target: K8S, observability: { enabled: true, scraper: { podLabels: {} } } },
            message:
                "observability.scraper.podLabels: empty, which would admit every pod of namespace monitoring to the metrics ports: set the Prometheus pods' labels (kubectl get pods -n monitoring --show-labels; the Operator's carry app.kubernetes.io/name: prometheus)",
        },
        {
            what: "monitor labels with form annotations",
            raw: {
                recipe: "mbpp-whitebox",
                runId: "r1",
                target: K8S,
                observability: { enabled: true, form: "annotations", monitorLabels: { release: "prom" } },
            },
            message:
                "observability.monitorLabels: they label PodMonitors and PrometheusRules, which form 'annotations' does not make (the pods carry prometheus.io/* annotations instead): remove monitorLabels, or set form to operator",
        },
        {
            what: "no mtail image with the ingress",
            raw: { recipe: "opencode-blackbox", runId: "r1", target: K8S, observability: { enabled: true } },
            message:
                "images.mtail: required with observability on and the ingress deployed: mtail turns the ingress's JSON access log into its per-status and per-key series, and google/mtail publishes binaries only, no image: npm run images -- <stack> --to <registry>/<path> builds mtail (images/mtail/Dockerfile; docs/guides/images.md), pushes it and sets images.mtail by digest (Debian bookworm's mtail, its binary at /usr/bin/mtail)",
        },
        {
            what: "the scraper on the docker target",
            raw: { recipe: "mbpp-whitebox", runId: "r1", target: { kind: "docker" }, observability: { enabled: true, scraper: { namespace: "prom" } } },
            stack: "dev",
            messages: [
                "observability.scraper: not carried out on the docker target: the docker target writes no NetworkPolicy to admit a scraper (they are Kubernetes objects): remove it",
            ],
        },
        {
            what: "monitor labels on the docker target",
            raw: { recipe: "mbpp-whitebox", runId: "r1", target: { kind: "docker" }, observability: { enabled: true, monitorLabels: { release: "prom" } } },
            stack: "dev",
            messages: [
                "observability.monitorLabels: not carried out on the docker target: the docker target makes no PodMonitor or PrometheusRule to label (they are Prometheus Operator objects on Kubernetes): remove it",
            ],
        },
    ];
    for (const c of cases) {
        test(c.what, () => {
            assert.deepEqual(
                configProblems(() => parseWithTestImages(c.raw, c.stack ?? "staging")),
                c.messages ?? [c.message!],
            );
        });
    }

    test("prod pins the sidecars' images too", () => {
        const problems = configProblems(() => configOf("opencode-blackbox", ON, "prod"));
        assert.ok(
            problems.some((p) => p.startsWith("images.nginxExporter: prod stacks pin every image by digest, got 'nginx/nginx-prometheus-exporter:1.4.0'")),
            problems.join("\n"),
        );
        assert.ok(
            problems.some((p) => p.startsWith(`images.mtail: prod stacks pin every image by digest, got '${MTAIL}'`)),
            problems.join("\n"),
        );
    });

    test("without programs given, the Platform hands down the project's own (components/observability)", () => {
        const plan = resolvePlatform(configOf("opencode-blackbox", ON), { hfToken: false }, {});
        const own = projectMetricsPrograms();
        assert.deepEqual(
            plan.training.programs?.files.slice(1),
            roleRunnerFiles(),
            "the training node's own role runner and its module, beside the listener's config",
        );
        assert.equal(plan.training.metrics?.vllm?.files[0]?.text, own.vllmListener.text);
        assert.equal(plan.ingress?.metrics?.log.files[0]?.text, programText(INGRESS_MTAIL));
        for (const e of plan.envs) if (e.kind === "deployed") assert.equal(e.metrics?.sessions.files[0]?.text, programText(SESSION_COUNTER));
        assert.match(plan.ingress!.configText, /access_log \/var\/log\/agentrl-ingress\/access\.json ingress;/);
        assert.match(plan.ingress!.configText, /listen 127\.0\.0\.1:9114;/);
    });
});

describe("observability: monitors", () => {
    /** The pods a PodMonitor's selector picks in its namespace. */
    const selected = (ms: ReadonlyArray<Record<string, any>>, pm: Record<string, any>) =>
        podsOf(ms).filter((p) => p.namespace === pm.metadata.namespace && Object.entries(pm.spec.selector.matchLabels).every(([k, v]) => p.labels[k] === v));

    for (const recipe of ALL_RECIPE_NAMES) {
        test(`${recipe}, form operator: one PodMonitor per scraped pod group, selecting those pods by their own labels and scraping ports they name`, async () => {
            const config = configOf(
                recipe,
                { ...ON, observability: { enabled: true, monitorLabels: { release: "prom" }, scrapeInterval: "15s" } },
                recipe.includes("32b") ? "gpu-team" : "staging",
            );
            const ms = await manifestsOf(config);
            const monitors = ms.filter((m) => m.kind === "PodMonitor");
            assert.ok(monitors.length >= 1);
            for (const pm of monitors) {
                assert.equal(pm.apiVersion, "monitoring.coreos.com/v1");
                assert.deepEqual(pm.metadata.labels, { release: "prom", "app.kubernetes.io/part-of": "agent-rl-infra" });
                assert.equal(pm.spec.jobLabel, "app.kubernetes.io/name");
                const pods = selected(ms, pm);
                assert.equal(pods.length, 1, `${pm.metadata.name} selects one pod group`);
                const declared = metricsPortsOf(pods[0]!).map((p) => p.split(":")[1]);
                assert.deepEqual(
                    pm.spec.podMetricsEndpoints.map((e: any) => e.port),
                    declared,
                    `${pm.metadata.name}: every metrics port of its pods, and only those`,
                );
                // The run stack's pod label, copied onto every target (a team's run stacks share its namespaces).
                assert.equal(pods[0]!.labels[STACK_POD_LABEL], resolvePlatform(config, { hfToken: false }).names.prefix, `${pm.metadata.name}'s pods`);
                for (const e of pm.spec.podMetricsEndpoints) {
                    assert.equal(e.path, "/metrics");
                    assert.equal(e.interval, "15s");
                    assert.deepEqual(e.relabelings, [{ sourceLabels: ["__meta_kubernetes_pod_label_agentrl_dev_stack"], targetLabel: "agentrl_stack" }]);
                }
            }
            // Against the Operator's v1 schema (the fields the project relies on: test/helpers/crd-schema.ts).
            assert.deepEqual(
                monitors.flatMap((pm) => validateCustomResource(pm)),
                [],
            );
            // Every pod group with a metrics port has its monitor.
            const watched = new Set(monitors.flatMap((pm) => selected(ms, pm).map((p) => `${p.kind}/${p.name}`)));
            for (const p of podsOf(ms)) if (metricsPortsOf(p).length > 0) assert.ok(watched.has(`${p.kind}/${p.name}`), `${p.kind} ${p.name} has no monitor`);
        });
    }

    test("the PodMonitor schema check refuses what the Operator's CRD would (a bad interval, an unknown field, no selector)", async () => {
        const pm = (await manifestsOf(configOf("mbpp-whitebox", ON))).find((m) => m.kind === "PodMonitor")!;
        const broken = (f: (o: any) => void) => {
            const o = structuredClone(pm);
            f(o);
            return validateCustomResource(o).join("\n");
        };
        assert.match(
            broken((o) => (o.spec.podMetricsEndpoints[0].interval = "30 seconds")),
            /interval/,
        );
        assert.match(
            broken((o) => (o.spec.podMetricsEndpoints[0].portName = "x")),
            /unknown field "portName"/,
        );
        assert.match(
            broken((o) => delete o.spec.selector),
            /selector/,
        );
    });

    test("form annotations: no PodMonitor; prometheus.io/scrape and path on every scraped pod, prometheus.io/port only where it has one metrics port", async () => {
        const ms = await manifestsOf(configOf("opencode-blackbox", { ...ON, observability: { enabled: true, form: "annotations" } }));
        assert.deepEqual(
            ms.filter((m) => m.kind === "PodMonitor"),
            [],
        );
        // The documented scrape job copies this label onto every target (docs/guides/observability.md).
        for (const p of podsOf(ms)) if (metricsPortsOf(p).length > 0) assert.equal(p.labels[STACK_POD_LABEL], "arl-staging", `${p.kind} ${p.name}`);
        const annotationsOf = (kind: string, r: string) => {
            const m = ms.find((x) => x.kind === kind && x.spec.template.metadata.labels["app.kubernetes.io/name"] === r)!;
            return Object.fromEntries(Object.entries(m.spec.template.metadata.annotations ?? {}).filter(([k]) => k.startsWith("prometheus.io/")));
        };
        // Two metrics ports each (vLLM's listener and the trainer's; the exporter and mtail): no port annotation.
        assert.deepEqual(annotationsOf("Job", "trainer"), { "prometheus.io/scrape": "true", "prometheus.io/path": "/metrics" });
        assert.deepEqual(annotationsOf("Deployment", "vllm-ingress"), { "prometheus.io/scrape": "true", "prometheus.io/path": "/metrics" });
        const env = await manifestsOf(configOf("mbpp-whitebox", { observability: { enabled: true, form: "annotations" } }));
        const replicas = env.find((m) => m.kind === "StatefulSet")!;
        assert.deepEqual(replicas.spec.template.metadata.annotations, {
            "prometheus.io/scrape": "true",
            "prometheus.io/path": "/metrics",
            "prometheus.io/port": "9402",
        });
        const router = env.find((m) => m.kind === "Deployment" && m.spec.template.metadata.labels["app.kubernetes.io/name"] === "env-router")!;
        assert.equal(router.spec.template.metadata.annotations["prometheus.io/port"], "9403");
    });

    test("switching the form is a new Job name (its pod template's annotations are in the hash), never the old Job replaced under its own name", async () => {
        const jobName = async (form: string) =>
            (await manifestsOf(configOf("opencode-blackbox", { ...ON, observability: { enabled: true, form } }))).find((m) => m.kind === "Job")!.metadata.name;
        assert.notEqual(await jobName("annotations"), await jobName("operator"));
    });

    test("form operator: the pods carry no prometheus.io annotation", async () => {
        const ms = await manifestsOf(configOf("opencode-blackbox", ON));
        assert.equal(JSON.stringify(ms).includes("prometheus.io/"), false);
    });
});

describe("observability: the cluster stack's PodMonitor for agent-sandbox's controller", () => {
    const CLUSTER = { target: { kind: "kubernetes", context: "test" } };
    const run = async (raw: Record<string, unknown>) => {
        const r = await runUnderMocks(
            async () => {
                const base = new ClusterBase("agentrl", { config: parseClusterConfig(raw) });
                return { ...base.outputs };
            },
            { stack: "cluster" },
        );
        assert.equal(r.error, undefined, String(r.error));
        return manifests(r.resources).filter((m) => m.kind === "PodMonitor");
    };

    test("on, with agent-sandbox installed: the controller's metrics port (v1.0.1 k8s/controller.yaml, as v0.5.6) in agent-sandbox-system", async () => {
        const [pm, ...rest] = await run({ ...CLUSTER, observability: { enabled: true, monitorLabels: { release: "prom" } } });
        assert.deepEqual(rest, []);
        assert.deepEqual(pm!.metadata, {
            name: "agent-sandbox-controller",
            namespace: "agent-sandbox-system",
            labels: { release: "prom", "app.kubernetes.io/part-of": "agent-rl-infra", "app.kubernetes.io/component": "cluster" },
        });
        assert.deepEqual(pm!.spec, {
            jobLabel: "app",
            selector: { matchLabels: { app: "agent-sandbox-controller" } },
            podMetricsEndpoints: [{ port: "metrics", path: "/metrics", interval: "30s" }],
        });
    });

    test("off, or agent-sandbox not installed by this stack: none", async () => {
        assert.deepEqual(await run(CLUSTER), []);
        assert.deepEqual(await run({ ...CLUSTER, agentSandbox: { install: false }, observability: { enabled: true } }), []);
    });
});

describe("observability: the offline plan of the staging stack", () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-obs-plan-"));
    after(() => fs.rmSync(tmp, { recursive: true, force: true }));

    test("on: plan.md's Metrics section lists every metrics port with its PodMonitor, and the manifests hold the monitors", async () => {
        const outDir = path.join(tmp, "on");
        const r = await planToDir(
            { stack: "staging" },
            { outDir, platformOverride: { observability: { enabled: true, monitorLabels: { release: "prom" } }, images: { mtail: TEST_MTAIL_IMAGE } } },
        );
        assert.deepEqual(
            r.manifests.filter((m) => m.kind === "PodMonitor").map((m) => `${m.metadata.namespace}/${m.metadata.name}`),
            ["arl-staging-ingress/vllm-ingress-metrics", "arl-staging-training/train-stg-001-metrics"].sort(),
        );
        const md = fs.readFileSync(path.join(outDir, "plan.md"), "utf8");
        const section = md.slice(md.indexOf("## Metrics"), md.indexOf("## Capacity checks"));
        for (const row of [
            "| trainer | arl-staging-training | `vllm-metrics` | metrics-vllm 9400/metrics | vLLM /metrics through a GET /metrics-only nginx | train-stg-001-metrics |",
            "| trainer | arl-staging-training | `trainer` | metrics-trainer 9401/metrics | the training supervisor | train-stg-001-metrics |",
            "| vllm-ingress | arl-staging-ingress | `nginx-exporter` | metrics-nginx 9113/metrics | nginx-prometheus-exporter over stub_status | vllm-ingress-metrics |",
            "| vllm-ingress | arl-staging-ingress | `log-metrics` | metrics-log 3903/metrics | mtail over the ingress's JSON access log | vllm-ingress-metrics |",
        ])
            assert.ok(section.includes(row), `plan.md lacks ${row}:\n${section}`);
        assert.match(
            section,
            /namespace `monitoring` \(the NetworkPolicies admit them on these ports only\), every 30s, through the PodMonitors below \(labels `release=prom`\)/,
        );
    });

    test("off (the stack as written): no Metrics section, no monitor", async () => {
        const outDir = path.join(tmp, "off");
        const r = await planToDir({ stack: "staging" }, { outDir });
        assert.equal(r.manifests.filter((m) => m.kind === "PodMonitor").length, 0);
        assert.equal(fs.readFileSync(path.join(outDir, "plan.md"), "utf8").includes("## Metrics"), false);
    });
});

describe("observability: the preflight counts the sidecars", () => {
    test("the training pod's requests (GPU-node fit, quota headroom) hold vLLM's metrics listener, as the rendered pod does", async () => {
        for (const recipe of ["opencode-blackbox", "opencode-blackbox-32b"]) {
            const stack = recipe.includes("32b") ? "gpu-team" : "staging";
            const on = resolvePlatform(configOf(recipe, ON, stack), { hfToken: false }, { metricsPrograms: STAND_IN_PROGRAMS });
            const off = resolvePlatform(configOf(recipe, {}, stack));
            const cpu = (p: typeof on) => quantityValue(stackRequests(p)[p.training.namespace]!["requests.cpu"]!);
            const mem = (p: typeof on) => quantityValue(stackRequests(p)[p.training.namespace]!["requests.memory"]!);
            assert.equal(Math.round((cpu(on) - cpu(off)) * 1000), 100, `${recipe}: the listener's 100m`);
            assert.equal(mem(on) - mem(off), 64 * 2 ** 20, `${recipe}: the listener's 64Mi`);
        }
    });
});

describe("observability: the policy pack passes the observed stack", () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-obs-policy-"));
    after(() => fs.rmSync(tmp, { recursive: true, force: true }));
    for (const [label, stack, override] of [
        ["staging, form operator", "staging", {}],
        ["staging, form annotations, gpuSharing isolated", "staging", { observability: { form: "annotations" }, training: { gpuSharing: "isolated" } }],
    ] as const) {
        test(`${label}: zero violations (the listener is no vLLM container; every sidecar hardened, limits set)`, async () => {
            const r = await planToDir(
                { stack },
                {
                    outDir: path.join(tmp, label.replace(/[^a-z0-9]+/gi, "-")),
                    platformOverride: deepMerge({ observability: { enabled: true }, images: { mtail: TEST_MTAIL_IMAGE } }, override) as Record<string, unknown>,
                    secrets: { hfToken: "hf_test" },
                },
            );
            const violations = await runPolicies(policyResources(r.resources), { config: {}, stack });
            assert.deepEqual(
                violations.map((v) => `[${v.policy}] ${v.message}`),
                [],
            );
        });
    }
});
