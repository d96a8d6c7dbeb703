import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
    ConfigError,
    deepMerge,
    platformNames,
    validateNames,
    RECIPE_NAMES,
    RECIPES,
    dnsName,
    DOCKER_BLACKBOX_REFUSED,
    HOSTED_BLACKBOX_REFUSED,
} from "../../components/config";
import { configProblems, HOSTED_SANDBOXES_ON_DOCKER, parseWithTestImages as parsePlatformConfig } from "../helpers/config";
import { parsePlatformConfig as parseExactly } from "../../components/config";

const base = { recipe: "mbpp-whitebox", runId: "r1", target: { kind: "kubernetes", context: "test" } };

/** Parses (test images filled in) and returns the problems (empty when the config is valid). */
const problems = (raw: unknown, stack = "test"): string[] => configProblems(() => parsePlatformConfig(raw, stack));

function withOverride(override: Record<string, unknown>, from: Record<string, unknown> = base): unknown {
    return deepMerge(from, override);
}

describe("config: recipes", () => {
    for (const name of RECIPE_NAMES) {
        for (const kind of ["kubernetes", "docker"]) {
            const raw = { recipe: name, runId: "r1", target: kind === "kubernetes" ? { kind, context: "test" } : { kind } };
            if (kind === "docker" && RECIPES[name].training.layout === "blackbox") {
                // The docker sandbox pool (the Docker black-box default) and hosted sandboxes are refused for the black box.
                test(`${name} on docker is refused on its default sandbox pool and on hosted sandboxes, each with its one reason`, () => {
                    assert.deepEqual(problems(raw), [DOCKER_BLACKBOX_REFUSED]);
                    assert.deepEqual(problems(deepMerge(raw, HOSTED_SANDBOXES_ON_DOCKER)), [HOSTED_BLACKBOX_REFUSED]);
                });
                continue;
            }
            test(`${name} on ${kind} parses with no problems`, () => {
                assert.deepEqual(problems(raw), []);
            });
        }
    }

    test("mbpp-whitebox reproduces the published run: 16 sessions, 4 prompts per step, 170 problems, 42 steps", () => {
        const c = parsePlatformConfig(base, "test");
        assert.equal(c.model.name, "Qwen/Qwen3-1.7B");
        assert.equal(c.training.layout, "whitebox-colocate");
        assert.equal(c.training.trainerGpus, 1);
        assert.equal(c.training.vllmGpus, 0);
        assert.equal(c.demand.generationBatch, 16);
        assert.equal(c.demand.promptsPerGeneration, 4);
        assert.equal(c.training.datasetSize, 170);
        // The script has no step flag: one epoch over 170 problems at 4 prompts per step is its 42 steps.
        assert.equal(c.training.program, "train_coding_whitebox_eval");
        assert.equal(c.training.maxSteps, undefined);
        assert.equal(Math.floor(c.training.datasetSize / c.demand.promptsPerGeneration), 42);
        assert.equal(c.training.evalSize, 64);
        const coding = c.envs.find((e) => e.name === "coding")!;
        assert.equal(coding.sessionsPerReplica, 1, "coding_env serves one session per process");
        assert.equal(coding.replicas, 17, "16 sessions + one spare replica");
    });

    test("mbpp-whitebox-64 opens 64 sessions (16 prompts per step)", () => {
        const c = parsePlatformConfig({ ...base, recipe: "mbpp-whitebox-64" }, "test");
        assert.equal(c.demand.generationBatch, 64);
        assert.equal(c.demand.promptsPerGeneration, 16);
        assert.equal(c.envs[0].replicas, 65);
    });

    test("wordle-whitebox: 32 sessions at 8 per replica -> 4 + 1 spare replicas", () => {
        const c = parsePlatformConfig({ ...base, recipe: "wordle-whitebox" }, "test");
        assert.equal(c.demand.generationBatch, 32);
        assert.equal(c.envs[0].sessionsPerReplica, 8);
        assert.equal(c.envs[0].replicas, 5);
        assert.equal(c.envs[0].settings.TEXTARENA_ENV_ID, "Wordle-v0");
        assert.equal(c.training.datasetSize, 2000);
    });

    test("opencode-blackbox: 2 GPUs split 1/1, pool covers 8 in flight + 3 in refill + 2", () => {
        const c = parsePlatformConfig({ ...base, recipe: "opencode-blackbox" }, "test");
        assert.equal(c.model.name, "Qwen/Qwen3-8B");
        assert.deepEqual([c.training.vllmGpus, c.training.trainerGpus, c.training.gpusOnNode], [1, 1, 2]);
        assert.equal(c.training.numGenerations, 8);
        assert.equal(c.sandboxes.provider, "agent-sandbox");
        assert.equal(c.sandboxes.poolSize, 13);
        assert.equal(c.ingress.enabled, true);
        assert.equal(c.training.datasetSize, 32);
        assert.equal(c.training.maxSteps, 10);
    });

    test("a stack's fields override the recipe's", () => {
        const c = parsePlatformConfig(withOverride({ training: { gradientAccumulationSteps: 4 } }), "test");
        assert.equal(c.demand.generationBatch, 32);
        assert.equal(c.training.datasetSize, 170, "the rest of the recipe stays");
    });
});

