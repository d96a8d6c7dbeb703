/**
 * The training node's secrets: which container reads which as an env var, which the run cannot start
 * without, and the Kubernetes Secret that holds each. Values never pass through here (the component's args).
 */
import { envSecretRefs, secretRefEnv, type EnvValue } from "../config/secrets";
import { type EnvSecretKey, SECRET_ENV, type SecretName, type TrainingConfig, type TrainingLinks, type TrainingNames } from "./model";

/** The Hub token, for both roles (gated models, Hub pushes). */
export function hfSecretEnv(): Record<string, SecretName> {
    return { [SECRET_ENV.hfToken]: "hfToken" };
}

/** The secret references of an env map (`{ secret: envSecret-<name> }`), as secret env vars. */
export function referencedSecretEnv(env: Readonly<Record<string, EnvValue>>): Record<string, SecretName> {
    return secretRefEnv(env) as Record<string, EnvSecretKey>;
}

/** Whether the trainer mints per-rollout keys (the Platform links it to the ingress's verifier: agent-sandbox pools on Kubernetes). */
export function mintsRolloutKeys(config: TrainingConfig, links: TrainingLinks): boolean {
    return config.training.layout === "blackbox" && links.sandbox?.mintsRolloutKeys === true;
}

/** The trainer's secret env vars the platform sets (extraEnv's references come beside them, trainer.ts). */
export function trainerSecretEnv(config: TrainingConfig, links: TrainingLinks): Record<string, SecretName> {
    const secretEnv: Record<string, SecretName> = hfSecretEnv();
    // The verifier's admin key: mint a key per claim, revoke it at the claim's end (never the agent's: the trainer's pod only).
    if (mintsRolloutKeys(config, links)) secretEnv[SECRET_ENV.rolloutAdminKey] = "rolloutAdminKey";
    return secretEnv;
}

/** Secrets the run cannot start without. */
export function requiredSecrets(config: TrainingConfig, links: TrainingLinks): SecretName[] {
    const required: SecretName[] = [];
    if (config.training.hubRepoId !== undefined) required.push("hfToken");
    if (mintsRolloutKeys(config, links)) required.push("rolloutAdminKey");
    // A referenced secret the stack does not set is refused at the config edge (load.ts); here, as a second guard.
    for (const key of new Set(envSecretRefs(config).map((r) => r.key))) required.push(key as EnvSecretKey);
    return required;
}

/** The Kubernetes Secret (name, key) of each logical secret: one Secret per referenced `envSecret-<name>` too. */
export function secretRefs(names: TrainingNames, config: TrainingConfig): Record<SecretName, { readonly name: string; readonly key: string }> {
    const refs: Record<SecretName, { readonly name: string; readonly key: string }> = {
        hfToken: { name: names.training.hfSecret, key: SECRET_ENV.hfToken },
        rolloutAdminKey: { name: names.training.rolloutAdminKeySecret, key: SECRET_ENV.rolloutAdminKey },
    };
    for (const { key } of envSecretRefs(config)) refs[key as EnvSecretKey] = { name: envSecretName(names, key), key: "value" };
    return refs;
}

/** The Kubernetes Secret of a referenced `envSecret-<name>`: `<prefix>-<name>`. */
export function envSecretName(names: TrainingNames, key: string): string {
    return `${names.training.envSecretPrefix}-${key.slice(key.indexOf("-") + 1)}`;
}
