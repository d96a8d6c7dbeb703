/**
 * `npm test`'s scheduler: which fixtures a test file needs, and which job to start next.
 *
 * The run is CPU-bound on a 2-core machine, and its longest chain is the API server and engine
 * fixtures' Go builds, then the files that start a simulated cluster. So each job starts as soon as
 * the fixtures it needs are built (a file that needs none starts while the Go builds run), at most
 * `whileBuilding` jobs at once while the two large builds run, and afterwards up to `total` at once,
 * `cluster` of them holding a simulated cluster (the engine tests' lock, test/helpers/engine-checks.ts),
 * and one at a time of each group. Jobs are tried in the order given: the caller puts the long ones
 * first.
 */
import * as fs from "node:fs";
import * as path from "node:path";

/** What the tests need built: the Go-built fixtures, the trainer-side Python venv and the Harbor venv (Python 3.13). */
export const FIXTURES = ["apiserver", "engine", "sandbox", "jobset", "node", "venv", "harbor"] as const;
export type Fixture = (typeof FIXTURES)[number];

/** How a file (or a module it imports) shows that it needs a fixture: the build script it runs. */
const NEEDS: ReadonlyArray<readonly [Fixture, RegExp]> = [
    ["apiserver", /test\/apiserver\/build\.sh|"apiserver", "build\.sh"/],
    ["engine", /test\/engine\/build\.sh|"engine", "build\.sh"/],
    ["sandbox", /test\/sandbox-controller\/build\.sh|"sandbox-controller", "build\.sh"/],
    ["jobset", /test\/jobset-controller\/build\.sh|"jobset-controller", "build\.sh"/],
    ["node", /test\/node\/build\.sh|NODE_SCRIPTS, "build\.sh"/],
    ["venv", /python\/run-tests\.sh/],
    ["harbor", /test\/harbor\/(build|run-tests)\.sh/],
];

/** Relative import specifiers of a TypeScript/JavaScript source, in every form (static, dynamic, re-export). */
function relativeImports(text: string): string[] {
    return [...text.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)].map((m) => m[1]!);
}

function resolveImport(from: string, spec: string): string | undefined {
    const base = path.resolve(path.dirname(from), spec);
    for (const candidate of [base, `${base}.ts`, path.join(base, "index.ts"), base.replace(/\.js$/, ".ts")]) {
        if (fs.existsSync(candidate) && fs.statSync(candidate).isFile()) return candidate;
    }
    return undefined;
}

/**
 * The fixtures `file` needs: those whose build script it, or any project module it imports
 * (followed through relative imports), names. Sorted, each once.
 */
export function fixturesNeeded(file: string): Fixture[] {
    const seen = new Set<string>();
    const found = new Set<Fixture>();
    const stack = [path.resolve(file)];
    while (stack.length > 0) {
        const f = stack.pop()!;
        if (seen.has(f)) continue;
        seen.add(f);
        const text = fs.readFileSync(f, "utf8");
        for (const [fixture, mark] of NEEDS) if (mark.test(text)) found.add(fixture);
        for (const spec of relativeImports(text)) {
            const r = resolveImport(f, spec);
            if (r !== undefined) stack.push(r);
        }
    }
    return [...found].sort();
}

/**
 * The folders of test/ that hold fixtures and shared code, not test files: discovery never walks
 * them (a fixture's build output can be large, or owned by root).
 */
export const NOT_TEST_FOLDERS: ReadonlySet<string> = new Set([
    "apiserver",
    "dockerd",
    "engine",
    "harbor",
    "helpers",
    "images",
    "jobset-controller",
    "lib",
    "node",
    "node-suites",
    "sandbox-controller",
]);

/**
 * Every test file of the repository at `root`: each `*.test.ts` under test/ (the folders named for
 * what they test, walked to any depth), outside NOT_TEST_FOLDERS, node_modules and dot folders.
 * Paths relative to `root`, sorted.
 */
export function testFiles(root: string): string[] {
    const found: string[] = [];
    const walk = (rel: string, top: boolean): void => {
        for (const entry of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
            const at = path.join(rel, entry.name);
            if (entry.isDirectory()) {
                if (entry.name === "node_modules" || entry.name.startsWith(".") || (top && NOT_TEST_FOLDERS.has(entry.name))) continue;
                walk(at, false);
            } else if (entry.isFile() && entry.name.endsWith(".test.ts")) {
                found.push(at);
            }
        }
    };
    walk("test", true);
    return found.sort();
}

export interface JobSpec {
    /** What its report lines start with. */
    readonly label: string;
    readonly needs: readonly Fixture[];
    /** Whether it starts a simulated cluster (holds one of the engine tests' lock slots). */
    readonly cluster: boolean;
    /** Jobs of the same group never run at once (they share something fixed, such as a port). */
    readonly group?: string;
}

export interface Limits {
    /** Jobs at once once the large builds are done. */
    readonly total: number;
    /** Of those, jobs holding a simulated cluster. */
    readonly cluster: number;
    /** Jobs at once while the large builds (API server, engine) run. */
    readonly whileBuilding: number;
}

/** What is running: how many jobs, how many of them with a simulated cluster, and their groups. */
export interface Running {
    readonly total: number;
    readonly cluster: number;
    readonly groups: ReadonlySet<string>;
}

/**
 * The index in `pending` of the job to start now, or -1: the first whose fixtures are ready, whose
 * group has no job running, and that the limits allow.
 */
export function pickNext(pending: readonly JobSpec[], ready: ReadonlySet<Fixture>, running: Running, building: boolean, limits: Limits): number {
    if (running.total >= (building ? limits.whileBuilding : limits.total)) return -1;
    return pending.findIndex(
        (j) =>
            j.needs.every((n) => ready.has(n)) && (!j.cluster || running.cluster < limits.cluster) && (j.group === undefined || !running.groups.has(j.group)),
    );
}

/**
 * Runs `jobs` (tried in order, each started by its `start`) as the fixtures become ready;
 * `building` resolves when the large builds are done. Resolves to each job's result, in the order
 * the jobs finished.
 */
export async function runJobs<R>(
    jobs: ReadonlyArray<JobSpec & { start(): Promise<R> }>,
    fixtures: ReadonlyMap<Fixture, Promise<unknown>>,
    building: Promise<unknown>,
    limits: Limits,
): Promise<R[]> {
    const ready = new Set<Fixture>();
    let isBuilding = true;
    let wake: () => void = () => {};
    let changed = new Promise<void>((r) => {
        wake = r;
    });
    const poke = () => {
        const w = wake;
        changed = new Promise<void>((r) => {
            wake = r;
        });
        w();
    };
    for (const [f, p] of fixtures)
        void p.then(() => {
            ready.add(f);
            poke();
        });
    void building.then(() => {
        isBuilding = false;
        poke();
    });
    const pending = [...jobs];
    const running = { total: 0, cluster: 0, groups: new Set<string>() };
    const results: R[] = [];
    for (;;) {
        for (let i = pickNext(pending, ready, running, isBuilding, limits); i >= 0; i = pickNext(pending, ready, running, isBuilding, limits)) {
            const job = pending.splice(i, 1)[0]!;
            running.total++;
            if (job.cluster) running.cluster++;
            if (job.group !== undefined) running.groups.add(job.group);
            // `start` never rejects (a failed job is a result); if it did, the rejection is unhandled and ends the run.
            void job.start().then((r) => {
                results.push(r);
                running.total--;
                if (job.cluster) running.cluster--;
                if (job.group !== undefined) running.groups.delete(job.group);
                poke();
            });
        }
        if (pending.length === 0 && running.total === 0) return results;
        await changed;
    }
}
