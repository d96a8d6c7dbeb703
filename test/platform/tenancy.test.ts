// Tenancy (issue 26 point 6): a run stack deploys into a team's namespaces that the cluster stack
// made, owns nothing cluster-wide there, shares the namespaces with the team's other run stacks
// without a collision, stays inside the team's quotas and claim-lifetime bound, and refuses a
// cluster stack of another cluster (the kube-system UID). Under Pulumi's mocks; the engine test of
// the quota on a real API server is engine-tenancy.test.ts.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import {
    ALL_RECIPE_NAMES,
    applyClusterStack,
    clusterIdentityProblems,
    clusterOutputs,
    deepMerge,
    DEPLOYER_RULES,
    OPERATOR_RULES,
    parseClusterConfig,
    RECIPES,
    type ClusterOutputs,
} from "../../components/config";
import { resolvePlatform } from "../../components/platform";
import { checkClusterIdentity, checkTeamNamespaces } from "../../components/preflight/kubernetes";
import { runUnderMocks, type RecordedResource } from "../../scripts/lib/mockrun";
import { readStackFile, REPO_ROOT } from "../../scripts/lib/plan";
import { configProblems, parseWithTestImages, withTestImages } from "../helpers/config";
import { OBSERVABILITY_ON } from "../helpers/observability";

const REF = "organization/agent-rl-infra/cluster";
const CLUSTER = { target: { kind: "kubernetes", context: "gpu" }, runtimeClasses: [{ name: "gvisor", handler: "runsc" }] };
const program = () => require(path.join(REPO_ROOT, "index.ts")) as () => Promise<Record<string, unknown>>;
const KUBE_SYSTEM = "kubernetes:core/v1:Namespace::kube-system";

/** A cluster stack's outputs as its up exports them (clusterId: the kube-system UID it read). */
function outputsOf(cluster: Record<string, unknown>, clusterId = "uid-a"): ClusterOutputs {
    return { ...clusterOutputs(parseClusterConfig(deepMerge(CLUSTER, cluster))), clusterId };
}

const TEAM = { teams: [{ name: "team-a" }] };

/** A run stack's raw platform config in team-a's namespaces. */
function teamRun(over: Record<string, unknown> = {}): Record<string, unknown> {
    const base = {
        recipe: "opencode-blackbox",
        runId: "r1",
        clusterStack: REF,
        target: { kind: "kubernetes", context: "gpu", team: "team-a" },
    };
    // The test images after the override, so a Harbor recipe gets its task images too.
    return withTestImages(deepMerge(base, over)) as Record<string, unknown>;
}

/** The run stack under mocks, its cluster's kube-system UID served as `liveUid`. */
async function runTeamStack(stack: string, platform: Record<string, unknown>, outputs: ClusterOutputs, liveUid = "uid-a") {
    return runUnderMocks(program(), {
        stack,
        config: { "agent-rl-infra:platform": JSON.stringify(platform) },
        secretKeys: [],
        stackOutputs: { [REF]: { ...outputs } },
        reads: { [KUBE_SYSTEM]: { metadata: { name: "kube-system", uid: liveUid } } },
    });
}

/** The Kubernetes objects a run registers. */
const objects = (rs: readonly RecordedResource[]) => rs.filter((r) => r.custom && r.type.startsWith("kubernetes:"));
/** Kinds the API server keeps without a namespace. */
const CLUSTER_SCOPED =
    /:(Namespace|ValidatingAdmissionPolicy|ValidatingAdmissionPolicyBinding|ClusterRole|ClusterRoleBinding|PriorityClass|RuntimeClass|CustomResourceDefinition)$/;

