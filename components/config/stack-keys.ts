/**
 * The stack file's own config keys (`agent-rl-infra:*`): which exist, the near miss of a
 * misspelled one, and the object values (`platform`, `cluster`) read from their raw strings.
 * Pure: the program (load.ts), the offline plan and the preflight's stack loading share them,
 * so a typo gets the same message wherever it is read.
 */

import { nearMiss } from "./near-miss";

export { nearMiss } from "./near-miss";

export const CONFIG_NAMESPACE = "agent-rl-infra";

/** Every key a stack file may set in the namespace (`ingressKey-<name>` and `envSecret-<name>` besides). */
export const STACK_KEYS = ["platform", "cluster", "hfToken", "registryAuth"] as const;
const INGRESS_KEY_PREFIX = "ingressKey-";
/** Prefix of a secret an env map references (`training.extraEnv.X: { secret: envSecret-<name> }`). */
export const ENV_SECRET_PREFIX = "envSecret-";

/** The namespace's keys of a config map (`agent-rl-infra:hfTokn` -> `hfTokn`); other namespaces are not ours. */
function ownKeys(configKeys: readonly string[]): string[] {
    const prefix = `${CONFIG_NAMESPACE}:`;
    return configKeys.filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length));
}

/**
 * One line per key of the namespace that is not a setting, with its near miss: a misspelled
 * secret key (`hfTokn`) would otherwise pass silently, and the run go without the token.
 */
export function unknownStackKeys(configKeys: readonly string[]): string[] {
    return ownKeys(configKeys)
        .filter(
            (k) =>
                !(STACK_KEYS as readonly string[]).includes(k) &&
                ![INGRESS_KEY_PREFIX, ENV_SECRET_PREFIX].some((prefix) => k.startsWith(prefix) && k.length > prefix.length),
        )
        .map((k) => {
            const dash = k.indexOf("-");
            const near =
                nearMiss(k, STACK_KEYS) ??
                (dash > 0 && nearMiss(k.slice(0, dash + 1), [INGRESS_KEY_PREFIX]) ? `${INGRESS_KEY_PREFIX}${k.slice(dash + 1)}` : undefined);
            const fix = near !== undefined ? `did you mean ${CONFIG_NAMESPACE}:${near}? rename it` : "remove it";
            return `${CONFIG_NAMESPACE}:${k}: not a setting of this project (the keys are ${STACK_KEYS.join(", ")}, ${INGRESS_KEY_PREFIX}<name> and ${ENV_SECRET_PREFIX}<name>): ${fix} (pulumi config rm ${k}${near !== undefined ? `, then pulumi config set${near === "platform" || near === "cluster" ? "" : " --secret"} ${near} ...` : ""})`;
        });
}

/** The message for a stack file with neither `platform` nor `cluster`: which file, and the near miss it has instead. */
export function missingPlatformMessage(stackFile: string, configKeys: readonly string[]): string {
    const near = ownKeys(configKeys).flatMap((k) => {
        const m = nearMiss(k, ["platform", "cluster"]);
        return m !== undefined && m !== k ? [`${CONFIG_NAMESPACE}:${k} (did you mean ${CONFIG_NAMESPACE}:${m}?)`] : [];
    });
    return (
        `config ${CONFIG_NAMESPACE}:platform is missing from ${stackFile}` +
        (near.length > 0 ? `, which has ${near.join(", ")}` : "") +
        ": add a 'platform' object (start from a recipe: platform: { recipe: mbpp-whitebox, runId: run-001, target: { kind: docker } }), or a 'cluster' object for a cluster stack"
    );
}

function describe(v: unknown): string {
    if (v === null) return "null";
    if (Array.isArray(v)) return "a list";
    return typeof v === "string" ? `the string ${JSON.stringify(v)}` : `the ${typeof v} ${JSON.stringify(v)}`;
}

/**
 * The object of `key` (`platform`, `cluster`) from its raw config string (Pulumi hands a
 * structured value over as JSON text, a plain value as itself); a problem line when it is not an object.
 */
export function stackObject(key: "platform" | "cluster", raw: string, stackFile: string): { value: Record<string, unknown> } | { problem: string } {
    let v: unknown;
    try {
        v = JSON.parse(raw);
    } catch {
        v = raw;
    }
    if (typeof v === "object" && v !== null && !Array.isArray(v)) return { value: v as Record<string, unknown> };
    return {
        problem: `${CONFIG_NAMESPACE}:${key}: must be an object (a mapping under config: in ${stackFile}${key === "platform" ? ", e.g. platform: { recipe: mbpp-whitebox, runId: run-001, target: { kind: docker } }" : ", e.g. cluster: { target: { context: <kubeconfig context> } }"}), got ${describe(v)}`,
    };
}
