/**
 * The Harbor path's config and pools (issue 46 point 2): each task image's pool key (a stable,
 * collision-safe DNS label), every message of the checks (empty list, bad references, an image or a
 * pool name twice, too many pools, the refusals on Docker and other providers, a team quota the pools
 * overrun), and what the pool description renders: one SandboxTemplate + SandboxWarmPool per task
 * image, each holding the whole burst, Harbor's dirs writable, the quota over every pool, and the
 * trainer's SANDBOX_TASK_POOLS naming each image's pool, and one warm-pool alert per pool (run by the real
 * promtool where installed). Pure functions and the mock-free resolve step.
 * Run: npx tsx --test test/sandbox/harbor-recipe.test.ts
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, test } from "node:test";
import { stringify } from "yaml";
import {
    HARBOR_AGENTS,
    HARBOR_RECIPE_NAMES,
    HARBOR_SANDBOX_DIRS,
    HARBOR_TASK_LABEL,
    imageReferenceProblem,
    MAX_TASK_IMAGES,
    platformNames,
    RECIPE_NAMES,
    taskPoolKey,
    type PlatformConfig,
} from "../../components/config";
import { resolveSandboxPool, sandboxTemplateSpec, sandboxWarmPoolSpec } from "../../components/sandbox";
import { type AlertRule, alertRules, dashboardPanels } from "../../components/observability";
import { resolvePlatform } from "../../components/platform";
import { observedStack } from "../../components/platform/observability";
import { tenantQuotaProblems } from "../../components/platform/tenancy";
import { HOSTED_BLACKBOX_REFUSED } from "../../components/config/sandbox-providers";
import { configProblems, parseWithTestImages } from "../helpers/config";
import { defaultObservabilitySettings } from "../helpers/observability";
import { scaled } from "../helpers/waits";

const PYTHON_DIR = path.join(__dirname, "..", "..", "python");
const PROMTOOL = spawnSync("sh", ["-c", "command -v promtool"], { encoding: "utf8" }).stdout.trim() || undefined;

const DIGEST = `sha256:${"a".repeat(64)}`;
const TASK_A = `ghcr.io/org/tasks/add-two@${DIGEST}`;
const TASK_B = "registry.example.net:5000/harbor/fix-git:1.2.0";
const base = { recipe: "harbor-blackbox", runId: "r1", target: { kind: "kubernetes", context: "test" } };
const withTasks = (taskImages: unknown, over: Record<string, unknown> = {}) => ({ ...base, ...over, harbor: { taskImages } });
const problems = (raw: unknown) => configProblems(() => parseWithTestImages(raw, "test"));
const parse = (raw: unknown): PlatformConfig => parseWithTestImages(raw, "test");

describe("pool keys: from the name, else from the image; DNS labels, stable, collision-safe", () => {
    test("a name is the key", () => assert.equal(taskPoolKey(TASK_A, "add-two"), "add-two"));
    test("no name: the repository name and 6 hex of the image's sha256, the same for the same image", () => {
        assert.match(taskPoolKey(TASK_A), /^add-two-[0-9a-f]{6}$/);
        assert.equal(taskPoolKey(TASK_A), taskPoolKey(TASK_A));
    });
    test("two images with one repository name (another registry, tag or digest) get two keys", () => {
        const keys = [TASK_A, "docker.io/other/add-two:latest", `ghcr.io/org/tasks/add-two@sha256:${"b".repeat(64)}`].map((i) => taskPoolKey(i));
        assert.equal(new Set(keys).size, 3, keys.join(", "));
    });
    test("a long or odd repository name still gives a short DNS label", () => {
        for (const image of [`r.io/${"x".repeat(200)}:t`, "r.io/a__b.c-d:t", "r.io/Upper/Case"]) {
            const key = taskPoolKey(image);
            assert.match(key, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, image);
            assert.ok(key.length <= 31, key);
        }
    });
});

describe("image references", () => {
    for (const ok of [TASK_A, TASK_B, "ubuntu", "library/ubuntu:24.04", "localhost:5000/a/b", `a/b:t@${DIGEST}`])
        test(`${ok}: accepted`, () => assert.equal(imageReferenceProblem(ok), undefined));
    for (const bad of ["Org/Task:1", "ghcr.io/org/task:", "ghcr.io/org/task@sha256:abc", "ghcr.io/org task", "-a/b", "a//b", "a/b:t@md5:0"])
        test(`${JSON.stringify(bad)}: refused, naming it and the shape`, () =>
            assert.equal(
                imageReferenceProblem(bad),
                `'${bad}' is not an image reference: [<registry>/]<path>[:<tag>][@sha256:<64 hex>], the path in lower case (e.g. ghcr.io/org/task@sha256:<digest>)`,
            ));
});

describe("harbor: every problem, each naming the field and the fix", () => {
    test("the recipe with two task images parses with no problem; the recipe is Kubernetes-only", () => {
        assert.deepEqual(problems(withTasks([{ image: TASK_A }, { image: TASK_B, name: "fix-git" }])), []);
        assert.deepEqual(HARBOR_RECIPE_NAMES, ["harbor-blackbox"]);
        assert.equal((RECIPE_NAMES as string[]).includes("harbor-blackbox"), false, "RECIPE_NAMES run on both targets");
    });
    test("an empty list", () => {
        assert.deepEqual(problems(withTasks([])), [
            "harbor.taskImages: empty: list the image of every Harbor task the run trains on ([environment].docker_image of each task.toml), e.g. [{ image: <registry>/<task>@sha256:<digest> }]; each gets a warm pool, and a task whose image no pool serves is refused before any claim",
        ]);
    });
    test("bad references, an image twice, a name twice: all at once, by index", () => {
        const got = problems(
            withTasks([{ image: TASK_A }, { image: "Bad/Ref" }, { image: TASK_A }, { image: TASK_B, name: "same" }, { image: "r.io/c:1", name: "same" }]),
        );
        assert.deepEqual(got, [
            "harbor.taskImages[1].image: 'Bad/Ref' is not an image reference: [<registry>/]<path>[:<tag>][@sha256:<64 hex>], the path in lower case (e.g. ghcr.io/org/task@sha256:<digest>)",
            `harbor.taskImages[2].image: '${TASK_A}' is harbor.taskImages[0] too: one pool serves an image, list it once`,
            "harbor.taskImages[4].name: its pool name 'same' is harbor.taskImages[3]'s too: give one of them another name",
        ]);
    });
    test("a name that is not a DNS label is the schema's message", () => {
        assert.deepEqual(problems(withTasks([{ image: TASK_A, name: "Add_Two" }])), [
            "harbor.taskImages.0.name: must be lower-case letters, digits and '-', starting and ending with a letter or digit",
        ]);
    });
    test(`more than ${MAX_TASK_IMAGES} task images`, () => {
        const many = Array.from({ length: MAX_TASK_IMAGES + 1 }, (_, i) => ({ image: `r.io/task-${i}:1` }));
        assert.deepEqual(problems(withTasks(many)), [
            `harbor.taskImages: ${MAX_TASK_IMAGES + 1} task images, at most ${MAX_TASK_IMAGES}: each is a warm pool of its own holding a whole burst, so the sandbox pods grow with the count; train on fewer images per run (split the tasks over runs), or build tasks that share an image`,
        ]);
    });
    test("an agent the trial code does not run (claude-code: openenv rates it validated) is refused, naming the ones that run", () => {
        for (const agent of ["claude-code", "goose"]) {
            assert.deepEqual(problems({ ...base, harbor: { agent, taskImages: [{ image: TASK_A }] } }), [
                `harbor.agent: "${agent}" is not an agent the trial code runs (python/agent_rl_sandbox/harbor_trial.py AGENTS, each pre-installed in the task image): set it to one of opencode, mini-swe-agent`,
            ]);
        }
        assert.deepEqual(problems({ ...base, harbor: { agent: "mini-swe-agent", taskImages: [{ image: TASK_A }] } }), []);
    });
    test("harbor.agent's list is the trial code's: python/agent_rl_sandbox/harbor_checks.py HARBOR_AGENTS, which harbor_trial.py's AGENTS must equal", () => {
        // harbor_checks is standard library only: the host's python3 imports it without harbor.
        const code = "import json, agent_rl_sandbox.harbor_checks as c; print(json.dumps(list(c.HARBOR_AGENTS)))";
        const run = spawnSync("python3", ["-I", "-c", `import sys; sys.path.insert(0, ${JSON.stringify(PYTHON_DIR)}); ${code}`], {
            encoding: "utf8",
            timeout: scaled(30_000),
        });
        assert.equal(run.status, 0, run.stderr);
        assert.deepEqual(JSON.parse(run.stdout), [...HARBOR_AGENTS]);
        const trial = fs.readFileSync(path.join(PYTHON_DIR, "agent_rl_sandbox", "harbor_trial.py"), "utf8");
        assert.match(trial, /if set\(AGENTS\) != set\(HARBOR_AGENTS\):/, "harbor_trial.py refuses to import when its AGENTS and HARBOR_AGENTS differ");
    });
    test("refused on the docker target, with the black box's reasons", () => {
        const got = problems({ ...withTasks([{ image: TASK_A }]), target: { kind: "docker" } });
        assert.ok(
            got.includes(
                "harbor: refused on the docker target: each Harbor trial is a claim of an agent-sandbox warm pool (one per task image), and on Docker no sandbox backend drives the fixed pool and the trainer could not read the forwarder's trace, so it would train on the in-sandbox capture proxy's, which the agent's uid can rewrite. Use a Kubernetes target (sandboxes.provider agent-sandbox, its default there)",
            ),
            got.join("\n"),
        );
    });
    test("refused on hosted sandboxes: the black box's refusal and Harbor's own", () => {
        const hosted = {
            sandboxes: { provider: "hf" },
            ingress: { exposure: "loadbalancer", host: "vllm.example.com", tls: { mode: "secret", secretName: "t", publiclyTrusted: true } },
        };
        assert.deepEqual(problems(withTasks([{ image: TASK_A }], hosted)), [
            HOSTED_BLACKBOX_REFUSED,
            "harbor: each Harbor trial is a claim of an agent-sandbox warm pool (one per task image); provider hf has no claim backend: set sandboxes.provider to agent-sandbox (the default on Kubernetes)",
        ]);
    });
    test("refused outside the black-box layout", () => {
        const raw = { recipe: "mbpp-whitebox", runId: "r1", target: base.target, harbor: { agent: "opencode", taskImages: [{ image: TASK_A }] } };
        assert.deepEqual(problems(raw), [
            "harbor: the Harbor path is black box (the agent runs in a sandbox and calls the served model through the ingress), but training.layout is whitebox-colocate: set layout to blackbox, or remove harbor",
        ]);
    });
    test("HARBOR_AGENT and SANDBOX_TASK_POOLS are the platform's: training.extraEnv may not set them (the Platform's resolve step)", () => {
        const c = parse({ ...withTasks([{ image: TASK_A }]), training: { extraEnv: { SANDBOX_TASK_POOLS: "{}", HARBOR_AGENT: "pi" } } });
        const got = configProblems(() => resolvePlatform(c));
        assert.deepEqual(got, [
            "training.extraEnv.SANDBOX_TASK_POOLS: SANDBOX_TASK_POOLS is set by the platform (from the run's config and links): remove it from extraEnv",
            "training.extraEnv.HARBOR_AGENT: HARBOR_AGENT is set by the platform (from the run's config and links): remove it from extraEnv",
        ]);
    });
});

describe("the recipe's model path", () => {
    const vllmCommand = (raw: unknown): string[] => {
        const v = resolvePlatform(parse(raw)).training.vllm;
        return [...(v?.command ?? []), ...(v?.args ?? [])];
    };

    test("vLLM is served as the opencode black box serves it: token ids and processed logprobs, what openenv.harbor's startup check wants", () => {
        const harbor = vllmCommand(withTasks([{ image: TASK_A }]));
        assert.deepEqual(harbor, vllmCommand({ ...base, recipe: "opencode-blackbox" }));
        const line = harbor.join(" ");
        for (const flag of ["--return-tokens-as-token-ids", "--logprobs-mode processed_logprobs"]) assert.ok(line.includes(flag), flag);
    });

    test("the agent's side calls its pod's forwarder, which holds the key and calls the ingress; the trainer mints a key per rollout", () => {
        const c = parse(withTasks([{ image: TASK_A }]));
        const plan = resolvePlatform(c);
        const env = plan.training.trainer.env;
        assert.equal(env.SANDBOX_UPSTREAM_URL, "http://127.0.0.1:7100");
        assert.equal(plan.sandboxes?.upstreamUrl, plan.names.ingress.sandboxUrl);
        assert.ok(env.SANDBOX_ROLLOUT_KEYS_URL?.startsWith("http://"), "per-rollout keys on");
        assert.equal(env.SANDBOX_FORWARDER_KEY_PORT, "7102");
    });
});

describe("the pools: one SandboxTemplate + SandboxWarmPool per task image, each sized for the whole burst", () => {
    const c = parse(withTasks([{ image: TASK_A }, { image: TASK_B, name: "fix-git" }]));
    const names = platformNames(c);
    const d = resolveSandboxPool(c, names);

    test("one pool per image, named from the run and the image's key, each of the run's pool size (burst + refill + headroom)", () => {
        assert.equal(c.sandboxes.poolSize, c.sandboxes.sizing.burst + c.sandboxes.sizing.refill + c.sandboxes.headroom);
        assert.deepEqual(
            d.pools.map((p) => [p.image, p.template, p.warmPool, p.poolSize]),
            [
                [TASK_A, `sandbox-r1-${taskPoolKey(TASK_A)}`, `sandbox-pool-r1-${taskPoolKey(TASK_A)}`, 13],
                [TASK_B, "sandbox-r1-fix-git", "sandbox-pool-r1-fix-git", 13],
            ],
        );
    });

    test("each template runs its image (sandbox and forwarder), labels its pods with its key, and mounts Harbor's dirs writable", () => {
        for (const pool of d.pools) {
            const spec = sandboxTemplateSpec(d, pool) as any;
            const pod = spec.podTemplate;
            assert.deepEqual([pod.spec.containers[0].image, pod.spec.initContainers[0].image], [pool.image, pool.image]);
            assert.equal(pod.metadata.labels[HARBOR_TASK_LABEL], pool.taskKey);
            // The run's own labels stay on every pool's pods: the sandbox NetworkPolicy of a team's namespace selects them.
            for (const [k, v] of Object.entries(d.labels)) assert.equal(pod.metadata.labels[k], v, k);
            const mounts = pod.spec.containers[0].volumeMounts.map((m: any) => m.mountPath);
            for (const dir of ["/logs", "/tests", "/solution", "/installed-agent", "/root", "/workspace", "/tmp"]) assert.ok(mounts.includes(dir), dir);
            assert.deepEqual(
                HARBOR_SANDBOX_DIRS.map((h) => pod.spec.volumes.find((v: any) => v.name === h.name)?.emptyDir),
                HARBOR_SANDBOX_DIRS.map((h) => ({ sizeLimit: h.sizeLimit })),
            );
            assert.equal(pod.spec.containers[0].securityContext.readOnlyRootFilesystem, true);
            assert.deepEqual(sandboxWarmPoolSpec(d, pool), {
                sandboxTemplateRef: { name: pool.template },
                replicas: 13,
                updateStrategy: { type: "OnReplenish" },
            });
        }
    });

    test("the quota holds every pool warm, the claimed burst once, and the headroom", () => {
        assert.equal(d.quota.pods, 2 * 13 + c.sandboxes.sizing.burst + c.sandboxes.headroom);
    });

    test("the trainer's env: SANDBOX_TASK_POOLS maps each image to its pool; the settings' own pool is the first image's", () => {
        assert.deepEqual(JSON.parse(d.trainerEnv.SANDBOX_TASK_POOLS), { [TASK_A]: d.pools[0].warmPool, [TASK_B]: "sandbox-pool-r1-fix-git" });
        assert.deepEqual(
            [d.trainerEnv.SANDBOX_IMAGE, d.trainerEnv.SANDBOX_WARM_POOL, d.trainerEnv.SANDBOX_TEMPLATE],
            [TASK_A, d.pools[0].warmPool, d.pools[0].template],
        );
        assert.equal(d.trainerEnv.HARBOR_AGENT, "opencode");
    });

    test("the trainer's env turns Harbor's telemetry off (its trials inherit it): HARBOR_TELEMETRY=0", () => {
        assert.equal(d.trainerEnv.HARBOR_TELEMETRY, "0");
    });

    test("off the Harbor path: one pool of sandboxes.image under the run's names, no Harbor env", () => {
        const plain = parse({ ...base, recipe: "opencode-blackbox" });
        const p = resolveSandboxPool(plain, platformNames(plain));
        assert.deepEqual(
            p.pools.map((x) => [x.image, x.template, x.warmPool, x.taskKey]),
            [[plain.sandboxes.image, p.names.template, p.names.warmPool, undefined]],
        );
        assert.equal(p.trainerEnv.SANDBOX_TASK_POOLS, undefined);
        assert.equal(p.trainerEnv.HARBOR_AGENT, undefined);
        assert.equal(p.trainerEnv.HARBOR_TELEMETRY, undefined);
    });

    test("names stay DNS labels of at most 63 characters with the longest run id and a long name", () => {
        const long = parse(withTasks([{ image: TASK_A, name: "n".repeat(30) }], { runId: "r".repeat(24) }));
        for (const p of platformNames(long).sandboxes.taskPools)
            for (const n of [p.template, p.warmPool]) assert.match(n, /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, n);
    });
});

describe("a team's quota the pools overrun", () => {
    test("is refused before anything registers, naming the pools and the fix", () => {
        const c = parse(withTasks([{ image: TASK_A }, { image: TASK_B }], { clusterStack: "o/p/cluster", target: { ...base.target, team: "team-a" } }));
        const tenant = {
            namespaces: { training: "t", ingress: "i", envs: "e", sandboxes: "s" },
            quotas: { sandboxes: { pods: 20 } },
            sandboxMaxLifetimeSeconds: 21600,
        };
        const withTenant = { ...c, cluster: { tenant } } as unknown as PlatformConfig;
        const d = resolveSandboxPool(withTenant, platformNames(withTenant));
        assert.deepEqual(tenantQuotaProblems(withTenant, d), [
            "target.team: team 'team-a''s sandboxes quota allows pods 20 at once, and this run alone requests 36: lower sandboxes.poolSize / headroom / cpu / memory, or list fewer harbor.taskImages (2 warm pools of 13 each), or raise teams.team-a.quotas.sandboxes in the cluster stack 'o/p/cluster'",
        ]);
    });
});

describe("observability: every task image's pool watched on its own", () => {
    const plan = resolvePlatform(parse(withTasks([{ image: TASK_A }, { image: TASK_B, name: "fix-git" }])));
    const observed = observedStack(plan);
    const settings = defaultObservabilitySettings();
    const emptyRules = alertRules(settings, observed)
        .flatMap((g) => g.rules)
        .filter((r): r is AlertRule => "alert" in r && r.alert === "AgentRLWarmPoolEmpty");
    const templates = plan.sandboxes!.pools.map((p) => p.template);

    test("the observed pool names every pool's template; one warm-pool-empty rule per template; the dashboard sums by template", () => {
        assert.deepEqual(observed.sandboxPool?.templates, templates);
        assert.deepEqual(
            emptyRules.map((r) => r.labels.sandbox_template),
            templates,
        );
        const panel = dashboardPanels(settings, observed).find((p) => p.title.startsWith("sandboxes: warm pools ready"));
        assert.ok(panel, "the per-template panel");
        assert.equal(
            panel.queries[0]!.expr,
            `sum by (sandbox_template) (agent_sandboxes{sandbox_template=~"${templates.join("|")}",owned_by="SandboxWarmPool",ready_condition="true"})`,
        );
    });

    test("promtool: the rule of the empty pool fires, the full pool's stays silent", {
        skip: PROMTOOL === undefined ? "promtool not installed (Debian's prometheus package)" : false,
    }, () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-harbor-rules-"));
        try {
            const rules = path.join(dir, "rules.yaml");
            fs.writeFileSync(rules, stringify({ groups: [{ name: "pools", rules: emptyRules }] }));
            const [full, empty] = emptyRules;
            const tests = [
                {
                    interval: "1m",
                    input_series: [
                        { series: `agent_sandboxes{sandbox_template="${templates[0]}",owned_by="SandboxWarmPool",ready_condition="true"}`, values: "3x30" },
                    ],
                    alert_rule_test: [
                        {
                            eval_time: "20m",
                            alertname: "AgentRLWarmPoolEmpty",
                            exp_alerts: [{ exp_labels: empty!.labels, exp_annotations: empty!.annotations }],
                        },
                    ],
                },
            ];
            assert.equal(full!.labels.sandbox_template, templates[0]);
            const testFile = path.join(dir, "rules.test.yaml");
            fs.writeFileSync(testFile, stringify({ rule_files: [rules], evaluation_interval: "1m", tests }));
            const run = spawnSync(PROMTOOL!, ["test", "rules", testFile], { encoding: "utf8", timeout: scaled(60_000) });
            assert.equal(run.status, 0, run.stdout + run.stderr);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});
