// VllmIngress under Pulumi mocks, per target: where the keys live (and nowhere else), generated
// keys, secret outputs, the NetworkPolicy, Service exposure, the HTTPRoute, Docker networks and
// ports, the strict Kubernetes schema; and, with a real nginx, that the config the component
// deploys is the one `startLocalIngress` serves. Run: node --import tsx --test test/ingress/vllm-ingress.test.ts
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import * as http from "node:http";
import * as pulumi from "@pulumi/pulumi";
import { ConfigError, platformNames, podLabels, type PlatformConfig, type PlatformNames } from "../../components/config";
import { parseDockerPoolConfig, parseWithTestImages as parsePlatformConfig } from "../helpers/config";
import {
    CHECKSUM_ANNOTATION,
    GENERATED_KEY_LENGTH,
    HTTPROUTE_API_VERSION,
    INGRESS_PATHS,
    VllmIngress,
    configChecksum,
    ingressProxySettings,
    localOverrides,
    resolveVllmIngress,
    retiredSandboxKeyMessage,
    type IngressDescription,
} from "../../components/ingress";
import { startLocalIngress, type LocalIngress } from "../../components/ingress/local";
import { PROXY_PATH_FIELDS, renderNginxConfig } from "../../components/ingress/nginx";
import { ofType, runBoth, single, type MockRunResult, type RecordedResource } from "../helpers/mock";
import { loadManifestSchemas, validateManifestStrict } from "../helpers/k8s-schema";
import { manifests } from "../helpers/manifests";
import { sentAsSecret, unwrapSecrets } from "../helpers/secrets";
import { skipWithoutNginx } from "../helpers/nginx";
import { startStubUpstream, type StubUpstream } from "../helpers/stub-upstream";

const SENTINEL = "sbxSENTINELkey0do0not0leak0123456789";
const T = {
    secret: "kubernetes:core/v1:Secret",
    configMap: "kubernetes:core/v1:ConfigMap",
    service: "kubernetes:core/v1:Service",
    deployment: "kubernetes:apps/v1:Deployment",
    netpol: "kubernetes:networking.k8s.io/v1:NetworkPolicy",
    pdb: "kubernetes:policy/v1:PodDisruptionBudget",
    route: "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute",
    password: "random:index/randomPassword:RandomPassword",
    container: "docker:index/container:Container",
    image: "docker:index/remoteImage:RemoteImage",
    volume: "docker:index/volume:Volume",
};

/**
 * On docker: the ingress of a black box on Docker, which the config refuses (DOCKER_BLACKBOX_REFUSED: no sandbox runs on
 * Docker); the Docker renderer stays the component's (VllmIngress is usable alone), so its own code is tested here.
 */
function config(ingress: Record<string, unknown> = {}, target: "kubernetes" | "docker" = "kubernetes"): PlatformConfig {
    return (target === "docker" ? parseDockerPoolConfig : parsePlatformConfig)(
        {
            recipe: "opencode-blackbox",
            runId: "r1",
            target: target === "kubernetes" ? { kind: target, context: "test" } : { kind: target },
            ingress: { enabled: true, ...ingress },
        },
        "test",
    );
}

/** Every place (resource name + JSON path) where a string containing `needle` sits in the recorded inputs. */
function occurrences(resources: readonly RecordedResource[], needle: string): string[] {
    const out: string[] = [];
    const walk = (where: string, v: any) => {
        if (typeof v === "string") {
            if (v.includes(needle)) out.push(where);
        } else if (Array.isArray(v)) {
            v.forEach((x, i) => {
                walk(`${where}/${i}`, x);
            });
        } else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) walk(`${where}/${k}`, x);
    };
    for (const r of resources) walk(`${r.type}:${r.name}`, unwrapSecrets(r.inputs));
    return out;
}

interface Built {
    update: MockRunResult;
    preview: MockRunResult;
    c: PlatformConfig;
    names: PlatformNames;
    d: IngressDescription;
    /** The rollout key verifier's resources (agent-sandbox pools; test/ingress/rollout-keys.test.ts checks them), kept apart from the proxy's. */
    verifier: RecordedResource[];
}

/** A run without the verifier's resources: the tests below are about the proxy's objects. */
const withoutVerifier = (run: MockRunResult): MockRunResult => ({ ...run, resources: run.resources.filter((r) => !r.name.includes("-rollout-keys-")) });

/** The key a test supplies: the operators' on Kubernetes (its sandboxes take per-rollout keys: no shared sandbox key is rendered), the sandboxes' on Docker. */
const suppliedFor = (c: PlatformConfig): Record<string, string> => (c.target.kind === "kubernetes" ? { operators: SENTINEL } : { sandboxes: SENTINEL });

async function build(c: PlatformConfig, supplied: Record<string, string> = suppliedFor(c)): Promise<Built> {
    const names = platformNames(c);
    const d = resolveVllmIngress(c, names);
    const runs = await runBoth(() => {
        const ing = new VllmIngress("ingress", {
            description: d,
            suppliedKeys: supplied,
            namespace: names.namespaces.ingress,
            networks: { training: names.networks.training },
        });
        return {
            sandboxKey: ing.sandboxKey,
            keySandboxes: ing.keys.sandboxes,
            keyOperators: ing.keys.operators,
            keyCi: ing.keys.ci,
            sandboxUrl: ing.sandboxUrl,
            serviceName: ing.serviceName,
            namespace: ing.namespace,
            port: ing.port,
        };
    });
    return {
        update: withoutVerifier(runs.update),
        preview: withoutVerifier(runs.preview),
        verifier: runs.update.resources.filter((r) => r.name.includes("-rollout-keys-")),
        c,
        names,
        d,
    };
}

