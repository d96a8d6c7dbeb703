// SandboxPool under Pulumi mocks, per target: hardening of every sandbox, the NetworkPolicy,
// the claim admission policy (its exact CEL run with @marcbachmann/cel-js), quota, RBAC, the
// key's path, resource count vs pool size, and agent-sandbox v1.0.1 CRD requirements.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { evaluate } from "@marcbachmann/cel-js";
import { parseDockerPoolConfig, parseHostedConfig, parseWithTestImages as parsePlatformConfig } from "../helpers/config";
import { SANDBOX_PROVIDER_NAMES, SANDBOX_PROVIDER_RECORDS, sandboxPoolOf } from "../../components/config";
import { SANDBOX_PROVIDERS } from "../../components/sandbox";
import { resolvePlatform } from "../../components/platform";
import { platformNames, podLabels, type PlatformNames } from "../../components/config/names";
import type { PlatformConfig } from "../../components/config/types";
import { SandboxPool, multiplyQuantity, resolveSandboxPool, type SandboxDescription } from "../../components/sandbox";
import { addQuantities } from "../../components/shared/quantity";
import { ALL_RECIPE_NAMES, RECIPES, type RecipeName } from "../../components/config";
import { ofType, runBoth, single, type RecordedResource } from "../helpers/mock";
import { unwrapSecrets } from "../helpers/secrets";
import { scaled, scaledCount } from "../helpers/waits";
import { loadManifestSchemas, validateManifestStrict } from "../helpers/k8s-schema";
import { OBSERVABILITY_ON } from "../helpers/observability";

const KEY = "sentinel-sandbox-key-7f3a9c";
const T = {
    template: "kubernetes:extensions.agents.x-k8s.io/v1beta1:SandboxTemplate",
    warmPool: "kubernetes:extensions.agents.x-k8s.io/v1beta1:SandboxWarmPool",
    secret: "kubernetes:core/v1:Secret",
    quota: "kubernetes:core/v1:ResourceQuota",
    netpol: "kubernetes:networking.k8s.io/v1:NetworkPolicy",
    vap: "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
    vapBinding: "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
    role: "kubernetes:rbac.authorization.k8s.io/v1:Role",
    roleBinding: "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
    configFile: "kubernetes:yaml/v2:ConfigFile",
    container: "docker:index/container:Container",
    image: "docker:index/remoteImage:RemoteImage",
    pool: "agentrl:sandbox:SandboxPool",
};

// What agent-sandbox v1.0.1's CRDs require (extensions.agents.x-k8s.io, served+stored v1beta1), encoded here.
const CRD = {
    apiVersion: "extensions.agents.x-k8s.io/v1beta1",
    SandboxTemplate: {
        required: [["spec"], ["spec", "podTemplate"], ["spec", "podTemplate", "spec"], ["spec", "podTemplate", "spec", "containers"]],
        enums: {
            "spec.networkPolicyManagement": ["Managed", "Unmanaged"],
            "spec.envVarsInjectionPolicy": ["Allowed", "Overrides", "Disallowed"],
            "spec.volumeClaimTemplatesPolicy": ["Disallowed", "Allowed", "Overrides"],
        } as Record<string, string[]>,
        known: [
            "podTemplate",
            "networkPolicy",
            "networkPolicyManagement",
            "envVarsInjectionPolicy",
            "service",
            "volumeClaimTemplates",
            "volumeClaimTemplatesPolicy",
        ],
    },
    SandboxWarmPool: {
        required: [["spec"], ["spec", "sandboxTemplateRef"], ["spec", "sandboxTemplateRef", "name"]],
        enums: { "spec.updateStrategy.type": ["Recreate", "OnReplenish"] } as Record<string, string[]>,
        known: ["replicas", "sandboxTemplateRef", "updateStrategy"],
    },
};

function config(raw: Record<string, unknown> = {}, recipe: RecipeName = "opencode-blackbox"): PlatformConfig {
    // Kubernetes stacks other than dev name their cluster's context (components/config validate).
    return parsePlatformConfig({ recipe, runId: "r1", target: { kind: "kubernetes", context: "test-cluster" }, ...raw }, "test");
}

function peers(names: PlatformNames) {
    return {
        ingress: { namespace: names.namespaces.ingress, podLabels: podLabels("vllm-ingress", names.ingress.deployment), port: 8080 },
        trainer: { serviceAccount: names.training.serviceAccount, namespace: names.namespaces.training, podLabels: podLabels("trainer", names.training.job) },
    };
}

async function build(c: PlatformConfig) {
    const names = platformNames(c);
    const description = resolveSandboxPool(c, names);
    let pool: SandboxPool | undefined;
    const runs = await runBoth(() => {
        pool = new SandboxPool("sandboxes", { description, sandboxKey: KEY, ...peers(names) });
        return { poolName: pool.poolName, namespace: pool.namespace, template: pool.template };
    });
    return { ...runs, names, description, pool: pool! };
}

function get(obj: any, p: string[]): unknown {
    return p.reduce((o, k) => (o === undefined || o === null ? undefined : o[k]), obj);
}

