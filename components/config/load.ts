/**
 * Reads the stack's config once from `pulumi.Config`: the structured object
 * `agent-rl-infra:platform` (zod-parsed) and the secrets, each in its own key read with
 * getSecret so Pulumi keeps it marked secret end to end.
 */
import * as pulumi from "@pulumi/pulumi";
import { ConfigError, parsePlatformConfig } from "./parse";
import type { PlatformConfig } from "./resolve";

export const CONFIG_NAMESPACE = "agent-rl-infra";

/** Secrets of the stack, as secret outputs. */
export interface PlatformSecrets {
    /** Hugging Face token (`pulumi config set --secret hfToken`), for gated models and Hub pushes. */
    readonly hfToken?: pulumi.Output<string>;
    /** Ingress keys supplied by the operator (`pulumi config set --secret ingressKey-<name>`); others are generated. */
    readonly ingressKeys: Readonly<Record<string, pulumi.Output<string>>>;
}

/** Config key of a supplied ingress key. */
export function ingressKeyConfigKey(name: string): string {
    return `ingressKey-${name}`;
}

/** Turns config problems into the clean, trace-free error Pulumi prints. */
export function toRunError(e: unknown): never {
    if (e instanceof ConfigError) throw new pulumi.RunError(e.message);
    throw e;
}

export function loadPlatformConfig(): { config: PlatformConfig; secrets: PlatformSecrets } {
    const cfg = new pulumi.Config(CONFIG_NAMESPACE);
    const raw = cfg.getObject<unknown>("platform");
    if (raw === undefined) {
        throw new pulumi.RunError(
            `config ${CONFIG_NAMESPACE}:platform is missing: add a 'platform' object to stacks/Pulumi.${pulumi.getStack()}.yaml (start from a recipe: platform: { recipe: mbpp-whitebox, runId: run-001, target: { kind: docker } })`,
        );
    }
    let config: PlatformConfig;
    try {
        config = parsePlatformConfig(raw, pulumi.getStack());
    } catch (e) {
        toRunError(e);
    }
    const ingressKeys: Record<string, pulumi.Output<string>> = {};
    for (const name of config.ingress.keys) {
        const supplied = cfg.getSecret(ingressKeyConfigKey(name));
        if (supplied !== undefined) ingressKeys[name] = supplied;
    }
    return { config, secrets: { hfToken: cfg.getSecret("hfToken"), ingressKeys } };
}
