// Prints what the stack decides for the sandbox side, as JSON, for python/tests/test_plan_contract.py:
// the trainer container's env (plain and secret names) and command line, the sandbox pod template and the rollout-key
// verifier's pod (the tests run each container as its spec says: python/tests/sandbox_root.py), from the real resolve step (components/platform/resolve.ts) of the opencode black-box recipe on Kubernetes.
// usage (repo root): node --import tsx python/tests/plan_facts.ts [maxLifetimeSeconds]
import { parseWithTestImages } from "../../test/helpers/config";
import { resolvePlatform } from "../../components/platform/resolve";
import { sandboxClaimPolicySpec, sandboxTemplateSpec } from "../../components/sandbox";
import { verifierPodSpec } from "../../components/ingress/verifier-kubernetes";

const maxLifetimeSeconds = Number(process.argv[2] ?? 3600);
const config = parseWithTestImages({ recipe: "opencode-blackbox", runId: "r1", target: { kind: "kubernetes" }, sandboxes: { maxLifetimeSeconds } }, "dev");
const plan = resolvePlatform(config);
const sandboxes = plan.sandboxes!;
const ingress = plan.ingress!;
if (ingress.rolloutKeys === undefined) throw new Error("the plan renders no rollout-key verifier");
process.stdout.write(
    JSON.stringify({
        trainerEnv: plan.training.trainer.env,
        trainerSecretEnv: plan.training.trainer.secretEnv,
        trainerArgv: [...(plan.training.trainer.command ?? []), ...plan.training.trainer.args],
        sandboxImage: config.sandboxes.image,
        template: sandboxTemplateSpec(sandboxes),
        claimPolicy: sandboxClaimPolicySpec(sandboxes),
        verifierPod: verifierPodSpec(ingress, ingress.rolloutKeys),
    }),
);
