/**
 * The stack's secrets (docs/design/secrets.md): one list of secret config keys, refused in plain text
 * by the program, the offline plan and the preflight's stack loading, each with the command that
 * encrypts it; no secret value (nor its base64 or JSON-escaped form) in any file a plan writes, for
 * every recipe on both targets and every example stack; env names and values that look like a
 * credential refused wherever the platform object names them; a stack secret written into the
 * platform object named as one; the offline plan of a stack that needs a secret it does not set.
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import YAML from "yaml";
import {
    ALL_RECIPE_NAMES,
    credentialKind,
    deepMerge,
    DOCKER_BLACKBOX_REFUSED,
    HOSTED_BLACKBOX_REFUSED,
    isSecretConfigKey,
    isSecretEnvName,
    MULTI_NODE_RECIPE_NAMES,
    HARBOR_RECIPE_NAMES,
    parsePlatformConfig,
    plainSecretProblems,
    RECIPES,
    SECRET_STACK_KEYS,
    secretPlaceholder,
    STACK_KEYS,
} from "../../components/config";
import { configProblems, HOSTED_SANDBOXES_ON_DOCKER, parseHostedConfig, withTestImages } from "../helpers/config";
import { TEST_MTAIL_IMAGE } from "../helpers/observability";
import { runUnderMocks } from "../../scripts/lib/mockrun";
import { loadStack, StackError } from "../../scripts/lib/load-stack";
import { planClusterToDir, planToDir, recipePlatform, REPO_ROOT, secretConfigKeys } from "../../scripts/lib/plan";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-secrets-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const NS = "agent-rl-infra";

const problemsOf = (raw: unknown): string[] => configProblems(() => parsePlatformConfig(raw, "dev"));

const walk = (d: string): string[] =>
    fs.existsSync(d) ? fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(d, e.name)) : [path.join(d, e.name)])) : [];

// ---------------------------------------------------------------------------------------
// Sentinels: values that look like the real thing (the value checks must not refuse them as config,
// and a leak of any form of them must be found).

const REGISTRY_PASSWORD = "SENTINEL-registry-password-9f8e7d";
const REGISTRY_BASIC = Buffer.from(`robot:${REGISTRY_PASSWORD}`).toString("base64");

/** A value per secret key of a stack: the key list is the program's (secretConfigKeys). */
function sentinelsFor(keys: readonly string[]): Record<string, string> {
    return Object.fromEntries(
        keys.map((k) => [
            k,
            k === "hfToken"
                ? "hf_SENTINELwalkToken0123456789abcdefXYZ"
                : k === "registryAuth"
                  ? JSON.stringify({ auths: { "registry.internal.example": { auth: REGISTRY_BASIC } } })
                  : `SENTINEL-${k}-0123456789abcdef`,
        ]),
    );
}

/** Every form a value could be written in: itself, base64, JSON-escaped; for registryAuth, its credential too. */
function formsOf(key: string, value: string): string[] {
    const forms = [value, Buffer.from(value).toString("base64"), JSON.stringify(value).slice(1, -1)];
    if (key === "registryAuth") forms.push(REGISTRY_BASIC, REGISTRY_PASSWORD);
    return forms;
}

function assertNoneIn(outDir: string, values: Readonly<Record<string, string>>, what: string): void {
    const files = walk(outDir);
    assert.ok(files.length > 0, `${what}: the plan wrote files`);
    for (const f of files) {
        const text = fs.readFileSync(f, "utf8");
        for (const [k, v] of Object.entries(values)) {
            for (const form of formsOf(k, v)) assert.ok(!text.includes(form), `${what}: ${path.relative(outDir, f)} holds ${k} (a form of its value)`);
        }
    }
}

/**
 * Every run source the walk plans: each recipe on each target, each example run stack. A black box on Docker has no plan
 * (the docker sandbox pool and hosted sandboxes are refused for it): refusedSources() has those.
 */
interface Source {
    readonly name: string;
    readonly platform: Record<string, unknown>;
    readonly cluster: boolean;
    /** Observability turned on, on this target: the plan must write its files (prometheus.yml on Docker, PodMonitors on Kubernetes). */
    readonly observability?: "kubernetes" | "docker";
}

function sources(): Source[] {
    const out: Source[] = [];
    for (const recipe of ALL_RECIPE_NAMES) {
        // A multi-node recipe is refused on Docker (one GPU host): it has no Docker plan to check.
        for (const target of MULTI_NODE_RECIPE_NAMES.includes(recipe) ? (["kubernetes"] as const) : (["kubernetes", "docker"] as const)) {
            if (target === "docker" && RECIPES[recipe].training.layout === "blackbox") continue;
            out.push({ name: `recipe-${recipe}-${target}`, platform: recipePlatform(recipe, target), cluster: false });
        }
    }
    for (const f of fs.readdirSync(path.join(REPO_ROOT, "stacks")).filter((x) => /^Pulumi\..+\.yaml$/.test(x))) {
        const doc = YAML.parse(fs.readFileSync(path.join(REPO_ROOT, "stacks", f), "utf8"));
        const cluster = doc.config[`${NS}:cluster`] !== undefined;
        out.push({ name: f.slice("Pulumi.".length, -".yaml".length), platform: doc.config[cluster ? `${NS}:cluster` : `${NS}:platform`], cluster });
    }
    out.push(...observabilitySources());
    return out.map((s) => (s.cluster ? s : { ...s, platform: withSecretRefs(s.platform, s.name) }));
}

/**
 * Observability is off in every recipe and example stack, so the sources above never write its files
 * (Docker: observability/prometheus.yml, its rules and dashboards; Kubernetes: monitors, rules, dashboard
 * ConfigMaps). These turn it on: a white box on each target and a black box on Kubernetes.
 */
