import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import * as pulumi from "@pulumi/pulumi";
import YAML from "yaml";
import { DOCKER_BLACKBOX_REFUSED, HOSTED_BLACKBOX_REFUSED, RECIPE_NAMES, RECIPES } from "../../components/config";
import { HOSTED_SANDBOXES_ON_DOCKER, parseWithTestImages, withTestImages } from "../helpers/config";
import { runUnderMocks } from "../../scripts/lib/mockrun";
import { planToDir, readStackFile, REPO_ROOT, type PlanResult } from "../../scripts/lib/plan";
import { OBSERVABILITY_ON } from "../helpers/observability";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-plan-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const STACKS = fs
    .readdirSync(path.join(REPO_ROOT, "stacks"))
    .filter((f) => /^Pulumi\..+\.yaml$/.test(f))
    .map((f) => f.slice("Pulumi.".length, -".yaml".length))
    // Run stacks: the cluster stack (agent-rl-infra:cluster) is planned in cluster-stack.test.ts.
    .filter((stack) => readStackFile(stack).config["agent-rl-infra:platform"] !== undefined);

let parseMermaid: (text: string) => Promise<unknown>;
before(async () => {
    // Mermaid's real parser; it needs a DOM for DOMPurify, so jsdom provides one.
    const { JSDOM } = await import("jsdom");
    const dom = new JSDOM("");
    (globalThis as any).window = dom.window;
    (globalThis as any).document = dom.window.document;
    // DOM classes DOMPurify checks with instanceof (Element, Node, ...).
    for (const k of Object.getOwnPropertyNames(dom.window)) {
        if (/^[A-Z]/.test(k) && !(k in globalThis)) (globalThis as any)[k] = (dom.window as any)[k];
    }
    const mermaid = (await import("mermaid")).default;
    parseMermaid = (text) => mermaid.parse(text);
});

function mermaidBlocks(md: string): string[] {
    return [...md.matchAll(/```mermaid\n([\s\S]*?)```/g)].map((m) => m[1]);
}

