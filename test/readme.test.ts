/**
 * The docs against the code: README.md's settings table states every default the zod schema
 * applies (so a default cannot drift), names no field the schema lacks, and the docs hold no
 * claim the code contradicts (each case below is one that did).
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, test } from "node:test";
import { platformSchema } from "../components/config";

const REPO = path.resolve(__dirname, "..");
const read = (rel: string) => fs.readFileSync(path.join(REPO, rel), "utf8");
const README = read("README.md");

interface SchemaField {
    readonly path: string;
    /** The default zod applies (a `.default()`, or a `.prefault()` object's own value), when there is one. */
    readonly default?: { readonly value: unknown };
}

/** Every field path of a zod schema (records as `<name>`), with its default. */
export function schemaFields(schema: unknown, at = "", inherited?: { value: unknown }, out: SchemaField[] = []): SchemaField[] {
    const def = (schema as { _zod: { def: Record<string, any> } })._zod.def;
    const here = (value: unknown) => ({ value });
    switch (def.type) {
        case "optional":
        case "nullable":
            return schemaFields(def.innerType, at, inherited, out);
        case "default":
            return schemaFields(def.innerType, at, here(typeof def.defaultValue === "function" ? def.defaultValue() : def.defaultValue), out);
        case "prefault": {
            const v = typeof def.defaultValue === "function" ? def.defaultValue() : def.defaultValue;
            return schemaFields(def.innerType, at, here(v), out);
        }
        case "object": {
            if (at !== "") out.push({ path: at, ...(inherited ? { default: inherited } : {}) });
            const given = inherited?.value as Record<string, unknown> | undefined;
            for (const [k, v] of Object.entries(def.shape as Record<string, unknown>)) {
                const p = at === "" ? k : `${at}.${k}`;
                const before = out.length;
                schemaFields(v, p, undefined, out);
                // A prefault object's own values are the defaults of its fields (training.modelCache.size: 200Gi).
                if (given !== undefined && given[k] !== undefined && out[before]?.path === p && out[before]!.default === undefined)
                    out[before] = { path: p, default: { value: given[k] } };
            }
            return out;
        }
        case "record":
            out.push({ path: at, ...(inherited ? { default: inherited } : {}) });
            return schemaFields(def.valueType, `${at}.<name>`, undefined, out);
        case "union":
            for (const o of def.options) schemaFields(o, at, inherited, out);
            return out;
        default:
            out.push({ path: at, ...(inherited ? { default: inherited } : {}) });
            return out;
    }
}

interface Row {
    readonly fields: string[];
    readonly defaultCell: string;
}

