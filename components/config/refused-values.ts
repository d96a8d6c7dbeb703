/**
 * Every problem at once: when the schema refuses part of a stack's config (an unknown key, a value of
 * the wrong type), the refused parts are dropped where the field may be left out (its default or
 * nothing stands in), and the rest is parsed again, so the cross-field checks still run over what is
 * left. A field that must be set (runId, training.layout, ...) cannot be stood in for: then only the
 * schema's problems are reported. Pure.
 */
import type { z } from "zod";
import { formatZodIssues } from "./errors";
import { fieldsAt, isRecord, mayBeOmitted, schemaAt } from "./schema-walk";
import { otherTargetFieldMessage } from "./target-settings";
import { TARGET_KINDS } from "./terms";

type Path = ReadonlyArray<PropertyKey>;

/** The result of checking a config against a schema, with the refused parts set aside. */
export interface SchemaCheck<T> {
    /** The schema's problems, one line each (every round's, in order). */
    readonly problems: string[];
    /** The parsed config without the refused parts; undefined when a required field was refused. */
    readonly data?: T;
    /** The fields whose values were refused and dropped (dotted paths): later checks saw their defaults. */
    readonly dropped: string[];
}

function isContainer(v: unknown): v is Record<PropertyKey, unknown> {
    return typeof v === "object" && v !== null;
}

function clone(v: unknown): unknown {
    return v === undefined ? undefined : structuredClone(v);
}

function remove(input: unknown, path: Path): void {
    let v = input;
    for (const k of path.slice(0, -1)) v = isContainer(v) ? v[k] : undefined;
    if (isContainer(v) && !Array.isArray(v)) delete v[path[path.length - 1] as string];
}

/** The longest prefix of `path` naming an object field that may be left out, or undefined. */
function omittable(root: z.core.$ZodType, path: Path, input: unknown): Path | undefined {
    for (let n = path.length; n >= 1; n--) {
        const prefix = path.slice(0, n);
        if (typeof prefix[n - 1] !== "string") continue;
        const s = schemaAt(root, prefix, input);
        const parent = schemaAt(root, prefix.slice(0, -1), input);
        // An entry of a record (an env by name) is the user's own: drop the field holding the record instead.
        if (s !== undefined && !(parent !== undefined && isRecord(parent)) && mayBeOmitted(s)) return prefix;
    }
    return undefined;
}

const dotted = (path: Path) => path.map(String).join(".");

/** An unknown `target.<key>` that the other target's schema knows: where that setting lives on this one. */
function otherTargetField(schema: z.core.$ZodType, path: Path, key: string, input: unknown): string | undefined {
    if (dotted(path) !== "target" || !isContainer(input) || !isContainer(input.target)) return undefined;
    const kind = input.target.kind;
    const other = TARGET_KINDS.find((k) => k !== kind);
    const here = TARGET_KINDS.find((k) => k === kind);
    if (other === undefined || here === undefined) return undefined;
    if (!fieldsAt(schema, path, { ...input, target: { kind: other } }).includes(key)) return undefined;
    return otherTargetFieldMessage(here, other, key);
}

/** Parses `input` with `schema`, dropping refused parts (at most `rounds` times) so the rest still parses. */
export function checkAgainstSchema<S extends z.ZodType>(schema: S, input: unknown, rounds = 3): SchemaCheck<z.output<S>> {
    const problems: string[] = [];
    const dropped: string[] = [];
    let current = clone(input);
    for (let round = 0; round < rounds; round++) {
        const parsed = schema.safeParse(current, { reportInput: true });
        if (parsed.success) return { problems, data: parsed.data, dropped };
        const at = current;
        const lines = formatZodIssues(
            parsed.error.issues,
            (path) => fieldsAt(schema, path, at),
            (path, key) => otherTargetField(schema, path, key, at),
        );
        for (const line of lines) if (!problems.includes(line)) problems.push(line);
        const next = clone(current);
        for (const issue of parsed.error.issues) {
            if (issue.code === "unrecognized_keys") {
                for (const k of issue.keys) remove(next, [...issue.path, k]);
                continue;
            }
            const drop = omittable(schema, issue.path, at);
            if (drop === undefined) return { problems, dropped };
            remove(next, drop);
            if (!dropped.includes(dotted(drop))) dropped.push(dotted(drop));
        }
        current = next;
    }
    return { problems, dropped };
}

/**
 * Whether a later check's problem is about a dropped field (its own line, or a rule that read the
 * default standing in for the refused value): such lines are left out, the schema's line stands.
 */
export function aboutDropped(problem: string, dropped: readonly string[]): boolean {
    const field = problem.split(": ")[0];
    return dropped.some((d) => {
        const leaf = d.split(".").pop()!;
        return field === d || field.startsWith(`${d}.`) || field.startsWith(`${d}[`) || new RegExp(`\\b${leaf}\\b`).test(problem);
    });
}
