// Renders what the node spike deploys, from the project's own component functions (not copies):
//   objects.json  namespaces, the forwarder's key Secret, default ServiceAccounts (no
//                 controller-manager here), the sandbox pool's pod (sandboxTemplateSpec's
//                 podTemplate, both containers on the spike's image) and two busybox clients: a
//                 trainer stand-in with the trainer's pod labels in the training namespace, and a
//                 pod without them in the same namespace;
//   policy.json   the pool's NetworkPolicy (sandboxNetworkPolicySpec);
//   names.env     the names the shell script needs.
// Sizing: the opencode-blackbox recipe with a named test-sizing override (the node is this 2-CPU
// machine; the recipe asks 2 CPU / 4Gi per sandbox).
// usage: npx tsx test/node/spike/render-sandbox.ts OUT_DIR NODE_NAME RUNTIME_IMAGE BUSYBOX_IMAGE
import * as fs from "node:fs";
import * as path from "node:path";
import { platformNames, podLabels } from "../../../components/config/names";
import { resolveSandboxPool, sandboxNetworkPolicySpec, sandboxTemplateSpec } from "../../../components/sandbox";
import { SANDBOX_KEY_SECRET_KEY } from "../../../components/sandbox/describe";
import { parseWithTestImages } from "../../helpers/config";

const TEST_SIZING = { sandboxes: { cpu: "250m", memory: "256Mi" } };

const [outDir, nodeName, runtimeImage, busyboxImage] = process.argv.slice(2);
if (!outDir || !nodeName || !runtimeImage || !busyboxImage) {
    console.error("usage: render-sandbox.ts OUT_DIR NODE_NAME RUNTIME_IMAGE BUSYBOX_IMAGE");
    process.exit(2);
}

const c = parseWithTestImages({ recipe: "opencode-blackbox", runId: "spike", target: { kind: "kubernetes", context: "node-spike" }, ...TEST_SIZING }, "test");
const names = platformNames(c);
const d = resolveSandboxPool(c, names);
const ingress = { namespace: names.namespaces.ingress, podLabels: podLabels("vllm-ingress", names.ingress.deployment), port: 8080 };
const trainer = { serviceAccount: names.training.serviceAccount, namespace: names.namespaces.training, podLabels: podLabels("trainer", names.training.job) };

const podTemplate = (sandboxTemplateSpec(d) as any).podTemplate;
const onSpikeImage = (ctr: any) => ({ ...ctr, image: runtimeImage, imagePullPolicy: "Never" });
const sandboxPod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "sandbox-spike", namespace: d.names.namespace, labels: podTemplate.metadata.labels },
    spec: {
        ...podTemplate.spec,
        nodeName,
        initContainers: podTemplate.spec.initContainers.map(onSpikeImage),
        containers: podTemplate.spec.containers.map(onSpikeImage),
    },
};
const client = (name: string, labels: Record<string, string>) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: trainer.namespace, labels },
    spec: {
        nodeName,
        automountServiceAccountToken: false,
        enableServiceLinks: false,
        terminationGracePeriodSeconds: 1,
        securityContext: { runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534 },
        containers: [
            {
                name: "client",
                image: busyboxImage,
                imagePullPolicy: "Never",
                command: ["/bin/sleep", "2147483647"],
                securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
            },
        ],
    },
});
const namespaces = [d.names.namespace, trainer.namespace];
const objects = [
    ...namespaces.map((n) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name: n } })),
    ...namespaces.map((n) => ({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "default", namespace: n } })),
    {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: d.names.keySecret, namespace: d.names.namespace },
        stringData: { [SANDBOX_KEY_SECRET_KEY]: "node-spike-placeholder-key" },
    },
    sandboxPod,
    client("trainer-standin", trainer.podLabels),
    client("not-trainer", { app: "not-trainer" }),
];
const policy = {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: d.names.networkPolicy, namespace: d.names.namespace },
    spec: sandboxNetworkPolicySpec(d, ingress, trainer),
};
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, "objects.json"), JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }, null, 2));
fs.writeFileSync(path.join(outDir, "policy.json"), JSON.stringify(policy, null, 2));
fs.writeFileSync(
    path.join(outDir, "names.env"),
    [
        `SANDBOX_NS=${d.names.namespace}`,
        `TRAINER_NS=${trainer.namespace}`,
        `SANDBOX_PORT=${d.port}`,
        `HEALTH_PATH=${d.runtime.healthPath}`,
        `POLICY_NAME=${d.names.networkPolicy}`,
        `RUN_AS_USER=${d.security.runAsUser}`,
        "",
    ].join("\n"),
);
