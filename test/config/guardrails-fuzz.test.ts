/**
 * Guardrails: config fuzzing with fast-check, seeded and reproducible (the seed is printed;
 * FUZZ_SEED=<n> replays a run).
 * (a) thousands of raw configs built from the schema's field names with right and wrong
 *     values go through parsePlatformConfig: a config comes back, or a ConfigError whose
 *     every line names a field; never any other exception.
 * (b) a sample of valid configs goes through the whole mocked program: every Kubernetes
 *     object passes the strict schema check, and the policy pack reports nothing (the prod
 *     config, pinning included, for prod stacks).
 * (c) a sample of invalid configs through the mocked program: a clean pulumi.RunError and no
 *     resource registered but the stack.
 * Run: node --import tsx --test test/config/guardrails-fuzz.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { before, describe, test } from "node:test";
import * as pulumi from "@pulumi/pulumi";
import fc from "fast-check";
import YAML from "yaml";
import type { PolicyPackConfig } from "@pulumi/policy";
import { ConfigError, parsePlatformConfig as parseExactly, RECIPE_NAMES } from "../../components/config";
import { parseWithTestImages as parsePlatformConfig, TEST_IMAGES } from "../helpers/config";
import { runPolicies } from "../../policy/run-local";
import { runUnderMocks } from "../../scripts/lib/mockrun";
import { REPO_ROOT } from "../../scripts/lib/plan";
import { validateAnyManifest } from "../helpers/crd-schema";
import { planGuarded, policyResources, tempDir } from "../helpers/guardrails-plan";
import { loadManifestSchemas } from "../helpers/k8s-schema";

const SEED = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : 20260101;
const RAW_RUNS = 3000;
const VALID_SAMPLE = 25;
const INVALID_SAMPLE = 15;
const tmp = tempDir("arl-guardrails-fuzz-");
const PROD_CONFIG: PolicyPackConfig = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, "policy", "config.prod.json"), "utf8"));

before(async () => {
    console.log(`guardrails-fuzz seed ${SEED} (replay: FUZZ_SEED=${SEED} node --import tsx --test test/config/guardrails-fuzz.test.ts)`);
    await loadManifestSchemas();
});

// --- (a) raw configs ---------------------------------------------------------------------

/** Field names of the schema (components/config/schema.ts), by section. */
const FIELDS = {
    root: ["recipe", "runId", "clusterStack", "preflight", "target", "model", "images", "training", "envs", "sandboxes", "ingress"],
    target: [
        "kind",
        "namespacePrefix",
        "kubeconfig",
        "context",
        "nodeSelector",
        "tolerations",
        "gpuResourceName",
        "gpuProduct",
        "priorityClassName",
        "storageClassName",
        "host",
        "dataDir",
    ],
    model: ["name", "revision"],
    images: ["vllm", "trainer", "nginx"],
    training: [
        "layout",
        "gpusOnNode",
        "vllmGpus",
        "trainerGpus",
        "numProcesses",
        "perDeviceTrainBatchSize",
        "gradientAccumulationSteps",
        "stepsPerGeneration",
        "numGenerations",
        "perDeviceEvalBatchSize",
        "datasetSize",
        "evalSize",
        "maxSteps",
        "command",
        "extraArgs",
        "extraEnv",
        "maxModelLen",
        "gpuMemoryUtilization",
        "modelLoadSeconds",
        "activeDeadlineSeconds",
        "backoffLimit",
        "shmSize",
        "modelCache",
        "checkpoints",
        "resumeFromCheckpoint",
        "hubRepoId",
        "trackioProject",
        "trackioSpaceId",
        "maxInflight",
        "trainerCpu",
        "trainerMemory",
        "vllmCpu",
        "vllmMemory",
    ],
    env: [
        "catalog",
        "image",
        "concurrentSessions",
        "sessionsPerReplica",
        "replicas",
        "headroomReplicas",
        "settings",
        "resources",
        "terminationGraceSeconds",
        "external",
    ],
    sandboxes: [
        "provider",
        "image",
        "cpu",
        "memory",
        "runtimeClassName",
        "headroom",
        "poolSize",
        "maxLifetimeSeconds",
        "maxWarmWaitSeconds",
        "priorityClassName",
    ],
    ingress: [
        "enabled",
        "keys",
        "sandboxKey",
        "allowCompletions",
        "healthUnauthenticated",
        "exposure",
        "host",
        "tls",
        "gateway",
        "replicas",
        "maxBodySize",
        "rateLimitPerSecond",
        "rateLimitBurst",
        "readTimeoutSeconds",
    ],
};

