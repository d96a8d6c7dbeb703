/**
 * Phase one of the Platform: pure, no resources. Computes every name and address, then
 * every component's target-neutral description; any problem anywhere ends the run here,
 * all problems together, before the first resource is registered.
 */
import { ConfigError } from "../config/parse";
import { platformNames, validateNames, type PlatformNames } from "../config/names";
import type { PlatformConfig } from "../config/resolve";

export interface PlatformPlan {
    readonly config: PlatformConfig;
    readonly names: PlatformNames;
    /** Things the operator should know that are not errors (shown in the plan). */
    readonly warnings: readonly string[];
}

export function resolvePlatform(config: PlatformConfig): PlatformPlan {
    const names = platformNames(config);
    const problems = [...validateNames(names)];
    const warnings: string[] = [];
    if (config.envs.some((e) => !e.external)) {
        warnings.push("changing an env server during a run restarts its replicas and kills their open sessions: change envs between runs");
    }
    if (problems.length > 0) throw new ConfigError(problems);
    return { config, names, warnings };
}
