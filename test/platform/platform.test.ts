// The Platform exposes its main children and typed outputs (issue 17), so a program that
// builds it can reach the Job, the proxy, the pool and each env server without digging.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as pulumi from "@pulumi/pulumi";
import { DOCKER_BLACKBOX_REFUSED, HOSTED_BLACKBOX_REFUSED, platformNames, type PlatformConfig } from "../../components/config";
import { namespaceRoles, Platform, resolvePlatform } from "../../components/platform";
import { resolveEnvSpace } from "../../components/env";
import { resolveVllmIngress } from "../../components/ingress";
import { resolveSandboxPool } from "../../components/sandbox";
import { resolveTrainingNode, type TrainingLinks } from "../../components/training";
import { runUnderMocks } from "../../scripts/lib/mockrun";
import { configProblems, parseDockerPoolConfig, parseHostedConfig, parseWithTestImages } from "../helpers/config";

describe("Platform", () => {
    it("exposes the training node, the ingress, the pool and the env servers, and typed outputs", async () => {
        const config = parseWithTestImages({ recipe: "opencode-blackbox", runId: "r1", target: { kind: "kubernetes", context: "test" } }, "staging");
        let platform: Platform | undefined;
        const run = await runUnderMocks(
            async () => {
                platform = new Platform("agentrl", { plan: resolvePlatform(config), secrets: { ingressKeys: {} } });
                return { ...platform.outputs };
            },
            { stack: "staging" },
        );
        assert.equal(run.error, undefined);
        const p = platform!;
        assert.equal(await new Promise((r) => p.training.jobName.apply(r)), (run.outputs as any).trainingJob);
        assert.ok(p.training.trainer instanceof pulumi.CustomResource);
        assert.ok(p.ingress, "black box: the ingress");
        assert.ok(p.sandboxes, "black box: the pool");
        assert.deepEqual(
            Object.keys(p.envs),
            config.envs.map((e) => e.name),
        );
        assert.equal(p.outputs.runId, "r1");
        assert.equal(p.outputs.target, "kubernetes");
        assert.equal((run.outputs as any).claims.checkpoints.name, platformNames(config).training.checkpoints);
    });

    it("each component resolves from its narrow slice of the config alone (the keys its Config/Names types name), as from the whole", () => {
        const config = parseWithTestImages({ recipe: "opencode-blackbox", runId: "r1", target: { kind: "kubernetes", context: "test" } }, "staging");
        const names = platformNames(config);
        const plan = resolvePlatform(config);
        const pick = <T extends object, K extends keyof T>(o: T, keys: readonly K[]) => Object.fromEntries(keys.map((k) => [k, o[k]])) as Pick<T, K>;
        // What a program that uses one component alone builds: exactly the fields the types name, nothing else.
        // (The black-box recipe has no env server: a recipe with one.)
        const withEnv = parseWithTestImages({ recipe: "wordle-whitebox", runId: "r1", target: { kind: "kubernetes", context: "test" } }, "staging");
        assert.ok(withEnv.envs.length > 0);
        assert.deepEqual(
            resolveEnvSpace(pick(withEnv, ["target", "images", "demand"]), withEnv.envs[0], pick(platformNames(withEnv), ["envs", "namespaces", "networks"])),
            resolvePlatform(withEnv).envs[0],
        );
        assert.deepEqual(
            resolveVllmIngress(
                pick(config, ["target", "ingress", "images", "training", "sandboxes"]),
                pick(names, ["ingress", "namespaces", "networks", "training"]),
            ),
            plan.ingress,
        );
        assert.deepEqual(
            resolveSandboxPool(
                pick(config, ["runId", "sandboxes", "training", "target"]),
                pick(names, ["ingress", "namespaces", "networks", "prefix", "sandboxes"]),
            ),
            plan.sandboxes,
        );
        const links: TrainingLinks = {
            envUrls: Object.fromEntries(plan.envs.map((e) => [e.name, e.url])),
            sandbox: { url: names.ingress.sandboxUrl, trainerEnv: plan.sandboxes!.trainerEnv },
        };
        const narrow = resolveTrainingNode(
            pick(config, ["training", "images", "model", "runId", "sandboxes", "target", "envs"]),
            pick(names, ["training", "namespaces", "networks", "ingress"]),
            links,
        );
        assert.deepEqual(narrow, resolveTrainingNode(config, names, links));
    });

    it("refuses a black box on a refused provider (docker, hf) with the config's reason, even from a config that skipped the check", () => {
        // The helpers apply every check but the refusal: what a program that builds its config by hand hands the Platform.
        const cases: Array<[string, PlatformConfig, string]> = [
            ["docker", parseDockerPoolConfig({ recipe: "opencode-blackbox", runId: "r1", target: { kind: "docker" } }, "staging"), DOCKER_BLACKBOX_REFUSED],
            [
                "hf",
                parseHostedConfig(
                    {
                        recipe: "opencode-blackbox",
                        runId: "r1",
                        target: { kind: "kubernetes", context: "test" },
                        sandboxes: { provider: "hf" },
                        ingress: { exposure: "loadbalancer", host: "vllm.example.com", tls: { mode: "secret", secretName: "vllm-tls", publiclyTrusted: true } },
                    },
                    "staging",
                ),
                HOSTED_BLACKBOX_REFUSED,
            ],
        ];
        for (const [provider, config, refusal] of cases) {
            assert.equal(config.sandboxes.provider, provider);
            // The refusal alone, before any component resolves: not what the components would miss without a pool.
            assert.deepEqual(
                configProblems(() => resolvePlatform(config)),
                [refusal],
            );
        }
    });
});

