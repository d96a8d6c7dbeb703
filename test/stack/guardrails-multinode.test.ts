/**
 * The policy pack over the multi-node recipe (issue 18): the trainer's pods live inside a JobSet
 * (spec.replicatedJobs[].template.spec.template), which the pack reads like any workload, so its
 * rules (GPU requests = limits, no plain secrets, prod image pinning) hold there too.
 * Run: node --import tsx --test test/stack/guardrails-multinode.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { before, describe, test } from "node:test";
import type { PolicyPackConfig } from "@pulumi/policy";
import { MULTI_NODE_RECIPE_NAMES } from "../../components/config";
import * as pack from "../../policy/policies";
import { runPolicies, type LocalResource, type LocalViolation } from "../../policy/run-local";
import { planGuarded, policyResources, tempDir } from "../helpers/guardrails-plan";

const tmp = tempDir("arl-guardrails-multinode-");
const PROD_CONFIG: PolicyPackConfig = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "policy", "config.prod.json"), "utf8"));
const SECRETS = { hfToken: "hf_SENTINELguardrails0123456789abcdef" };
const JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet";
const show = (vs: readonly LocalViolation[]) => vs.map((v) => `[${v.policy}/${v.enforcementLevel}] ${v.message}`);

let resources: LocalResource[] = [];
before(async () => {
    resources = policyResources(
        (await planGuarded({ recipe: "opencode-blackbox-32b", target: "kubernetes" }, { outDir: path.join(tmp, "base"), secrets: SECRETS })).result.resources,
    );
});
const clone = () => structuredClone(resources);
const jobSetOf = (rs: LocalResource[]) => rs.find((r) => r.type === JOBSET)!;

describe("policy pack: multi-node recipes", () => {
    for (const recipe of MULTI_NODE_RECIPE_NAMES) {
        test(`${recipe} on kubernetes: zero violations`, async () => {
            const { result } = await planGuarded({ recipe, target: "kubernetes" }, { outDir: path.join(tmp, recipe), secrets: SECRETS });
            assert.deepEqual(show(await runPolicies(policyResources(result.resources), { config: {}, stack: result.stack })), []);
        });
    }

    test("the pack sees the JobSet's pod templates: vLLM's and the trainers'", () => {
        const pods = pack.podSpecsOf(JOBSET, jobSetOf(resources).props);
        assert.deepEqual(
            pods.map((p) => p.path),
            ["spec.replicatedJobs[0].template.spec.template.spec", "spec.replicatedJobs[1].template.spec.template.spec"],
        );
        assert.deepEqual(
            pods.map((p) => p.labels["app.kubernetes.io/name"]),
            ["vllm", "trainer"],
        );
    });

    test("a trainer GPU request != limit inside the JobSet fires", async () => {
        const rs = clone();
        const c = pack.podSpecsOf(JOBSET, jobSetOf(rs).props)[1].spec.containers[0];
        c.resources.requests["nvidia.com/gpu"] = "4";
        const vs = await runPolicies(rs, { config: {}, stack: "test" });
        assert.match(
            show(vs).join("\n"),
            /gpu-requests-equal-limits.*JobSet .*train-demo-[0-9a-f]{8}.*spec\.replicatedJobs\[1\]\.template\.spec\.template\.spec\.containers\[0\] \(trainer\)/,
        );
    });

    test("prod: an unpinned trainer image inside the JobSet fires under config.prod.json", async () => {
        const rs = clone();
        for (const r of rs)
            for (const p of pack.podSpecsOf(r.type, r.props))
                for (const c of [...(p.spec.containers ?? []), ...(p.spec.initContainers ?? [])])
                    c.image = c.image.replace(/:[^/]*$/, `@sha256:${"b".repeat(64)}`);
        assert.deepEqual(show(await runPolicies(rs, { config: PROD_CONFIG, stack: "prod" })), [], "pinned everywhere: clean");
        pack.podSpecsOf(JOBSET, jobSetOf(rs).props)[1].spec.containers[0].image = "ghcr.io/example/unpinned:latest";
        const vs = await runPolicies(rs, { config: PROD_CONFIG, stack: "prod" });
        assert.match(show(vs).join("\n"), /\[prod-images-pinned-by-digest\/mandatory\] .*image 'ghcr\.io\/example\/unpinned:latest' is not pinned/);
    });
});