const ident = fc.stringMatching(/^[A-Za-z][A-Za-z0-9_-]{0,12}$/);
const numbers = fc.oneof(
    fc.constantFrom(0, -1, 1, 2, 3, 4, 8, 16, 64, 0.5, 1.5, 1e9, 1e308, -1e9, Number.MAX_SAFE_INTEGER),
    fc.integer({ min: -100, max: 1000 }),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
);
const plausible = fc.constantFrom(
    "kubernetes",
    "docker",
    "nomad",
    "Qwen/Qwen3-1.7B",
    "not a model",
    "whitebox-colocate",
    "whitebox-server",
    "blackbox",
    "coding",
    "textarena",
    "custom",
    "echo",
    "agent-sandbox",
    "docker",
    "hf",
    "none",
    "cluster",
    "loadbalancer",
    "httproute",
    "secret",
    "files",
    "4Gi",
    "500m",
    "2",
    "-1Gi",
    "unix:///var/run/docker.sock",
    "/srv/x",
    "relative/dir",
    "run-001",
    "RUN_001",
    "",
    "main",
    "vllm/vllm-openai:latest",
    "UPPER/Image",
    "https://env.example.com",
    "ftp://x",
    "4m",
    "sandboxes",
    "operators",
    ...RECIPE_NAMES,
    "no-such-recipe",
);
const scalar = fc.oneof(numbers, plausible, fc.string({ maxLength: 8 }), fc.boolean(), fc.constant(null));
const anyValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
    v: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        scalar,
        scalar,
        fc.array(tie("v"), { maxLength: 3 }),
        fc.dictionary(ident, tie("v"), { maxKeys: 3 }),
    ),
})).v;

/** An object with some of `names` (right-ish or wrong values) and maybe unknown extra keys. */
function section(names: readonly string[], value: (name: string) => fc.Arbitrary<unknown> = () => anyValue): fc.Arbitrary<Record<string, unknown>> {
    const known = fc
        .subarray([...names], { maxLength: Math.min(8, names.length) })
        .chain((keys) => fc.tuple(...keys.map((k) => value(k).map((v) => [k, v] as const))));
    const extra = fc.dictionary(ident, anyValue, { maxKeys: 1 });
    return fc.tuple(known, fc.oneof(fc.constant({}), fc.constant({}), fc.constant({}), extra)).map(([kv, ex]) => ({ ...Object.fromEntries(kv), ...ex }));
}
const orWrong = (a: fc.Arbitrary<unknown>) => fc.oneof({ weight: 4, arbitrary: a }, { weight: 1, arbitrary: anyValue });
const envsArb = fc.dictionary(fc.oneof(fc.constantFrom("coding", "wordle", "e1"), ident), orWrong(section(FIELDS.env)), { maxKeys: 2 });

const rawConfig: fc.Arbitrary<unknown> = fc.oneof(
    { weight: 1, arbitrary: anyValue },
    {
        weight: 9,
        arbitrary: section(FIELDS.root, (name) => {
            switch (name) {
                case "recipe":
                    return orWrong(fc.constantFrom(...RECIPE_NAMES));
                case "runId":
                    return orWrong(fc.constantFrom("run-1", "r", "a".repeat(30)));
                case "envs":
                    return orWrong(envsArb);
                case "target":
                case "model":
                case "images":
                case "training":
                case "sandboxes":
                case "ingress":
                    return orWrong(section(FIELDS[name]));
                default:
                    return anyValue;
            }
        }),
    },
);

const PROBLEM_LINE = /^([A-Za-z][\w-]*(\.[\w-]+)*|\(root\)): \S/;
const STACK_NAMES = ["dev", "fuzz", "prod", "prod-eu"];

