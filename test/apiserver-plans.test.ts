// Server-side validation of every plan: each Kubernetes stack and every recipe is planned
// (the real program under Pulumi mocks) and its manifests are applied with
// `kubectl apply --server-side --dry-run=server` to a real kube-apiserver v1.36.3 with the
// agent-sandbox, Gateway API, cert-manager and JobSet CRDs (test/helpers/apiserver.ts). Skip only with SKIP_APISERVER=1.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import YAML from "yaml";
import { MULTI_NODE_RECIPE_NAMES, RECIPE_NAMES } from "../components/config";
import { planToDir, readStackFile, REPO_ROOT, type PlanSource } from "../scripts/lib/plan";
import { serverDryRun, startApiServer, type ApiServer } from "./helpers/apiserver";

const skip = process.env.SKIP_APISERVER === "1" ? "SKIP_APISERVER=1" : false;

const kubernetesStacks = fs
    .readdirSync(path.join(REPO_ROOT, "stacks"))
    .filter((f) => /^Pulumi\..+\.yaml$/.test(f))
    .map((f) => f.slice("Pulumi.".length, -".yaml".length))
    .filter((stack) => {
        // Run stacks only: a cluster stack (agent-rl-infra:cluster) has its own dry run (cluster-stack.test.ts).
        const platform = readStackFile(stack).config["agent-rl-infra:platform"];
        return platform !== undefined && JSON.parse(platform).target?.kind === "kubernetes";
    });

const exposed = { recipe: "opencode-blackbox", target: "kubernetes" } as const;
const variants: Array<{ name: string; source: PlanSource; override?: Record<string, unknown> }> = [
    ...kubernetesStacks.map((stack) => ({ name: `stack ${stack}`, source: { stack } })),
    ...RECIPE_NAMES.map((recipe) => ({ name: `recipe ${recipe}`, source: { recipe, target: "kubernetes" as const } })),
    // Multi-node recipes: the JobSet against JobSet v0.10.1's CRD (from its Go module, test/apiserver/build.sh).
    ...MULTI_NODE_RECIPE_NAMES.map((recipe) => ({ name: `recipe ${recipe}`, source: { recipe, target: "kubernetes" as const } })),
    {
        name: "opencode-blackbox-32b queued on Kueue (suspended JobSet with the queue label)",
        source: { recipe: "opencode-blackbox-32b", target: "kubernetes" },
        override: { target: { kueueQueue: "team-a" } },
    },
    {
        name: "opencode-blackbox queued on Kueue (suspended one-node Job with the queue label)",
        source: exposed,
        override: { target: { kueueQueue: "team-a" } },
    },
    {
        name: "opencode-blackbox with NodeLocal DNSCache (DNS egress to the cache's /32 and kube-dns)",
        source: exposed,
        override: { target: { dns: { kind: "node-local", addresses: ["169.254.20.10", "10.96.0.10"] } } },
    },
    {
        name: "opencode-blackbox-32b with DNS pods of one's own (target.dns selector)",
        source: { recipe: "opencode-blackbox-32b", target: "kubernetes" },
        override: { target: { dns: { kind: "selector", namespace: "dns", podLabels: { app: "unbound" } } } },
    },
    {
        name: "opencode-blackbox exposed through a Gateway API HTTPRoute",
        source: exposed,
        override: { ingress: { exposure: "httproute", host: "vllm.example.com", gateway: { name: "public", namespace: "gateway-system" } } },
    },
    {
        name: "opencode-blackbox behind a TLS LoadBalancer",
        source: exposed,
        override: {
            ingress: { exposure: "loadbalancer", host: "vllm.example.com", tls: { mode: "secret", secretName: "vllm-tls" } },
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

    it("the JobSet CRD is really checked: an action outside its enum is rejected", async () => {
        const outDir = path.join(tmp, "broken-jobset");
        await planToDir({ recipe: "opencode-blackbox-32b", target: "kubernetes" }, { outDir });
        const dir = path.join(outDir, "manifests");
        const file = fs.readdirSync(dir).find((f) => f.includes("-jobset-"))!;
        const jobSet = YAML.parse(fs.readFileSync(path.join(dir, file), "utf8"));
        jobSet.spec.failurePolicy.rules[0].action = "RestartEverything";
        fs.writeFileSync(path.join(dir, file), YAML.stringify(jobSet));
        await assert.rejects(serverDryRun(api, dir), /spec\.failurePolicy\.rules\[0\]\.action: Unsupported value: "RestartEverything"/);
    });

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
