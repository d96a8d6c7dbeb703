/**
 * What the operator should know about a stack that is not an error: shown in plan.md and kept in
 * the plan (PlatformPlan.warnings).
 */
import type { PlatformNames } from "../config/names";
import { programWarnings } from "../config/program-rules";
import type { PlatformConfig } from "../config/types";
import { placeholderImageWarnings } from "../config/validate";

/** Every warning of a config: env restarts, the ingress certificate the sandboxes must trust, programs, placeholder images. */
export function platformWarnings(config: PlatformConfig, names: PlatformNames): string[] {
    const warnings: string[] = [];
    if (config.envs.some((e) => !e.external)) {
        warnings.push("changing an env server during a run restarts its replicas and kills their open sessions: change envs between runs");
    }
    if (
        config.ingress.enabled &&
        config.ingress.tls.mode !== "none" &&
        (config.sandboxes.provider === "agent-sandbox" || config.sandboxes.provider === "docker")
    ) {
        const host = new URL(names.ingress.sandboxUrl).hostname;
        warnings.push(
            `sandboxes call ${names.ingress.sandboxUrl}: the certificate (ingress.tls) must name ${host}, and the sandbox image must trust its issuer (a private CA goes into the image's trust store)`,
        );
    }
    warnings.push(...hostedSandboxKeyWarnings(config, names));
    warnings.push(...programWarnings(config), ...placeholderImageWarnings(config));
    return warnings;
}

/**
 * Hosted sandboxes (sandboxes.provider hf) have no forwarder: the ingress key sits in the capture
 * proxy's environment, under the agent's uid, and the model being trained can print it. What it can
 * do with it, exactly (docs/design/rollout-keys.md).
 */
export function hostedSandboxKeyWarnings(config: PlatformConfig, names: PlatformNames): string[] {
    if (config.sandboxes.provider !== "hf" || !config.ingress.enabled) return [];
    const i = config.ingress;
    const routes = ["POST /v1/chat/completions", "GET /v1/models", ...(i.allowCompletions ? ["POST /v1/completions"] : [])].join(", ");
    return [
        `sandboxes.provider hf: the agent (the model being trained, running commands in the hosted sandbox) can read the ingress key '${i.sandboxKey}' (it is in the capture proxy's environment, under the agent's uid; no forwarder can hide it there). ` +
            `With it, from anywhere that reaches ${names.ingress.sandboxUrl}, until the key is rotated (pulumi config set --secret ingressKey-${i.sandboxKey}, then pulumi up), it can call ${routes} ` +
            `at ${i.rateLimitPerSecond} requests/s (burst ${i.rateLimitBurst}) per ingress replica, a budget every sandbox of the run shares; it cannot reach vLLM's other routes (/pause, /update_weights, /collective_rpc, /metrics, ...). ` +
            "Per-rollout keys (minted per claim, revoked at its end, limited on their own) cover agent-sandbox pools, not hosted sandboxes: use agent-sandbox where the model must not hold a run-long key",
    ];
}
