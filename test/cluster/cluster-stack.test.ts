// The cluster stack (issue 16 part 1): its config and messages, what it registers, the outputs
// run stacks read, how a run stack applies them (and refuses what the cluster stack does not
// provide), the moved sandboxes.installController, and the planned objects through the API
// server's dry run. The engine test of two run stacks on one cluster stack is in
// engine-cluster-stack.test.ts.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import YAML from "yaml";
import {
    applyClusterStack,
    clusterOutputs,
    deepMerge,
    parseClusterConfig,
    parsePlatformConfig,
    type ClusterOutputs,
    type PlatformConfig,
} from "../../components/config";
import { runUnderMocks } from "../../scripts/lib/mockrun";
import { sandboxControllerMonitor } from "../../components/cluster/cluster-base";
import { MONITORING_API_VERSION, podMonitorSpec } from "../../components/shared/pod-monitor";
import { planClusterToDir, planToDir, readStackFile, REPO_ROOT } from "../../scripts/lib/plan";
import { configProblems, parseWithTestImages } from "../helpers/config";
import { serverDryRun, startApiServer, type ApiServer } from "../helpers/apiserver";
import { validateAnyManifest } from "../helpers/crd-schema";
import { policyResources } from "../helpers/guardrails-plan";
import { loadManifestSchemas } from "../helpers/k8s-schema";
import { runPolicies } from "../../policy/run-local";

const CLUSTER = { target: { kind: "kubernetes", context: "gpu" } };
const REF = "organization/agent-rl-infra/cluster";

const run = (over: Record<string, unknown> = {}): PlatformConfig =>
    parseWithTestImages(
        deepMerge({ recipe: "opencode-blackbox", runId: "r1", clusterStack: REF, target: { kind: "kubernetes", context: "gpu" } }, over),
        "staging",
    );

describe("cluster stack config", () => {
    it("defaults: agent-sandbox installed from the v1.0.1 release, two PriorityClasses (sandboxes below training, never preempting)", () => {
        const c = parseClusterConfig(CLUSTER);
        assert.equal(c.agentSandbox.install, true);
        assert.equal(c.agentSandbox.manifest, "https://github.com/kubernetes-sigs/agent-sandbox/releases/download/v1.0.1/sandbox-with-extensions.yaml");
        assert.deepEqual(c.jobSet, { install: false, manifest: "https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml" });
        assert.deepEqual(c.kueue, { install: false, manifest: "https://github.com/kubernetes-sigs/kueue/releases/download/v0.17.0/manifests.yaml" });
        assert.ok(c.priorityClasses.training!.value > c.priorityClasses.sandboxes!.value);
        assert.equal(c.priorityClasses.sandboxes!.preemptionPolicy, "Never");
        assert.deepEqual([c.runtimeClasses, c.teams], [[], []]);
    });

    it("a context is required, and the target is Kubernetes only", () => {
        assert.deepEqual(
            configProblems(() => parseClusterConfig({ target: { kind: "kubernetes" } })),
            ["cluster target.context: required: set target.context (expected string)"],
        );
        assert.match(configProblems(() => parseClusterConfig({ target: { kind: "docker", context: "x" } }))[0], /^cluster target\.kind: /);
    });

    it("names listed twice and one name for both PriorityClasses are refused, all at once", () => {
        const problems = configProblems(() =>
            parseClusterConfig({
                ...CLUSTER,
                runtimeClasses: [
                    { name: "gvisor", handler: "runsc" },
                    { name: "gvisor", handler: "runsc" },
                ],
                teams: [{ name: "a" }, { name: "a" }],
                priorityClasses: { training: { name: "p", value: 10 }, sandboxes: { name: "p", value: 1 } },
            }),
        );
        assert.deepEqual(problems, [
            "cluster runtimeClasses: 'gvisor' is listed twice: keep one",
            "cluster teams: 'a' is listed twice: keep one",
            "cluster priorityClasses: training and sandboxes are both 'p': give them two names (sandboxes rank below training)",
        ]);
    });

    it("outputs: what run stacks read, from one rule", () => {
        const out = clusterOutputs(
            parseClusterConfig({ ...CLUSTER, runtimeClasses: [{ name: "gvisor", handler: "runsc" }], certIssuer: { name: "ca" }, teams: [{ name: "team-a" }] }),
        );
        assert.deepEqual(out, {
            kind: "agent-rl-infra/cluster",
            agentSandbox: { version: "v1.0.1", installed: true },
            priorityClasses: { training: "agent-rl-training", sandboxes: "agent-rl-sandboxes" },
            runtimeClasses: ["gvisor"],
            certIssuer: { name: "ca", kind: "ClusterIssuer", group: "cert-manager.io" },
            teams: ["team-a"],
            tenants: {
                "team-a": {
                    namespaces: { training: "team-a-training", ingress: "team-a-ingress", envs: "team-a-envs", sandboxes: "team-a-sandboxes" },
                    quotas: {},
                    sandboxMaxLifetimeSeconds: 21600,
                },
            },
        });
    });
});