/** The rows of README's `### Fields` table: the field names of each (`a.b`/`c` is a.c) and its default cell. */
function fieldRows(readme: string): Row[] {
    const start = readme.indexOf("### Fields\n");
    assert.ok(start >= 0, "README has a ### Fields section");
    const lines = readme.slice(start).split("\n").slice(1);
    const end = lines.findIndex((l) => /^#{1,3} /.test(l));
    return (end < 0 ? lines : lines.slice(0, end))
        .filter((l) => /^\| `/.test(l))
        .map((l) => {
            const cells = l.split(/(?<!\\)\|/).map((c) => c.trim());
            const names = [...cells[1]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
            const first = names[0]!;
            const prefix = first.includes(".") ? first.slice(0, first.lastIndexOf(".") + 1) : "";
            return { fields: names.map((n, i) => (i === 0 || n.includes(".") ? n : `${prefix}${n}`)), defaultCell: cells[2]!.replace(/\\\|/g, "|") };
        });
}

/** A default as the table writes it. */
function written(v: unknown): string {
    return Array.isArray(v) ? `[${v.join(", ")}]` : String(v);
}

const plain = (s: string) => s.replace(/[`*]/g, "").trim();
const regexLiteral = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

describe("README settings table against the zod schema", () => {
    const fields = schemaFields(platformSchema);
    const known = new Set(fields.map((f) => f.path));
    const rows = fieldRows(README);

    test("every row names fields the schema has", () => {
        assert.deepEqual(
            rows.flatMap((r) => r.fields).filter((f) => !known.has(f)),
            [],
        );
    });

    test("every field with a default has a row (its own or its parent's), and the row states that default", () => {
        const problems: string[] = [];
        for (const f of fields) {
            if (f.default === undefined) continue;
            const v = f.default.value;
            // Objects are stated through their fields' rows.
            if (typeof v === "object" && v !== null && !Array.isArray(v)) continue;
            const own = rows.find((r) => r.fields.includes(f.path));
            if (own !== undefined) {
                // Several fields in one row: their defaults in the same order, split by ", " or " / ".
                const cell = plain(own.defaultCell);
                const parts = own.fields.length > 1 ? cell.split(/, | \/ /) : [cell];
                const mine = own.fields.length > 1 && parts.length === own.fields.length ? parts[own.fields.indexOf(f.path)]! : cell;
                if (!new RegExp(`^${regexLiteral(written(v))}(?![\\w.])`).test(mine))
                    problems.push(`${f.path}: the schema's default is ${written(v)}, the README says '${own.defaultCell}'`);
                continue;
            }
            const parent = rows.find((r) => r.fields.some((p) => f.path.startsWith(`${p}.`)));
            if (parent === undefined) {
                problems.push(`${f.path}: default ${written(v)}, but no README row names it or its parent`);
                continue;
            }
            // A parent row ("enabled, 200Gi", "2 CPU, 4Gi") names each value default of its fields.
            if (typeof v !== "boolean" && !new RegExp(`(^|[^\\w.])${regexLiteral(written(v))}(?![\\w.])`).test(plain(parent.defaultCell)))
                problems.push(`${f.path}: the schema's default is ${written(v)}, the parent row ${parent.fields[0]} says '${parent.defaultCell}'`);
        }
        assert.deepEqual(problems, []);
    });

    test("the comparison can fail: a changed default is caught", () => {
        const row = rows.find((r) => r.fields.includes("training.numGenerations"))!;
        assert.equal(plain(row.defaultCell), written(fields.find((f) => f.path === "training.numGenerations")!.default!.value));
        assert.notEqual(plain(row.defaultCell), "16");
    });
});

describe("docs say what the code does", () => {
    test("README.md repeats no paragraph (the 'Using it.' block once appeared twice)", () => {
        const paragraphs = README.split(/\n\s*\n/).map((p) => p.trim());
        const seen = new Map<string, number>();
        for (const p of paragraphs) if (p.length >= 160) seen.set(p, (seen.get(p) ?? 0) + 1);
        assert.deepEqual(
            [...seen.entries()].filter(([, n]) => n > 1).map(([p]) => p.slice(0, 80)),
            [],
        );
    });

    test("the Quickstart: a user's first steps (plan, trainer image, pulumi up with the passphrase) before the contributor's npm test", () => {
        const quick = README.slice(README.indexOf("## Quickstart"), README.indexOf("\n## ", README.indexOf("## Quickstart") + 5));
        const user = quick.slice(0, quick.indexOf("### Contributors"));
        assert.ok(quick.includes("### Contributors"), "a Contributors part of its own");
        assert.match(user, /npm run plan -- dev/);
        assert.match(user, /images\.trainer/);
        assert.match(user, /PULUMI_CONFIG_PASSPHRASE/);
        assert.match(user, /pulumi up/);
        assert.doesNotMatch(user, /npm test/, "the user's steps do not start with the 45-minute contributor suite");
        assert.match(quick.slice(quick.indexOf("### Contributors")), /npm test/);
    });

    test("the policy-pack claim says what is enforced and where, not 'mandatory' as a given", () => {
        assert.doesNotMatch(README, /the policy pack mandatory/);
        const prod = fieldRows(README).find((r) => r.fields.includes("prod"))!;
        assert.ok(prod);
        const line = README.split("\n").find((l) => l.startsWith("| `prod` |"))!;
        assert.match(line, /--policy-pack-config policy\/config\.prod\.json/);
        assert.match(line, /nothing checks that it ran/);
    });

    test("components/ingress/README.md's TLS table has every tls.mode of the schema", () => {
        const modes = (platformSchema.shape.ingress as any)._zod.def.innerType.shape.tls._zod.def.innerType.shape.mode._zod.def.innerType.options as string[];
        const ingress = read("components/ingress/README.md");
        const tls = ingress.slice(ingress.indexOf("## TLS"));
        for (const m of modes) assert.match(tls, new RegExp(`mode: ${regexLiteral(m)}\\b`), `tls.mode ${m}`);
    });

    test("components/env/README.md: egress is what the catalog and envs.<name>.egress say, and Docker replicas have a network of their own", () => {
        const env = read("components/env/README.md");
        assert.doesNotMatch(env, /egress stays open/);
        assert.doesNotMatch(env, /everything sits on the private\s+training network/);
        assert.doesNotMatch(env, /capacity responder \(`<router>-responder`, in the router's network namespace\) on the private training network/);
        assert.match(env, /envs\.<name>\.egress/);
    });

    test("python/README.md: the sandbox uid is sandboxes.runAsUser's default, 65532", () => {
        const py = read("python/README.md");
        assert.doesNotMatch(py, /uid 1000\b/);
        assert.match(py, /65532/);
    });
});

describe("plan.md's prod line", () => {
    test("a prod plan says the policy pack runs only when the command names it; a dev plan does not claim it", async () => {
        const os = await import("node:os");
        const { planToDir } = await import("../scripts/lib/plan");
        const { POLICY_PACK_NOTE } = await import("../scripts/lib/plan-markdown");
        const out = fs.mkdtempSync(path.join(os.tmpdir(), "arl-readme-plan-"));
        try {
            await planToDir({ stack: "prod" }, { outDir: path.join(out, "prod") });
            const prod = fs.readFileSync(path.join(out, "prod", "plan.md"), "utf8");
            assert.ok(prod.includes(POLICY_PACK_NOTE));
            assert.doesNotMatch(prod, /policy pack mandatory/);
            assert.match(prod, /--policy-pack policy --policy-pack-config policy\/config\.prod\.json/);
            await planToDir({ stack: "dev" }, { outDir: path.join(out, "dev") });
            assert.doesNotMatch(fs.readFileSync(path.join(out, "dev", "plan.md"), "utf8"), /policy pack/);
        } finally {
            fs.rmSync(out, { recursive: true, force: true });
        }
    });
});
