/**
 * Hosted execution stays supported for the white box only (components/config/sandbox-providers.ts HOSTED_BLACKBOX_REFUSED says
 * why the black box is refused on hosted sandboxes). The claim checked here, on every white-box recipe on both targets,
 * with its env server hosted elsewhere (`envs.<name>.external`, a Space that runs the model's code) and deployed by the
 * stack: the trainer holds the trace and no key goes to the model's side.
 * - The trainer generates: vLLM runs inside it (colocate) or in its own pod / network namespace (server, at localhost),
 *   so the token ids and logprobs it trains on never leave the training node; the env is told only its URL.
 * - No key is handed to anything the model's code can reach: no ingress, no sandbox pool, no SANDBOX_* / *_API_KEY
 *   variable in any container, the hosted env's URL carries no credentials, and a deployed env's replicas get no secret.
 * The control (the black box on Kubernetes) shows the same search finds the sandbox's variables where they exist.
 * Run: npx tsx --test test/config/hosted-whitebox.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import { RECIPE_NAMES, RECIPES, type RecipeName } from "../../components/config";
import type { RecordedResource } from "../../scripts/lib/mockrun";
import { planToDir, type PlanResult } from "../../scripts/lib/plan";
import { unwrapSecrets } from "../helpers/secrets";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-hosted-wb-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const HOSTED = "https://org-env.hf.space";
/** What would hand the model's side a key: the sandbox pool's variables, any API key, the ingress's keys. */
/** What the target runs (not the program's own component resources, which deploy nothing themselves). */
const deployed = (r: RecordedResource) => /^(kubernetes|docker):/.test(r.type);
const KEY_VARIABLE = /\b(SANDBOX_[A-Z_]+|[A-Z_]*_API_KEY|INGRESS_KEYS?)\b/g;
const SECRETS = { hfToken: "hf_SENTINELhostedWhitebox0123456789abcd" };

const whiteboxes = RECIPE_NAMES.filter((r) => RECIPES[r].training.layout !== "blackbox");

/** Every env var name a container of the plan is given (Kubernetes env entries, Docker `NAME=value` strings). */
function envNames(resources: readonly RecordedResource[]): Map<string, string[]> {
    const out = new Map<string, string[]>();
    const add = (who: string, name: string) => out.set(who, [...(out.get(who) ?? []), name]);
    const walk = (who: string, v: unknown): void => {
        if (Array.isArray(v)) for (const x of v) walk(who, x);
        else if (v !== null && typeof v === "object") {
            const o = v as Record<string, unknown>;
            if (Array.isArray(o.env)) for (const e of o.env as Array<{ name?: string }>) if (e?.name) add(who, e.name);
            if (Array.isArray(o.envs)) for (const e of o.envs as unknown[]) if (typeof e === "string") add(who, e.split("=")[0]!);
            for (const x of Object.values(o)) walk(who, x);
        }
    };
    for (const r of resources) walk(`${r.type} ${r.name}`, unwrapSecrets(r.inputs));
    return out;
}

function keyVariables(result: PlanResult): string[] {
    return [...envNames(result.resources)].flatMap(([who, names]) => names.filter((n) => n.match(KEY_VARIABLE)).map((n) => `${who}: ${n}`));
}

function hostedEnvs(recipe: RecipeName): Record<string, unknown> {
    return Object.fromEntries(
        Object.keys((RECIPES[recipe] as { envs?: Record<string, unknown> }).envs ?? {}).map((name) => [name, { external: { url: HOSTED, sessions: 256 } }]),
    );
}

