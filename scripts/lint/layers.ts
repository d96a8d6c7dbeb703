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
 * what the program or the library runs is a module under components/.
 *
 * And no loop between files: no file may reach itself through its imports (type-only imports
 * included: a loop of types is still two modules that cannot be read apart), anywhere in the tree
 * but node_modules. Each loop is named file by file.
 *
 * Run: `npm run lint` (this is part of it); exits non-zero listing every import that goes the
 * wrong way and every loop.
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

/** Folders no rule reads: packages, build output, the offline plans, version control. */
const UNREAD = new Set(["node_modules", "dist", "out", ".git"]);

function walk(dir: string, out: string[] = []): string[] {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) {
            if (!UNREAD.has(e.name)) walk(p, out);
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

/**
 * Every import loop between the TypeScript files of the tree at `root`: the strongly connected
 * groups of the import graph (Tarjan's algorithm), each told as its files and the shortest loop
 * from the first of them: "2 files: a.ts, b.ts (a.ts -> b.ts -> a.ts)".
 */
export function loops(root = ROOT): string[] {
    const files = walk(root).sort();
    const edges = new Map(files.map((f) => [f, [...new Set(importsOf(f, fs.readFileSync(f, "utf8")))].filter((t) => t !== f).sort()]));
    return stronglyConnected(files, (f) => edges.get(f) ?? [])
        .filter((group) => group.length > 1)
        .sort((a, b) => a[0].localeCompare(b[0]))
        .map((group) => {
            const rel = (f: string) => path.relative(root, f);
            const loop = shortestLoop(group, (f) => edges.get(f) ?? []);
            return `${group.length} files: ${group.map(rel).join(", ")} (${loop.map(rel).join(" -> ")})`;
        });
}

/** Tarjan's strongly connected components, iterative (a deep import chain must not overflow the stack). */
function stronglyConnected(nodes: readonly string[], next: (n: string) => readonly string[]): string[][] {
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const onStack = new Set<string>();
    const stack: string[] = [];
    const groups: string[][] = [];
    let counter = 0;
    for (const start of nodes) {
        if (index.has(start)) continue;
        const work: { node: string; i: number }[] = [{ node: start, i: 0 }];
        index.set(start, counter);
        low.set(start, counter++);
        stack.push(start);
        onStack.add(start);
        while (work.length > 0) {
            const top = work[work.length - 1];
            const succ = next(top.node);
            if (top.i < succ.length) {
                const s = succ[top.i++];
                if (!index.has(s)) {
                    index.set(s, counter);
                    low.set(s, counter++);
                    stack.push(s);
                    onStack.add(s);
                    work.push({ node: s, i: 0 });
                } else if (onStack.has(s)) low.set(top.node, Math.min(low.get(top.node)!, index.get(s)!));
                continue;
            }
            work.pop();
            if (work.length > 0) {
                const parent = work[work.length - 1].node;
                low.set(parent, Math.min(low.get(parent)!, low.get(top.node)!));
            }
            if (low.get(top.node) === index.get(top.node)) {
                const group: string[] = [];
                let n: string;
                do {
                    n = stack.pop()!;
                    onStack.delete(n);
                    group.push(n);
                } while (n !== top.node);
                groups.push(group.sort());
            }
        }
    }
    return groups;
}

/** The shortest loop from the group's first file back to itself, through the group's files. */
function shortestLoop(group: readonly string[], next: (n: string) => readonly string[]): string[] {
    const members = new Set(group);
    const start = group[0];
    const prev = new Map<string, string>();
    const queue = [start];
    while (queue.length > 0) {
        const n = queue.shift()!;
        for (const s of next(n)) {
            if (!members.has(s)) continue;
            if (s === start) {
                const loop = [start];
                for (let p = n; p !== start; p = prev.get(p)!) loop.unshift(p);
                return [start, ...loop];
            }
            if (prev.has(s)) continue;
            prev.set(s, n);
            queue.push(s);
        }
    }
    return [start]; // unreachable: every file of a strongly connected group reaches every other
}

if (require.main === module) {
    const loopsFound = loops();
    for (const l of loopsFound) process.stderr.write(`layers: import loop: ${l}\n`);
    if (loopsFound.length > 0)
        process.stderr.write(`layers: ${loopsFound.length} import loop(s) between files: move what both sides need to a file below both\n`);
    const problems = violations();
    for (const p of problems) process.stderr.write(`layers: ${p}\n`);
    process.stderr.write(`layers: ${problems.length === 0 ? "every import goes the right way" : `${problems.length} import(s) go the wrong way`}\n`);
    process.exit(problems.length === 0 && loopsFound.length === 0 ? 0 : 1);
}
