// Prints what the stack decides for the Harbor path, as JSON, for python/harbor_tests/test_harbor_pools.py: the
// trainer container's env (plain and secret names), and each task image's pool (image, warm pool, template, size,
// the template's writable dirs, its pod spec: python/tests/sandbox_root.py runs its runtime as the spec says), from the real resolve step (components/platform/resolve.ts) of the harbor-blackbox
// recipe on Kubernetes with its plan's task images (test/helpers/config.ts TEST_TASK_IMAGES).
// usage (repo root): node --import tsx python/harbor_tests/harbor_plan_facts.ts
import { parseWithTestImages } from "../../test/helpers/config";
import { resolvePlatform } from "../../components/platform/resolve";
import { sandboxTemplateSpec } from "../../components/sandbox";

const config = parseWithTestImages({ recipe: "harbor-blackbox", runId: "r1", target: { kind: "kubernetes" } }, "dev");
const plan = resolvePlatform(config);
const sandboxes = plan.sandboxes!;
process.stdout.write(
    JSON.stringify({
        trainerEnv: plan.training.trainer.env,
        trainerSecretEnv: plan.training.trainer.secretEnv,
        pools: sandboxes.pools.map((p) => ({
            image: p.image,
            warmPool: p.warmPool,
            template: p.template,
            poolSize: p.poolSize,
            writable: p.writablePaths.map((w) => w.path),
            podSpec: (sandboxTemplateSpec(sandboxes, p) as { podTemplate: { spec: unknown } }).podTemplate.spec,
        })),
    }),
);
