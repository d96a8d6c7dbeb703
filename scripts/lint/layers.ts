/**
 * The folder-direction rule: imports go one way, from the entry points down to the pure data.
 *
 *   components/shared    facts and idioms every layer may use (no project imports but shared)
 *   components/config    the config: schema, defaults, rules, names, catalog (+ shared)
 *   components/<x>       one component each: env, ingress, sandbox, training, cluster, monitoring (+ config,
 *                        shared; never another component: the Platform hands outputs across)
 *   components/platform  the Platform and its resolve step (+ every component)
 *   components/preflight the checks of a stack's live target (+ platform, every component,
 *                        config, shared): it reads the plan the Platform resolves and the specs
 *                        the components register. Nothing below it imports it (the Platform does
 *                        not run it); only entry points do: the stack program (its opt-in
 *                        `preflight` step), components/index.ts (the package's face, free to
 *                        export it), scripts/preflight.ts (the CLI), bench/ and test/.
 *   programs             index.ts (the stack program), components/index.ts, policy/ (+ anything
 *                        under components/, never scripts/)
 *   tools                scripts/ (thin CLIs and what only they use), bench/, test/ (+ anything)
 *
 * Nothing under components/ may import a program or a tool, and no program imports scripts/:
 * what the program or the library runs is a module under components/. Run: `npm run lint`
 * (this is part of it); exits non-zero listing every import that goes the wrong way.
 */
import * as fs from "node:fs";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "..", "..");
/** The programs outside components/: the stack program and the policy pack. */
const programsOf = (root: string) => [path.join(root, "index.ts"), path.join(root, "policy")];

type Layer = "shared" | "config" | "component" | "platform" | "preflight" | "program" | "tool";

const inside = (dir: string, file: string) => {
    const rel = path.relative(dir, file);
    return rel === "" || !(rel.startsWith("..") || path.isAbsolute(rel));
};

/** The layer of a file, and for a component its folder. */
function layerOf(file: string, root: string): { layer: Layer; folder?: string } {
    const components = path.join(root, "components");
    if (programsOf(root).some((p) => inside(p, file))) return { layer: "program" };
    if (!inside(components, file)) return { layer: "tool" };
    const [folder, ...rest] = path.relative(components, file).split(path.sep);
    if (rest.length === 0) return { layer: "program" }; // components/index.ts: the package's public face
    if (folder === "shared") return { layer: "shared" };
    if (folder === "config") return { layer: "config" };
    if (folder === "platform") return { layer: "platform" };
    if (folder === "preflight") return { layer: "preflight" };
    return { layer: "component", folder };
}

const ENTRY: readonly Layer[] = ["program", "tool"];

/** Whether `from` may import `to` (files of the tree at `root`). */
export function allowed(from: string, to: string, root = ROOT): boolean {
    const a = layerOf(from, root);
    const b = layerOf(to, root);
    switch (a.layer) {
        case "tool":
            return true;
        case "program":
            return b.layer !== "tool";
        case "preflight":
            return !ENTRY.includes(b.layer);
        case "platform":
            return !ENTRY.includes(b.layer) && b.layer !== "preflight";
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
        if (e.isDirectory()) {
            if (e.name !== "node_modules") walk(p, out);
        } else if (e.name.endsWith(".ts")) out.push(p);
    }
    return out;
}

/** Every file the rule restricts: components/ and the programs (tools may import anything). */
function restricted(root: string): string[] {
    const programs = programsOf(root).filter((p) => fs.existsSync(p));
    return [...walk(path.join(root, "components")), ...programs.flatMap((p) => (fs.statSync(p).isDirectory() ? walk(p) : [p]))];
}

/** Every import of the tree at `root` (the repository's, unless a test gives another) that goes the wrong way. */
export function violations(root = ROOT): string[] {
    const problems: string[] = [];
    for (const file of restricted(root)) {
        for (const target of importsOf(file, fs.readFileSync(file, "utf8"))) {
            if (!allowed(file, target, root)) {
                const a = layerOf(file, root);
                const b = layerOf(target, root);
                problems.push(
                    `${path.relative(root, file)} imports ${path.relative(root, target)}: ${a.folder ?? a.layer} may not depend on ${b.folder ?? b.layer} (imports go tools -> programs -> preflight -> platform -> components -> config -> shared)`,
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
