/**
 * The stack file's JSON Schema, for editors (a YAML language server validates and completes a
 * `Pulumi.<stack>.yaml` with it): generated from the zod schemas (`z.toJSONSchema`, the shape of the
 * config as written: defaulted fields optional) with each field's words from field-docs.ts as its
 * description. Pure: `npm run schema` (scripts/schema.ts) writes it to schema/stack-config.schema.json,
 * and test/tooling/schema-docs.test.ts holds the file equal to this and validates every example stack with it.
 *
 * What it checks is the structure (names, types, enums, patterns, unknown fields); the cross-field
 * rules (GPU and batch arithmetic, sessions, prod pins) stay in the config check that
 * `npm run plan` and `pulumi up` run.
 */
import { z } from "zod";
import { clusterSchema } from "./cluster-schema";
import { CLUSTER_FIELD_DOCS, type FieldDoc, PLATFORM_FIELD_DOCS } from "./field-docs";
import { ALL_RECIPE_NAMES } from "./recipes";
import { platformSchema } from "./schema";
import { CONFIG_NAMESPACE, STACK_KEYS } from "./stack-keys";

/** A JSON Schema node. */
export type JsonSchema = { [key: string]: unknown };

/** The file name the package ships and the docs name (relative to the package root). */
export const STACK_SCHEMA_FILE = "schema/stack-config.schema.json";

/** `[text](link)` as `text`: the editor shows the words, the links are the reference's. */
const plainText = (s: string) => s.replace(/\[([^\]]+)\]\([^)]+\)/g, "$1");

/** A field's description as the editor shows it: its meaning, then its default. */
export function describeField(doc: FieldDoc): string {
    const meaning = plainText(doc.meaning);
    const dflt = plainText(doc.default);
    return dflt === "-" || dflt === "" ? meaning : `${meaning}. Default: ${dflt}`;
}

/**
 * The nodes of a JSON Schema at a field path (`a.b`, `envs.<name>.x`, `teams[].quotas`), one per
 * union branch that has it.
 */
export function nodesAt(schema: JsonSchema, fieldPath: string): JsonSchema[] {
    let nodes: JsonSchema[] = [schema];
    for (const raw of fieldPath.split(".")) {
        const isArray = raw.endsWith("[]");
        const key = isArray ? raw.slice(0, -2) : raw;
        nodes = nodes
            .flatMap((n) => branches(n))
            .flatMap((n) => {
                if (key === "<name>") return typeof n.additionalProperties === "object" ? [n.additionalProperties as JsonSchema] : [];
                const child = (n.properties as Record<string, JsonSchema> | undefined)?.[key];
                return child === undefined ? [] : [child];
            });
        if (isArray) nodes = nodes.flatMap((n) => branches(n)).flatMap((n) => (typeof n.items === "object" ? [n.items as JsonSchema] : []));
    }
    return nodes;
}

/** A node and, for a union, each of its branches. */
function branches(n: JsonSchema): JsonSchema[] {
    const options = [...((n.oneOf as JsonSchema[] | undefined) ?? []), ...((n.anyOf as JsonSchema[] | undefined) ?? [])];
    return options.length === 0 ? [n] : [n, ...options.flatMap(branches)];
}

/** The config as written (`io: input`: defaulted fields optional), each documented field described. */
export function configJsonSchema(schema: z.ZodType, docs: Readonly<Record<string, FieldDoc>>): JsonSchema {
    const out = z.toJSONSchema(schema, { io: "input", unrepresentable: "any", target: "draft-2020-12" }) as JsonSchema;
    delete out.$schema;
    for (const [fieldPath, doc] of Object.entries(docs)) {
        const nodes = nodesAt(out, fieldPath);
        if (nodes.length === 0) throw new Error(`field-docs.ts: ${fieldPath} is not a field of the schema`);
        for (const n of nodes) n.description = describeField(doc);
    }
    return out;
}

/**
 * The same with nothing required but union discriminators (`kind`): what a stack writes over a
 * recipe, which supplies the rest (objects merge key by key before the check).
 */
