// Server-side validation of every plan: each Kubernetes stack and every recipe is planned
// (the real program under Pulumi mocks) and its manifests are applied with
// `kubectl apply --server-side --dry-run=server` to a real kube-apiserver v1.36.3 with the
// agent-sandbox, Gateway API, cert-manager and JobSet CRDs (test/helpers/apiserver.ts). Then every
// Secret a pod names (env secretKeyRef, envFrom secretRef, secret volumes and projections) must be
// one the plan renders, holding the key named, as the API server returns the objects from that
// dry run (a GitOps apply of the plan makes exactly those). Skip only with SKIP_APISERVER=1.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it, test } from "node:test";
import YAML from "yaml";
import { HARBOR_RECIPE_NAMES, MULTI_NODE_RECIPE_NAMES, RECIPE_NAMES } from "../../components/config";
import { planToDir, readStackFile, REPO_ROOT, type PlanSource } from "../../scripts/lib/plan";
import { serverDryRun, startApiServer, type ApiServer } from "../helpers/apiserver";

/** One reference from a pod spec to a Secret: a key of it, or (envFrom, a whole-Secret volume) the Secret itself. */
interface SecretRef {
    readonly namespace: string;
    readonly secret: string;
    readonly key?: string;
    /** Where: `<Kind> <name> <field>`. */
    readonly at: string;
    readonly optional: boolean;
}

/** Every Secret reference of every pod spec (anything with `containers`) inside `obj`. */
export function secretRefs(obj: Record<string, any>): SecretRef[] {
    const namespace = obj.metadata?.namespace ?? "default";
    const out: SecretRef[] = [];
    const here = `${obj.kind} ${obj.metadata?.name}`;
    const podSpec = (spec: any) => {
        for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
            for (const e of c.env ?? []) {
                const r = e.valueFrom?.secretKeyRef;
                if (r) out.push({ namespace, secret: r.name, key: r.key, at: `${here} container ${c.name} env ${e.name}`, optional: r.optional === true });
            }
            for (const e of c.envFrom ?? []) {
                if (e.secretRef)
                    out.push({ namespace, secret: e.secretRef.name, at: `${here} container ${c.name} envFrom`, optional: e.secretRef.optional === true });
            }
        }
        for (const v of spec.volumes ?? []) {
            const sources = [
                ...(v.secret ? [{ ...v.secret, name: v.secret.secretName }] : []),
                ...(v.projected?.sources ?? []).flatMap((s: any) => (s.secret ? [s.secret] : [])),
            ];
            for (const s of sources) {
                const at = `${here} volume ${v.name}`;
                if ((s.items ?? []).length === 0) out.push({ namespace, secret: s.name, at, optional: s.optional === true });
                for (const it of s.items ?? []) out.push({ namespace, secret: s.name, key: it.key, at, optional: s.optional === true });
            }
        }
    };
    const walk = (v: any) => {
        if (Array.isArray(v)) v.forEach(walk);
        else if (v && typeof v === "object") {
            if (Array.isArray(v.containers)) podSpec(v);
            for (const x of Object.values(v)) walk(x);
        }
    };
    walk(obj.spec);
    return out;
}

/**
 * The references among `objects` that resolve to no key of a Secret among them. `external`: Secrets a
 * user or a controller makes (the TLS Secret of tls.mode secret, a Certificate's), which only need to be named.
 */
export function unresolvedSecretRefs(objects: ReadonlyArray<Record<string, any>>, external: ReadonlySet<string>): string[] {
    const keys = new Map<string, Set<string>>();
    for (const o of objects) {
        if (o.kind !== "Secret") continue;
        keys.set(`${o.metadata.namespace}/${o.metadata.name}`, new Set([...Object.keys(o.data ?? {}), ...Object.keys(o.stringData ?? {})]));
    }
    const problems: string[] = [];
    for (const r of objects.flatMap(secretRefs)) {
        const id = `${r.namespace}/${r.secret}`;
        const held = keys.get(id);
        if (held === undefined) {
            if (!external.has(id) && !r.optional) problems.push(`${r.at}: no Secret ${id} in the plan`);
        } else if (r.key !== undefined && !held.has(r.key)) {
            problems.push(`${r.at}: Secret ${id} has no key ${r.key} (it holds ${[...held].join(", ") || "nothing"})`);
        } else if (r.key === undefined && held.size === 0) {
            problems.push(`${r.at}: Secret ${id} holds no key`);
        }
    }
    return problems;
}

/** Secrets the plan names but does not make: a Certificate's (cert-manager makes it) and the ingress's own TLS Secret (tls.mode secret: the user's). */
function externalSecrets(objects: ReadonlyArray<Record<string, any>>, tlsSecret: string | undefined, ingressNamespace: string): Set<string> {
    const out = new Set<string>();
    for (const o of objects) if (o.kind === "Certificate" && o.spec?.secretName) out.add(`${o.metadata.namespace}/${o.spec.secretName}`);
    if (tlsSecret !== undefined) out.add(`${ingressNamespace}/${tlsSecret}`);
    return out;
}