describe("cluster stack: a team's role namespaces", () => {
    it("config: quotas per role, the claim-lifetime bound, deployers; the old one-namespace quota refused with where it went", () => {
        const c = parseClusterConfig(
            deepMerge(CLUSTER, {
                teams: [{ name: "team-a", quotas: { training: { gpus: 8 } }, deployers: [{ kind: "ServiceAccount", name: "ci", namespace: "ci" }] }],
            }),
        );
        assert.deepEqual(c.teams[0], {
            name: "team-a",
            quotas: { training: { gpus: 8 } },
            sandboxMaxLifetimeSeconds: 21600,
            deployers: [{ kind: "ServiceAccount", name: "ci", namespace: "ci" }],
        });
        assert.deepEqual(
            configProblems(() => parseClusterConfig(deepMerge(CLUSTER, { teams: [{ name: "team-a", quota: { gpus: 8 } }] }))),
            [
                "cluster teams[0].quota: a team now has four namespaces (<team>-training, -ingress, -envs, -sandboxes), each with its own quota: move it to teams[0].quotas.training (GPUs are requested there) and add quotas for the other roles as needed",
            ],
        );
        assert.match(configProblems(() => parseClusterConfig(deepMerge(CLUSTER, { teams: [{ name: "t".repeat(41) }] }))).join("\n"), /cluster teams\.0\.name/);
    });

    it("registers per team: four namespaces with their Pod Security levels, default-deny, quotas, the deployer's Role, the claim policy bound to the sandboxes namespace; exports the kube-system UID", async () => {
        const file = readStackFile("cluster");
        const r = await runUnderMocks(program(), {
            stack: "cluster",
            config: file.config,
            secretKeys: [],
            reads: { [KUBE_SYSTEM]: { metadata: { name: "kube-system", uid: "uid-of-this-cluster" } } },
        });
        assert.equal(r.error, undefined);
        assert.equal(r.outputs?.clusterId, "uid-of-this-cluster", "the cluster's identity is the kube-system UID it read");
        assert.equal(
            r.resources.some((x) => x.type === "kubernetes:core/v1:Namespace" && x.inputs.metadata?.name === "kube-system"),
            false,
            "kube-system is read, never registered",
        );
        const ns = (role: string) => r.resources.find((x) => x.type === "kubernetes:core/v1:Namespace" && x.inputs.metadata.name === `team-agents-${role}`)!;
        const levels = Object.fromEntries(
            ["training", "ingress", "envs", "sandboxes"].map((role) => [role, ns(role).inputs.metadata.labels["pod-security.kubernetes.io/enforce"]]),
        );
        assert.deepEqual(levels, { training: "baseline", ingress: "restricted", envs: "baseline", sandboxes: "restricted" });
        assert.equal(
            ns("sandboxes").inputs.metadata.labels["agentrl.dev/role"],
            "sandboxes",
            "the policy pack finds the sandboxes namespace by its role label",
        );
        const inNs = (type: string, role: string) => r.resources.filter((x) => x.type === type && x.inputs.metadata.namespace === `team-agents-${role}`);
        for (const role of ["training", "ingress", "envs", "sandboxes"]) {
            assert.deepEqual(
                inNs("kubernetes:networking.k8s.io/v1:NetworkPolicy", role)[0]?.inputs.spec,
                { podSelector: {}, policyTypes: ["Ingress"] },
                `${role}: default-deny`,
            );
            const role_ = inNs("kubernetes:rbac.authorization.k8s.io/v1:Role", role)[0];
            assert.deepEqual(
                role_.inputs.rules,
                [...DEPLOYER_RULES, ...(role === "training" ? OPERATOR_RULES : [])].map((x) => ({ ...x })),
                `${role}: the deployer's rights`,
            );
            const binding = inNs("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", role)[0];
            assert.deepEqual(binding.inputs.subjects, [{ kind: "Group", name: "team-agents-deployers", apiGroup: "rbac.authorization.k8s.io" }]);
        }
        assert.deepEqual(inNs("kubernetes:core/v1:ResourceQuota", "sandboxes")[0].inputs.spec.hard, {
            "requests.cpu": "128",
            "requests.memory": "512Gi",
            pods: "300",
        });
        assert.equal(inNs("kubernetes:core/v1:ResourceQuota", "ingress").length, 0, "no quota where none is set");
        const policy = r.resources.find((x) => x.type.endsWith(":ValidatingAdmissionPolicy"))!;
        assert.match(JSON.stringify(policy.inputs.spec.validations), /duration\('21600s'\)/);
        const binding = r.resources.find((x) => x.type.endsWith(":ValidatingAdmissionPolicyBinding"))!;
        assert.deepEqual(binding.inputs.spec.matchResources, {
            namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "team-agents-sandboxes" } },
        });
    });
});