/** Every security setting a sandbox pod must carry (PSA restricted and more). */
function assertHardenedPod(spec: any, d: SandboxDescription) {
    assert.equal(spec.automountServiceAccountToken, false);
    assert.equal(spec.enableServiceLinks, false);
    assert.equal(spec.activeDeadlineSeconds, d.maxLifetimeSeconds + d.maxWarmWaitSeconds);
    assert.equal(spec.securityContext.runAsNonRoot, true);
    assert.equal(spec.securityContext.runAsUser, 65532, "a high, unused uid by default (sandboxes.runAsUser)");
    assert.deepEqual(spec.securityContext.seccompProfile, { type: "RuntimeDefault" });
    assert.equal(spec.hostNetwork ?? false, false);
    assert.equal(spec.hostPID ?? false, false);
    const volumes = new Map<string, any>(spec.volumes.map((v: any) => [v.name, v]));
    for (const v of volumes.values())
        assert.deepEqual(Object.keys(v).sort(), ["emptyDir", "name"], `only emptyDir volumes (PSA restricted): ${JSON.stringify(v)}`);
    assert.equal(spec.shareProcessNamespace, false, "no container sees another's processes (the forwarder's env holds the key)");
    const [forwarder, ...more] = spec.initContainers;
    assert.deepEqual(more, []);
    assert.equal(forwarder.restartPolicy, "Always", "a native sidecar: up before the agent's container, as long as the pod");
    assert.deepEqual(forwarder.resources, { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "100m", memory: "128Mi" } });
    assert.equal(forwarder.volumeMounts, undefined, "no volume shared with the agent's container");
    assert.deepEqual(
        forwarder.ports,
        [
            { name: "trace", containerPort: 7101, protocol: "TCP" },
            { name: "rollout-key", containerPort: 7102, protocol: "TCP" },
        ],
        "the trace port and the one-time rollout-key port, for the trainer (the model routes are on loopback)",
    );
    assert.deepEqual(
        forwarder.command.slice(3),
        [
            "--host",
            "127.0.0.1",
            "--port",
            "7100",
            "--trace-host",
            "0.0.0.0",
            "--trace-port",
            "7101",
            "--upstream",
            d.upstreamUrl,
            ...d.forwarder.command.slice(d.forwarder.command.indexOf("--temperature"), d.forwarder.command.indexOf("--key-host")),
            "--key-host",
            "0.0.0.0",
            "--key-port",
            "7102",
        ],
        "model routes on loopback, the run's sampling and the rollout's bounds, the trace and the rollout-key delivery on the pod IP",
    );
    for (const c of [forwarder, ...spec.containers]) {
        const sc = c.securityContext;
        assert.equal(sc.allowPrivilegeEscalation, false);
        assert.equal(sc.runAsNonRoot, true);
        assert.ok(sc.runAsUser > 0);
        assert.equal(sc.readOnlyRootFilesystem, true);
        assert.equal(sc.privileged, false);
        assert.deepEqual(sc.capabilities, { drop: ["ALL"] });
        assert.deepEqual(sc.seccompProfile, { type: "RuntimeDefault" });
        assert.deepEqual(c.resources.requests, c.resources.limits, "requests == limits");
        assert.equal(c.image, d.image);
    }
    for (const c of spec.containers) {
        assert.notEqual(c.securityContext.runAsUser, forwarder.securityContext.runAsUser, "the forwarder has a uid of its own");
        assert.deepEqual(c.resources.limits, { cpu: d.cpu, memory: d.memory });
        const home = c.env.find((e: any) => e.name === "HOME")?.value;
        const mounts = c.volumeMounts.map((m: any) => m.mountPath);
        assert.ok(mounts.includes(home), "HOME is writable (emptyDir)");
        assert.ok(mounts.includes("/tmp"));
        assert.ok(mounts.includes(c.workingDir), "working dir is writable");
        for (const m of c.volumeMounts) assert.ok(volumes.has(m.name));
    }
}

describe("resolveSandboxPool", () => {
    it("derives pool, deadline, quota and trainer env from the config", () => {
        const c = config();
        const d = resolveSandboxPool(c, platformNames(c));
        assert.equal(d.provider, "agent-sandbox");
        assert.equal(d.poolSize, 13, "burst 8 + refill ceil(8 / 35 s x 10 s) = 3 + headroom 2");
        assert.equal(d.deadlineSeconds, 3600 + 6 * 3600);
        assert.equal(d.quota.pods, 13 + 8 + 2);
        assert.equal(d.quota.cpu, "48300m", "23 pods x (2 CPUs + the forwarder's 100m)");
        assert.equal(d.quota.memory, "97152Mi", "23 pods x (4Gi + the forwarder's 128Mi)");
        assert.equal(d.labels["agentrl.dev/run"], "r1");
        assert.deepEqual(d.trainerEnv, {
            SANDBOX_PROVIDER: "agent-sandbox",
            SANDBOX_IMAGE: c.sandboxes.image,
            SANDBOX_MAX_INFLIGHT: "8",
            SANDBOX_MAX_LIFETIME_SECONDS: "3600",
            SANDBOX_RUN_LABEL: "agentrl.dev/run",
            SANDBOX_RUN_ID: "r1",
            SANDBOX_UPSTREAM_URL: "http://127.0.0.1:7100",
            SANDBOX_NAMESPACE: "arl-test-sandboxes",
            SANDBOX_WARM_POOL: d.names.warmPool,
            SANDBOX_TEMPLATE: d.names.template,
            SANDBOX_API_GROUP: "extensions.agents.x-k8s.io",
            SANDBOX_API_VERSION: "v1beta1",
            SANDBOX_SHUTDOWN_POLICY: "Delete",
            SANDBOX_PORT: "8888",
            SANDBOX_TRACE_PORT: "7101",
            SANDBOX_FORWARDER_KEY_PORT: "7102",
            SANDBOX_HOME: "/root",
            SANDBOX_POOL_SIZE: "13",
            SANDBOX_CPU: "2",
            SANDBOX_MEMORY: "4Gi",
        });
        assert.equal(d.trainerEnv.SANDBOX_UPSTREAM_URL, d.forwarder.url, "the agent's side calls its pod's forwarder");
        assert.equal(d.upstreamUrl, "http://vllm-ingress.arl-test-ingress.svc.cluster.local:8080", "the forwarder calls the ingress");
        assert.ok(!Object.values(d.trainerEnv).includes(KEY));
    });

    it("uses the in-cluster ingress address on Kubernetes even when the ingress is exposed publicly", () => {
        const c = config({ ingress: { exposure: "loadbalancer", host: "vllm.example.com", tls: { mode: "secret", secretName: "tls" } } });
        const d = resolveSandboxPool(c, platformNames(c));
        assert.equal(d.upstreamUrl, "https://vllm-ingress.arl-test-ingress.svc.cluster.local:8443");
    });

    it("multiplies quantities exactly", () => {
        assert.equal(multiplyQuantity("500m", 3), "1500m");
        assert.equal(multiplyQuantity("1.5Gi", 3), "4.5Gi");
        assert.equal(multiplyQuantity("0.1", 3), "0.3");
        assert.equal(multiplyQuantity("2", 20), "40");
        assert.throws(() => multiplyQuantity("lots", 2));
    });
});