const podSpecOf = (dep: RecordedResource) => unwrapSecrets(dep.inputs).spec.template.spec;

before(async () => {
    await loadManifestSchemas();
});

describe("resolveVllmIngress", () => {
    /** The default Kubernetes config, its names and its resolved ingress. */
    const resolved = () => {
        const c = config();
        const names = platformNames(c);
        return { c, names, d: resolveVllmIngress(c, names) };
    };

    test("8080 (named http) without TLS, in front of vLLM's in-cluster Service on 8000 and its trainer pods", () => {
        const { names, d } = resolved();
        assert.equal(d.port, 8080);
        assert.equal(d.portName, "http");
        assert.equal(d.settings.tlsEnabled, false);
        assert.equal(d.settings.upstream, names.training.vllmUpstream);
        assert.equal(d.upstream.port, 8000);
        assert.deepEqual(d.upstream.podLabels, podLabels("trainer", names.training.job));
    });

    test("rate limit, burst and body size come from the config; limit_req counts per replica", () => {
        const { c, d } = resolved();
        assert.equal(d.settings.rateLimitPerSecond, c.ingress.rateLimitPerSecond);
        assert.equal(d.settings.rateLimitBurst, c.ingress.rateLimitBurst);
        assert.equal(d.settings.maxBodySize, c.ingress.maxBodySize);
        assert.equal(d.effectiveRateLimitPerSecond, c.ingress.rateLimitPerSecond * 2, "limit_req counts per replica");
    });

    test("the config text is renderNginxConfig of the deployed settings, at the deploy paths, keys only from the included file", () => {
        const { c, names, d } = resolved();
        assert.equal(d.settings.keysFile, "/etc/nginx/keys/keys.conf");
        assert.equal(d.settings.runtimeDir, INGRESS_PATHS.runtimeDir);
        assert.equal(d.configText, renderNginxConfig(ingressProxySettings(c, names)));
        assert.deepEqual(d.command, ["nginx", "-e", "stderr", "-c", "/etc/nginx/ingress/nginx.conf", "-g", "daemon off;"]);
        assert.ok(d.configText.includes("include /etc/nginx/keys/keys.conf;"), "keys come from the included file");
        // The only Bearer map entry is the rollout-key shape (agent-sandbox pools: rollout-keys.ts), never a key.
        assert.deepEqual(d.configText.match(/"~\^Bearer [^"]*"/g) ?? [], ['"~^Bearer (rk1\\.[A-Za-z0-9_-]{43})$"'], "no key map entry in the config text");
    });

    test("per-rollout keys: nginx takes the operators' keys only, not the shared sandboxes key; the sandbox URL and the proxy's pod labels", () => {
        const { names, d } = resolved();
        // Agent-sandbox on Kubernetes: the sandboxes send their rollout's rk1. key; ingress.sandboxKey is not rendered.
        assert.deepEqual([d.keyNames, d.sandboxKeyName, d.retiredSandboxKey], [["operators"], undefined, "sandboxes"]);
        const docker = config({}, "docker");
        const dd = resolveVllmIngress(docker, platformNames(docker));
        assert.deepEqual(
            [dd.keyNames, dd.sandboxKeyName, dd.retiredSandboxKey],
            [["sandboxes", "operators"], "sandboxes", undefined],
            "no verifier: the shared key stays",
        );
        assert.equal(d.urls.sandbox, names.ingress.sandboxUrl);
        assert.deepEqual(d.podLabels, podLabels("vllm-ingress", names.ingress.deployment));
    });

    test("8443 with TLS; the URL in names.ts uses the same port", () => {
        const c = config({ tls: { mode: "secret", secretName: "vllm-tls" } });
        const d = resolveVllmIngress(c, platformNames(c));
        assert.equal(d.port, 8443);
        assert.equal(d.settings.tlsEnabled, true);
        assert.equal(d.settings.tlsCertFile, "/etc/nginx/tls/tls.crt");
        assert.match(d.urls.sandbox, /^https:\/\/.*:8443$/);
        assert.match(d.configText, /listen 0\.0\.0\.0:8443 ssl;/);
    });

    test("refuses a disabled ingress and httproute with proxy TLS, naming the field and the fix", () => {
        const white = parsePlatformConfig({ recipe: "mbpp-whitebox", runId: "r1", target: { kind: "kubernetes", context: "test" } }, "test");
        assert.throws(
            () => resolveVllmIngress(white, platformNames(white)),
            (e: unknown) => e instanceof ConfigError && /ingress\.enabled: the ingress is disabled/.test(e.message),
        );
        const c = config({
            exposure: "httproute",
            host: "vllm.example.com",
            gateway: { name: "gw", namespace: "gateways" },
            tls: { mode: "secret", secretName: "t" },
        });
        assert.throws(
            () => resolveVllmIngress(c, platformNames(c)),
            (e: unknown) =>
                e instanceof ConfigError && /ingress\.tls\.mode: with exposure httproute TLS ends at the Gateway.*set tls\.mode to none/.test(e.message),
        );
    });
});

describe("kubernetes, exposure cluster (defaults)", () => {
    let b: Built;
    // A third key (ci) so that one key is generated beside the supplied one.
    const KEYS = { keys: ["sandboxes", "operators", "ci"] };
    before(async () => {
        b = await build(config(KEYS));
    });

    test("the supplied key sits only in the keys Secret; the generated one too", () => {
        for (const run of [b.update, b.preview]) {
            assert.deepEqual(occurrences(run.resources, SENTINEL), [`${T.secret}:ingress-keys/stringData/keys.conf`]);
        }
        // Mocks stand in for generated values with mock-random-<resource name>.
        assert.deepEqual(occurrences(b.update.resources, "mock-random-ingress-key-ci"), [`${T.secret}:ingress-keys/stringData/keys.conf`]);
        const secret = single(b.update.resources, T.secret);
        assert.ok(sentAsSecret(secret.inputs, ["stringData", "keys.conf"]), "keys.conf is sent as a secret");
        assert.equal(secret.inputs.metadata.name, b.names.ingress.keysSecret);
        assert.equal(secret.inputs.metadata.namespace, b.names.namespaces.ingress);
        const keysConf: string = unwrapSecrets(secret.inputs).stringData["keys.conf"];
        assert.match(keysConf, new RegExp(`"~\\^Bearer ${SENTINEL}\\$" "operators";`));
        assert.doesNotMatch(keysConf, /"sandboxes";/, "the shared sandboxes key is not among nginx's keys");
        assert.equal(ofType(b.update.resources, T.password).filter((r) => r.name === "ingress-key-sandboxes").length, 0, "nor generated");
    });

    test("keys not supplied are generated with random.RandomPassword (48, no special characters); supplied ones are not", () => {
        const pw = ofType(b.update.resources, T.password);
        const keyPw = pw.filter((r) => r.name.startsWith("ingress-key-"));
        assert.deepEqual(
            keyPw.map((r) => r.name),
            ["ingress-key-ci"],
        );
        assert.equal(keyPw[0]!.inputs.length, GENERATED_KEY_LENGTH);
        assert.equal(keyPw[0]!.inputs.special, false);
    });

    test("the keys are secret stack outputs with the right values; no shared sandbox key is one", () => {
        for (const k of ["keyOperators", "keyCi"]) assert.ok(b.update.secretOutputs.includes(k), `${k} is secret`);
        for (const k of ["sandboxUrl", "serviceName", "namespace"]) assert.ok(!b.update.secretOutputs.includes(k), `${k} is not secret`);
        assert.equal(b.update.outputs!.sandboxKey, undefined);
        assert.equal(b.update.outputs!.keySandboxes, undefined);
        assert.equal(b.update.outputs!.keyOperators, SENTINEL);
        assert.equal(b.update.outputs!.keyCi, "mock-random-ingress-key-ci");
        assert.equal(b.update.outputs!.sandboxUrl, b.names.ingress.sandboxUrl);
        assert.equal(b.update.outputs!.serviceName, b.names.ingress.service);
        assert.equal(b.update.outputs!.port, 8080);
    });

    test("the ConfigMap's nginx.conf is renderNginxConfig of the resolved settings", () => {
        const cm = single(b.update.resources, T.configMap);
        assert.equal(cm.inputs.metadata.name, b.names.ingress.config);
        assert.deepEqual(Object.keys(cm.inputs.data), ["nginx.conf"]);
        assert.equal(cm.inputs.data["nginx.conf"], renderNginxConfig(b.d.settings));
        assert.equal(cm.inputs.data["nginx.conf"], b.d.configText);
    });

    /** The proxy Deployment of a run, its spec (secrets unwrapped), pod spec and one container. */
    const deploymentOf = (run: MockRunResult) => {
        const dep = single(run.resources, T.deployment);
        const spec = unwrapSecrets(dep.inputs).spec;
        const pod = spec.template.spec;
        return { dep, spec, pod, container: pod.containers[0] };
    };

    test("Deployment: 2 replicas in the ingress namespace, selected by the labels its pods carry (podLabels)", () => {
        for (const run of [b.update, b.preview]) {
            const { dep, spec } = deploymentOf(run);
            const labels = podLabels("vllm-ingress", b.names.ingress.deployment);
            assert.equal(dep.inputs.metadata.name, b.names.ingress.deployment);
            assert.equal(dep.inputs.metadata.namespace, b.names.namespaces.ingress);
            assert.equal(spec.replicas, 2);
            assert.deepEqual(spec.selector.matchLabels, labels);
            assert.deepEqual(spec.template.metadata.labels, labels);
        }
    });

    test("Deployment: a hardened pod (no token, non-root 101, RuntimeDefault seccomp, read-only root, no capabilities)", () => {
        for (const run of [b.update, b.preview]) {
            const { pod, container: c } = deploymentOf(run);
            assert.equal(pod.automountServiceAccountToken, false);
            assert.equal(pod.securityContext.runAsNonRoot, true);
            assert.equal(pod.securityContext.runAsUser, 101);
            assert.deepEqual(pod.securityContext.seccompProfile, { type: "RuntimeDefault" });
            assert.equal(c.securityContext.readOnlyRootFilesystem, true);
            assert.equal(c.securityContext.allowPrivilegeEscalation, false);
            assert.deepEqual(c.securityContext.capabilities, { drop: ["ALL"] });
        }
    });

    test("Deployment: one nginx container, nothing secret in env (no env at all), port http with TCP probes, sized", () => {
        for (const run of [b.update, b.preview]) {
            const { pod, container: c } = deploymentOf(run);
            assert.equal(pod.containers.length, 1);
            assert.equal(c.image, b.c.images.nginx);
            assert.deepEqual(c.command, ["nginx", "-e", "stderr", "-c", "/etc/nginx/ingress/nginx.conf", "-g", "daemon off;"]);
            assert.equal(c.env, undefined, "no env at all");
            assert.deepEqual(c.ports, [{ name: "http", containerPort: 8080, protocol: "TCP" }]);
            assert.deepEqual(c.readinessProbe.tcpSocket, { port: "http" });
            assert.deepEqual(c.livenessProbe.tcpSocket, { port: "http" });
            assert.ok(c.resources.requests.cpu && c.resources.limits.memory);
        }
    });

    test("Deployment: keys Secret mounted as a directory, config from the ConfigMap, runtime dir an emptyDir, no TLS volume", () => {
        for (const run of [b.update, b.preview]) {
            const { pod, container: c } = deploymentOf(run);
            const volumes = new Map<string, any>(pod.volumes.map((v: any) => [v.name, v]));
            const mounts = new Map<string, any>(c.volumeMounts.map((m: any) => [m.mountPath, m]));
            assert.equal(volumes.get(mounts.get("/etc/nginx/keys").name).secret.secretName, b.names.ingress.keysSecret);
            assert.equal(mounts.get("/etc/nginx/keys").subPath, undefined, "a directory mount, so rotation reaches the pod");
            assert.equal(volumes.get(mounts.get("/etc/nginx/ingress").name).configMap.name, b.names.ingress.config);
            assert.ok(volumes.get(mounts.get("/tmp/nginx").name).emptyDir, "runtime dir is an emptyDir");
            assert.ok(!mounts.has("/etc/nginx/tls"), "no TLS volume without TLS");
        }
    });

    test("a checksum of config + keys rolls the pods; it is a plain keyed hash, never the key", async () => {
        const dep = single(b.update.resources, T.deployment);
        const sum = dep.inputs.spec.template.metadata.annotations[CHECKSUM_ANNOTATION];
        assert.equal(typeof sum, "string", "not a secret wrapper: the Deployment is not marked secret");
        assert.match(sum, /^[0-9a-f]{64}$/);
        assert.equal(
            sum,
            configChecksum(
                "mock-random-ingress-checksum-salt",
                b.d.configText,
                unwrapSecrets(single(b.update.resources, T.secret).inputs).stringData["keys.conf"],
            ),
        );
        const again = await build(config(KEYS));
        assert.equal(
            single(again.update.resources, T.deployment).inputs.spec.template.metadata.annotations[CHECKSUM_ANNOTATION],
            sum,
            "stable for the same keys",
        );
        const rotated = await build(config(KEYS), { operators: `${SENTINEL}rotated` });
        assert.notEqual(
            single(rotated.update.resources, T.deployment).inputs.spec.template.metadata.annotations[CHECKSUM_ANNOTATION],
            sum,
            "a new key rolls the pods",
        );
    });

    test("NetworkPolicy: in only from the sandboxes namespace on 8080; out only to the trainer pods on 8000 and DNS", () => {
        const np = unwrapSecrets(single(b.update.resources, T.netpol).inputs);
        assert.equal(np.metadata.namespace, b.names.namespaces.ingress);
        assert.deepEqual(np.spec.podSelector.matchLabels, podLabels("vllm-ingress", b.names.ingress.deployment));
        assert.deepEqual(np.spec.policyTypes, ["Ingress", "Egress"]);
        assert.deepEqual(np.spec.ingress, [
            {
                from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": b.names.namespaces.sandboxes } } }],
                ports: [{ protocol: "TCP", port: 8080 }],
            },
        ]);
        assert.deepEqual(np.spec.egress, [
            {
                to: [
                    {
                        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } },
                        podSelector: { matchLabels: { "k8s-app": "kube-dns" } },
                    },
                ],
                ports: [
                    { protocol: "UDP", port: 53 },
                    { protocol: "TCP", port: 53 },
                ],
            },
            {
                to: [
                    {
                        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": b.names.namespaces.training } },
                        podSelector: { matchLabels: podLabels("trainer", b.names.training.job) },
                    },
                ],
                ports: [{ protocol: "TCP", port: 8000 }],
            },
            // agent-sandbox pool: the rollout key verifier's pods on its verify port (test/ingress/rollout-keys.test.ts).
            {
                to: [
                    {
                        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": b.names.namespaces.ingress } },
                        podSelector: { matchLabels: podLabels("rollout-keys", `${b.names.ingress.deployment}-rollout-keys`) },
                    },
                ],
                ports: [{ protocol: "TCP", port: 7200 }],
            },
        ]);
    });

    test("Service is ClusterIP on the listen port, selecting only the proxy pods; a PDB keeps one replica", () => {
        const svcs = ofType(b.update.resources, T.service).map((r) => unwrapSecrets(r.inputs));
        assert.equal(svcs.length, 1);
        assert.equal(svcs[0].spec.type, "ClusterIP");
        assert.deepEqual(svcs[0].spec.selector, podLabels("vllm-ingress", b.names.ingress.deployment));
        assert.deepEqual(svcs[0].spec.ports, [{ name: "http", port: 8080, targetPort: "http", protocol: "TCP" }]);
        const pdb = unwrapSecrets(single(b.update.resources, T.pdb).inputs);
        assert.equal(pdb.spec.minAvailable, 1);
        assert.deepEqual(pdb.spec.selector.matchLabels, podLabels("vllm-ingress", b.names.ingress.deployment));
        assert.equal(ofType(b.update.resources, T.route).length, 0);
    });

    test("every Kubernetes object passes the 1.36 schema strictly", () => {
        for (const run of [b.update, b.preview]) {
            const objs = manifests(run.resources);
            assert.deepEqual(objs.map((o) => o.kind).sort(), ["ConfigMap", "Deployment", "NetworkPolicy", "PodDisruptionBudget", "Secret", "Service"]);
            for (const o of objs) assert.deepEqual(validateManifestStrict(o), [], `${o.kind} ${o.metadata?.name}`);
        }
        // The verifier's objects too (agent-sandbox pool): a Deployment, a Secret, a NetworkPolicy, a Service.
        const v = manifests(b.verifier);
        assert.deepEqual(v.map((o) => o.kind).sort(), ["Deployment", "NetworkPolicy", "Secret", "Service"]);
        for (const o of v) assert.deepEqual(validateManifestStrict(o), [], `${o.kind} ${o.metadata?.name}`);
    });

    test("one replica: no PodDisruptionBudget (minAvailable 1 of 1 would block every drain)", async () => {
        const one = await build(config({ replicas: 1 }));
        assert.equal(ofType(one.update.resources, T.pdb).length, 0);
        assert.equal(unwrapSecrets(single(one.update.resources, T.deployment).inputs).spec.replicas, 1);
    });

    test("a supplied shared sandboxes key is not rendered where the sandboxes take per-rollout keys, and the warning names the config to remove", async () => {
        const warned: string[] = [];
        const warn = pulumi.log.warn;
        pulumi.log.warn = async (msg: string) => {
            warned.push(msg);
        };
        try {
            const kept = await build(config(KEYS), { sandboxes: SENTINEL });
            for (const run of [kept.update, kept.preview]) assert.deepEqual(occurrences(run.resources, SENTINEL), [], "the value is nowhere");
            assert.equal(kept.update.outputs!.sandboxKey, undefined);
        } finally {
            pulumi.log.warn = warn;
        }
        assert.ok(warned.includes(retiredSandboxKeyMessage("sandboxes")) && !warned.some((w) => w.includes(SENTINEL)), warned.join("\n"));
        assert.equal(
            retiredSandboxKeyMessage("sandboxes"),
            "ingressKey-sandboxes: the sandboxes take per-rollout keys on this stack (agent-sandbox on Kubernetes), so this shared sandbox key (ingress.sandboxKey) is not rendered and nginx refuses it: remove it with pulumi config rm ingressKey-sandboxes",
        );
    });

    test("a supplied key for a name not in ingress.keys is refused", async () => {
        const c = config();
        const names = platformNames(c);
        await assert.rejects(
            runBoth(() => {
                new VllmIngress("ingress", { description: resolveVllmIngress(c, names), suppliedKeys: { typo: SENTINEL } });
            }),
            /supplied key\(s\) 'typo' not in ingress\.keys/,
        );
    });
});

