/**
 * npm run schema [-- --check]
 *
 * Writes the stack file's JSON Schema (schema/stack-config.schema.json, shipped in the package for
 * editors) and the configuration reference (docs/reference/configuration.md), both generated from
 * the zod schemas and components/config/field-docs.ts. `--check` writes nothing and exits 1 when a
 * checked-in file differs from what it would write (test/tooling/schema-docs.test.ts runs the same check).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { STACK_SCHEMA_FILE, stackFileJsonSchema } from "../components/config/json-schema";
import { configurationReference, REFERENCE_FILE } from "./lib/config-reference";

const ROOT = path.resolve(__dirname, "..");

/** Each generated file, relative to the repository, with its content. */
export function generatedFiles(): Record<string, string> {
    return {
        [STACK_SCHEMA_FILE]: `${JSON.stringify(stackFileJsonSchema(), null, 2)}\n`,
        [REFERENCE_FILE]: configurationReference(),
    };
}

function main(argv: readonly string[]): number {
    const check = argv.includes("--check");
    const stale: string[] = [];
    for (const [rel, text] of Object.entries(generatedFiles())) {
        const file = path.join(ROOT, rel);
        const current = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : undefined;
        if (current === text) continue;
        if (check) stale.push(rel);
        else {
            fs.mkdirSync(path.dirname(file), { recursive: true });
            fs.writeFileSync(file, text);
            console.log(`wrote ${rel}`);
        }
    }
    if (stale.length > 0) {
        console.error(`out of date (run npm run schema): ${stale.join(", ")}`);
        return 1;
    }
    return 0;
}

if (require.main === module) process.exit(main(process.argv.slice(2)));
