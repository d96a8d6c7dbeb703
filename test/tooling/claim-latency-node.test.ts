/**
 * The real-pod claim bench's capacity rule (bench/claim-latency-node.ts): what one sandbox pod of the plan asks
 * the scheduler for (its forwarder sidecar included), how many fit on the node, and the refusal of a level the node
 * cannot hold. Pure: the plan is rendered (scripts/lib/plan.ts), nothing runs on a node.
 * Run: npx tsx --test test/tooling/claim-latency-node.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import { highestLevel, levelProblems, podRequests, sandboxPodsThatFit, type NodeRoom } from "../../bench/claim-latency-node";
import { planToDir } from "../../scripts/lib/plan";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-claim-node-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe("the real-pod claim bench's capacity rule", () => {
    test("a sandbox pod asks for its container and its forwarder sidecar (an init container that keeps running), as the scheduler counts them", async () => {
        const { manifests } = await planToDir(
            { recipe: "opencode-blackbox", target: "kubernetes" },
            { outDir: path.join(tmp, "plan"), platformOverride: { runId: "cap", sandboxes: { cpu: "50m", memory: "256Mi" } } },
        );
        const template = manifests.find((m) => m.kind === "SandboxTemplate");
        assert.ok(template, "the plan renders a SandboxTemplate");
        const spec = template.spec.podTemplate.spec;
        assert.ok(
            (spec.initContainers ?? []).some((c: any) => c.restartPolicy === "Always"),
            "the forwarder is a sidecar (init container, restartPolicy Always)",
        );
        // 50m for the sandbox + the forwarder's 100m; 256Mi + 128Mi.
        assert.equal(Math.round(podRequests(spec, "cpu") * 1000), 150);
        assert.equal(podRequests(spec, "memory"), 384 * 1024 ** 2);
        // A plain init container (it ends before the pod runs) is not added.
        assert.equal(podRequests({ ...spec, initContainers: [{ name: "once", resources: { requests: { cpu: "1" } } }] }, "cpu"), 0.05);
    });

    const room: NodeRoom = { freeCpu: 1.95, freeMemory: 23.4 * 1024 ** 3, freePods: 109, sandboxCpu: 0.15, sandboxMemory: 384 * 1024 ** 2 };

    test("the pods that fit and what binds first: CPU requests on this 2-core node, pods or memory elsewhere", () => {
        assert.deepEqual(sandboxPodsThatFit(room), { pods: 13, bound: "CPU requests" });
        assert.deepEqual(sandboxPodsThatFit({ ...room, freeCpu: 64 }), { pods: 62, bound: "memory requests" });
        assert.deepEqual(sandboxPodsThatFit({ ...room, freeCpu: 64, freeMemory: 1024 ** 4 }), { pods: 109, bound: "pods per node" });
        assert.equal(highestLevel(13, 2), 11, "a pool of burst + headroom");
        assert.equal(highestLevel(1, 2), 0);
    });

    test("a level the node cannot hold is refused with the numbers and the way out; the ones that fit pass", () => {
        assert.deepEqual(levelProblems([1, 8, 11], 2, room), []);
        const [p, ...rest] = levelProblems([8, 12], 2, room);
        assert.deepEqual(rest, []);
        assert.equal(
            p,
            "12 at once needs a pool of 14 sandbox pods (the burst + headroom 2), but the node holds 13 (bound by CPU requests: 1.95 CPU free / 0.150 per sandbox, 23.4 GiB / 384 MiB, 109 pods free): at most 11 at once here (or a smaller AGENT_RL_NODE_SANDBOX_CPU / _MEMORY)",
        );
    });
});
