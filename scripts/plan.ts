/**
 * npm run plan -- <stack> [--out DIR]
 * npm run plan -- path/to/Pulumi.<stack>.yaml [--out DIR]   (a stack file outside stacks/)
 * npm run plan -- --recipe <name> [--target kubernetes|docker] [--out DIR]
 *
 * Runs the stack program under Pulumi's mock runtime and writes manifests/, docker/ and
 * plan.md. A cluster stack is planned as one. Exit codes as every CLI here (scripts/lib/cli.ts):
 * 0 planned (or --help), 1 the config is invalid (a message naming the field and the fix, no
 * trace), 2 bad arguments (an unknown stack lists the stacks).
 */
import * as path from "node:path";
import { ALL_RECIPE_NAMES, RECIPES } from "../components/config";
import { checkHelp, runCli, UsageError } from "./lib/cli";
import { isClusterStack, knownStacks, PlanError, planClusterToDir, planToDir, type PlanSource, UnknownStackError } from "./lib/plan";

const USAGE =
    "usage: npm run plan -- <stack | path/to/Pulumi.<stack>.yaml> [--out DIR]\n       npm run plan -- --recipe <name> [--target kubernetes|docker] [--out DIR]";

/** The usage with what there is to plan: every recipe with its one line, and the stacks found in stacks/. */
export function planUsage(recipes: ReadonlyArray<{ name: string; description: string }>, stacks: readonly string[]): string {
    const width = Math.max(0, ...recipes.map((r) => r.name.length));
    return [
        USAGE,
        "",
        "recipes (--recipe <name>):",
        ...recipes.map((r) => `  ${r.name.padEnd(width)}  ${r.description}`),
        "",
        stacks.length > 0
            ? `stacks found in stacks/: ${stacks.join(", ")}`
            : "stacks found in stacks/: none (write stacks/Pulumi.<stack>.yaml, or plan a file by its path)",
    ].join("\n");
}

export function parsePlanArgs(argv: readonly string[]): { source: PlanSource; outDir: string } {
    checkHelp(argv);
    let stack: string | undefined;
    let recipe: string | undefined;
    let target: string | undefined;
    let out: string | undefined;
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const value = () => {
            const v = argv[++i];
            if (v === undefined || v.startsWith("--")) throw new UsageError(`${a} needs a value`);
            return v;
        };
        if (a === "--recipe") recipe = value();
        else if (a === "--target") target = value();
        else if (a === "--out") out = value();
        else if (a.startsWith("-")) throw new UsageError(`unknown option ${a}`);
        else if (stack === undefined) stack = a;
        else throw new UsageError(`unexpected argument ${a}`);
    }
    if (recipe !== undefined && stack !== undefined) throw new UsageError("give a stack or --recipe, not both");
    if (target !== undefined && recipe === undefined) throw new UsageError("--target applies to --recipe; a stack's target is in its stack file");
    if (target !== undefined && target !== "kubernetes" && target !== "docker") throw new UsageError(`--target must be kubernetes or docker, got ${target}`);
    if (recipe !== undefined && !(ALL_RECIPE_NAMES as string[]).includes(recipe))
        throw new UsageError(`unknown recipe ${recipe}: use one of ${ALL_RECIPE_NAMES.join(", ")}`);
    if (recipe === undefined && stack === undefined) throw new UsageError(`name a stack (${knownStacks().join(", ") || "none in stacks/"}) or --recipe <name>`);
    let stackFile: string | undefined;
    if (stack?.endsWith(".yaml")) {
        const m = /^Pulumi\.([A-Za-z0-9._-]+)\.yaml$/.exec(path.basename(stack));
        if (!m) throw new UsageError(`a stack file must be named Pulumi.<stack>.yaml, got ${stack}`);
        stackFile = path.resolve(stack);
        stack = m[1];
    }
    if (stack !== undefined && !/^[A-Za-z0-9._-]+$/.test(stack))
        throw new UsageError(`stack name ${JSON.stringify(stack)} has characters a stack name cannot have`);
    const source: PlanSource = recipe !== undefined ? { recipe, target: (target ?? "kubernetes") as "kubernetes" | "docker" } : { stack: stack!, stackFile };
    const defaultOut =
        "stack" in source ? path.join("out", source.stack) : path.join("out", `${source.recipe}-${source.target === "kubernetes" ? "k8s" : "docker"}`);
    return { source, outDir: path.resolve(out ?? defaultOut) };
}

async function main(): Promise<number> {
    const args = parsePlanArgs(process.argv.slice(2));
    const rel = path.relative(process.cwd(), args.outDir) || ".";
    try {
        if ("stack" in args.source && isClusterStack(args.source)) {
            const cluster = await planClusterToDir(args.source, { outDir: args.outDir });
            process.stdout.write(
                `planned cluster stack ${cluster.stack}: ${cluster.resources.length} resources, ${cluster.manifests.length} Kubernetes objects -> ${rel}/ (plan.md)\n`,
            );
            return 0;
        }
        const result = await planToDir(args.source, { outDir: args.outDir });
        process.stdout.write(
            `planned ${result.stack}: ${result.resources.length} resources, ${result.manifests.length} Kubernetes objects -> ${rel}/ (plan.md)\n`,
        );
        return 0;
    } catch (e) {
        // An unknown stack is a bad argument, as in the preflight.
        if (e instanceof UnknownStackError) throw new UsageError(e.message);
        throw e;
    }
}

if (require.main === module)
    runCli(
        "plan",
        planUsage(
            ALL_RECIPE_NAMES.map((name) => ({ name, description: RECIPES[name].description })),
            knownStacks(),
        ),
        main,
        (e) => (e instanceof PlanError ? `plan failed: ${e.message}` : undefined),
    );
