/**
 * The config edge: raw stack config (plain object) -> recipe merged -> zod parsed ->
 * defaults resolved -> cross-checked. Everything wrong is reported at once, as one
 * ConfigError whose lines each name the field and the fix.
 */
import { ALL_RECIPE_NAMES, RECIPES, type RecipeName } from "./recipes";
import { resolveDefaults } from "./resolve";
import type { PlatformConfig } from "./types";
import { platformSchema } from "./schema";
import { validateTargetSettings } from "./target-settings";
import { validatePlatform } from "./validate";
import { ConfigError } from "./errors";
import { aboutDropped, checkAgainstSchema } from "./refused-values";
import { platformSecretProblems } from "./secrets";

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
    const moved: string[] = [];
    if ("installController" in sandboxes) {
        moved.push(
            "sandboxes.installController: a run stack no longer installs cluster-wide objects (a second stack met AlreadyExists, and destroying the first took every run's sandboxes): " +
                "remove it, and install agent-sandbox once with a cluster stack (agent-rl-infra:cluster, agentSandbox.install; point clusterStack at it) or by hand",
        );
    }
    if ("acceptForgeableTrace" in sandboxes) {
        moved.push(
            "sandboxes.acceptForgeableTrace: removed: hosted (hf) black-box sandboxes are refused whatever the stack says (the agent's uid can rewrite the trace that is trained on and read the ingress key there): " +
                "remove it, and run the black box on a Kubernetes target with provider agent-sandbox",
        );
    }
    return moved;
}

/** Parses, defaults and cross-checks a stack's raw config; throws ConfigError with every problem. */
export function parsePlatformConfig(raw: unknown, stack: string): PlatformConfig {
    const recipe = applyRecipe(raw);
    // A secret written into the platform object (a stack key named as one, a credential value): reported with every other problem.
    const secrets = platformSecretProblems(recipe.merged);
    const merged = secrets.value;
    const problems = [...recipe.problems, ...movedFields(merged)];
    if (problems.length > 0) throw new ConfigError([...problems.map(secrets.hide), ...secrets.problems]);
    // Every problem at once: what the schema refuses is set aside, and the cross-field checks run over the rest.
    const checked = checkAgainstSchema(platformSchema, merged);
    if (checked.data === undefined) throw new ConfigError([...secrets.problems, ...checked.problems.map(secrets.hide)]);
    const config = resolveDefaults(checked.data, stack);
    const rules = [...validateTargetSettings(merged, config.target.kind), ...validatePlatform(config)];
    const errors = [...secrets.problems, ...[...checked.problems, ...rules.filter((p) => !aboutDropped(p, checked.dropped))].map(secrets.hide)];
    if (errors.length > 0) throw new ConfigError(errors);
    return config;
}
