// EnvSpace under Pulumi mocks, per target: replicas, env vars, probes, disruption budgets, the
// router (its config is exactly renderRouterConfig of the description), Services, NetworkPolicies,
// URL outputs, the session cap of envs without concurrent sessions, external envs, a resource
// count flat in the replicas (Kubernetes), and every Kubernetes object against the 1.36 schema.
// Run: node --import tsx --test test/env/env-space.test.ts
import { describe, test, before } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { CATALOG_NAMES, COLOCATE_WS_PING, ENV_CATALOG, OPENENV_UPSTREAM, tagCheckCommand, UVICORN_WS_PING } from "../../components/config/catalog";
import { ConfigError } from "../../components/config/errors";
import { configProblems, parseWithTestImages as parsePlatformConfig } from "../helpers/config";
import { platformNames, podLabels, type PlatformNames } from "../../components/config/names";
import type { PlatformConfig, ResolvedEnv } from "../../components/config/types";
import { EnvSpace, nginxImageSupportsResolve, resolveEnvSpace, type DeployedEnvDescription, type EnvDescription } from "../../components/env";
import { ROUTER_HEALTH_PATH, renderRouterConfig, routerCommand, statefulSetReplicaAddresses } from "../../components/env/router";
import { loadManifestSchemas, validateManifestStrict } from "../helpers/k8s-schema";
import { manifests } from "../helpers/manifests";
import { dockerEnv, ofType, runBoth, single, type MockRunResult } from "../helpers/mock";
import { LOCK_VENV_HINT, lockVenvPython } from "../helpers/stub-env";

type Target = "kubernetes" | "docker";
type Recipe = "wordle-whitebox" | "mbpp-whitebox";

const T = {
    sts: "kubernetes:apps/v1:StatefulSet",
    deployment: "kubernetes:apps/v1:Deployment",
    service: "kubernetes:core/v1:Service",
    configMap: "kubernetes:core/v1:ConfigMap",
    pdb: "kubernetes:policy/v1:PodDisruptionBudget",
    netpol: "kubernetes:networking.k8s.io/v1:NetworkPolicy",
    container: "docker:index/container:Container",
    image: "docker:index/remoteImage:RemoteImage",
};

/** Which env each recipe deploys, and what it must get. */
const RECIPE_ENV: Record<
    Recipe,
    { env: string; k: number; replicas: number; demand: number; settings: Record<string, string>; nonRootEnv: Record<string, string> }
> = {
    // 8 x 4 = 32 live sessions, 8 per replica: 4 + 1 headroom.
    "wordle-whitebox": {
        env: "wordle",
        k: 8,
        replicas: 5,
        demand: 32,
        settings: { TEXTARENA_ENV_ID: "Wordle-v0", TEXTARENA_NUM_PLAYERS: "1" },
        nonRootEnv: {},
    },
    // 8 x 2 = 16 live sessions, coding_env holds 1: 16 + 1 headroom.
    // Model code: uid 65532 by default, HOME on the scratch dir.
    "mbpp-whitebox": { env: "coding", k: 1, replicas: 17, demand: 16, settings: {}, nonRootEnv: { HOME: "/tmp" } },
};

function config(recipe: Recipe, target: Target, extra: Record<string, unknown> = {}): PlatformConfig {
    return parsePlatformConfig(
        { recipe, runId: "r1", target: target === "kubernetes" ? { kind: target, context: "test" } : { kind: target }, ...extra },
        "test",
    );
}

function envOf(c: PlatformConfig, name: string): ResolvedEnv {
    const e = c.envs.find((x) => x.name === name);
    assert.ok(e, `env ${name} in config`);
    return e;
}

function describeEnv(c: PlatformConfig, name: string, names: PlatformNames = platformNames(c)): EnvDescription {
    return resolveEnvSpace(c, envOf(c, name), names);
}

function deployed(d: EnvDescription): DeployedEnvDescription {
    assert.equal(d.kind, "deployed");
    return d as DeployedEnvDescription;
}

async function build(c: PlatformConfig, envName: string) {
    const names = platformNames(c);
    const description = describeEnv(c, envName, names);
    let space: EnvSpace | undefined;
    const runs = await runBoth(() => {
        space = new EnvSpace(`env-${envName}`, { description, network: c.target.kind === "docker" ? names.networks.training : undefined });
        return { url: space.url, wsUrl: space.wsUrl };
    });
    return { ...runs, names, description, space: space! };
}

