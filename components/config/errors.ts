/**
 * How a config problem is reported: ConfigError (one line per problem, each naming the field and
 * the fix) and zod's issues turned into such lines. Pure; imports nothing from this folder.
 */
import type { z } from "zod";

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
