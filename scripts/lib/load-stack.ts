/**
 * The preflight's stack loading, for the CLI (scripts/preflight.ts): a stack file read and
 * resolved the way `npm run plan` reads it. The checks themselves are a library module,
 * components/preflight.
 */
import {
    applyClusterStack,
    checkRegistryAuth,
    REGISTRY_AUTH_KEY,
    CONFIG_NAMESPACE,
    ConfigError,
    type ClusterOutputs,
    parsePlatformConfig,
    type PlatformConfig,
} from "../../components/config";
import { resolvePlatform, type PlatformPlan } from "../../components/platform";
import { clusterStackOutputs, PlanError, readStackFile } from "./plan";

/** A stack that cannot be checked: its file is missing or unreadable, or its config is invalid. */
export class StackError extends Error {
    constructor(
        message: string,
        /** The stack does not exist (a bad argument) rather than a bad config. */
        readonly unknownStack: boolean,
    ) {
        super(message);
    }
}

/** Loads and resolves stacks/Pulumi.<stack>.yaml (or `file`) the way `npm run plan` does. */
export function loadStack(stack: string, file?: string): { config: PlatformConfig; plan: PlatformPlan } {
    let cfg: ReturnType<typeof readStackFile>;
    try {
        cfg = readStackFile(stack, file);
    } catch (e) {
        if (e instanceof PlanError)
            throw new StackError(e.message.replace(/; or plan a recipe with --recipe <name>$/, ""), e.message.startsWith("no stack file"));
        throw e;
    }
    const raw = cfg.config[`${CONFIG_NAMESPACE}:platform`];
    if (raw === undefined) {
        const cluster = cfg.config[`${CONFIG_NAMESPACE}:cluster`] !== undefined;
        throw new StackError(
            `stack ${stack} has no ${CONFIG_NAMESPACE}:platform config${cluster ? ": it is a cluster stack; the preflight checks a run stack's target (run it for a run stack once the cluster stack is up)" : ""}`,
            false,
        );
    }
    try {
        const parsed = parsePlatformConfig(JSON.parse(raw), stack);
        // A run stack on a cluster stack: its names filled in from the cluster stack's file, as the plan does.
        const clusterOutputs = parsed.clusterStack !== undefined ? clusterStackOutputs(cfg)[parsed.clusterStack] : undefined;
        const config = applyClusterStack(parsed, clusterOutputs as Partial<ClusterOutputs> | undefined);
        return {
            config,
            plan: resolvePlatform(config, {
                hfToken: cfg.config[`${CONFIG_NAMESPACE}:hfToken`] !== undefined,
                registryAuth: registriesOf(cfg.config[`${CONFIG_NAMESPACE}:${REGISTRY_AUTH_KEY}`]),
            }),
        };
    } catch (e) {
        if (e instanceof ConfigError) throw new StackError(`stack ${stack}'s config is invalid (npm run plan -- ${stack} says the same):\n${e.message}`, false);
        if (e instanceof PlanError) throw new StackError(`stack ${stack}: ${e.message}`, false);
        throw e;
    }
}

/** The registries a registryAuth value names (undefined when unset: no registry credentials). */
function registriesOf(value: string | undefined): readonly string[] | undefined {
    return value === undefined ? undefined : checkRegistryAuth(value).registries;
}
