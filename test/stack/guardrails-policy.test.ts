/**
 * Guardrails: the policy pack (policy/) over the real program's resources, for every stack,
 * every recipe on every target and the ingress exposure variants (planToDir -> recorded
 * resources, inputs as props the way @pulumi/policy hands them: secrets unwrapped). Good
 * stacks pass with zero violations; hand-broken clones of real resources make each policy
 * fire with a message that says what is wrong and how to fix it.
 * Run: node --import tsx --test test/stack/guardrails-policy.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { before, describe, test } from "node:test";
import type { PolicyPackConfig } from "@pulumi/policy";
import * as pack from "../../policy/policies";
import { runPolicies, type LocalResource, type LocalViolation } from "../../policy/run-local";
import { allSources, planGuarded, policyResources, tempDir } from "../helpers/guardrails-plan";

const tmp = tempDir("arl-guardrails-policy-");
const PROD_CONFIG: PolicyPackConfig = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "policy", "config.prod.json"), "utf8"));
/** Sentinel secrets, so secret env vars really appear (as secretKeyRef / Docker secret envs). */
const SECRETS = { hfToken: "hf_SENTINELguardrails0123456789abcdef", "ingressKey-operators": "SENTINEL-operator-key-0123456789" };

const isProd = (stack: string) => stack === "prod" || stack.startsWith("prod-");
const show = (vs: readonly LocalViolation[]) => vs.map((v) => `[${v.policy}/${v.enforcementLevel}] ${v.message}`);

/** Real resources of the plans the broken variants start from. */
let k8sBlackbox: LocalResource[] = [];
let dockerServer: LocalResource[] = [];
let k8sWhitebox: LocalResource[] = [];
/** The staging stack with the two-container pod (gpuSharing isolated: vLLM as a native sidecar). */
let k8sSidecar: LocalResource[] = [];

before(async () => {
    k8sBlackbox = policyResources((await planGuarded({ stack: "staging" }, { outDir: path.join(tmp, "base-k8s"), secrets: SECRETS })).result.resources);
    // Docker runs no black box (refused for both its providers): a white box with vLLM as a container of its own.
    dockerServer = policyResources(
        (
            await planGuarded(
                { recipe: "mbpp-whitebox", target: "docker" },
                { outDir: path.join(tmp, "base-docker"), platformOverride: { training: { layout: "whitebox-server", gpusOnNode: 2 } }, secrets: SECRETS },
            )
        ).result.resources,
    );
    k8sWhitebox = policyResources(
        (await planGuarded({ recipe: "mbpp-whitebox", target: "kubernetes" }, { outDir: path.join(tmp, "base-wb"), secrets: SECRETS })).result.resources,
    );
    k8sSidecar = policyResources(
        (
            await planGuarded(
                { stack: "staging" },
                { outDir: path.join(tmp, "base-sidecar"), platformOverride: { training: { gpuSharing: "isolated" } }, secrets: SECRETS },
            )
        ).result.resources,
    );
});

describe("policy pack: the real program passes", () => {
    allSources().forEach((s, i) => {
        test(`${s.label}: zero violations (prod: under config.prod.json, every policy mandatory)`, async () => {
            const { result } = await planGuarded(s.source, { outDir: path.join(tmp, `good-${i}`), platformOverride: s.override, secrets: SECRETS });
            const resources = policyResources(result.resources);
            assert.ok(resources.length > 0);
            const config = isProd(result.stack) ? PROD_CONFIG : {};
            assert.deepEqual(show(await runPolicies(resources, { config, stack: result.stack })), []);
        });
    });

    test("prod config: every policy mandatory, Docker env secrets advisory, pinning on; default: advisory, pinning off", () => {
        for (const p of pack.policies) {
            const prod = pack.effectiveEnforcement(p, PROD_CONFIG);
            assert.equal(prod, p.name === "docker-env-secrets" ? "advisory" : "mandatory", p.name);
            const dflt = pack.effectiveEnforcement(p, {});
            assert.equal(dflt, p.name === "prod-images-pinned-by-digest" ? "disabled" : "advisory", p.name);
        }
        assert.deepEqual(pack.policies.map((p) => p.name).sort(), [
            "docker-env-secrets",
            "gpu-requests-equal-limits",
            "no-plain-secrets",
            "prod-images-pinned-by-digest",
            "routes-reach-only-proxy",
            "sandbox-egress-locked",
            "sandbox-namespace-hardening",
            "sandbox-pod-hardening",
            "vllm-not-exposed",
            "vllm-startup-probe",
        ]);
    });
});