describe("a run stack on a cluster stack", () => {
    const outputs: ClusterOutputs = clusterOutputs(
        parseClusterConfig({ ...CLUSTER, runtimeClasses: [{ name: "gvisor", handler: "runsc" }], certIssuer: { name: "ca" } }),
    );

    it("takes the PriorityClasses where it names none, keeps its own where it does", () => {
        const applied = applyClusterStack(run(), outputs);
        assert.equal(applied.target.kind === "kubernetes" && applied.target.priorityClassName, "agent-rl-training");
        assert.equal(applied.sandboxes.priorityClassName, "agent-rl-sandboxes");
        const own = applyClusterStack(run({ target: { priorityClassName: "mine" }, sandboxes: { priorityClassName: "low" } }), outputs);
        assert.equal(own.target.kind === "kubernetes" && own.target.priorityClassName, "mine");
        assert.equal(own.sandboxes.priorityClassName, "low");
    });

    it("takes the cluster's issuer for cert-manager TLS without one; refuses when the cluster has none", () => {
        const tls = { ingress: { exposure: "cluster", tls: { mode: "cert-manager" } } };
        assert.deepEqual(applyClusterStack(run(tls), outputs).ingress.tls.issuer, { name: "ca", kind: "ClusterIssuer", group: "cert-manager.io" });
        assert.deepEqual(
            configProblems(() => applyClusterStack(run(tls), { ...outputs, certIssuer: undefined })),
            [
                `ingress.tls.issuer: tls mode 'cert-manager' needs an issuer, and the cluster stack '${REF}' names none: set tls.issuer here, or certIssuer in the cluster stack`,
            ],
        );
        assert.match(
            configProblems(() =>
                parseWithTestImages(deepMerge(tls, { recipe: "opencode-blackbox", runId: "r1", target: { kind: "kubernetes", context: "x" } }), "staging"),
            ).join(),
            /ingress\.tls\.issuer: tls mode 'cert-manager' needs the issuer .* or take the cluster stack's \(clusterStack\)/,
        );
    });

    it("refuses a RuntimeClass the cluster stack does not make, and agent-sandbox it does not install", () => {
        const problems = configProblems(() =>
            applyClusterStack(run({ sandboxes: { runtimeClassName: "kata" } }), { ...outputs, agentSandbox: { version: "v1.0.1", installed: false } }),
        );
        assert.deepEqual(problems, [
            `sandboxes.provider: agent-sandbox, but the cluster stack '${REF}' does not install it: set agentSandbox.install true there (or install agent-sandbox v1.0.1 by hand and say so with the preflight)`,
            `sandboxes.runtimeClassName: 'kata' is not a RuntimeClass of the cluster stack '${REF}' (it has: gvisor): add { name: kata, handler: <the nodes' handler> } to its runtimeClasses, or use one it has`,
        ]);
    });

    it("a stack that is not a cluster stack (or not up yet) is named with the fix", () => {
        assert.deepEqual(
            configProblems(() => applyClusterStack(run(), {})),
            [
                `clusterStack: '${REF}' exports no cluster outputs: point it at a stack whose config is agent-rl-infra:cluster and that has been up'd (pulumi stack ls; pulumi stack output -s ${REF})`,
            ],
        );
    });

    it("clusterStack must be a full stack name", () => {
        assert.match(
            configProblems(() => run({ clusterStack: "cluster" })).join(),
            /clusterStack: must be <org>\/<project>\/<stack>, e\.g\. organization\/agent-rl-infra\/cluster/,
        );
    });

    it("sandboxes.installController is gone from run stacks, with where it went", () => {
        assert.deepEqual(
            configProblems(() =>
                parsePlatformConfig(
                    { recipe: "opencode-blackbox", runId: "r1", target: { kind: "kubernetes", context: "x" }, sandboxes: { installController: true } },
                    "s",
                ),
            ),
            [
                "sandboxes.installController: a run stack no longer installs cluster-wide objects (a second stack met AlreadyExists, and destroying the first took every run's sandboxes): " +
                    "remove it, and install agent-sandbox once with a cluster stack (agent-rl-infra:cluster, agentSandbox.install; point clusterStack at it) or by hand",
            ],
        );
    });
});

