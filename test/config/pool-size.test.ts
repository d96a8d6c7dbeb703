// The warm pool sized by the run (components/config/pool-size.ts): the burst from the trainer's
// concurrency, the refill margin, the default pool, the refusal of a pool below the burst with its
// numbers, and what plan.md shows.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { poolSizeProblems, poolSizing } from "../../components/config/pool-size";

describe("pool sized by the run", () => {
    test("the named (TRL) programs: one rollout worker whatever the processes; burst = maxInflight, pool = burst + headroom", () => {
        const one = poolSizing({ maxInflight: 8, headroom: 2, rolloutsOnMainProcess: true, numProcesses: 1, nodes: 1 });
        assert.deepEqual({ workers: one.workers, burst: one.burst, margin: one.margin, size: one.size }, { workers: 1, burst: 8, margin: 2, size: 10 });
        assert.equal(one.workersWhy, "1 rollout worker (TRL's async GRPO runs rollouts on the main process only)");
        const many = poolSizing({ maxInflight: 16, headroom: 4, rolloutsOnMainProcess: true, numProcesses: 8, nodes: 2 });
        assert.deepEqual({ workers: many.workers, burst: many.burst, size: many.size }, { workers: 1, burst: 16, size: 20 });
        assert.match(many.workersWhy, /not on all 16 trainer processes/);
    });

    test("a custom program: every trainer process counted as a rollout worker", () => {
        const s = poolSizing({ maxInflight: 8, headroom: 3, rolloutsOnMainProcess: false, numProcesses: 4, nodes: 2 });
        assert.deepEqual({ workers: s.workers, burst: s.burst, size: s.size }, { workers: 8, burst: 64, size: 67 });
        assert.equal(s.workersWhy, "8 trainer processes (4 per node x 2 nodes; a custom program: each may run its own rollouts)");
        assert.equal(
            poolSizing({ maxInflight: 2, headroom: 0, rolloutsOnMainProcess: false, numProcesses: 1, nodes: 1 }).workersWhy,
            "1 trainer process (1 per node x 1 node; a custom program: each may run its own rollouts)",
        );
    });

    test("a pool below the burst is refused with the numbers; at the burst or above it passes", () => {
        const s = poolSizing({ maxInflight: 8, headroom: 3, rolloutsOnMainProcess: false, numProcesses: 4, nodes: 2 });
        assert.deepEqual(poolSizeProblems(63, s), [
            "sandboxes.poolSize: the pool holds 63 sandboxes but a burst claims 64 at once (training.maxInflight 8 x 8 trainer processes (4 per node x 2 nodes; a custom program: each may run its own rollouts)): every burst would wait for 1 cold start; raise poolSize to at least 67 (the burst + sandboxes.headroom 3), or unset it (that is the default), or lower training.maxInflight",
        ]);
        assert.match(poolSizeProblems(10, s)[0]!, /every burst would wait for 54 cold starts/);
        assert.deepEqual(poolSizeProblems(64, s), [], "the burst itself: no margin, allowed");
        assert.deepEqual(poolSizeProblems(67, s), []);
        assert.deepEqual(poolSizeProblems(500, s), []);
    });
});