// --- broken variants --------------------------------------------------------------------

function clone(resources: readonly LocalResource[]): LocalResource[] {
    return resources.map((r) => ({ ...r, props: structuredClone(r.props) }));
}

function one(resources: readonly LocalResource[], type: string, pick: (r: LocalResource) => boolean = () => true): LocalResource {
    const found = resources.filter((r) => r.type === type && pick(r));
    assert.ok(found.length > 0, `the plan has a ${type}`);
    return found[0];
}

/** The pod spec of a workload (Job template / SandboxTemplate podTemplate). */
function podOf(r: LocalResource): any {
    return pack.podSpecsOf(r.type, r.props)[0].spec;
}

async function violations(resources: readonly LocalResource[], config: PolicyPackConfig = {}): Promise<LocalViolation[]> {
    return runPolicies(resources, { config, stack: "broken" });
}

/** Asserts exactly the named policy fires (at least once), with messages matching `re`. */
async function expectOnly(resources: readonly LocalResource[], policy: string, re: RegExp, config: PolicyPackConfig = {}): Promise<LocalViolation[]> {
    const vs = await violations(resources, config);
    assert.ok(vs.length > 0, `${policy} fires`);
    assert.deepEqual([...new Set(vs.map((v) => v.policy))], [policy], show(vs).join("\n"));
    for (const v of vs) assert.match(v.message, re);
    return vs;
}

const JOB = "kubernetes:batch/v1:Job";

