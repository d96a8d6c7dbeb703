/**
 * Guardrails: every Kubernetes object of every stack, every recipe on Kubernetes and the
 * ingress exposure variants passes a strict schema check: built-in kinds against the
 * Kubernetes 1.36 API schema (kubernetes-models 5.1.0) with unknown fields as errors,
 * custom resources (agent-sandbox v1.0.1, Gateway API v1 HTTPRoute) against what
 * test/helpers/crd-schema.ts encodes (apiVersion/kind, required fields, enums, known fields).
 * Run: node --import tsx --test test/stack/guardrails-schema.test.ts
 */
import assert from "node:assert/strict";
import * as path from "node:path";
import { before, describe, test } from "node:test";
import { validateAnyManifest, validateCustomResource } from "../helpers/crd-schema";
import { allSources, planGuarded, tempDir } from "../helpers/guardrails-plan";
import { loadManifestSchemas, validateManifestStrict } from "../helpers/k8s-schema";

const tmp = tempDir("arl-guardrails-schema-");
before(async () => {
    await loadManifestSchemas();
});

const SANDBOX_GROUP = "extensions.agents.x-k8s.io/v1beta1";

describe("guardrails: strict schema over every planned Kubernetes object", () => {
    allSources(["kubernetes"]).forEach((s, i) => {
        test(`${s.label}: every object passes the strict schema`, async () => {
            const { result } = await planGuarded(s.source, { outDir: path.join(tmp, String(i)), platformOverride: s.override });
            if (result.plan.config.target.kind !== "kubernetes") return;
            assert.ok(result.manifests.length > 0, "a Kubernetes plan has objects");
            const problems = result.manifests.flatMap((m) =>
                validateAnyManifest(m).map((p) => `${m.kind} ${m.metadata?.namespace ?? ""}/${m.metadata?.name}: ${p}`),
            );
            assert.deepEqual(problems, []);
            const kinds = new Set(result.manifests.map((m) => `${m.apiVersion}/${m.kind}`));
            if (result.plan.sandboxes?.provider === "agent-sandbox") {
                assert.ok(
                    kinds.has(`${SANDBOX_GROUP}/SandboxTemplate`) && kinds.has(`${SANDBOX_GROUP}/SandboxWarmPool`),
                    "the agent-sandbox objects were checked",
                );
            }
            if (s.override === undefined || result.plan.config.ingress.exposure !== "httproute") return;
            assert.ok(kinds.has("gateway.networking.k8s.io/v1/HTTPRoute"), "exposure httproute creates an HTTPRoute, and it was checked");
        });
    });
});

const deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web", namespace: "demo" },
    spec: {
        selector: { matchLabels: { app: "web" } },
        template: {
            metadata: { labels: { app: "web" } },
            spec: { containers: [{ name: "web", image: `nginx@sha256:${"a".repeat(64)}`, startupProbe: { httpGet: { path: "/", port: 8080 } } }] },
        },
    },
};

describe("guardrails: the strict check can fail", () => {
    test("a valid Deployment passes", () => {
        assert.deepEqual(validateManifestStrict(deployment), []);
    });

    test("a `startupprobe` typo in a Deployment's container is an unknown field", () => {
        const typo = structuredClone(deployment) as any;
        const c = typo.spec.template.spec.containers[0];
        c.startupprobe = c.startupProbe;
        delete c.startupProbe;
        assert.deepEqual(
            validateManifestStrict(typo).map((p) => p.split(" (known")[0]),
            ['/spec/template/spec/containers/0/startupprobe: unknown field "startupprobe"'],
        );
    });

    test("an unknown field anywhere in a Deployment is an error", () => {
        const extra = structuredClone(deployment) as any;
        extra.spec.replica = 2;
        assert.match(validateManifestStrict(extra).join("\n"), /\/spec\/replica: unknown field "replica"/);
    });

    test("a wrong type is an error", () => {
        const wrong = structuredClone(deployment) as any;
        wrong.spec.replicas = "2";
        assert.match(validateManifestStrict(wrong).join("\n"), /\/spec\/replicas: must be integer/);
    });
});

