/**
 * A Docker stack's host totals (dockerHostNeeds) are what the program sends: summed over the
 * Container resources registered under mocks, for every one-node recipe; plan.md shows them and
 * says only what the docker target carries out.
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import { DOCKER_BLACKBOX_REFUSED, HOSTED_BLACKBOX_REFUSED, RECIPE_NAMES, RECIPES } from "../../components/config";
import { dockerHostNeeds } from "../../components/platform";
import { planToDir } from "../../scripts/lib/plan";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-docker-host-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Every started container the program registered: CPUs, MiB, GPU device ids. */
function registered(resources: ReadonlyArray<{ type: string; inputs: Record<string, any> }>) {
    const started = resources.filter((r) => r.type === "docker:index/container:Container" && r.inputs.start !== false);
    return {
        containers: started.length,
        cpus: Math.round(started.reduce((n, r) => n + Number(r.inputs.cpus ?? Number.NaN), 0) * 1000) / 1000,
        memoryMiB: started.reduce((n, r) => n + Number(r.inputs.memory ?? Number.NaN), 0),
        gpus: [
            ...new Set(started.flatMap((r) => (r.inputs.deviceRequests ?? []).flatMap((d: { deviceIds?: string[] }) => (d.deviceIds ?? []).map(Number)))),
        ].sort(),
    };
}

describe("docker host totals", () => {
    // A black box on Docker has no plan (the docker sandbox pool and hosted sandboxes are refused; below).
    for (const recipe of RECIPE_NAMES.filter((r) => RECIPES[r].training.layout !== "blackbox")) {
        test(`${recipe}: the totals are the registered containers' limits`, async () => {
            const out = path.join(tmp, recipe);
            const result = await planToDir({ recipe, target: "docker" }, { outDir: out });
            const needs = dockerHostNeeds(result.plan)!;
            const got = registered(result.resources);
            assert.ok(got.containers > 0);
            assert.deepEqual({ containers: needs.containers, cpus: needs.cpus, memoryMiB: needs.memoryMiB, gpus: [...needs.gpus] }, got);
        });
    }

    test("mbpp-whitebox-64 on docker: 65 env replicas at 2 CPU / 4 GiB beside the trainer, in plan.md", async () => {
        const out = path.join(tmp, "m64");
        await planToDir({ recipe: "mbpp-whitebox-64", target: "docker" }, { outDir: out });
        const md = fs.readFileSync(path.join(out, "plan.md"), "utf8");
        assert.match(md, /## Docker host: what this stack takes/);
        assert.match(md, /\| env `coding` replicas \| 65 \| 2 \| 4 GiB \| 130 \| 260 GiB \|/);
        assert.match(md, /\| trainer \(vLLM colocated\) \| 1 \| 8 \| 64 GiB \| 8 \| 64 GiB \|/);
        assert.match(md, /\| \*\*total\*\* \| 68 \| {2}\| {2}\| \*\*138\.6\*\* \| \*\*324\.3 GiB\*\* \|/);
        assert.match(md, /GPUs: 1 \(host devices 0\)/);
    });

    test("a Kubernetes plan has no host section (the scheduler places pods)", async () => {
        const out = path.join(tmp, "k8s");
        const result = await planToDir({ recipe: "mbpp-whitebox-64", target: "kubernetes" }, { outDir: out });
        assert.equal(dockerHostNeeds(result.plan), undefined);
        assert.doesNotMatch(fs.readFileSync(path.join(out, "plan.md"), "utf8"), /Docker host/);
    });
});

describe("plan.md lists only what the target enforces", () => {
    test("the Docker sandbox pool is refused for now (no backend drives it): the plan fails naming the fix, writing nothing", async () => {
        const out = path.join(tmp, "ob-docker");
        await assert.rejects(planToDir({ recipe: "opencode-blackbox", target: "docker" }, { outDir: out }), (e: Error) =>
            e.message.includes(DOCKER_BLACKBOX_REFUSED),
        );
        assert.ok(!fs.existsSync(path.join(out, "plan.md")));
    });

    test("hosted sandboxes, the Docker black box's other provider, are refused too (the agent's uid could forge the trace): nothing written", async () => {
        const out = path.join(tmp, "ob-docker-hosted");
        await assert.rejects(
            planToDir({ recipe: "opencode-blackbox", target: "docker" }, { outDir: out, platformOverride: { sandboxes: { provider: "hf" } } }),
            (e: Error) => e.message.includes(HOSTED_BLACKBOX_REFUSED),
        );
        assert.ok(!fs.existsSync(path.join(out, "plan.md")));
    });

    test("the Kubernetes pool keeps its admission policy and quota rows", async () => {
        const out = path.join(tmp, "ob-k8s");
        await planToDir({ recipe: "opencode-blackbox", target: "kubernetes" }, { outDir: out });
        const md = fs.readFileSync(path.join(out, "plan.md"), "utf8");
        assert.match(md, /\| claimed lifetime \| <= 3600 s \(admission policy on every claim\) \|/);
        assert.match(md, /\| quota \| /);
    });
});