async function checkPlanOutput(result: PlanResult, outDir: string, kind: string) {
    const md = fs.readFileSync(path.join(outDir, "plan.md"), "utf8");
    assert.match(md, /## What runs where/);
    assert.match(md, /## Capacity checks/);
    const blocks = mermaidBlocks(md);
    assert.equal(blocks.length, 1, "plan.md has one Mermaid diagram");
    await parseMermaid(blocks[0]);
    if (kind === "kubernetes") {
        const files = fs.readdirSync(path.join(outDir, "manifests"));
        assert.equal(files.length, result.manifests.length);
        assert.ok(files.length > 0);
        for (const f of files) {
            const obj = YAML.parse(fs.readFileSync(path.join(outDir, "manifests", f), "utf8"));
            assert.ok(obj.apiVersion && obj.kind && obj.metadata?.name, `${f} is a complete object`);
        }
        assert.ok(!fs.existsSync(path.join(outDir, "docker")));
    } else {
        const files = fs.readdirSync(path.join(outDir, "docker"));
        assert.ok(files.length > 0);
        for (const f of files) assert.ok(JSON.parse(fs.readFileSync(path.join(outDir, "docker", f), "utf8")).type.startsWith("docker:"));
        assert.ok(!fs.existsSync(path.join(outDir, "manifests")));
    }
}

describe("plan: every stack and every recipe", () => {
    test("the three environments have stack files", () => {
        assert.deepEqual([...STACKS].sort(), ["dev", "prod", "staging"]);
    });

    for (const stack of STACKS) {
        test(`stack ${stack} plans, writes its files and a Mermaid diagram that parses`, async () => {
            const outDir = path.join(tmp, stack);
            const result = await planToDir({ stack }, { outDir });
            await checkPlanOutput(result, outDir, result.plan.config.target.kind);
        });
    }
    for (const recipe of RECIPE_NAMES) {
        for (const target of ["kubernetes", "docker"] as const) {
            if (target === "docker" && RECIPES[recipe].training.layout === "blackbox") {
                test(`recipe ${recipe} on docker: npm run plan refuses the docker sandbox pool (exit 1, no stack trace, nothing written)`, () => {
                    const out = path.join(tmp, `${recipe}-docker-refused`);
                    const r = spawnSync(
                        process.execPath,
                        ["--import", "tsx", path.join(REPO_ROOT, "scripts", "plan.ts"), "--recipe", recipe, "--target", "docker", "--out", out],
                        { encoding: "utf8", cwd: REPO_ROOT },
                    );
                    assert.equal(r.status, 1, r.stderr);
                    assert.ok(r.stderr.includes(DOCKER_BLACKBOX_REFUSED), r.stderr);
                    assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
                    assert.ok(!fs.existsSync(out), "nothing written");
                });
                test(`recipe ${recipe} on docker with hosted sandboxes: refused, naming Kubernetes + agent-sandbox, nothing written`, async () => {
                    const outDir = path.join(tmp, `${recipe}-docker-hosted`);
                    await assert.rejects(planToDir({ recipe, target }, { outDir, platformOverride: HOSTED_SANDBOXES_ON_DOCKER }), (e: Error) =>
                        e.message.includes(HOSTED_BLACKBOX_REFUSED),
                    );
                    assert.ok(!fs.existsSync(outDir) || fs.readdirSync(outDir).length === 0, "nothing written");
                });
                continue;
            }
            test(`recipe ${recipe} on ${target} plans`, async () => {
                const outDir = path.join(tmp, `${recipe}-${target}`);
                const result = await planToDir({ recipe, target }, { outDir });
                await checkPlanOutput(result, outDir, target);
            });
        }
    }

    test("a black-box plan shows the ingress keys by name only, the pool, lifetime and quota", async () => {
        const outDir = path.join(tmp, "blackbox-sections");
        await planToDir({ recipe: "opencode-blackbox", target: "kubernetes" }, { outDir });
        const md = fs.readFileSync(path.join(outDir, "plan.md"), "utf8");
        // Per-rollout keys: nginx takes the operators' keys, the sandboxes their rollout's rk1. key, and no shared key.
        assert.match(md, /\| keys \(names; values are secret outputs\) \| operators \|/);
        assert.match(
            md,
            /\| sandboxes use \| their rollout's own `rk1\.` key at http:\/\/[^ ]+; the shared key sandboxes \(ingress\.sandboxKey\) is not rendered and nginx refuses it \|/,
        );
        assert.match(md, /No forwarder holds a shared key, and none falls back to one \(docs\/design\/rollout-keys\.md\) \|/);
        assert.match(md, /\| pool \| 13 warm \(8 burst \+ 3 refill \+ 2 headroom\), 2 CPU \/ 4Gi each \|/);
        // The arithmetic: the burst, the claim rate from the rollout time, the refill it keeps in flight.
        assert.match(
            md,
            /\| pool sized by the run \| burst 8 claims at once = 8 in flight \(training\.maxInflight\) x 1 rollout worker [^|]*; claim rate 8 \/ 35 s \(sandboxes\.rolloutSeconds\) = 0\.23\/s; refill 0\.23\/s x 10 s \(sandboxes\.refillSeconds\) = 3 \(rounded up\); pool 8 \+ 3 \+ 2 \(sandboxes\.headroom\) = 13 \|/,
        );
        assert.doesNotMatch(md, /autoscaler \(sandboxes\.autoscale\)/, "off by default");
        assert.match(md, /\| claimed lifetime \| <= 3600 s \(admission policy on every claim\) \|/);
        assert.match(md, /\| quota \| 23 pods, 48300m CPU, 97152Mi \|/);
        // The sampling the forwarder forces is the trainer's (the program's temperature, the recipe's maxCompletionLength).
        assert.match(
            md,
            /\| sampling and bounds \| the forwarder sends temperature 1 on every call and cuts max_tokens to 4096 \(the trainer's; it refuses a record sampled otherwise\); a rollout gets at most 256 calls and 1048576 completion tokens \(sandboxes\.maxCallsPerRollout, maxTokensPerRollout\), then 429 /,
        );
    });

    test("a black-box plan with sandboxes.autoscale shows the autoscaler, its bounds and the quota at its max", async () => {
        const outDir = path.join(tmp, "blackbox-autoscale");
        await planToDir(
            { recipe: "opencode-blackbox", target: "kubernetes" },
            { outDir, platformOverride: { ...OBSERVABILITY_ON, sandboxes: { autoscale: { enabled: true, maxPoolSize: 30 } } } },
        );
        const md = fs.readFileSync(path.join(outDir, "plan.md"), "utf8");
        assert.match(
            md,
            /\| autoscaler \(sandboxes\.autoscale\) \| HorizontalPodAutoscaler on the SandboxWarmPool's \/scale: 13 to 30 warm, following the external metric `agentrl_sandbox_warm_pool_wanted` \(the stack's recording rule: claimed now \+ claims\/s over 2m x 10 s \+ 2; needs observability and an external metrics adapter serving it\); the quota counts 30 per pool \|/,
        );
        assert.match(md, /\| quota \| 40 pods, [^|]* \(30 warm at the autoscaler's max \+ 8 claimed \+ 2 headroom\) \|/);
    });

    test("a black-box plan shows vLLM's own settings: the one dtype, the model's tool-call parser, extra flags and env", async () => {
        const outDir = path.join(tmp, "blackbox-vllm-settings");
        await planToDir({ recipe: "opencode-blackbox", target: "kubernetes" }, { outDir });
        const md = fs.readFileSync(path.join(outDir, "plan.md"), "utf8");
        assert.match(md, /\| dtype, vLLM and trainer \(training\.dtype\) \| `--dtype float32` \|/);
        assert.match(md, /\| tool-call parser \(training\.vllm\.toolCallParser\) \| `hermes` \|/);
        assert.match(md, /\| vLLM extra flags \(training\.vllm\.extraArgs\) \| - \|/);
    });

    test("a black-box plan over several trainer ranks says the multi-rank weight sync is unproven; one rank says nothing", async () => {
        const multi = path.join(tmp, "blackbox-32b-sync");
        await planToDir({ recipe: "opencode-blackbox-32b", target: "kubernetes" }, { outDir: multi });
        const md = fs.readFileSync(path.join(multi, "plan.md"), "utf8");
        assert.match(md, /\*\*Unproven for \d+ trainer ranks\.\*\* TRL 1\.16\.0's AsyncGRPO hangs at the first weight sync/);
        assert.match(md, /trainer\/fix_trl_weight_sync\.py: every rank gathers, then rank 0 sends whole tensors/);
        assert.match(md, /not yet on GPUs with NCCL to vLLM: no multi-rank layout has run a sync here/);
        const one = path.join(tmp, "blackbox-one-rank-sync");
        await planToDir({ recipe: "opencode-blackbox", target: "kubernetes" }, { outDir: one });
        assert.doesNotMatch(fs.readFileSync(path.join(one, "plan.md"), "utf8"), /Unproven for/);
    });

    test("a Kubernetes plan shows where DNS queries may go (target.dns)", async () => {
        const outDir = path.join(tmp, "dns-node-local");
        await planToDir({ recipe: "mbpp-whitebox", target: "kubernetes" }, { outDir, platformOverride: { target: { dns: { kind: "node-local" } } } });
        assert.match(
            fs.readFileSync(path.join(outDir, "plan.md"), "utf8"),
            /DNS egress \(target\.dns\): \*\*node-local\*\*: `169\.254\.20\.10\/32` and pods `k8s-app=kube-dns` in kube-system, on 53 UDP\+TCP; nothing else there\./,
        );
    });

    test("every namespaced object lives in one of the Platform's per-role namespaces, with Pod Security labels", async () => {
        // Only the roles the stack deploys (namespaceRoles): black box has no envs, white box no ingress or sandboxes.
        const cases = [
            { source: { stack: "staging" }, roles: ["ingress", "sandboxes", "training"] },
            { source: { recipe: "wordle-whitebox", target: "kubernetes" as const }, roles: ["envs", "training"] },
        ];
        for (const { source, roles } of cases) {
            const result = await planToDir(source, { outDir: path.join(tmp, `ns-${"stack" in source ? source.stack : source.recipe}`) });
            const namespaces = result.manifests.filter((m) => m.kind === "Namespace");
            assert.deepEqual(namespaces.map((n) => n.metadata.labels["agentrl.dev/role"]).sort(), roles);
            const level = (role: string) =>
                namespaces.find((n) => n.metadata.labels["agentrl.dev/role"] === role)!.metadata.labels["pod-security.kubernetes.io/enforce"];
            for (const role of roles) assert.equal(level(role), role === "sandboxes" || role === "ingress" ? "restricted" : "baseline");
            const names = new Set(namespaces.map((n) => n.metadata.name));
            for (const m of result.manifests)
                if (m.metadata.namespace) assert.ok(names.has(m.metadata.namespace), `${m.kind} ${m.metadata.name} is in ${m.metadata.namespace}`);
        }
    });

    test("a broken diagram would fail the Mermaid parser (the check can fail)", async () => {
        await assert.rejects(parseMermaid("flowchart LR\n  a -->"));
    });

    test("the plan shows the recipes' session numbers with eval batch and headroom", async () => {
        const expectations: Array<[string, RegExp]> = [
            [
                "mbpp-whitebox",
                /env `coding` sessions \| 17 replicas x 1 = 17 \| 17 \| >= 16 live sessions \(max of generation 16 and eval 8\) \+ 1 spare replica \(1\) = 17/,
            ],
            [
                "mbpp-whitebox-64",
                /env `coding` sessions \| 65 replicas x 1 = 65 \| 65 \| >= 64 live sessions \(max of generation 64 and eval 0\) \+ 1 spare replica \(1\) = 65/,
            ],
            [
                "wordle-whitebox",
                /env `wordle` sessions \| 5 replicas x 8 = 40 \| 40 \| >= 32 live sessions \(max of generation 32 and eval 0\) \+ 1 spare replica \(8\) = 40/,
            ],
        ];
        for (const [recipe, re] of expectations) {
            const outDir = path.join(tmp, `sessions-${recipe}`);
            await planToDir({ recipe, target: "kubernetes" }, { outDir });
            assert.match(fs.readFileSync(path.join(outDir, "plan.md"), "utf8"), re);
        }
    });

    test("the plan says an env capacity change restarts the routers and drops live sessions, per target", async () => {
        for (const [target, how] of [
            ["kubernetes", /the router Deployment replaces both its pods at once \(Recreate\)/],
            ["docker", /the router container is replaced \(deleted first\)/],
        ] as const) {
            const outDir = path.join(tmp, `capacity-${target}`);
            await planToDir({ recipe: "mbpp-whitebox-64", target }, { outDir });
            const md = fs.readFileSync(path.join(outDir, "plan.md"), "utf8");
            assert.match(
                md,
                /Changing an env's capacity mid-run \(`envs\.<name>\.replicas`, `headroomReplicas`, `sessionsPerReplica`\) restarts its routers \(env `coding`\)/,
            );
            assert.match(md, how);
            assert.match(md, /every live session through them is dropped; `pulumi up` returns once the routers serve again/);
        }
    });
});

describe("plan: secrets never reach the output", () => {
    test("sentinel values for every secret appear nowhere in the plan", async () => {
        const sentinels = {
            hfToken: "SENTINEL-HF-TOKEN-7f3a9c",
            "ingressKey-sandboxes": "SENTINEL-SANDBOX-KEY-51d2e8",
            "ingressKey-operators": "SENTINEL-OPERATOR-KEY-90b4aa",
            registryAuth: JSON.stringify({ auths: { "registry.internal.example": { auth: "U0VOVElORUwtUkVHSVNUUlktQVVUSA==" } } }),
        };
        for (const stack of STACKS) {
            const outDir = path.join(tmp, `secrets-${stack}`);
            const result = await planToDir({ stack }, { outDir, secrets: sentinels });
            // The program did receive them (else this test proves nothing)...
            const sent = JSON.stringify(result.resources.map((r) => r.inputs));
            assert.ok(sent.includes(sentinels.hfToken), `stack ${stack}: the HF token reached the program's inputs`);
            // ...and none of them is in any file written.
            const walk = (d: string): string[] =>
                fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(d, e.name)) : [path.join(d, e.name)]));
            for (const f of walk(outDir)) {
                const text = fs.readFileSync(f, "utf8");
                for (const s of Object.values(sentinels)) assert.ok(!text.includes(s), `${f} contains a secret sentinel`);
            }
        }
    });

    test("Secrets render with their real keys, values redacted, on both targets: no Pulumi secret wrapper in any file", async () => {
        const walk = (d: string): string[] =>
            fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(d, e.name)) : [path.join(d, e.name)]));
        const noWrapper = (outDir: string) => {
            for (const f of walk(outDir)) assert.ok(!fs.readFileSync(f, "utf8").includes(pulumi.runtime.specialSigKey), `${f} holds Pulumi's secret wrapper`);
        };
        const secrets = { hfToken: "SENTINEL-HF-KEYS-4b1c" };
        const k8sDir = path.join(tmp, "keys-k8s");
        const k8s = await planToDir({ recipe: "opencode-blackbox", target: "kubernetes" }, { outDir: k8sDir, secrets });
        noWrapper(k8sDir);
        const rendered: Record<string, Record<string, string>> = Object.fromEntries(
            k8s.manifests.filter((m) => m.kind === "Secret").map((m) => [m.metadata.name, { ...m.data, ...m.stringData }]),
        );
        assert.deepEqual(rendered["hf-token"], { HF_TOKEN: "<redacted>" });
        assert.equal(rendered["sandbox-key"], undefined, "per-rollout keys: no pool-key Secret is rendered");
        assert.deepEqual(rendered["vllm-ingress-keys"], { "keys.conf": "<redacted>" });
        for (const [name, data] of Object.entries(rendered))
            assert.ok(
                Object.values(data).every((v) => v === "<redacted>"),
                `Secret ${name}: every value redacted`,
            );
        // Docker runs no black box (refused for both its providers): its white box's trainer holds the HF token, redacted.
        const dockerDir = path.join(tmp, "keys-docker");
        await planToDir({ recipe: "mbpp-whitebox", target: "docker" }, { outDir: dockerDir, secrets });
        noWrapper(dockerDir);
        const containers = walk(path.join(dockerDir, "docker"))
            .map((f) => JSON.parse(fs.readFileSync(f, "utf8")))
            .filter((o) => o.type === "docker:index/container:Container");
        const withToken = containers.filter((c) => (c.inputs.envs ?? []).some((e: string) => e.startsWith("HF_TOKEN=")));
        assert.ok(withToken.length > 0, "the trainer gets HF_TOKEN");
        for (const c of withToken) assert.ok(c.inputs.envs.includes("HF_TOKEN=<redacted>"), `${c.name}: HF_TOKEN's value is redacted`);
    });

    test("a stack that pushes to the Hub plans when hfToken is set, and on a placeholder when it is not (test/config/secrets.test.ts: up still refuses)", async () => {
        const override = { training: { hubRepoId: "acme/qwen-mbpp" } };
        const ok = await planToDir(
            { recipe: "mbpp-whitebox", target: "kubernetes" },
            { outDir: path.join(tmp, "hub-ok"), platformOverride: override, secrets: { hfToken: "SENTINEL-HUB-1f2e" } },
        );
        assert.ok(ok.manifests.some((m) => m.kind === "Job"));
        assert.doesNotMatch(fs.readFileSync(path.join(tmp, "hub-ok", "plan.md"), "utf8"), /planned with placeholders/);
        const missing = await planToDir(
            { recipe: "mbpp-whitebox", target: "kubernetes" },
            { outDir: path.join(tmp, "hub-missing"), platformOverride: override },
        );
        assert.ok(missing.manifests.some((m) => m.kind === "Job"));
        assert.match(fs.readFileSync(path.join(tmp, "hub-missing", "plan.md"), "utf8"), /Secrets not set, planned with placeholders:\*\* `hfToken`/);
    });

    test("secure: values in a stack file stand in as placeholders, marked secret", () => {
        const f = path.join(tmp, "Pulumi.sec.yaml");
        fs.writeFileSync(f, "config:\n  agent-rl-infra:hfToken:\n    secure: AAABAJ5dummy\n  agent-rl-infra:platform:\n    recipe: mbpp-whitebox\n");
        const cfg = readStackFile("sec", f);
        assert.deepEqual(cfg.secretKeys, ["agent-rl-infra:hfToken"]);
        assert.equal(cfg.config["agent-rl-infra:hfToken"], "plan-placeholder-hfToken");
    });
});

