/**
 * agent-sandbox as one manifest for a cluster stack's agentSandbox.manifest in the engine tests:
 * the API server fixture's CRDs (from the Go module) and a controller Deployment that is a
 * stand-in (kwok runs no container), since the release manifest is not reachable here.
 *
 * Two releases: the one the stack installs (AGENT_SANDBOX_VERSION, the fixture's crds/) and the one
 * a cluster stack upgrades from (v0.5.6, the fixture's crds-previous/). The v0.5.6 manifest also
 * carries what that release's k8s/controller.yaml has and v1.0.0 dropped with the conversion
 * webhook: the webhook Service and the Role/RoleBinding for its certificate Secret (the Secret
 * itself is written by the controller at run time, never by the manifest).
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { AGENT_SANDBOX_VERSION } from "../../components/config";
import { fixtureCacheDir } from "./apiserver";

/** The release a cluster stack deployed before v1.0 runs (test/apiserver/build.sh AGENT_SANDBOX_PREVIOUS_VERSION). */
export const AGENT_SANDBOX_PREVIOUS_VERSION = "v0.5.6";

/** The fixture's agent-sandbox CRD files of one release (paths). */
export function agentSandboxCrdFiles(version: string = AGENT_SANDBOX_VERSION): string[] {
    const sub = version === AGENT_SANDBOX_VERSION ? "crds" : version === AGENT_SANDBOX_PREVIOUS_VERSION ? "crds-previous" : undefined;
    assert.ok(sub, `the API server fixture has the agent-sandbox CRDs of ${AGENT_SANDBOX_VERSION} and ${AGENT_SANDBOX_PREVIOUS_VERSION}, not ${version}`);
    const crdDir = path.join(fixtureCacheDir(), sub);
    const files = fs
        .readdirSync(crdDir)
        .filter((f) => f.startsWith(`agent-sandbox-${version}.`))
        .map((f) => path.join(crdDir, f));
    assert.equal(files.length, 4, `the fixture's agent-sandbox ${version} CRDs in ${crdDir} (rebuild it: bash test/apiserver/build.sh)`);
    return files;
}

/** agent-sandbox as one manifest: the fixture's CRDs (from the Go module) and a controller Deployment. */
export function agentSandboxManifest(dir: string, version: string = AGENT_SANDBOX_VERSION): string {
    const crds = agentSandboxCrdFiles(version).map((f) => fs.readFileSync(f, "utf8"));
    const controller = `apiVersion: v1
kind: Namespace
metadata:
  name: agent-sandbox-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: agent-sandbox-controller
  namespace: agent-sandbox-system
  labels: { app.kubernetes.io/name: agent-sandbox }
spec:
  replicas: 1
  selector: { matchLabels: { app.kubernetes.io/name: agent-sandbox } }
  template:
    metadata: { labels: { app.kubernetes.io/name: agent-sandbox } }
    spec:
      containers:
        - name: controller
          image: registry.test/agent-sandbox-controller:${version}
          args: ["--extensions"]
`;
    // agent-sandbox v0.5.6 k8s/controller.yaml: what v1.0.0 removed with the conversion webhook.
    const webhook = `apiVersion: v1
kind: Service
metadata:
  name: agent-sandbox-webhook-service
  namespace: agent-sandbox-system
spec:
  selector: { app: agent-sandbox-controller }
  ports: [{ name: webhook, port: 443, targetPort: 9443, protocol: TCP }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: agent-sandbox-controller
  namespace: agent-sandbox-system
rules:
  - { apiGroups: [""], resources: [secrets], verbs: [create] }
  - { apiGroups: [""], resources: [secrets], resourceNames: [agent-sandbox-webhook-certs], verbs: [get, patch, update] }
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: agent-sandbox-controller
  namespace: agent-sandbox-system
subjects: [{ kind: ServiceAccount, name: agent-sandbox-controller, namespace: agent-sandbox-system }]
roleRef: { kind: Role, name: agent-sandbox-controller, apiGroup: rbac.authorization.k8s.io }
`;
    const file = path.join(dir, `agent-sandbox-${version}.yaml`);
    const parts = [...crds.map((c) => c.replace(/^---\n/, "")), controller, ...(version === AGENT_SANDBOX_PREVIOUS_VERSION ? [webhook] : [])];
    fs.writeFileSync(file, parts.join("\n---\n"));
    return file;
}
