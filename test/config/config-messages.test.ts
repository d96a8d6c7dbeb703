/**
 * Config messages (issue 43 point 6): the near miss of an unknown key at every level of the platform
 * and cluster objects, every problem of a file in one report (type errors and unknown keys beside the
 * cross-field checks, where the rest can still be checked), and `npm run plan -- --help` listing the
 * recipes and the stacks found. Pure functions; the tests assert the text.
 * Run: npm test -- --no-setup test/config/config-messages.test.ts
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { deepMerge, parseClusterConfig, RECIPES, ALL_RECIPE_NAMES } from "../../components/config";
import { planUsage } from "../../scripts/plan";
import { configProblems, parseWithTestImages } from "../helpers/config";

const base = { recipe: "mbpp-whitebox", runId: "r1", target: { kind: "kubernetes", context: "test" } };
const problems = (raw: unknown) => configProblems(() => parseWithTestImages(raw, "test"));
const withOverride = (o: Record<string, unknown>) => deepMerge(base, o);

describe("unknown keys: the near miss at every level", () => {
    const cases: Array<{ what: string; raw: unknown; expect: string[] }> = [
        {
            what: "root: runID for runId is one problem (the rename), not also 'runId: required'",
            raw: { recipe: "mbpp-whitebox", runID: "r1", target: base.target },
            expect: ["runID: unknown field: did you mean runId? rename it"],
        },
        {
            what: "nested: training.learningRat",
            raw: withOverride({ training: { learningRat: 1e-6 } }),
            expect: ["training.learningRat: unknown field: did you mean training.learningRate? rename it"],
        },
        {
            what: "a union's option: the kubernetes target's kubeconfg",
            raw: withOverride({ target: { kubeconfg: "/k" } }),
            expect: ["target.kubeconfg: unknown field: did you mean target.kubeconfig? rename it"],
        },
        {
            what: "the docker target's own fields",
            raw: { ...base, target: { kind: "docker", dataDri: "/srv" } },
            expect: ["target.dataDri: unknown field: did you mean target.dataDir? rename it"],
        },
        {
            what: "in a list: target.tolerations.0.efect",
            raw: withOverride({ target: { tolerations: [{ key: "gpu", efect: "NoSchedule" }] } }),
            expect: ["target.tolerations.0.efect: unknown field: did you mean target.tolerations.0.effect? rename it"],
        },
        {
            what: "in a record entry: envs.coding.sesionsPerReplica",
            raw: withOverride({ envs: { coding: { sesionsPerReplica: 2 } } }),
            expect: ["envs.coding.sesionsPerReplica: unknown field: did you mean envs.coding.sessionsPerReplica? rename it"],
        },
        {
            what: "deep: ingress.tls.certFiel",
            raw: withOverride({ ingress: { tls: { certFiel: "/c" } } }),
            expect: ["ingress.tls.certFiel: unknown field: did you mean ingress.tls.certFile? rename it"],
        },
        {
            what: "no near miss: the message as before",
            raw: withOverride({ training: { flavour: "x" } }),
            expect: ["training.flavour: unknown field: remove it or check its spelling"],
        },
        {
            what: "a misspelled env name (envs.codng for the recipe's coding): the entry and its near miss, not a catalog field never written",
            raw: withOverride({ envs: { codng: { replicas: 2 } } }),
            expect: ["envs.codng: no catalog env of that name: did you mean coding? (or set catalog:)"],
        },
        {
            what: "a new env with no catalog and no near miss: catalog is required, with its choices",
            raw: withOverride({ envs: { math: { replicas: 2 } } }),
            expect: ['envs.math.catalog: required: set it to one of "coding", "textarena", "opencode", "echo", "custom"'],
        },
        {
            what: "the Kubernetes target's gpuProduct on docker points at the docker field for the GPU",
            raw: { ...base, target: { kind: "docker", gpuProduct: "NVIDIA-H100-80GB-HBM3" } },
            expect: ["target.gpuProduct: a kubernetes target's field, not docker's: on docker set training.gpuMemory.product instead"],
        },
        {
            what: "the docker target's dataDir on kubernetes: the other target's field, with no counterpart",
            raw: withOverride({ target: { dataDir: "/srv" } }),
            expect: ["target.dataDir: a docker target's field, not kubernetes's: remove it, or set target.kind: docker"],
        },
    ];
    for (const c of cases) test(c.what, () => assert.deepEqual(problems(c.raw), c.expect));

    test("the cluster stack's object too", () => {
        assert.deepEqual(
            configProblems(() => parseClusterConfig({ target: { kind: "kubernetes", context: "c" }, agentSandbox: { instal: true } })),
            ["cluster agentSandbox.instal: unknown field: did you mean agentSandbox.install? rename it"],
        );
    });
});

describe("every problem at once", () => {
    test("a type error, an unknown key and a cross-field problem come in one report", () => {
        assert.deepEqual(problems(withOverride({ training: { maxSteps: "10", gpusOnNode: 2, vllmGpus: 1, learningRat: 1e-6 } })), [
            'training.maxSteps: expected number, got the string "10"',
            "training.learningRat: unknown field: did you mean training.learningRate? rename it",
            "training.vllmGpus: the whitebox-colocate layout runs vLLM inside the trainer, so it has no separate vLLM GPUs (got 1): set vllmGpus to 0, or use layout whitebox-server",
        ]);
    });

    test("a rule that would read the default standing in for a refused value stays quiet: the schema's line stands", () => {
        // numGenerations "4" is refused; the eval batch rule (6 not divisible by numGenerations) would read the default 8.
        assert.deepEqual(problems(withOverride({ training: { numGenerations: "4", perDeviceEvalBatchSize: 6 } })), [
            'training.numGenerations: expected number, got the string "4"',
        ]);
    });

    test("a required field refused: the rest cannot be checked, the schema's problems alone", () => {
        assert.deepEqual(problems(withOverride({ training: { layout: "colocate", vllmGpus: 1, gpusOnNode: 2 } })), [
            'training.layout: must be one of "whitebox-colocate", "whitebox-server", "blackbox"',
        ]);
    });
});

describe("a credential in an env map: the field, the reason and the map's reference form (docs/design/secrets.md)", () => {
    // A Slack webhook URL, assembled so no scanner takes the file for a leak.
    const slack = ["https://hooks.slack.com", "services", "T00000000", "B00000000", "X".repeat(24)].join("/");

    test("a name: training.extraEnv.RABBITMQ_DEFAULT_PASS", () => {
        assert.deepEqual(problems(withOverride({ training: { extraEnv: { RABBITMQ_DEFAULT_PASS: "guest" } } })), [
            "training.extraEnv.RABBITMQ_DEFAULT_PASS: looks like a secret (its name ends in _PASS or _PWD: a password by its short name (RABBITMQ_DEFAULT_PASS, SMTP_PASS, MYSQL_PWD); not PWD alone, the working directory), " +
                "but training.extraEnv is plain text in the stack file and the pod spec: remove the value; pass it as a reference instead: RABBITMQ_DEFAULT_PASS: { secret: envSecret-<name> } and pulumi config set --secret envSecret-<name>",
        ]);
    });

    test("a value: envs.coding.settings.ALERTS holding a Slack webhook URL", () => {
        assert.deepEqual(problems(withOverride({ envs: { coding: { catalog: "coding", settings: { ALERTS: slack } } } })), [
            "envs.coding.settings.ALERTS: looks like a Slack webhook URL (hooks.slack.com/services/...) (value not shown), and envs.coding.settings is plain text in the stack file and the pod spec: remove the value; " +
                "pass it as a reference to an existing Kubernetes Secret in the env's namespace instead: ALERTS: { secretKeyRef: { name: <Secret>, key: <key> } } (Kubernetes target only); rotate it if the file was shared",
        ]);
    });

    test("a value and a name at once: training.vllm.extraEnv.PG_DSN holding a URL with a password, both said, with the URL's own fix", () => {
        const raw = deepMerge(
            { recipe: "opencode-blackbox", runId: "r1", target: base.target },
            { training: { vllm: { extraEnv: { PG_DSN: "postgres://app:hunter2xyz@db:5432/runs" } } } },
        );
        assert.deepEqual(problems(raw), [
            "training.vllm.extraEnv.PG_DSN: looks like a URL with a password in it (scheme://user:password@host) (value not shown), and training.vllm.extraEnv is plain text in the stack file and the pod spec: remove the value; " +
                "pass it as a reference instead: PG_DSN: { secret: envSecret-<name> } and pulumi config set --secret envSecret-<name>, or name the endpoint without its user:password part; rotate it if the file was shared",
            "training.vllm.extraEnv.PG_DSN: looks like a secret (its name holds DSN: a data source name carries its password or key (PG_DSN, SENTRY_DSN)), " +
                "but training.vllm.extraEnv is plain text in the stack file and the pod spec: remove the value; pass it as a reference instead: PG_DSN: { secret: envSecret-<name> } and pulumi config set --secret envSecret-<name>",
        ]);
    });
});

describe("npm run plan -- --help", () => {
    test("lists every recipe with its description and the stacks found", () => {
        const recipes = ALL_RECIPE_NAMES.map((name) => ({ name, description: RECIPES[name].description }));
        const text = planUsage(recipes, ["dev", "staging"]);
        assert.match(text, /^usage: npm run plan -- <stack/);
        for (const r of recipes)
            assert.ok(
                text.split("\n").some((l) => l.trim().startsWith(r.name) && l.endsWith(r.description)),
                `${r.name} listed`,
            );
        assert.match(text, /\nstacks found in stacks\/: dev, staging$/);
        assert.match(planUsage(recipes, []), /\nstacks found in stacks\/: none \(write stacks\/Pulumi\.<stack>\.yaml, or plan a file by its path\)$/);
    });
});