describe("Platform namespaces: only for the roles the stack deploys", () => {
    const k8s = { kind: "kubernetes", context: "test" };
    const cases: Array<{ what: string; raw: Record<string, unknown>; roles: string[] }> = [
        { what: "white box (mbpp-whitebox): training and envs, no ingress or sandboxes", raw: { recipe: "mbpp-whitebox" }, roles: ["training", "envs"] },
        {
            what: "black box on agent-sandbox: training, ingress, sandboxes, no envs",
            raw: { recipe: "opencode-blackbox" },
            roles: ["training", "ingress", "sandboxes"],
        },
        {
            what: "white box whose only env is external: training alone",
            raw: { recipe: "wordle-whitebox", envs: { wordle: { external: { url: "https://org-wordle.hf.space", sessions: 64 } } } },
            roles: ["training"],
        },
    ];
    for (const c of cases) {
        it(c.what, async () => {
            const raw = { runId: "r1", target: k8s, ...c.raw };
            const config = parseWithTestImages(raw, "staging");
            const plan = resolvePlatform(config);
            const run = await runUnderMocks(async () => ({ ...new Platform("agentrl", { plan, secrets: { ingressKeys: {} } }).outputs }), { stack: "staging" });
            assert.equal(run.error, undefined, String(run.error));
            const made = run.resources
                .filter((r) => r.type === "kubernetes:core/v1:Namespace")
                .map((r) => r.inputs.metadata.name)
                .sort();
            assert.deepEqual(made, c.roles.map((role) => plan.names.namespaces[role as keyof typeof plan.names.namespaces]).sort());
            assert.deepEqual(namespaceRoles(config), c.roles);
            // Nothing the stack registers lands in a namespace it does not make.
            const used = new Set(run.resources.map((r) => r.inputs?.metadata?.namespace).filter((ns): ns is string => typeof ns === "string"));
            assert.deepEqual(
                [...used].filter((ns) => !made.includes(ns)),
                [],
            );
            assert.deepEqual(Object.keys(run.outputs!.namespaces as object).sort(), [...c.roles].sort());
        });
    }
});
