/**
 * Who may reach whom, computed from the NetworkPolicies every Kubernetes recipe renders
 * (test/helpers/reachability.ts evaluates them as Kubernetes does), against the table of paths
 * the system needs, written in the README: any path the policies allow that the README does
 * not list fails, and so does a listed path they do not allow.
 * Run: node --import tsx --test test/reachability.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import { MULTI_NODE_RECIPE_NAMES, RECIPE_NAMES } from "../components/config";
import { planToDir } from "../scripts/lib/plan";
import { evaluateReachability, reachabilityTable, type Manifest, type Party, type Reachability } from "./helpers/reachability";

const README = path.resolve(__dirname, "..", "README.md");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-reach-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** What the cluster has besides the stack: the internet, the metadata service, the API server, DNS, and any other pod. */
const ENDPOINTS = [
    { name: "internet", ip: "8.8.8.8" },
    { name: "metadata", ip: "169.254.169.254" },
    // The API server's endpoint address (kube-proxy DNATs the Service to it before policies apply).
    { name: "apiserver", ip: "10.0.0.10", ports: [{ port: 443 }, { port: 6443 }] },
    {
        name: "kube-dns",
        namespace: "kube-system",
        labels: { "k8s-app": "kube-dns" },
        ports: [
            { port: 53, protocol: "UDP" as const },
            { port: 53, protocol: "TCP" as const },
        ],
    },
    // A pod of someone else's, in a namespace without policies.
    { name: "other-pod", namespace: "default", labels: { app: "other" }, role: "both" as const },
] as const;
const POD_CIDRS = ["10.244.0.0/16"];

/** Stack pods by role (the env ones by instance, so two envs stay apart); endpoints by name. */
function roleName(p: Party): string {
    if (p.kind !== "pods") return p.name;
    if (p.namespace === "kube-system" || p.namespace === "default") return p.name;
    const role = p.labels["app.kubernetes.io/name"] ?? p.name;
    return role.startsWith("env-") ? (p.labels["app.kubernetes.io/instance"] ?? role) : role;
}

async function reachabilityOf(recipe: string, extra: Manifest[] = []): Promise<{ r: Reachability; manifests: Manifest[] }> {
    const res = await planToDir({ recipe, target: "kubernetes" }, { outDir: path.join(tmp, recipe) });
    const manifests = [...res.manifests, ...extra];
    return { r: evaluateReachability(manifests, { endpoints: ENDPOINTS, podCidrs: POD_CIDRS }), manifests };
}

/** The README's table for a recipe, between `<!-- reachability:<recipe> -->` and `<!-- /reachability -->`. */
function readmeTable(recipe: string): string {
    const text = fs.readFileSync(README, "utf8");
    const start = text.indexOf(`<!-- reachability:${recipe} -->`);
    assert.ok(start >= 0, `README.md has no reachability table for ${recipe}`);
    const end = text.indexOf("<!-- /reachability -->", start);
    return text.slice(text.indexOf("\n", start) + 1, end).trim();
}

/** Paths that concern the stack: from or to one of its pods (the other pod reaching the internet is not ours). */
const concernsStack = (from: Party, to: Party) => [from, to].some((p) => p.kind === "pods" && p.namespace !== "kube-system" && p.namespace !== "default");

describe("reachability: the rendered policies allow exactly the paths the README lists", () => {
    for (const recipe of [...RECIPE_NAMES, ...MULTI_NODE_RECIPE_NAMES]) {
        test(`${recipe} on kubernetes`, async () => {
            const { r } = await reachabilityOf(recipe);
            const computed = reachabilityTable(r, { name: roleName, include: concernsStack }).trim();
            assert.equal(computed, readmeTable(recipe), `README.md's table for ${recipe} differs from what the policies allow; computed:\n${computed}`);
        });
    }
});

describe("reachability: what the issue promises", () => {
    test("coding env replicas reach nothing but DNS; their router alone reaches them", async () => {
        const { r } = await reachabilityOf("mbpp-whitebox");
        const replica = r.parties.find((p) => roleName(p) === "env-coding-replica")!;
        const out = [...new Set(r.connections.filter((c) => c.from === replica.id).map((c) => c.to))];
        assert.deepEqual(out, ["kube-system/kube-dns"]);
        assert.equal(r.portsBetween(replica.id, "kube-system/kube-dns"), "TCP 53, UDP 53");
        const into = r.connections.filter((c) => c.to === replica.id).map((c) => roleName(r.parties.find((p) => p.id === c.from)!));
        assert.deepEqual(into, ["env-coding-router"]);
        for (const target of ["internet", "metadata", "apiserver"]) assert.equal(r.allows(replica.id, target, 443), false, target);
    });

    test("sandboxes reach only DNS and the ingress; the other pod reaches no pod of the stack", async () => {
        const { r } = await reachabilityOf("opencode-blackbox");
        const sandbox = r.parties.find((p) => roleName(p) === "sandbox")!;
        const out = [...new Set(r.connections.filter((c) => c.from === sandbox.id).map((c) => roleName(r.parties.find((p) => p.id === c.to)!)))].sort();
        assert.deepEqual(out, ["kube-dns", "vllm-ingress"]);
        const strangerReaches = r.connections.filter((c) => c.from === "default/other-pod").map((c) => r.parties.find((p) => p.id === c.to)!);
        assert.deepEqual(
            strangerReaches.filter((p) => p.kind === "pods" && p.namespace !== "kube-system" && p.namespace !== "default").map((p) => p.id),
            [],
        );
    });

    test("an old run's trainer pod left behind is unreachable (the namespace's standing default deny)", async () => {
        const first = await reachabilityOf("opencode-blackbox");
        const job = first.manifests.find((m) => m.kind === "Job")!;
        const oldJob = structuredClone(job) as Record<string, any>;
        oldJob.metadata.name = "train-old-run";
        oldJob.spec.template.metadata.labels = { ...oldJob.spec.template.metadata.labels, "app.kubernetes.io/instance": "train-old-run" };
        const { r } = await reachabilityOf("opencode-blackbox", [oldJob]);
        const old = r.parties.find((p) => p.name === "train-old-run")!;
        assert.ok(old, "the old Job is a pod group");
        assert.deepEqual(
            r.connections.filter((c) => c.to === old.id),
            [],
            "nothing may open a connection to it, vLLM's 8000 included",
        );
    });
});
