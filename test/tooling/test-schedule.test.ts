// npm test's scheduler (scripts/test/schedule.ts) and the engine tests' lock slots
// (test/helpers/engine-checks.ts): which fixtures a file needs, which job starts next, and that
// the limits hold while jobs run.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { FIXTURES, type Fixture, fixturesNeeded, type JobSpec, type Limits, NOT_TEST_FOLDERS, pickNext, runJobs, testFiles } from "../../scripts/test/schedule";
import { acquireEngineLock, engineLockSlots } from "../helpers/engine-checks";

const ROOT = path.resolve(__dirname, "..", "..");
const at = (f: string) => path.join(ROOT, "test", f);

test("fixturesNeeded: found through the imports of the real test files", () => {
    assert.deepEqual(fixturesNeeded(at("config/config.test.ts")), []);
    assert.deepEqual(fixturesNeeded(at("stack/apiserver.test.ts")), ["apiserver"]);
    assert.deepEqual(fixturesNeeded(at("stack/engine-prod.test.ts")), ["apiserver", "engine"]);
    assert.ok(fixturesNeeded(at("training/jobset-controller.test.ts")).includes("jobset"));
    for (const f of ["apiserver", "node", "sandbox", "venv"] as const)
        assert.ok(fixturesNeeded(at("stack/node.test.ts")).includes(f), `node.test.ts needs ${f}`);
});

