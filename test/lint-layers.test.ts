/**
 * The folder-direction rule (scripts/lint/layers.ts): the rule itself on hand-made cases, and the
 * tree as it is. Run: node --import tsx --test test/lint-layers.test.ts
 */
import assert from "node:assert/strict";
import * as path from "node:path";
import { test } from "node:test";
import { allowed, importsOf, violations } from "../scripts/lint/layers";

const c = (p: string) => path.resolve(__dirname, "..", "components", p);
const root = (p: string) => path.resolve(__dirname, "..", p);

test("the rule: entry -> platform -> component -> config -> shared, never across components", () => {
    assert.equal(allowed(c("config/resolve.ts"), c("shared/images.ts")), true);
    assert.equal(allowed(c("config/resolve.ts"), c("env/describe.ts")), false, "config may not import a component");
    assert.equal(allowed(c("shared/images.ts"), c("config/names.ts")), false, "shared is the bottom");
    assert.equal(allowed(c("training/describe.ts"), c("config/names.ts")), true);
    assert.equal(allowed(c("training/describe.ts"), c("training/supervisor.ts")), true);
    assert.equal(allowed(c("training/describe.ts"), c("ingress/nginx.ts")), false, "never another component");
    assert.equal(allowed(c("training/describe.ts"), c("platform/resolve.ts")), false);
    assert.equal(allowed(c("platform/platform.ts"), c("training/index.ts")), true);
    assert.equal(allowed(c("platform/platform.ts"), root("scripts/lib/plan.ts")), false, "components never import an entry point");
    assert.equal(allowed(root("index.ts"), c("platform/index.ts")), true);
    assert.equal(allowed(c("index.ts"), c("env/index.ts")), true, "components/index.ts is the package's face");
});

test("imports are found in every form and resolved to files", () => {
    const file = c("training/describe.ts");
    const text = `import { a } from "../config/names";\nexport { b } from "./supervisor";\nimport type { C } from "../shared/images";\nconst d = await import("../ingress/nginx");\nimport * as fs from "node:fs";`;
    assert.deepEqual(importsOf(file, text), [c("config/names.ts"), c("training/supervisor.ts"), c("shared/images.ts"), c("ingress/nginx.ts")]);
});

test("the tree: every import under components/ goes the right way", () => {
    assert.deepEqual(violations(), []);
});
