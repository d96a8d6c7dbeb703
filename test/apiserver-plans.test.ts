// Server-side validation of every plan: each Kubernetes stack and every recipe is planned
// (the real program under Pulumi mocks) and its manifests are applied with
// `kubectl apply --server-side --dry-run=server` to a real kube-apiserver v1.36.3 with the
// agent-sandbox and Gateway API CRDs (test/helpers/apiserver.ts). Skip only with SKIP_APISERVER=1.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import YAML from "yaml";
import { RECIPE_NAMES } from "../components/config";
import { planToDir, readStackFile, REPO_ROOT, type PlanSource } from "../scripts/lib/plan";
import { serverDryRun, startApiServer, type ApiServer } from "./helpers/apiserver";

const skip = process.env.SKIP_APISERVER === "1" ? "SKIP_APISERVER=1" : false;

const kubernetesStacks = fs
    .readdirSync(path.join(REPO_ROOT, "stacks"))
    .filter((f) => /^Pulumi\..+\.yaml$/.test(f))
    .map((f) => f.slice("Pulumi.".length, -".yaml".length))
    .filter((stack) => JSON.parse(readStackFile(stack).config["agent-rl-infra:platform"]).target?.kind === "kubernetes");

const exposed = { recipe: "opencode-blackbox", target: "kubernetes" } as const;
const variants: Array<{ name: string; source: PlanSource; override?: Record<string, unknown> }> = [
    ...kubernetesStacks.map((stack) => ({ name: `stack ${stack}`, source: { stack } })),
    ...RECIPE_NAMES.map((recipe) => ({ name: `recipe ${recipe}`, source: { recipe, target: "kubernetes" as const } })),
    {
        name: "opencode-blackbox exposed through a Gateway API HTTPRoute",
        source: exposed,
        override: { ingress: { exposure: "httproute", host: "vllm.example.com", gateway: { name: "public", namespace: "gateway-system" } } },
    },
    {
        name: "opencode-blackbox behind a TLS LoadBalancer, installing the agent-sandbox controller",
        source: exposed,
        override: {
            ingress: { exposure: "loadbalancer", host: "vllm.example.com", tls: { mode: "secret", secretName: "vllm-tls" } },
            sandboxes: { installController: true },
        },
    },
];

describe("server-side dry run of every planned stack and recipe", { skip }, () => {
    let api: ApiServer;
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "arl-ssa-"));
    before(async () => {
        api = await startApiServer();
    });
    after(async () => {
        await api?.stop();
        fs.rmSync(tmp, { recursive: true, force: true });
    });

    for (const v of variants) {
        it(`${v.name}: every object is accepted by the API server`, async () => {
            const outDir = path.join(tmp, v.name.replace(/[^a-z0-9]+/gi, "-"));
            const plan = await planToDir(v.source, { outDir, platformOverride: v.override, secrets: { hfToken: "dry-run-token" } });
            assert.ok(plan.manifests.length > 0);
            const result = await serverDryRun(api, path.join(outDir, "manifests"));
            assert.equal(result.objects, plan.manifests.length);
        });
    }

    it("a deliberately broken planned object is rejected with the API server's own message", async () => {
        const outDir = path.join(tmp, "broken");
        await planToDir({ recipe: "wordle-whitebox", target: "kubernetes" }, { outDir });
        const dir = path.join(outDir, "manifests");
        const jobFile = fs.readdirSync(dir).find((f) => f.includes("-job-"))!;
        const job = YAML.parse(fs.readFileSync(path.join(dir, jobFile), "utf8"));
        // A Job's pod may not restart Always (the schema allows the value; only the server refuses it).
        job.spec.template.spec.restartPolicy = "Always";
        fs.writeFileSync(path.join(dir, jobFile), YAML.stringify(job));
        await assert.rejects(serverDryRun(api, dir), (e: Error) => {
            assert.match(e.message, /restartPolicy/);
            assert.match(
                e.message,
                /The Job "train-demo-[0-9a-f]{8}" is invalid: spec\.template\.spec\.restartPolicy: Required value: valid values: "OnFailure", "Never"/,
            );
            return true;
        });
    });
});
