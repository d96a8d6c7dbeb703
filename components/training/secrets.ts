/**
 * The training node's secrets: which container reads which as an env var, which the run cannot start
 * without, and the Kubernetes Secret that holds each. Values never pass through here (the component's args).
 */
import { SECRET_ENV, type SecretName, type TrainingConfig, type TrainingNames } from "./model";

/** The Hub token, for both roles (gated models, Hub pushes). */
export function hfSecretEnv(): Record<string, SecretName> {
    return { [SECRET_ENV.hfToken]: "hfToken" };
}

/** The trainer's secret env vars. */
export function trainerSecretEnv(config: TrainingConfig): Record<string, SecretName> {
    const secretEnv: Record<string, SecretName> = hfSecretEnv();
    // Only hosted sandboxes get the key from the trainer; a pool's forwarder holds it itself.
    if (config.training.layout === "blackbox" && config.sandboxes.provider === "hf") secretEnv[SECRET_ENV.sandboxKey] = "sandboxKey";
    return secretEnv;
}

/** Secrets the run cannot start without. */
export function requiredSecrets(config: TrainingConfig): SecretName[] {
    const required: SecretName[] = [];
    if (config.training.hubRepoId !== undefined) required.push("hfToken");
    if (config.training.layout === "blackbox") required.push("sandboxKey");
    return required;
}

/** The Kubernetes Secret (name, key) of each logical secret. */
export function secretRefs(names: TrainingNames): Record<SecretName, { readonly name: string; readonly key: string }> {
    return {
        hfToken: { name: names.training.hfSecret, key: SECRET_ENV.hfToken },
        sandboxKey: { name: names.training.sandboxKeySecret, key: SECRET_ENV.sandboxKey },
    };
}