test("secretRefs/unresolvedSecretRefs: a key the Secret lacks, a Secret the plan lacks, and an external Secret", () => {
    const pod = (spec: any) => ({ kind: "Deployment", metadata: { name: "d", namespace: "ns" }, spec: { template: { spec } } });
    const secret = (name: string, stringData: Record<string, string>) => ({ kind: "Secret", metadata: { name, namespace: "ns" }, stringData });
    const spec = {
        containers: [{ name: "c", env: [{ name: "K", valueFrom: { secretKeyRef: { name: "s", key: "api-key" } } }], envFrom: [{ secretRef: { name: "t" } }] }],
        volumes: [{ name: "tls", secret: { secretName: "tls" } }],
    };
    assert.deepEqual(unresolvedSecretRefs([pod(spec), secret("s", { "api-key": "<redacted>" }), secret("t", { A: "x" })], new Set(["ns/tls"])), []);
    // The old plan's rendering: a Secret whose keys are Pulumi's secret wrapper.
    const wrapped = secret("s", { "4dabf18193072939515e22adb298388d": "<redacted>", value: "<redacted>" });
    assert.deepEqual(unresolvedSecretRefs([pod(spec), wrapped, secret("t", { A: "x" })], new Set()), [
        "Deployment d container c env K: Secret ns/s has no key api-key (it holds 4dabf18193072939515e22adb298388d, value)",
        "Deployment d volume tls: no Secret ns/tls in the plan",
    ]);
});

const skip = process.env.SKIP_APISERVER === "1" ? "SKIP_APISERVER=1" : false;

const kubernetesStacks = fs
    .readdirSync(path.join(REPO_ROOT, "stacks"))
    .filter((f) => /^Pulumi\..+\.yaml$/.test(f))
    .map((f) => f.slice("Pulumi.".length, -".yaml".length))
    .filter((stack) => {
        // Run stacks only: a cluster stack (agent-rl-infra:cluster) has its own dry run (cluster-stack.test.ts).
        const platform = readStackFile(stack).config["agent-rl-infra:platform"];
        return platform !== undefined && JSON.parse(platform).target?.kind === "kubernetes";
    });

const exposed = { recipe: "opencode-blackbox", target: "kubernetes" } as const;
// A registryAuth value (a Docker config.json with a made-up credential): the pull Secrets and every pod's imagePullSecrets.
const REGISTRY_AUTH = JSON.stringify({ auths: { "registry.internal.example": { auth: Buffer.from("user:token").toString("base64") } } });
const variants: Array<{ name: string; source: PlanSource; override?: Record<string, unknown>; secrets?: Record<string, string> }> = [
    ...kubernetesStacks.map((stack) => ({ name: `stack ${stack}`, source: { stack } })),
    ...RECIPE_NAMES.map((recipe) => ({ name: `recipe ${recipe}`, source: { recipe, target: "kubernetes" as const } })),
    // Multi-node recipes: the JobSet against JobSet v0.12.0's CRD (from its Go module, test/apiserver/build.sh).
    ...MULTI_NODE_RECIPE_NAMES.map((recipe) => ({ name: `recipe ${recipe}`, source: { recipe, target: "kubernetes" as const } })),
    ...HARBOR_RECIPE_NAMES.map((recipe) => ({ name: `recipe ${recipe}`, source: { recipe, target: "kubernetes" as const } })),
    {
        name: "opencode-blackbox-32b queued on Kueue (suspended JobSet with the queue label)",
        source: { recipe: "opencode-blackbox-32b", target: "kubernetes" },
        override: { target: { kueueQueue: "team-a" } },
    },
    {
        name: "opencode-blackbox queued on Kueue (suspended one-node Job with the queue label)",
        source: exposed,
        override: { target: { kueueQueue: "team-a" } },
    },
    {
        name: "opencode-blackbox with NodeLocal DNSCache (DNS egress to the cache's /32 and kube-dns)",
        source: exposed,
        override: { target: { dns: { kind: "node-local", addresses: ["169.254.20.10", "10.96.0.10"] } } },
    },
    {
        name: "opencode-blackbox-32b with DNS pods of one's own (target.dns selector)",
        source: { recipe: "opencode-blackbox-32b", target: "kubernetes" },
        override: { target: { dns: { kind: "selector", namespace: "dns", podLabels: { app: "unbound" } } } },
    },
    {
        name: "opencode-blackbox with registry credentials (pull Secrets; imagePullSecrets on every pod, the SandboxTemplate's included)",
        source: exposed,
        secrets: { registryAuth: REGISTRY_AUTH },
    },
    {
        name: "opencode-blackbox-32b with registry credentials (the JobSet's and vLLM's pods)",
        source: { recipe: "opencode-blackbox-32b", target: "kubernetes" },
        secrets: { registryAuth: REGISTRY_AUTH },
    },
    // observability: the metrics sidecars and ports, the scrape rules, the PodMonitors (and the
    // PrometheusRule) against the Prometheus Operator v0.95.2 CRDs generated by test/apiserver/build.sh.
    {
        name: "opencode-blackbox with observability (PodMonitors, monitor labels)",
        source: exposed,
        override: { observability: { enabled: true, monitorLabels: { release: "prom" } }, images: { mtail: "registry.example.com/agent-rl/mtail:3.0.0" } },
    },
    {
        name: "opencode-blackbox-32b with observability (vLLM's own pod scraped)",
        source: { recipe: "opencode-blackbox-32b", target: "kubernetes" },
        override: { observability: { enabled: true }, images: { mtail: "registry.example.com/agent-rl/mtail:3.0.0" } },
    },
    {
        name: "mbpp-whitebox with observability, form annotations",
        source: { recipe: "mbpp-whitebox", target: "kubernetes" },
        override: { observability: { enabled: true, form: "annotations" } },
    },
    {
        name: "opencode-blackbox exposed through a Gateway API HTTPRoute",
        source: exposed,
        override: { ingress: { exposure: "httproute", host: "vllm.example.com", gateway: { name: "public", namespace: "gateway-system" } } },
    },
    {
        name: "opencode-blackbox behind a TLS LoadBalancer",
        source: exposed,
        override: {
            ingress: { exposure: "loadbalancer", host: "vllm.example.com", tls: { mode: "secret", secretName: "vllm-tls" } },
        },
    },
];