describe("the program: a cluster stack and a run stack on it, under mocks", () => {
    const program = () => require(path.join(REPO_ROOT, "index.ts")) as () => Promise<Record<string, unknown>>;
    const clusterFile = readStackFile("cluster");

    it("a cluster stack registers the shared objects and nothing of a run; its outputs are ClusterOutputs", async () => {
        const r = await runUnderMocks(program(), { stack: "cluster", config: clusterFile.config, secretKeys: [] });
        assert.equal(r.error, undefined);
        const kinds = r.resources
            .filter((x) => (x.custom || x.type === "kubernetes:yaml/v2:ConfigFile") && !x.type.startsWith("pulumi:providers:"))
            .map((x) => `${x.type} ${x.inputs.metadata?.name ?? x.inputs.file ?? ""}`);
        const team = ["training", "ingress", "envs", "sandboxes"];
        assert.deepEqual(
            kinds.sort(),
            [
                "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy agentrl-team-agents-sandbox-claims",
                "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding agentrl-team-agents-sandbox-claims",
                ...team.map((role) => `kubernetes:core/v1:Namespace team-agents-${role}`),
                // stacks/Pulumi.cluster.yaml sets quotas for training, envs and sandboxes (not the ingress).
                ...["training", "envs", "sandboxes"].map(() => "kubernetes:core/v1:ResourceQuota team-quota"),
                ...team.map(() => "kubernetes:networking.k8s.io/v1:NetworkPolicy default-deny-ingress"),
                "kubernetes:node.k8s.io/v1:RuntimeClass gvisor",
                ...team.map(() => "kubernetes:rbac.authorization.k8s.io/v1:Role agentrl-deployer"),
                ...team.map(() => "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding agentrl-deployer"),
                "kubernetes:scheduling.k8s.io/v1:PriorityClass agent-rl-sandboxes",
                "kubernetes:scheduling.k8s.io/v1:PriorityClass agent-rl-training",
                "kubernetes:yaml/v2:ConfigFile https://github.com/kubernetes-sigs/agent-sandbox/releases/download/v1.0.1/sandbox-with-extensions.yaml",
            ].sort(),
        );
        const quota = r.resources.find((x) => x.type === "kubernetes:core/v1:ResourceQuota" && x.inputs.metadata.namespace === "team-agents-training")!;
        assert.deepEqual(quota.inputs.spec.hard, { "requests.nvidia.com/gpu": "16", "requests.cpu": "256", "requests.memory": "2Ti", pods: "40" });
        assert.equal(r.outputs?.kind, "agent-rl-infra/cluster");
        assert.deepEqual(r.outputs?.runtimeClasses, ["gvisor"]);
    });

    it("jobSet.install, kueue.install: the cluster stack installs JobSet v0.12.0 and Kueue v0.17.0 from their release manifests (plan.md names both); off, nothing of either", async () => {
        const key = Object.keys(clusterFile.config).find((k) => k.endsWith(":cluster"))!;
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "arl-cluster-releases-"));
        const stackFile = path.join(dir, "Pulumi.releases.yaml");
        const withReleases = { ...JSON.parse(clusterFile.config[key]), jobSet: { install: true }, kueue: { install: true } };
        fs.writeFileSync(stackFile, YAML.stringify({ config: { [key]: withReleases } }));
        const r = await planClusterToDir({ stack: "releases", stackFile }, { outDir: path.join(dir, "plan") });
        assert.match(
            fs.readFileSync(path.join(dir, "plan", "plan.md"), "utf8"),
            /\| JobSet v0\.12\.0 \(CRDs, controller, webhooks, RBAC\) \| release manifest \| `https:\/\/github\.com\/kubernetes-sigs\/jobset\/releases\/download\/v0\.12\.0\/manifests\.yaml` \|\n\| Kueue v0\.17\.0 \(CRDs, controller, webhooks, RBAC\) \| release manifest \| `https:\/\/github\.com\/kubernetes-sigs\/kueue\/releases\/download\/v0\.17\.0\/manifests\.yaml` \|/,
        );
        fs.rmSync(dir, { recursive: true, force: true });
        const files = r.resources.filter((x) => x.type === "kubernetes:yaml/v2:ConfigFile");
        assert.deepEqual(files.map((x) => [x.name, x.inputs.file]).sort(), [
            ["agentrl-agent-sandbox", "https://github.com/kubernetes-sigs/agent-sandbox/releases/download/v1.0.1/sandbox-with-extensions.yaml"],
            ["agentrl-jobset", "https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml"],
            ["agentrl-kueue", "https://github.com/kubernetes-sigs/kueue/releases/download/v0.17.0/manifests.yaml"],
        ]);
        const plain = await runUnderMocks(program(), { stack: "cluster", config: clusterFile.config, secretKeys: [] });
        assert.equal(plain.resources.filter((x) => x.type === "kubernetes:yaml/v2:ConfigFile" && /jobset|kueue/.test(String(x.inputs.file))).length, 0);
    });

    it("a stack with both keys is refused, naming both", async () => {
        const staging = readStackFile("staging");
        const r = await runUnderMocks(program(), { stack: "both", config: { ...staging.config, ...clusterFile.config }, secretKeys: [] });
        assert.ok(pulumi.RunError.isInstance(r.error as Error));
        assert.match((r.error as Error).message, /sets both agent-rl-infra:cluster and agent-rl-infra:platform/);
    });

    it("a run stack reads its cluster stack: the Job and the sandboxes get its PriorityClasses; unreachable cluster stack: refused, nothing registered", async () => {
        const staging = readStackFile("staging");
        const platform = deepMerge(JSON.parse(staging.config["agent-rl-infra:platform"]), { clusterStack: REF });
        const config = { ...staging.config, "agent-rl-infra:platform": JSON.stringify(platform) };
        const outputs = { ...clusterOutputs(parseClusterConfig(JSON.parse(clusterFile.config["agent-rl-infra:cluster"]))) };
        const r = await runUnderMocks(program(), { stack: "staging", config, secretKeys: staging.secretKeys, stackOutputs: { [REF]: outputs } });
        assert.equal(r.error, undefined);
        const job = r.resources.find((x) => x.type === "kubernetes:batch/v1:Job")!;
        assert.equal(job.inputs.spec.template.spec.priorityClassName, "agent-rl-training");
        const template = r.resources.find((x) => x.type.endsWith(":SandboxTemplate"))!;
        assert.equal(template.inputs.spec.podTemplate.spec.priorityClassName, "agent-rl-sandboxes");
        assert.deepEqual(
            r.resources.filter((x) => /PriorityClass|RuntimeClass|ConfigFile|CustomResourceDefinition/.test(x.type)).map((x) => x.type),
            [],
            "a run stack creates nothing cluster-wide",
        );

        const missing = await runUnderMocks(program(), { stack: "staging", config, secretKeys: staging.secretKeys, stackOutputs: { [REF]: {} } });
        assert.match((missing.error as Error).message, /clusterStack: 'organization\/agent-rl-infra\/cluster' exports no cluster outputs/);
        assert.deepEqual(
            missing.resources.filter((x) => x.type !== "pulumi:pulumi:Stack"),
            [],
        );
    });
});

