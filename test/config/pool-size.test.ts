// The warm pool sized by the run (components/config/pool-size.ts): the burst from the trainer's
// concurrency, the refill the claim rate keeps in flight (burst / rolloutSeconds x refillSeconds), the
// spare, the default pool, the refusal of a pool below the burst with its numbers, the autoscaler's
// bounds and what it needs of the stack, and what the config hands down.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { poolAutoscaleBounds, poolAutoscaleProblems, poolSizeProblems, poolSizing, sizingArithmetic } from "../../components/config/pool-size";
import { configProblems, parseWithTestImages } from "../helpers/config";

/** The config's defaults: a rollout of 35 s, a refill of 10 s. */
const TIMES = { rolloutSeconds: 35, refillSeconds: 10 };

describe("pool sized by the run", () => {
    test("the named (TRL) programs: one rollout worker whatever the processes; pool = burst + refill + headroom", () => {
        const one = poolSizing({ maxInflight: 8, headroom: 2, rolloutsOnMainProcess: true, numProcesses: 1, nodes: 1, ...TIMES });
        // 8 claims per 35 s rollout = 0.23/s, x 10 s refill = 2.3 replacements on their way: 3.
        assert.deepEqual(
            { workers: one.workers, burst: one.burst, refill: one.refill, margin: one.margin, size: one.size },
            { workers: 1, burst: 8, refill: 3, margin: 2, size: 13 },
        );
        assert.equal(one.claimRate, 8 / 35);
        assert.equal(one.workersWhy, "1 rollout worker (TRL's async GRPO runs rollouts on the main process only)");
        const many = poolSizing({ maxInflight: 16, headroom: 4, rolloutsOnMainProcess: true, numProcesses: 8, nodes: 2, ...TIMES });
        assert.deepEqual({ workers: many.workers, burst: many.burst, refill: many.refill, size: many.size }, { workers: 1, burst: 16, refill: 5, size: 25 });
        assert.match(many.workersWhy, /not on all 16 trainer processes/);
    });

    test("a custom program: every trainer process counted as a rollout worker", () => {
        const s = poolSizing({ maxInflight: 8, headroom: 3, rolloutsOnMainProcess: false, numProcesses: 4, nodes: 2, ...TIMES });
        assert.deepEqual({ workers: s.workers, burst: s.burst, refill: s.refill, size: s.size }, { workers: 8, burst: 64, refill: 19, size: 86 });
        assert.equal(s.workersWhy, "8 trainer processes (4 per node x 2 nodes; a custom program: each may run its own rollouts)");
        assert.equal(
            poolSizing({ maxInflight: 2, headroom: 0, rolloutsOnMainProcess: false, numProcesses: 1, nodes: 1, ...TIMES }).workersWhy,
            "1 trainer process (1 per node x 1 node; a custom program: each may run its own rollouts)",
        );
    });

    test("the refill follows the claim rate: shorter rollouts or a slower refill need more warm sandboxes", () => {
        const at = (rolloutSeconds: number, refillSeconds: number) =>
            poolSizing({ maxInflight: 8, headroom: 2, rolloutsOnMainProcess: true, numProcesses: 1, nodes: 1, rolloutSeconds, refillSeconds });
        // A refill as long as a rollout keeps a whole burst on its way.
        assert.deepEqual([at(10, 10).refill, at(10, 10).size], [8, 18]);
        // A refill twice a rollout: two bursts' replacements on their way.
        assert.deepEqual([at(5, 10).refill, at(5, 10).size], [16, 26]);
        // Long rollouts, quick refill: one replacement on its way at most.
        assert.deepEqual([at(600, 6).refill, at(600, 6).size], [1, 11]);
        // Exact products stay exact: 7 x 27 / 3 = 63, where (7 / 3) x 27 in floats rounds up to 64.
        assert.equal(
            poolSizing({ maxInflight: 7, headroom: 0, rolloutsOnMainProcess: true, numProcesses: 1, nodes: 1, rolloutSeconds: 3, refillSeconds: 27 }).refill,
            63,
        );
    });

    test("a pool below the burst is refused with the numbers and the arithmetic; at the burst or above it passes", () => {
        const s = poolSizing({ maxInflight: 8, headroom: 3, rolloutsOnMainProcess: false, numProcesses: 4, nodes: 2, ...TIMES });
        assert.deepEqual(poolSizeProblems(63, s), [
            "sandboxes.poolSize: the pool holds 63 sandboxes but a burst claims 64 at once (training.maxInflight 8 x 8 trainer processes (4 per node x 2 nodes; a custom program: each may run its own rollouts)): every burst would wait for 1 cold start; raise poolSize to at least 86 (burst 64 + refill 19 (claim rate 64 / 35 s sandboxes.rolloutSeconds = 1.83/s, x 10 s sandboxes.refillSeconds, rounded up) + 3 sandboxes.headroom = 86), or unset it (that is the default), or lower training.maxInflight",
        ]);
        assert.match(poolSizeProblems(10, s)[0]!, /every burst would wait for 54 cold starts/);
        assert.deepEqual(poolSizeProblems(64, s), [], "the burst itself: no refill or spare, allowed");
        assert.deepEqual(poolSizeProblems(86, s), []);
        assert.deepEqual(poolSizeProblems(500, s), []);
        assert.equal(
            sizingArithmetic(poolSizing({ maxInflight: 8, headroom: 2, rolloutsOnMainProcess: true, numProcesses: 1, nodes: 1, ...TIMES })),
            "burst 8 + refill 3 (claim rate 8 / 35 s sandboxes.rolloutSeconds = 0.23/s, x 10 s sandboxes.refillSeconds, rounded up) + 2 sandboxes.headroom = 13",
        );
    });
});