describe("SandboxPool on Kubernetes (agent-sandbox)", () => {
    it("creates agent-sandbox objects that carry every field their v1.0.1 CRD requires", async () => {
        const { update, preview, description: d } = await build(config());
        for (const run of [update, preview]) {
            for (const kind of ["SandboxTemplate", "SandboxWarmPool"] as const) {
                const r = single(run.resources, kind === "SandboxTemplate" ? T.template : T.warmPool);
                assert.equal(r.inputs.apiVersion, CRD.apiVersion);
                assert.equal(r.inputs.kind, kind);
                assert.equal(r.inputs.metadata.namespace, d.names.namespace);
                for (const p of CRD[kind].required) assert.notEqual(get(r.inputs, p), undefined, `${kind} needs ${p.join(".")}`);
                for (const [p, allowed] of Object.entries(CRD[kind].enums)) {
                    const v = get(r.inputs, p.split("."));
                    if (v !== undefined) assert.ok(allowed.includes(v as string), `${kind} ${p}=${String(v)} not in ${allowed.join("|")}`);
                }
                for (const k of Object.keys(r.inputs.spec)) assert.ok(CRD[kind].known.includes(k), `${kind} spec.${k} is not a v1.0.1 field`);
            }
            const template = single(run.resources, T.template);
            const pool = single(run.resources, T.warmPool);
            assert.equal(pool.inputs.spec.sandboxTemplateRef.name, template.inputs.metadata.name);
            assert.equal(pool.inputs.spec.replicas, 13);
            assert.equal(template.inputs.spec.networkPolicyManagement, "Unmanaged");
            assert.equal(template.inputs.spec.service, true);
            assert.equal(ofType(run.resources, T.configFile).length, 0, "no controller install: the cluster stack owns it");
        }
    });

    it("hardens every sandbox pod (PSA restricted, non-root, read-only root, deadline, run label)", async () => {
        const { update, description: d } = await build(config({ sandboxes: { runtimeClassName: "gvisor" } }));
        const pod = single(update.resources, T.template).inputs.spec.podTemplate;
        assertHardenedPod(pod.spec, d);
        assert.equal(pod.spec.runtimeClassName, "gvisor");
        assert.equal(pod.metadata.labels["agentrl.dev/run"], "r1");
        for (const [k, v] of Object.entries(podLabels("sandbox", d.names.warmPool))) assert.equal(pod.metadata.labels[k], v);
        // No runtimeClassName unless configured.
        const plain = await build(config());
        assert.equal(single(plain.update.resources, T.template).inputs.spec.podTemplate.spec.runtimeClassName, undefined);
    });

    it("runs the command runtime as the sandbox's main process, Ready only once it answers on 8888, with HOME where the harness looks", async () => {
        const { update, description: d, pool } = await build(config());
        const container = single(update.resources, T.template).inputs.spec.podTemplate.spec.containers[0];
        // python/Dockerfile puts the runtime and the HOME skeleton at these paths; python/tests/test_plan_contract.py runs this exact command.
        assert.deepEqual(container.command, ["python3", "-I", "/opt/agent-rl/runtime.py", "--port", "8888", "--home-seed", "/opt/agent-rl/home"]);
        assert.deepEqual(container.readinessProbe.httpGet, { path: "/healthz", port: 8888 });
        assert.ok(container.readinessProbe.periodSeconds * container.readinessProbe.failureThreshold <= 10, "a dead runtime leaves the pool within seconds");
        assert.equal(container.livenessProbe, undefined, "no restart of a claimed sandbox: its state would be lost");
        const env = Object.fromEntries(container.env.filter((e: any) => "value" in e).map((e: any) => [e.name, e.value]));
        assert.equal(env.HOME, "/root", "TRL's opencode example's SANDBOX_HOME (its WORKDIR /root/workdir lies in it)");
        // /home/user (OpenEnv's default sandbox_home) is a link to /root in the image (python/image/install-layout.sh).
        assert.equal(env.OPENCODE_UPSTREAM_URL, "http://127.0.0.1:7100", "the capture proxy's upstream: the pod's forwarder");
        assert.equal(pool.trainerEnv.SANDBOX_HOME, env.HOME, "the trainer passes the same HOME as OpenCodeConfig.sandbox_home");
        assert.ok(
            container.volumeMounts.some((m: any) => m.mountPath === env.HOME),
            "HOME is an emptyDir the runtime seeds",
        );
        assert.equal(d.runtime.healthPath, "/healthz");
    });

    it("lets sandboxes reach only cluster DNS and the ingress pods, and only the trainer reach them", async () => {
        const { update, names } = await build(config());
        const np = single(update.resources, T.netpol).inputs;
        assert.deepEqual(np.spec.podSelector, {}, "every pod of the sandboxes namespace");
        assert.equal(np.metadata.namespace, names.namespaces.sandboxes);
        assert.deepEqual([...np.spec.policyTypes].sort(), ["Egress", "Ingress"]);
        const ns = (n: string) => ({ matchLabels: { "kubernetes.io/metadata.name": n } });
        assert.deepEqual(np.spec.egress, [
            {
                to: [{ namespaceSelector: ns("kube-system"), podSelector: { matchLabels: { "k8s-app": "kube-dns" } } }],
                ports: [
                    { protocol: "UDP", port: 53 },
                    { protocol: "TCP", port: 53 },
                ],
            },
            {
                to: [{ namespaceSelector: ns(names.namespaces.ingress), podSelector: { matchLabels: podLabels("vllm-ingress", names.ingress.deployment) } }],
                ports: [{ protocol: "TCP", port: 8080 }],
            },
        ]);
        assert.ok(!JSON.stringify(np).includes("ipBlock"), "no CIDR: no internet, no 169.254.169.254");
        assert.deepEqual(np.spec.ingress, [
            {
                from: [{ namespaceSelector: ns(names.namespaces.training), podSelector: { matchLabels: podLabels("trainer", names.training.job) } }],
                ports: [
                    { protocol: "TCP", port: 8888 },
                    { protocol: "TCP", port: 7101 },
                    { protocol: "TCP", port: 7102 },
                ],
            },
        ]);
    });

    it("admits only claims with a bounded shutdownTime and the run label (the policy's exact CEL, evaluated)", async () => {
        const { update, description: d } = await build(config({ sandboxes: { maxLifetimeSeconds: 1800 } }));
        const vap = single(update.resources, T.vap).inputs;
        const binding = single(update.resources, T.vapBinding).inputs;
        assert.match(vap.metadata.name, /^arl-test-.*r1/, "cluster-scoped: stack prefix and run id");
        assert.equal(binding.spec.policyName, vap.metadata.name);
        assert.deepEqual(binding.spec.validationActions, ["Deny"]);
        assert.deepEqual(binding.spec.matchResources.namespaceSelector, { matchLabels: { "kubernetes.io/metadata.name": d.names.namespace } });
        assert.equal(vap.spec.failurePolicy, "Fail");
        assert.deepEqual(vap.spec.matchConstraints.resourceRules, [
            { apiGroups: ["extensions.agents.x-k8s.io"], apiVersions: ["*"], operations: ["CREATE", "UPDATE"], resources: ["sandboxclaims"] },
        ]);

        const created = "2026-11-20T10:00:00Z";
        const claim = (
            labels: Record<string, string> | undefined,
            lifecycle: Record<string, unknown> | undefined,
            extraMeta: Record<string, unknown> = {},
        ) => ({
            object: {
                apiVersion: "extensions.agents.x-k8s.io/v1beta1",
                kind: "SandboxClaim",
                metadata: { name: "c1", namespace: d.names.namespace, creationTimestamp: created, ...(labels ? { labels } : {}), ...extraMeta },
                spec: { warmPoolRef: { name: d.names.warmPool }, ...(lifecycle ? { lifecycle } : {}) },
            },
        });
        const run = { "agentrl.dev/run": "r1" };
        /** Messages of the failing validations (the policy denies when any fails). */
        const denials = (ctx: unknown): string[] => {
            for (const mc of vap.spec.matchConditions) if (evaluate(mc.expression, ctx as any) !== true) return [];
            return vap.spec.validations.filter((v: any) => evaluate(v.expression, ctx as any) !== true).map((v: any) => v.message as string);
        };
        assert.deepEqual(denials(claim(run, { shutdownTime: "2026-11-20T10:30:00Z", shutdownPolicy: "Delete" })), [], "exactly the maximum is allowed");
        assert.deepEqual(denials(claim(run, { shutdownTime: "2026-11-20T10:05:00Z" })), [], "within");
        const none = denials(claim(run, undefined));
        assert.equal(none.length, 1);
        assert.match(none[0], /spec\.lifecycle\.shutdownTime is required: set it to at most 1800s/);
        assert.equal(denials(claim(run, { shutdownPolicy: "Delete" })).length, 1, "lifecycle without shutdownTime");
        const beyond = denials(claim(run, { shutdownTime: "2026-11-20T10:30:01Z" }));
        assert.equal(beyond.length, 1);
        assert.match(beyond[0], /more than 1800s after the claim's creation: set it to at most creationTimestamp \+ 1800s/);
        const noLabel = denials(claim(undefined, { shutdownTime: "2026-11-20T10:10:00Z" }));
        assert.equal(noLabel.length, 1);
        assert.match(noLabel[0], /metadata\.labels\['agentrl\.dev\/run'\] must be 'r1'/);
        assert.equal(denials(claim({ other: "x" }, { shutdownTime: "2026-11-20T10:10:00Z" })).length, 1);
        assert.equal(denials(claim({ "agentrl.dev/run": "r0" }, { shutdownTime: "2026-11-20T10:10:00Z" })).length, 1, "another run's label");
        assert.equal(denials(claim(undefined, undefined)).length, 2);
        // UPDATE: creationTimestamp is the stored creation time, so extending shutdownTime past creation + max is refused.
        assert.equal(denials(claim(run, { shutdownTime: "2026-11-20T11:00:00Z" })).length, 1);
        // A claim being deleted may still lose its finalizers.
        assert.deepEqual(denials(claim(undefined, undefined, { deletionTimestamp: "2026-11-20T10:20:00Z" })), []);
        // The messageExpression uses string(timestamp), which Kubernetes CEL has and cel-js 8.0.0 lacks:
        // cel-js only checks that it parses; a failing messageExpression would fall back to `message` anyway.
        const withMessageExpr = vap.spec.validations.find((v: any) => v.messageExpression !== undefined);
        assert.ok(withMessageExpr.messageExpression.includes("spec.lifecycle.shutdownTime"));
        assert.throws(
            () => evaluate(withMessageExpr.messageExpression, claim(run, { shutdownTime: "2026-11-20T12:00:00Z" }) as any),
            /no matching overload for 'string\(google\.protobuf\.Timestamp\)'/,
        );
    });

    it("sizes the quota for warm pool + claimed in-flight + headroom", async () => {
        const { update, description: d } = await build(config());
        const q = single(update.resources, T.quota).inputs;
        assert.equal(q.metadata.namespace, d.names.namespace);
        const live = d.poolSize + d.maxInflight; // a claim makes the pool create a replacement
        const pods = Number(q.spec.hard.pods);
        assert.equal(pods, live + d.headroom);
        assert.ok(pods >= live, "a normal run is never blocked by its own quota");
        // Each pod: the sandbox and its forwarder (a native sidecar's requests count in the pod's).
        for (const k of ["requests.cpu", "limits.cpu"])
            assert.equal(q.spec.hard[k], addQuantities(multiplyQuantity(d.cpu, pods), multiplyQuantity(d.forwarder.cpu, pods)));
        for (const k of ["requests.memory", "limits.memory"])
            assert.equal(q.spec.hard[k], addQuantities(multiplyQuantity(d.memory, pods), multiplyQuantity(d.forwarder.memory, pods)));
        assert.equal(q.spec.hard["count/sandboxclaims.extensions.agents.x-k8s.io"], String(pods));
    });

    it("gives the trainer exactly claim and sandbox-read rights, namespaced", async () => {
        const { update, names, description: d } = await build(config());
        const role = single(update.resources, T.role).inputs;
        assert.equal(role.metadata.namespace, d.names.namespace);
        assert.deepEqual(role.rules, [
            { apiGroups: ["extensions.agents.x-k8s.io"], resources: ["sandboxclaims"], verbs: ["create", "get", "list", "watch", "delete"] },
            { apiGroups: ["agents.x-k8s.io"], resources: ["sandboxes"], verbs: ["get", "list", "watch"] },
        ]);
        const rb = single(update.resources, T.roleBinding).inputs;
        assert.equal(rb.metadata.namespace, d.names.namespace);
        assert.deepEqual(rb.roleRef, { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: role.metadata.name });
        assert.deepEqual(rb.subjects, [{ kind: "ServiceAccount", name: names.training.serviceAccount, namespace: names.namespaces.training }]);
        assert.equal(update.resources.filter((r) => /ClusterRole/.test(r.type)).length, 0, "nothing cluster-wide");
    });

    it("renders the run's sampling and the rollout's bounds into the forwarder's command (it forces what the trainer checks)", async () => {
        const flags = (c: PlatformConfig) => {
            const command = resolveSandboxPool(c, platformNames(c)).forwarder.command;
            const at = command.indexOf("--temperature");
            return command.slice(at, at + 8);
        };
        // The recipe's own: the program's --temperature default (1.0, programs.ts) and the recipe's maxCompletionLength.
        assert.deepEqual(flags(config()), ["--temperature", "1", "--max-tokens", "4096", "--max-calls", "256", "--max-rollout-tokens", "1048576"]);
        const set = config({ training: { temperature: 0.7, maxCompletionLength: 2048 }, sandboxes: { maxCallsPerRollout: 40, maxTokensPerRollout: 50000 } });
        assert.deepEqual(flags(set), ["--temperature", "0.7", "--max-tokens", "2048", "--max-calls", "40", "--max-rollout-tokens", "50000"]);
        const { update } = await build(set);
        const forwarder = single(update.resources, T.template).inputs.spec.podTemplate.spec.initContainers[0];
        assert.deepEqual(forwarder.command.slice(forwarder.command.indexOf("--temperature"), forwarder.command.indexOf("--key-host")), flags(set));
    });

    it("renders no pool-key Secret and no reference to one: the forwarder holds only its rollout's key", async () => {
        // Issue 56 item 4: no forwarder holds the pool key once per-rollout keys are on, so its Secret (read by no
        // container) is not rendered either; a key passed anyway lands nowhere.
        const { update, preview, description: d, pool } = await build(config());
        for (const run of [update, preview]) {
            assert.deepEqual(ofType(run.resources, T.secret), [], "no Secret in the sandboxes namespace");
            assert.deepEqual(
                run.resources.filter((r) => JSON.stringify(r.inputs).includes(KEY)).map((r) => r.type),
                [],
            );
            const spec = single(run.resources, T.template).inputs.spec.podTemplate.spec;
            assert.equal(spec.initContainers[0].env, undefined);
            assert.ok(!spec.initContainers[0].command.includes("--key-env"));
            assert.ok(!JSON.stringify(spec).includes(d.names.keySecret), "no container of the pod refers to the pool key");
        }
        assert.ok(!JSON.stringify(pool.trainerEnv).includes(KEY));
    });

    it("registers as many resources for a pool of 1000 as for a pool of 8", async () => {
        const small = await build(config({ sandboxes: { poolSize: 8 } }));
        const large = await build(config({ sandboxes: { poolSize: 1000 } }));
        assert.equal(single(large.update.resources, T.warmPool).inputs.spec.replicas, 1000);
        const kinds = (rs: RecordedResource[]) => rs.map((r) => r.type).sort();
        assert.equal(large.update.resources.length, small.update.resources.length);
        assert.deepEqual(kinds(large.update.resources), kinds(small.update.resources));
        assert.equal(large.preview.resources.length, small.preview.resources.length);
        assert.equal(large.pool.size, 1000);
    });

    it("installs nothing cluster-wide (the cluster stack owns agent-sandbox); the sandboxes take their PriorityClass", async () => {
        const { update } = await build(config({ sandboxes: { priorityClassName: "agent-rl-sandboxes" } }));
        assert.deepEqual(ofType(update.resources, T.configFile), [], "no agent-sandbox release in a run stack");
        const template = single(update.resources, T.template);
        assert.equal(template.inputs.spec.podTemplate.spec.priorityClassName, "agent-rl-sandboxes");
        const plain = await build(config());
        assert.equal(single(plain.update.resources, T.template).inputs.spec.podTemplate.spec.priorityClassName, undefined);
    });

    it("names its children after the component and exposes the pool", async () => {
        const { update, pool, description: d } = await build(config());
        const children = update.resources.filter((r) => r.type !== T.pool && r.type !== "pulumi:pulumi:Stack");
        for (const r of children) assert.match(r.name, /^sandboxes-/);
        assert.equal(single(update.resources, T.pool).name, "sandboxes");
        assert.equal(pool.size, 13);
        assert.deepEqual(pool.trainerEnv, d.trainerEnv);
        assert.equal(update.outputs?.poolName, d.names.warmPool);
        assert.equal(update.outputs?.namespace, d.names.namespace);
        assert.equal(update.outputs?.template, d.names.template);
    });

    it("fails clearly without the ingress and trainer peers", async () => {
        const c = config();
        const description = resolveSandboxPool(c, platformNames(c));
        await assert.rejects(
            runBoth(() => {
                new SandboxPool("sandboxes", { description, sandboxKey: KEY });
            }),
            /needs args\.ingress .* and args\.trainer/,
        );
    });

    it("renders core objects that pass the Kubernetes schema", async () => {
        const { update } = await build(config({ sandboxes: { runtimeClassName: "gvisor" } }));
        // Strict check (unknown fields too) from test/helpers/k8s-schema.ts when present; kubernetes-models otherwise.
        const helperPath = path.join(__dirname, "..", "helpers", "k8s-schema.ts");
        const helper: { loadManifestSchemas?: () => Promise<void>; validateManifestStrict?: (o: unknown) => string[] } = fs.existsSync(helperPath)
            ? await import(helperPath)
            : {};
        await helper.loadManifestSchemas?.();
        const models: Record<string, () => Promise<any>> = {
            "v1/Secret": async () => (await import("kubernetes-models/v1/Secret")).Secret,
            "v1/ResourceQuota": async () => (await import("kubernetes-models/v1/ResourceQuota")).ResourceQuota,
            "v1/Pod": async () => (await import("kubernetes-models/v1/Pod")).Pod,
            "networking.k8s.io/v1/NetworkPolicy": async () => (await import("kubernetes-models/networking.k8s.io/v1/NetworkPolicy")).NetworkPolicy,
            "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy": async () =>
                (await import("kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")).ValidatingAdmissionPolicy,
            "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding": async () =>
                (await import("kubernetes-models/admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding")).ValidatingAdmissionPolicyBinding,
            "rbac.authorization.k8s.io/v1/Role": async () => (await import("kubernetes-models/rbac.authorization.k8s.io/v1/Role")).Role,
            "rbac.authorization.k8s.io/v1/RoleBinding": async () => (await import("kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding")).RoleBinding,
        };
        const problems = async (obj: any): Promise<string[]> => {
            const strict = helper.validateManifestStrict?.(obj);
            if (strict !== undefined && !/no schema known/.test(strict[0] ?? "")) return strict;
            const Model = await models[`${obj.apiVersion}/${obj.kind}`]();
            try {
                new Model(obj).validate();
                return [];
            } catch (e) {
                return [String((e as Error).message)];
            }
        };
        const core = update.resources.filter((r) => r.custom && !r.type.includes("agents.x-k8s.io") && r.type !== "pulumi:pulumi:Stack");
        assert.equal(core.length, 6, "quota, network policy, claim policy and binding, role and binding: no pool-key Secret");
        for (const r of core) assert.deepEqual(await problems(unwrapSecrets(r.inputs)), [], r.type);
        // The template's pod is a core pod: validate it as one (strictly, unknown fields included).
        const pod = single(update.resources, T.template).inputs.spec.podTemplate;
        assert.deepEqual(await problems({ apiVersion: "v1", kind: "Pod", metadata: { name: "sandbox", ...pod.metadata }, spec: pod.spec }), []);
    });
});

describe("The pool follows the claim rate (sandboxes.autoscale)", () => {
    const HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler";
    const autoscaled = (sandboxes: Record<string, unknown> = {}) => config({ ...OBSERVABILITY_ON, sandboxes: { autoscale: { enabled: true }, ...sandboxes } });

    it("renders no autoscaler by default: the pool is a fixed size", async () => {
        const { update, preview, description: d } = await build(config());
        for (const run of [update, preview]) assert.equal(ofType(run.resources, HPA).length, 0);
        assert.equal(d.pools[0].autoscale, undefined);
    });

    it("autoscales the warm pool through its /scale: min the computed size, max twice it, on the stack's wanted-size series", async () => {
        const { update, preview, description: d } = await build(autoscaled());
        for (const run of [update, preview]) {
            const hpa = single(run.resources, HPA).inputs;
            const pool = single(run.resources, T.warmPool).inputs;
            assert.equal(hpa.metadata.namespace, d.names.namespace);
            assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: CRD.apiVersion, kind: "SandboxWarmPool", name: pool.metadata.name });
            assert.equal(hpa.spec.minReplicas, 13, "the computed size: burst 8 + refill 3 + headroom 2");
            assert.equal(hpa.spec.minReplicas, pool.spec.replicas, "the pool starts at the autoscaler's minimum");
            assert.equal(hpa.spec.maxReplicas, 26);
            assert.deepEqual(hpa.spec.metrics, [
                {
                    type: "External",
                    external: {
                        metric: { name: "agentrl_sandbox_warm_pool_wanted", selector: { matchLabels: { sandbox_template: d.names.template } } },
                        target: { type: "AverageValue", averageValue: "1" },
                    },
                },
            ]);
        }
    });

    it("counts the autoscaler's maximum in the namespace quota, so a scaled-up pool never meets it", async () => {
        const { update, description: d } = await build(autoscaled({ autoscale: { enabled: true, maxPoolSize: 40 } }));
        assert.equal(single(update.resources, HPA).inputs.spec.maxReplicas, 40);
        const q = single(update.resources, T.quota).inputs;
        assert.equal(Number(q.spec.hard.pods), 40 + 8 + 2, "max warm + the burst claimed + headroom");
        assert.equal(d.quota.pods, 50);
        assert.equal(q.spec.hard["requests.cpu"], addQuantities(multiplyQuantity(d.cpu, 50), multiplyQuantity(d.forwarder.cpu, 50)));
        const fixed = resolveSandboxPool(config(), platformNames(config()));
        assert.equal(fixed.quota.pods, 13 + 8 + 2, "a fixed pool: its size");
    });

    it("one autoscaler per Harbor task image's pool, each on its own template's series", () => {
        const c = parsePlatformConfig(
            {
                recipe: "harbor-blackbox",
                runId: "r1",
                target: { kind: "kubernetes", context: "test-cluster" },
                ...OBSERVABILITY_ON,
                sandboxes: { autoscale: { enabled: true } },
            },
            "test",
        );
        const d = resolveSandboxPool(c, platformNames(c));
        assert.ok(d.pools.length >= 2, "the recipe's plan lists several task images");
        assert.deepEqual(
            d.pools.map((p) => p.autoscale?.selector),
            d.pools.map((p) => ({ sandbox_template: p.template })),
        );
        assert.equal(new Set(d.pools.map((p) => p.autoscale?.name)).size, d.pools.length, "each its own HPA name");
        assert.equal(d.quota.pods, d.pools.length * 2 * c.sandboxes.poolSize + c.sandboxes.sizing.burst + c.sandboxes.headroom);
    });

    it("renders an autoscaler that passes the Kubernetes schema (autoscaling/v2, strict)", async () => {
        const { update } = await build(autoscaled());
        await loadManifestSchemas();
        const hpa = single(update.resources, HPA).inputs;
        assert.deepEqual(validateManifestStrict(hpa), []);
        // The check bites: a misspelt field or a missing maxReplicas is refused.
        assert.notDeepEqual(validateManifestStrict({ ...hpa, spec: { ...hpa.spec, maxReplica: 3 } }), []);
        const { maxReplicas: _max, ...noMax } = hpa.spec;
        assert.notDeepEqual(validateManifestStrict({ ...hpa, spec: noMax }), []);
    });
});

