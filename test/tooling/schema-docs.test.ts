/**
 * The configuration reference and the stack file's JSON Schema against the zod schemas: the checked-in
 * docs/reference/configuration.md and schema/stack-config.schema.json are what `npm run schema` writes;
 * every field of the schemas has its words in components/config/field-docs.ts (its own entry or an
 * ancestor's), no entry names a field the schemas lack, and each default written there is the one zod
 * applies; every example stack (stacks/ and the guides') validates against the JSON Schema, which
 * refuses what the config refuses structurally. The validator is ajv 8 (draft 2020-12), already in the
 * lock through kubernetes-models' validator.
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, test } from "node:test";
import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import ts from "typescript";
import { parse as parseYaml } from "yaml";
import { ALL_RECIPE_NAMES, deepMerge, RECIPES, platformSchema } from "../../components/config";
import { clusterSchema } from "../../components/config/cluster-schema";
import { CLUSTER_FIELD_DOCS, type FieldDoc, PLATFORM_FIELD_DOCS } from "../../components/config/field-docs";
import { STACK_SCHEMA_FILE, stackFileJsonSchema } from "../../components/config/json-schema";
import { generatedFiles } from "../../scripts/schema";
import { docStacks, REPO } from "../helpers/docs";

interface SchemaField {
    readonly path: string;
    /** The default zod applies (a `.default()`, or a `.prefault()` object's own value), when there is one. */
    readonly default?: { readonly value: unknown };
}

/** Every field path of a zod schema (records as `<name>`, list items as `[]`), with its default. */
export function schemaFields(schema: unknown, at = "", inherited?: { value: unknown }, out: SchemaField[] = []): SchemaField[] {
    const def = (schema as { _zod: { def: Record<string, any> } })._zod.def;
    const here = (value: unknown) => ({ value });
    switch (def.type) {
        case "optional":
        case "nullable":
            return schemaFields(def.innerType, at, inherited, out);
        case "default":
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
        case "array": {
            out.push({ path: at, ...(inherited ? { default: inherited } : {}) });
            const item = (def.element as { _zod: { def: { type: string } } })._zod.def.type;
            return item === "object" ? schemaFields(def.element, `${at}[]`, undefined, out) : out;
        }
        case "union":
            for (const o of def.options) schemaFields(o, at, inherited, out);
            return out;
        default:
            out.push({ path: at, ...(inherited ? { default: inherited } : {}) });
            return out;
    }
}

/** The entry that documents a field: its own, else its nearest ancestor's (`a.b[].c` -> `a.b[]` -> `a.b` -> `a`). */
function documentedBy(field: string, docs: Readonly<Record<string, FieldDoc>>): string | undefined {
    let p = field;
    for (;;) {
        if (docs[p] !== undefined) return p;
        if (p.endsWith("[]")) p = p.slice(0, -2);
        else if (p.includes(".")) p = p.slice(0, p.lastIndexOf("."));
        else return undefined;
    }
}

/** A default as the docs write it. */
const written = (v: unknown): string => (Array.isArray(v) ? `[${v.join(", ")}]` : String(v));
const plain = (s: string) => s.replace(/[`*]/g, "").trim();
const regexLiteral = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Every disagreement between a schema's fields and its docs table. */
export function docProblems(schema: unknown, docs: Readonly<Record<string, FieldDoc>>): string[] {
    const fields = schemaFields(schema);
    const known = new Set(fields.map((f) => f.path));
    const problems: string[] = [];
    for (const p of Object.keys(docs)) if (!known.has(p)) problems.push(`${p}: documented, but not a field of the schema`);
    for (const f of fields) {
        const by = documentedBy(f.path, docs);
        // An object or a record whose own fields have entries is documented through them (`model`, `envs`).
        if (by === undefined && Object.keys(docs).some((d) => d.startsWith(`${f.path}.`) || d.startsWith(`${f.path}[]`))) continue;
        if (by === undefined) {
            problems.push(`${f.path}: a field of the schema without an entry in components/config/field-docs.ts (its own or an ancestor's)`);
            continue;
        }
        if (f.default === undefined) continue;
        const v = f.default.value;
        // Objects are stated through their fields' entries.
        if (typeof v === "object" && v !== null && !Array.isArray(v)) continue;
        const cell = plain(docs[by]!.default);
        if (by === f.path) {
            if (!new RegExp(`^${regexLiteral(written(v))}(?![\\w.])`).test(cell))
                problems.push(`${f.path}: the schema's default is ${written(v)}, field-docs.ts says '${docs[by]!.default}'`);
        } else if (typeof v !== "boolean" && !new RegExp(`(^|[^\\w.])${regexLiteral(written(v))}(?![\\w.])`).test(cell)) {
            // A parent entry ("enabled, 200Gi", "2 CPU, 4Gi") names each value default of its fields.
            problems.push(`${f.path}: the schema's default is ${written(v)}, the entry ${by} says '${docs[by]!.default}'`);
        }
    }
    return problems;
}

