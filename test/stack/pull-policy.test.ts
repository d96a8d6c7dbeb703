/**
 * One image pull-policy rule for every pod the stacks render (components/shared/images.ts):
 * pinned by digest, pull once (IfNotPresent); a tag, pull on every start (Always), so no node keeps
 * whichever `:latest` it pulled first. Run: node --import tsx --test test/stack/pull-policy.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, test } from "node:test";
import { HARBOR_RECIPE_NAMES, RECIPE_NAMES } from "../../components/config";
import { planToDir } from "../../scripts/lib/plan";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-pull-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Every container of every pod template in a manifest (workloads, Jobs, SandboxTemplates). */
function containers(m: Record<string, any>): Array<Record<string, any>> {
    const pod = m.spec?.template?.spec ?? m.spec?.podTemplate?.spec;
    return pod ? [...(pod.initContainers ?? []), ...(pod.containers ?? [])] : [];
}

const DIGEST = /@sha256:[0-9a-f]{64}$/;

for (const source of [
    ...[...RECIPE_NAMES, ...HARBOR_RECIPE_NAMES].map((recipe) => ({ recipe, target: "kubernetes" as const })),
    { stack: "staging" },
    { stack: "prod" },
]) {
    const label = "recipe" in source ? source.recipe : `stack ${source.stack}`;
    test(`${label}: every container pulls by the rule (digest: IfNotPresent, tag: Always)`, async () => {
        const res = await planToDir(source, { outDir: path.join(tmp, label.replace(/\W+/g, "-")) });
        const seen = res.manifests.flatMap((m) =>
            containers(m).map((c) => ({ where: `${m.kind} ${m.metadata?.name} ${c.name}`, image: c.image as string, policy: c.imagePullPolicy })),
        );
        assert.ok(seen.length > 0);
        for (const c of seen) assert.equal(c.policy, DIGEST.test(c.image) ? "IfNotPresent" : "Always", `${c.where}: ${c.image}`);
        if ("stack" in source && source.stack === "prod")
            assert.ok(
                seen.every((c) => c.policy === "IfNotPresent"),
                "prod pins every image",
            );
    });
}