/** What both recipes (layout whitebox-colocate) render for the server keepalive. */
const COLOCATE_PING_ENV = { UVICORN_WS_PING_INTERVAL: "60", UVICORN_WS_PING_TIMEOUT: "300" };
const custom = (run: MockRunResult) => run.resources.filter((r) => r.custom);
const envList = (c: any): Record<string, string> => Object.fromEntries((c.env ?? []).map((e: any) => [e.name, e.value]));
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** Shared checks of a rendered router config: least_conn, a cap of k on every replica in a shared zone, websockets, long reads. */
function assertRouterConfig(text: string, d: DeployedEnvDescription, resolver: string): void {
    assert.equal(text, renderRouterConfig(d.router.settings), "the config is exactly renderRouterConfig of the description's settings");
    assert.equal((text.match(/^\s*least_conn;/gm) ?? []).length, 2, "least_conn in both upstreams");
    assert.match(text, /upstream env_sessions \{\n\s*zone env_sessions \d+k;/, "the capped upstream lives in a shared zone");
    for (const address of d.router.settings.replicas) {
        assert.ok(
            text.includes(`server ${address} resolve max_conns=${d.capacity.sessionsPerReplica} `),
            `${address} capped at k=${d.capacity.sessionsPerReplica} and re-resolved`,
        );
    }
    assert.equal((text.match(/ max_conns=/g) ?? []).length, d.replicas.count, "one capped server per replica");
    assert.match(text, /proxy_set_header Upgrade \$http_upgrade;/);
    assert.match(text, /proxy_set_header Connection \$connection_upgrade;/);
    assert.match(text, /proxy_read_timeout 3600s;/);
    assert.ok(text.includes(`resolver ${resolver} valid=10s ipv6=off;`), `resolver ${resolver}`);
    assert.match(text, new RegExp(`listen 0\\.0\\.0\\.0:${d.router.port} reuseport;`));
}

before(async () => {
    await loadManifestSchemas();
});

describe("resolveEnvSpace", () => {
    test("Wordle: 8 sessions per replica, TEXTARENA settings, web UI off, 4 + 1 replicas, URLs of the router", () => {
        const c = config("wordle-whitebox", "kubernetes");
        const names = platformNames(c);
        const d = deployed(describeEnv(c, "wordle", names));
        assert.deepEqual(d.replicas.env, {
            TEXTARENA_ENV_ID: "Wordle-v0",
            TEXTARENA_NUM_PLAYERS: "1",
            ENABLE_WEB_INTERFACE: "false",
            MAX_CONCURRENT_ENVS: "8",
            // Colocated recipe: the relaxed server keepalive (COLOCATE_WS_PING).
            UVICORN_WS_PING_INTERVAL: "60",
            UVICORN_WS_PING_TIMEOUT: "300",
        });
        assert.equal(d.replicas.count, 5);
        assert.equal(d.replicas.port, 8000);
        assert.deepEqual(d.capacity, {
            deployed: true,
            replicas: 5,
            sessionsPerReplica: 8,
            sessions: 40,
            demand: 32,
            generationBatch: 32,
            evalBatch: 0,
            headroomReplicas: 1,
            required: 40,
            spareSessions: 8,
        });
        assert.equal(d.url, names.envs.wordle!.url);
        assert.equal(d.url, "http://env-wordle.arl-test-envs.svc.cluster.local:8000");
        assert.equal(d.wsUrl, "ws://env-wordle.arl-test-envs.svc.cluster.local:8000/ws");
        assert.deepEqual(
            d.router.settings.replicas,
            statefulSetReplicaAddresses({ statefulSet: "env-wordle-replica", headlessService: "env-wordle-replicas", namespace: "arl-test-envs", replicas: 5 }),
        );
        assert.equal(d.router.settings.resolver, "kube-dns.kube-system.svc.cluster.local");
        assert.equal(d.router.settings.sessionsPerReplica, 8);
        assert.equal(d.router.image, "nginxinc/nginx-unprivileged:1.27-alpine");
        // A tag may move: pull on every start; the image is only trusted as-is when pinned by digest.
        assert.equal(d.router.imagePullPolicy, "Always");
    });

    test("MBPP coding env: never MAX_CONCURRENT_ENVS above 1; 16 + 1 replicas of one session", () => {
        const d = deployed(describeEnv(config("mbpp-whitebox", "kubernetes"), "coding"));
        assert.equal(d.replicas.env.MAX_CONCURRENT_ENVS, "1");
        assert.equal(d.replicas.env.ENABLE_WEB_INTERFACE, "false");
        assert.equal(d.router.settings.sessionsPerReplica, 1);
        assert.equal(d.capacity.sessionsPerReplica, 1);
        assert.equal(d.replicas.count, 17);
        assert.equal(d.capacity.sessions, 17);
        assert.equal(d.capacity.demand, 16, "max(generation 16, eval 8)");
        assert.equal(d.capacity.evalBatch, 8);
    });

    test("a custom env without concurrent sessions gets MAX_CONCURRENT_ENVS=1 and a router cap of 1", () => {
        const image = `ghcr.io/acme/my-env@sha256:${"a".repeat(64)}`;
        const c = config("mbpp-whitebox", "kubernetes", { envs: { coding: { catalog: "custom", image, concurrentSessions: false, sessionsPerReplica: 1 } } });
        const d = deployed(describeEnv(c, "coding"));
        assert.equal(d.replicas.env.MAX_CONCURRENT_ENVS, "1");
        assert.equal(d.router.settings.sessionsPerReplica, 1);
        assert.equal(d.replicas.imagePullPolicy, "IfNotPresent", "pinned by digest");
    });

    test("an env that cannot hold concurrent sessions is refused above 1, even when the config forces it", () => {
        // The coding catalog entry does not read MAX_CONCURRENT_ENVS: a config claiming otherwise must not raise it.
        // Config validation refuses it first, naming the field...
        assert.throws(
            () => config("mbpp-whitebox", "kubernetes", { envs: { coding: { catalog: "coding", concurrentSessions: true, sessionsPerReplica: 8 } } }),
            (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.startsWith("envs.coding.concurrentSessions: only a custom env declares it")),
        );
        // ...and the component's own resolve step holds even for a resolved env forged past it.
        const base = config("mbpp-whitebox", "kubernetes");
        const forced: ResolvedEnv = { ...envOf(base, "coding"), concurrentSessions: true, sessionsPerReplica: 8 };
        assert.throws(
            () => resolveEnvSpace(base, forced, platformNames(base)),
            (e: unknown) =>
                e instanceof ConfigError &&
                e.problems.length === 1 &&
                e.problems[0] ===
                    "envs.coding.concurrentSessions: only a custom env declares it; the coding env's is known from its server (one session per process): remove the field",
        );
        // A resolved env that slipped past config validation (concurrentSessions false, 4 sessions).
        const c = config("mbpp-whitebox", "kubernetes");
        const env: ResolvedEnv = { ...envOf(c, "coding"), catalog: "custom", concurrentSessions: false, sessionsPerReplica: 4, sessionsFromConfig: true };
        assert.throws(
            () => resolveEnvSpace(c, env, platformNames(c)),
            (e: unknown) =>
                e instanceof ConfigError &&
                e.problems.length === 1 &&
                e.problems[0]!.startsWith(
                    "envs.coding.sessionsPerReplica: the custom env serves one session per process (it cannot serve concurrent sessions), got 4",
                ),
        );
    });

    test("a setting from an existing Kubernetes Secret: a secretKeyRef in the replica's env, its value nowhere; reserved names refused there too", async () => {
        const ref = { secretKeyRef: { name: "coding-db", key: "password" } };
        const c = config("mbpp-whitebox", "kubernetes", { envs: { coding: { settings: { DB_PASSWORD: ref, DB_HOST: "db" } } } });
        assert.deepEqual(envOf(c, "coding").secretSettings, { DB_PASSWORD: ref.secretKeyRef });
        assert.equal(envOf(c, "coding").settings.DB_PASSWORD, undefined);
        const b = await build(c, "coding");
        const container = single(b.update.resources, T.sts).inputs.spec.template.spec.containers[0];
        const entry = container.env.find((e: { name: string }) => e.name === "DB_PASSWORD");
        assert.deepEqual(entry, { name: "DB_PASSWORD", valueFrom: { secretKeyRef: ref.secretKeyRef } });
        assert.equal(envList(container).DB_HOST, "db");
        const names = container.env.map((e: { name: string }) => e.name);
        assert.deepEqual(names, [...names].sort(), "env sorted by name, references among them");
        for (const m of manifests(b.update.resources)) assert.deepEqual(validateManifestStrict(m), [], m.kind);
        assert.deepEqual(
            configProblems(() =>
                config("wordle-whitebox", "kubernetes", { envs: { wordle: { catalog: "textarena", settings: { MAX_CONCURRENT_ENVS: ref } } } }),
            ),
            [
                "envs.wordle.settings.MAX_CONCURRENT_ENVS: the session cap is set from sessionsPerReplica (the router caps each replica at the same number): remove it and set envs.wordle.sessionsPerReplica",
            ],
        );
    });

    test("settings may not set the session cap or the web UI: each problem names the field, all at once", () => {
        const reserved = [
            "envs.wordle.settings.MAX_CONCURRENT_ENVS: the session cap is set from sessionsPerReplica (the router caps each replica at the same number): remove it and set envs.wordle.sessionsPerReplica",
            "envs.wordle.settings.ENABLE_WEB_INTERFACE: the web UI stays off in training deployments: remove it",
        ];
        const settings = { MAX_CONCURRENT_ENVS: "64", ENABLE_WEB_INTERFACE: "true" };
        // Config validation refuses them (the session rule, components/config/env-sessions.ts)...
        assert.deepEqual(
            configProblems(() => config("wordle-whitebox", "kubernetes", { envs: { wordle: { catalog: "textarena", settings } } })),
            reserved,
        );
        // ...and the component's own resolve step, with the same messages, for a resolved env forged past it.
        const c = config("wordle-whitebox", "kubernetes", { images: { nginx: "nginx:1.25-alpine" } });
        const forged: ResolvedEnv = { ...envOf(c, "wordle"), settings: { ...envOf(c, "wordle").settings, ...settings } };
        assert.deepEqual(
            configProblems(() => resolveEnvSpace(c, forged, platformNames(c))),
            [
                ...reserved,
                `images.nginx: the env router re-resolves replica names with "server ... resolve", which needs nginx >= 1.27.3; 'nginx:1.25-alpine' is 1.25: use nginxinc/nginx-unprivileged:1.27-alpine or newer`,
            ],
        );
    });

    test("router settings are validated; a problem names the env and the field", () => {
        const c = config("wordle-whitebox", "kubernetes");
        const names = platformNames(c);
        const broken: PlatformNames = { ...names, envs: { ...names.envs, wordle: { ...names.envs.wordle!, replicas: "bad_name" } } };
        assert.throws(
            () => resolveEnvSpace(c, envOf(c, "wordle"), broken),
            (e: unknown) =>
                e instanceof ConfigError &&
                e.problems.length === 5 &&
                e.problems.every((p) =>
                    /^envs\.wordle router: replicas\[\d\] "bad_name-\d\.env-wordle-replicas\.arl-test-envs\.svc\.cluster\.local:8000": host "bad_name-\d\.[a-z.-]+" is not a DNS name/.test(
                        p,
                    ),
                ),
        );
    });

    test("nginx image tags: resolve needs >= 1.27.3; a floating 1.27 tag is the newest 1.27.x", () => {
        const cases: Array<[string, boolean]> = [
            ["nginxinc/nginx-unprivileged:1.27-alpine", true],
            ["nginx:1.27.3", true],
            ["nginx:1.27.2-alpine", false],
            ["nginx:1.26", false],
            ["nginx:1.28.0-alpine", true],
            ["nginxinc/nginx-unprivileged:stable-alpine", true],
            [`nginx@sha256:${"b".repeat(64)}`, true],
            [`nginx:1.22.1@sha256:${"b".repeat(64)}`, false],
            ["registry.local:5000/nginx", true],
            ["registry.local:5000/nginx:1.25", false],
        ];
        for (const [image, ok] of cases) assert.equal(nginxImageSupportsResolve(image), ok, image);
    });

    test("docker: replicas are containers <replicas>-<i> on the env's own network, resolved by Docker's DNS", () => {
        const c = config("wordle-whitebox", "docker");
        const names = platformNames(c);
        const d = deployed(describeEnv(c, "wordle", names));
        const n = names.envs.wordle!;
        assert.deepEqual(
            d.replicas.containerNames,
            [0, 1, 2, 3, 4].map((i) => `${n.replicas}-${i}`),
        );
        assert.deepEqual(
            d.router.settings.replicas,
            d.replicas.containerNames.map((x) => `${x}:8000`),
        );
        assert.equal(d.router.settings.resolver, "127.0.0.11");
        assert.equal(d.network, names.networks.training);
        assert.equal(d.replicaNetwork, `${n.routerService}-net`);
        assert.equal(d.url, `http://${n.routerService}:8000`);
        assert.equal(d.wsUrl, `ws://${n.routerService}:8000/ws`);
    });
});

for (const recipe of ["wordle-whitebox", "mbpp-whitebox"] as const) {
    const expected = RECIPE_ENV[recipe];

    describe(`${recipe} on kubernetes`, () => {
        let b: Awaited<ReturnType<typeof build>>;
        let d: DeployedEnvDescription;
        before(async () => {
            b = await build(config(recipe, "kubernetes"), expected.env);
            d = deployed(b.description);
        });

        test("nine objects: replicas, headless Service, router, its Service and config, two budgets, two policies; no HPA, no Service per replica", () => {
            for (const run of [b.update, b.preview]) {
                const types = custom(run)
                    .map((r) => r.type)
                    .sort();
                assert.deepEqual(types, [T.configMap, T.pdb, T.pdb, T.service, T.service, T.netpol, T.netpol, T.deployment, T.sts].sort());
                assert.ok(custom(run).every((r) => r.inputs.metadata.namespace === b.names.namespaces.envs));
                assert.ok(run.resources.every((r) => !r.type.includes("HorizontalPodAutoscaler")));
            }
            const component = single(b.update.resources, "agentrl:env:EnvSpace");
            assert.equal(component.name, `env-${expected.env}`);
        });

        test("StatefulSet: replicas from config, Parallel, one label object for selector and pods, headless serviceName", () => {
            const sts = single(b.update.resources, T.sts).inputs;
            const n = b.names.envs[expected.env]!;
            const labels = podLabels("env-replica", n.replicas);
            assert.equal(sts.metadata.name, n.replicas);
            assert.equal(sts.spec.replicas, expected.replicas);
            assert.equal(sts.spec.serviceName, n.headless);
            assert.equal(sts.spec.podManagementPolicy, "Parallel");
            assert.deepEqual(sts.spec.selector.matchLabels, labels);
            assert.deepEqual(sts.spec.template.metadata.labels, labels);
        });

        /** The replica pod template and its one container. */
        const replicaPod = () => {
            const pod = single(b.update.resources, T.sts).inputs.spec.template.spec;
            return { pod, container: pod.containers[0] };
        };

        test("replica pod: one container with the env's settings, web UI off, k concurrent sessions, on port 8000", () => {
            const { pod, container } = replicaPod();
            assert.equal(pod.containers.length, 1);
            assert.deepEqual(envList(container), {
                ...expected.settings,
                ...expected.nonRootEnv,
                ...COLOCATE_PING_ENV,
                ENABLE_WEB_INTERFACE: "false",
                MAX_CONCURRENT_ENVS: String(expected.k),
            });
            assert.ok(Number(envList(container).MAX_CONCURRENT_ENVS) <= (recipe === "mbpp-whitebox" ? 1 : 8));
            assert.deepEqual(container.ports, [{ name: "http", containerPort: 8000, protocol: "TCP" }]);
        });

        test("replica pod: probes on /health that allow a 10-minute first start and minutes of slowness; 300 s grace", () => {
            const { pod, container } = replicaPod();
            for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"])
                assert.deepEqual(container[probe].httpGet, { path: "/health", port: 8000 }, probe);
            assert.ok(container.livenessProbe.failureThreshold * container.livenessProbe.periodSeconds >= 300, "liveness tolerates minutes of slowness");
            assert.ok(container.startupProbe.failureThreshold * container.startupProbe.periodSeconds >= 600, "first start may take 10 minutes");
            assert.equal(pod.terminationGracePeriodSeconds, 300);
        });

        test("replica pod: requests = limits", () => {
            const { container } = replicaPod();
            assert.deepEqual(container.resources.requests, { cpu: "2", memory: "4Gi", "ephemeral-storage": "8Gi" });
            assert.deepEqual(container.resources.limits, container.resources.requests);
        });

        test("replica pod: hardened; the coding env (model code) runs as uid 65532 by default, Wordle as the image's user", () => {
            const { pod, container } = replicaPod();
            const runsCode = recipe === "mbpp-whitebox";
            assert.equal(pod.automountServiceAccountToken, false);
            // Model-written code never runs as root by default (envs.<name>.runAsNonRoot defaults to true there).
            assert.equal(pod.securityContext.runAsNonRoot, runsCode ? true : undefined, "OpenEnv images run as root unless made non-root");
            assert.equal(pod.securityContext.runAsUser, runsCode ? 65532 : undefined);
            assert.equal(pod.securityContext.runAsGroup, runsCode ? 65532 : undefined);
            assert.equal(pod.securityContext.fsGroup, runsCode ? 65532 : undefined, "fsGroup: the scratch emptyDir writable for that uid");
            assert.equal(container.securityContext.runAsNonRoot, runsCode ? true : undefined);
            assert.deepEqual(container.securityContext.capabilities, { drop: ["ALL"] });
            assert.equal(container.securityContext.allowPrivilegeEscalation, false);
            assert.deepEqual(container.securityContext.seccompProfile, { type: "RuntimeDefault" });
        });

        test("replica pod: the coding env gets a read-only root and a sized scratch dir; Wordle keeps a writable root", () => {
            const { pod, container } = replicaPod();
            // The coding env runs the model's code: read-only root, a sized scratch dir; Wordle keeps a writable root (NLTK data).
            const runsCode = recipe === "mbpp-whitebox";
            assert.equal(container.securityContext.readOnlyRootFilesystem, runsCode);
            assert.deepEqual(container.volumeMounts, runsCode ? [{ name: "scratch", mountPath: "/tmp" }] : undefined);
            assert.deepEqual(pod.volumes, runsCode ? [{ name: "scratch", emptyDir: { sizeLimit: "1Gi" } }] : undefined);
        });

        test("replica egress: DNS only for the coding env, DNS + public addresses for Wordle; never private ranges or the metadata service", () => {
            const n = b.names.envs[expected.env]!;
            const policy = ofType(b.update.resources, "kubernetes:networking.k8s.io/v1:NetworkPolicy").find(
                (p) => p.inputs.spec.podSelector.matchLabels["app.kubernetes.io/instance"] === n.replicas,
            )!.inputs.spec;
            assert.deepEqual(policy.policyTypes, ["Ingress", "Egress"]);
            assert.equal(policy.egress.length, recipe === "mbpp-whitebox" ? 1 : 2);
            assert.deepEqual(policy.egress[0].ports, [
                { protocol: "UDP", port: 53 },
                { protocol: "TCP", port: 53 },
            ]);
            if (recipe !== "mbpp-whitebox") {
                assert.equal(policy.egress[1].to[0].ipBlock.cidr, "0.0.0.0/0");
                for (const r of ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"])
                    assert.ok(policy.egress[1].to[0].ipBlock.except.includes(r), r);
            }
        });

        test("headless Service: clusterIP None, port 8000, only ready replicas published", () => {
            const n = b.names.envs[expected.env]!;
            const headless = ofType(b.update.resources, T.service).find((s) => s.inputs.metadata.name === n.headless)!.inputs.spec;
            assert.equal(headless.clusterIP, "None");
            assert.equal(headless.publishNotReadyAddresses, false);
            assert.deepEqual(headless.selector, podLabels("env-replica", n.replicas));
            assert.deepEqual(headless.ports, [{ name: "http", port: 8000, targetPort: 8000, protocol: "TCP" }]);
        });

        test("disruption budgets: replicas maxUnavailable 1 (the headroom absorbs it), routers minAvailable 1", () => {
            const n = b.names.envs[expected.env]!;
            const budgets = Object.fromEntries(ofType(b.update.resources, T.pdb).map((p) => [p.inputs.metadata.name, p.inputs.spec]));
            assert.deepEqual(budgets[n.replicas], { maxUnavailable: 1, selector: { matchLabels: podLabels("env-replica", n.replicas) } });
            assert.deepEqual(budgets[n.router], { minAvailable: 1, selector: { matchLabels: podLabels("env-router", n.router) } });
        });

        test("router config: the ConfigMap holds renderRouterConfig of the settings; k per replica, shared zone, websockets, cluster DNS", () => {
            const text = single(b.update.resources, T.configMap).inputs.data["nginx.conf"];
            assertRouterConfig(text, d, "kube-dns.kube-system.svc.cluster.local");
            assert.equal(d.router.settings.replicas.length, expected.replicas);
            assert.ok(
                d.router.settings.replicas.every((a) =>
                    a.endsWith(`.${b.names.envs[expected.env]!.headless}.${b.names.namespaces.envs}.svc.cluster.local:8000`),
                ),
            );
        });

        /** The router Deployment, its pod template and its one container. */
        const routerDeployment = () => {
            const dep = single(b.update.resources, T.deployment).inputs;
            const pod = dep.spec.template.spec;
            return { dep, pod, router: pod.containers[0] };
        };

        test("router Deployment: 2 pods, Recreate, one label object for selector and pods, a config checksum that rolls them", () => {
            const n = b.names.envs[expected.env]!;
            const { dep } = routerDeployment();
            const labels = podLabels("env-router", n.router);
            const configText = single(b.update.resources, T.configMap).inputs.data["nginx.conf"];
            assert.equal(dep.metadata.name, n.router);
            assert.equal(dep.spec.replicas, 2);
            assert.deepEqual(dep.spec.strategy, { type: "Recreate" });
            assert.deepEqual(dep.spec.selector.matchLabels, labels);
            assert.deepEqual(dep.spec.template.metadata.labels, labels);
            const data = single(b.update.resources, T.configMap).inputs.data;
            assert.equal(
                dep.spec.template.metadata.annotations["agentrl.dev/config-checksum"],
                sha256(configText + data["responder.json"] + data["capacity_responder.py"] + data["metrics_http.py"]),
                "nginx.conf, the responder's config, its script and the module it imports all roll the router",
            );
        });

        test("router Deployment: `up` waits for both routers of the new template to be available (pulumi.com/waitFor), not the provider's Deployment await", () => {
            const { dep } = routerDeployment();
            assert.deepEqual(JSON.parse(dep.metadata.annotations["pulumi.com/waitFor"]), [
                "jsonpath={.status.updatedReplicas}=2",
                "jsonpath={.status.availableReplicas}=2",
            ]);
            assert.equal(dep.metadata.annotations["pulumi.com/skipAwait"], undefined, "awaited");
        });

        test("capacity responder: a second router container in the env's image on loopback, hardened like nginx, files from the ConfigMap", () => {
            const { pod } = routerDeployment();
            const data = single(b.update.resources, T.configMap).inputs.data;
            assert.deepEqual(
                pod.containers.map((c: any) => c.name),
                ["router", "capacity-responder"],
            );
            const rc = pod.containers[1];
            assert.equal(rc.image, d.replicas.image);
            assert.deepEqual(rc.command, [
                "python3",
                "-I",
                "-B",
                "/etc/env-router/capacity_responder.py",
                "--listen",
                "127.0.0.1:8081",
                "--config",
                "/etc/env-router/responder.json",
            ]);
            assert.deepEqual(rc.securityContext, pod.containers[0].securityContext, "non-root uid 101, read-only root, no capabilities");
            assert.equal(rc.securityContext.readOnlyRootFilesystem, true);
            assert.equal(rc.ports, undefined, "nothing exposed: nginx reaches it on the pod's loopback");
            assert.equal(
                data["capacity_responder.py"],
                fs.readFileSync(path.join(__dirname, "..", "..", "components", "env", "capacity_responder.py"), "utf8"),
            );
            // The shared /metrics server it imports, beside it (python3 -I finds it by the script's own directory).
            assert.equal(data["metrics_http.py"], fs.readFileSync(path.join(__dirname, "..", "..", "components", "shared", "metrics_http.py"), "utf8"));
            const frame = JSON.parse(data["responder.json"]).ws_frame;
            assert.equal(frame.data.code, "CAPACITY_REACHED");
            assert.match(
                frame.data.message,
                new RegExp(
                    `env '${expected.env}' is at capacity: all ${d.capacity.sessions} sessions are in use .*the plan expects at most ${expected.demand} at once`,
                ),
            );
            assert.match(d.router.configText, /proxy_pass http:\/\/127\.0\.0\.1:8081;/);
        });

        test("capacity responder: readiness and liveness probes, an exec of its --probe mode on its loopback listener (checkov CKV_K8S_8/9)", () => {
            const { pod } = routerDeployment();
            const rc = pod.containers[1];
            const command = ["python3", "-I", "-B", "/etc/env-router/capacity_responder.py", "--probe", "127.0.0.1:8081", "--timeout", "2"];
            for (const probe of ["readinessProbe", "livenessProbe"]) {
                assert.deepEqual(rc[probe].exec, { command }, probe);
                assert.equal(rc[probe].httpGet, undefined, `${probe}: an httpGet goes to the pod's address, where the responder does not listen`);
                assert.ok(rc[probe].timeoutSeconds > 2, `${probe}: the kubelet waits longer than the script's own 2 s`);
            }
        });

        test("router container: unprivileged nginx running routerCommand, probes on the router's own route", () => {
            const { router } = routerDeployment();
            assert.equal(router.image, "nginxinc/nginx-unprivileged:1.27-alpine");
            assert.deepEqual(router.command, routerCommand(d.router.settings, "/etc/env-router/nginx.conf"));
            assert.deepEqual(router.command, ["nginx", "-p", "/tmp/env-router", "-c", "/etc/env-router/nginx.conf", "-e", "stderr"]);
            assert.deepEqual(router.readinessProbe.httpGet, { path: ROUTER_HEALTH_PATH, port: 8000 });
            assert.deepEqual(router.livenessProbe.httpGet, { path: ROUTER_HEALTH_PATH, port: 8000 });
        });

        test("router pod: non-root, read-only root FS, no privilege escalation, no capabilities, no token", () => {
            const { pod, router } = routerDeployment();
            assert.equal(pod.securityContext.runAsNonRoot, true);
            assert.equal(router.securityContext.runAsNonRoot, true);
            assert.equal(router.securityContext.readOnlyRootFilesystem, true);
            assert.equal(router.securityContext.allowPrivilegeEscalation, false);
            assert.deepEqual(router.securityContext.capabilities, { drop: ["ALL"] });
            assert.equal(pod.automountServiceAccountToken, false);
        });

        test("router volumes: the run dir an emptyDir, the config from the ConfigMap", () => {
            const { pod, router } = routerDeployment();
            const volumes = Object.fromEntries(pod.volumes.map((v: any) => [v.name, v]));
            const mounts = Object.fromEntries(router.volumeMounts.map((m: any) => [m.mountPath, m.name]));
            assert.equal(mounts["/tmp/env-router"], "run");
            assert.ok(volumes.run.emptyDir, "runDir is an emptyDir");
            assert.equal(mounts["/etc/env-router"], "config");
            assert.equal(volumes.config.configMap.name, single(b.update.resources, T.configMap).inputs.metadata.name);
        });

        test("router Service: ClusterIP on 8000, ClientIP affinity, named like the URL's host", () => {
            const n = b.names.envs[expected.env]!;
            const svc = ofType(b.update.resources, T.service).find((s) => s.inputs.metadata.name === n.routerService)!.inputs.spec;
            assert.equal(svc.type, "ClusterIP");
            assert.deepEqual(svc.selector, podLabels("env-router", n.router));
            assert.deepEqual(svc.ports, [{ name: "http", port: 8000, targetPort: "http", protocol: "TCP" }]);
            assert.equal(svc.sessionAffinity, "ClientIP");
            assert.equal(svc.sessionAffinityConfig.clientIP.timeoutSeconds, 86400);
            assert.equal(new URL(n.url).hostname, `${n.routerService}.${b.names.namespaces.envs}.svc.cluster.local`);
            assert.equal(new URL(n.url).port, "8000");
        });

        test("NetworkPolicies: replicas admit only routers; routers admit trainer pods of any run, reach only DNS and replicas", () => {
            const n = b.names.envs[expected.env]!;
            const policies = Object.fromEntries(ofType(b.update.resources, T.netpol).map((p) => [p.inputs.metadata.name, p.inputs.spec]));
            const replicaPolicy = policies[n.replicas];
            assert.deepEqual(replicaPolicy.podSelector.matchLabels, podLabels("env-replica", n.replicas));
            assert.deepEqual(replicaPolicy.ingress, [
                { from: [{ podSelector: { matchLabels: podLabels("env-router", n.router) } }], ports: [{ protocol: "TCP", port: 8000 }] },
            ]);
            const routerPolicy = policies[n.router];
            assert.deepEqual(routerPolicy.podSelector.matchLabels, podLabels("env-router", n.router));
            const [rule] = routerPolicy.ingress;
            assert.deepEqual(rule.ports, [{ protocol: "TCP", port: 8000 }]);
            assert.deepEqual(rule.from[0].namespaceSelector.matchLabels, { "kubernetes.io/metadata.name": b.names.namespaces.training });
            // The selector matches this run's trainer pods and the next run's (another Job name).
            const selector: Record<string, string> = rule.from[0].podSelector.matchLabels;
            const nextRun = platformNames(config(recipe, "kubernetes", { runId: "r2" }));
            for (const job of [b.names.training.job, nextRun.training.job]) {
                const trainerPod = podLabels("trainer", job);
                assert.ok(
                    Object.entries(selector).every(([k, v]) => trainerPod[k] === v),
                    `trainer pods of ${job} are admitted`,
                );
            }
            assert.notEqual(b.names.training.job, nextRun.training.job);
            assert.equal(selector["app.kubernetes.io/instance"], undefined);
            assert.deepEqual(routerPolicy.policyTypes, ["Ingress", "Egress"]);
            assert.deepEqual(routerPolicy.egress[1], {
                to: [{ podSelector: { matchLabels: podLabels("env-replica", n.replicas) } }],
                ports: [{ protocol: "TCP", port: 8000 }],
            });
            assert.deepEqual(routerPolicy.egress[0].to[0].podSelector.matchLabels, { "k8s-app": "kube-dns" });
        });

        test("outputs: url and wsUrl of the router Service, capacity numbers", () => {
            const n = b.names.envs[expected.env]!;
            for (const run of [b.update, b.preview]) {
                assert.equal(run.outputs?.url, n.url);
                assert.equal(run.outputs?.wsUrl, `ws://${n.routerService}.${b.names.namespaces.envs}.svc.cluster.local:8000/ws`);
            }
            assert.equal(b.space.replicas, expected.replicas);
            assert.equal(b.space.sessionsPerReplica, expected.k);
            assert.equal(b.space.capacity.sessions, expected.replicas * expected.k);
            assert.equal(b.space.capacity.demand, expected.demand);
            assert.ok(b.space.capacity.sessions >= b.space.capacity.required);
        });

        test("every Kubernetes object passes the 1.36 schema strictly (unknown fields are errors)", () => {
            for (const run of [b.update, b.preview]) {
                const objs = manifests(run.resources);
                assert.equal(objs.length, 9);
                for (const o of objs) assert.deepEqual(validateManifestStrict(o), [], `${o.kind} ${o.metadata?.name}`);
            }
        });
    });

    describe(`${recipe} on docker`, () => {
        let b: Awaited<ReturnType<typeof build>>;
        let d: DeployedEnvDescription;
        before(async () => {
            b = await build(config(recipe, "docker"), expected.env);
            d = deployed(b.description);
        });

        /** The replica containers (every container but the router). */
        const replicaContainers = () => {
            const n = b.names.envs[expected.env]!;
            return ofType(b.update.resources, T.container).filter((c) => c.inputs.name !== n.routerService && c.inputs.name !== `${n.routerService}-responder`);
        };
        const routerContainer = () => {
            const n = b.names.envs[expected.env]!;
            return ofType(b.update.resources, T.container).find((c) => c.inputs.name === n.routerService)!.inputs;
        };

        test("one container per replica, named <replicas>-<i>, beside the router", () => {
            const n = b.names.envs[expected.env]!;
            const containers = ofType(b.update.resources, T.container);
            assert.equal(containers.length, expected.replicas + 2, "the replicas, the router and its capacity responder");
            assert.deepEqual(
                replicaContainers().map((c) => c.inputs.name),
                Array.from({ length: expected.replicas }, (_, i) => `${n.replicas}-${i}`),
            );
        });

        test("each replica: the env's settings, 2 CPUs and 4 GiB, a health check, no capabilities, restarted unless stopped, 300 s grace", () => {
            for (const c of replicaContainers()) {
                assert.deepEqual(dockerEnv(c), {
                    ...expected.settings,
                    ...expected.nonRootEnv,
                    ...COLOCATE_PING_ENV,
                    ENABLE_WEB_INTERFACE: "false",
                    MAX_CONCURRENT_ENVS: String(expected.k),
                });
                assert.equal(c.inputs.restart, "unless-stopped");
                assert.equal(c.inputs.memory, 4096);
                assert.equal(c.inputs.cpus, "2");
                assert.ok(c.inputs.healthcheck.tests.join(" ").includes("http://127.0.0.1:8000/health"));
                assert.deepEqual(c.inputs.capabilities, { drops: ["ALL"] });
                assert.equal(c.inputs.destroyGraceSeconds, 300);
            }
        });

        test("replicas only on the env's own network (never the training network), nothing published; internal for the coding env", () => {
            for (const c of replicaContainers()) {
                assert.deepEqual(c.inputs.networksAdvanced, [{ name: d.replicaNetwork }]);
                assert.equal(c.inputs.ports, undefined, "nothing published on the host");
            }
            // The env's network, created by the EnvSpace: internal (no route out) for the coding env, which
            // runs the model's code; a plain bridge where the env needs data (as on Kubernetes).
            const nets = ofType(b.update.resources, "docker:index/network:Network").map((r) => [r.inputs.name, r.inputs.driver, r.inputs.internal]);
            assert.deepEqual(nets, [[d.replicaNetwork, "bridge", recipe === "mbpp-whitebox"]]);
        });

        test("images: the env's and the router's", () => {
            const images = ofType(b.update.resources, T.image)
                .map((i) => i.inputs.name)
                .sort();
            assert.deepEqual(images, [d.replicas.image, "nginxinc/nginx-unprivileged:1.27-alpine"].sort());
        });

        test("router container: named like the URL's host; the only container on both networks", () => {
            const n = b.names.envs[expected.env]!;
            const router = routerContainer();
            assert.equal(new URL(n.url).hostname, router.name);
            // The only container on both: the trainer reaches it on the training network.
            assert.deepEqual(router.networksAdvanced, [{ name: b.names.networks.training }, { name: d.replicaNetwork }]);
        });

        test("router config: one upload = renderRouterConfig with Docker's resolver 127.0.0.11 and the replicas by name; a checksum label", () => {
            const n = b.names.envs[expected.env]!;
            const router = routerContainer();
            assert.equal(router.uploads.length, 1);
            assert.equal(router.uploads[0].file, "/etc/env-router/nginx.conf");
            assertRouterConfig(router.uploads[0].content, d, "127.0.0.11");
            assert.ok(d.router.settings.replicas.every((a, i) => a === `${n.replicas}-${i}:8000`));
            const checksum = router.labels.find((l: any) => l.label === "agentrl.dev/config-checksum").value;
            assert.equal(
                checksum,
                sha256(router.uploads[0].content + d.router.responder.configText + d.router.responder.scriptText + d.router.responder.modules[0]!.text),
            );
        });

        test("capacity responder: in the router's network namespace, the env's image, uid 101, its script and config uploaded", () => {
            const n = b.names.envs[expected.env]!;
            const rc = ofType(b.update.resources, T.container).find((c) => c.inputs.name === `${n.routerService}-responder`)!.inputs;
            assert.match(String(rc.networkMode), /^container:/);
            assert.equal(rc.networksAdvanced, undefined);
            assert.equal(rc.user, "101:101");
            assert.deepEqual(rc.capabilities, { drops: ["ALL"] });
            assert.deepEqual(
                rc.uploads.map((u: any) => u.file),
                ["/etc/env-router/capacity_responder.py", "/etc/env-router/responder.json", "/etc/env-router/metrics_http.py"],
            );
            assert.deepEqual(rc.entrypoints, [...d.router.responder.command]);
        });

        test("capacity responder container: its --probe mode as the health check", () => {
            const rc = ofType(b.update.resources, T.container).find((c) => String(c.inputs.name).endsWith("-responder"))!.inputs;
            assert.deepEqual(rc.healthcheck.tests, [
                "CMD",
                "python3",
                "-I",
                "-B",
                "/etc/env-router/capacity_responder.py",
                "--probe",
                "127.0.0.1:8081",
                "--timeout",
                "2",
            ]);
        });

        test("router process: routerCommand as uid 101 with a tmpfs run dir, restarted unless stopped, a health check, nothing published", () => {
            const router = routerContainer();
            assert.deepEqual(router.entrypoints, routerCommand(d.router.settings, "/etc/env-router/nginx.conf"));
            assert.equal(router.user, "101:101");
            assert.ok(router.tmpfs["/tmp/env-router"], "runDir on a tmpfs");
            assert.equal(router.restart, "unless-stopped");
            assert.ok(router.healthcheck.tests.join(" ").includes(`http://127.0.0.1:8000${ROUTER_HEALTH_PATH}`));
            assert.equal(router.ports, undefined, "nothing published on the host");
        });

        test("outputs: url and wsUrl of the router container", () => {
            const n = b.names.envs[expected.env]!;
            for (const run of [b.update, b.preview]) {
                assert.equal(run.outputs?.url, `http://${n.routerService}:8000`);
                assert.equal(run.outputs?.wsUrl, `ws://${n.routerService}:8000/ws`);
            }
            assert.equal(b.space.replicas, expected.replicas);
            assert.equal(b.space.sessionsPerReplica, expected.k);
        });
    });
}

describe("resource count", () => {
    test("Kubernetes: the same objects for 2 and 64 replicas (no Service per replica)", async () => {
        const shapes: string[][] = [];
        for (const replicas of [2, 64]) {
            const c = config("wordle-whitebox", "kubernetes", { envs: { wordle: { catalog: "textarena", replicas, sessionsPerReplica: 32 } } });
            const b = await build(c, "wordle");
            assert.equal(single(b.update.resources, T.sts).inputs.spec.replicas, replicas);
            assert.equal((single(b.update.resources, T.configMap).inputs.data["nginx.conf"].match(/ max_conns=32 /g) ?? []).length, replicas);
            shapes.push(
                custom(b.update)
                    .map((r) => `${r.type} ${r.name}`)
                    .sort(),
            );
        }
        assert.equal(shapes[0]!.length, 9);
        assert.deepEqual(shapes[0], shapes[1]);
    });

    test("Docker: one container per replica plus the router (inherent: Docker has no Service)", async () => {
        const c = config("wordle-whitebox", "docker", { envs: { wordle: { catalog: "textarena", replicas: 3, sessionsPerReplica: 16 } } });
        const b = await build(c, "wordle");
        assert.equal(ofType(b.update.resources, T.container).length, 5);
    });
});

describe("external env", () => {
    for (const target of ["kubernetes", "docker"] as const) {
        test(`${target}: registers nothing and outputs the given URL and declared sessions`, async () => {
            const url = "https://org-wordle.hf.space";
            const c = config("wordle-whitebox", target, { envs: { wordle: { catalog: "textarena", external: { url, sessions: 64 } } } });
            const b = await build(c, "wordle");
            assert.equal(b.description.kind, "external");
            for (const run of [b.update, b.preview]) {
                assert.deepEqual(custom(run), [], "no resource besides the component");
                assert.equal(run.outputs?.url, url);
                assert.equal(run.outputs?.wsUrl, "wss://org-wordle.hf.space/ws");
            }
            assert.equal(b.space.replicas, 0);
            assert.equal(b.space.capacity.sessions, 64);
            assert.equal(b.space.capacity.demand, 32);
            assert.equal(b.space.capacity.deployed, false);
        });
    }
});

describe("EnvSpace args", () => {
    test("docker without a network is refused with the fix", async () => {
        const c = config("wordle-whitebox", "docker");
        const description = describeEnv(c, "wordle");
        await assert.rejects(
            runBoth(() => {
                new EnvSpace("env-wordle", { description });
            }),
            /EnvSpace env-wordle: the docker target needs args.network \(the private training network\)/,
        );
    });
});

describe("catalog", () => {
    test("images under huggingface/OpenEnv with the immutable sha- tag of the pinned revision; no coding_tools", () => {
        assert.equal(OPENENV_UPSTREAM.imageTag, `sha-${OPENENV_UPSTREAM.commit.slice(0, 7)}`);
        assert.deepEqual([...CATALOG_NAMES].sort(), ["coding", "echo", "opencode", "textarena"]);
        for (const [name, e] of Object.entries(ENV_CATALOG)) {
            assert.match(e.image, /^ghcr\.io\/huggingface\/openenv-[a-z0-9-]+-env:sha-[0-9a-f]{7}$/, name);
            assert.ok(e.image.endsWith(`:${OPENENV_UPSTREAM.imageTag}`), name);
            assert.match(e.upstream.dockerfile, /^envs\/[a-z_]+\/server\/Dockerfile$/);
            // What every entry records from its Dockerfile and app.py at that revision.
            assert.equal(e.command.form, "uvicorn-cli", `${name}: CMD runs the uvicorn CLI`);
            assert.ok(e.command.cmd.join(" ").includes("uvicorn "), name);
            assert.deepEqual(e.idleReaper, { kind: "none" }, `${name}: no session_timeout in server/app.py`);
            assert.equal(e.user, "root", `${name}: no USER in the Dockerfile`);
        }
        assert.equal(tagCheckCommand(ENV_CATALOG.coding.image), "crane ls ghcr.io/huggingface/openenv-coding-env | grep sha-4026f15");
        const problems = configProblems(() => config("mbpp-whitebox", "kubernetes", { envs: { coding: { catalog: "coding_tools" } } }));
        assert.ok(
            problems.some((p) => p.includes("envs.coding.catalog")),
            problems.join("\n"),
        );
    });

    test("prod still refuses the catalog's tag: it wants a digest", () => {
        const problems = configProblems(() => config("mbpp-whitebox", "kubernetes", { prod: true }));
        assert.ok(
            problems.some((p) => p.includes(ENV_CATALOG.coding.image) && p.includes("pin every image by digest")),
            problems.join("\n"),
        );
    });
});

describe("server websocket keepalive (envs.<name>.wsPing)", () => {
    const env = (c: PlatformConfig, name: string) => deployed(describeEnv(c, name)).replicas;

    test("whitebox-colocate relaxes it to 60 / 300 s; a half-open client's slot is freed within 360 s", () => {
        const r = env(config("mbpp-whitebox", "kubernetes"), "coding");
        assert.deepEqual(r.wsPing, COLOCATE_WS_PING);
        assert.equal(r.env.UVICORN_WS_PING_INTERVAL, "60");
        assert.equal(r.env.UVICORN_WS_PING_TIMEOUT, "300");
        assert.equal(r.serverCommand, "uvicorn-cli");
        assert.deepEqual(r.idleReaper, { kind: "none" });
        assert.equal(r.halfOpenSlotSeconds, 360);
    });

    test("other layouts keep uvicorn's 20 / 20 s; config overrides either", () => {
        const server = config("mbpp-whitebox", "kubernetes", { training: { layout: "whitebox-server", gpusOnNode: 2 } });
        assert.deepEqual(env(server, "coding").wsPing, UVICORN_WS_PING);
        assert.equal(env(server, "coding").env.UVICORN_WS_PING_TIMEOUT, "20");
        assert.equal(env(server, "coding").halfOpenSlotSeconds, 40);
        const own = config("mbpp-whitebox", "docker", { envs: { coding: { catalog: "coding", wsPing: { intervalSeconds: 30, timeoutSeconds: 90 } } } });
        assert.deepEqual(
            [env(own, "coding").env.UVICORN_WS_PING_INTERVAL, env(own, "coding").env.UVICORN_WS_PING_TIMEOUT, env(own, "coding").halfOpenSlotSeconds],
            ["30", "90", 120],
        );
    });

    test("a custom image gets the same variables and is marked as one that must honour them", () => {
        const c = config("mbpp-whitebox", "kubernetes", {
            envs: { coding: { catalog: "custom", image: `registry.test/my-env@sha256:${"a".repeat(64)}`, sessionsPerReplica: 1 } },
        });
        const r = env(c, "coding");
        assert.equal(r.env.UVICORN_WS_PING_TIMEOUT, "300");
        assert.equal(r.serverCommand, "unknown");
        assert.deepEqual(r.idleReaper, { kind: "unknown" });
    });

    test("settings may not set the keepalive variables: the message names wsPing", () => {
        const problem =
            "envs.coding.settings.UVICORN_WS_PING_TIMEOUT: the websocket keepalive is set from envs.coding.wsPing: remove it and set envs.coding.wsPing.timeoutSeconds";
        // Config validation and the component's resolve step share the rule and its message.
        assert.deepEqual(
            configProblems(() =>
                config("mbpp-whitebox", "kubernetes", { envs: { coding: { catalog: "coding", settings: { UVICORN_WS_PING_TIMEOUT: "5" } } } }),
            ),
            [problem],
        );
        const c = config("mbpp-whitebox", "kubernetes");
        const forged: ResolvedEnv = { ...envOf(c, "coding"), settings: { UVICORN_WS_PING_TIMEOUT: "5" } };
        assert.deepEqual(
            configProblems(() => resolveEnvSpace(c, forged, platformNames(c))),
            [problem],
        );
    });

    test("the uvicorn CLI reads them (click auto_envvar_prefix UVICORN), when the lock's Python is there", (t) => {
        const python = lockVenvPython();
        if (python === undefined) return t.skip(`no trainer-side venv (${LOCK_VENV_HINT})`);
        const probe = [
            "from uvicorn.main import main",
            "ctx = main.make_context('uvicorn', ['server.app:app', '--host', '0.0.0.0', '--port', '8000'])",
            "print(ctx.params['ws_ping_interval'], ctx.params['ws_ping_timeout'])",
        ].join("\n");
        const r = spawnSync(python, ["-c", probe], { encoding: "utf8", env: { ...process.env, ...env(config("mbpp-whitebox", "kubernetes"), "coding").env } });
        assert.equal(r.status, 0, r.stderr);
        assert.equal(r.stdout.trim(), "60.0 300.0");
    });
});

describe("non-root replicas (envs.<name>.runAsNonRoot)", () => {
    test("default: the coding env (model code) runs as uid 65532 with a read-only root, HOME on the scratch dir, no warning; Wordle as the image's user", () => {
        for (const target of ["kubernetes", "docker"] as const) {
            const k = deployed(describeEnv(config("mbpp-whitebox", target), "coding"));
            assert.equal(k.replicas.security.user, "uid 65532", target);
            assert.equal(k.replicas.security.runAsUser, 65532, target);
            assert.equal(k.replicas.security.runAsNonRoot, true, target);
            assert.equal(k.replicas.security.readOnlyRootFilesystem, true, target);
            assert.equal(k.replicas.env.HOME, "/tmp", target);
            assert.deepEqual(k.warnings, [], target);
        }
        const w = deployed(describeEnv(config("wordle-whitebox", "kubernetes"), "wordle"));
        assert.equal(w.replicas.security.runAsUser, undefined, "Wordle runs no model code: the image's user");
        assert.deepEqual(w.warnings, []);
    });

    test("explicit opt-out (runAsNonRoot: false): root, still a read-only root; the plan warning says what contains it and how to undo it", () => {
        const optOut = { envs: { coding: { catalog: "coding", runAsNonRoot: false } } };
        const k = deployed(describeEnv(config("mbpp-whitebox", "kubernetes", optOut), "coding"));
        assert.equal(k.replicas.security.user, "root");
        assert.equal(k.replicas.security.runAsUser, undefined);
        assert.equal(k.replicas.security.readOnlyRootFilesystem, true, "the opt-out leaves the read-only root");
        assert.deepEqual(k.warnings, [
            "env coding runs the model's code as root (envs.coding.runAsNonRoot: false; the OpenEnv image has no USER); it is contained by a read-only root filesystem (writable: /tmp, 1Gi), every capability dropped, no privilege escalation, seccomp RuntimeDefault, egress to cluster DNS only (NetworkPolicy). Remove the opt-out to run it as uid 65532, the default for an env that runs model code",
        ]);
        const d = deployed(describeEnv(config("mbpp-whitebox", "docker", optOut), "coding"));
        assert.match(d.warnings[0] ?? "", /no-new-privileges, Docker's default seccomp profile, no route out \(an internal Docker network with its router\)/);
    });

    test("opt-in: uid/gid 65532 with fsGroup, runAsNonRoot, HOME on the scratch dir, read-only root; no warning", async () => {
        const c = config("wordle-whitebox", "kubernetes", { envs: { wordle: { catalog: "textarena", runAsNonRoot: true } } });
        const b = await build(c, "wordle");
        const d = deployed(b.description);
        assert.deepEqual(d.warnings, []);
        assert.equal(d.replicas.security.user, "uid 65532");
        assert.equal(d.replicas.env.HOME, "/tmp");
        const pod = single(b.update.resources, T.sts).inputs.spec.template.spec;
        assert.deepEqual(pod.securityContext, {
            runAsNonRoot: true,
            runAsUser: 65532,
            runAsGroup: 65532,
            fsGroup: 65532,
            seccompProfile: { type: "RuntimeDefault" },
        });
        assert.equal(pod.containers[0].securityContext.runAsNonRoot, true);
        assert.equal(pod.containers[0].securityContext.readOnlyRootFilesystem, true, "non-root implies a read-only root");
        assert.deepEqual(pod.containers[0].volumeMounts, [{ name: "scratch", mountPath: "/tmp" }]);
        for (const m of manifests(b.update.resources)) assert.deepEqual(validateManifestStrict(m), [], m.kind);
    });

    test("default on Docker for the coding env: the container runs as 65532:65532 with a read-only root", async () => {
        const c = config("mbpp-whitebox", "docker");
        const b = await build(c, "coding");
        const names = new Set(deployed(b.description).replicas.containerNames);
        const replicas = ofType(b.update.resources, T.container).filter((r) => names.has(String(r.inputs.name)));
        assert.equal(replicas.length, 17);
        for (const r of replicas) {
            assert.equal(r.inputs.user, "65532:65532");
            assert.equal(r.inputs.readOnly, true);
        }
        assert.deepEqual(deployed(b.description).warnings, []);
    });
});

test("the capacity rule is config's: the env component resolves an env sized under its demand (the router tests run what the check prevents)", () => {
    const c = config("mbpp-whitebox", "kubernetes");
    const env = envOf(c, "coding");
    const under: ResolvedEnv = { ...env, replicas: 1, capacity: env.sessionsPerReplica };
    const d = resolveEnvSpace(c, under, platformNames(c));
    assert.equal(d.capacity.replicas, 1);
    assert.ok(d.capacity.sessions < d.capacity.required, `${d.capacity.sessions} sessions against ${d.capacity.required} required`);
    // The same sizing in a stack is refused, with the rule's message (components/config/env-sessions.ts).
    assert.match(
        configProblems(() => config("mbpp-whitebox", "kubernetes", { envs: { coding: { catalog: "coding", replicas: 1 } } })).join("\n"),
        /^envs\.coding\.replicas: 1 replicas x 1 sessions = 1, but training opens 16 sessions at once/m,
    );
});
