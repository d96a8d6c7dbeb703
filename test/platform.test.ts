// The Platform exposes its main children and typed outputs (issue 17), so a program that
// builds it can reach the Job, the proxy, the pool and each env server without digging.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as pulumi from "@pulumi/pulumi";
import { platformNames } from "../components/config";
import { Platform, resolvePlatform } from "../components/platform";
import { runUnderMocks } from "../scripts/lib/mockrun";
import { parseWithTestImages } from "./helpers/config";

describe("Platform", () => {
    it("exposes the training node, the ingress, the pool and the env servers, and typed outputs", async () => {
        const config = parseWithTestImages({ recipe: "opencode-blackbox", runId: "r1", target: { kind: "kubernetes", context: "test" } }, "staging");
        let platform: Platform | undefined;
        const run = await runUnderMocks(
            async () => {
                platform = new Platform("agentrl", { plan: resolvePlatform(config), secrets: { ingressKeys: {} } });
                return { ...platform.outputs };
            },
            { stack: "staging" },
        );
        assert.equal(run.error, undefined);
        const p = platform!;
        assert.equal(await new Promise((r) => p.training.jobName.apply(r)), (run.outputs as any).trainingJob);
        assert.ok(p.training.trainer instanceof pulumi.CustomResource);
        assert.ok(p.ingress, "black box: the ingress");
        assert.ok(p.sandboxes, "black box: the pool");
        assert.deepEqual(
            Object.keys(p.envs),
            config.envs.map((e) => e.name),
        );
        assert.equal(p.outputs.runId, "r1");
        assert.equal(p.outputs.target, "kubernetes");
        assert.equal((run.outputs as any).claims.checkpoints.name, platformNames(config).training.checkpoints);
    });
});
