/**
 * npm run checkpoints -- <stack | path/to/Pulumi.<stack>.yaml> [--manifest] [--prune <runId>]
 *
 * Prints the commands that list a stack's checkpoints (complete or why not) and copy one out of the
 * volume, with no Hub: Kubernetes through a helper pod on the claim (`--manifest` prints the pod,
 * to pipe into `kubectl apply -f -`), Docker from the host directory. `--prune <runId>` mounts the
 * volume writable and adds the removal of that run's directory (retention across runs). Exit 1 for a
 * bad stack or config, 2 for bad arguments.
 */
import YAML from "yaml";
import { loadRunStack, StackError } from "./lib/load-stack";
import { checkpointAccess } from "./lib/checkpoints";

const USAGE = "usage: npm run checkpoints -- <stack | path/to/Pulumi.<stack>.yaml> [--manifest] [--prune <runId>]";

export function main(argv: readonly string[]): number {
    let stack: string | undefined;
    let manifest = false;
    let prune: string | undefined;
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i]!;
        if (a === "--manifest") manifest = true;
        else if (a === "--prune") {
            prune = argv[++i];
            if (prune === undefined || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(prune)) {
                process.stderr.write(`--prune needs the run id whose directory to remove\n${USAGE}\n`);
                return 2;
            }
        } else if (a.startsWith("-") || stack !== undefined) {
            process.stderr.write(`unexpected argument ${a}\n${USAGE}\n`);
            return 2;
        } else stack = a;
    }
    if (stack === undefined) {
        process.stderr.write(`${USAGE}\n`);
        return 2;
    }
    const m = /(?:^|\/)Pulumi\.(.+)\.yaml$/.exec(stack);
    try {
        const { plan } = loadRunStack(m ? m[1]! : stack, m ? stack : undefined);
        const access = checkpointAccess(plan, { prune });
        if (manifest) {
            if (access.pod === undefined) {
                process.stderr.write("a Docker stack's checkpoints are a host directory: no helper pod (run without --manifest)\n");
                return 1;
            }
            process.stdout.write(YAML.stringify(access.pod));
        } else process.stdout.write(access.script);
        return 0;
    } catch (e) {
        if (e instanceof StackError || e instanceof Error) {
            process.stderr.write(`${e.message}\n`);
            return 1;
        }
        throw e;
    }
}

if (require.main === module) process.exit(main(process.argv.slice(2)));