describe("The ingress key and the agent's container, over every black-box recipe", () => {
    const blackbox = ALL_RECIPE_NAMES.filter((r) => RECIPES[r].training.layout === "blackbox");
    it("covers the black-box recipes", () => assert.ok(blackbox.length >= 2, blackbox.join(", ")));
    for (const recipe of blackbox) {
        it(`${recipe}: no container of the pod carries the pool key (the forwarder takes its rollout's key)`, async () => {
            const { update, preview, description: d } = await build(config({}, recipe));
            for (const run of [update, preview]) {
                const holders = run.resources.filter((r) => JSON.stringify(r.inputs).includes(KEY));
                assert.deepEqual(
                    holders.map((r) => r.type),
                    [],
                    "no pool-key Secret is rendered",
                );
                // Every pool's template (one, or one per Harbor task image).
                const templates = ofType(run.resources, T.template);
                assert.equal(templates.length, d.pools.length);
                for (const template of templates) {
                    const spec = template.inputs.spec.podTemplate.spec;
                    const refs = (c: any) => (c.env ?? []).filter((e: any) => e.valueFrom?.secretKeyRef?.name === d.names.keySecret);
                    for (const c of spec.containers) assert.deepEqual(refs(c), [], `container ${c.name}`);
                    assert.deepEqual(
                        spec.initContainers.map((c: any) => [c.name, refs(c).length]),
                        [["forwarder", 0]],
                    );
                    assert.ok(!JSON.stringify(spec.podTemplate?.metadata ?? {}).includes(KEY), "no label or annotation");
                }
            }
        });
    }
});