describe("kubernetes, exposure loadbalancer with a TLS Secret", () => {
    let b: Built;
    before(async () => {
        b = await build(config({ exposure: "loadbalancer", host: "vllm.example.com", tls: { mode: "secret", secretName: "vllm-tls" } }));
    });

    test("the only LoadBalancer targets only the proxy pods, 443 (public host) and 8443 (in-cluster) to the TLS port", () => {
        const svcs = ofType(b.update.resources, T.service).map((r) => unwrapSecrets(r.inputs));
        assert.equal(svcs.length, 1);
        assert.equal(svcs[0].spec.type, "LoadBalancer");
        assert.deepEqual(svcs[0].spec.selector, podLabels("vllm-ingress", b.names.ingress.deployment));
        assert.deepEqual(svcs[0].spec.ports, [
            { name: "public", port: 443, targetPort: "https", protocol: "TCP" },
            { name: "https", port: 8443, targetPort: "https", protocol: "TCP" },
        ]);
        // In-cluster sandboxes keep the proxy's own address (their egress policy admits the proxy pods, not the LB).
        assert.equal(b.update.outputs!.sandboxUrl, "https://vllm-ingress.arl-test-ingress.svc.cluster.local:8443");
    });

    test("the TLS Secret is mounted read-only at /etc/nginx/tls; nginx listens with ssl", () => {
        const pod = podSpecOf(single(b.update.resources, T.deployment));
        const mount = pod.containers[0].volumeMounts.find((m: any) => m.mountPath === "/etc/nginx/tls");
        assert.equal(mount.readOnly, true);
        const vol = pod.volumes.find((v: any) => v.name === mount.name);
        assert.equal(vol.secret.secretName, "vllm-tls");
        assert.deepEqual(pod.containers[0].ports, [{ name: "https", containerPort: 8443, protocol: "TCP" }]);
        assert.match(single(b.update.resources, T.configMap).inputs.data["nginx.conf"], /listen 0\.0\.0\.0:8443 ssl;/);
    });

    test("NetworkPolicy admits anyone, on the TLS port only (the keys guard every route)", () => {
        const np = unwrapSecrets(single(b.update.resources, T.netpol).inputs);
        assert.deepEqual(np.spec.ingress, [{ ports: [{ protocol: "TCP", port: 8443 }] }]);
        for (const o of manifests(b.update.resources)) assert.deepEqual(validateManifestStrict(o), [], `${o.kind}`);
    });
});