function observabilitySources(): Source[] {
    const on = { observability: { enabled: true }, images: { mtail: TEST_MTAIL_IMAGE } };
    const whitebox = ALL_RECIPE_NAMES.find((r) => RECIPES[r].training.layout !== "blackbox" && !MULTI_NODE_RECIPE_NAMES.includes(r));
    const blackbox = dockerBlackboxRecipes()[0];
    assert.ok(whitebox !== undefined && blackbox !== undefined);
    const cases: Array<[string, "kubernetes" | "docker"]> = [
        [whitebox, "docker"],
        [whitebox, "kubernetes"],
        [blackbox, "kubernetes"],
    ];
    return cases.map(([recipe, target]) => ({
        name: `recipe-${recipe}-${target}-observability`,
        platform: deepMerge(recipePlatform(recipe, target), on) as Record<string, unknown>,
        cluster: false,
        observability: target,
    }));
}

/** The black-box recipes refused on Docker for being black boxes (multi-node and Harbor recipes are refused there for reasons of their own: one host; a warm pool per task image). */
function dockerBlackboxRecipes() {
    return ALL_RECIPE_NAMES.filter(
        (r) => RECIPES[r].training.layout === "blackbox" && !MULTI_NODE_RECIPE_NAMES.includes(r) && !HARBOR_RECIPE_NAMES.includes(r),
    );
}

/** The black-box recipes on Docker, on the target's default (the docker sandbox pool) and on hosted sandboxes, with the refusal each gets. */
function refusedSources(): Array<Source & { readonly refusal: string; readonly keys: string[] }> {
    return dockerBlackboxRecipes().flatMap((recipe) => {
        const pool = recipePlatform(recipe, "docker");
        const hosted = { ...pool, ...HOSTED_SANDBOXES_ON_DOCKER };
        // The keys the program would read there (every ingress key, hfToken, ...), from the config the refusal stops.
        const keys = secretConfigKeys(parseHostedConfig(hosted, "refused"));
        return [
            { name: `recipe-${recipe}-docker-pool`, platform: pool, cluster: false, refusal: DOCKER_BLACKBOX_REFUSED, keys },
            { name: `recipe-${recipe}-docker-hosted`, platform: hosted, cluster: false, refusal: HOSTED_BLACKBOX_REFUSED, keys },
        ];
    });
}

/**
 * A run source whose env maps reference stack secrets (`{ secret: envSecret-<name> }`): the trainer's
 * under a secret-looking name, vLLM's (where a separate vLLM runs) under a neutral one, so both the
 * name rule and the known-value scrub of the plan writer are exercised.
 */
function withSecretRefs(platform: Record<string, unknown>, stack: string): Record<string, unknown> {
    const colocate = parsePlatformConfig(platform, stack).training.layout === "whitebox-colocate";
    const refs = {
        training: {
            extraEnv: { DB_PASSWORD: { secret: "envSecret-db" } },
            ...(colocate ? {} : { vllm: { extraEnv: { UPSTREAM_DSN: { secret: "envSecret-dsn" } } } }),
        },
    };
    return deepMerge(platform, refs) as Record<string, unknown>;
}

/** The secret keys the program reads for a source: every one of the list, an ingress key per name. */
function secretKeysOf(s: Source): string[] {
    if (s.cluster) return [...SECRET_STACK_KEYS];
    return secretConfigKeys(parsePlatformConfig(s.platform, s.name));
}

/** A stack file of the source with its secret keys set, as `entry` writes each. */
function stackFileWith(s: Source, dir: string, entries: Readonly<Record<string, unknown>>): string {
    const file = path.join(tmp, dir, `Pulumi.${s.name}.yaml`);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const config: Record<string, unknown> = { [`${NS}:${s.cluster ? "cluster" : "platform"}`]: s.platform };
    for (const [k, v] of Object.entries(entries)) config[`${NS}:${k}`] = v;
    fs.writeFileSync(file, YAML.stringify({ config }));
    return file;
}

async function plan(s: Source, file: string, outDir: string, secrets?: Record<string, string>): Promise<void> {
    if (s.cluster) await planClusterToDir({ stack: s.name, stackFile: file }, { outDir });
    else await planToDir({ stack: s.name, stackFile: file }, { outDir, ...(secrets ? { secrets } : {}) });
}

describe("the secret keys: one list", () => {
    test("every secret stack key is a stack key; ingress keys by prefix; platform and cluster are not secrets", () => {
        for (const k of SECRET_STACK_KEYS) assert.ok((STACK_KEYS as readonly string[]).includes(k), k);
        assert.ok(isSecretConfigKey("hfToken") && isSecretConfigKey("registryAuth") && isSecretConfigKey("ingressKey-sandboxes"));
        assert.ok(!isSecretConfigKey("platform") && !isSecretConfigKey("cluster") && !isSecretConfigKey("ingressKey-"));
    });

    test("a plain secret is named with the command that encrypts it, never its value", () => {
        const value = "hf_plainPLAINplain0123456789abcdef";
        const problems = plainSecretProblems(
            [`${NS}:platform`, `${NS}:hfToken`, `${NS}:ingressKey-operators`, `${NS}:registryAuth`],
            (k) => k === `${NS}:registryAuth`,
            "stacks/Pulumi.x.yaml",
        );
        assert.equal(problems.length, 2);
        assert.match(
            problems[0]!,
            /^agent-rl-infra:hfToken: the Hugging Face token .* is a secret, and stacks\/Pulumi\.x\.yaml holds it in plain text \(value not shown\): .*store it encrypted with pulumi config set --secret hfToken /,
        );
        assert.match(
            problems[1]!,
            /^agent-rl-infra:ingressKey-operators: the ingress key 'operators' is a secret, .*pulumi config set --secret ingressKey-operators "\$\(openssl rand -hex 32\)"/,
        );
        assert.ok(problems.every((p) => !p.includes(value)));
    });

    test("the program refuses a secret key the stack file holds in plain text, and accepts it encrypted", async () => {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const program = require(path.join(REPO_ROOT, "index.ts"));
        const config = {
            [`${NS}:platform`]: JSON.stringify(withTestImages({ recipe: "mbpp-whitebox", runId: "r-1", target: { kind: "docker" } })),
            [`${NS}:hfToken`]: "hf_plainPLAINplain0123456789abcdef",
        };
        const plain = await runUnderMocks(program, { stack: "dev", config, secretKeys: [] });
        assert.ok(plain.error, "a plain hfToken stops the program");
        assert.match(
            (plain.error as Error).message,
            /agent-rl-infra:hfToken: .*stacks\/Pulumi\.dev\.yaml holds it in plain text \(value not shown\).*pulumi config set --secret hfToken/,
        );
        assert.ok(!(plain.error as Error).message.includes("hf_plainPLAIN"));
        assert.deepEqual(
            plain.resources.map((r) => r.type).filter((t) => t !== "pulumi:pulumi:Stack"),
            [],
            "nothing registers but the stack itself",
        );
        const encrypted = await runUnderMocks(program, { stack: "dev", config, secretKeys: [`${NS}:hfToken`] });
        assert.equal(encrypted.error, undefined);
    });
});