describe("the pool's autoscaler (sandboxes.autoscale)", () => {
    test("bounds: min the pool's size, max the configured one or twice the pool", () => {
        assert.deepEqual(poolAutoscaleBounds(13, undefined), { min: 13, max: 26 });
        assert.deepEqual(poolAutoscaleBounds(13, 40), { min: 13, max: 40 });
    });

    test("off: nothing asked of the stack; on: every missing piece reported at once, each with its field and fix", () => {
        const ok = { enabled: true, maxPoolSize: undefined, poolSize: 13, runsWarmPool: true, observability: true };
        assert.deepEqual(poolAutoscaleProblems({ ...ok, enabled: false, runsWarmPool: false, observability: false, maxPoolSize: 1 }), []);
        assert.deepEqual(poolAutoscaleProblems(ok), []);
        assert.deepEqual(poolAutoscaleProblems({ ...ok, maxPoolSize: 13 }), [], "max = min: a fixed pool, allowed");
        assert.deepEqual(poolAutoscaleProblems({ ...ok, runsWarmPool: false, observability: false, maxPoolSize: 12 }), [
            "sandboxes.autoscale.enabled: the autoscaler scales an agent-sandbox SandboxWarmPool, and this stack runs none: set sandboxes.provider to agent-sandbox on a Kubernetes target, or turn autoscale off",
            "sandboxes.autoscale.enabled: the autoscaler reads the warm pool's wanted size, a recording rule of the stack's PrometheusRule, which only observability.enabled renders: set observability.enabled to true, or turn autoscale off",
            "sandboxes.autoscale.maxPoolSize: 12 is below the pool's size 13, the autoscaler's minimum: raise maxPoolSize to at least 13, or unset it (twice the pool's size, 26)",
        ]);
    });
});

describe("the config hands the sizing down", () => {
    const k8s = { recipe: "opencode-blackbox", runId: "r1", target: { kind: "kubernetes", context: "c" } };

    test("defaults: rolloutSeconds 35, refillSeconds 10, autoscale off; the pool is the rule's size", () => {
        const c = parseWithTestImages(k8s, "test");
        assert.equal(c.sandboxes.rolloutSeconds, 35);
        assert.equal(c.sandboxes.refillSeconds, 10);
        assert.deepEqual(c.sandboxes.autoscale, { enabled: false });
        assert.equal(c.sandboxes.poolSize, c.sandboxes.sizing.size);
        assert.equal(c.sandboxes.sizing.refill, Math.ceil((c.sandboxes.sizing.burst * 10) / 35));
    });

    test("the stack's rollout and refill times size its pool", () => {
        const c = parseWithTestImages({ ...k8s, training: { maxInflight: 8 }, sandboxes: { rolloutSeconds: 20, refillSeconds: 20, headroom: 1 } }, "test");
        assert.deepEqual([c.sandboxes.sizing.refill, c.sandboxes.poolSize], [8, 17]);
    });

    test("autoscale on without observability is refused, with the field and the fix", () => {
        const problems = configProblems(() => parseWithTestImages({ ...k8s, sandboxes: { autoscale: { enabled: true } } }, "test"));
        assert.ok(
            problems.some((p) => p.startsWith("sandboxes.autoscale.enabled: the autoscaler reads the warm pool's wanted size")),
            problems.join("\n"),
        );
    });
});