describe("the cluster stack through the API server's dry run", () => {
    let api: ApiServer;
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-cluster-"));
    before(async () => {
        api = await startApiServer();
    });
    after(async () => {
        await api?.stop();
        fs.rmSync(tmp, { recursive: true, force: true });
    });

    it("every planned object passes the strict schema, and the policy pack (prod config, every policy mandatory) finds nothing", async () => {
        await loadManifestSchemas();
        const plan = await planClusterToDir({ stack: "cluster" }, { outDir: path.join(tmp, "strict") });
        const problems = plan.manifests.flatMap((m) => validateAnyManifest(m).map((p) => `${m.kind} ${m.metadata?.name}: ${p}`));
        assert.deepEqual(problems, []);
        const prodConfig = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, "policy", "config.prod.json"), "utf8"));
        const violations = await runPolicies(policyResources(plan.resources), { config: prodConfig, stack: "cluster" });
        assert.deepEqual(
            violations.map((v) => `[${v.policy}] ${v.message}`),
            [],
        );
    });

    it("every planned object of stacks/Pulumi.cluster.yaml is accepted", async () => {
        const plan = await planClusterToDir({ stack: "cluster" }, { outDir: path.join(tmp, "cluster") });
        // 2 PriorityClasses and the RuntimeClass (agent-sandbox's manifest is its own file); team-agents: 4
        // namespaces, 4 default-deny policies, 3 quotas, 4 deployer Roles + 4 RoleBindings, the claim policy and its binding.
        assert.equal(plan.manifests.length, 3 + 4 + 4 + 3 + 8 + 2);
        const result = await serverDryRun(api, path.join(tmp, "cluster", "manifests"));
        assert.equal(result.objects, plan.manifests.length);
        assert.match(fs.readFileSync(path.join(tmp, "cluster", "plan.md"), "utf8"), /\| RuntimeClass \| gvisor \| handler `runsc`/);
    });

    it("with observability: agent-sandbox's controller PodMonitor is accepted (the Prometheus Operator CRDs of test/apiserver/build.sh)", async () => {
        const m = sandboxControllerMonitor(
            parseClusterConfig({ target: { kind: "kubernetes", context: "x" }, observability: { enabled: true, monitorLabels: { release: "prom" } } })
                .observability,
        );
        const dir = path.join(tmp, "sandbox-monitor");
        fs.mkdirSync(dir, { recursive: true });
        // The release manifest makes the namespace (a ConfigFile, not among the plan's objects): here by hand.
        const objects = [
            { apiVersion: "v1", kind: "Namespace", metadata: { name: m.namespace } },
            {
                apiVersion: MONITORING_API_VERSION,
                kind: "PodMonitor",
                metadata: { name: m.name, namespace: m.namespace, labels: m.labels },
                spec: podMonitorSpec(m),
            },
        ];
        for (const [i, o] of objects.entries()) fs.writeFileSync(path.join(dir, `${i}.json`), JSON.stringify(o));
        const result = await serverDryRun(api, dir);
        assert.equal(result.objects, 2);
    });

    it("a run stack naming the cluster stack plans offline against the cluster stack's file", async () => {
        const plan = await planToDir({ stack: "staging" }, { outDir: path.join(tmp, "staging"), platformOverride: { clusterStack: REF } });
        const job = plan.manifests.find((m) => m.kind === "Job")!;
        assert.equal(job.spec.template.spec.priorityClassName, "agent-rl-training");
        await assert.rejects(
            planToDir({ stack: "staging" }, { outDir: path.join(tmp, "staging2"), platformOverride: { clusterStack: "organization/agent-rl-infra/nope" } }),
            /clusterStack organization\/agent-rl-infra\/nope: no stacks\/Pulumi\.nope\.yaml to plan against/,
        );
    });
});