describe("Sandbox providers: one module per name, the refused ones render nothing", () => {
    it("the table has a module for every provider name, each with the config's record", () => {
        assert.deepEqual(Object.keys(SANDBOX_PROVIDERS).sort(), [...SANDBOX_PROVIDER_NAMES].sort());
        for (const name of SANDBOX_PROVIDER_NAMES) assert.equal(SANDBOX_PROVIDERS[name].record, SANDBOX_PROVIDER_RECORDS[name], name);
    });

    it("agent-sandbox is the only provider with a pool, and docker and hf are refused with their reason", () => {
        const pooled = SANDBOX_PROVIDER_NAMES.filter((n) => "pool" in SANDBOX_PROVIDER_RECORDS[n]);
        assert.deepEqual(pooled, ["agent-sandbox"]);
        const refused = SANDBOX_PROVIDER_NAMES.filter((n) => "refused" in SANDBOX_PROVIDER_RECORDS[n]);
        assert.deepEqual(refused, ["docker", "hf"]);
    });

    for (const [name, parse] of [
        ["docker", () => parseDockerPoolConfig({ recipe: "opencode-blackbox", runId: "r1", target: { kind: "docker" } }, "test")],
        [
            "hf",
            () =>
                parseHostedConfig(
                    { recipe: "opencode-blackbox", runId: "r1", target: { kind: "kubernetes", context: "test-cluster" }, sandboxes: { provider: "hf" } },
                    "test",
                ),
        ],
    ] as const) {
        it(`${name}: with the config's refusal skipped, the Platform and the module refuse it with the reason`, () => {
            const c = parse();
            assert.equal(c.sandboxes.provider, name);
            assert.equal(sandboxPoolOf(c), undefined, "a refused provider runs no pool");
            const reason = (SANDBOX_PROVIDER_RECORDS[name] as { refused: string }).refused;
            assert.throws(
                () => resolvePlatform(c),
                (e: Error) => e.message.includes(reason),
            );
            const m = SANDBOX_PROVIDERS[name];
            assert.throws(
                () => m.trainerEnv(c, platformNames(c), []),
                (e: Error) => e.message.includes(reason),
            );
            assert.throws(
                () => m.register("x", {} as never, {} as never),
                (e: Error) => e.message.includes(`sandboxes.provider ${name} renders nothing`),
            );
        });
    }
});