describe("kubernetes, TLS from a cert-manager Certificate the stack requests", () => {
    let b: Built;
    before(async () => {
        b = await build(config({ exposure: "loadbalancer", host: "vllm.example.com", tls: { mode: "cert-manager", issuer: { name: "internal-ca" } } }));
    });

    test("a Certificate for the proxy's Service names and the public host, from the issuer; its Secret is what the pods mount", () => {
        const certs = b.update.resources.filter((r) => r.type === "kubernetes:cert-manager.io/v1:Certificate").map((r) => unwrapSecrets(r.inputs));
        assert.equal(certs.length, 1);
        const c = certs[0];
        assert.equal(c.metadata.namespace, "arl-test-ingress");
        assert.deepEqual(c.spec.issuerRef, { name: "internal-ca", kind: "ClusterIssuer", group: "cert-manager.io" });
        assert.equal(c.spec.secretName, "vllm-ingress-tls");
        assert.deepEqual(c.spec.dnsNames, [
            "vllm-ingress",
            "vllm-ingress.arl-test-ingress",
            "vllm-ingress.arl-test-ingress.svc",
            "vllm-ingress.arl-test-ingress.svc.cluster.local",
            "vllm.example.com",
        ]);
        // The name sandboxes dial is among them.
        assert.ok(c.spec.dnsNames.includes(new URL(b.update.outputs!.sandboxUrl as string).hostname));
        const pod = podSpecOf(single(b.update.resources, T.deployment));
        const mount = pod.containers[0].volumeMounts.find((m: any) => m.mountPath === "/etc/nginx/tls");
        assert.equal(pod.volumes.find((v: any) => v.name === mount.name).secret.secretName, "vllm-ingress-tls");
    });

    test("config: issuer required, only with cert-manager, not on docker", () => {
        const problems = (ingress: Record<string, unknown>, target: "kubernetes" | "docker" = "kubernetes") => {
            try {
                config(ingress, target);
                return [];
            } catch (e) {
                return [...(e as ConfigError).problems];
            }
        };
        assert.deepEqual(problems({ tls: { mode: "cert-manager" } }), [
            "ingress.tls.issuer: tls mode 'cert-manager' needs the issuer that signs the certificate: set tls.issuer.name (and kind Issuer or ClusterIssuer; kubectl get clusterissuers lists them), or take the cluster stack's (clusterStack)",
        ]);
        assert.deepEqual(problems({ tls: { mode: "none", issuer: { name: "x" } } }), [
            "ingress.tls.issuer: only tls mode 'cert-manager' requests a certificate from an issuer (mode is 'none'): remove tls.issuer or set tls.mode to cert-manager",
        ]);
        assert.ok(
            problems({ tls: { mode: "cert-manager", issuer: { name: "x" } } }, "docker").includes(
                "ingress.tls.mode: 'cert-manager' issues a Kubernetes TLS Secret; on the docker target use 'files' with certFile and keyFile",
            ),
        );
    });
});