describe("the white box with its env hosted elsewhere: the trainer holds the trace, no key goes to the model's side", () => {
    test("control: the same search finds the sandbox's variables in the black box on Kubernetes", async () => {
        const result = await planToDir({ recipe: "opencode-blackbox", target: "kubernetes" }, { outDir: path.join(tmp, "control"), secrets: SECRETS });
        const found = keyVariables(result);
        assert.ok(
            found.some((f) => f.includes("SANDBOX_")),
            found.join("\n"),
        );
    });

    for (const recipe of whiteboxes) {
        for (const target of ["kubernetes", "docker"] as const) {
            for (const env of ["hosted", "deployed"] as const) {
                for (const layout of ["whitebox-colocate", "whitebox-server"] as const) {
                    const program = RECIPES[recipe].training.program;
                    // Only the layouts the recipe's program runs in (components/config/programs.ts).
                    if (layout === "whitebox-server" && program !== "train_coding_whitebox_eval") continue;
                    test(`${recipe} on ${target}, env ${env}, ${layout}`, async () => {
                        const override: Record<string, unknown> = {
                            ...(env === "hosted" ? { envs: hostedEnvs(recipe) } : {}),
                            ...(layout === "whitebox-server" ? { training: { layout, gpusOnNode: 2 } } : {}),
                        };
                        const result = await planToDir(
                            { recipe, target },
                            { outDir: path.join(tmp, `${recipe}-${target}-${env}-${layout}`), secrets: SECRETS, platformOverride: override },
                        );
                        const { config, ingress, sandboxes, training, envs } = result.plan;
                        // Nothing a model's side could be handed a key by: no ingress, no sandbox pool.
                        assert.equal(config.ingress.enabled, false);
                        assert.equal(ingress, undefined);
                        assert.equal(config.sandboxes.provider, "none");
                        assert.equal(sandboxes, undefined);
                        assert.deepEqual(keyVariables(result), [], "no SANDBOX_* / *_API_KEY / ingress keys variable in any container");
                        assert.ok(
                            !result.resources.some((r) => /vllm-ingress|ingress-proxy|rollout-keys|sandbox/.test(r.name)),
                            "no ingress, verifier or sandbox resource",
                        );
                        // The trainer generates: vLLM is in the trainer (colocate) or beside it at localhost (server).
                        const argv = [...(training.trainer.command ?? []), ...training.trainer.args];
                        const args = argv.join(" ");
                        const told = [...argv, ...Object.values(training.trainer.env)];
                        if (layout === "whitebox-colocate") {
                            assert.equal(training.vllm, undefined, "no vLLM container: it runs inside the trainer");
                            assert.doesNotMatch(args, /--vllm-mode server/);
                        } else {
                            assert.ok(training.vllm, "vLLM as a container beside the trainer");
                            assert.match(args, /--vllm-mode server/);
                            const flag = argv.indexOf("--vllm-server-url");
                            const urls = [flag >= 0 ? argv[flag + 1] : undefined, training.trainer.env.VLLM_URL].filter((u): u is string => u !== undefined);
                            assert.ok(urls.length > 0, told.join(" "));
                            for (const u of urls) assert.ok(["localhost", "127.0.0.1"].includes(new URL(u).hostname), `the trainer's vLLM is its own: ${u}`);
                        }
                        // The env: hosted, it is told its URL only (no credentials in it) and nothing is deployed for it;
                        // deployed, its replicas get no secret.
                        for (const e of envs) {
                            if (env === "hosted") {
                                assert.equal(e.kind, "external");
                                assert.ok(
                                    told.some((v) => v.includes(HOSTED)),
                                    `the trainer is told ${HOSTED}`,
                                );
                                const u = new URL(HOSTED);
                                assert.equal(u.username + u.password, "");
                                assert.ok(!result.resources.some((r) => deployed(r) && r.name.includes(`env-${e.name}`)), `nothing deployed for env ${e.name}`);
                            } else {
                                assert.equal(e.kind, "deployed");
                                const envResources = result.resources.filter((r) => deployed(r) && r.name.includes(`env-${e.name}`));
                                assert.ok(envResources.length > 0);
                                assert.ok(
                                    !JSON.stringify(envResources.map((r) => unwrapSecrets(r.inputs))).includes(SECRETS.hfToken),
                                    "no HF token in the env",
                                );
                                assert.ok(
                                    !envResources.some((r) => /secretKeyRef|secretEnv/.test(JSON.stringify(r.inputs))),
                                    "the env's containers take no secret",
                                );
                            }
                        }
                    });
                }
            }
        }
    }
});
