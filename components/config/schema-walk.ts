/**
 * Reading the config schema by path, for messages and for the "report everything at once" repair:
 * the object fields known at a path (the near miss of an unknown key), the schema of one field, and
 * whether a field may be left out. Walks zod's own definitions (`_zod.def`): objects, records,
 * arrays, unions (a discriminated one by the input's discriminator), optional / default / prefault /
 * nullable / pipe wrappers. Pure.
 */
import type { z } from "zod";

type Schema = z.core.$ZodType;
type Def = { type: string; [k: string]: unknown };
type Path = ReadonlyArray<PropertyKey>;

function def(s: Schema): Def {
    return (s as unknown as { _zod: { def: Def } })._zod.def;
}

/** The schema under its wrappers (optional, default, prefault, nullable, readonly, pipe's input). */
function unwrap(s: Schema): Schema {
    for (;;) {
        const d = def(s);
        if (["optional", "default", "prefault", "nullable", "readonly", "nonoptional", "catch"].includes(d.type)) s = d.innerType as Schema;
        else if (d.type === "pipe") s = d.in as Schema;
        else if (d.type === "lazy") s = (d.getter as () => Schema)();
        else return s;
    }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The options of a union the input can be: a discriminated union's matching one, else all of them. */
function unionOptions(s: Schema, input: unknown): Schema[] {
    const d = def(s);
    const options = d.options as Schema[];
    const key = d.discriminator as string | undefined;
    if (key === undefined || !isPlainObject(input)) return options;
    const matching = options.filter((o) => {
        const field = (def(unwrap(o)).shape as Record<string, Schema> | undefined)?.[key];
        if (field === undefined) return false;
        const values = def(unwrap(field)).values as unknown[] | undefined;
        return values?.includes(input[key]) ?? false;
    });
    return matching.length > 0 ? matching : options;
}

/** The object schemas `s` stands for (one, or a union's options), given the input at that point. */
function objectsOf(s: Schema, input: unknown): Schema[] {
    const u = unwrap(s);
    const d = def(u);
    if (d.type === "object") return [u];
    if (d.type === "union") return unionOptions(u, input).flatMap((o) => objectsOf(o, input));
    return [];
}

/** One step down: the schema of `key` under `s` (input: the value at `s`, to pick a union's option). */
function child(s: Schema, key: PropertyKey, input: unknown): Schema | undefined {
    const u = unwrap(s);
    const d = def(u);
    if (d.type === "record") return d.valueType as Schema;
    if (d.type === "array") return typeof key === "number" ? (d.element as Schema) : undefined;
    for (const o of objectsOf(u, input)) {
        const field = (def(o).shape as Record<string, Schema>)[String(key)];
        if (field !== undefined) return field;
    }
    return undefined;
}

function valueAt(input: unknown, path: Path): unknown {
    let v = input;
    for (const k of path) v = isPlainObject(v) || Array.isArray(v) ? (v as Record<PropertyKey, unknown>)[k] : undefined;
    return v;
}

/** The schema of the field at `path` (input: the whole config, to follow unions); undefined if none. */
export function schemaAt(root: Schema, path: Path, input?: unknown): Schema | undefined {
    let s: Schema | undefined = root;
    for (let i = 0; i < path.length && s !== undefined; i++) s = child(s, path[i], valueAt(input, path.slice(0, i)));
    return s;
}

/** The field names an object at `path` takes ([] where `path` is no object, or a record of free names). */
export function fieldsAt(root: Schema, path: Path, input?: unknown): string[] {
    const s = schemaAt(root, path, input);
    if (s === undefined) return [];
    return [...new Set(objectsOf(s, valueAt(input, path)).flatMap((o) => Object.keys(def(o).shape as object)))];
}

/** Whether `s` (under its wrappers) holds a record: its entries are the user's names, not fields. */
export function isRecord(s: Schema): boolean {
    return def(unwrap(s)).type === "record";
}

/** Whether the field may be left out (optional, or defaulted): dropping a bad value keeps the rest checkable. */
export function mayBeOmitted(s: Schema): boolean {
    let cur = s;
    for (;;) {
        const d = def(cur);
        if (d.type === "optional" || d.type === "default" || d.type === "prefault") return true;
        if (d.type === "nullable" || d.type === "readonly") cur = d.innerType as Schema;
        else if (d.type === "pipe") cur = d.in as Schema;
        else return false;
    }
}