describe("guardrails fuzz: parsePlatformConfig on raw configs", () => {
    test(`${RAW_RUNS} generated raw configs: a config or a ConfigError naming fields, never anything else`, () => {
        let errors = 0;
        let configs = 0;
        fc.assert(
            fc.property(fc.oneof(rawConfig, mutatedConfig()), fc.constantFrom(...STACK_NAMES), (raw, stack) => {
                try {
                    parsePlatformConfig(raw, stack);
                    configs++;
                } catch (e) {
                    if (!(e instanceof ConfigError)) throw new Error(`not a ConfigError: ${(e as Error)?.stack ?? e}`);
                    errors++;
                    assert.ok(e.problems.length > 0, "a ConfigError has problems");
                    for (const p of e.problems) {
                        assert.ok(p.trim().length > 0, "no empty problem line");
                        assert.match(p, PROBLEM_LINE, `problem line names a field: ${JSON.stringify(p)}`);
                    }
                }
            }),
            { seed: SEED, numRuns: RAW_RUNS },
        );
        console.log(`raw configs: ${configs} parsed, ${errors} ConfigErrors`);
        assert.ok(errors > 0);
    });
});

// --- (b) valid configs through the whole program ------------------------------------------

const digest = (c: string) => `@sha256:${c.repeat(64)}`;
const validConfig = fc
    .record({
        recipe: fc.constantFrom(...RECIPE_NAMES),
        target: fc.constantFrom("kubernetes", "docker"),
        prod: fc.boolean(),
        runId: fc.stringMatching(/^[a-z][a-z0-9]{0,6}-[0-9]{1,3}$/),
        batch: fc.constantFrom(4, 8, 16),
        accumulation: fc.constantFrom(1, 2, 4),
        headroomReplicas: fc.integer({ min: 0, max: 2 }),
        ingressReplicas: fc.integer({ min: 1, max: 3 }),
        sandboxHeadroom: fc.integer({ min: 0, max: 4 }),
        sandboxCpu: fc.constantFrom("500m", "1", "2"),
        runtimeClass: fc.option(fc.constantFrom("gvisor", "kata"), { nil: undefined }),
        maxSteps: fc.option(fc.integer({ min: 1, max: 500 }), { nil: undefined }),
        resume: fc.boolean(),
        exposure: fc.constantFrom("cluster", "cluster", "httproute", "loadbalancer"),
    })
    .map((v) => {
        const k8s = v.target === "kubernetes";
        const raw: Record<string, any> = {
            recipe: v.recipe,
            runId: v.runId,
            target: k8s ? { kind: v.target, context: "fuzz" } : { kind: v.target },
            images: { trainer: TEST_IMAGES.trainer },
            training: {
                perDeviceTrainBatchSize: v.batch,
                gradientAccumulationSteps: v.accumulation,
                resumeFromCheckpoint: v.resume,
                ...(v.maxSteps !== undefined ? { maxSteps: v.maxSteps } : {}),
            },
        };
        if (v.recipe === "opencode-blackbox") {
            raw.sandboxes = {
                headroom: v.sandboxHeadroom,
                cpu: v.sandboxCpu,
                ...(k8s ? { image: TEST_IMAGES.sandbox } : {}),
                ...(k8s && v.runtimeClass ? { runtimeClassName: v.runtimeClass } : {}),
            };
            // One proxy container on Docker: replicas is refused there (components/config/target-settings.ts).
            raw.ingress = k8s ? { replicas: v.ingressReplicas } : {};
            if (k8s && v.exposure === "httproute")
                Object.assign(raw.ingress, { exposure: "httproute", host: "vllm.example.com", gateway: { name: "gw", namespace: "gateway-system" } });
            if (k8s && v.exposure === "loadbalancer")
                Object.assign(raw.ingress, { exposure: "loadbalancer", host: "vllm.example.com", tls: { mode: "secret", secretName: "vllm-tls" } });
        } else {
            const env = v.recipe === "wordle-whitebox" ? "wordle" : "coding";
            raw.envs = { [env]: { headroomReplicas: v.headroomReplicas } };
        }
        if (v.prod) {
            raw.model = { revision: "b968826d9c46dd6066d109eabc6255188de91218" };
            // images.vllm only where vLLM runs from it (black box on Docker); elsewhere it is refused.
            raw.images = {
                ...(v.recipe === "opencode-blackbox" && !k8s ? { vllm: `vllm/vllm-openai${digest("a")}` } : {}),
                trainer: `ghcr.io/org/trainer${digest("b")}`,
                nginx: `nginxinc/nginx-unprivileged${digest("c")}`,
            };
            raw.sandboxes = { ...(raw.sandboxes ?? {}), image: `ghcr.io/org/sandbox${digest("d")}` };
            if (raw.envs) for (const e of Object.values<any>(raw.envs)) e.image = `ghcr.io/org/env${digest("e")}`;
        }
        return { raw, stack: v.prod ? "prod-fuzz" : "fuzz" };
    })
    .filter(({ raw, stack }) => {
        try {
            parseExactly(raw, stack);
            return true;
        } catch (e) {
            if (e instanceof ConfigError) return false;
            throw e;
        }
    });

