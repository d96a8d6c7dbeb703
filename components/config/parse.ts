/**
 * The config edge: raw stack config (plain object) -> recipe merged -> zod parsed ->
 * defaults resolved -> cross-checked. Everything wrong is reported at once, as one
 * ConfigError whose lines each name the field and the fix.
 */
import type { z } from "zod";
import { ALL_RECIPE_NAMES, RECIPES, type RecipeName } from "./recipes";
import { resolveDefaults, type PlatformConfig } from "./resolve";
import { platformSchema } from "./schema";
import { validateTargetSettings } from "./target-settings";
import { validatePlatform } from "./validate";

/** A configuration that cannot be deployed; `problems` holds one line per problem. */
export class ConfigError extends Error {
    constructor(public readonly problems: readonly string[]) {
        super(`invalid configuration (${problems.length} problem${problems.length === 1 ? "" : "s"}):\n${problems.map((p) => `  - ${p}`).join("\n")}`);
        this.name = "ConfigError";
    }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Deep merge: objects merge key by key, everything else (arrays too) is replaced by the override. */
export function deepMerge(base: unknown, override: unknown): unknown {
    if (!isPlainObject(base) || !isPlainObject(override)) return override === undefined ? base : override;
    const out: Record<string, unknown> = { ...base };
    for (const [k, v] of Object.entries(override)) out[k] = deepMerge(base[k], v);
    return out;
}

/** Hints for fields whose absence needs more than "required". */
const REQUIRED_HINTS: Record<string, string> = {
    "training.datasetSize":
        "set it to the number of training problems/prompts; it is never defaulted (the MBPP seed script defaults to 120 unless --dataset-size 170 is passed)",
    runId: "set a short run id such as run-001; a new run is a new id",
    target: "set target.kind to kubernetes or docker",
    "model.name": "set the Hugging Face model id, e.g. Qwen/Qwen3-1.7B",
    "training.layout": "set whitebox-colocate, whitebox-server or blackbox",
    "training.gpusOnNode": "set the number of GPUs on the training node",
};

function fieldPath(path: ReadonlyArray<PropertyKey>): string {
    return path.length === 0 ? "(root)" : path.map(String).join(".");
}

/** One line per zod issue, naming the field and the fix. */
export function formatZodIssues(issues: readonly z.core.$ZodIssue[]): string[] {
    return issues.flatMap((issue) => {
        const field = fieldPath(issue.path);
        if (issue.code === "unrecognized_keys") {
            return issue.keys.map((k) => `${field === "(root)" ? k : `${field}.${k}`}: unknown field: remove it or check its spelling`);
        }
        if (issue.code === "invalid_type" && (issue as { input?: unknown }).input === undefined) {
            return [`${field}: required: ${REQUIRED_HINTS[field] ?? `set ${field} (expected ${issue.expected})`}`];
        }
        if (issue.code === "invalid_type") {
            return [`${field}: expected ${issue.expected}, got ${describe((issue as { input?: unknown }).input)}`];
        }
        if (issue.code === "invalid_value") {
            return [`${field}: must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`];
        }
        if (issue.code === "invalid_union" && field === "target.kind") {
            return [`target.kind: must be "kubernetes" or "docker"`];
        }
        if (issue.code === "too_small" || issue.code === "too_big") {
            return [`${field}: ${issue.message.replace(/^Too (small|big): expected \S+ to /, "must ").replace(/^Too (small|big): /, "")}`];
        }
        return [`${field}: ${issue.message}`];
    });
}

function describe(v: unknown): string {
    if (v === null) return "null";
    if (Array.isArray(v)) return "a list";
    return typeof v === "string" ? `the string ${JSON.stringify(v)}` : typeof v;
}

/** Applies the named recipe under the stack's own fields. */
export function applyRecipe(raw: unknown): { merged: unknown; problems: string[] } {
    if (!isPlainObject(raw)) return { merged: raw, problems: [] };
    const name = raw.recipe;
    if (name === undefined) return { merged: raw, problems: [] };
    if (typeof name !== "string" || !(ALL_RECIPE_NAMES as string[]).includes(name)) {
        return { merged: raw, problems: [`recipe: unknown recipe ${JSON.stringify(name)}: use one of ${ALL_RECIPE_NAMES.join(", ")}`] };
    }
    const { description: _description, ...preset } = RECIPES[name as RecipeName];
    return { merged: deepMerge(preset, raw), problems: [] };
}

/** Fields a run stack had and no longer has, each with where it went. */
function movedFields(raw: unknown): string[] {
    const sandboxes = isPlainObject(raw) && isPlainObject(raw.sandboxes) ? raw.sandboxes : {};
    if (!("installController" in sandboxes)) return [];
    return [
        "sandboxes.installController: a run stack no longer installs cluster-wide objects (a second stack met AlreadyExists, and destroying the first took every run's sandboxes): " +
            "remove it, and install agent-sandbox once with a cluster stack (agent-rl-infra:cluster, agentSandbox.install; point clusterStack at it) or by hand",
    ];
}

/** Parses, defaults and cross-checks a stack's raw config; throws ConfigError with every problem. */
export function parsePlatformConfig(raw: unknown, stack: string): PlatformConfig {
    const { merged, problems } = applyRecipe(raw);
    problems.push(...movedFields(merged));
    if (problems.length > 0) throw new ConfigError(problems);
    const parsed = platformSchema.safeParse(merged, { reportInput: true });
    if (!parsed.success) throw new ConfigError(formatZodIssues(parsed.error.issues));
    const config = resolveDefaults(parsed.data, stack);
    const errors = [...validateTargetSettings(merged, config.target.kind), ...validatePlatform(config)];
    if (errors.length > 0) throw new ConfigError(errors);
    return config;
}