describe("every recipe (both targets) and every example stack, every secret key set", () => {
    const all = sources();

    test("(a) in plain text: the plan and the preflight's loading refuse it, naming each key and its command, and write nothing", async () => {
        for (const s of all) {
            const keys = secretKeysOf(s);
            const values = sentinelsFor(keys);
            const file = stackFileWith(s, "plain", values);
            const outDir = path.join(tmp, "out-plain", s.name);
            await assert.rejects(plan(s, file, outDir), (e: Error) => {
                for (const k of keys)
                    assert.match(
                        e.message,
                        new RegExp(`${NS}:${k}: .* holds it in plain text \\(value not shown\\).*pulumi config set --secret ${k}`),
                        `${s.name}: ${k}`,
                    );
                for (const v of Object.values(values)) assert.ok(!e.message.includes(v), `${s.name}: the message shows no value`);
                return true;
            });
            assert.equal(walk(outDir).length, 0, `${s.name}: nothing written`);
            assert.throws(
                () => loadStack(s.name, file),
                (e: Error) => e instanceof StackError && keys.every((k) => e.message.includes(`pulumi config set --secret ${k}`)),
                `${s.name}: the preflight's loading refuses it too`,
            );
        }
    });

    test("(b) as secure: the plan runs on placeholders, and no placeholder (nor its base64) is in any file", async () => {
        for (const s of all) {
            const keys = secretKeysOf(s);
            const file = stackFileWith(s, "secure", Object.fromEntries(keys.map((k) => [k, { secure: "v1:AAAAplanTestCiphertext" }])));
            const outDir = path.join(tmp, "out-secure", s.name);
            await plan(s, file, outDir);
            assertNoneIn(outDir, Object.fromEntries(keys.map((k) => [k, secretPlaceholder(k)])), `${s.name} (secure:)`);
        }
    });

    test("(b) decrypted values the program reads: none in any file, in any form (manifests, container JSON, uploads, plan.md, prometheus.yml)", async () => {
        for (const s of all) {
            const keys = secretKeysOf(s);
            const values = sentinelsFor(keys);
            const file = stackFileWith(s, "decrypted", {});
            const outDir = path.join(tmp, "out-decrypted", s.name);
            if (s.cluster) continue; // a cluster stack reads no secret: its secure: plan above is the case
            const result = await planToDir({ stack: s.name, stackFile: file }, { outDir, secrets: values });
            // The program did receive them (else this proves nothing).
            const sent = JSON.stringify(result.resources.map((r) => r.inputs));
            assert.ok(sent.includes(values.hfToken!), `${s.name}: hfToken reached the program's inputs`);
            assert.ok(sent.includes(values["envSecret-db"]!), `${s.name}: the referenced envSecret-db reached the program's inputs`);
            assertNoneIn(outDir, values, s.name);
            if (s.observability !== undefined) {
                const files = walk(outDir).map((f) => path.relative(outDir, f));
                const observed =
                    s.observability === "docker"
                        ? files.some((f) => f.endsWith("prometheus.yml"))
                        : files.some((f) => fs.readFileSync(path.join(outDir, f), "utf8").includes("PodMonitor"));
                assert.ok(observed, `${s.name}: the plan wrote the observability files it is here for: ${files.join(", ")}`);
            }
        }
    });
});

describe("a black box on Docker (docker sandbox pool or hosted sandboxes) is refused, every secret key set, and writes nothing", () => {
    const refused = refusedSources();
    test("both providers of every black-box recipe are walked", () => {
        const blackboxes = dockerBlackboxRecipes();
        assert.ok(blackboxes.length > 0 && refused.length === 2 * blackboxes.length, refused.map((s) => s.name).join(", "));
        assert.ok(refused.every((s) => s.keys.includes("hfToken") && s.keys.some((k) => k.startsWith("ingressKey-"))));
    });
    test("in plain text: refused naming each key and its command; as secure: refused for the provider, naming Kubernetes + agent-sandbox; no file either way", async () => {
        for (const s of refused) {
            const values = sentinelsFor(s.keys);
            const plainDir = path.join(tmp, "refused-plain", s.name);
            await assert.rejects(plan(s, stackFileWith(s, "refused-plain", values), plainDir), (e: Error) => {
                for (const k of s.keys) assert.match(e.message, new RegExp(`${NS}:${k}: .*pulumi config set --secret ${k}`), `${s.name}: ${k}`);
                for (const v of Object.values(values)) assert.ok(!e.message.includes(v), `${s.name}: the message shows no value`);
                return true;
            });
            assert.equal(walk(plainDir).length, 0, `${s.name}: nothing written (plain)`);
            const secureDir = path.join(tmp, "refused-secure", s.name);
            const secure = Object.fromEntries(s.keys.map((k) => [k, { secure: "v1:AAAAplanTestCiphertext" }]));
            await assert.rejects(plan(s, stackFileWith(s, "refused-secure", secure), secureDir), (e: Error) => {
                assert.ok(e.message.includes(s.refusal), `${s.name}: ${e.message}`);
                assert.match(e.message, /Use a Kubernetes target/);
                return true;
            });
            assert.equal(walk(secureDir).length, 0, `${s.name}: nothing written (secure:)`);
        }
    });
});