const template = {
    apiVersion: `${SANDBOX_GROUP}`,
    kind: "SandboxTemplate",
    metadata: { name: "sandbox-run-1", namespace: "arl-sandboxes" },
    spec: {
        podTemplate: { metadata: { labels: { app: "sandbox" } }, spec: { containers: [{ name: "sandbox", image: "busybox" }] } },
        networkPolicyManagement: "Unmanaged",
        envVarsInjectionPolicy: "Disallowed",
        volumeClaimTemplatesPolicy: "Disallowed",
        service: true,
    },
};

describe("guardrails: custom resources (agent-sandbox v1.0.1, Gateway API v1)", () => {
    test("a valid SandboxTemplate passes; its pod spec is checked strictly as a core PodSpec", () => {
        assert.deepEqual(validateCustomResource(template), []);
        const bad = structuredClone(template) as any;
        bad.spec.podTemplate.spec.containers[0].startupprobe = {};
        assert.match(validateCustomResource(bad).join("\n"), /\/spec\/podTemplate\/spec\/containers\/0\/startupprobe: unknown field "startupprobe"/);
    });

    test("SandboxTemplate: podTemplate required, networkPolicyManagement enum, unknown fields", () => {
        const cases: Array<[(o: any) => void, RegExp]> = [
            [(o) => delete o.spec.podTemplate, /\/spec\/podTemplate: required/],
            [(o) => delete o.spec.podTemplate.spec, /\/spec\/podTemplate\/spec: required/],
            [(o) => (o.spec.networkPolicyManagement = "Off"), /\/spec\/networkPolicyManagement: must be one of Managed, Unmanaged/],
            [(o) => (o.spec.envVarsInjectionPolicy = "Never"), /\/spec\/envVarsInjectionPolicy: must be one of Allowed, Overrides, Disallowed/],
            [(o) => (o.spec.volumeClaimTemplatesPolicy = "No"), /\/spec\/volumeClaimTemplatesPolicy: must be one of Disallowed, Allowed, Overrides/],
            [(o) => (o.spec.networkPolicy = { egress: [{ too: [] }] }), /\/spec\/networkPolicy\/egress\/0\/too: unknown field/],
            [(o) => (o.spec.replicas = 3), /\/spec\/replicas: unknown field "replicas"/],
            [(o) => (o.apiVersion = "extensions.agents.x-k8s.io/v1alpha2"), /not a custom resource this project knows/],
            [(o) => delete o.spec, /\/spec: required/],
            [(o) => (o.metadata.name = "Sandbox_1"), /\/metadata\/name: .* does not match/],
        ];
        for (const [breakIt, re] of cases) {
            const o = structuredClone(template);
            breakIt(o);
            assert.match(validateCustomResource(o).join("\n"), re);
        }
    });

    test("SandboxWarmPool: sandboxTemplateRef.name required, updateStrategy.type enum, replicas >= 0", () => {
        const pool = {
            apiVersion: SANDBOX_GROUP,
            kind: "SandboxWarmPool",
            metadata: { name: "pool" },
            spec: { sandboxTemplateRef: { name: "sandbox-run-1" }, replicas: 10, updateStrategy: { type: "OnReplenish" } },
        };
        assert.deepEqual(validateCustomResource(pool), []);
        const cases: Array<[(o: any) => void, RegExp]> = [
            [(o) => delete o.spec.sandboxTemplateRef, /\/spec\/sandboxTemplateRef: required/],
            [(o) => delete o.spec.sandboxTemplateRef.name, /\/spec\/sandboxTemplateRef\/name: required/],
            [(o) => (o.spec.updateStrategy.type = "Rolling"), /\/spec\/updateStrategy\/type: must be one of Recreate, OnReplenish/],
            [(o) => (o.spec.replicas = -1), /\/spec\/replicas: must be >= 0/],
            [(o) => (o.spec.replicas = 1.5), /\/spec\/replicas: must be integer/],
        ];
        for (const [breakIt, re] of cases) {
            const o = structuredClone(pool);
            breakIt(o);
            assert.match(validateCustomResource(o).join("\n"), re);
        }
    });

    test("SandboxClaim: warmPoolRef.name required, lifecycle.shutdownPolicy enum, shutdownTime RFC 3339", () => {
        const claim = {
            apiVersion: SANDBOX_GROUP,
            kind: "SandboxClaim",
            metadata: { name: "claim-1", labels: { "agentrl.dev/run": "run-1" } },
            spec: { warmPoolRef: { name: "pool" }, lifecycle: { shutdownPolicy: "Delete", shutdownTime: "2026-01-01T00:00:00Z" } },
        };
        assert.deepEqual(validateCustomResource(claim), []);
        const cases: Array<[(o: any) => void, RegExp]> = [
            [(o) => delete o.spec.warmPoolRef, /\/spec\/warmPoolRef: required/],
            [(o) => (o.spec.lifecycle.shutdownPolicy = "Destroy"), /\/spec\/lifecycle\/shutdownPolicy: must be one of Delete, DeleteForeground, Retain/],
            [(o) => (o.spec.lifecycle.shutdownTime = "tomorrow"), /\/spec\/lifecycle\/shutdownTime: must be an RFC 3339 date-time/],
            [(o) => (o.spec.env = [{ name: "A" }]), /\/spec\/env\/0\/value: required/],
        ];
        for (const [breakIt, re] of cases) {
            const o = structuredClone(claim);
            breakIt(o);
            assert.match(validateCustomResource(o).join("\n"), re);
        }
    });

    test("HTTPRoute: parentRefs/backendRefs names required, Service backends need a port, path enums, absolute paths", () => {
        const route = {
            apiVersion: "gateway.networking.k8s.io/v1",
            kind: "HTTPRoute",
            metadata: { name: "vllm-ingress", namespace: "arl-ingress" },
            spec: {
                parentRefs: [{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "gw", namespace: "gateway-system" }],
                hostnames: ["vllm.example.com"],
                rules: [
                    {
                        matches: [{ path: { type: "Exact", value: "/v1/chat/completions" } }],
                        backendRefs: [{ group: "", kind: "Service", name: "vllm-ingress", port: 8080 }],
                    },
                ],
            },
        };
        assert.deepEqual(validateCustomResource(route), []);
        const cases: Array<[(o: any) => void, RegExp]> = [
            [(o) => delete o.spec.parentRefs[0].name, /\/spec\/parentRefs\/0\/name: required/],
            [(o) => delete o.spec.rules[0].backendRefs[0].name, /\/spec\/rules\/0\/backendRefs\/0\/name: required/],
            [(o) => delete o.spec.rules[0].backendRefs[0].port, /\/spec\/rules\/0\/backendRefs\/0\/port: required for a Service backend/],
            [(o) => (o.spec.rules[0].matches[0].path.type = "Prefix"), /path\/type: must be one of Exact, PathPrefix, RegularExpression/],
            [(o) => (o.spec.rules[0].matches[0].path.value = "v1"), /must be an absolute path/],
            [(o) => (o.spec.rules[0].backendRefs[0].serviceName = "x"), /backendRefs\/0\/serviceName: unknown field/],
            [(o) => (o.spec.hostnames = ["Vllm.Example.com"]), /\/spec\/hostnames\/0: .* does not match/],
        ];
        for (const [breakIt, re] of cases) {
            const o = structuredClone(route);
            breakIt(o);
            assert.match(validateCustomResource(o).join("\n"), re);
        }
    });

    test("a kind neither helper knows is reported, not passed", () => {
        assert.match(validateAnyManifest({ apiVersion: "example.com/v1", kind: "Widget" }).join(""), /no schema known/);
        assert.match(validateAnyManifest({ apiVersion: "agents.x-k8s.io/v1alpha1", kind: "Sandbox" }).join(""), /not a custom resource this project knows/);
    });
});

describe("guardrails: the schema version is pinned", () => {
    test("docs/guides/kubernetes.md states Kubernetes 1.36 (kubernetes-models 5.1), and package.json pins kubernetes-models 5.1.0", async () => {
        const fs = await import("node:fs");
        const root = path.resolve(__dirname, "..", "..");
        const readme = fs.readFileSync(path.join(root, "docs", "guides", "kubernetes.md"), "utf8");
        assert.match(readme, /\*\*1\.36\*\* API schema \(`kubernetes-models` 5\.1\)/);
        const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
        assert.equal(pkg.devDependencies["kubernetes-models"], "5.1.0");
        const installed = JSON.parse(fs.readFileSync(path.join(root, "node_modules", "kubernetes-models", "package.json"), "utf8"));
        assert.equal(installed.version, "5.1.0");
    });
});
