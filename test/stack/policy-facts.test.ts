/**
 * The policy pack's facts are the components' own. The pack stays standalone (policy/package.json
 * depends on @pulumi/policy alone and `pulumi preview --policy-pack policy` loads it from policy/, see
 * policy/policies.ts), so it re-declares the ports, labels and secret env names it matches on; this
 * test holds each copy equal to the value the components use, so the two cannot drift apart.
 * Run: node --import tsx --test test/stack/policy-facts.test.ts
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as pack from "../../policy/policies";
import { podLabels, ROLE_LABEL as NAMESPACE_ROLE_LABEL } from "../../components/config";
import { namespaceRoles, resolvePlatform } from "../../components/platform";
import { SANDBOX_KEY_ENV } from "../../components/sandbox";
import { SECRET_ENV, TRL_GROUP_PORT, VLLM_PORT } from "../../components/training";
import { parseWithTestImages } from "../helpers/config";

describe("the policy pack's facts equal the components'", () => {
    // A black-box run on Kubernetes: it has every pod role and namespace role the pack names.
    const config = parseWithTestImages({ recipe: "opencode-blackbox", runId: "run-001", target: { kind: "kubernetes", context: "test" } }, "test");
    const plan = resolvePlatform(config, { hfToken: true });

    it("ports: vLLM's HTTP port and TRL's weight-update group port (components/training)", () => {
        assert.equal(pack.VLLM_PORT, VLLM_PORT);
        assert.equal(pack.TRL_GROUP_PORT, TRL_GROUP_PORT);
        assert.deepEqual(pack.PRIVATE_PORTS, [VLLM_PORT, TRL_GROUP_PORT]);
    });

    it("pod labels: the role key of podLabels (components/config), and the roles the proxy and trainer pods carry", () => {
        assert.equal(podLabels("trainer", "x")[pack.ROLE_LABEL], "trainer");
        assert.equal(plan.ingress?.podLabels[pack.ROLE_LABEL], pack.PROXY_ROLE);
        assert.equal(plan.training.podLabels[pack.ROLE_LABEL], pack.TRAINER_ROLE);
    });

    it("namespace labels: the role label key and the sandboxes' role (components/config tenancy, components/platform)", () => {
        assert.equal(pack.NAMESPACE_ROLE_LABEL, NAMESPACE_ROLE_LABEL);
        assert.ok(namespaceRoles(config).includes(pack.SANDBOX_NAMESPACE_ROLE as ReturnType<typeof namespaceRoles>[number]));
        assert.equal(plan.sandboxes?.provider, "agent-sandbox");
    });

    it("secret env names: the trainer's (components/training SECRET_ENV) and the sandboxes' key (components/sandbox)", () => {
        assert.deepEqual([...pack.PLATFORM_SECRET_ENV].sort(), [...Object.values(SECRET_ENV), SANDBOX_KEY_ENV].sort());
    });
});