describe("server-side dry run of every planned stack and recipe", { skip }, () => {
    let api: ApiServer;
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-ssa-"));
    before(async () => {
        api = await startApiServer();
    });
    after(async () => {
        await api?.stop();
        fs.rmSync(tmp, { recursive: true, force: true });
    });

    for (const v of variants) {
        it(`${v.name}: every object is accepted by the API server`, async () => {
            const outDir = path.join(tmp, v.name.replace(/[^a-z0-9]+/gi, "-"));
            const plan = await planToDir(v.source, { outDir, platformOverride: v.override, secrets: { hfToken: "dry-run-token", ...v.secrets } });
            assert.ok(plan.manifests.length > 0);
            const dir = path.join(outDir, "manifests");
            const result = await serverDryRun(api, dir);
            assert.equal(result.objects, plan.manifests.length);
            // The objects as the API server would store them (stringData folded into data).
            const served = JSON.parse(
                await api.kubectlOk([
                    "apply",
                    "--server-side",
                    "--dry-run=server",
                    "--force-conflicts",
                    "--field-manager=agent-rl-plan",
                    "-o",
                    "json",
                    "--recursive",
                    "-f",
                    dir,
                ]),
            );
            const objects: Array<Record<string, any>> = served.kind === "List" ? served.items : [served];
            assert.equal(objects.length, plan.manifests.length);
            const refs = objects.flatMap(secretRefs);
            assert.ok(refs.length > 0, "the plan's pods name Secrets");
            const tls =
                plan.plan.config.ingress.enabled && plan.plan.config.ingress.tls.mode === "secret" ? plan.plan.config.ingress.tls.secretName : undefined;
            assert.deepEqual(unresolvedSecretRefs(objects, externalSecrets(objects, tls, plan.plan.names.namespaces.ingress)), []);
            assert.ok(!JSON.stringify(objects).includes("4dabf18193072939515e22adb298388d"), "no Pulumi secret wrapper reaches the API server");
        });
    }

    it("the JobSet CRD is really checked: an action outside its enum is rejected", async () => {
        const outDir = path.join(tmp, "broken-jobset");
        await planToDir({ recipe: "opencode-blackbox-32b", target: "kubernetes" }, { outDir });
        const dir = path.join(outDir, "manifests");
        const file = fs.readdirSync(dir).find((f) => f.includes("-jobset-"))!;
        const jobSet = YAML.parse(fs.readFileSync(path.join(dir, file), "utf8"));
        jobSet.spec.failurePolicy.rules[0].action = "RestartEverything";
        fs.writeFileSync(path.join(dir, file), YAML.stringify(jobSet));
        await assert.rejects(serverDryRun(api, dir), /spec\.failurePolicy\.rules\[0\]\.action: Unsupported value: "RestartEverything"/);
    });

    it("a deliberately broken planned object is rejected with the API server's own message", async () => {
        const outDir = path.join(tmp, "broken");
        await planToDir({ recipe: "wordle-whitebox", target: "kubernetes" }, { outDir });
        const dir = path.join(outDir, "manifests");
        const jobFile = fs.readdirSync(dir).find((f) => f.includes("-job-"))!;
        const job = YAML.parse(fs.readFileSync(path.join(dir, jobFile), "utf8"));
        // A Job's pod may not restart Always (the schema allows the value; only the server refuses it).
        job.spec.template.spec.restartPolicy = "Always";
        fs.writeFileSync(path.join(dir, jobFile), YAML.stringify(job));
        await assert.rejects(serverDryRun(api, dir), (e: Error) => {
            assert.match(e.message, /restartPolicy/);
            assert.match(
                e.message,
                /The Job "train-demo-[0-9a-f]{8}" is invalid: spec\.template\.spec\.restartPolicy: Required value: valid values: "OnFailure", "Never"/,
            );
            return true;
        });
    });
});