/** A valid config with one field (known, or an unknown one) set to a random right or wrong value. */
function mutatedConfig(): fc.Arbitrary<unknown> {
    const sections = ["target", "training", "sandboxes", "ingress", "images", "model"] as const;
    return fc
        .tuple(validConfig, fc.constantFrom(...sections), fc.boolean(), ident, anyValue, fc.boolean())
        .map(([{ raw }, sec, known, extra, value, numeric]) => {
            const out = structuredClone(raw);
            const names = FIELDS[sec];
            const field = known ? names[Math.abs(extra.length * 7919 + extra.charCodeAt(0)) % names.length] : extra;
            out[sec] = { ...(out[sec] ?? {}), [field]: numeric && typeof value !== "number" ? extra.length - 3 : value };
            return out;
        });
}

describe("guardrails fuzz: valid configs through the whole mocked program", () => {
    const samples = fc.sample(validConfig, { seed: SEED, numRuns: VALID_SAMPLE });
    samples.forEach(({ raw, stack }, i) => {
        test(`valid #${i} (${raw.recipe} on ${raw.target.kind}, stack ${stack}): strict schema and policy pack clean`, async () => {
            const file = path.join(tmp, `valid-${i}`, `Pulumi.${stack}.yaml`);
            fs.mkdirSync(path.dirname(file), { recursive: true });
            fs.writeFileSync(file, YAML.stringify({ config: { "agent-rl-infra:platform": raw } }));
            const { result } = await planGuarded({ stack, stackFile: file }, { outDir: path.join(tmp, `valid-${i}`, "out") });
            const problems = result.manifests.flatMap((m) => validateAnyManifest(m).map((p) => `${m.kind} ${m.metadata?.name}: ${p}`));
            assert.deepEqual(problems, [], JSON.stringify(raw));
            const violations = await runPolicies(policyResources(result.resources), { config: stack.startsWith("prod") ? PROD_CONFIG : {}, stack });
            assert.deepEqual(
                violations.map((v) => `[${v.policy}] ${v.message}`),
                [],
                JSON.stringify(raw),
            );
        });
    });
});

// --- (c) invalid configs through the whole program ----------------------------------------

describe("guardrails fuzz: invalid configs stop the program before any resource", () => {
    const program = () => require(path.join(REPO_ROOT, "index.ts")) as () => Promise<Record<string, unknown>>;
    const invalid = rawConfig.filter((raw) => {
        try {
            parsePlatformConfig(raw, "fuzz");
            return false;
        } catch (e) {
            return e instanceof ConfigError;
        }
    });
    const samples = fc.sample(invalid, { seed: SEED, numRuns: INVALID_SAMPLE });
    test(`${INVALID_SAMPLE} invalid configs: pulumi.RunError, zero resources but the stack`, async () => {
        for (const raw of samples) {
            const run = await runUnderMocks(program(), { stack: "fuzz", config: { "agent-rl-infra:platform": JSON.stringify(raw) } });
            assert.ok(run.error, `the program failed: ${JSON.stringify(raw)}`);
            assert.ok(pulumi.RunError.isInstance(run.error), `a clean RunError, not ${(run.error as Error)?.stack}`);
            assert.deepEqual(
                run.resources.filter((r) => r.type !== "pulumi:pulumi:Stack").map((r) => r.type),
                [],
                JSON.stringify(raw),
            );
        }
    });
});
