/**
 * The rollout-start bench's figures (bench/rollout-start.ts): each is the median over runs of a per-run figure, with min and
 * max; the ratio is taken within a run (full over bare, the same load) before the median; a failed claim fails the target.
 * Run: npx tsx --test test/tooling/rollout-start.test.ts
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { type RolloutFigures, rolloutChecks, rolloutFiguresMarkdown } from "../../bench/rollout-start";

const claims = (...totals: number[]) => totals.map((t) => ({ ok: true, error: null, total_ms: t, post_ms: t / 4 }));

function figures(full3: number[], failed = false): RolloutFigures {
    // Three sized runs at 32 at once: bare's slowest claim 400, 800, 500 ms; full's the values given.
    const bare = [400, 800, 500];
    return {
        levels: [
            {
                concurrency: 32,
                replicas: 34,
                burst: 32,
                headroom: 2,
                bursts_per_run: 1,
                fill_s: 12,
                phases_done: ["sized"],
                runs: bare.map((b, i) => ({
                    phase: "sized" as const,
                    order: ["bare", "full"] as Array<"bare" | "full">,
                    bare: claims(100, b),
                    // A failed claim takes the place of run 0's fastest.
                    full: failed && i === 0 ? [{ ok: false, error: "SandboxError: x" }, ...claims(full3[i]!)] : claims(120, full3[i]!),
                })),
            },
        ],
        runs: 3,
        per_run: 32,
        pod_starters: 6,
        cpu_limits: "test",
        seconds: 1,
        errors: [],
        not_run: [],
    };
}

test("the targets: the median run's p99, and the median of per-run ratios (not a ratio of medians)", () => {
    // Per run: full p99 600, 880, 1100; ratios 1.5, 1.1, 2.2. Median p99 880 (met); median ratio 1.5 (missed), where
    // the ratio of the medians (880 / 500 = 1.76) would differ.
    const [p99, ratio] = rolloutChecks(figures([600, 880, 1100]));
    assert.equal(p99!.met, true);
    assert.match(p99!.detail, /^880 ms vs target <= 1000 ms/);
    assert.equal(ratio!.met, false);
    assert.match(ratio!.detail, /^1\.50 vs target <= 1\.25/);
});

test("a failed claim fails both targets, and the tables name it", () => {
    const f = figures([600, 880, 1100], true);
    assert.deepEqual(
        rolloutChecks(f).map((c) => c.met),
        [false, false],
    );
    const md = rolloutFiguresMarkdown(f).join("\n");
    assert.match(md, /\| 32 \| 2 x 34 \(32 \+ 2\) \| sized \| 3 x 2 \| 0 \/ 1 \| 100 \[100-100\] \| 500 \[400-800\] \|/);
    assert.match(md, /32 at once, sized, full: SandboxError: x/);
});

test("no level at 32: no target evaluated", () => {
    assert.deepEqual(rolloutChecks({ ...figures([1, 1, 1]), levels: [] }), []);
});