test("fixturesNeeded: every import form, followed through files; a build script named anywhere counts", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-schedule-"));
    try {
        fs.mkdirSync(path.join(dir, "lib"));
        fs.writeFileSync(path.join(dir, "a.ts"), 'import { b } from "./lib/b";\nexport const x = b;\n');
        fs.writeFileSync(path.join(dir, "lib", "b.ts"), 'export { c } from "./c";\nexport const b = 1;\n');
        fs.writeFileSync(path.join(dir, "lib", "c.ts"), 'export const c = () => import("../d");\n');
        fs.writeFileSync(path.join(dir, "d.ts"), 'const s = path.join(ROOT, "test", "engine", "build.sh");\nimport "./a";\n');
        fs.writeFileSync(path.join(dir, "e.ts"), '// runs bash python/run-tests.sh --venv-only\nimport "node:fs";\nimport "zod";\n');
        assert.deepEqual(fixturesNeeded(path.join(dir, "a.ts")), ["engine"]);
        assert.deepEqual(fixturesNeeded(path.join(dir, "e.ts")), ["venv"]);
        fs.writeFileSync(path.join(dir, "h.ts"), "// runs bash test/harbor/run-tests.sh\n");
        assert.deepEqual(fixturesNeeded(path.join(dir, "h.ts")), ["harbor"]);
        assert.deepEqual(fixturesNeeded(path.join(dir, "lib", "b.ts")), ["engine"]);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

const LIMITS: Limits = { total: 4, cluster: 2, whileBuilding: 1 };
const job = (label: string, needs: Fixture[] = [], cluster = false, group?: string): JobSpec => ({ label, needs, cluster, group });
const idle = { total: 0, cluster: 0, groups: new Set<string>() };

test("pickNext: the first job whose fixtures are ready and that the limits allow", () => {
    const pending = [job("engine-x", ["apiserver", "engine"], true), job("api", ["apiserver"]), job("plain")];
    assert.equal(pickNext(pending, new Set(), idle, true, LIMITS), 2, "nothing built: only the job that needs nothing");
    assert.equal(pickNext(pending, new Set(["apiserver"]), idle, true, LIMITS), 1);
    assert.equal(pickNext(pending, new Set(["apiserver", "engine"]), idle, false, LIMITS), 0);
    assert.equal(pickNext(pending, new Set(["apiserver", "engine"]), { ...idle, total: 1 }, true, LIMITS), -1, "one job at once while building");
    assert.equal(pickNext(pending, new Set(["apiserver", "engine"]), { ...idle, total: 3 }, false, LIMITS), 0);
    assert.equal(pickNext(pending, new Set(["apiserver", "engine"]), { ...idle, total: 4 }, false, LIMITS), -1, "four at once");
    assert.equal(pickNext(pending, new Set(["apiserver", "engine"]), { ...idle, total: 2, cluster: 2 }, false, LIMITS), 1, "two clusters at once");
    const grouped = [job("py-a", [], true, "python"), job("py-b", [], false, "python"), job("ts")];
    assert.equal(pickNext(grouped, new Set(), { total: 1, cluster: 0, groups: new Set(["python"]) }, false, LIMITS), 2, "one job of a group at a time");
    assert.equal(pickNext([], new Set(), idle, false, LIMITS), -1);
});

test("runJobs: each job starts once its fixtures are ready, within the limits, in the order given", async () => {
    const gates = new Map<Fixture, () => void>();
    const fixtures = new Map<Fixture, Promise<void>>();
    for (const f of FIXTURES)
        fixtures.set(
            f,
            new Promise<void>((r) => {
                gates.set(f, r);
            }),
        );
    let endBuilding: () => void = () => {};
    const building = new Promise<void>((r) => {
        endBuilding = r;
    });
    const running = new Map<string, () => void>();
    const started: string[] = [];
    const mk = (spec: JobSpec) => ({
        ...spec,
        start: () =>
            new Promise<string>((resolve) => {
                started.push(spec.label);
                running.set(spec.label, () => {
                    running.delete(spec.label);
                    resolve(spec.label);
                });
            }),
    });
    const jobs = [
        mk(job("py-cluster", ["apiserver", "engine", "venv"], true, "python")),
        ...["e1", "e2", "e3"].map((l) => mk(job(l, ["apiserver", "engine"], true))),
        mk(job("python", ["venv"], false, "python")),
        mk(job("node", ["node", "apiserver"])),
        ...["p1", "p2", "p3"].map((l) => mk(job(l))),
    ];
    const settle = async () => {
        for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    };
    const finish = async (...labels: string[]) => {
        for (const l of labels) {
            const f = running.get(l);
            assert.ok(f, `${l} is running (running: ${[...running.keys()].join(", ")})`);
            f();
        }
        await settle();
    };
    const now = () => [...running.keys()].sort();
    const done = runJobs(jobs, fixtures, building, LIMITS);
    await settle();
    assert.deepEqual(now(), ["p1"], "nothing built: one job, the first that needs nothing");
    gates.get("venv")!();
    await settle();
    assert.deepEqual(now(), ["p1"], "one job at a time while the large builds run");
    await finish("p1");
    assert.deepEqual(now(), ["python"], "the venv ready: the first job whose fixtures are ready");
    gates.get("apiserver")!();
    gates.get("engine")!();
    endBuilding();
    await settle();
    assert.deepEqual(now(), ["e1", "e2", "p2", "python"], "four at once, two clusters, one Python job");
    await finish("python");
    assert.deepEqual(now(), ["e1", "e2", "p2", "p3"], "no third cluster; the next that fits");
    await finish("e1");
    assert.deepEqual(now(), ["e2", "p2", "p3", "py-cluster"], "a cluster slot free, the Python group free");
    await finish("p2", "p3");
    assert.deepEqual(now(), ["e2", "py-cluster"], "node waits for its fixture, e3 for a cluster slot");
    gates.get("node")!();
    await settle();
    assert.deepEqual(now(), ["e2", "node", "py-cluster"]);
    await finish("e2");
    assert.deepEqual(now(), ["e3", "node", "py-cluster"]);
    await finish("e3", "node", "py-cluster");
    assert.deepEqual(started, ["p1", "python", "e1", "e2", "p2", "p3", "py-cluster", "node", "e3"]);
    assert.deepEqual((await done).sort(), jobs.map((j) => j.label).sort(), "every job once");
});

test("engine lock slots: 1 unless AGENT_RL_ENGINE_LOCK_SLOTS says more; anything but 1-8 refused", async () => {
    assert.equal(engineLockSlots({}), 1);
    assert.equal(engineLockSlots({ AGENT_RL_ENGINE_LOCK_SLOTS: "" }), 1);
    assert.equal(engineLockSlots({ AGENT_RL_ENGINE_LOCK_SLOTS: "2" }), 2);
    for (const bad of ["0", "9", "1.5", "two", "-1"])
        assert.throws(
            () => engineLockSlots({ AGENT_RL_ENGINE_LOCK_SLOTS: bad }),
            new RegExp(`^Error: AGENT_RL_ENGINE_LOCK_SLOTS=${bad.replace(".", "\\.")}: want a whole number from 1 to 8$`),
        );

    const cache = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-lock-"));
    const saved = { xdg: process.env.XDG_CACHE_HOME, slots: process.env.AGENT_RL_ENGINE_LOCK_SLOTS };
    process.env.XDG_CACHE_HOME = cache;
    process.env.AGENT_RL_ENGINE_LOCK_SLOTS = "2";
    try {
        const first = await acquireEngineLock();
        const second = await acquireEngineLock();
        const lockDir = path.join(cache, "agent-rl-infra");
        assert.deepEqual(fs.readdirSync(lockDir).sort(), [".engine-tests.lock", ".engine-tests.lock.2"]);
        const third: { release?: () => void } = {};
        const waiting = acquireEngineLock(10_000).then((r) => {
            third.release = r;
        });
        await new Promise((r) => setTimeout(r, 300));
        assert.equal(third.release, undefined, "a third waits while both slots are held");
        first();
        await waiting;
        assert.ok(third.release, "and takes the slot released");
        second();
        (third.release as () => void)();
        assert.deepEqual(fs.readdirSync(lockDir), []);
        // A slot held by a dead process is taken over at once.
        fs.mkdirSync(path.join(lockDir, ".engine-tests.lock"));
        fs.writeFileSync(path.join(lockDir, ".engine-tests.lock", "pid"), "999999999");
        fs.mkdirSync(path.join(lockDir, ".engine-tests.lock.2"));
        fs.writeFileSync(path.join(lockDir, ".engine-tests.lock.2", "pid"), String(process.pid));
        // A budget of 0: only the first pass over the slots can succeed (no clock for a busy machine to break).
        const taken = await acquireEngineLock(0);
        assert.equal(
            fs.readFileSync(path.join(lockDir, ".engine-tests.lock", "pid"), "utf8"),
            String(process.pid),
            "the dead holder's slot, without waiting out the live one",
        );
        taken();
    } finally {
        for (const [k, v] of [
            ["XDG_CACHE_HOME", saved.xdg],
            ["AGENT_RL_ENGINE_LOCK_SLOTS", saved.slots],
        ] as const)
            if (v === undefined) delete process.env[k];
            else process.env[k] = v;
        fs.rmSync(cache, { recursive: true, force: true });
    }
});

test("testFiles: every *.test.ts under test/'s own folders, none from a fixture folder, node_modules or a dot folder", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-schedule-"));
    try {
        const put = (rel: string) => {
            fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
            fs.writeFileSync(path.join(dir, rel), "");
        };
        for (const f of [
            "test/a/x.test.ts",
            "test/a/deeper/y.test.ts",
            "test/a/helper.ts",
            "test/engine/z.test.ts",
            "test/a/node_modules/p/w.test.ts",
            "test/.cache/v.test.ts",
        ])
            put(f);
        assert.deepEqual(testFiles(dir), [path.join("test", "a", "deeper", "y.test.ts"), path.join("test", "a", "x.test.ts")]);
        assert.ok(NOT_TEST_FOLDERS.has("engine"));
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

test("testFiles: the repository's test files, each in a folder named for what it tests (docs/contributing.md), each name once", () => {
    const files = testFiles(ROOT);
    for (const f of ["config/config.test.ts", "stack/node.test.ts", "tooling/test-schedule.test.ts"]) assert.ok(files.includes(path.join("test", f)), f);
    const flat = files.filter((f) => path.dirname(f) === "test");
    assert.deepEqual(flat, [], "a test file sits in the folder of what it tests: test/<folder>/<name>.test.ts");
    for (const f of files) assert.ok(fs.existsSync(path.join(ROOT, path.dirname(f))) && !NOT_TEST_FOLDERS.has(f.split(path.sep)[1]!), f);
    const names = files.map((f) => path.basename(f));
    assert.deepEqual(
        names.filter((n, i) => names.indexOf(n) !== i),
        [],
        "npm test names each job by its file's name: two files of one name would share a label",
    );
});
