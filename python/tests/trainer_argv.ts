// Prints, as JSON, the trainer command line the stack renders for every recipe, in every layout its
// program runs in and on every target it allows, with the program's recorded facts
// (components/config/programs.ts), for python/tests/test_trainer_argv.py, and vLLM's own command line
// where vLLM runs as a server, for python/tests/test_vllm_argv.py. From the real resolve step
// (components/platform/resolve.ts); pinned and unpinned model revisions both.
// usage (repo root): node --import tsx python/tests/trainer_argv.ts [--custom]
// With --custom: the recipes whose program is `custom` instead (the project's own scripts, parsed by the
// scripts' real parsers in python/tests/test_harbor_script.py), each with its trainer env.
import { ALL_RECIPE_NAMES, MULTI_NODE_RECIPE_NAMES, PROGRAMS, RECIPES, type ProgramName } from "../../components/config";
import { resolvePlatform } from "../../components/platform/resolve";
import { parseWithTestImages } from "../../test/helpers/config";

const cases: unknown[] = [];
const custom = process.argv.includes("--custom");
for (const recipe of ALL_RECIPE_NAMES.filter((r) => (PROGRAMS[RECIPES[r].training.program as ProgramName] === undefined) === custom)) {
    const program = RECIPES[recipe].training.program as ProgramName;
    const facts = PROGRAMS[program];
    if (facts === undefined) {
        // A custom program (harbor-blackbox: trainer/blackbox/harbor_async_grpo.py) has no facts: its command line is
        // the TrlParser contract (docs/reference/training-node.md), checked by the script's own parser.
        for (const revision of ["main", "0123456789abcdef0123456789abcdef01234567"]) {
            const pinned = revision !== "main";
            const training = pinned ? { hubRepoId: "org/model", trackioSpaceId: "org/space" } : {};
            const config = parseWithTestImages({ recipe, runId: "r1", target: { kind: "kubernetes", context: "c" }, model: { revision }, training }, "test");
            const plan = resolvePlatform(config, { hfToken: true });
            const t = plan.training.trainer;
            cases.push({ recipe, revision, command: [...(t.command ?? []), ...t.args], env: { ...t.env, ...plan.sandboxes?.trainerEnv } });
        }
        continue;
    }
    const targets = MULTI_NODE_RECIPE_NAMES.includes(recipe) ? ["kubernetes"] : ["kubernetes", "docker"];
    for (const target of targets) {
        // A black box on Docker is not allowed (the docker sandbox pool and hosted sandboxes are refused for it).
        for (const layout of facts.layouts.filter((l) => !(target === "docker" && l === "blackbox"))) {
            for (const revision of ["main", "0123456789abcdef0123456789abcdef01234567"]) {
                // The server layout needs a GPU for vLLM beside the trainer's.
                const pinned = revision !== "main";
                const training = {
                    ...(layout === RECIPES[recipe].training.layout ? {} : { layout, gpusOnNode: 2 }),
                    // The pinned variant also pushes to the Hub and names a trackio Space (their flags are rendered too).
                    ...(pinned ? { hubRepoId: "org/model", trackioSpaceId: "org/space" } : {}),
                };
                const config = parseWithTestImages(
                    {
                        recipe,
                        runId: "r1",
                        target: { kind: target, ...(target === "kubernetes" ? { context: "c" } : {}) },
                        model: { revision },
                        training,
                    },
                    "test",
                );
                const plan = resolvePlatform(config, { hfToken: true });
                const t = plan.training.trainer;
                cases.push({
                    recipe,
                    target,
                    layout,
                    revision,
                    program,
                    facts,
                    command: [...(t.command ?? []), ...t.args],
                    // vLLM as a server of its own (whitebox-server, blackbox): `vllm serve ...`; null in colocate.
                    vllmCommand: plan.training.vllm ? [...(plan.training.vllm.command ?? []), ...plan.training.vllm.args] : null,
                    envUrls: Object.fromEntries(Object.entries(plan.names.envs).map(([k, v]) => [k, v.url])),
                    vllmUrl: plan.training.internalUrl,
                    // What the agent side of each sandbox calls: the pool's key-holding forwarder.
                    sandboxUrl: plan.sandboxes?.trainerEnv.SANDBOX_UPSTREAM_URL ?? plan.names.ingress.sandboxUrl,
                    sandboxImage: config.sandboxes.image,
                });
            }
        }
    }
}
process.stdout.write(JSON.stringify(cases));