/** The schema files whose fields' words live in field-docs.ts, relative to the repository. */
const SCHEMA_FILES = ["components/config/schema.ts", "components/config/cluster-schema.ts"];

/**
 * Every JSDoc block inside a top-level declaration of a schema file (above a field key, a union
 * branch, a nested object): a field's words written a second time beside field-docs.ts. A top-level
 * declaration's own JSDoc (an exported constant, a helper) is code's, and stays.
 */
export function fieldComments(file: string, text: string): string[] {
    const src = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const own = new Set(src.statements.flatMap((st) => (ts.getLeadingCommentRanges(text, st.getFullStart()) ?? []).map((c) => c.pos)));
    const found = new Map<number, string>();
    const visit = (n: ts.Node) => {
        for (const c of ts.getLeadingCommentRanges(text, n.getFullStart()) ?? [])
            if (text.startsWith("/**", c.pos) && !own.has(c.pos)) {
                const line = src.getLineAndCharacterOfPosition(c.pos).line + 1;
                found.set(c.pos, `${file}:${line}: a JSDoc comment inside a schema declaration; a field's words belong in components/config/field-docs.ts`);
            }
        ts.forEachChild(n, visit);
    };
    for (const st of src.statements) if (ts.isVariableStatement(st)) visit(st);
    return [...found.values()];
}

describe("a field's words have one home, field-docs.ts", () => {
    test("the schema files write no field's words: no JSDoc inside a schema declaration", () => {
        for (const rel of SCHEMA_FILES) assert.deepEqual(fieldComments(rel, fs.readFileSync(path.join(REPO, rel), "utf8")), []);
    });

    test("the check can fail: a JSDoc above a field key, a nested field and a union branch are each caught", () => {
        const rel = "components/config/schema.ts";
        const text = fs.readFileSync(path.join(REPO, rel), "utf8");
        const again = text
            .replace("    runId: dnsLabel.max(24),", "    /** Run id: names the Job. */\n    runId: dnsLabel.max(24),")
            .replace("            for: promDuration", "            /** How long a condition holds. */\n            for: promDuration")
            .replace(
                '    z.strictObject({ kind: z.literal("kube-dns") }),',
                '    /** The kube-dns pods. */\n    z.strictObject({ kind: z.literal("kube-dns") }),',
            );
        const problems = fieldComments(rel, again);
        assert.equal(problems.length, 3, problems.join("\n"));
        for (const p of problems) assert.match(p, /^components\/config\/schema\.ts:\d+: a JSDoc comment inside a schema declaration/);
    });
});

