// npm run bench  (= tsx bench/run.ts)  [--only ingress|scaling|engine|env-session|claim-latency|claim-latency-node|rollout-start] [--quick] [--no-diagnose] [--out FILE] [--levels 1,8,32,128] [--runs N]
// Runs the benchmarks of issue "Benchmarks" and writes bench/results.md: the machine, the date, and every figure as a
// ratio measured side by side in this one run. Not part of `npm test`. Bounded: a hard deadline (4 min 45 s) stops
// everything; every child (wrk, nginx, stub, plan children) is stopped on success, failure, SIGINT and SIGTERM.
// `--only engine` (the real Pulumi engine on the simulated cluster, bench/engine.ts) takes far longer (its own limit,
// 50 min) and replaces only its section of bench/results.md; a default run keeps the last engine section. `--only claim-latency`
// (claims at 1, 8, 32 and 128 at once on the simulated cluster, bench/claim-latency.ts) has its own limit too (20 min), and
// `--only claim-latency-node` (the same on real pods on the node fixture, bench/claim-latency-node.ts; default 1 and 8) 30 min.
// `--only rollout-start` (claim to the first model call with per-rollout keys beside a bare pool, 1, 8 and 32 at once,
// `--runs` runs each, bench/rollout-start.ts) 45 min.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { runClaimLatencyBench } from "./claim-latency";
import { runClaimLatencyNodeBench } from "./claim-latency-node";
import { runEngineBench } from "./engine";
import { runEnvSessionBench } from "./env-session";
import { runIngressBench } from "./ingress";
import { BENCH_DIR, beginShutdown, checkLine, cleanupAll, fmt, machineBusySeconds, machineInfo, selfAndReapedSeconds, type TargetCheck } from "./lib";
import { runRolloutStartBench } from "./rollout-start";
import { runScalingBench } from "./scaling";

const HARD_LIMIT_MS = 285_000;
const ENGINE_HARD_LIMIT_MS = 50 * 60_000;
const CLAIM_HARD_LIMIT_MS = 20 * 60_000;
const CLAIM_NODE_HARD_LIMIT_MS = 30 * 60_000;
const ROLLOUT_HARD_LIMIT_MS = 45 * 60_000;
const ENGINE_SECTION = "## 4. Engine timings";

/** The engine section of a results file (from its heading to the next "## " heading or the end), or undefined. */
function engineSection(text: string): string | undefined {
    const start = text.indexOf(`\n${ENGINE_SECTION}`);
    if (start < 0) return undefined;
    const next = text.indexOf("\n## ", start + 1);
    return text.slice(start + 1, next < 0 ? undefined : next + 1).trimEnd();
}

interface Args {
    only: "ingress" | "scaling" | "engine" | "env-session" | "claim-latency" | "claim-latency-node" | "rollout-start" | undefined;
    quick: boolean;
    diagnose: boolean;
    out: string | undefined;
    /** Claims at once for the claim-latency bench. */
    levels: number[] | undefined;
    /** Runs per level, phase and case for the rollout-start bench. */
    runs: number | undefined;
}

function parseArgs(argv: readonly string[]): Args {
    const a: Args = { only: undefined, quick: false, diagnose: true, out: undefined, levels: undefined, runs: undefined };
    const onlyOptions = ["ingress", "scaling", "engine", "env-session", "claim-latency", "claim-latency-node", "rollout-start"] as const;
    for (let i = 0; i < argv.length; i++) {
        const x = argv[i];
        if (x === "--only") {
            const v = argv[++i];
            const only = onlyOptions.find((o) => o === v);
            if (only === undefined) throw new Error(`--only takes one of ${onlyOptions.join(", ")}`);
            a.only = only;
        } else if (x === "--quick") a.quick = true;
        else if (x === "--no-diagnose") a.diagnose = false;
        else if (x === "--out") {
            const v = argv[++i];
            if (v === undefined) throw new Error("--out needs a file");
            a.out = v;
        } else if (x === "--levels") {
            const v = argv[++i] ?? "";
            const levels = v.split(",").map(Number);
            if (v === "" || levels.some((n) => !Number.isInteger(n) || n < 1 || n > 1000))
                throw new Error(`--levels ${v}: expected claims at once, e.g. 1,8,32,128`);
            a.levels = levels;
        } else if (x === "--runs") {
            const v = argv[++i] ?? "";
            const runs = Number(v);
            if (!Number.isInteger(runs) || runs < 1 || runs > 20) throw new Error(`--runs ${v}: expected runs per case, 1 to 20`);
            a.runs = runs;
        } else
            throw new Error(
                `unknown argument ${x}\nusage: npm run bench -- [--only ${onlyOptions.join("|")}] [--quick] [--no-diagnose] [--out FILE] [--levels 1,8,32,128] [--runs N]`,
            );
    }
    return a;
}

