/**
 * The preflight's stack loading, for the CLI (scripts/preflight.ts): a stack file read and
 * resolved the way `npm run plan` reads it. The checks themselves are a library module,
 * components/preflight.
 */
import {
    applyClusterStack,
    checkRegistryAuth,
    REGISTRY_AUTH_KEY,
    type ClusterConfig,
    type ClusterOutputs,
    CONFIG_NAMESPACE,
    ConfigError,
    missingPlatformMessage,
    parseClusterConfig,
    parsePlatformConfig,
    plainSecretProblems,
    type PlatformConfig,
    stackObject,
    unknownStackKeys,
} from "../../components/config";
import { resolvePlatform, type PlatformPlan } from "../../components/platform";
import { clusterStackOutputs, PlanError, readStackFile, UnknownStackError } from "./plan";

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

/** What the preflight checks: a run stack's resolved config and plan, or a cluster stack's config. */
export type LoadedStack =
    | { readonly kind: "run"; readonly config: PlatformConfig; readonly plan: PlatformPlan }
    | { readonly kind: "cluster"; readonly config: ClusterConfig };

/** Loads and resolves stacks/Pulumi.<stack>.yaml (or `file`) the way `npm run plan` and the program do. */
export function loadStack(stack: string, file?: string): LoadedStack {
    let cfg: ReturnType<typeof readStackFile>;
    try {
        cfg = readStackFile(stack, file);
    } catch (e) {
        if (e instanceof PlanError) throw new StackError(e.message.replace(/; or plan a recipe with --recipe <name>$/, ""), e instanceof UnknownStackError);
        throw e;
    }
    const where = cfg.file ?? stack;
    const invalid = (problems: readonly string[]) =>
        new StackError(`stack ${stack}'s config is invalid (npm run plan -- ${stack} says the same):\n${new ConfigError(problems).message}`, false);
    const problems = [...unknownStackKeys(Object.keys(cfg.config)), ...plainSecretProblems(Object.keys(cfg.config), (k) => cfg.secretKeys.includes(k), where)];
    const clusterRaw = cfg.config[`${CONFIG_NAMESPACE}:cluster`];
    const raw = cfg.config[`${CONFIG_NAMESPACE}:platform`];
    if (raw === undefined && clusterRaw === undefined) throw new StackError(missingPlatformMessage(where, Object.keys(cfg.config)), false);
    const obj = stackObject(clusterRaw !== undefined ? "cluster" : "platform", clusterRaw ?? raw, where);
    if ("problem" in obj) throw invalid([...problems, obj.problem]);
    // Every problem at once: keys that are no setting (a misspelled secret) and the config's own.
    const parse = <T>(f: () => T): T => {
        let value: T | undefined;
        try {
            value = f();
        } catch (e) {
            if (e instanceof ConfigError) throw invalid([...problems, ...e.problems]);
            if (e instanceof PlanError) throw new StackError(`stack ${stack}: ${e.message}`, false);
            throw e;
        }
        if (problems.length > 0) throw invalid(problems);
        return value;
    };
    if (clusterRaw !== undefined) return { kind: "cluster", config: parse(() => parseClusterConfig(obj.value)) };
    return parse(() => {
        const parsed = parsePlatformConfig(obj.value, stack);
        // A run stack on a cluster stack: its names filled in from the cluster stack's file, as the plan does.
        const clusterOutputs = parsed.clusterStack !== undefined ? clusterStackOutputs(cfg)[parsed.clusterStack] : undefined;
        const config = applyClusterStack(parsed, clusterOutputs as Partial<ClusterOutputs> | undefined);
        return {
            kind: "run",
            config,
            plan: resolvePlatform(config, {
                hfToken: cfg.config[`${CONFIG_NAMESPACE}:hfToken`] !== undefined,
                // Encrypted (the only form accepted): its registries are not known here; the program's preflight reads them.
                registryAuth: cfg.secretKeys.includes(`${CONFIG_NAMESPACE}:${REGISTRY_AUTH_KEY}`)
                    ? []
                    : registriesOf(cfg.config[`${CONFIG_NAMESPACE}:${REGISTRY_AUTH_KEY}`]),
            }),
        };
    });
}

/** The registries a registryAuth value names (undefined when unset: no registry credentials). */
function registriesOf(value: string | undefined): readonly string[] | undefined {
    return value === undefined ? undefined : checkRegistryAuth(value).registries;
}

/** A run stack's config and plan (a cluster stack has neither: a StackError saying so). */
export function loadRunStack(stack: string, file?: string): { config: PlatformConfig; plan: PlatformPlan } {
    const loaded = loadStack(stack, file);
    if (loaded.kind === "cluster") throw new StackError(`stack ${stack} is a cluster stack (${CONFIG_NAMESPACE}:cluster): name a run stack`, false);
    return loaded;
}
