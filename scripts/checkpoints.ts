/**
 * npm run checkpoints -- <stack | path/to/Pulumi.<stack>.yaml> [--manifest] [--prune <runId>]
 *
 * Prints the commands that list a stack's checkpoints (complete or why not) and copy one out of the
 * volume, with no Hub: Kubernetes through a helper pod on the claim (`--manifest` prints the pod,
 * to pipe into `kubectl apply -f -`), Docker from the host directory. `--prune <runId>` mounts the
 * volume writable and adds the removal of that run's directory (retention across runs). As every CLI
 * here (scripts/lib/cli.ts): --help exits 0, a bad argument 2, a bad stack or config 1.
 */
import YAML from "yaml";
import { checkpointAccess } from "./lib/checkpoints";
import { checkHelp, runCli, UsageError } from "./lib/cli";
import { loadRunStack, StackError } from "./lib/load-stack";

const USAGE = "usage: npm run checkpoints -- <stack | path/to/Pulumi.<stack>.yaml> [--manifest] [--prune <runId>]";

export async function main(argv: readonly string[]): Promise<number> {
    checkHelp(argv);
    let stack: string | undefined;
    let manifest = false;
    let prune: string | undefined;
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i]!;
        if (a === "--manifest") manifest = true;
        else if (a === "--prune") {
            prune = argv[++i];
            if (prune === undefined || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(prune))
                throw new UsageError("--prune needs the run id whose directory to remove");
        } else if (a.startsWith("-") || stack !== undefined) throw new UsageError(`unexpected argument ${a}`);
        else stack = a;
    }
    if (stack === undefined) throw new UsageError("name a stack or a stack file");
    const m = /(?:^|\/)Pulumi\.(.+)\.yaml$/.exec(stack);
    let plan: ReturnType<typeof loadRunStack>["plan"];
    try {
        plan = loadRunStack(m ? m[1]! : stack, m ? stack : undefined).plan;
    } catch (e) {
        if (e instanceof StackError && e.unknownStack) throw new UsageError(e.message);
        throw e;
    }
    const access = checkpointAccess(plan, { prune });
    if (manifest) {
        if (access.pod === undefined) throw new StackError("a Docker stack's checkpoints are a host directory: no helper pod (run without --manifest)", false);
        process.stdout.write(YAML.stringify(access.pod));
    } else process.stdout.write(access.script);
    return 0;
}

if (require.main === module)
    runCli(
        "checkpoints",
        USAGE,
        () => main(process.argv.slice(2)),
        (e) => (e instanceof StackError ? e.message : undefined),
    );