describe("the configuration reference and the JSON Schema are generated from the zod schemas", () => {
    test("the checked-in files are what `npm run schema` writes", () => {
        for (const [rel, text] of Object.entries(generatedFiles()))
            assert.ok(fs.readFileSync(path.join(REPO, rel), "utf8") === text, `${rel} is out of date: run npm run schema`);
    });

    test("every field of agent-rl-infra:platform and :cluster is documented, with the default zod applies", () => {
        assert.deepEqual(docProblems(platformSchema, PLATFORM_FIELD_DOCS), []);
        assert.deepEqual(docProblems(clusterSchema, CLUSTER_FIELD_DOCS), []);
    });

    test("the check can fail: a changed default, a missing entry and an entry for no field are each caught", () => {
        const docs = { ...PLATFORM_FIELD_DOCS };
        docs["training.numGenerations"] = { ...docs["training.numGenerations"]!, default: "16" };
        delete docs["training.maxInflight"];
        docs["training.learningRat"] = { default: "-", meaning: "a typo" };
        assert.deepEqual(docProblems(platformSchema, docs).sort(), [
            "training.learningRat: documented, but not a field of the schema",
            "training.maxInflight: a field of the schema without an entry in components/config/field-docs.ts (its own or an ancestor's)",
            "training.numGenerations: the schema's default is 8, field-docs.ts says '16'",
        ]);
    });

    test("the reference has one row per documented field, with the words of field-docs.ts", () => {
        const ref = fs.readFileSync(path.join(REPO, "docs/reference/configuration.md"), "utf8");
        const rows = ref.split("\n").filter((l) => /^\| `/.test(l));
        assert.equal(rows.length, Object.keys(PLATFORM_FIELD_DOCS).length + Object.keys(CLUSTER_FIELD_DOCS).length);
        const nodes = rows.find((r) => r.startsWith("| `training.nodes` |"))!;
        assert.match(nodes, /\| integer > 0 \| 1 \|/);
    });

    test("the package ships the JSON Schema", () => {
        const pkg = JSON.parse(fs.readFileSync(path.join(REPO, "package.json"), "utf8"));
        assert.ok((pkg.files as string[]).includes("schema/"));
        assert.equal(pkg.exports["./stack-config.schema.json"], `./${STACK_SCHEMA_FILE}`);
    });
});

describe("the stack file's JSON Schema", () => {
    const ajv = new Ajv2020({ allErrors: true, strict: true, strictRequired: false, allowUnionTypes: true });
    addFormats(ajv);
    const validate = ajv.compile(stackFileJsonSchema());
    const errors = () => ajv.errorsText(validate.errors, { separator: "\n" });
    const stackFiles = fs.readdirSync(path.join(REPO, "stacks")).filter((f) => /^Pulumi\..+\.yaml$/.test(f));

    test("every stack in stacks/ validates, and names the schema on its first line", () => {
        assert.ok(stackFiles.length >= 4);
        for (const f of stackFiles) {
            const text = fs.readFileSync(path.join(REPO, "stacks", f), "utf8");
            assert.ok(validate(parseYaml(text)), `${f}: ${errors()}`);
            assert.equal(text.split("\n")[0], "# yaml-language-server: $schema=../schema/stack-config.schema.json", f);
        }
    });

    test("every stack file a guide shows validates", () => {
        const stacks = docStacks();
        assert.ok(stacks.length >= 5);
        for (const s of stacks) assert.ok(validate(parseYaml(s.text)), `${s.doc} Pulumi.${s.name}.yaml: ${errors()}`);
    });

    test("every recipe validates as a stack over it, and as a complete config without it", () => {
        for (const r of ALL_RECIPE_NAMES) {
            const over = { config: { "agent-rl-infra:platform": { recipe: r, runId: "run-1", target: { kind: "kubernetes", context: "c" } } } };
            assert.ok(validate(over), `${r}: ${errors()}`);
            const { description: _d, ...recipe } = RECIPES[r];
            const full = deepMerge(recipe as Record<string, unknown>, { runId: "run-1", target: { kind: "kubernetes", context: "c" } });
            assert.ok(validate({ config: { "agent-rl-infra:platform": full } }), `${r} written out: ${errors()}`);
            assert.ok(platformSchema.safeParse(full).success, `${r}: zod parses it too`);
        }
    });

    test("it refuses what the config refuses: an unknown field, a wrong type or choice, a misspelled key, a missing required field", () => {
        const base = () => parseYaml(fs.readFileSync(path.join(REPO, "stacks", "Pulumi.dev.yaml"), "utf8"));
        const cases: Array<[string, (d: any) => void, RegExp]> = [
            ["unknown field", (d) => (d.config["agent-rl-infra:platform"].training = { learningRat: 1 }), /must NOT have additional properties/],
            ["wrong type", (d) => (d.config["agent-rl-infra:platform"].training = { numGenerations: "8" }), /must be integer/],
            ["wrong choice", (d) => (d.config["agent-rl-infra:platform"].preflight = "strict"), /must be equal to one of the allowed values/],
            ["unknown recipe", (d) => (d.config["agent-rl-infra:platform"].recipe = "mbpp"), /must be equal to one of the allowed values/],
            ["misspelled own key", (d) => (d.config["agent-rl-infra:hfTokn"] = "x"), /property name must be valid/],
            ["bad runId", (d) => (d.config["agent-rl-infra:platform"].runId = "Dev_001"), /must match pattern/],
            [
                "no recipe, no training",
                (d) => {
                    delete d.config["agent-rl-infra:platform"].recipe;
                },
                /must have required property 'model'/,
            ],
        ];
        for (const [what, change, message] of cases) {
            const doc = base();
            assert.ok(validate(doc), `the dev stack validates before: ${errors()}`);
            change(doc);
            assert.equal(validate(doc), false, what);
            assert.match(errors(), message, what);
        }
        // Other namespaces are Pulumi's and the providers': not ours to refuse.
        const other = base();
        other.config["kubernetes:context"] = "x";
        other.config["agent-rl-infra:ingressKey-operators"] = { secure: "AAAB" };
        assert.ok(validate(other), errors());
    });
});
