/**
 * agent-sandbox v0.5.6 as one manifest for a cluster stack's agentSandbox.manifest in the engine
 * tests: the API server fixture's CRDs (from the Go module) and a controller Deployment that is a
 * stand-in (kwok runs no container), since the release manifest is not reachable here.
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { fixtureCacheDir } from "./apiserver";

/** agent-sandbox v0.5.6 as one manifest: the fixture's CRDs (from the Go module) and a controller Deployment. */
export function agentSandboxManifest(dir: string): string {
    const crdDir = path.join(fixtureCacheDir(), "crds");
    const crds = fs
        .readdirSync(crdDir)
        .filter((f) => f.startsWith("agent-sandbox-v0.5.6."))
        .map((f) => fs.readFileSync(path.join(crdDir, f), "utf8"));
    assert.equal(crds.length, 4, `the fixture's agent-sandbox CRDs in ${crdDir}`);
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
          image: registry.test/agent-sandbox-controller:v0.5.6
          args: ["--extensions"]
`;
    const file = path.join(dir, "agent-sandbox-v0.5.6.yaml");
    fs.writeFileSync(file, [...crds.map((c) => c.replace(/^---\n/, "")), controller].join("\n---\n"));
    return file;
}