describe("config: every validation message names the field and the fix", () => {
    const cases: Array<{ what: string; raw: unknown; stack?: string; expect: RegExp[] }> = [
        {
            what: "GPU counts do not fit the node",
            raw: withOverride({ recipe: "opencode-blackbox", training: { vllmGpus: 2, trainerGpus: 1 } }),
            expect: [
                /^training\.trainerGpus: vLLM 2 \+ trainer 1 = 3 GPUs, but the node has 2 \(training\.gpusOnNode\): lower vllmGpus or trainerGpus, or raise gpusOnNode$/,
            ],
        },
        {
            what: "colocate with separate vLLM GPUs",
            raw: withOverride({ training: { gpusOnNode: 2, vllmGpus: 1 } }),
            expect: [
                /^training\.vllmGpus: the whitebox-colocate layout runs vLLM inside the trainer, so it has no separate vLLM GPUs \(got 1\): set vllmGpus to 0, or use layout whitebox-server$/,
            ],
        },
        {
            what: "server layout without vLLM GPUs",
            raw: withOverride({ training: { layout: "whitebox-server", gpusOnNode: 2, vllmGpus: 0 } }),
            expect: [/^training\.vllmGpus: the whitebox-server layout runs vLLM on its own GPUs: set vllmGpus to at least 1$/],
        },
        {
            what: "more trainer processes than trainer GPUs",
            raw: withOverride({ training: { numProcesses: 2 } }),
            expect: [/^training\.numProcesses: 2 trainer processes need one GPU each, but trainerGpus is 1: lower numProcesses to 1 or raise trainerGpus$/],
        },
        {
            what: "generation batch not divisible by num_generations",
            raw: withOverride({ training: { gradientAccumulationSteps: 3, numGenerations: 5, perDeviceEvalBatchSize: 10 } }),
            expect: [
                /^training\.numGenerations: the generation batch perDeviceTrainBatchSize 8 x numProcesses 1 x stepsPerGeneration 3 = 24 is not divisible by numGenerations 5: set numGenerations to one of 2, 3, 4, 6, 8, 12, 24, or make the generation batch a multiple of 5$/,
            ],
        },
        {
            what: "eval batch not divisible by num_generations",
            raw: withOverride({ training: { perDeviceEvalBatchSize: 6 } }),
            expect: [
                /^training\.perDeviceEvalBatchSize: the eval batch perDeviceEvalBatchSize 6 x numProcesses 1 = 6 is not divisible by numGenerations 4: set perDeviceEvalBatchSize to a multiple of 4$/,
            ],
        },
        {
            what: "env capacity below the generation batch plus headroom",
            raw: withOverride({ recipe: "wordle-whitebox", envs: { wordle: { replicas: 4 } } }),
            expect: [
                /^envs\.wordle\.replicas: 4 replicas x 8 sessions = 32, but training opens 32 sessions at once \(the generation batch \(32\)\) plus 1 spare replica\(s\) of headroom = 40: raise replicas to 5 or sessionsPerReplica to 11$/,
            ],
        },
        {
            what: "env capacity below the eval batch",
            raw: withOverride({
                recipe: "wordle-whitebox",
                // The seeds' Wordle script takes no eval flags: a custom script that evaluates.
                training: {
                    program: "custom",
                    command: ["python", "/app/train.py"],
                    evalSize: 50,
                    perDeviceEvalBatchSize: 64,
                    // A custom script's checkpoints are counted in fp32 (the seeds' 46Gi is for bf16).
                    checkpoints: { size: "76Gi" },
                },
                envs: { wordle: { replicas: 5 } },
            }),
            expect: [
                /^envs\.wordle\.replicas: 5 replicas x 8 sessions = 40, but training opens 64 sessions at once \(the eval batch \(64\)\) plus 1 spare replica\(s\) of headroom = 72: raise replicas to 9/,
            ],
        },
        {
            what: "an env without concurrent sessions held to 1 per replica",
            raw: withOverride({ envs: { coding: { sessionsPerReplica: 4 } } }),
            expect: [
                /^envs\.coding\.sessionsPerReplica: the coding env serves one session per process \(it cannot serve concurrent sessions\), got 4: set it to 1 and scale by replicas \(17 for 16 sessions with 1 spare\)$/,
            ],
        },
        {
            what: "a catalog env forced to concurrent sessions",
            raw: withOverride({ envs: { coding: { concurrentSessions: true, sessionsPerReplica: 8 } } }),
            expect: [
                /^envs\.coding\.concurrentSessions: only a custom env declares it; the coding env's is known from its server \(one session per process\): remove the field$/,
            ],
        },
        {
            what: "external env with too few sessions",
            raw: withOverride({ envs: { coding: { external: { url: "https://org-coding.hf.space", sessions: 8 } } } }),
            expect: [
                /^envs\.coding\.external\.sessions: the external env holds 8 sessions but training opens 16 at once \(the generation batch \(16\)\): use a server that holds 16/,
            ],
        },
        {
            what: "external env with a bad URL",
            raw: withOverride({ envs: { coding: { external: { url: "ftp://x", sessions: 64 } } } }),
            expect: [/^envs\.coding\.external\.url: must be an http\(s\) URL/],
        },
        {
            what: "custom env without image or session count",
            raw: withOverride({ envs: { coding: { catalog: "custom" } } }),
            expect: [
                /^envs\.coding\.image: a custom env needs an image/,
                /^envs\.coding\.sessionsPerReplica: a custom env must say how many sessions one replica holds/,
            ],
        },
        {
            what: "black box pool smaller than the rollouts in flight",
            raw: withOverride({ recipe: "opencode-blackbox", sandboxes: { poolSize: 4 } }),
            expect: [
                /^sandboxes\.poolSize: the pool holds 4 sandboxes but a burst claims 8 at once \(training\.maxInflight 8 x 1 rollout worker \(TRL's async GRPO runs rollouts on the main process only(, not on all \d+ trainer processes)?\)\): every burst would wait for 4 cold starts; raise poolSize to at least 13 \(burst 8 \+ refill 3 \(claim rate 8 \/ 35 s sandboxes\.rolloutSeconds = 0\.23\/s, x 10 s sandboxes\.refillSeconds, rounded up\) \+ 2 sandboxes\.headroom = 13\), or unset it \(that is the default\), or lower training\.maxInflight$/,
            ],
        },
        {
            what: "black box without sandboxes",
            raw: withOverride({ recipe: "opencode-blackbox", sandboxes: { provider: "none" } }),
            expect: [/^sandboxes\.provider: the black-box layout runs one sandbox per in-flight rollout: set provider to agent-sandbox$/],
        },
        {
            what: "white box with sandboxes and an ingress",
            raw: withOverride({ sandboxes: { provider: "agent-sandbox" }, ingress: { enabled: true } }),
            expect: [/^sandboxes\.provider: only the black-box layout uses sandboxes/, /^ingress\.enabled: a whitebox-colocate run keeps vLLM private/],
        },
        {
            what: "agent-sandbox on the docker target",
            raw: { recipe: "opencode-blackbox", runId: "r1", target: { kind: "docker" }, sandboxes: { provider: "agent-sandbox" } },
            expect: [
                /^sandboxes\.provider: agent-sandbox runs on Kubernetes, but the target is docker: use a Kubernetes target \(the docker sandbox pool and hosted sandboxes, provider hf, are refused for the black box\)$/,
            ],
        },
        {
            what: "hosted (hf) sandboxes for the black box on Kubernetes: refused, no override",
            raw: withOverride({
                recipe: "opencode-blackbox",
                sandboxes: { provider: "hf" },
                ingress: { exposure: "loadbalancer", host: "vllm.example.com", tls: { mode: "secret", secretName: "vllm-tls", publiclyTrusted: true } },
            }),
            expect: [
                /^sandboxes\.provider: hosted \(hf\) sandboxes are refused for the black box: OpenEnv's capture proxy records the token ids and logprobs as the agent's own uid, which can rewrite them, kill the proxy and answer on its port, and read the shared ingress key from its environment \(a key to the public ingress, usable from anywhere until rotated\), and nothing outside the sandbox records the trace\. Use a Kubernetes target with provider agent-sandbox: the forwarder, under another uid, records the trace and holds a per-rollout key out of the agent's reach\. \(A white-box recipe may run its model's code on a hosted env server, envs\.<name>\.external: the trainer holds the trace there and no key goes to the env\.\)$/,
            ],
        },
        {
            what: "hosted (hf) sandboxes for the black box on the docker target: refused",
            raw: {
                recipe: "opencode-blackbox",
                runId: "r1",
                target: { kind: "docker" },
                sandboxes: { provider: "hf" },
                ingress: {
                    exposure: "loadbalancer",
                    host: "vllm.example.com",
                    tls: { mode: "files", certFile: "/etc/tls/c.pem", keyFile: "/etc/tls/k.pem", publiclyTrusted: true },
                },
            },
            expect: [/^sandboxes\.provider: hosted \(hf\) sandboxes are refused for the black box: /],
        },
        {
            what: "the removed override sandboxes.acceptForgeableTrace, on any provider",
            raw: withOverride({ recipe: "opencode-blackbox", sandboxes: { provider: "agent-sandbox", acceptForgeableTrace: true } }),
            expect: [
                /^sandboxes\.acceptForgeableTrace: removed: hosted \(hf\) black-box sandboxes are refused whatever the stack says \(the agent's uid can rewrite the trace that is trained on and read the ingress key there\): remove it, and run the black box on a Kubernetes target with provider agent-sandbox$/,
            ],
        },
        {
            what: "hosted (hf) sandboxes on a white box: only the black box uses sandboxes (its env may be hosted instead)",
            raw: withOverride({ sandboxes: { provider: "hf" } }),
            expect: [/^sandboxes\.provider: only the black-box layout uses sandboxes \(layout is whitebox-colocate\)/],
        },
        {
            what: "black box on the docker target's default sandbox pool (refused for now)",
            raw: { recipe: "opencode-blackbox", runId: "r1", target: { kind: "docker" } },
            expect: [
                /^sandboxes\.provider: the docker sandbox pool \(the default for layout blackbox on the docker target\) is refused: no sandbox backend drives it, and a Docker trainer could not read the forwarder's trace, so it would train on the in-sandbox capture proxy's, which the agent's uid can rewrite\. Use a Kubernetes target \(provider agent-sandbox, the default there: the forwarder holds the key and records the trace out of the agent's reach\)$/,
            ],
        },
        {
            what: "black box without sandboxes on the docker target",
            raw: { recipe: "opencode-blackbox", runId: "r1", target: { kind: "docker" }, sandboxes: { provider: "none" } },
            expect: [
                /^sandboxes\.provider: the black-box layout runs one sandbox per in-flight rollout: use a Kubernetes target \(provider agent-sandbox; the docker sandbox pool and hosted sandboxes are refused for the black box\)$/,
            ],
        },
        {
            // The refusal alone: nothing is asked of the ingress for a provider that renders nothing.
            what: "hosted sandboxes with an in-cluster ingress: refused, with the reason and nothing else",
            raw: withOverride({ recipe: "opencode-blackbox", sandboxes: { provider: "hf" } }),
            expect: [/^sandboxes\.provider: hosted \(hf\) sandboxes are refused for the black box/],
        },
        {
            what: "LoadBalancer in plain HTTP",
            raw: withOverride({ recipe: "opencode-blackbox", ingress: { exposure: "loadbalancer", host: "vllm.example.com" } }),
            expect: [
                /^ingress\.tls\.mode: a LoadBalancer exposes the keys' bearer tokens to the network in plain HTTP: set tls\.mode to cert-manager \(with tls\.issuer\) or secret/,
            ],
        },
        {
            what: "tls secret without a name, and an unknown sandbox key",
            raw: withOverride({ recipe: "opencode-blackbox", ingress: { tls: { mode: "secret" }, sandboxKey: "robots" } }),
            expect: [
                /^ingress\.sandboxKey: 'robots' is not one of ingress\.keys \(sandboxes, operators\)/,
                /^ingress\.tls\.secretName: tls mode 'secret' needs the name of a kubernetes\.io\/tls Secret/,
            ],
        },
        {
            what: "prod stack with unpinned images and model",
            raw: withOverride({ recipe: "opencode-blackbox" }),
            stack: "prod",
            expect: [
                /^images\.trainer: prod stacks pin every image by digest, got 'registry\.test\/agent-rl\/trainer:test': use <image>@sha256:<64 hex digits>/,
                /^images\.nginx: prod stacks pin every image by digest/,
                /^sandboxes\.image: prod stacks pin every image by digest/,
                /^model\.revision: prod stacks pin the model revision, got 'main'/,
            ],
        },
        {
            what: "prod black box with isolated GPUs also pins the vLLM image it then deploys",
            raw: withOverride({ recipe: "opencode-blackbox", training: { gpuSharing: "isolated" } }),
            stack: "prod",
            expect: [
                /^images\.trainer: prod stacks pin every image by digest/,
                /^images\.vllm: prod stacks pin every image by digest, got 'vllm\/vllm-openai:v0\.29\.0'/,
                /^images\.nginx: prod stacks pin every image by digest/,
                /^sandboxes\.image: prod stacks pin every image by digest/,
                /^model\.revision: prod stacks pin the model revision, got 'main'/,
            ],
        },
        {
            what: "images.vllm where no vLLM image runs",
            raw: withOverride({ recipe: "opencode-blackbox", images: { vllm: "vllm/vllm-openai:v0.30.0" } }),
            expect: [
                /^images\.vllm: not deployed: on Kubernetes with gpuSharing 'shared' one container from images\.trainer runs both vLLM and the trainer .*set training\.gpuSharing to 'isolated'/,
            ],
        },
        {
            what: "images.vllm on a white-box layout",
            raw: withOverride({ images: { vllm: "vllm/vllm-openai:v0.30.0" } }),
            expect: [/^images\.vllm: the whitebox-colocate layout never runs the vLLM image \(vLLM runs inside the trainer\): remove images\.vllm$/],
        },
        {
            what: "ingress host with a scheme, relative TLS files on Docker",
            raw: {
                recipe: "opencode-blackbox",
                runId: "r1",
                target: { kind: "docker" },
                ingress: { exposure: "loadbalancer", host: "https://vllm.example.com", tls: { mode: "files", certFile: "cert.pem", keyFile: "/etc/key.pem" } },
            },
            expect: [
                /^ingress\.host: must be a DNS host name such as vllm\.example\.com \(no scheme, no port\)$/,
                /^ingress\.tls\.certFile: must be an absolute path on the Docker host$/,
                // The schema's refusals no longer hide the cross-field checks: the Docker black box's pool is refused too.
                /^sandboxes\.provider: the docker sandbox pool /,
            ],
        },
        {
            what: "plain HTTP published on Docker: the fix names files, not a Kubernetes Secret",
            raw: {
                recipe: "opencode-blackbox",
                runId: "r1",
                target: { kind: "docker" },
                sandboxes: { provider: "hf" },
                ingress: { exposure: "loadbalancer", host: "vllm.example.com", tls: { publiclyTrusted: true } },
            },
            expect: [
                /^sandboxes\.provider: hosted \(hf\) sandboxes are refused for the black box/,
                /^ingress\.tls\.mode: a published port exposes the keys' bearer tokens to the network in plain HTTP: set tls\.mode to files with certFile and keyFile$/,
            ],
        },
        {
            what: "a secret in plain-text env maps",
            raw: withOverride({
                training: { extraEnv: { WANDB_API_KEY: "x", openai_api_key: "z", TOKENIZERS_PARALLELISM: "false" } },
                envs: { coding: { settings: { DB_PASSWORD: "y" } } },
            }),
            expect: [
                /^training\.extraEnv\.WANDB_API_KEY: looks like a secret .*: remove the value; pass it as a reference instead: WANDB_API_KEY: \{ secret: envSecret-<name> \} and pulumi config set --secret envSecret-<name>$/,
                /^training\.extraEnv\.openai_api_key: looks like a secret/,
                /^envs\.coding\.settings\.DB_PASSWORD: looks like a secret .*: remove the value; pass it as a reference to an existing Kubernetes Secret in the env's namespace instead: DB_PASSWORD: \{ secretKeyRef: \{ name: <Secret>, key: <key> \} \} \(Kubernetes target only\)$/,
            ],
        },
        {
            what: "an env setting from a Kubernetes Secret on the docker target",
            raw: {
                recipe: "mbpp-whitebox",
                runId: "r1",
                target: { kind: "docker" },
                envs: { coding: { settings: { DB_PASSWORD: { secretKeyRef: { name: "coding-db", key: "password" } } } } },
            },
            expect: [
                /^envs\.coding\.settings\.DB_PASSWORD: secretKeyRef names a Kubernetes Secret, and the docker target has none: use a Kubernetes target, or leave the setting out \(a Docker env takes no secret\)$/,
            ],
        },
        {
            what: "a secretKeyRef that names no Secret, or carries more than name and key",
            raw: withOverride({
                envs: {
                    coding: {
                        settings: {
                            A_PASSWORD: { secretKeyRef: { name: "Not_A_Name", key: "k" } },
                            B_KEY: { secretKeyRef: { name: "s", key: "k" }, value: "x" },
                        },
                    },
                },
            }),
            expect: [
                /^envs\.coding\.settings\.A_PASSWORD\.secretKeyRef\.name: must be a Kubernetes Secret name \(lower-case DNS subdomain\)$/,
                /^envs\.coding\.settings\.B_KEY\.value: unknown field/,
            ],
        },
        {
            what: "a stack secret reference in env settings (extraEnv's form)",
            raw: withOverride({ envs: { coding: { settings: { DB_PASSWORD: { secret: "envSecret-db" } } } } }),
            expect: [
                /^envs\.coding\.settings\.DB_PASSWORD: must be a string, or \{ secretKeyRef: \{ name, key \} \}: a key of an existing Kubernetes Secret in the env's namespace \(env settings take no stack secret reference\)$/,
            ],
        },
        {
            what: "dataset size missing (never defaulted)",
            raw: { runId: "r1", target: { kind: "docker" }, model: { name: "Qwen/Qwen3-1.7B" }, training: { layout: "whitebox-colocate", gpusOnNode: 1 } },
            expect: [/^training\.datasetSize: required: set it to the number of training problems\/prompts; it is never defaulted/],
        },
        {
            what: "no training command (only recipes set one)",
            raw: {
                runId: "r1",
                target: { kind: "docker" },
                model: { name: "Qwen/Qwen3-1.7B" },
                training: { layout: "whitebox-colocate", gpusOnNode: 1, datasetSize: 10, numGenerations: 4 },
            },
            expect: [
                /^training\.command: required with program 'custom': the command that starts your training script baked into the trainer image, e\.g\. \[python, \/app\/train\.py\]; or set training\.program to one of train_coding_whitebox_eval, /,
            ],
        },
        {
            what: "a misspelt field",
            raw: withOverride({ training: { perDeviceTrainBatchsize: 8 } }),
            expect: [/^training\.perDeviceTrainBatchsize: unknown field: did you mean training\.perDeviceTrainBatchSize\? rename it$/],
        },
        {
            what: "a wrong type",
            raw: withOverride({ training: { numGenerations: "4" } }),
            expect: [/^training\.numGenerations: expected number, got the string "4"$/],
        },
        {
            what: "an unknown target kind and a bad run id",
            raw: { recipe: "mbpp-whitebox", runId: "Run_1", target: { kind: "nomad" } },
            expect: [/^runId: must be lower-case letters, digits and '-'/, /^target\.kind: must be "kubernetes" or "docker"$/],
        },
        {
            what: "an unknown recipe",
            raw: { recipe: "mbpp", runId: "r1", target: { kind: "docker" } },
            expect: [
                /^recipe: unknown recipe "mbpp": use one of mbpp-whitebox, mbpp-whitebox-64, wordle-whitebox, opencode-blackbox, opencode-blackbox-32b, harbor-blackbox$/,
            ],
        },
    ];

    for (const c of cases) {
        test(c.what, () => {
            const got = problems(c.raw, c.stack);
            for (const re of c.expect)
                assert.ok(
                    got.some((p) => re.test(p)),
                    `expected a problem matching ${re}\n got:\n  ${got.join("\n  ")}`,
                );
            assert.equal(got.length, c.expect.length, `expected exactly ${c.expect.length} problem(s), got:\n  ${got.join("\n  ")}`);
        });
    }

    test("all problems are reported together", () => {
        const got = problems(
            withOverride({ training: { gpusOnNode: 2, vllmGpus: 1, perDeviceEvalBatchSize: 6 }, envs: { coding: { sessionsPerReplica: 2 } } }),
        );
        assert.equal(got.length, 3, got.join("\n"));
    });

    test("the error message lists every problem on its own line", () => {
        try {
            parsePlatformConfig(withOverride({ training: { numProcesses: 2, perDeviceEvalBatchSize: 5 } }), "test");
            assert.fail("expected a ConfigError");
        } catch (e) {
            assert.ok(e instanceof ConfigError);
            assert.match(e.message, /^invalid configuration \(2 problems\):\n {2}- training\.numProcesses: .*\n {2}- training\.perDeviceEvalBatchSize: /);
        }
    });
});

describe("config: defaults and names", () => {
    test("0 is a value, not a missing one (headroomReplicas 0)", () => {
        const c = parsePlatformConfig(withOverride({ envs: { coding: { headroomReplicas: 0 } } }), "test");
        assert.equal(c.envs[0].replicas, 16);
    });

    test("stepsPerGeneration defaults to gradientAccumulationSteps (TRL's default)", () => {
        const c = parsePlatformConfig(withOverride({ training: { gradientAccumulationSteps: 4 } }), "test");
        assert.equal(c.training.stepsPerGeneration, 4);
    });

    test("names are DNS-1123, at most 63 characters, and differ between stacks and runs", () => {
        const long = parsePlatformConfig({ ...base, runId: "a-very-long-run-id-00001" }, "a-very-long-stack-name-for-testing-purposes-only");
        const n = platformNames(long);
        assert.deepEqual(validateNames(n), []);
        const a = platformNames(parsePlatformConfig(base, "dev"));
        const b = platformNames(parsePlatformConfig({ ...base, runId: "r2" }, "dev"));
        const s = platformNames(parsePlatformConfig(base, "staging"));
        assert.notEqual(a.training.job, b.training.job);
        assert.notEqual(a.namespaces.training, s.namespaces.training);
    });

    test("dnsName truncates with a stable hash", () => {
        const n = dnsName(["x".repeat(80)]);
        assert.equal(n.length, 63);
        assert.equal(n, dnsName(["x".repeat(80)]));
        assert.notEqual(n, dnsName(["x".repeat(81)]));
    });
});

describe("config: which cluster, and whether prod rules apply", () => {
    test("a Kubernetes stack other than dev must name its cluster", () => {
        const raw = { recipe: "mbpp-whitebox", runId: "r1", target: { kind: "kubernetes" } };
        for (const stack of ["staging", "prod", "acme-prd", "test"]) {
            const p = problems(raw, stack);
            assert.ok(
                p.some((m) =>
                    m.startsWith(
                        `target.context: required for stack '${stack}' (only dev / dev-* stacks may use kubectl's current context, which may point at any cluster): set target.context`,
                    ),
                ),
                `${stack}: ${p.join("\n")}`,
            );
        }
        for (const stack of ["dev", "dev-alice"]) assert.deepEqual(problems(raw, stack), [], stack);
        assert.deepEqual(problems({ ...raw, target: { kind: "kubernetes", kubeconfig: "/etc/kube/staging.yaml" } }, "staging"), []);
        assert.deepEqual(problems({ ...raw, target: { kind: "docker" } }, "staging"), [], "Docker names its host in target.host");
    });

    test("prod is an explicit setting, defaulting from the stack name", () => {
        const raw = { recipe: "mbpp-whitebox", runId: "r1", target: { kind: "docker" } };
        const pinning = (p: string[]) => p.filter((m) => /prod stacks pin/.test(m)).length;
        assert.ok(pinning(problems(raw, "prod")) > 0, "stack prod: on by default");
        assert.ok(pinning(problems(raw, "prod-eu")) > 0, "stack prod-*: on by default");
        assert.equal(pinning(problems(raw, "production")), 0, "not from other names");
        assert.ok(pinning(problems({ ...raw, prod: true }, "production")) > 0, "prod: true turns the rules on for any name");
        assert.ok(pinning(problems({ ...raw, prod: true }, "acme-prd")) > 0);
        assert.equal(pinning(problems({ ...raw, prod: false }, "prod")), 0, "prod: false turns them off, explicitly");
        assert.equal(parsePlatformConfig({ ...raw, prod: false }, "prod").prod, false);
    });
});

describe("config: the images no default can stand for", () => {
    const exactProblems = (raw: unknown, stack = "test") => configProblems(() => parseExactly(raw, stack));

    test("images.trainer is required, and the message says what it must hold for the layout", () => {
        assert.deepEqual(exactProblems({ recipe: "mbpp-whitebox", runId: "r1", target: { kind: "docker" } }), [
            "images.trainer: required: the image holding /app/train_coding_whitebox_eval.py (train_coding_whitebox_eval.py (huggingface:sergiopaniego/rl-envs-youtube-livestream-4-scripts @ main (read 2026-12-01; the index gave no commit))) with TRL 1.16, with vLLM (TRL 1.16 takes 0.22 to 0.31; 0.29 at most beside openenv 0.10): npm run images -- <stack> --to <registry>/<path> builds trainer-whitebox (trainer/whitebox/Dockerfile; docs/guides/images.md), pushes it and sets images.trainer by digest",
        ]);
        const k8s = exactProblems({
            recipe: "opencode-blackbox",
            runId: "r1",
            target: { kind: "kubernetes", context: "c" },
            sandboxes: { image: "x/sandbox:1" },
        });
        assert.equal(k8s.length, 1);
        assert.match(
            k8s[0]!,
            /and vLLM 0\.22 to 0\.31 \(one container runs both roles: training\.gpuSharing shared\): npm run images -- <stack> --to <registry>\/<path> builds trainer-blackbox \(trainer\/blackbox\/Dockerfile; docs\/guides\/images\.md\)/,
        );
        // The Docker black box is refused (HOSTED_BLACKBOX_REFUSED); its trainer image's message is still the Docker one.
        const docker = exactProblems(deepMerge({ recipe: "opencode-blackbox", runId: "r1", target: { kind: "docker" } }, HOSTED_SANDBOXES_ON_DOCKER)).filter(
            (p) => p !== HOSTED_BLACKBOX_REFUSED,
        );
        assert.equal(docker.length, 1);
        assert.doesNotMatch(docker[0]!, /vllm/, "on Docker vLLM runs from images.vllm");
    });

    test("sandboxes.image is required for the agent-sandbox pool only (the stock image serves the hosted pool)", () => {
        const raw = { recipe: "opencode-blackbox", runId: "r1", images: { trainer: "x/trainer:1" } };
        assert.deepEqual(exactProblems({ ...raw, target: { kind: "kubernetes", context: "c" } }), [
            "sandboxes.image: required for the agent-sandbox pool: the sandbox image (OpenEnv's opencode sandbox image + the runtime every sandbox serves on 8888), pinned by digest: npm run images -- <stack> --to <registry>/<path> builds sandbox (python/Dockerfile; docs/guides/images.md), pushes it and sets sandboxes.image by digest; the stock image has no runtime, so its pods would never become ready",
        ]);
        // Hosted sandboxes (refused for the black box) ask for no image: their refusal is the one problem.
        const hosted = deepMerge({ ...raw, target: { kind: "docker" } }, HOSTED_SANDBOXES_ON_DOCKER);
        assert.deepEqual(exactProblems(hosted), [HOSTED_BLACKBOX_REFUSED]);
    });
});

describe("one set of proxy limits (config/ingress-defaults.ts)", () => {
    test("a stack's ingress defaults and the proxy library's (npm run ingress:local, the bench) are the same limits", async () => {
        const { INGRESS_LIMIT_DEFAULTS } = await import("../../components/config");
        const { PROXY_DEFAULTS } = await import("../../components/ingress/nginx");
        const stack = parsePlatformConfig({ recipe: "opencode-blackbox", runId: "r1", target: { kind: "kubernetes", context: "x" } }, "test").ingress;
        for (const [k, v] of Object.entries(INGRESS_LIMIT_DEFAULTS)) {
            assert.equal((stack as Record<string, unknown>)[k], v, `stack default ${k}`);
            assert.equal((PROXY_DEFAULTS as Record<string, unknown>)[k], v, `proxy library default ${k}`);
        }
        assert.deepEqual([INGRESS_LIMIT_DEFAULTS.rateLimitPerSecond, INGRESS_LIMIT_DEFAULTS.rateLimitBurst], [50, 100]);
    });
});
