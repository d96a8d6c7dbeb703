/**
 * The folder-direction rule: imports go one way, from the entry points down to the pure data.
 *
 *   components/shared   facts and idioms every layer may use (no project imports but shared)
 *   components/config   the config: schema, defaults, rules, names, catalog (+ shared)
 *   components/<x>      one component each: env, ingress, sandbox, training (+ config, shared;
 *                       never another component: the Platform hands outputs across)
 *   components/platform the Platform and its resolve step (+ every component)
 *   entry points        index.ts, components/index.ts, scripts/, bench/, test/, policy/ (+ anything)
 *
 * Nothing under components/ may import an entry point. Run: `npm run lint` (this is part of it);
 * exits non-zero listing every import that goes the wrong way.
 */
import * as fs from "node:fs";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "..", "..");
const COMPONENTS = path.join(ROOT, "components");

type Layer = "shared" | "config" | "component" | "platform" | "entry";

/** The layer of a file, and for a component its folder. */
function layerOf(file: string): { layer: Layer; folder?: string } {
    const rel = path.relative(COMPONENTS, file);
    if (rel.startsWith("..") || path.isAbsolute(rel)) return { layer: "entry" };
    const [folder, ...rest] = rel.split(path.sep);
    if (rest.length === 0) return { layer: "entry" }; // components/index.ts: the package's public face
    if (folder === "shared") return { layer: "shared" };
    if (folder === "config") return { layer: "config" };
    if (folder === "platform") return { layer: "platform" };
    return { layer: "component", folder };
}

/** Whether `from` may import `to`. */
export function allowed(from: string, to: string): boolean {
    const a = layerOf(from);
    const b = layerOf(to);
    switch (a.layer) {
        case "entry":
            return true;
        case "platform":
            return b.layer !== "entry";
        case "component":
            return b.layer === "shared" || b.layer === "config" || (b.layer === "component" && b.folder === a.folder);
        case "config":
            return b.layer === "shared" || b.layer === "config";
        case "shared":
            return b.layer === "shared";
    }
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)|require\(\s*["']([^"']+)["']\s*\)/g;

/** Project-relative imports of a TypeScript source, resolved to files. */
export function importsOf(file: string, text: string): string[] {
    const out: string[] = [];
    for (const m of text.matchAll(IMPORT)) {
        const spec = m[1] ?? m[2] ?? m[3];
        if (spec === undefined || !spec.startsWith(".")) continue;
        const base = path.resolve(path.dirname(file), spec);
        const candidates = [base, `${base}.ts`, path.join(base, "index.ts")];
        out.push(candidates.find((c) => fs.existsSync(c) && fs.statSync(c).isFile()) ?? `${base}.ts`);
    }
    return out;
}

function walk(dir: string, out: string[] = []): string[] {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) walk(p, out);
        else if (e.name.endsWith(".ts")) out.push(p);
    }
    return out;
}

export function violations(): string[] {
    const problems: string[] = [];
    for (const file of walk(COMPONENTS)) {
        for (const target of importsOf(file, fs.readFileSync(file, "utf8"))) {
            if (!allowed(file, target)) {
                const a = layerOf(file);
                const b = layerOf(target);
                problems.push(
                    `${path.relative(ROOT, file)} imports ${path.relative(ROOT, target)}: ${a.folder ?? a.layer} may not depend on ${b.folder ?? b.layer} (imports go entry -> platform -> components -> config -> shared)`,
                );
            }
        }
    }
    return problems;
}

if (require.main === module) {
    const problems = violations();
    for (const p of problems) process.stderr.write(`layers: ${p}\n`);
    process.stderr.write(`layers: ${problems.length === 0 ? "every import goes the right way" : `${problems.length} import(s) go the wrong way`}\n`);
    process.exit(problems.length === 0 ? 0 : 1);
}
