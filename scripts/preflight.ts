/**
 * npm run preflight -- <stack | path/to/Pulumi.<stack>.yaml> [--json] [--timeout SECONDS]
 *
 * Checks every prerequisite of the live target the stack points at (a Kubernetes context or
 * a Docker host; for a cluster stack, the cluster it provisions) and prints each with what was found and the fix: a table on a terminal
 * (colour only on a TTY), JSON with --json. Exit 0 when no check fails, 1 when one does (or
 * the stack's config is invalid), 2 for bad arguments (an unknown stack lists the stacks).
 */
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import type { PlatformPlan } from "../components/platform";
import { checkHelp, runCli, UsageError } from "./lib/cli";
import { knownStacks } from "./lib/plan";
import { exitCodeOf, renderJson, renderTable, runClusterPreflight, runPreflight } from "../components/preflight";
import { loadStack, StackError } from "./lib/load-stack";

const USAGE = "usage: npm run preflight -- <stack | path/to/Pulumi.<stack>.yaml> [--json] [--timeout SECONDS]";

export { UsageError } from "./lib/cli";

export interface PreflightArgs {
    readonly stack: string;
    readonly stackFile?: string;
    readonly json: boolean;
    /** Per request to the target. */
    readonly timeoutMs: number;
}

export function parsePreflightArgs(argv: readonly string[]): PreflightArgs {
    checkHelp(argv);
    let stack: string | undefined;
    let json = false;
    let timeout: string | undefined;
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i]!;
        if (a === "--json") json = true;
        else if (a === "--timeout") {
            const v = argv[++i];
            if (v === undefined || v.startsWith("--")) throw new UsageError("--timeout needs a value in seconds");
            timeout = v;
        } else if (a.startsWith("--timeout=")) timeout = a.slice("--timeout=".length);
        else if (a.startsWith("-")) throw new UsageError(`unknown option ${a}`);
        else if (stack === undefined) stack = a;
        else throw new UsageError(`unexpected argument ${a}: give one stack`);
    }
    if (stack === undefined) throw new UsageError(`name a stack (${knownStacks().join(", ") || "none in stacks/"}) or a stack file`);
    const seconds = timeout === undefined ? 10 : Number(timeout);
    if (!/^\d+(\.\d+)?$/.test(timeout ?? "10") || seconds < 1 || seconds > 600)
        throw new UsageError(`--timeout must be a number of seconds between 1 and 600, got ${JSON.stringify(timeout)}`);
    let stackFile: string | undefined;
    if (stack.endsWith(".yaml")) {
        const m = /^Pulumi\.([A-Za-z0-9._-]+)\.yaml$/.exec(path.basename(stack));
        if (!m) throw new UsageError(`a stack file must be named Pulumi.<stack>.yaml, got ${stack}`);
        stackFile = path.resolve(stack);
        stack = m[1]!;
    }
    if (!/^[A-Za-z0-9._-]+$/.test(stack)) throw new UsageError(`stack name ${JSON.stringify(stack)} has characters a stack name cannot have`);
    return { stack, stackFile, json, timeoutMs: Math.round(seconds * 1000) };
}

/**
 * The plan with its cluster stack's clusterId as deployed (`pulumi stack output clusterId --stack
 * <ref>`, from the Pulumi backend this shell is logged in to), so the identity check compares it
 * with the cluster's kube-system UID; unchanged (the check then says it could not) when that fails.
 */
export function withDeployedClusterId(plan: PlatformPlan, timeoutMs: number): PlatformPlan {
    const ref = plan.config.clusterStack;
    if (ref === undefined || plan.config.cluster?.id !== undefined) return plan;
    const r = spawnSync("pulumi", ["stack", "output", "clusterId", "--stack", ref], {
        encoding: "utf8",
        timeout: timeoutMs,
        stdio: ["ignore", "pipe", "ignore"],
    });
    const id = r.status === 0 ? r.stdout.trim() : "";
    if (id === "") return plan;
    return { ...plan, config: { ...plan.config, cluster: { ...plan.config.cluster, id } } };
}

async function main(): Promise<number> {
    const args = parsePreflightArgs(process.argv.slice(2));
    let loaded: ReturnType<typeof loadStack>;
    try {
        loaded = loadStack(args.stack, args.stackFile);
    } catch (e) {
        if (e instanceof StackError && e.unknownStack) throw new UsageError(e.message);
        throw e;
    }
    const result =
        loaded.kind === "cluster"
            ? await runClusterPreflight(args.stack, loaded.config, { timeoutMs: args.timeoutMs })
            : await runPreflight(loaded.config, { plan: withDeployedClusterId(loaded.plan, args.timeoutMs), timeoutMs: args.timeoutMs });
    process.stdout.write(
        args.json
            ? renderJson(result.header, result.findings)
            : renderTable(result.header, result.findings, {
                  colour: process.stdout.isTTY === true && process.env.NO_COLOR === undefined,
                  width: process.stdout.columns,
              }),
    );
    return exitCodeOf(result.findings);
}

if (require.main === module) runCli("preflight", USAGE, main, (e) => (e instanceof StackError ? e.message : undefined));