function writeStack(name: string, platform: unknown): string {
    const f = path.join(tmp, "stacks", `Pulumi.${name}.yaml`);
    fs.mkdirSync(path.dirname(f), { recursive: true });
    fs.writeFileSync(f, YAML.stringify({ config: { "agent-rl-infra:platform": platform } }));
    return f;
}

const program = () => require(path.join(REPO_ROOT, "index.ts")) as () => Promise<Record<string, unknown>>;

describe("plan: a bad stack file fails cleanly and registers nothing", () => {
    const mistakes: Array<{ what: string; stack?: string; platform: Record<string, unknown>; field: RegExp }> = [
        {
            what: "GPUs do not fit",
            platform: { recipe: "opencode-blackbox", runId: "r1", target: { kind: "kubernetes", context: "test" }, training: { trainerGpus: 2 } },
            field: /training\.trainerGpus: .*lower vllmGpus or trainerGpus/,
        },
        {
            what: "colocate with vLLM GPUs",
            platform: { recipe: "mbpp-whitebox", runId: "r1", target: { kind: "docker" }, training: { vllmGpus: 1, gpusOnNode: 2 } },
            field: /training\.vllmGpus: .*set vllmGpus to 0/,
        },
        {
            what: "generation batch",
            platform: { recipe: "mbpp-whitebox", runId: "r1", target: { kind: "docker" }, training: { numGenerations: 3, perDeviceEvalBatchSize: 9 } },
            field: /training\.numGenerations: the generation batch .* = 16 is not divisible by numGenerations 3/,
        },
        {
            what: "eval batch",
            platform: { recipe: "mbpp-whitebox", runId: "r1", target: { kind: "docker" }, training: { perDeviceEvalBatchSize: 7 } },
            field: /training\.perDeviceEvalBatchSize: the eval batch/,
        },
        {
            what: "env capacity",
            platform: { recipe: "wordle-whitebox", runId: "r1", target: { kind: "kubernetes", context: "test" }, envs: { wordle: { replicas: 2 } } },
            field: /envs\.wordle\.replicas: .*raise replicas to 5/,
        },
        {
            what: "coding env above 1 session",
            platform: { recipe: "mbpp-whitebox", runId: "r1", target: { kind: "kubernetes", context: "test" }, envs: { coding: { sessionsPerReplica: 8 } } },
            field: /envs\.coding\.sessionsPerReplica: .*set it to 1/,
        },
        {
            what: "sandbox pool too small",
            platform: { recipe: "opencode-blackbox", runId: "r1", target: { kind: "kubernetes", context: "test" }, sandboxes: { poolSize: 2 } },
            field: /sandboxes\.poolSize: .*raise poolSize/,
        },
        {
            what: "prod image not pinned",
            stack: "prod",
            platform: withTestImages({ recipe: "opencode-blackbox", runId: "r1", target: { kind: "kubernetes", context: "test" } }) as Record<string, unknown>,
            field: /images\.trainer: prod stacks pin every image by digest/,
        },
        {
            what: "Docker black box on the docker sandbox pool (refused)",
            platform: { recipe: "opencode-blackbox", runId: "r1", target: { kind: "docker" } },
            field: /sandboxes\.provider: the docker sandbox pool \(the default for layout blackbox on the docker target\) is refused: .*could not read the forwarder's trace/,
        },
        {
            what: "hosted (hf) sandboxes for the black box (refused, no override)",
            platform: { recipe: "opencode-blackbox", runId: "r1", target: { kind: "docker" }, ...HOSTED_SANDBOXES_ON_DOCKER },
            field: /sandboxes\.provider: hosted \(hf\) sandboxes are refused for the black box: .*Use a Kubernetes target with provider agent-sandbox/,
        },
        {
            what: "the removed override acceptForgeableTrace",
            platform: {
                recipe: "opencode-blackbox",
                runId: "r1",
                target: { kind: "docker" },
                ...HOSTED_SANDBOXES_ON_DOCKER,
                sandboxes: { provider: "hf", acceptForgeableTrace: true },
            },
            field: /sandboxes\.acceptForgeableTrace: removed: hosted \(hf\) black-box sandboxes are refused whatever the stack says .*provider agent-sandbox/,
        },
        {
            what: "harbor.agent claude-code (openenv rates it validated; the trial code does not run it)",
            platform: {
                recipe: "harbor-blackbox",
                runId: "r1",
                target: { kind: "kubernetes", context: "test" },
                harbor: { agent: "claude-code", taskImages: [{ image: "ghcr.io/org/tasks/add-two:1" }] },
            },
            field: /harbor\.agent: "claude-code" is not an agent the trial code runs \(python\/agent_rl_sandbox\/harbor_trial\.py AGENTS, each pre-installed in the task image\): set it to one of opencode, mini-swe-agent/,
        },
        {
            what: "dataset size missing",
            platform: { runId: "r1", target: { kind: "docker" }, model: { name: "Qwen/Qwen3-1.7B" }, training: { layout: "whitebox-colocate", gpusOnNode: 1 } },
            field: /training\.datasetSize: required/,
        },
    ];

    mistakes.forEach((m, i) => {
        const stack = m.stack ?? `bad${i}`;
        test(`${m.what}: npm run plan exits non-zero naming the field, without a stack trace`, () => {
            const dir = path.join(tmp, `case${i}`);
            const file = path.join(dir, `Pulumi.${stack}.yaml`);
            fs.mkdirSync(dir, { recursive: true });
            fs.writeFileSync(file, YAML.stringify({ config: { "agent-rl-infra:platform": m.platform } }));
            const r = spawnSync(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "scripts", "plan.ts"), file, "--out", path.join(dir, "out")], {
                encoding: "utf8",
                cwd: REPO_ROOT,
            });
            assert.equal(r.status, 1, r.stderr);
            assert.match(r.stderr, m.field);
            assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
            assert.ok(!fs.existsSync(path.join(dir, "out")), "nothing written");
        });
        test(`${m.what}: zero resources registered`, async () => {
            const run = await runUnderMocks(program(), { stack, config: { "agent-rl-infra:platform": JSON.stringify(m.platform) } });
            assert.ok(run.error, "the program failed");
            assert.ok(pulumi.RunError.isInstance(run.error), "a clean RunError, printed without a trace");
            assert.deepEqual(
                run.resources.filter((r) => r.type !== "pulumi:pulumi:Stack").map((r) => r.type),
                [],
            );
        });
    });

    test("a bad or unknown supplied ingress key stops the run before anything registers, without showing the value", async () => {
        const platform = JSON.stringify(withTestImages({ recipe: "opencode-blackbox", runId: "r1", target: { kind: "kubernetes", context: "test" } }));
        const run = await runUnderMocks(program(), {
            stack: "keys",
            config: {
                "agent-rl-infra:platform": platform,
                "agent-rl-infra:ingressKey-sandboxes": 'short"key',
                "agent-rl-infra:ingressKey-robots": "x".repeat(32),
            },
            secretKeys: ["agent-rl-infra:ingressKey-sandboxes", "agent-rl-infra:ingressKey-robots"],
        });
        assert.ok(pulumi.RunError.isInstance(run.error));
        const message = (run.error as Error).message;
        assert.match(message, /ingressKey-sandboxes: must be 16 to 512 characters of \[A-Za-z0-9\._~\+\/=-\] \(value not shown\)/);
        assert.match(
            message,
            /ingressKey-robots: no key 'robots' in ingress\.keys \(sandboxes, operators\): add 'robots' to ingress\.keys or remove it with pulumi config rm ingressKey-robots/,
        );
        assert.ok(!message.includes("short") && !message.includes("x".repeat(32)), "no key value in the message");
        assert.deepEqual(
            run.resources.filter((r) => r.type !== "pulumi:pulumi:Stack").map((r) => r.type),
            [],
        );
    });

    test("a real up refuses the example registry before anything registers; a preview and the offline plan only warn", async () => {
        const platform = JSON.stringify({
            recipe: "mbpp-whitebox",
            runId: "r1",
            target: { kind: "docker" },
            images: { trainer: "registry.example.com/agent-rl/trainer:0.1.0" },
        });
        const up = await runUnderMocks(program(), { stack: "ex", config: { "agent-rl-infra:platform": platform }, refuseExampleImages: true });
        assert.ok(pulumi.RunError.isInstance(up.error), String(up.error));
        assert.match(
            (up.error as Error).message,
            /images\.trainer: registry\.example\.com\/agent-rl\/trainer:0\.1\.0 is in the example registry registry\.example\.com, which holds no image: npm run images -- <stack> --to <registry>\/<path> builds trainer-whitebox \(trainer\/whitebox\/Dockerfile; docs\/guides\/images\.md\), pushes it and sets images\.trainer by digest$/,
        );
        assert.deepEqual(
            up.resources.filter((r) => r.type !== "pulumi:pulumi:Stack").map((r) => r.type),
            [],
        );
        const preview = await runUnderMocks(program(), {
            stack: "ex",
            config: { "agent-rl-infra:platform": platform },
            preview: true,
            refuseExampleImages: true,
        });
        assert.equal(preview.error, undefined, "a preview goes ahead (plan.md and the preview warn)");
        const plain = await runUnderMocks(program(), { stack: "ex", config: { "agent-rl-infra:platform": platform } });
        assert.equal(plain.error, undefined, "the offline plan goes ahead");
    });

    test("a missing platform config says how to start", async () => {
        const run = await runUnderMocks(program(), { stack: "empty", config: {} });
        assert.match((run.error as Error).message, /config agent-rl-infra:platform is missing from stacks\/Pulumi\.empty\.yaml: add a 'platform' object/);
    });

    test("bad CLI arguments: clear message, exit 2", () => {
        const cases: Array<[string[], RegExp]> = [
            [["--recipe", "nope"], /unknown recipe nope: use one of mbpp-whitebox/],
            [["--recipe", "mbpp-whitebox", "--target", "nomad"], /--target must be kubernetes or docker, got nomad/],
            [["dev", "--target", "docker"], /--target applies to --recipe/],
            [["dev", "--bogus"], /unknown option --bogus/],
            [[], /name a stack \(cluster, dev, prod, staging\) or --recipe <name>/],
        ];
        for (const [args, re] of cases) {
            const r = spawnSync(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "scripts", "plan.ts"), ...args], {
                encoding: "utf8",
                cwd: REPO_ROOT,
            });
            assert.equal(r.status, 2, `${args.join(" ")}: ${r.stderr}`);
            assert.match(r.stderr, re);
        }
        const missing = spawnSync(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "scripts", "plan.ts"), "nosuchstack"], {
            encoding: "utf8",
            cwd: REPO_ROOT,
        });
        assert.equal(missing.status, 2, "an unknown stack is a bad argument, as in the preflight");
        assert.match(missing.stderr, /no stack file .*known stacks are cluster, dev, prod, staging/);
        assert.match(missing.stderr, /usage: npm run plan/);
    });

    test("a stack file kept elsewhere: a platform that is a string, a near-miss key, a misspelled secret key: exit 1, clean messages naming that file", () => {
        const dir = fs.mkdtempSync(path.join(tmp, "elsewhere-"));
        const plan = (name: string, text: string) => {
            const file = path.join(dir, `Pulumi.${name}.yaml`);
            fs.writeFileSync(file, text);
            return spawnSync(process.execPath, ["--import", "tsx", path.join(REPO_ROOT, "scripts", "plan.ts"), file, "--out", path.join(dir, "out")], {
                encoding: "utf8",
                cwd: REPO_ROOT,
            });
        };
        const str = plan("str", "config:\n  agent-rl-infra:platform: not-an-object\n");
        assert.equal(str.status, 1, str.stderr);
        assert.doesNotMatch(str.stderr, /internal error|SyntaxError|at /);
        assert.match(str.stderr, /agent-rl-infra:platform: must be an object .*got the string "not-an-object"/);
        const typo = plan("typo", "config:\n  agent-rl-infra:plattform:\n    recipe: mbpp-whitebox\n");
        assert.equal(typo.status, 1, typo.stderr);
        const rel = path.relative(REPO_ROOT, path.join(dir, "Pulumi.typo.yaml"));
        assert.ok(
            typo.stderr.includes(
                `config agent-rl-infra:platform is missing from ${rel}, which has agent-rl-infra:plattform (did you mean agent-rl-infra:platform?)`,
            ),
            typo.stderr,
        );
        const secret = plan(
            "sec",
            "config:\n  agent-rl-infra:hfTokn: hf_x\n  agent-rl-infra:platform:\n    recipe: mbpp-whitebox\n    runId: r1\n    target: { kind: docker }\n",
        );
        assert.equal(secret.status, 1, secret.stderr);
        assert.match(secret.stderr, /agent-rl-infra:hfTokn: not a setting of this project .*did you mean agent-rl-infra:hfToken\?/);
    });

    test("writeStack helper files are read like the CLI reads them", () => {
        const f = writeStack("helper", { recipe: "mbpp-whitebox" });
        assert.equal(JSON.parse(readStackFile("helper", f).config["agent-rl-infra:platform"]).recipe, "mbpp-whitebox");
    });
});