describe("policy pack: each policy fires on a broken clone of a real resource", () => {
    test("a LoadBalancer Service selecting the trainer pods on port 8000", async () => {
        const rs = clone(k8sBlackbox);
        const vllmSvc = one(rs, pack.T.service, (r) => r.props.spec?.selector?.["app.kubernetes.io/name"] === "trainer");
        vllmSvc.props.spec.type = "LoadBalancer";
        const vs = await expectOnly(
            rs,
            "vllm-not-exposed",
            /LoadBalancer Service .*(selects the trainer\/vLLM pods|exposes port 8000).*: expose vLLM only through the VllmIngress proxy/,
        );
        assert.equal(vs.length, 2, "both the selector and the port are reported");
        // NodePort too.
        vllmSvc.props.spec.type = "NodePort";
        await expectOnly(rs, "vllm-not-exposed", /a NodePort Service/);
    });

    test("an HTTPRoute whose backendRef is the vLLM Service, not the proxy", async () => {
        const rs = clone(k8sBlackbox);
        const vllmSvc = one(rs, pack.T.service, (r) => r.props.spec?.selector?.["app.kubernetes.io/name"] === "trainer");
        rs.push({
            type: pack.T.httpRoute,
            name: "route",
            props: {
                apiVersion: "gateway.networking.k8s.io/v1",
                kind: "HTTPRoute",
                metadata: { name: "vllm-direct", namespace: vllmSvc.props.metadata.namespace },
                spec: {
                    parentRefs: [{ name: "gw", namespace: "gateway-system" }],
                    rules: [{ backendRefs: [{ name: vllmSvc.props.metadata.name, port: 8000 }] }],
                },
            },
        });
        const vs = await violations(rs);
        assert.deepEqual([...new Set(vs.map((v) => v.policy))].sort(), ["routes-reach-only-proxy", "vllm-not-exposed"], show(vs).join("\n"));
        assert.match(
            show(vs).join("\n"),
            /routes-reach-only-proxy.*reaches Service .*which selects the trainer\/vLLM pods .*: route to the VllmIngress proxy Service instead/,
        );
        assert.match(show(vs).join("\n"), /vllm-not-exposed.*routes to port 8000/);
        // A backend Service the stack does not create cannot be shown to be the proxy.
        rs[rs.length - 1].props.spec.rules[0].backendRefs[0] = { name: "somewhere", port: 8080 };
        await expectOnly(rs, "routes-reach-only-proxy", /names Service .*somewhere, which this stack does not create/);
    });

    test("an Ingress routing to vLLM's port", async () => {
        const rs = clone(k8sBlackbox);
        rs.push({
            type: pack.T.ingress,
            name: "ing",
            props: {
                metadata: { name: "vllm", namespace: "x" },
                spec: { rules: [{ http: { paths: [{ path: "/", pathType: "Prefix", backend: { service: { name: "vllm", port: { number: 8000 } } } }] } }] },
            },
        });
        await expectOnly(rs, "vllm-not-exposed", /Ingress x\/vllm: spec\.rules\[0\]\.http\.paths\[0\]\.backend routes to Service vllm port 8000/);
    });

    test("a published vLLM port on the Docker host", async () => {
        const rs = clone(dockerServer);
        const vllm = one(rs, pack.T.dockerContainer, (r) => pack.isVllmContainer({ command: r.props.entrypoints, args: r.props.command }));
        vllm.props.ports = [{ internal: 8000, external: 8000 }];
        await expectOnly(rs, "vllm-not-exposed", /publishes port 8000 on the Docker host/);
    });

    test("GPU request != limit on the trainer and on the vLLM sidecar (initContainer)", async () => {
        const rs = clone(k8sSidecar);
        const pod = podOf(one(rs, JOB));
        pod.containers[0].resources.requests["nvidia.com/gpu"] = "2";
        pod.initContainers[0].resources.limits = { ...pod.initContainers[0].resources.limits };
        delete pod.initContainers[0].resources.limits["nvidia.com/gpu"];
        const vs = await expectOnly(rs, "gpu-requests-equal-limits", /nvidia\.com\/gpu/);
        assert.match(show(vs).join("\n"), /containers\[0\] \(trainer\) requests 2 nvidia\.com\/gpu but limits it to 1: set the request equal to the limit/);
        assert.match(show(vs).join("\n"), /initContainers\[0\] \(vllm\) requests 1 nvidia\.com\/gpu without a limit/);
    });

    test("a vLLM sidecar without a startupProbe (by name, and by command line)", async () => {
        const rs = clone(k8sSidecar);
        const pod = podOf(one(rs, JOB));
        delete pod.initContainers[0].startupProbe;
        await expectOnly(rs, "vllm-startup-probe", /initContainers\[0\] \(vllm\) runs vLLM without a startupProbe: .*add a startupProbe/);
        pod.initContainers[0].name = "inference";
        await expectOnly(rs, "vllm-startup-probe", /\(inference\) runs vLLM without a startupProbe/);
        for (const cmd of [
            ["python", "-m", "vllm.entrypoints.openai.api_server"],
            ["trl", "vllm-serve"],
        ]) {
            pod.initContainers[0].command = cmd;
            await expectOnly(rs, "vllm-startup-probe", /runs vLLM without a startupProbe/);
        }
        // The one-container pod (gpuSharing shared): vLLM started by the supervisor's shell script.
        const shared = clone(k8sBlackbox);
        delete podOf(one(shared, JOB)).containers[0].startupProbe;
        await expectOnly(shared, "vllm-startup-probe", /containers\[0\] \(trainer\) runs vLLM without a startupProbe/);
        // Docker: the vLLM container's healthcheck start period.
        const drs = clone(dockerServer);
        delete one(drs, pack.T.dockerContainer, (r) => pack.isVllmContainer({ command: r.props.entrypoints, args: r.props.command })).props.healthcheck;
        await expectOnly(drs, "vllm-startup-probe", /runs vLLM without a healthcheck start period/);
    });

    test("HF_TOKEN as a literal value fires; TOKENIZERS_PARALLELISM=false does not", async () => {
        const rs = clone(k8sWhitebox);
        const trainer = podOf(one(rs, JOB)).containers[0];
        const hf = trainer.env.find((e: any) => e.name === "HF_TOKEN");
        assert.ok(hf?.valueFrom?.secretKeyRef, "the real program passes HF_TOKEN by secretKeyRef");
        trainer.env.push({ name: "TOKENIZERS_PARALLELISM", value: "false" });
        assert.deepEqual(show(await violations(rs)), [], "TOKENIZERS_PARALLELISM is not a secret");
        hf.value = "hf_abcdefghijklmnopqrstuvwxyz";
        delete hf.valueFrom;
        await expectOnly(
            rs,
            "no-plain-secrets",
            /containers\[0\] \(trainer\) env HF_TOKEN comes from a literal value: a secret must come from a Secret \(valueFrom\.secretKeyRef\)/,
        );
        for (const name of ["WANDB_API_KEY", "DB_PASSWORD", "CLIENT_SECRET", "GITHUB_TOKEN"]) {
            const r2 = clone(k8sWhitebox);
            podOf(one(r2, JOB)).containers[0].env.push({ name, value: "x" });
            await expectOnly(r2, "no-plain-secrets", new RegExp(`env ${name} comes from a literal value`));
        }
        assert.equal(pack.isSecretName("TOKENIZERS_PARALLELISM"), false);
        assert.equal(pack.isSecretName("HF_TOKEN"), true);
    });

    test("a ConfigMap with an API_KEY entry or a Bearer token literal", async () => {
        const rs = clone(k8sBlackbox);
        const cm = one(rs, pack.T.configMap);
        assert.deepEqual(show(await violations(rs)), [], "the real nginx.conf (with 'Bearer <key>' and 'Bearer realm=') passes");
        cm.props.data = { ...cm.props.data, API_KEY: "abc" };
        await expectOnly(rs, "no-plain-secrets", /data\.API_KEY looks like a secret .*: move it to a Secret/);
        const rs2 = clone(k8sBlackbox);
        const cm2 = one(rs2, pack.T.configMap);
        cm2.props.data = { "client.sh": "curl -H 'Authorization: Bearer sk-live-0123456789abcdefXYZ' http://x" };
        await expectOnly(rs2, "no-plain-secrets", /data\.client\.sh contains a Bearer token literal/);
    });

    test("Docker: a secret-named env var the platform does not fill from a secret is advisory; the platform's own pass", async () => {
        const rs = clone(dockerServer);
        const trainer = one(rs, pack.T.dockerContainer, (r) => (r.props.envs ?? []).some((e: string) => e.startsWith("HF_TOKEN=")));
        // Every policy mandatory as in prod, but the recipe's images are tags (pinning is tested below).
        const strict: PolicyPackConfig = { ...PROD_CONFIG, "prod-images-pinned-by-digest": "disabled" };
        assert.deepEqual(show(await violations(rs, strict)), [], "HF_TOKEN from its secret config key passes");
        trainer.props.envs = [...trainer.props.envs, "WANDB_API_KEY=abc123"];
        const vs = await expectOnly(rs, "docker-env-secrets", /env WANDB_API_KEY looks like a secret passed as a plain value/, strict);
        assert.ok(
            vs.every((v) => v.enforcementLevel === "advisory"),
            "advisory, even under the prod config",
        );
    });

    const sandboxBreaks: Array<[string, (spec: any) => void, RegExp]> = [
        ["automountServiceAccountToken true", (s) => (s.automountServiceAccountToken = true), /automountServiceAccountToken is true: set it to false/],
        [
            "capabilities not dropped",
            (s) => (s.containers[0].securityContext.capabilities = { drop: ["NET_RAW"] }),
            /keeps Linux capabilities: set securityContext\.capabilities\.drop: \[ALL\]/,
        ],
        ["no resource limits", (s) => delete s.containers[0].resources.limits, /has no cpu\/memory limit: set resources\.limits/],
        [
            "runAsNonRoot removed without a runtimeClass",
            (s) => {
                delete s.securityContext.runAsNonRoot;
                delete s.containers[0].securityContext.runAsNonRoot;
                delete s.runtimeClassName;
            },
            /may run as root: set securityContext\.runAsNonRoot: true .*or run the sandbox under a sandboxing runtime/,
        ],
    ];
    for (const [what, breakIt, re] of sandboxBreaks) {
        test(`sandbox template: ${what}`, async () => {
            const rs = clone(k8sBlackbox);
            breakIt(podOf(one(rs, pack.T.sandboxTemplate)));
            await expectOnly(rs, "sandbox-pod-hardening", re);
        });
    }

    test("sandbox template: runAsNonRoot removed but a runtimeClass (gVisor) set passes", async () => {
        const rs = clone(k8sBlackbox);
        const spec = podOf(one(rs, pack.T.sandboxTemplate));
        assert.equal(spec.runtimeClassName, "gvisor");
        delete spec.securityContext.runAsNonRoot;
        delete spec.containers[0].securityContext.runAsNonRoot;
        assert.deepEqual(show(await violations(rs)), []);
    });

    test("sandbox egress NetworkPolicy removed, or without Egress, or selecting other pods", async () => {
        const breaks: Array<(rs: LocalResource[]) => LocalResource[]> = [
            (rs) =>
                rs.filter(
                    (r) =>
                        !(
                            r.type === pack.T.networkPolicy &&
                            (r.props.spec.policyTypes ?? []).includes("Egress") &&
                            r.props.metadata.namespace?.endsWith("sandboxes")
                        ),
                ),
            (rs) => {
                for (const r of rs)
                    if (r.type === pack.T.networkPolicy && r.props.metadata.namespace?.endsWith("sandboxes")) r.props.spec.policyTypes = ["Ingress"];
                return rs;
            },
            (rs) => {
                for (const r of rs)
                    if (r.type === pack.T.networkPolicy && r.props.metadata.namespace?.endsWith("sandboxes"))
                        r.props.spec.podSelector = { matchLabels: { app: "other" } };
                return rs;
            },
        ];
        for (const b of breaks) {
            await expectOnly(
                b(clone(k8sBlackbox)),
                "sandbox-egress-locked",
                /SandboxTemplate .*: its sandbox pods .* are not selected by any NetworkPolicy with Egress in policyTypes .*: add an egress NetworkPolicy/,
            );
        }
    });

    test("a Deployment in the sandboxes namespace is held to the sandbox rules, and needs egress cover", async () => {
        const rs = clone(k8sBlackbox);
        const ns = one(rs, pack.T.namespace, (r) => r.props.metadata.labels?.["agentrl.dev/role"] === "sandboxes").props.metadata.name;
        rs.push({
            type: "kubernetes:apps/v1:Deployment",
            name: "stray",
            props: {
                metadata: { name: "stray", namespace: ns },
                spec: {
                    selector: { matchLabels: { app: "stray" } },
                    template: { metadata: { labels: { app: "stray" } }, spec: { containers: [{ name: "c", image: "busybox" }] } },
                },
            },
        });
        // The pool's NetworkPolicy selects every pod of the namespace (podSelector {}), so only hardening fires.
        const vs = await expectOnly(rs, "sandbox-namespace-hardening", /Deployment .*\/stray \(in sandbox namespace .*\)/);
        assert.ok(vs.length >= 4, show(vs).join("\n"));
    });

    test("prod: an unpinned image fires under config.prod.json only", async () => {
        for (const [base, type] of [
            [k8sBlackbox, JOB],
            [k8sBlackbox, pack.T.sandboxTemplate],
        ] as const) {
            const rs = clone(base);
            for (const r of rs)
                for (const p of pack.podSpecsOf(r.type, r.props))
                    for (const c of [...(p.spec.containers ?? []), ...(p.spec.initContainers ?? [])])
                        c.image = c.image.replace(/:[^/]*$/, `@sha256:${"b".repeat(64)}`);
            assert.deepEqual(show(await violations(rs, PROD_CONFIG)), [], "pinned everywhere: clean");
            podOf(one(rs, type)).containers[0].image = "ghcr.io/example/unpinned:latest";
            assert.deepEqual(show(await violations(rs)), [], "not enforced outside prod");
            const vs = await expectOnly(
                rs,
                "prod-images-pinned-by-digest",
                /image 'ghcr\.io\/example\/unpinned:latest' is not pinned: pin it by digest/,
                PROD_CONFIG,
            );
            assert.ok(vs.every((v) => v.enforcementLevel === "mandatory"));
        }
        const drs = clone(dockerServer);
        const vs = await violations(drs, PROD_CONFIG);
        assert.match(
            show(vs).join("\n"),
            /\[prod-images-pinned-by-digest\/mandatory\] RemoteImage registry\.example\.com\/agent-rl\/trainer-whitebox:plan: not pinned/,
        );
    });
});
