/**
 * What the operator should know about a stack that is not an error: shown in plan.md and kept in
 * the plan (PlatformPlan.warnings).
 */
import { runsSandboxPool } from "../config/sandbox-providers";
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
    if (config.ingress.enabled && config.ingress.tls.mode !== "none" && runsSandboxPool(config)) {
        const host = new URL(names.ingress.sandboxUrl).hostname;
        warnings.push(
            `sandboxes call ${names.ingress.sandboxUrl}: the certificate (ingress.tls) must name ${host}, and the sandbox image must trust its issuer (a private CA goes into the image's trust store)`,
        );
    }
    warnings.push(...programWarnings(config), ...placeholderImageWarnings(config));
    return warnings;
}