describe("plan: prerequisites the stack refers to but does not create", () => {
    test("each external reference is named with its symptom and a check; Docker lists the NVIDIA runtime", async () => {
        const { externalPrerequisites } = await import("../../components/platform/prerequisites");
        const { platformNames: namesOf } = await import("../../components/config");
        const parse = parseWithTestImages;
        const c = parse(
            {
                recipe: "opencode-blackbox",
                runId: "r1",
                target: { kind: "kubernetes", context: "test", priorityClassName: "training-high", storageClassName: "fast" },
                sandboxes: { runtimeClassName: "gvisor" },
                ingress: { tls: { mode: "cert-manager", issuer: { name: "internal-ca", kind: "Issuer" } } },
            },
            "test",
        );
        const rows = externalPrerequisites(c, namesOf(c));
        const by = (field: string) => rows.find((r) => r.field === field);
        assert.equal(by("target.priorityClassName")?.check, "kubectl get priorityclass training-high");
        assert.equal(by("target.storageClassName")?.check, "kubectl get storageclass fast");
        assert.equal(by("sandboxes.runtimeClassName")?.check, "kubectl get runtimeclass gvisor");
        assert.match(by("sandboxes.provider")!.what, /agent-sandbox v1\.0\.1 CRDs and controller/);
        assert.equal(by("ingress.tls.issuer")?.check, "kubectl get issuer internal-ca -n arl-test-ingress");
        assert.match(by("target.gpuResourceName")!.otherwise, /Pending/);
        const shared = parse(
            { recipe: "opencode-blackbox", runId: "r1", clusterStack: "organization/agent-rl-infra/cluster", target: { kind: "kubernetes", context: "test" } },
            "test",
        );
        assert.ok(
            externalPrerequisites(shared, namesOf(shared)).some((r) => r.field === "clusterStack (organization/agent-rl-infra/cluster)"),
            "with a cluster stack, agent-sandbox is the cluster stack's",
        );
        // Docker runs white boxes only (a black box there is refused): the host's NVIDIA runtime is its one prerequisite.
        const dockerCfg = parse({ recipe: "mbpp-whitebox", runId: "r1", target: { kind: "docker" } }, "test");
        const dockerRows = externalPrerequisites(dockerCfg, namesOf(dockerCfg));
        assert.deepEqual(
            dockerRows.map((r) => r.field),
            ["target.host"],
        );
        assert.match(dockerRows[0]!.what, /NVIDIA container runtime/);
    });
});

