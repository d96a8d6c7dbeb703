// Server-side validation of every plan: each Kubernetes stack and every recipe is planned
// (the real program under Pulumi mocks) and its manifests are applied with
// `kubectl apply --server-side --dry-run=server` to a real kube-apiserver v1.36.3 with the
// agent-sandbox, Gateway API, cert-manager and JobSet CRDs (test/helpers/apiserver.ts). Then every
// Secret a pod names (env secretKeyRef, envFrom secretRef, secret volumes and projections) must be
// one the plan renders, holding the key named, as the API server returns the objects from that
// dry run (a GitOps apply of the plan makes exactly those). The queues the multi-node guide shows
// are applied with Kueue's CRDs (test/apiserver/build.sh crds-kueue/) and checked to hold the queued run.
// Skip only with SKIP_APISERVER=1.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it, test } from "node:test";
import YAML from "yaml";
import { HARBOR_RECIPE_NAMES, KUEUE_RELEASE, MULTI_NODE_RECIPE_NAMES, RECIPE_NAMES } from "../../components/config";
import { quantityValue } from "../../components/shared/quantity";
import { planToDir, readStackFile, REPO_ROOT, type PlanResult, type PlanSource } from "../../scripts/lib/plan";
import { fixtureCacheDir, serverDryRun, startApiServer, type ApiServer } from "../helpers/apiserver";
import { fencedBlocks, readDoc } from "../helpers/docs";

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
// The queued multi-node run (its queue as the multi-node guide's LocalQueue names it): dry-run below, and checked against the guide's queues.
const QUEUED_32B = "opencode-blackbox-32b queued on Kueue (suspended JobSet with the queue label)";
const QUEUED_32B_SOURCE = { recipe: "opencode-blackbox-32b", target: "kubernetes" } as const;
const QUEUED_32B_OVERRIDE = { target: { kueueQueue: "team-a" } };
// A registryAuth value (a Docker config.json with a made-up credential): the pull Secrets and every pod's imagePullSecrets.
const REGISTRY_AUTH = JSON.stringify({ auths: { "registry.internal.example": { auth: Buffer.from("user:token").toString("base64") } } });
const variants: Array<{ name: string; source: PlanSource; override?: Record<string, unknown>; secrets?: Record<string, string> }> = [
    ...kubernetesStacks.map((stack) => ({ name: `stack ${stack}`, source: { stack } })),
    ...RECIPE_NAMES.map((recipe) => ({ name: `recipe ${recipe}`, source: { recipe, target: "kubernetes" as const } })),
    // Multi-node recipes: the JobSet against JobSet v0.12.0's CRD (from its Go module, test/apiserver/build.sh).
    ...MULTI_NODE_RECIPE_NAMES.map((recipe) => ({ name: `recipe ${recipe}`, source: { recipe, target: "kubernetes" as const } })),
    ...HARBOR_RECIPE_NAMES.map((recipe) => ({ name: `recipe ${recipe}`, source: { recipe, target: "kubernetes" as const } })),
    { name: QUEUED_32B, source: QUEUED_32B_SOURCE, override: QUEUED_32B_OVERRIDE },
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

/**
 * The fixture's CRDs of these Kueue kinds (test/apiserver/build.sh crds-kueue/, from Kueue's Go module at KUEUE_RELEASE;
 * controller-gen names each file kueue.x-k8s.io_<plural>.yaml). Only those: the Workload CRD alone is 1.4 MB.
 */
function kueueCrdFiles(kinds: readonly string[]): string[] {
    const dir = path.join(fixtureCacheDir(), "crds-kueue");
    return kinds.map((kind) => {
        const file = path.join(dir, `kueue-${KUEUE_RELEASE}.kueue.x-k8s.io_${kind.toLowerCase()}s.yaml`);
        assert.ok(fs.existsSync(file), `Kueue ${KUEUE_RELEASE}'s ${kind} CRD: ${file} (rebuild the fixture: bash test/apiserver/build.sh)`);
        return file;
    });
}

/** The queues docs/guides/multi-node.md tells a platform team to create: its yaml block that starts `# kueue-queues.yaml`. */
function guideQueues(): Array<Record<string, any>> {
    const block = fencedBlocks(readDoc("docs/guides/multi-node.md")).find((b) => b.info === "yaml" && b.body.startsWith("# kueue-queues.yaml\n"));
    assert.ok(block, "docs/guides/multi-node.md shows the queues in a yaml block that starts '# kueue-queues.yaml'");
    return YAML.parseAllDocuments(block.body).map((d) => d.toJS() as Record<string, any>);
}

/**
 * Per resource, what a planned trainer's pods request together (a JobSet: each replicated job's Jobs x their
 * pods; a Job: its pods): one pod's request is its containers' and native sidecars' together, or a plain init
 * container's where larger, a request left out being the limit (Kubernetes' defaulting and effective request).
 */
function workloadRequests(m: Record<string, any>): Map<string, number> {
    const jobs: Array<{ count: number; job: any }> =
        m.kind === "JobSet" ? m.spec.replicatedJobs.map((rj: any) => ({ count: rj.replicas ?? 1, job: rj.template.spec })) : [{ count: 1, job: m.spec }];
    const requests = (c: any): Array<[string, number]> =>
        Object.entries({ ...(c.resources?.limits ?? {}), ...(c.resources?.requests ?? {}) }).map(([r, q]) => [r, quantityValue(String(q))]);
    const out = new Map<string, number>();
    for (const { count, job } of jobs) {
        const spec = job.template.spec;
        const pod = new Map<string, number>();
        for (const c of [...spec.containers, ...(spec.initContainers ?? []).filter((c: any) => c.restartPolicy === "Always")])
            for (const [r, n] of requests(c)) pod.set(r, (pod.get(r) ?? 0) + n);
        for (const c of (spec.initContainers ?? []).filter((c: any) => c.restartPolicy !== "Always"))
            for (const [r, n] of requests(c)) pod.set(r, Math.max(pod.get(r) ?? 0, n));
        const pods = count * (job.parallelism ?? 1);
        for (const [r, n] of pod) out.set(r, (out.get(r) ?? 0) + pods * n);
    }
    return out;
}

describe("server-side dry run of every planned stack and recipe", { skip }, () => {
    let api: ApiServer;
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-ssa-"));
    // The plans the loop makes, by variant name (a later test reuses one rather than planning it again).
    const plans = new Map<string, PlanResult>();
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
            plans.set(v.name, plan);
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

    it(`Kueue ${KUEUE_RELEASE}: the multi-node guide's queues are accepted by its CRDs and hold the queued opencode-blackbox-32b JobSet; a broken one is refused`, async () => {
        const queues = guideQueues();
        assert.deepEqual(
            queues.map((q) => q.kind),
            ["ResourceFlavor", "ClusterQueue", "LocalQueue"],
        );
        const [flavor, clusterQueue, localQueue] = queues as [Record<string, any>, Record<string, any>, Record<string, any>];
        assert.equal(localQueue.spec.clusterQueue, clusterQueue.metadata.name);
        const groups: any[] = clusterQueue.spec.resourceGroups;
        assert.deepEqual(
            groups.flatMap((g) => g.flavors.map((f: any) => f.name)),
            [flavor.metadata.name],
        );
        // Kueue admits a workload only when its ClusterQueue covers every resource it requests, with quota for all of it.
        const queued =
            plans.get(QUEUED_32B) ??
            (await planToDir(QUEUED_32B_SOURCE, { outDir: path.join(tmp, "kueue-plan"), platformOverride: QUEUED_32B_OVERRIDE, secrets: { hfToken: "t" } }));
        const jobSet = queued.manifests.find((m) => m.kind === "JobSet")!;
        assert.equal(jobSet.metadata.labels["kueue.x-k8s.io/queue-name"], localQueue.metadata.name);
        assert.equal(jobSet.spec.suspend, true);
        const covered: string[] = groups.flatMap((g) => g.coveredResources);
        const quota = new Map<string, number>(
            groups.flatMap((g) => g.flavors.flatMap((f: any) => f.resources.map((r: any) => [r.name, quantityValue(String(r.nominalQuota))] as const))),
        );
        const wants = workloadRequests(jobSet);
        assert.ok((wants.get("nvidia.com/gpu") ?? 0) > 0, "the queued JobSet requests GPUs");
        assert.deepEqual(
            [...wants.keys()].filter((r) => !covered.includes(r)),
            [],
            "resources the run requests that the ClusterQueue does not cover",
        );
        for (const [r, n] of wants) assert.ok(n <= (quota.get(r) ?? 0), `${r}: the run requests ${n}, the ClusterQueue's quota is ${quota.get(r)}`);

        // Kueue's CRDs of these kinds (from its Go module) and the queues, in the LocalQueue's namespace.
        const dir = path.join(tmp, "kueue-queues");
        fs.mkdirSync(dir, { recursive: true });
        const crds = kueueCrdFiles(queues.map((q) => q.kind));
        for (const f of crds) fs.copyFileSync(f, path.join(dir, path.basename(f)));
        const namespace = { apiVersion: "v1", kind: "Namespace", metadata: { name: localQueue.metadata.namespace } };
        fs.writeFileSync(path.join(dir, "queues.yaml"), [namespace, ...queues].map((o) => YAML.stringify(o)).join("---\n"));
        const result = await serverDryRun(api, dir);
        assert.equal(result.objects, crds.length + 1 + queues.length);

        // The CRD really checks: memory covered but given no quota is refused (its rule on resourceGroups).
        const broken = path.join(tmp, "kueue-broken");
        fs.mkdirSync(broken, { recursive: true });
        const flavorQuota = clusterQueue.spec.resourceGroups[0].flavors[0];
        const withoutMemory = {
            ...clusterQueue,
            spec: {
                ...clusterQueue.spec,
                resourceGroups: [{ ...groups[0], flavors: [{ ...flavorQuota, resources: flavorQuota.resources.filter((r: any) => r.name !== "memory") }] }],
            },
        };
        fs.writeFileSync(path.join(broken, "clusterqueue.yaml"), YAML.stringify(withoutMemory));
        await assert.rejects(serverDryRun(api, broken), /flavors must have the same number of resources as the coveredResources/);
    });

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
