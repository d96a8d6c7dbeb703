/**
 * A fresh consumer project for the packed library, installed offline: its package-lock.json is
 * cut from this repository's own (the dependency closure of the library's runtime dependencies,
 * plus typescript and @types/node), so `npm ci --offline` takes every tarball from the npm cache
 * the repository's own `npm ci` filled, and needs no network at all.
 */
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";

interface LockEntry {
    readonly version?: string;
    readonly dependencies?: Record<string, string>;
    readonly optionalDependencies?: Record<string, string>;
    readonly [k: string]: unknown;
}

/** The lock path `name` resolves to from the package at lock path `from` (Node's lookup, nearest node_modules first). */
function resolveInLock(packages: Readonly<Record<string, LockEntry>>, from: string, name: string): string | undefined {
    let base = from;
    for (;;) {
        const candidate = `${base ? `${base}/` : ""}node_modules/${name}`;
        if (packages[candidate] !== undefined) return candidate;
        if (base === "") return undefined;
        const i = base.lastIndexOf("/node_modules/");
        base = i >= 0 ? base.slice(0, i) : "";
    }
}

/** Lock paths of everything `roots` need, transitively. Throws on a dependency the lock cannot resolve. */
export function lockClosure(packages: Readonly<Record<string, LockEntry>>, roots: readonly string[]): string[] {
    const seen = new Set<string>();
    const stack = roots.map((r) => {
        const p = resolveInLock(packages, "", r);
        if (p === undefined) throw new Error(`package-lock.json has no ${r}`);
        return p;
    });
    while (stack.length > 0) {
        const p = stack.pop()!;
        if (seen.has(p)) continue;
        seen.add(p);
        const e = packages[p]!;
        for (const [name, optional] of [
            ...Object.keys(e.dependencies ?? {}).map((n) => [n, false] as const),
            ...Object.keys(e.optionalDependencies ?? {}).map((n) => [n, true] as const),
        ]) {
            const r = resolveInLock(packages, p, name);
            if (r === undefined) {
                if (optional) continue;
                throw new Error(`package-lock.json: ${p} needs ${name}, which it does not hold`);
            }
            stack.push(r);
        }
    }
    return [...seen].sort();
}

/**
 * Writes `dir`/package.json and package-lock.json for a project depending on `tarball` (the packed
 * library) and the repository's typescript and @types/node, every version as the repository pins it.
 */
export function writeConsumerProject(repo: string, tarball: string, dir: string): void {
    const pkg = JSON.parse(fs.readFileSync(path.join(repo, "package.json"), "utf8"));
    const lock = JSON.parse(fs.readFileSync(path.join(repo, "package-lock.json"), "utf8"));
    const packages: Record<string, LockEntry> = lock.packages;
    const tools = { typescript: pkg.devDependencies.typescript, "@types/node": pkg.devDependencies["@types/node"] };
    const rel = `file:${path.relative(dir, tarball)}`;
    const dependencies = { [pkg.name]: rel, ...tools };
    const integrity = `sha512-${crypto.createHash("sha512").update(fs.readFileSync(tarball)).digest("base64")}`;
    const entries: Record<string, unknown> = {
        "": { name: "consumer", version: "1.0.0", dependencies },
        [`node_modules/${pkg.name}`]: {
            version: pkg.version,
            resolved: rel,
            integrity,
            license: pkg.license,
            dependencies: pkg.dependencies,
            engines: pkg.engines,
        },
    };
    for (const p of lockClosure(packages, [...Object.keys(pkg.dependencies), ...Object.keys(tools)])) {
        // The consumer's own tree: nothing in it is a dev dependency of the consumer.
        const { dev: _dev, devOptional: _devOptional, peer: _peer, ...entry } = packages[p]!;
        entries[p] = entry;
    }
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, "package.json"), `${JSON.stringify({ name: "consumer", version: "1.0.0", private: true, dependencies }, null, 2)}\n`);
    fs.writeFileSync(
        path.join(dir, "package-lock.json"),
        `${JSON.stringify({ name: "consumer", version: "1.0.0", lockfileVersion: 3, requires: true, packages: entries }, null, 2)}\n`,
    );
}