export function overRecipe(node: JsonSchema): JsonSchema {
    const copy: JsonSchema = {};
    for (const [k, v] of Object.entries(node)) {
        if (k === "required" && Array.isArray(v)) {
            const props = (node.properties ?? {}) as Record<string, JsonSchema>;
            const kept = v.filter((name: string) => props[name]?.const !== undefined);
            if (kept.length > 0) copy.required = kept;
        } else if (Array.isArray(v)) copy[k] = v.map((x) => (typeof x === "object" && x !== null ? overRecipe(x as JsonSchema) : x));
        else if (typeof v === "object" && v !== null)
            copy[k] = k === "properties" ? mapValues(v as Record<string, JsonSchema>, overRecipe) : overRecipe(v as JsonSchema);
        else copy[k] = v;
    }
    return copy;
}

const mapValues = <T, U>(o: Record<string, T>, f: (t: T) => U): Record<string, U> => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, f(v)]));

/** `agent-rl-infra:platform` as a complete config, `recipe` one of the recipes' names. */
export function platformJsonSchema(): JsonSchema {
    const platform = configJsonSchema(platformSchema, PLATFORM_FIELD_DOCS);
    const props = platform.properties as Record<string, JsonSchema>;
    props.recipe = { ...props.recipe, enum: [...ALL_RECIPE_NAMES] };
    return platform;
}

/** The stack file (`Pulumi.<stack>.yaml`): Pulumi's own keys, and this project's config keys under `config`. */
export function stackFileJsonSchema(): JsonSchema {
    const platform = platformJsonSchema();
    const props = platform.properties as Record<string, JsonSchema>;
    // A stack over a recipe writes runId and target itself (a recipe has neither) and any of the rest.
    const withRecipe = overRecipe(platform);
    (withRecipe.properties as Record<string, JsonSchema>).target = props.target!;
    withRecipe.required = ["recipe", "runId", "target"];
    const secret: JsonSchema = {
        description: "a secret: set it with pulumi config set --secret (the file holds it encrypted)",
        anyOf: [{ type: "object", properties: { secure: { type: "string" } }, required: ["secure"], additionalProperties: false }, { type: "string" }],
    };
    const key = (k: string) => `${CONFIG_NAMESPACE}:${k}`;
    const ownKeys = STACK_KEYS.map(key);
    return {
        $schema: "https://json-schema.org/draft/2020-12/schema",
        title: "agent-rl-infra stack file (Pulumi.<stack>.yaml)",
        description: `A Pulumi stack file of agent-rl-infra: ${key("platform")} (a run stack) or ${key("cluster")} (a cluster stack), and its secrets. Generated from the zod schemas by npm run schema.`,
        type: "object",
        properties: {
            config: {
                type: "object",
                properties: {
                    [key("platform")]: {
                        description: "The run stack's whole config: a recipe and what the stack changes, or every field (docs/reference/configuration.md).",
                        if: { type: "object", required: ["recipe"] },
                        // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then/else keywords
                        then: withRecipe,
                        else: platform,
                    },
                    [key("cluster")]: {
                        description: "A cluster stack's config: what every run on the cluster shares (docs/guides/platform-teams.md).",
                        ...configJsonSchema(clusterSchema, CLUSTER_FIELD_DOCS),
                    },
                    [key("hfToken")]: { ...secret, description: "Hugging Face token (gated models, Hub pushes): pulumi config set --secret hfToken hf_..." },
                    [key("registryAuth")]: {
                        ...secret,
                        description:
                            'Private-registry credentials for every image the stack pulls: a Docker config.json ({"auths": {...}}), pulumi config set --secret registryAuth "$(cat config.json)"',
                    },
                },
                patternProperties: {
                    [`^${CONFIG_NAMESPACE}:ingressKey-.+$`]: {
                        ...secret,
                        description: "An ingress bearer key supplied instead of generated: pulumi config set --secret ingressKey-<name> <key>",
                    },
                },
                // This project's keys are exactly these; other namespaces (kubernetes:, pulumi:) are not ours.
                propertyNames: {
                    anyOf: [{ not: { pattern: `^${CONFIG_NAMESPACE}:` } }, { enum: ownKeys }, { pattern: `^${CONFIG_NAMESPACE}:ingressKey-.+$` }],
                },
            },
        },
    };
}
