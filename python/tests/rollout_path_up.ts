// For python/tests/test_rollout_keys.py: the per-rollout key path of an opencode black-box stack on Kubernetes, as
// its own resolve step renders it (components/platform/resolve.ts), with the ingress run as a real local nginx
// (components/ingress/local.ts startLocalIngress) in front of the test's vLLM stand-in, asking the test's verifier.
//
// Argument: one JSON object { upstream, verifyPort, rateLimitPerSecond?, rateLimitBurst? }: the stack's
// ingress.rateLimitPerSecond / rateLimitBurst (config fields, so the rendered limit is the one driven; null or left out:
// the config's defaults, as bench/rollout_start.py runs it).
// Prints one line `READY <json>` ({url, accessLog, trainerEnv, trainerSecretEnv, forwarderCommand, sandboxPodSpec,
// verifierCommand, verifierAdminKeyFile, verifierPodSpec}), then holds nginx until stdin closes (or SIGTERM), then stops it.
// Only what a loopback run cannot have is replaced: nginx's listen address and paths, its upstream, and the
// verifier's address (the plan's is the Service's cluster DNS name), as localOverrides does.
// usage (repo root): node --import tsx python/tests/rollout_path_up.ts '<json>'
import { resolvePlatform } from "../../components/platform/resolve";
import { localOverrides } from "../../components/ingress";
import { startLocalIngress } from "../../components/ingress/local";
import { sandboxTemplateSpec } from "../../components/sandbox";
import { verifierPodSpec } from "../../components/ingress/verifier-kubernetes";
import { parseWithTestImages } from "../../test/helpers/config";

interface Args {
    readonly upstream: string;
    readonly verifyPort: number;
    readonly rateLimitPerSecond?: number | null;
    readonly rateLimitBurst?: number | null;
}

async function main(): Promise<void> {
    const a = JSON.parse(process.argv[2] ?? "{}") as Args;
    const config = parseWithTestImages(
        {
            recipe: "opencode-blackbox",
            runId: "r1",
            target: { kind: "kubernetes" },
            ingress: {
                ...(a.rateLimitPerSecond != null ? { rateLimitPerSecond: a.rateLimitPerSecond } : {}),
                ...(a.rateLimitBurst != null ? { rateLimitBurst: a.rateLimitBurst } : {}),
            },
        },
        "dev",
    );
    const plan = resolvePlatform(config);
    const ingress = plan.ingress!;
    const verifier = ingress.rolloutKeys;
    if (verifier === undefined) throw new Error("the plan renders no rollout-key verifier");
    const sandboxes = plan.sandboxes!;
    const template = sandboxTemplateSpec(sandboxes) as { podTemplate: { spec: { initContainers: Array<{ command: string[] }> } } };
    const ing = await startLocalIngress({
        upstream: a.upstream,
        // The operators' key of the stack stands beside the rollout keys (nobody uses it here).
        keys: [{ name: "operator", key: "operator-key-0123456789abcdef" }],
        settings: { ...localOverrides(ingress.settings), rolloutKeyVerifier: `127.0.0.1:${a.verifyPort}` },
    });
    const stop = async () => {
        await ing.stop();
        process.exit(0);
    };
    process.on("SIGTERM", () => void stop());
    process.stdin.on("end", () => void stop());
    process.stdin.resume();
    const facts = {
        url: ing.url,
        accessLog: ing.accessLogPath,
        trainerEnv: plan.training.trainer.env,
        trainerSecretEnv: plan.training.trainer.secretEnv,
        forwarderCommand: template.podTemplate.spec.initContainers[0]!.command,
        // The sandbox pod's spec: the forwarder runs as its securityContext says (python/tests/sandbox_root.py rendered).
        sandboxPodSpec: template.podTemplate.spec,
        verifierCommand: verifier.command,
        verifierAdminKeyFile: verifier.adminKeyFile,
        // The verifier Deployment's pod: it runs as its securityContext says, with its Secret and emptyDir (sandbox_root).
        verifierPodSpec: verifierPodSpec(ingress, verifier),
    };
    process.stdout.write(`READY ${JSON.stringify(facts)}\n`);
}

main().catch((e: unknown) => {
    process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
});
