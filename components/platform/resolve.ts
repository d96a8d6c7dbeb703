/**
 * Phase one of the Platform: pure, no resources. Computes every name and address, then
 * every component's target-neutral description; any problem anywhere ends the run here,
 * all problems together, before the first resource is registered.
 */
import { ConfigError } from "../config/parse";
import { platformNames, validateNames, type PlatformNames } from "../config/names";
import type { PlatformConfig } from "../config/resolve";
import { resolveEnvSpace, type EnvDescription } from "../env";
import { resolveVllmIngress, type IngressDescription } from "../ingress";
import { resolveSandboxPool, type SandboxDescription } from "../sandbox";
import { resolveTrainingNode, type TrainingDescription } from "../training";

/** Which secrets the stack has (their values stay secret outputs; only presence matters here). */
export interface SecretPresence {
    readonly hfToken: boolean;
}

export interface PlatformPlan {
    readonly config: PlatformConfig;
    readonly names: PlatformNames;
    readonly training: TrainingDescription;
    /** One description per env server (deployed or external). */
    readonly envs: readonly EnvDescription[];
    /** The authenticated vLLM ingress, for black-box runs. */
    readonly ingress?: IngressDescription;
    /** The sandbox pool, for black-box runs. */
    readonly sandboxes?: SandboxDescription;
    /** Things the operator should know that are not errors (shown in the plan). */
    readonly warnings: readonly string[];
}

/** Runs `step`, collecting its ConfigError problems instead of stopping at the first component. */
function collect<T>(problems: string[], step: () => T): T | undefined {
    try {
        return step();
    } catch (e) {
        if (e instanceof ConfigError) {
            problems.push(...e.problems);
            return undefined;
        }
        throw e;
    }
}

export function resolvePlatform(config: PlatformConfig, secrets: SecretPresence = { hfToken: false }): PlatformPlan {
    const names = platformNames(config);
    const problems = [...validateNames(names)];
    const warnings: string[] = [];
    if (config.envs.some((e) => !e.external)) {
        warnings.push("changing an env server during a run restarts its replicas and kills their open sessions: change envs between runs");
    }
    if (config.ingress.enabled && config.ingress.tls.mode !== "none" && (config.sandboxes.provider === "agent-sandbox" || config.sandboxes.provider === "docker")) {
        const host = new URL(names.ingress.sandboxUrl).hostname;
        warnings.push(
            `sandboxes call ${names.ingress.sandboxUrl}: the certificate (ingress.tls) must name ${host}, and the sandbox image must trust its issuer (a private CA goes into the image's trust store)`,
        );
    }
    const envs = config.envs.map((env) => collect(problems, () => resolveEnvSpace(config, env, names)));
    const ingress = config.ingress.enabled ? collect(problems, () => resolveVllmIngress(config, names)) : undefined;
    const sandboxes = config.sandboxes.provider === "none" ? undefined : collect(problems, () => resolveSandboxPool(config, names));
    const envUrls = Object.fromEntries(Object.entries(names.envs).map(([env, n]) => [env, n.url]));
    const training = collect(problems, () =>
        resolveTrainingNode(config, names, {
            envUrls,
            sandbox: sandboxes ? { url: names.ingress.sandboxUrl, provider: config.sandboxes.provider, trainerEnv: sandboxes.trainerEnv } : undefined,
        }),
    );
    if (training?.requiredSecrets.includes("hfToken") && !secrets.hfToken) {
        problems.push("hfToken: training.hubRepoId pushes to the Hub, which needs a token: pulumi config set --secret hfToken hf_...");
    }
    if (problems.length > 0 || training === undefined) throw new ConfigError(problems);
    return { config, names, training, envs: envs.filter((e): e is EnvDescription => e !== undefined), ingress, sandboxes, warnings };
}