describe("the rollout key verifier's admin key (agent-sandbox pools)", () => {
    test("every Kubernetes black-box plan holds the verifier's Secret, and the admin key in no file, in any form", async () => {
        const withPool = sources().filter((s) => !s.cluster && parsePlatformConfig(s.platform, s.name).sandboxes.provider === "agent-sandbox");
        assert.ok(withPool.length >= 3, withPool.map((s) => s.name).join(", "));
        for (const s of withPool) {
            const outDir = path.join(tmp, "out-admin-key", s.name);
            const keys = secretKeysOf(s);
            const file = stackFileWith(s, "admin-key", {});
            const result = await planToDir({ stack: s.name, stackFile: file }, { outDir, secrets: sentinelsFor(keys) });
            const admin = result.resources.filter((r) => r.type === "random:index/randomPassword:RandomPassword" && r.name.endsWith("-rollout-keys-admin-key"));
            assert.equal(admin.length, 1, `${s.name}: one generated admin key`);
            const value = `mock-random-${admin[0]!.name}`;
            // The program did put it into the verifier's Secret (else this proves nothing).
            const secret = result.resources.find((r) => r.type === "kubernetes:core/v1:Secret" && r.name.endsWith("-rollout-keys-admin"));
            assert.ok(secret && JSON.stringify(secret.inputs).includes(value), `${s.name}: the admin key reached the Secret's inputs`);
            assert.ok(
                walk(outDir).some((f) => fs.readFileSync(f, "utf8").includes("rollout-keys-admin")),
                `${s.name}: the plan shows the Secret`,
            );
            assertNoneIn(outDir, { rolloutAdminKey: value }, s.name);
        }
    });
});

