// agent-sandbox v0.5.6 -> v1.0.1 on a real kube-apiserver v1.36.3 (the API server fixture; issue 45):
// the real CRDs of both releases (from their Go modules, test/apiserver/build.sh crds/ and
// crds-previous/), applied server-side under one field manager as the cluster stack's Pulumi
// provider applies them. What the API server does with the stored objects: the v1.0.1 CRDs replace
// the v0.5.6 ones in place (v1alpha1 and the conversion webhook gone), the objects stay (same uid,
// same spec) and v1alpha1 is refused after; a CRD with objects still stored as v1alpha1 refuses the
// v1.0.1 CRD until its storedVersions are pruned (agent-sandbox docs/api-migration-guide.md, v1.0.1).
// The whole cluster stack's `pulumi up` across the upgrade is test/stack/engine-cluster-stack.test.ts.
// Skip only with SKIP_APISERVER=1; a failing build fails the test.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { AGENT_SANDBOX_VERSION } from "../../components/config";
import { AGENT_SANDBOX_PREVIOUS_VERSION, agentSandboxCrdFiles } from "../helpers/agent-sandbox-manifest";
import { startApiServer, type ApiServer } from "../helpers/apiserver";
import { scaled, scaledSeconds } from "../helpers/waits";

const skip = process.env.SKIP_APISERVER === "1" ? "SKIP_APISERVER=1" : false;
const NS = "upgrade-test";
const MANAGER = "--field-manager=cluster-stack";
const CRDS = [
    "sandboxes.agents.x-k8s.io",
    "sandboxclaims.extensions.agents.x-k8s.io",
    "sandboxtemplates.extensions.agents.x-k8s.io",
    "sandboxwarmpools.extensions.agents.x-k8s.io",
];
const objects = `
apiVersion: v1
kind: Namespace
metadata: { name: ${NS} }
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: { name: env, namespace: ${NS} }
spec:
  podTemplate:
    spec:
      containers: [{ name: env, image: registry.test/env:1, resources: { requests: { cpu: 100m, memory: 64Mi } } }]
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: { name: env-pool, namespace: ${NS} }
spec:
  replicas: 10
  sandboxTemplateRef: { name: env }
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata: { name: claim-1, namespace: ${NS} }
spec:
  warmPoolRef: { name: env-pool }
`;

