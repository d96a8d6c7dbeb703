/**
 * How a config problem is reported: ConfigError (one line per problem, each naming the field and
 * the fix) and zod's issues turned into such lines. Pure.
 */
import type { z } from "zod";
import { nearMiss } from "./near-miss";

/** A configuration that cannot be deployed; `problems` holds one line per problem. */
export class ConfigError extends Error {
    constructor(public readonly problems: readonly string[]) {
        super(`invalid configuration (${problems.length} problem${problems.length === 1 ? "" : "s"}):\n${problems.map((p) => `  - ${p}`).join("\n")}`);
        this.name = "ConfigError";
    }
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

/** The field an unknown key at `field` most likely meant (its near miss among the fields known there). */
function meant(field: string, key: string, known: readonly string[]): string | undefined {
    const near = nearMiss(key, known);
    return near === undefined ? undefined : field === "(root)" ? near : `${field}.${near}`;
}

/**
 * The line for an unknown key: its near miss among the fields known there, when it has one; else
 * `elsewhere`'s pointer (a field of the other target: where that setting lives on this one).
 */
export function unknownFieldMessage(field: string, key: string, known: readonly string[], elsewhere?: string): string {
    const at = field === "(root)" ? key : `${field}.${key}`;
    const near = meant(field, key, known);
    if (near !== undefined) return `${at}: unknown field: did you mean ${near}? rename it`;
    return elsewhere !== undefined ? `${at}: ${elsewhere}` : `${at}: unknown field: remove it or check its spelling`;
}

/**
 * A required choice left out of a named entry (`envs.codng` with no `catalog`): when the entry's name
 * is a near miss of one of the choices, the user misspelled an existing name rather than forgot the
 * field, so the line names the entry and the near miss.
 */
function missingChoiceMessage(path: ReadonlyArray<PropertyKey>, values: readonly unknown[]): string {
    const field = fieldPath(path);
    const choice = String(path[path.length - 1]);
    const entry = path[path.length - 2];
    const names = values.filter((v): v is string => typeof v === "string");
    const near = typeof entry === "string" && !names.includes(entry) ? nearMiss(entry, names) : undefined;
    const what = choice === "catalog" ? "catalog env" : choice;
    if (near !== undefined) return `${fieldPath(path.slice(0, -1))}: no ${what} of that name: did you mean ${near}? (or set ${choice}:)`;
    return `${field}: required: set it to one of ${names.map((v) => JSON.stringify(v)).join(", ")}`;
}

/**
 * One line per zod issue, naming the field and the fix. `fieldsAt` gives the field names an object
 * at a path takes (components/config/schema-walk.ts), for the near miss of an unknown key.
 */
export function formatZodIssues(
    issues: readonly z.core.$ZodIssue[],
    fieldsAt: (path: ReadonlyArray<PropertyKey>) => readonly string[] = () => [],
    /** Where an unknown key's setting lives instead (a field of the other target), or undefined. */
    elsewhere: (path: ReadonlyArray<PropertyKey>, key: string) => string | undefined = () => undefined,
): string[] {
    // A required field written under a misspelled name (runID for runId) is one problem: the rename.
    const misspelled = new Set(
        issues.flatMap((issue) => (issue.code === "unrecognized_keys" ? issue.keys.map((k) => meant(fieldPath(issue.path), k, fieldsAt(issue.path))) : [])),
    );
    return issues.flatMap((issue) => {
        const field = fieldPath(issue.path);
        if (issue.code === "unrecognized_keys") {
            const known = fieldsAt(issue.path);
            return issue.keys.map((k) => unknownFieldMessage(field, k, known, elsewhere(issue.path, k)));
        }
        if (issue.code === "invalid_type" && (issue as { input?: unknown }).input === undefined) {
            if (misspelled.has(field)) return [];
            return [`${field}: required: ${REQUIRED_HINTS[field] ?? `set ${field} (expected ${issue.expected})`}`];
        }
        if (issue.code === "invalid_type") {
            return [`${field}: expected ${issue.expected}, got ${describe((issue as { input?: unknown }).input)}`];
        }
        if (issue.code === "invalid_value" && "input" in issue && (issue as { input?: unknown }).input === undefined && issue.path.length >= 2) {
            return [missingChoiceMessage(issue.path, issue.values)];
        }
        if (issue.code === "invalid_value") {
            // A schema's own message (z.enum(values, { error })) says why the list is what it is; zod's default starts "Invalid".
            if (!issue.message.startsWith("Invalid")) return [`${field}: ${issue.message}`];
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