describe("kubernetes, exposure httproute", () => {
    let b: Built;
    before(async () => {
        b = await build(
            config({
                exposure: "httproute",
                host: "vllm.example.com",
                gateway: { name: "public", namespace: "gateways", sectionName: "https" },
                tls: { publiclyTrusted: true },
            }),
        );
    });

    test("the HTTPRoute hangs off the configured Gateway and sends only allow-listed paths to the proxy Service (never vLLM's 8000)", () => {
        for (const run of [b.update, b.preview]) {
            const route = unwrapSecrets(single(run.resources, T.route).inputs);
            assert.equal(route.apiVersion, HTTPROUTE_API_VERSION);
            assert.equal(route.kind, "HTTPRoute");
            assert.equal(route.metadata.namespace, b.names.namespaces.ingress);
            assert.match(route.metadata.name, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
            assert.deepEqual(route.spec.parentRefs, [
                { group: "gateway.networking.k8s.io", kind: "Gateway", name: "public", namespace: "gateways", sectionName: "https" },
            ]);
            assert.deepEqual(route.spec.hostnames, ["vllm.example.com"]);
            assert.equal(route.spec.rules.length, 1);
            const [rule] = route.spec.rules;
            assert.deepEqual(rule.backendRefs, [{ group: "", kind: "Service", name: b.names.ingress.service, port: 8080 }]);
            assert.deepEqual(
                rule.matches.map((m: any) => m.path),
                [
                    { type: "Exact", value: "/v1/chat/completions" },
                    { type: "Exact", value: "/v1/models" },
                ],
            );
            for (const r of rule.backendRefs) assert.notEqual(r.port, 8000);
        }
    });

    test("behind the Gateway: ClusterIP only, plain HTTP inside the cluster, open NetworkPolicy on 8080", () => {
        const svc = unwrapSecrets(single(b.update.resources, T.service).inputs);
        assert.equal(svc.spec.type, "ClusterIP");
        assert.equal(b.d.tls.terminatedAt, "gateway");
        assert.equal(b.d.port, 8080);
        assert.deepEqual(unwrapSecrets(single(b.update.resources, T.netpol).inputs).spec.ingress, [{ ports: [{ protocol: "TCP", port: 8080 }] }]);
        // The HTTPRoute is a Gateway API object, outside the built-in schema: the test above checks it field by field.
        const builtIn = manifests(b.update.resources).filter((o) => o.kind !== "HTTPRoute");
        for (const o of builtIn) assert.deepEqual(validateManifestStrict(o), [], `${o.kind}`);
    });
});

describe("docker, TLS from host files", () => {
    let b: Built;
    before(async () => {
        b = await build(config({ tls: { mode: "files", certFile: "/srv/agent-rl/tls/cert.pem", keyFile: "/srv/agent-rl/tls/key.pem" } }, "docker"));
    });
    const proxy = (rs: readonly RecordedResource[]) => ofType(rs, T.container).find((r) => r.name === "ingress-proxy")!;
    const files = (rs: readonly RecordedResource[]) => ofType(rs, T.container).find((r) => r.name === "ingress-files")!;

    test("the keys travel only as a secret upload of the files container, 0440; nowhere else", () => {
        for (const run of [b.update, b.preview]) {
            assert.deepEqual(occurrences(run.resources, SENTINEL), [`${T.container}:ingress-files/uploads/0/content`]);
        }
        assert.deepEqual(occurrences(b.update.resources, "mock-random-ingress-key-operators"), [`${T.container}:ingress-files/uploads/0/content`]);
        const inputs = files(b.update.resources).inputs;
        assert.ok(sentAsSecret(inputs, ["uploads", 0, "content"]), "keys upload is secret");
        const up = unwrapSecrets(inputs.uploads);
        assert.equal(up[0].file, "/etc/nginx/keys/keys.conf");
        assert.equal(up[0].permissions, "0440");
        assert.equal(up[1].file, "/etc/nginx/ingress/nginx.conf");
        assert.equal(up[1].content, b.d.configText);
        assert.equal(up[1].content, renderNginxConfig(b.d.settings));
        const f = unwrapSecrets(files(b.update.resources).inputs);
        assert.equal(f.start, false, "never started");
        assert.equal(f.networkMode, "none");
        assert.ok(b.update.secretOutputs.includes("sandboxKey") && b.update.secretOutputs.includes("keyOperators"));
    });

    test("the proxy is on the training network only and publishes only its TLS port, on 127.0.0.1; no other ingress container joins a network", () => {
        for (const run of [b.update, b.preview]) {
            const p = unwrapSecrets(proxy(run.resources).inputs);
            assert.equal(p.name, b.names.ingress.deployment);
            assert.deepEqual(
                p.networksAdvanced.map((n: any) => n.name),
                [b.names.networks.training],
            );
            assert.deepEqual(p.ports, [{ internal: 8443, external: 8443, ip: "127.0.0.1", protocol: "tcp" }]);
        }
        const others = ofType(b.update.resources, T.container).filter((r) => r.name !== "ingress-proxy");
        for (const o of others) assert.equal(o.inputs.networksAdvanced, undefined, "no other container of the ingress joins a network");
    });

    test("the proxy runs non-root on a read-only root: no capabilities, no new privileges, no env, no uploads", () => {
        for (const run of [b.update, b.preview]) {
            const p = unwrapSecrets(proxy(run.resources).inputs);
            assert.equal(p.readOnly, true);
            assert.match(p.user, /^101:/);
            assert.deepEqual(Object.keys(p.tmpfs), ["/tmp/nginx"]);
            assert.deepEqual(p.capabilities, { drops: ["ALL"] });
            assert.deepEqual(p.securityOpts, ["no-new-privileges:true"]);
            assert.equal(p.envs, undefined, "no env");
            assert.equal(p.uploads, undefined, "no uploads on a read-only root (the daemon refuses them)");
        }
    });

    test("the proxy runs nginx in the foreground, restarted unless stopped, healthy once 8443 listens", () => {
        for (const run of [b.update, b.preview]) {
            const p = unwrapSecrets(proxy(run.resources).inputs);
            assert.deepEqual(p.entrypoints, ["nginx", "-e", "stderr", "-c", "/etc/nginx/ingress/nginx.conf", "-g", "daemon off;"]);
            assert.equal(p.restart, "unless-stopped");
            assert.ok(p.healthcheck.tests.includes(":20FB 00000000:0000 0A"), "health: LISTEN on 8443");
        }
    });

    test("the TLS certificate and key are the host files, mounted read-only like every volume", () => {
        for (const run of [b.update, b.preview]) {
            const p = unwrapSecrets(proxy(run.resources).inputs);
            const vols = new Map<string, any>(p.volumes.map((v: any) => [v.containerPath, v]));
            assert.equal(vols.get("/etc/nginx/tls/tls.crt").hostPath, "/srv/agent-rl/tls/cert.pem");
            assert.equal(vols.get("/etc/nginx/tls/tls.key").hostPath, "/srv/agent-rl/tls/key.pem");
            for (const v of vols.values()) assert.equal(v.readOnly, true, `${v.containerPath} read-only`);
        }
    });

    test("the pinned nginx image, two volumes, outputs naming the container and the training network; no Kubernetes objects", () => {
        assert.equal(single(b.update.resources, T.image).inputs.name, b.c.images.nginx);
        assert.equal(ofType(b.update.resources, T.volume).length, 2);
        assert.equal(b.update.outputs!.serviceName, b.names.ingress.deployment);
        assert.equal(b.update.outputs!.namespace, b.names.networks.training);
        assert.equal(ofType(b.update.resources, T.deployment).length + ofType(b.update.resources, T.secret).length, 0, "no Kubernetes objects on docker");
    });

    test("a new key replaces the proxy container (checksum label), without the key in the label", async () => {
        const label = (r: Built) => unwrapSecrets(proxy(r.update.resources).inputs).labels.find((l: any) => l.label === CHECKSUM_ANNOTATION).value;
        const sum = label(b);
        assert.match(sum, /^[0-9a-f]{64}$/);
        const rotated = await build(b.c, { sandboxes: `${SENTINEL}rotated` });
        assert.notEqual(label(rotated), sum);
    });

    test("exposed on docker: the published port is 443 on all interfaces (https://<host>)", async () => {
        const e = await build(
            config({ exposure: "loadbalancer", host: "gpu.example.com", tls: { mode: "files", certFile: "/srv/c.pem", keyFile: "/srv/k.pem" } }, "docker"),
        );
        assert.deepEqual(unwrapSecrets(proxy(e.update.resources).inputs).ports, [{ internal: 8443, external: 443, ip: "0.0.0.0", protocol: "tcp" }]);
    });

    test("docker without args.networks is refused", async () => {
        const c = config({}, "docker");
        await assert.rejects(
            runBoth(() => {
                new VllmIngress("ingress", { description: resolveVllmIngress(c, platformNames(c)) });
            }),
            /needs args\.networks\.training/,
        );
    });
});

// ---------------------------------------------------------------------------------------------------------------

/** A loopback address in place of the verifier's Service (nginx resolves it at start; nothing is asked there by an operator's key). */
const LOCAL_VERIFIER = "127.0.0.1:7299";

describe("real nginx: the component's config is what ingress:local serves", {
    skip: skipWithoutNginx,
}, () => {
    let stub: StubUpstream;
    let ing: LocalIngress;
    let d: IngressDescription;
    before(async () => {
        stub = await startStubUpstream();
        const c = config({ allowCompletions: true, rateLimitPerSecond: 77, rateLimitBurst: 33, maxBodySize: "2m", readTimeoutSeconds: 300 });
        d = resolveVllmIngress(c, platformNames(c));
        // The verifier's address is the deployment's (its Service's DNS name): the local run names a loopback one.
        ing = await startLocalIngress({
            upstream: stub.url,
            keys: [{ name: "sandboxes", key: SENTINEL }],
            settings: { ...localOverrides(d.settings), rolloutKeyVerifier: LOCAL_VERIFIER },
        });
    });
    after(async () => {
        await ing?.stop();
        await stub?.stop();
    });

    test("identical apart from file paths, listen address and upstream", () => {
        const pairs: Array<[string, string]> = PROXY_PATH_FIELDS.map((f) => [String(d.settings[f]), String(ing.settings[f])]);
        // errorLog "stderr" is a keyword, not a path: it appears only in the error_log directive.
        let mapped = d.configText.replace(/^error_log stderr /m, `error_log ${ing.settings.errorLog} `);
        for (const [from, to] of pairs.filter(([f]) => f !== "stderr").sort((a, b) => b[0].length - a[0].length)) mapped = mapped.split(from).join(to);
        mapped = mapped
            .split(`listen ${d.settings.listenAddress}:${d.settings.listenPort}`)
            .join(`listen ${ing.settings.listenAddress}:${ing.settings.listenPort}`)
            .split(d.settings.upstream)
            .join(ing.settings.upstream)
            .split(d.settings.rolloutKeyVerifier!)
            .join(LOCAL_VERIFIER);
        assert.equal(mapped, ing.configText);
    });

    test("and it serves: the key reaches /v1/chat/completions, vLLM's control routes stay 404", async () => {
        const post = (path: string, key?: string) =>
            new Promise<number>((resolve, reject) => {
                const req = http.request(
                    `${ing.url}${path}`,
                    { method: "POST", headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) } },
                    (res) => {
                        res.resume();
                        res.on("end", () => resolve(res.statusCode ?? 0));
                    },
                );
                req.on("error", reject);
                req.end(JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }));
            });
        assert.equal(await post("/v1/chat/completions", SENTINEL), 200);
        assert.equal(await post("/v1/completions", SENTINEL), 200, "allowCompletions from config");
        assert.equal(await post("/v1/chat/completions"), 401);
        assert.equal(await post("/update_weights", SENTINEL), 404);
        assert.equal(await post("/pause?mode=keep", SENTINEL), 404);
        assert.ok(stub.requests.every((r) => r.rawUrl === "/v1/chat/completions" || r.rawUrl === "/v1/completions"));
    });
});