let exiting = false;
async function shutdown(code: number, why: string): Promise<never> {
    if (!exiting) {
        exiting = true;
        beginShutdown();
        if (why !== "") process.stderr.write(`bench: ${why}; stopping every process it started\n`);
        await cleanupAll();
    }
    process.exit(code);
}

async function main(): Promise<number> {
    const args = parseArgs(process.argv.slice(2));
    const started = Date.now();
    const limit =
        args.only === "engine"
            ? ENGINE_HARD_LIMIT_MS
            : args.only === "claim-latency"
              ? CLAIM_HARD_LIMIT_MS
              : args.only === "claim-latency-node"
                ? CLAIM_NODE_HARD_LIMIT_MS
                : args.only === "rollout-start"
                  ? ROLLOUT_HARD_LIMIT_MS
                  : HARD_LIMIT_MS;
    const deadline = started + limit - 10_000;
    const watchdog = setTimeout(() => void shutdown(1, `hard limit of ${limit / 1000} s reached`), limit);
    const log = (line: string) => process.stderr.write(`[${fmt((Date.now() - started) / 1000, 1)} s] ${line}\n`);
    const machine = machineInfo();
    const busy0 = machineBusySeconds();
    const own0 = selfAndReapedSeconds();
    const load0 = os.loadavg()[0]!;
    const date = new Date();
    log(`machine: ${machine.cpuModel}, ${machine.cores} cores, ${fmt(machine.memoryGiB, 1)} GiB, nginx ${machine.nginx}, ${machine.wrk}, node ${machine.node}`);

    if (args.only === "engine") {
        const r = await runEngineBench({ deadline, log, quick: args.quick });
        clearTimeout(watchdog);
        const section = [r.markdown.trimEnd(), "", "Targets:", "", ...r.checks.map(checkLine)].join("\n");
        const out = args.out ?? (args.quick ? path.join(os.tmpdir(), "bench-results.md") : path.join(BENCH_DIR, "results.md"));
        const old = fs.existsSync(out) ? fs.readFileSync(out, "utf8") : "# Benchmarks\n";
        const prev = engineSection(old);
        const text = prev !== undefined ? old.replace(prev, () => section) : `${old.trimEnd()}\n\n${section}\n`;
        fs.writeFileSync(out, text.endsWith("\n") ? text : `${text}\n`);
        log(`wrote the engine section of ${out}`);
        for (const c of r.checks) process.stdout.write(`${checkLine(c)}\n`);
        return r.checks.every((c) => c.met) ? 0 : 1;
    }

    const sections: string[] = [];
    const checks: TargetCheck[] = [];
    let failed = false;
    /** Runs one benchmark; a failure is reported under its heading, and every process it started is stopped. */
    const section = async (name: string, heading: string, bench: () => Promise<{ markdown: string; checks: TargetCheck[] }>) => {
        try {
            const r = await bench();
            sections.push(r.markdown);
            checks.push(...r.checks);
        } catch (e) {
            failed = true;
            log(`${name} benchmark failed: ${(e as Error).stack ?? String(e)}`);
            sections.push(`${heading}\n\nFAILED: ${(e as Error).message}\n`);
            await cleanupAll();
        }
    };
    if (args.only === undefined || args.only === "ingress") {
        await section("ingress", "## 1-2. Ingress", () =>
            runIngressBench({
                // The scaling figure needs ~80 s (36 plan children of ~2 s each).
                deadline: args.only === "ingress" ? deadline : deadline - 85_000,
                log,
                diagnose: args.diagnose,
                ...(args.quick ? { roundSeconds: 2, rounds: 1, metricsRounds: 1, streams: 40 } : {}),
            }),
        );
    }
    if ((args.only === undefined || args.only === "scaling") && !exiting) {
        await section("scaling", "## 3. Program scaling", () => runScalingBench({ deadline, log, ...(args.quick ? { repeats: 1 } : {}) }));
    }
    if (args.only === "env-session") {
        await section("env-session", "## 5. Env sessions", () =>
            runEnvSessionBench({ deadline, log, ...(args.quick ? { rounds: 2, steps: 50, sessions: 20 } : {}) }),
        );
    }
    if (args.only === "claim-latency") {
        await section("claim-latency", "## 6. Sandbox claims under load", () =>
            runClaimLatencyBench({ deadline, log, ...(args.quick ? { levels: [1, 8], samples: 8 } : {}), ...(args.levels ? { levels: args.levels } : {}) }),
        );
    }
    if (args.only === "claim-latency-node") {
        await section("claim-latency-node", "## 6b. Sandbox claims under load: real pod starts", () =>
            runClaimLatencyNodeBench({ deadline, log, ...(args.quick ? { levels: [1], samples: 4 } : {}), ...(args.levels ? { levels: args.levels } : {}) }),
        );
    }
    if (args.only === "rollout-start") {
        await section("rollout-start", "### A rollout's start (issue 58)", () =>
            runRolloutStartBench({
                deadline,
                log,
                ...(args.quick ? { levels: [1, 8], runs: 2, perRun: 4 } : {}),
                ...(args.levels ? { levels: args.levels } : {}),
                ...(args.runs ? { runs: args.runs } : {}),
            }),
        );
    }
    if (exiting) return 1; // interrupted: shutdown() is stopping everything; keep the previous results file
    await cleanupAll();
    clearTimeout(watchdog);

    const elapsed = (Date.now() - started) / 1000;
    // Everything this run started has exited and been reaped: its CPU is in this process's cutime/cstime.
    const foreignCores = Math.max(0, (machineBusySeconds() - busy0 - (selfAndReapedSeconds() - own0)) / elapsed);
    const load1 = os.loadavg()[0]!;
    const head = [
        "# Benchmarks",
        "",
        `Generated by \`npm run bench\`${process.argv.length > 2 ? ` (\`${process.argv.slice(2).join(" ")}\`)` : ""} on ${date.toISOString()} in ${fmt(elapsed, 0)} s. ` +
            "Every figure is a ratio or difference measured side by side in this one run (direct and proxied rounds alternate); absolute numbers move with the machine, the ratios are the result.",
        "",
        "Machine:",
        "",
        `- CPU: ${machine.cpuModel}, ${machine.cores} cores (${os.arch()}); memory ${fmt(machine.memoryGiB, 1)} GiB; ${machine.kernel}`,
        `- nginx ${machine.nginx}; ${machine.wrk}; node ${machine.node}; ${machine.openssl}`,
        "- All traffic on 127.0.0.1; load generator, proxy and stub upstream share the cores.",
        `- Other load during the run: processes this run did not start kept ${fmt(foreignCores)} of ${machine.cores} cores busy on average ` +
            `(1-min load average ${fmt(load0)} at the start, ${fmt(load1)} at the end)${foreignCores > 0.2 ? ": **the machine was shared; figures are disturbed, rerun on a quiet machine for final numbers**" : ""}.`,
        "",
        "## Summary of targets",
        "",
        ...(checks.length > 0 ? checks.map(checkLine) : ["- (no target evaluated)"]),
        "",
    ];
    const out = args.out ?? (args.quick || args.only !== undefined ? path.join(os.tmpdir(), "bench-results.md") : path.join(BENCH_DIR, "results.md"));
    // The engine section comes from `--only engine` runs: carried over, not rerun.
    const keptEngine = fs.existsSync(out) ? engineSection(fs.readFileSync(out, "utf8")) : undefined;
    // The GPU figures come from the lent GPU machine (bench/gpu/*.sh), never from this run: carried over.
    const gpu = fs.readFileSync(path.join(BENCH_DIR, "gpu", "results.md"), "utf8").trimEnd();
    const text = `${[...head, ...sections, gpu, "", ...(keptEngine ? [keptEngine] : [])].join("\n").trimEnd()}\n`;
    fs.writeFileSync(out, text);
    log(`wrote ${out} (${fmt(elapsed, 0)} s; other load ${fmt(foreignCores)} cores on average)`);
    for (const c of checks) process.stdout.write(`${checkLine(c)}\n`);
    return failed ? 1 : 0;
}

process.on("SIGINT", () => void shutdown(130, "SIGINT"));
process.on("SIGTERM", () => void shutdown(143, "SIGTERM"));
process.on("SIGHUP", () => void shutdown(129, "SIGHUP"));
process.on("uncaughtException", (e) => void shutdown(1, `uncaught: ${e.stack ?? String(e)}`));
process.on("unhandledRejection", (e) => void shutdown(1, `unhandled rejection: ${(e as Error)?.stack ?? String(e)}`));

main().then(
    (code) => shutdown(code, ""),
    (e: unknown) => shutdown(1, (e as Error).message ?? String(e)),
);
