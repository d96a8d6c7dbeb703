/**
 * The stack file's own config keys (`agent-rl-infra:*`): which exist, the near miss of a
 * misspelled one, and the object values (`platform`, `cluster`) read from their raw strings.
 * Pure: the program (load.ts), the offline plan and the preflight's stack loading share them,
 * so a typo gets the same message wherever it is read.
 */

export const CONFIG_NAMESPACE = "agent-rl-infra";

/** Every key a stack file may set in the namespace (`ingressKey-<name>` besides, per ingress key). */
export const STACK_KEYS = ["platform", "cluster", "hfToken", "registryAuth"] as const;
const INGRESS_KEY_PREFIX = "ingressKey-";

/** Edit distance (insert, delete, substitute, swap two neighbours), case-insensitive. */
function distance(a: string, b: string): number {
    const x = a.toLowerCase();
    const y = b.toLowerCase();
    const d: number[][] = Array.from({ length: x.length + 1 }, (_, i) => Array.from({ length: y.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
    for (let i = 1; i <= x.length; i++) {
        for (let j = 1; j <= y.length; j++) {
            const cost = x[i - 1] === y[j - 1] ? 0 : 1;
            d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
            if (i > 1 && j > 1 && x[i - 1] === y[j - 2] && x[i - 2] === y[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
        }
    }
    return d[x.length][y.length];
}

/** The candidate `word` is most likely a misspelling of (at most 2 edits, fewer for short words), or undefined. */
export function nearMiss(word: string, candidates: readonly string[]): string | undefined {
    const limit = word.length <= 4 ? 1 : 2;
    let best: { c: string; d: number } | undefined;
    for (const c of candidates) {
        const d = distance(word, c);
        if (d <= limit && (best === undefined || d < best.d)) best = { c, d };
    }
    return best?.c;
}

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
        .filter((k) => !(STACK_KEYS as readonly string[]).includes(k) && !(k.startsWith(INGRESS_KEY_PREFIX) && k.length > INGRESS_KEY_PREFIX.length))
        .map((k) => {
            const dash = k.indexOf("-");
            const near =
                nearMiss(k, STACK_KEYS) ??
                (dash > 0 && nearMiss(k.slice(0, dash + 1), [INGRESS_KEY_PREFIX]) ? `${INGRESS_KEY_PREFIX}${k.slice(dash + 1)}` : undefined);
            const fix = near !== undefined ? `did you mean ${CONFIG_NAMESPACE}:${near}? rename it` : "remove it";
            return `${CONFIG_NAMESPACE}:${k}: not a setting of this project (the keys are ${STACK_KEYS.join(", ")} and ${INGRESS_KEY_PREFIX}<name>): ${fix} (pulumi config rm ${k}${near !== undefined ? `, then pulumi config set${near === "platform" || near === "cluster" ? "" : " --secret"} ${near} ...` : ""})`;
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