describe("plan: the first questions a platform engineer asks (issue 60)", () => {
    const planMd = async (name: string, override?: Record<string, unknown>) => {
        const outDir = path.join(tmp, `first-questions-${name}`);
        const result = await planToDir({ recipe: "opencode-blackbox", target: "kubernetes" }, { outDir, ...(override ? { platformOverride: override } : {}) });
        return { md: fs.readFileSync(path.join(outDir, "plan.md"), "utf8"), manifests: result.manifests as Array<Record<string, any>> };
    };
    const headline = (md: string) => md.slice(0, md.indexOf("## What runs where"));

    test("each pod's requests and limits are the manifests' own, with totals per namespace and the quota", async () => {
        const { md, manifests } = await planMd("resources");
        const job = manifests.find((m) => m.kind === "Job");
        const trainer = job?.spec.template.spec.containers[0].resources;
        // The training pod's numbers as rendered (16 CPU / 128Gi for the black box), not recomputed from the config.
        assert.deepEqual(trainer, {
            requests: { cpu: "16", memory: "128Gi", "nvidia.com/gpu": "2" },
            limits: { cpu: "16", memory: "128Gi", "nvidia.com/gpu": "2" },
        });
        const ns = job?.metadata.namespace as string;
        const row = md.split("\n").find((l) => l.includes(`\`Job/${job?.metadata.name}\``));
        assert.equal(row, `| ${ns} | \`Job/${job?.metadata.name}\` (trainer) | 1: parallelism 1 | 16 / 16 | 128Gi / 128Gi | 2 / 2 |`);
        assert.ok(md.includes(`| ${ns} | 1 | 16 / 16 | 128Gi / 128Gi | 2 / 2 | - |`), "the training namespace's total");
        // The sandbox pod: forwarder sidecar + sandbox container (2100m / 4224Mi), times the warm pool's replicas as rendered, summed; the quota beside it.
        const sandboxes = manifests.find((m) => m.kind === "SandboxTemplate")?.metadata.namespace as string;
        const warm = manifests.find((m) => m.kind === "SandboxWarmPool")?.spec.replicas as number;
        assert.ok(Number.isInteger(warm) && warm > 0, `warm pool replicas ${warm}`);
        assert.match(
            md,
            new RegExp(
                `\\| ${sandboxes} \\| \`SandboxTemplate/[^\`]+\` \\(forwarder, sandbox\\) \\| ${warm}: SandboxWarmPool/[^ ]+ replicas ${warm}, warm; a claimed one is refilled \\| 2100m / 2100m \\| 4224Mi / 4224Mi \\| - \\|`,
            ),
        );
        const quota = manifests.find((m) => m.kind === "ResourceQuota" && m.metadata.namespace === sandboxes)?.spec.hard as Record<string, string>;
        const quotaText = Object.keys(quota)
            .sort()
            .map((k) => `${k} ${quota[k]}`)
            .join(", ");
        assert.ok(
            md.includes(`| ${sandboxes} | ${warm} | ${warm * 2100}m / ${warm * 2100}m | ${warm * 4224}Mi / ${warm * 4224}Mi | - | ${quotaText} |`),
            `the sandboxes namespace's total (${warm} x 2100m / 4224Mi) and its quota (${quotaText})`,
        );
    });

    test("pod shapes follow the scheduler's rule: sidecars add, a plain init container counts only when larger; a missing limit is 'none'", async () => {
        const { podShapes, podResourcesSection } = await import("../../scripts/lib/plan-pod-resources");
        const res = (cpu: string, memory: string, limit = true) => ({ requests: { cpu, memory }, ...(limit ? { limits: { cpu, memory } } : {}) });
        const manifests = [
            {
                kind: "Deployment",
                metadata: { name: "web", namespace: "a" },
                spec: {
                    replicas: 3,
                    template: {
                        spec: {
                            initContainers: [
                                { name: "migrate", resources: res("4", "1Gi") },
                                { name: "proxy", restartPolicy: "Always", resources: res("500m", "256Mi") },
                            ],
                            containers: [{ name: "app", resources: res("1", "512Mi", false) }],
                        },
                    },
                },
            },
        ];
        const [web] = podShapes(manifests);
        assert.deepEqual(web?.containers, ["proxy", "app"]);
        // max(app 1 + proxy 0.5, migrate 4 + proxy 0.5) = 4.5 CPU; max(512Mi + 256Mi, 1Gi + 256Mi) = 1280Mi.
        assert.deepEqual(web?.requests, { cpu: "4500m", memory: "1280Mi", gpu: undefined });
        assert.deepEqual(web?.limits, { cpu: undefined, memory: undefined, gpu: undefined });
        const md = podResourcesSection(manifests).join("\n");
        assert.ok(md.includes("| a | `Deployment/web` (proxy, app) | 3: spec.replicas 3 | 4500m / none | 1280Mi / none | - |"), md);
        assert.ok(md.includes("| a | 3 | 13500m / none | 3840Mi / none | - | - |"), md);
    });

    test("the headline names the GPU the memory check assumed, the field that pins it and which known GPUs fit", async () => {
        const unpinned = headline((await planMd("unpinned")).md);
        assert.match(
            unpinned,
            /\*\*GPU assumed by the memory check\*\*: NVIDIA-H200 \(139\.8 GiB usable\), from `training\.gpuMemory\.product` \(recipe `opencode-blackbox`'s\)\. Not pinned/,
        );
        assert.match(unpinned, /set `target\.gpuProduct` to your GPU nodes' `nvidia\.com\/gpu\.product` label/);
        // The black box (Qwen3-8B in float32) fits an H200 and not an H100 80 GB: the same estimate as the check.
        assert.match(unpinned, /the estimate fits `NVIDIA-H200`; not [^.]*`NVIDIA-H100-80GB-HBM3`/);
        const pinned = headline((await planMd("pinned", { target: { gpuProduct: "NVIDIA-H200" } })).md);
        assert.match(pinned, /\*\*GPU\*\*: NVIDIA-H200 \(139\.8 GiB usable\), pinned by `target\.gpuProduct` \(the training pod's node selector\)/);
        assert.doesNotMatch(pinned, /Not pinned|Of the known GPUs/);
    });

    test("on Docker the headline points at training.gpuMemory.product, never target.gpuProduct", async () => {
        const outDir = path.join(tmp, "first-questions-docker");
        await planToDir({ recipe: "mbpp-whitebox", target: "docker" }, { outDir });
        const head = headline(fs.readFileSync(path.join(outDir, "plan.md"), "utf8"));
        assert.match(
            head,
            /\*\*GPU assumed by the memory check\*\*: NVIDIA-A100-SXM4-80GB \(79\.4 GiB usable\), from `training\.gpuMemory\.product` \(recipe `mbpp-whitebox`'s\)\. On Docker the run takes the host's GPUs/,
        );
        assert.match(head, /name yours in `training\.gpuMemory\.product`/);
        assert.doesNotMatch(head, /target\.gpuProduct/);
        assert.match(head, /\*\*GPU time\*\*: the plan knows the run's steps .* no GPU-hours per step, and Docker has no deadline to bound the run\./);
        assert.doesNotMatch(fs.readFileSync(path.join(outDir, "plan.md"), "utf8"), /## Pod resources/);
    });

    test("GPU time is bounded by the GPU pods' deadline from the manifests, and says it is a bound", async () => {
        const { md, manifests } = await planMd("gpu-time", { training: { activeDeadlineSeconds: 7200 } });
        assert.equal(manifests.find((m) => m.kind === "Job")?.spec.activeDeadlineSeconds, 7200);
        assert.match(
            headline(md),
            /\*\*GPU time\*\*: at most 4 GPU-hours: 2 GPUs held for at most 2 h \(the Job's activeDeadlineSeconds, `training\.activeDeadlineSeconds`/,
        );
        assert.match(headline(md), /A bound, not an estimate: the plan knows the run's steps \(training\.maxSteps 10\) but not how long a step takes/);
    });
});
