// The tests' one wait scaler (test/helpers/waits.ts): the factor from AGENT_RL_TEST_TIME_SCALE or
// the load average, once per process and passed to child processes, and the poll that uses it.
// Run: node --import tsx --test test/tooling/waits.test.ts
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { describe, test } from "node:test";
import { MAX_LOAD_SCALE, pollUntil, scaled, TIME_SCALE_ENV, timeScale, timeScaleFrom } from "../helpers/waits";

/** Runs `code` (TypeScript, the helper imported as `w`) in a fresh process with `env`; its stdout. */
function inFreshProcess(code: string, env: Record<string, string | undefined>): string {
    const helper = JSON.stringify(path.join(__dirname, "..", "helpers", "waits.ts"));
    const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", `import * as m from ${helper}; const w = m.default ?? m; ${code}`], {
        encoding: "utf8",
        env: { ...process.env, ...env },
    });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim();
}

describe("the wait factor", () => {
    test("an idle or lightly loaded machine keeps every wait as written (factor 1)", () => {
        assert.equal(timeScaleFrom(undefined, [0, 0, 0], 2), 1);
        assert.equal(timeScaleFrom(undefined, [1.5, 1.2, 1], 2), 1);
    });

    test("load 14 on 2 CPUs stretches waits 7x; the 5-minute average counts when it is the busier", () => {
        assert.equal(timeScaleFrom(undefined, [14, 9, 5], 2), 7);
        assert.equal(timeScaleFrom(undefined, [2, 10, 12], 2), 5);
    });

    test(`the load's factor stops at ${MAX_LOAD_SCALE}x (a hung process still fails in bounded time)`, () => {
        assert.equal(timeScaleFrom(undefined, [100, 100, 100], 2), MAX_LOAD_SCALE);
    });

    test(`${TIME_SCALE_ENV} wins over the load, an empty one is unset`, () => {
        assert.equal(timeScaleFrom("3", [100, 100, 100], 2), 3);
        assert.equal(timeScaleFrom("1", [14, 14, 14], 2), 1);
        assert.equal(timeScaleFrom("", [14, 14, 14], 2), 7);
    });

    test(`${TIME_SCALE_ENV} below 1 or not a number is refused, naming the variable`, () => {
        for (const bad of ["0.5", "0", "-2", "fast", "NaN"])
            assert.throws(() => timeScaleFrom(bad, [0, 0, 0], 2), new RegExp(`^Error: ${TIME_SCALE_ENV}=.*expected a number >= 1`), bad);
    });

    test("a process's factor is measured once and exported to the processes it starts", () => {
        assert.equal(inFreshProcess("console.log(w.scaled(1000), process.env.AGENT_RL_TEST_TIME_SCALE)", { [TIME_SCALE_ENV]: "2.5" }), "2500 2.5");
        const [factor, exported, again] = inFreshProcess("const a = w.timeScale(); console.log(a, process.env.AGENT_RL_TEST_TIME_SCALE, w.timeScale())", {
            [TIME_SCALE_ENV]: undefined,
        }).split(" ");
        assert.ok(Number(factor) >= 1 && Number(factor) <= MAX_LOAD_SCALE, factor);
        assert.equal(exported, factor, "written back for child processes");
        assert.equal(again, factor, "fixed for the process");
    });

    test("scaled() multiplies by this process's factor, rounding up to whole milliseconds", () => {
        assert.equal(scaled(1000), Math.ceil(1000 * timeScale()));
        assert.ok(scaled(1) >= 1);
    });

    test("in a process with factor 2.5: 90 s is 225 s for kubectl, 40 tries are 100", () => {
        assert.equal(inFreshProcess("console.log(w.scaledSeconds(90), w.scaledCount(40), w.scaledCount(3))", { [TIME_SCALE_ENV]: "2.5" }), "225 100 8");
    });
});

describe("pollUntil", () => {
    test("returns the first value that is not undefined/false, polling until then", async () => {
        let n = 0;
        const v = await pollUntil("the third try", async () => (++n >= 3 ? `try ${n}` : undefined), { budgetMs: 5000, intervalMs: 1 });
        assert.equal(v, "try 3");
        assert.equal(n, 3);
    });

    test("a value of 0 or an empty string counts as an answer (only undefined and false mean not yet)", async () => {
        assert.equal(await pollUntil("zero", async () => 0, { budgetMs: 10 }), 0);
        assert.equal(await pollUntil("empty", async () => "", { budgetMs: 10 }), "");
    });

    test("past its scaled budget it fails naming what, the budget, the factor and the last value", async () => {
        const t0 = Date.now();
        await assert.rejects(
            pollUntil("the thing ready", async () => false, { budgetMs: 50, intervalMs: 5, describe: () => "still starting" }),
            (e: Error) => {
                assert.equal(e.message, `the thing ready: not within ${scaled(50)} ms (${timeScale()}x 50 ms); last: still starting`);
                return true;
            },
        );
        assert.ok(Date.now() - t0 >= scaled(50), "waited the whole scaled budget");
    });

    test("in a process with factor 3 a 100 ms budget waits 300 ms", () => {
        const out = inFreshProcess(
            "const t0 = Date.now(); try { await w.pollUntil('x', async () => undefined, { budgetMs: 100, intervalMs: 5 }); } catch (e) { console.log(Date.now() - t0, e.message); }",
            { [TIME_SCALE_ENV]: "3" },
        );
        const [ms, ...msg] = out.split(" ");
        assert.ok(Number(ms) >= 300, out);
        assert.equal(msg.join(" "), "x: not within 300 ms (3x 100 ms); last: undefined");
    });
});
