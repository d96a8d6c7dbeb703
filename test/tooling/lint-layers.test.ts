/**
 * The folder-direction rule (scripts/lint/layers.ts): the rule itself on hand-made cases, and the
 * tree as it is (components/, the stack program index.ts, policy/); and the file-loop rule. Run: node --import tsx --test test/tooling/lint-layers.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { allowed, importsOf, loops, violations } from "../../scripts/lint/layers";

const c = (p: string) => path.resolve(__dirname, "..", "..", "components", p);
const root = (p: string) => path.resolve(__dirname, "..", "..", p);

test("the rule: entry -> platform -> component -> config -> shared, never across components", () => {
    assert.equal(allowed(c("config/resolve.ts"), c("shared/images.ts")), true);
    assert.equal(allowed(c("config/resolve.ts"), c("env/resolve.ts")), false, "config may not import a component");
    assert.equal(allowed(c("shared/images.ts"), c("config/names.ts")), false, "shared is the bottom");
    assert.equal(allowed(c("training/resolve.ts"), c("config/names.ts")), true);
    assert.equal(allowed(c("training/resolve.ts"), c("training/supervisor.ts")), true);
    assert.equal(allowed(c("training/resolve.ts"), c("ingress/nginx.ts")), false, "never another component");
    assert.equal(allowed(c("training/resolve.ts"), c("platform/resolve.ts")), false);
    assert.equal(allowed(c("platform/platform.ts"), c("training/index.ts")), true);
    assert.equal(allowed(c("platform/platform.ts"), root("scripts/lib/plan.ts")), false, "components never import an entry point");
    assert.equal(allowed(root("index.ts"), c("platform/index.ts")), true);
    assert.equal(allowed(c("index.ts"), c("env/index.ts")), true, "components/index.ts is the package's face");
});

test("the preflight: above the Platform, below the entry points", () => {
    assert.equal(allowed(c("preflight/kubernetes/needs.ts"), c("platform/index.ts")), true);
    assert.equal(allowed(c("preflight/kubernetes/needs.ts"), c("env/index.ts")), true, "it reads the specs the components register");
    assert.equal(allowed(c("preflight/run.ts"), c("config/index.ts")), true);
    assert.equal(allowed(c("preflight/docker.ts"), c("shared/quantity.ts")), true);
    assert.equal(allowed(c("preflight/kubernetes/index.ts"), c("preflight/report.ts")), true);
    assert.equal(allowed(c("preflight/index.ts"), root("scripts/lib/plan.ts")), false, "the checks never reach into the CLIs");
    assert.equal(allowed(c("preflight/index.ts"), root("index.ts")), false);
    assert.equal(allowed(c("platform/platform.ts"), c("preflight/run.ts")), false, "the Platform does not run the preflight");
    assert.equal(allowed(c("training/kubernetes.ts"), c("preflight/report.ts")), false);
    assert.equal(allowed(c("config/validate.ts"), c("preflight/index.ts")), false);
    assert.equal(allowed(c("shared/quantity.ts"), c("preflight/report.ts")), false);
    assert.equal(allowed(root("index.ts"), c("preflight/index.ts")), true, "the stack program's preflight step");
    assert.equal(allowed(c("index.ts"), c("preflight/index.ts")), true, "the package's face may export it");
    assert.equal(allowed(root("scripts/preflight.ts"), c("preflight/index.ts")), true, "the CLI");
});

test("the programs and the library never import scripts/", () => {
    assert.equal(allowed(root("index.ts"), root("scripts/lib/preflight/run.ts")), false, "the stack program imports no CLI library");
    assert.equal(allowed(c("index.ts"), root("scripts/lib/plan.ts")), false, "nor does the package's face");
    assert.equal(allowed(root("policy/policies.ts"), root("scripts/lib/plan.ts")), false, "nor the policy pack");
    assert.equal(allowed(c("env/resolve.ts"), root("scripts/lib/mockrun.ts")), false);
    assert.equal(allowed(root("index.ts"), root("bench/lib.ts")), false);
    assert.equal(allowed(root("scripts/plan.ts"), root("scripts/lib/plan.ts")), true, "the CLIs use their own libraries");
    assert.equal(allowed(root("test/stack/plan.test.ts"), root("scripts/lib/plan.ts")), true);
    assert.equal(allowed(root("bench/plan-once.ts"), root("scripts/lib/plan.ts")), true);
});

test("imports are found in every form and resolved to files", () => {
    const file = c("training/resolve.ts");
    const text = `import { a } from "../config/names";\nexport { b } from "./supervisor";\nimport type { C } from "../shared/images";\nconst d = await import("../ingress/nginx");\nimport * as fs from "node:fs";`;
    assert.deepEqual(importsOf(file, text), [c("config/names.ts"), c("training/supervisor.ts"), c("shared/images.ts"), c("ingress/nginx.ts")]);
});

test("a tree whose program or library imports scripts/ is refused, each import named", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "layers-"));
    try {
        const write = (rel: string, text: string) => {
            fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
            fs.writeFileSync(path.join(dir, rel), text);
        };
        write("scripts/lib/preflight/run.ts", "export const preflightStep = 1;\n");
        write("index.ts", 'import { preflightStep } from "./scripts/lib/preflight/run";\n');
        write("components/preflight/run.ts", 'import { x } from "../../scripts/lib/preflight/run";\nimport { p } from "../platform/index";\n');
        write("components/platform/index.ts", 'import { r } from "../preflight/run";\n');
        write("policy/policies.ts", 'import { y } from "../scripts/lib/preflight/run";\n');
        write("scripts/preflight.ts", 'import { r } from "../components/preflight/run";\nimport { s } from "./lib/preflight/run";\n');
        write("test/a.test.ts", 'import { s } from "../scripts/lib/preflight/run";\n');
        const found = violations(dir);
        assert.equal(found.length, 4, found.join("\n"));
        assert.match(found[0], /^components\/platform\/index\.ts imports components\/preflight\/run\.ts: platform may not depend on preflight/);
        assert.match(found[1], /^components\/preflight\/run\.ts imports scripts\/lib\/preflight\/run\.ts: preflight may not depend on tool/);
        assert.match(found[2], /^index\.ts imports scripts\/lib\/preflight\/run\.ts: program may not depend on tool/);
        assert.match(found[3], /^policy\/policies\.ts imports scripts\/lib\/preflight\/run\.ts: program may not depend on tool/);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

test("the tree: every import under components/, of index.ts and of policy/ goes the right way", () => {
    assert.deepEqual(violations(), []);
});

/** A scratch tree of the given files, removed after `body`. */
function withTree(files: Record<string, string>, body: (dir: string) => void): void {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "loops-"));
    try {
        for (const [rel, text] of Object.entries(files)) {
            fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
            fs.writeFileSync(path.join(dir, rel), text);
        }
        body(dir);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

test("an import loop between files is refused, type-only imports included, each loop named with its files", () => {
    withTree(
        {
            // A loop of three through a type-only import, as config's resolve.ts <- checkpoints.ts <- schema.ts was.
            "components/config/resolve.ts": 'import { rule } from "./rules";\nexport type Config = { a: number };\n',
            "components/config/rules.ts": 'import { schema } from "./schema";\nexport const rule = 1;\n',
            "components/config/schema.ts": 'import type { Config } from "./resolve";\nexport const schema = 2;\n',
            // A loop of two through a re-export, in the tools.
            "scripts/a.ts": 'export { b } from "./b";\nexport const a = 1;\n',
            "scripts/b.ts": 'import { a } from "./a";\nexport const b = a;\n',
            // One way only: no loop.
            "components/env/model.ts": "export const port = 1;\n",
            "components/env/resolve.ts": 'import { port } from "./model";\nimport { rule } from "../config/rules";\n',
            // A file that names itself is not a loop between files; packages and build output are not read.
            "components/env/self.ts": 'export const s = 1;\nimport { s as t } from "./self";\n',
            "node_modules/x/a.ts": 'import { b } from "./b";\n',
            "node_modules/x/b.ts": 'import { a } from "./a";\n',
        },
        (dir) => {
            assert.deepEqual(loops(dir), [
                "3 files: components/config/resolve.ts, components/config/rules.ts, components/config/schema.ts (components/config/resolve.ts -> components/config/rules.ts -> components/config/schema.ts -> components/config/resolve.ts)",
                "2 files: scripts/a.ts, scripts/b.ts (scripts/a.ts -> scripts/b.ts -> scripts/a.ts)",
            ]);
        },
    );
});

test("a loop group is told by its shortest loop from its first file", () => {
    // a -> b -> c -> a and a -> c: one group of three; the shortest loop from a is a -> c -> a.
    withTree(
        {
            "components/x/a.ts": 'import { b } from "./b";\nimport { c } from "./c";\n',
            "components/x/b.ts": 'import { c } from "./c";\n',
            "components/x/c.ts": 'import { a } from "./a";\n',
        },
        (dir) => {
            assert.deepEqual(loops(dir), [
                "3 files: components/x/a.ts, components/x/b.ts, components/x/c.ts (components/x/a.ts -> components/x/c.ts -> components/x/a.ts)",
            ]);
        },
    );
});

test("the tree: no import loop between files", () => {
    assert.deepEqual(loops(), []);
});