describe(`agent-sandbox ${AGENT_SANDBOX_PREVIOUS_VERSION} -> ${AGENT_SANDBOX_VERSION} on a real API server`, { skip, timeout: scaled(20 * 60_000) }, () => {
    let api: ApiServer;
    const apply = (version: string) =>
        Promise.all(agentSandboxCrdFiles(version).map((f) => api.kubectl(["apply", "--server-side", MANAGER, "-f", "-"], fs.readFileSync(f, "utf8"))));
    const crd = async (name: string) => JSON.parse(await api.kubectlOk(["get", "crd", name, "-o", "json"]));
    const get = async (what: string) => JSON.parse(await api.kubectlOk(["get", what, "-n", NS, "-o", "json"]));

    before(async () => {
        api = await startApiServer({ installCrds: false });
        for (const r of await apply(AGENT_SANDBOX_PREVIOUS_VERSION)) assert.equal(r.code, 0, r.stderr);
        // Right after the apply a CRD may have no conditions yet (kubectl wait then errors at once): retried, bounded.
        let waited = await api.kubectl(["wait", "--for=condition=Established", `--timeout=${scaledSeconds(60)}s`, "crd", ...CRDS]);
        for (let i = 0; i < 30 && waited.code !== 0; i++) {
            await new Promise((r) => setTimeout(r, 1000));
            waited = await api.kubectl(["wait", "--for=condition=Established", `--timeout=${scaledSeconds(60)}s`, "crd", ...CRDS]);
        }
        assert.equal(waited.code, 0, `the ${AGENT_SANDBOX_PREVIOUS_VERSION} CRDs Established: ${waited.stderr}`);
        await api.kubectlOk(["apply", "--server-side", "-f", "-"], objects);
    });
    after(async () => {
        await api?.stop();
    });

    it(`on ${AGENT_SANDBOX_PREVIOUS_VERSION}: v1alpha1 served beside v1beta1 through a conversion webhook, objects stored as v1beta1`, async () => {
        for (const name of CRDS) {
            const c = await crd(name);
            assert.deepEqual(
                c.spec.versions.map((v: any) => [v.name, v.served, v.storage]),
                [
                    ["v1beta1", true, true],
                    ["v1alpha1", true, false],
                ],
                name,
            );
            assert.equal(c.spec.conversion.strategy, "Webhook", name);
            assert.deepEqual(c.status.storedVersions, ["v1beta1"], name);
        }
    });

    it(`a CRD with objects stored as v1alpha1 refuses the ${AGENT_SANDBOX_VERSION} CRD until its storedVersions are pruned`, async () => {
        const name = "sandboxclaims.extensions.agents.x-k8s.io";
        // What a cluster that once stored v1alpha1 (agent-sandbox before v0.5) still says.
        await api.kubectlOk(["patch", "crd", name, "--subresource=status", "--type=merge", "-p", '{"status":{"storedVersions":["v1alpha1","v1beta1"]}}']);
        const file = agentSandboxCrdFiles(AGENT_SANDBOX_VERSION).find((f) => f.includes("sandboxclaims"))!;
        const refused = await api.kubectl(["apply", "--server-side", MANAGER, "-f", "-"], fs.readFileSync(file, "utf8"));
        assert.notEqual(refused.code, 0, "refused");
        assert.match(
            refused.stderr,
            /status\.storedVersions\[0\]: Invalid value: "v1alpha1": missing from spec\.versions; v1alpha1 was previously a storage version, and must remain in spec\.versions until a storage migration/,
        );
        assert.deepEqual(
            (await crd(name)).spec.versions.map((v: any) => v.name),
            ["v1beta1", "v1alpha1"],
            "unchanged",
        );
        // The migration's last step (after rewriting every object, which here are v1beta1 already).
        await api.kubectlOk(["patch", "crd", name, "--subresource=status", "--type=merge", "-p", '{"status":{"storedVersions":["v1beta1"]}}']);
    });

    it(`the ${AGENT_SANDBOX_VERSION} CRDs applied over them: updated in place, the objects kept, v1alpha1 refused`, async () => {
        const before = { pool: await get("sandboxwarmpool/env-pool"), template: await get("sandboxtemplate/env"), claim: await get("sandboxclaim/claim-1") };
        for (const r of await apply(AGENT_SANDBOX_VERSION)) assert.equal(r.code, 0, r.stderr);
        for (const name of CRDS) {
            const c = await crd(name);
            assert.deepEqual(
                c.spec.versions.map((v: any) => [v.name, v.served, v.storage]),
                [["v1beta1", true, true]],
                name,
            );
            assert.equal(c.spec.conversion?.strategy ?? "None", "None", `${name}: no conversion webhook`);
            assert.deepEqual(c.status.storedVersions, ["v1beta1"], name);
        }
        for (const [what, was] of [
            ["sandboxwarmpool/env-pool", before.pool],
            ["sandboxtemplate/env", before.template],
            ["sandboxclaim/claim-1", before.claim],
        ] as const) {
            const now = await get(what);
            assert.equal(now.metadata.uid, was.metadata.uid, `${what}: the same object`);
            assert.deepEqual(now.spec, was.spec, `${what}: the same spec`);
        }
        const alpha = await api.kubectl(["get", "sandboxwarmpools.v1alpha1.extensions.agents.x-k8s.io", "-n", NS]);
        assert.notEqual(alpha.code, 0, "v1alpha1 no longer served");
        // A v1alpha1 write is refused too (a client still on it, e.g. k8s-agent-sandbox before 0.5).
        const write = await api.kubectl(
            ["apply", "--server-side", "-f", "-"],
            `apiVersion: extensions.agents.x-k8s.io/v1alpha1\nkind: SandboxClaim\nmetadata: { name: old, namespace: ${NS} }\nspec: { sandboxTemplateRef: { name: env } }\n`,
        );
        assert.notEqual(write.code, 0, "a v1alpha1 claim is refused");
        assert.match(
            write.stderr,
            /no matches for kind "SandboxClaim" in version "extensions\.agents\.x-k8s\.io\/v1alpha1"|the server could not find the requested resource/,
        );
    });
});