describe("credentials written into the platform object", () => {
    const base = withTestImages({ recipe: "mbpp-whitebox", runId: "r-1", target: { kind: "kubernetes", context: "c" } }) as Record<string, unknown>;
    const withTraining = (training: Record<string, unknown>) => ({ ...base, training });

    test("env names: PASSWORD/PASSWD/APIKEY/TOKEN/SECRET/CREDENTIAL anywhere in the name, not only as a suffix", () => {
        for (const n of [
            "PGPASSWORD",
            "OPENAI_APIKEY",
            "OPENAI_API_KEY",
            "HF_TOKEN",
            "GITHUB_TOKEN",
            "MYSQL_PWD",
            "DB_PASSWD",
            "AWS_SECRET_ACCESS_KEY",
            "GOOGLE_CREDENTIALS",
            "SLACK_TOKEN_VALUE",
            "ANTHROPIC_API_KEY",
            "api_key",
            "HUGGINGFACEHUB_API_TOKEN",
        ])
            assert.ok(isSecretEnvName(n), n);
        for (const n of [
            "TOKENIZERS_PARALLELISM",
            "MAX_TOKENS",
            "MAX_TOKENS_PER_STEP",
            "NCCL_DEBUG",
            "TEXTARENA_ENV_ID",
            "MONKEY",
            "VLLM_LOGGING_LEVEL",
            "CUDA_VISIBLE_DEVICES",
            "KEYBOARD_LAYOUT",
        ])
            assert.ok(!isSecretEnvName(n), n);
    });

    test("values: a URL with a password, and known token prefixes; not image digests, model names or a URL without a password", () => {
        for (const v of [
            "http://proxyuser:hunter2@proxy.internal:3128",
            "postgres://app:pw@db/x",
            "hf_abcdefghijklmnopqrstuvwxyz012345",
            "sk-proj-abcdefghijklmnopqrstuvwxyz",
            "sk-ant-api03-abcdefghijklmnopqrstu",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "AKIAIOSFODNN7EXAMPLE",
            "xoxb-123456789012-abcdefghij",
            "--api-key=sk-abcdefghijklmnopqrstuvwxyz",
        ])
            assert.ok(credentialKind(v) !== undefined, v);
        for (const v of [
            `registry.example.com/agent-rl/trainer:1@sha256:${"a".repeat(64)}`,
            "Qwen/Qwen3-8B",
            "https://huggingface.co/spaces/x/y",
            "http://user@proxy:3128",
            "hf_transfer",
            "sk-learn",
            "openai/gpt-oss-20b",
            "AKIA",
        ])
            assert.equal(credentialKind(v), undefined, v);
    });

    test("the issue's three: PGPASSWORD, OPENAI_APIKEY and a proxy URL with a password are refused, naming the field and never the value", () => {
        const problems = problemsOf(
            withTraining({
                extraEnv: { PGPASSWORD: "pw12345", OPENAI_APIKEY: "k", HTTPS_PROXY: "http://u:hunter2@proxy:3128", TOKENIZERS_PARALLELISM: "false" },
            }),
        );
        assert.ok(
            problems.some((p) =>
                /^training\.extraEnv\.PGPASSWORD: looks like a secret .*pass it as a reference instead: PGPASSWORD: \{ secret: envSecret-<name> \}/.test(p),
            ),
            problems.join("\n"),
        );
        assert.ok(problems.some((p) => /^training\.extraEnv\.OPENAI_APIKEY: looks like a secret/.test(p)));
        assert.ok(
            problems.some((p) =>
                /^training\.extraEnv\.HTTPS_PROXY: looks like a URL with a password in it .*value not shown.*without its user:password part/.test(p),
            ),
        );
        assert.ok(!problems.some((p) => p.includes("TOKENIZERS_PARALLELISM")));
        assert.ok(problems.every((p) => !p.includes("hunter2") && !p.includes("pw12345")));
    });

    test("a token anywhere (extraArgs, env settings, the vLLM's env) is refused by its path", () => {
        const token = "hf_abcdefghijklmnopqrstuvwxyz012345";
        const problems = problemsOf({
            ...withTraining({ extraArgs: ["--hub-token", token], vllm: { extraEnv: { LOG: `sk-${"x".repeat(24)}` } } }),
            envs: { coding: { settings: { UPSTREAM: "https://bot:pw@git.example.com/r.git" } } },
        });
        assert.ok(
            problems.some((p) => /^training\.extraArgs\[1\]: looks like a Hugging Face token \(hf_\.\.\.\) \(value not shown\)/.test(p)),
            problems.join("\n"),
        );
        assert.ok(problems.some((p) => /^training\.vllm\.extraEnv\.LOG: looks like an API key \(sk-/.test(p)));
        assert.ok(problems.some((p) => /^envs\.coding\.settings\.UPSTREAM: looks like a URL with a password/.test(p)));
        assert.ok(problems.every((p) => !p.includes(token)));
    });

    test("a stack secret key inside platform names the stack secret and its command, not 'unknown field'", () => {
        const problems = problemsOf({ ...base, hfToken: "x", training: { HF_TOKEN: "y" }, ingress: { "ingressKey-operators": "z" } });
        assert.ok(
            problems.includes(
                "hfToken: hfToken is a stack secret, not a field of platform (value not shown): remove it from the platform object and store it encrypted with pulumi config set --secret hfToken",
            ),
            problems.join("\n"),
        );
        assert.ok(problems.some((p) => /^training\.HF_TOKEN: hfToken is a stack secret/.test(p)));
        assert.ok(
            problems.some((p) =>
                /^ingress\.ingressKey-operators: ingressKey-operators is a stack secret, .*pulumi config set --secret ingressKey-operators/.test(p),
            ),
        );
        assert.ok(!problems.some((p) => /unknown field|Unrecognized key/i.test(p)), problems.join("\n"));
    });
});

// ---------------------------------------------------------------------------------------
// Credentials by meaning (issue 56 item 5): the name and value tables, and every env map refusing both.
// The credential-shaped values are assembled here, so no scanner takes the file for a leak.

const b64url = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
const FAKE = {
    pem: (label: string) => `-----BEGIN ${label}-----\nMIIEowIBAAKCAQEA${"x".repeat(40)}\n-----END ${label}-----`,
    jwt: `${b64url({ alg: "HS256", typ: "JWT" })}.${b64url({ sub: "1234567890", name: "run" })}.${"s".repeat(43)}`,
    slack: ["https://hooks.slack.com", "services", "T00000000", "B00000000", "X".repeat(24)].join("/"),
    discord: ["https://discord.com/api/webhooks", "123456789012345678", "y".repeat(68)].join("/"),
    teams: ["https://acme.webhook.office.com/webhookb2", `${"0".repeat(8)}-0000@${"1".repeat(8)}`, "IncomingWebhook", "a".repeat(32), "b".repeat(8)].join("/"),
    azureStorage: ["DefaultEndpointsProtocol=https", "AccountName=acme", `AccountKey=${"k".repeat(86)}==`, "EndpointSuffix=core.windows.net"].join(";"),
    serviceBus: ["Endpoint=sb://acme.servicebus.windows.net/", "SharedAccessKeyName=send", `SharedAccessKey=${"q".repeat(44)}`].join(";"),
    sasOnly: `BlobEndpoint=https://acme.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02&sig=${"z".repeat(44)}`,
    sasUrl: `https://acme.blob.core.windows.net/c/ckpt.tar?sv=2022-11-02&se=2030-01-01&sp=r&sig=${"w".repeat(40)}%3D`,
    adoNet: "Server=db.internal;Database=runs;User Id=app;Password=hunter2xyz;",
    postgres: "postgres://app:hunter2xyz@db.internal:5432/runs",
    aws: ["AKIA", "IOSFODNN7EXAMPLE"].join(""),
    ghp: ["ghp", "a".repeat(36)].join("_"),
    githubPat: ["github", "pat", `11ABCDEFG0${"b".repeat(72)}`].join("_"),
    hf: ["hf", "A".repeat(34)].join("_"),
    openai: ["sk", `proj-${"c".repeat(40)}`].join("-"),
};

describe("credentials by meaning: env names and values (issue 56)", () => {
    test("names by meaning: short password names, connection strings, DSNs, webhooks and private keys are refused", () => {
        for (const n of [
            "RABBITMQ_DEFAULT_PASS",
            "SMTP_PASS",
            "PASS",
            "DB_PASSWD",
            "MYSQL_PWD",
            "AZURE_STORAGE_CONNECTION_STRING",
            "SERVICEBUS_CONNECTIONSTRING",
            "DB_CONN_STR",
            "SQLCONNSTR_RUNS",
            "PG_DSN",
            "SENTRY_DSN",
            "DSN",
            "SLACK_WEBHOOK_URL",
            "DISCORD_WEBHOOK",
            "TEAMS_WEBHOOK_URL",
            "SSH_PRIVATE_KEY",
            "GITHUB_APP_PRIVATE_KEY_PEM",
            "rabbitmq_default_pass",
        ])
            assert.ok(isSecretEnvName(n), n);
    });

    test("names that only contain the letters pass: PASSAGE_COUNT, COMPASS_MODE, PASS_AT_K, PWD (the working directory)", () => {
        for (const n of [
            "PASSAGE_COUNT",
            "COMPASS_MODE",
            "BYPASS_CACHE",
            "PASS_AT_K",
            "PWD",
            "OLDPWD",
            "CONNECTION_TIMEOUT",
            "DSNAME_PREFIX",
            "HOOKS_DIR",
            "TOKENIZERS_PARALLELISM",
            "MAX_TOKENS",
        ])
            assert.ok(!isSecretEnvName(n), n);
    });

    test("values by meaning: PEM private keys, JWTs, chat webhooks, signed URLs, connection strings with a key or password, token formats", () => {
        const cases: Array<[string, string, RegExp]> = [
            ["PEM PKCS#8", FAKE.pem("PRIVATE KEY"), /PEM private key/],
            ["PEM RSA", FAKE.pem("RSA PRIVATE KEY"), /PEM private key/],
            ["PEM EC", FAKE.pem("EC PRIVATE KEY"), /PEM private key/],
            ["PEM OpenSSH", FAKE.pem("OPENSSH PRIVATE KEY"), /PEM private key/],
            ["PEM encrypted", FAKE.pem("ENCRYPTED PRIVATE KEY"), /PEM private key/],
            ["PGP", FAKE.pem("PGP PRIVATE KEY BLOCK"), /PEM private key/],
            ["JWT", FAKE.jwt, /JSON Web Token/],
            ["JWT as a bearer header", `Bearer ${FAKE.jwt}`, /JSON Web Token/],
            ["Slack webhook", FAKE.slack, /Slack webhook URL/],
            ["Discord webhook", FAKE.discord, /Discord webhook URL/],
            ["Teams webhook", FAKE.teams, /Teams webhook URL/],
            ["Azure Storage AccountKey", FAKE.azureStorage, /connection string with its key or password/],
            ["Service Bus SharedAccessKey", FAKE.serviceBus, /connection string with its key or password/],
            ["SharedAccessSignature", FAKE.sasOnly, /connection string with its key or password|shared access signature/],
            ["SAS URL", FAKE.sasUrl, /shared access signature/],
            ["ADO.NET Password=", FAKE.adoNet, /connection string with its key or password/],
            ["postgres URL with a password", FAKE.postgres, /URL with a password/],
            ["AWS access key id", FAKE.aws, /AWS access key id/],
            ["GitHub ghp_", FAKE.ghp, /GitHub token/],
            ["GitHub github_pat_", FAKE.githubPat, /GitHub token/],
            ["Hugging Face", FAKE.hf, /Hugging Face token/],
            ["OpenAI sk-", FAKE.openai, /API key \(sk-/],
        ];
        for (const [what, v, kind] of cases) assert.match(credentialKind(v) ?? "(none)", kind, what);
    });

    test("ordinary values pass: a certificate, a public key, a URL without a password or signature, a connection string without one", () => {
        for (const v of [
            FAKE.pem("CERTIFICATE"),
            FAKE.pem("PUBLIC KEY"),
            "https://app.slack.com/client/T00000000/C00000000",
            "https://hooks.slack.com/",
            "https://discord.com/channels/123456789012345678/123456789012345678",
            "https://acme.webhook.office.com/",
            "https://acme.blob.core.windows.net/c/ckpt.tar?sv=2022-11-02",
            "https://example.com/search?q=sig&sort=asc",
            "Server=db.internal;Database=runs;User Id=app;Integrated Security=true;",
            "Password=",
            "--password-file=/run/secrets/db",
            "postgres://app@db.internal:5432/runs",
            "http://user@proxy:3128",
            "eyJhbGciOiJIUzI1NiJ9",
            "a.b.c",
            "Wordle-v0",
            "hf_transfer",
        ])
            assert.equal(credentialKind(v), undefined, v);
    });

    const base = withTestImages({ recipe: "mbpp-whitebox", runId: "r-1", target: { kind: "kubernetes", context: "c" } }) as Record<string, unknown>;
    const withTraining = (training: Record<string, unknown>) => ({ ...base, training });
    // Each env map of the platform (ENV_MAP_FIELDS): a credential-looking name and a credential value, refused by
    // their path, never shown, each naming the reference form that map takes.
    const EXTRA_ENV_FIX = /pass it as a reference instead: [A-Z_]+: \{ secret: envSecret-<name> \} and pulumi config set --secret envSecret-<name>/;
    const SECRET_KEY_REF_FIX =
        /pass it as a reference to an existing Kubernetes Secret in the env's namespace instead: [A-Z_]+: \{ secretKeyRef: \{ name: <Secret>, key: <key> \} \}/;
    const sites: Array<{ field: string; raw: (env: Record<string, string>) => unknown; fix: RegExp }> = [
        { field: "training.extraEnv", raw: (env) => withTraining({ extraEnv: env }), fix: EXTRA_ENV_FIX },
        {
            field: "training.vllm.extraEnv",
            raw: (env) =>
                withTestImages({
                    recipe: "opencode-blackbox",
                    runId: "r-1",
                    target: { kind: "kubernetes", context: "c" },
                    training: { vllm: { extraEnv: env } },
                }),
            fix: EXTRA_ENV_FIX,
        },
        { field: "envs.coding.settings", raw: (env) => ({ ...base, envs: { coding: { catalog: "coding", settings: env } } }), fix: SECRET_KEY_REF_FIX },
    ];
    for (const site of sites)
        test(`${site.field}: a credential name and credential values are refused, naming the field and the reference form`, () => {
            const problems = problemsOf(
                site.raw({
                    RABBITMQ_DEFAULT_PASS: "guest",
                    AZURE_STORAGE_CONNECTION_STRING: "UseDevelopmentStorage=true",
                    ALERTS: FAKE.slack,
                    TLS_KEY_PEM: FAKE.pem("EC PRIVATE KEY"),
                    SESSION: FAKE.jwt,
                    STORE: FAKE.azureStorage,
                    PASSAGE_COUNT: "4",
                    COMPASS_MODE: "on",
                    HOME_PAGE: "https://example.com/docs",
                }),
            );
            const at = (name: string, what: RegExp) =>
                assert.ok(
                    problems.some((p) => p.startsWith(`${site.field}.${name}: `) && what.test(p) && site.fix.test(p)),
                    `${site.field}.${name}:\n${problems.join("\n")}`,
                );
            at("RABBITMQ_DEFAULT_PASS", /looks like a secret \(its name ends in _PASS or _PWD: /);
            at("AZURE_STORAGE_CONNECTION_STRING", /looks like a secret \(its name holds CONNECTION_STRING or CONN_STR: /);
            at("ALERTS", /looks like a Slack webhook URL \(hooks\.slack\.com\/services\/\.\.\.\) \(value not shown\)/);
            at("TLS_KEY_PEM", /looks like a PEM private key/);
            at("SESSION", /looks like a JSON Web Token/);
            at("STORE", /looks like a connection string with its key or password/);
            for (const ok of ["PASSAGE_COUNT", "COMPASS_MODE", "HOME_PAGE"]) assert.ok(!problems.some((p) => p.includes(ok)), ok);
            for (const v of [FAKE.slack, FAKE.jwt, FAKE.azureStorage, "MIIEowIBAAKCAQEA", "guest"])
                assert.ok(
                    problems.every((p) => !p.includes(v)),
                    "no value shown",
                );
        });

    test("a credential value outside an env map (extraArgs) names the stack's secret keys; another check that quotes the value does not show it; a reference passes every rule", () => {
        const problems = problemsOf(withTraining({ extraArgs: ["--logging-steps", FAKE.discord], extraEnv: { DB_DSN: { secret: "envSecret-dsn" } } }));
        assert.deepEqual(problems, [
            "training.extraArgs[1]: looks like a Discord webhook URL (discord.com/api/webhooks/...) (value not shown), and a stack file is plain text that every plan and manifest copies: remove it; " +
                "the stack carries secrets only as its secret keys (hfToken, registryAuth, ingressKey-<name>, and envSecret-<name> that an extraEnv entry references as { secret: envSecret-<name> }; set with pulumi config set --secret); rotate it if the file was shared",
            "training.extraArgs: --logging-steps takes a whole number (argparse type=int), got '<value not shown>'",
        ]);
    });

    test("the offline plan refuses an env credential and writes nothing", async () => {
        const outDir = path.join(tmp, "env-credential");
        await assert.rejects(
            planToDir(
                { recipe: "mbpp-whitebox", target: "kubernetes" },
                { outDir, platformOverride: { training: { extraEnv: { AZURE_STORAGE_CONNECTION_STRING: FAKE.azureStorage } } } },
            ),
            (e: Error) =>
                /training\.extraEnv\.AZURE_STORAGE_CONNECTION_STRING: looks like a connection string/.test(e.message) && !e.message.includes(FAKE.azureStorage),
        );
        assert.deepEqual(walk(outDir), []);
    });

    test("docs/design/secrets.md lists every name rule and every value rule with its reason", async () => {
        const secrets = await import("../../components/config/secrets");
        const doc = fs.readFileSync(path.join(REPO_ROOT, "docs/design/secrets.md"), "utf8");
        const rules = [...(secrets.SECRET_ENV_NAMES ?? []), ...(secrets.CREDENTIAL_VALUES ?? [])];
        assert.ok(rules.length > 0, "the two tables");
        for (const r of rules) assert.ok(doc.includes(`| ${r.what} | ${r.why} |`), `${r.what}: its row in docs/design/secrets.md`);
    });
});

describe("the offline plan without Pulumi secrets set up", () => {
    test("hubRepoId without hfToken plans on a placeholder, plan.md says what up needs; the program itself still refuses", async () => {
        const outDir = path.join(tmp, "hub-placeholder");
        const override = { training: { hubRepoId: "acme/qwen-mbpp" } };
        for (const target of ["kubernetes", "docker"] as const) {
            const result = await planToDir({ recipe: "mbpp-whitebox", target }, { outDir, platformOverride: override });
            const md = fs.readFileSync(path.join(outDir, "plan.md"), "utf8");
            assert.match(
                md,
                /\*\*Secrets not set, planned with placeholders:\*\* `hfToken`\. .*`pulumi up` refuses the stack until you run `pulumi config set --secret hfToken`/,
            );
            if (target === "kubernetes") assert.ok(result.manifests.some((m) => m.kind === "Secret" && m.stringData?.HF_TOKEN === "<redacted>"));
            assertNoneIn(outDir, { hfToken: "plan-placeholder-hfToken" }, `hub placeholder ${target}`);
        }
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const program = require(path.join(REPO_ROOT, "index.ts"));
        const raw = withTestImages({ recipe: "mbpp-whitebox", runId: "r-1", target: { kind: "docker" }, ...override });
        const up = await runUnderMocks(program, { stack: "dev", config: { [`${NS}:platform`]: JSON.stringify(raw) } });
        assert.match(
            String((up.error as Error)?.message),
            /hfToken: training\.hubRepoId pushes to the Hub, which needs a token: pulumi config set --secret hfToken/,
        );
    });
});

describe("secrets in env maps, only as references ({ secret: envSecret-<name> })", () => {
    const refs = {
        training: { extraEnv: { DB_PASSWORD: { secret: "envSecret-db" } }, vllm: { extraEnv: { UPSTREAM_DSN: { secret: "envSecret-dsn" } } } },
    };
    const values = { "envSecret-db": "SENTINEL-db-password-4c3b2a", "envSecret-dsn": "SENTINEL-dsn-value-8d7e6f" };
    const env = (container: Record<string, any>, name: string) => (container.env as Array<Record<string, any>>).find((e) => e.name === name);

    // Docker runs no black box (refused above): there a white box with its own vLLM (whitebox-server) carries both maps.
    const recipeOn = (target: "kubernetes" | "docker") => (target === "docker" ? "mbpp-whitebox" : "opencode-blackbox");
    const serverOn = (target: "kubernetes" | "docker") => (target === "docker" ? { training: { layout: "whitebox-server", gpusOnNode: 2 } } : {});

    test("Kubernetes: a Secret per referenced key and secretKeyRef in the trainer and vLLM; Docker: a secret env entry; no value in any file", async () => {
        for (const target of ["kubernetes", "docker"] as const) {
            const outDir = path.join(tmp, `refs-${target}`);
            const result = await planToDir(
                { recipe: recipeOn(target), target },
                { outDir, secrets: values, platformOverride: deepMerge(refs, serverOn(target)) as Record<string, unknown> },
            );
            const sent = JSON.stringify(result.resources.map((r) => r.inputs));
            for (const v of Object.values(values)) assert.ok(sent.includes(v), `${target}: the value reached the program's inputs`);
            assertNoneIn(outDir, values, `references on ${target}`);
            const md = fs.readFileSync(path.join(outDir, "plan.md"), "utf8");
            assert.match(md, /UPSTREAM_DSN=<secret envSecret-dsn>/);
            assert.ok(!md.includes("Secrets not set"), "every referenced key was set");
            if (target === "kubernetes") {
                for (const [key, name] of [
                    ["db", "DB_PASSWORD"],
                    ["dsn", "UPSTREAM_DSN"],
                ] as const) {
                    const secret = result.manifests.find((m) => m.kind === "Secret" && m.metadata.name === `env-secret-${key}`);
                    assert.ok(secret, `the Secret env-secret-${key}`);
                    assert.deepEqual(secret.stringData, { value: "<redacted>" });
                    const containers = result.manifests.flatMap((m) => (m.kind === "Job" ? m.spec.template.spec.containers : []));
                    const refd = containers.filter((c: Record<string, any>) => env(c, name) !== undefined);
                    assert.ok(refd.length > 0, `${name} reaches a container`);
                    for (const c of refd) assert.deepEqual(env(c, name), { name, valueFrom: { secretKeyRef: { name: `env-secret-${key}`, key: "value" } } });
                }
            } else {
                const trainerJson = walk(path.join(outDir, "docker")).find((f) => f.endsWith("-container-agentrl-training-trainer.json"))!;
                const vllmJson = walk(path.join(outDir, "docker")).find((f) => f.endsWith("-container-agentrl-training-vllm.json"))!;
                assert.match(fs.readFileSync(trainerJson, "utf8"), /"DB_PASSWORD=<redacted>"/);
                assert.match(fs.readFileSync(vllmJson, "utf8"), /"UPSTREAM_DSN=<redacted>"/);
                assert.ok(!fs.readFileSync(vllmJson, "utf8").includes("DB_PASSWORD"), "vLLM gets only its own references");
            }
        }
    });

    test("a reference not set: the offline plan stands placeholders in and says so; the program refuses it, naming the field and the command", async () => {
        for (const target of ["kubernetes", "docker"] as const) {
            const outDir = path.join(tmp, `refs-unset-${target}`);
            await planToDir({ recipe: recipeOn(target), target }, { outDir, platformOverride: deepMerge(refs, serverOn(target)) as Record<string, unknown> });
            const md = fs.readFileSync(path.join(outDir, "plan.md"), "utf8");
            assert.match(
                md,
                /\*\*Secrets not set, planned with placeholders:\*\* `envSecret-db`, `envSecret-dsn`\. .*`pulumi config set --secret envSecret-db`/,
            );
            assertNoneIn(
                outDir,
                { "envSecret-db": secretPlaceholder("envSecret-db"), "envSecret-dsn": secretPlaceholder("envSecret-dsn") },
                `placeholders ${target}`,
            );
        }
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const program = require(path.join(REPO_ROOT, "index.ts"));
        const raw = deepMerge(withTestImages({ recipe: "opencode-blackbox", runId: "r-1", target: { kind: "kubernetes", context: "c" } }), refs);
        const up = await runUnderMocks(program, { stack: "dev", config: { [`${NS}:platform`]: JSON.stringify(raw), [`${NS}:envSecret-dsn`]: "x" } });
        const message = String((up.error as Error)?.message);
        assert.match(
            message,
            /training\.extraEnv\.DB_PASSWORD: references the stack secret envSecret-db, which stacks\/Pulumi\.dev\.yaml does not set: set it with pulumi config set --secret envSecret-db/,
        );
        assert.ok(!message.includes("envSecret-dsn,"), "a set reference is not named");
    });

    test("a referenced key in plain text is refused like every secret key, naming the command", () => {
        assert.ok(isSecretConfigKey("envSecret-db") && !isSecretConfigKey("envSecret-"));
        const problems = plainSecretProblems([`${NS}:envSecret-db`, `${NS}:platform`], () => false, "stacks/Pulumi.dev.yaml");
        assert.equal(problems.length, 1);
        assert.match(
            problems[0]!,
            /^agent-rl-infra:envSecret-db: the env secret 'db' \(referenced by an extraEnv entry\) is a secret, and stacks\/Pulumi\.dev\.yaml holds it in plain text \(value not shown\).*pulumi config set --secret envSecret-db /,
        );
    });

    test("the config edge: a reference passes the name rule; a reference to no envSecret-<name> key and references in env settings are refused", () => {
        const base = withTestImages({ recipe: "mbpp-whitebox", runId: "r-1", target: { kind: "kubernetes", context: "c" } }) as Record<string, unknown>;
        assert.deepEqual(problemsOf({ ...base, training: { extraEnv: { PGPASSWORD: { secret: "envSecret-pg" } } } }), []);
        const bad = problemsOf({ ...base, training: { extraEnv: { A: { secret: "hfToken" }, B: { secret: "envSecret-Upper" }, C: { secretKeyRef: "x" } } } });
        assert.ok(
            bad.some((p) => /^training\.extraEnv\.A/.test(p) && p.includes("envSecret-<name>")),
            bad.join("\n"),
        );
        assert.ok(
            bad.some((p) => /^training\.extraEnv\.B/.test(p)),
            bad.join("\n"),
        );
        assert.ok(
            bad.some((p) => /^training\.extraEnv\.C/.test(p)),
            bad.join("\n"),
        );
        const settings = problemsOf({ ...base, envs: { coding: { settings: { DB_PASSWORD: { secret: "envSecret-db" } } } } });
        assert.ok(
            settings.some((p) => /^envs\.coding\.settings\.DB_PASSWORD/.test(p)),
            settings.join("\n"),
        );
    });
});