describe("a run stack in a team's namespaces", () => {
    it("deploys into the team's four namespaces and registers nothing cluster-wide: no namespace, no admission policy, no sandbox quota of its own", async () => {
        const r = await runTeamStack("team-run", teamRun(), outputsOf(TEAM));
        assert.equal(r.error, undefined, String(r.error));
        const objs = objects(r.resources);
        assert.deepEqual(
            objs.filter((x) => CLUSTER_SCOPED.test(x.type)).map((x) => `${x.type} ${x.inputs.metadata?.name}`),
            [],
        );
        const namespaces = new Set(objs.map((x) => x.inputs.metadata?.namespace));
        assert.deepEqual(
            [...namespaces].sort(),
            ["team-a-envs", "team-a-ingress", "team-a-sandboxes", "team-a-training"].filter((n) => namespaces.has(n)).sort(),
        );
        assert.ok(namespaces.has("team-a-sandboxes") && namespaces.has("team-a-training") && namespaces.has("team-a-ingress"));
        assert.deepEqual(
            objs.filter((x) => x.type === "kubernetes:core/v1:ResourceQuota").map((x) => x.inputs.metadata.name),
            [],
            "a quota counts every run's pods in the namespace: the team's quota is the bound",
        );
        const policy = objs.find((x) => x.type === "kubernetes:networking.k8s.io/v1:NetworkPolicy" && x.inputs.metadata.namespace === "team-a-sandboxes")!;
        assert.deepEqual(Object.keys(policy.inputs.spec.podSelector.matchLabels ?? {}).sort(), [
            "agentrl.dev/run",
            "app.kubernetes.io/instance",
            "app.kubernetes.io/name",
            "app.kubernetes.io/part-of",
        ]);
    });

    it("two run stacks of one team share its namespaces and no object: every (kind, namespace, name) differs", async () => {
        const a = await runTeamStack("team-run-a", teamRun({ runId: "a1", target: { namespacePrefix: "arl-a" } }), outputsOf(TEAM));
        const b = await runTeamStack("team-run-b", teamRun({ runId: "b1", target: { namespacePrefix: "arl-b" } }), outputsOf(TEAM));
        assert.equal(a.error ?? b.error, undefined);
        const key = (x: RecordedResource) => `${x.type} ${x.inputs.metadata?.namespace}/${x.inputs.metadata?.name}`;
        const keysA = new Set(objects(a.resources).map(key));
        const shared = objects(b.resources)
            .map(key)
            .filter((k) => keysA.has(k));
        assert.deepEqual(shared, []);
        // Without the team (per-stack namespaces) the same names would collide in a shared namespace: the prefix is what keeps them apart.
        assert.ok(objects(a.resources).some((x) => x.inputs.metadata?.name === "arl-a-vllm-ingress"));
    });

    it("is refused before anything registers when its cluster is not the cluster stack's (kube-system UID), or the cluster stack exports no identity", async () => {
        const other = await runTeamStack("team-run", teamRun(), outputsOf(TEAM, "uid-a"), "uid-b");
        assert.ok(pulumi.RunError.isInstance(other.error as Error));
        assert.equal(
            (other.error as Error).message
                .split("\n")
                .find((l) => l.includes("another cluster"))
                ?.replace(/^\s*- /, ""),
            "clusterStack: 'organization/agent-rl-infra/cluster' was up'd on another cluster (its kube-system namespace has UID uid-a; this stack's target, context 'gpu', has uid-b): point target.context at the cluster stack's cluster, or clusterStack at this cluster's cluster stack",
        );
        assert.deepEqual(objects(other.resources), [], "nothing registered");
        const unknown = await runTeamStack("team-run", teamRun(), { ...outputsOf(TEAM), clusterId: undefined }, "uid-b");
        assert.match((unknown.error as Error).message, /exports no clusterId .*: run pulumi up on the cluster stack, then this one/);
        assert.deepEqual(objects(unknown.resources), []);
        // Without the team too: any run stack on a cluster stack checks its cluster.
        const { team: _, ...target } = teamRun().target as Record<string, unknown>;
        const plain = await runTeamStack("plain-run", { ...teamRun(), target }, outputsOf({}, "uid-a"), "uid-b");
        assert.match((plain.error as Error).message, /was up'd on another cluster/);
    });

    it("identity: nothing to compare offline (the plan reads no cluster); equal passes", () => {
        assert.deepEqual(clusterIdentityProblems(REF, "uid-a", undefined, "gpu"), []);
        assert.deepEqual(clusterIdentityProblems(REF, undefined, undefined, "gpu"), []);
        assert.deepEqual(clusterIdentityProblems(REF, "uid-a", "uid-a", "gpu"), []);
    });

    it("refusals: a team the cluster stack does not have, a cluster stack up'd before role namespaces, a team without clusterStack, a claim lifetime above the team's bound", () => {
        const run = (over: Record<string, unknown> = {}) => parseWithTestImages(teamRun(over), "staging");
        assert.deepEqual(
            configProblems(() => applyClusterStack(run({ target: { team: "team-b" } }), outputsOf(TEAM))),
            [
                "target.team: 'team-b' is not a team of the cluster stack 'organization/agent-rl-infra/cluster' (it has: team-a): add { name: team-b } to its teams and up it, or name one it has",
            ],
        );
        const old = { ...outputsOf(TEAM), tenants: undefined } as Partial<ClusterOutputs>;
        assert.deepEqual(
            configProblems(() => applyClusterStack(run(), old)),
            [
                "target.team: the cluster stack 'organization/agent-rl-infra/cluster' lists team 'team-a' but exports no team namespaces (it was last up'd before teams had role namespaces): run pulumi up on the cluster stack, then this one",
            ],
        );
        assert.deepEqual(
            configProblems(() => {
                const { clusterStack: _, ...alone } = teamRun();
                return parseWithTestImages(alone, "staging");
            }),
            [
                "target.team: 'team-a' names a team of a cluster stack, and this stack names none: set clusterStack to the cluster stack whose teams list 'team-a' (it makes the team's namespaces), or remove target.team to let the stack make its own namespaces",
            ],
        );
        assert.deepEqual(
            configProblems(() =>
                applyClusterStack(
                    run({ sandboxes: { maxLifetimeSeconds: 7200 } }),
                    outputsOf({ teams: [{ name: "team-a", sandboxMaxLifetimeSeconds: 3600 }] }),
                ),
            ),
            [
                "sandboxes.maxLifetimeSeconds: 7200 is above team 'team-a''s bound of 3600s (the cluster stack's admission policy would refuse every claim): lower it to at most 3600, or raise teams.team-a.sandboxMaxLifetimeSeconds in the cluster stack 'organization/agent-rl-infra/cluster'",
            ],
        );
    });

    it("a run that cannot fit the team's quota even alone is refused, naming the numbers", () => {
        const outputs = outputsOf({ teams: [{ name: "team-a", quotas: { training: { gpus: 1 }, sandboxes: { pods: 4, cpu: "2", memory: "1Gi" } } }] });
        const config = applyClusterStack(parseWithTestImages(teamRun(), "staging"), outputs);
        const problems = configProblems(() => resolvePlatform(config));
        assert.deepEqual(
            problems.filter((p) => p.startsWith("target.team")),
            [
                `target.team: team 'team-a''s training quota allows nvidia.com/gpu 1 at once, and this run alone requests 2: lower training.vllmGpus / trainerGpus / nodes, or raise teams.team-a.quotas.training in the cluster stack '${REF}'`,
                ...problems.filter((p) => /sandboxes quota allows pods 4 at once, and this run alone requests \d+: lower sandboxes/.test(p)),
                ...problems.filter((p) => /sandboxes quota allows requests\.cpu 2 at once/.test(p)),
                ...problems.filter((p) => /sandboxes quota allows requests\.memory 1Gi at once/.test(p)),
            ],
        );
        assert.equal(problems.filter((p) => p.includes("sandboxes quota")).length, 3, problems.join("\n"));
        const fits = applyClusterStack(
            parseWithTestImages(teamRun(), "staging"),
            outputsOf({ teams: [{ name: "team-a", quotas: { training: { gpus: 2 } } }] }),
        );
        assert.doesNotThrow(() => resolvePlatform(fits));
    });
});

const plural = (kind: string) => (kind.endsWith("y") ? `${kind.slice(0, -1)}ies` : `${kind}s`);

describe("the deployer's Role covers what a run stack creates", () => {
    /** Resource names (plural, lower-case) of every namespaced object a recipe's run stack registers in team mode. */
    async function namespacedKinds(recipe: string): Promise<Set<string>> {
        return namespacedKindsOf(`kinds-${recipe}`, teamRun({ recipe, runId: "k1" }));
    }

    async function namespacedKindsOf(stack: string, run: Record<string, unknown>): Promise<Set<string>> {
        const r = await runTeamStack(stack, run, outputsOf(TEAM));
        assert.equal(r.error, undefined, `${stack}: ${String(r.error)}`);
        return new Set(
            objects(r.resources)
                .filter((x) => !CLUSTER_SCOPED.test(x.type))
                .map((x) => {
                    const [, groupVersion, kind] = x.type.split(":");
                    const group = groupVersion
                        .split("/")
                        .slice(0, -1)
                        .join("/")
                        .replace(/^core$/, "");
                    return `${group === "apiextensions.k8s.io" ? `${x.inputs.apiVersion.split("/")[0]}` : group}/${plural((x.inputs.kind ?? kind).toLowerCase())}`;
                }),
        );
    }

    it("every namespaced kind of every recipe's plan is in DEPLOYER_RULES, with every verb pulumi up uses", async () => {
        const granted = new Set(
            DEPLOYER_RULES.filter((r) => r.verbs.includes("patch")).flatMap((r) => r.apiGroups.flatMap((g) => r.resources.map((res) => `${g}/${res}`))),
        );
        const used = new Set<string>();
        for (const recipe of ALL_RECIPE_NAMES) {
            for (const k of await namespacedKinds(recipe)) used.add(k);
        }
        // The optional kinds a setting brings: sandboxes.autoscale's HorizontalPodAutoscaler.
        for (const k of await namespacedKindsOf("kinds-autoscale", teamRun({ runId: "k2", ...OBSERVABILITY_ON, sandboxes: { autoscale: { enabled: true } } })))
            used.add(k);
        assert.ok(used.has("autoscaling/horizontalpodautoscalers"));
        assert.ok(used.has("monitoring.coreos.com/prometheusrules"), "the autoscaler's series needs observability on");
        const missing = [...used].filter((k) => !granted.has(k));
        assert.deepEqual(missing, [], `kinds a team run stack creates that its deployer may not: ${missing.join(", ")}`);
        // No right for a kind no recipe renders in team mode, but the optional ones a setting brings (docs/guides/platform-teams.md lists each).
        const optional = new Set(["cert-manager.io/certificates", "gateway.networking.k8s.io/httproutes"]);
        assert.deepEqual(
            [...granted].filter((k) => !used.has(k) && !optional.has(k)),
            [],
            `rights no recipe uses: ${Object.keys(RECIPES).length} recipes checked`,
        );
    });
});

describe("the preflight of a team's run stack", () => {
    const plan = (clusterId: string | undefined) =>
        resolvePlatform(applyClusterStack(parseWithTestImages(teamRun(), "staging"), { ...outputsOf(TEAM), clusterId }));

    it("cluster identity: the kube-system UID against the cluster stack's clusterId; unchecked (warn) when the clusterId could not be read", () => {
        assert.deepEqual(checkClusterIdentity(plan("uid-a"), "uid-a"), [
            { check: "Cluster identity", status: "ok", found: `kube-system UID uid-a is the cluster stack ${REF}'s clusterId`, fix: "" },
        ]);
        assert.deepEqual(checkClusterIdentity(plan("uid-a"), "uid-b"), [
            {
                check: "Cluster identity",
                status: "fail",
                found: `the cluster stack ${REF} was up'd on another cluster (its clusterId uid-a; this cluster's kube-system UID uid-b)`,
                fix: "point target.context at the cluster stack's cluster, or clusterStack at this cluster's cluster stack",
            },
        ]);
        assert.deepEqual(checkClusterIdentity(plan(undefined), "uid-b"), [
            {
                check: "Cluster identity",
                status: "warn",
                found: `this cluster's kube-system UID is uid-b; the cluster stack ${REF}'s clusterId could not be read here (unchecked; pulumi up checks it before anything registers)`,
                fix: `compare: pulumi stack output clusterId --stack ${REF}`,
            },
        ]);
    });

    it("team namespaces: each one the run places pods in must exist (the cluster stack makes them)", () => {
        const p = plan("uid-a");
        const names = ["team-a-training", "team-a-sandboxes"];
        const facts = { quotas: [], stackPods: [], claims: [] };
        assert.deepEqual(checkTeamNamespaces(p, names, { "team-a-training": facts, "team-a-sandboxes": facts }), [
            { check: "Team namespaces", status: "ok", found: "team team-a: team-a-training, team-a-sandboxes exist", fix: "" },
        ]);
        assert.deepEqual(checkTeamNamespaces(p, names, { "team-a-training": facts }), [
            {
                check: "Team namespaces",
                status: "fail",
                found: "team team-a: team-a-sandboxes missing (the run stack makes no namespace in team mode)",
                fix: `add { name: team-a } to the teams of the cluster stack ${REF} and pulumi up it`,
            },
        ]);
    });
});