describe("SandboxClaim admission on a real API server", { skip: process.env.SKIP_APISERVER === "1" ? "SKIP_APISERVER=1" : false }, () => {
    it("denies claims without a bounded shutdownTime or the run label, admits good ones", { timeout: scaled(240_000) }, async () => {
        const { startApiServer } = await import("../helpers/apiserver");
        const k = await import("../../components/sandbox");
        const { sandboxClaimPolicySpec, sandboxClaimBindingSpec } = k;
        const c = config({ sandboxes: { maxLifetimeSeconds: 600 } });
        const d = resolveSandboxPool(c, platformNames(c));
        const api = await startApiServer();
        try {
            const ns = d.names.namespace;
            const manifests = [
                { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
                {
                    apiVersion: "admissionregistration.k8s.io/v1",
                    kind: "ValidatingAdmissionPolicy",
                    metadata: { name: d.names.admissionPolicy },
                    spec: sandboxClaimPolicySpec(d),
                },
                {
                    apiVersion: "admissionregistration.k8s.io/v1",
                    kind: "ValidatingAdmissionPolicyBinding",
                    metadata: { name: d.names.admissionBinding },
                    spec: sandboxClaimBindingSpec(d),
                },
            ];
            await api.kubectlOk(["apply", "-f", "-"], manifests.map((m) => JSON.stringify(m)).join("\n"));
            const claim = (name: string, labels: Record<string, string> | undefined, shutdownInSeconds: number | undefined) =>
                JSON.stringify({
                    apiVersion: "extensions.agents.x-k8s.io/v1beta1",
                    kind: "SandboxClaim",
                    metadata: { name, namespace: ns, ...(labels ? { labels } : {}) },
                    spec: {
                        warmPoolRef: { name: d.names.warmPool },
                        ...(shutdownInSeconds !== undefined
                            ? {
                                  lifecycle: {
                                      shutdownTime: new Date(Date.now() + shutdownInSeconds * 1000).toISOString().replace(/\.\d+Z$/, "Z"),
                                      shutdownPolicy: "Delete",
                                  },
                              }
                            : {}),
                    },
                });
            const run = { "agentrl.dev/run": "r1" };
            // The policy becomes active asynchronously: retry the must-deny case until it is denied.
            let first = await api.kubectl(["create", "-f", "-"], claim("probe", run, undefined));
            for (let i = 0; i < scaledCount(60) && first.code === 0; i++) {
                await api.kubectl(["-n", ns, "delete", "sandboxclaim", "probe", "--wait=false"]);
                await new Promise((r) => setTimeout(r, 500));
                first = await api.kubectl(["create", "-f", "-"], claim("probe", run, undefined));
            }
            assert.notEqual(first.code, 0, "claim without shutdownTime is denied");
            assert.match(first.stderr, /spec\.lifecycle\.shutdownTime is required/);
            const beyond = await api.kubectl(["create", "-f", "-"], claim("beyond", run, 3600));
            assert.notEqual(beyond.code, 0);
            assert.match(
                beyond.stderr,
                /spec\.lifecycle\.shutdownTime \S+ is more than 600s after the claim was created \(\S+\): set it to at most \S+/,
                "messageExpression rendered",
            );
            const noLabel = await api.kubectl(["create", "-f", "-"], claim("nolabel", undefined, 300));
            assert.notEqual(noLabel.code, 0);
            assert.match(noLabel.stderr, /agentrl\.dev\/run/);
            const ok = await api.kubectl(["create", "-f", "-"], claim("good", run, 300));
            assert.equal(ok.code, 0, ok.stderr);
            // UPDATE cannot extend past creation + max.
            const extend = await api.kubectl([
                "-n",
                ns,
                "patch",
                "sandboxclaim",
                "good",
                "--type=merge",
                "-p",
                JSON.stringify({ spec: { lifecycle: { shutdownTime: new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, "Z") } } }),
            ]);
            assert.notEqual(extend.code, 0, "extending beyond the maximum is denied");
            // The agent-sandbox objects pass the real v1.0.1 CRDs (strict field validation), and the
            // sandbox pod passes Pod Security "restricted".
            const names = platformNames(c);
            const { ingress, trainer } = peers(names);
            await api.kubectlOk(["label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted"]);
            await api.kubectlOk(["-n", ns, "create", "serviceaccount", "default"]); // no controller-manager here
            const objects = [
                {
                    apiVersion: "extensions.agents.x-k8s.io/v1beta1",
                    kind: "SandboxTemplate",
                    metadata: { name: d.names.template, namespace: ns },
                    spec: k.sandboxTemplateSpec(d),
                },
                {
                    apiVersion: "extensions.agents.x-k8s.io/v1beta1",
                    kind: "SandboxWarmPool",
                    metadata: { name: d.names.warmPool, namespace: ns },
                    spec: k.sandboxWarmPoolSpec(d),
                },
                {
                    apiVersion: "networking.k8s.io/v1",
                    kind: "NetworkPolicy",
                    metadata: { name: d.names.networkPolicy, namespace: ns },
                    spec: k.sandboxNetworkPolicySpec(d, ingress, trainer),
                },
                { apiVersion: "v1", kind: "ResourceQuota", metadata: { name: d.names.quota, namespace: ns }, spec: k.sandboxQuotaSpec(d) },
                { apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: { name: d.names.role, namespace: ns }, rules: k.sandboxClaimerRules() },
            ];
            for (const o of objects) await api.kubectlOk(["create", "--dry-run=server", "--validate=strict", "-f", "-"], JSON.stringify(o));
            const podTemplate = (k.sandboxTemplateSpec(d) as any).podTemplate;
            const pod = {
                apiVersion: "v1",
                kind: "Pod",
                metadata: { name: "sandbox-psa", namespace: ns, labels: podTemplate.metadata.labels },
                spec: podTemplate.spec,
            };
            const psa = await api.kubectl(["create", "--dry-run=server", "-f", "-"], JSON.stringify(pod));
            assert.equal(psa.code, 0, psa.stderr);
            assert.doesNotMatch(psa.stderr, /violate/i, "no PodSecurity warnings");
            const rootPod = {
                ...pod,
                metadata: { ...pod.metadata, name: "root-psa" },
                spec: { ...pod.spec, securityContext: { ...pod.spec.securityContext, runAsNonRoot: false, runAsUser: 0 } },
            };
            const denied = await api.kubectl(["create", "--dry-run=server", "-f", "-"], JSON.stringify(rootPod));
            assert.notEqual(denied.code, 0, "the fixture enforces PodSecurity (a root pod is refused)");
            assert.match(denied.stderr, /violates PodSecurity "restricted/);
            // Outside the sandboxes namespace the binding does not apply.
            await api.kubectlOk(["create", "namespace", "elsewhere"]);
            const other = await api.kubectl(["create", "-f", "-"], claim("x", undefined, undefined).replace(`"namespace":"${ns}"`, `"namespace":"elsewhere"`));
            assert.equal(other.code, 0, other.stderr);
        } finally {
            await api.stop();
        }
    });
});
