// What the node test deploys, from the project's own component functions (not copies):
//   objects  namespaces, the forwarder's key Secret, default ServiceAccounts (the pod may come
//            before the controller-manager makes them), the sandbox pool's pod (sandboxTemplateSpec's
//            podTemplate, both containers on the fixture's sandbox-runtime image) and two busybox
//            clients: a trainer stand-in with the trainer's pod labels in the training namespace,
//            and a pod without them in the same namespace;
//   policy   the pool's NetworkPolicy (sandboxNetworkPolicySpec).
// Sizing: the opencode-blackbox recipe with a named test-sizing override (the node is this
// 2-CPU machine; the recipe asks 2 CPU / 4Gi per sandbox).
import { HARDENED_CONTAINER } from "./node";
import { platformNames, podLabels } from "../../components/config/names";
import { resolveSandboxPool, sandboxNetworkPolicySpec, sandboxTemplateSpec } from "../../components/sandbox";
import { SANDBOX_KEY_SECRET_KEY } from "../../components/sandbox/model";
import { parseWithTestImages } from "./config";

/** The named test-sizing override: a sandbox's requests shrunk to fit the test node. */
export const NODE_TEST_SIZING = { sandboxes: { cpu: "250m", memory: "256Mi" } } as const;

export interface NodeSandboxRender {
    /** A v1 List for `kubectl apply -f -`. */
    readonly objects: unknown;
    /** The pool's own NetworkPolicy. */
    readonly policy: unknown;
    readonly sandboxNamespace: string;
    readonly trainerNamespace: string;
    readonly sandboxPod: string;
    readonly sandboxContainer: string;
    readonly port: number;
    readonly healthPath: string;
    readonly runAsUser: number;
    readonly policyName: string;
}

export function renderNodeSandbox(nodeName: string, runtimeImage: string, busyboxImage: string): NodeSandboxRender {
    const c = parseWithTestImages(
        { recipe: "opencode-blackbox", runId: "node", target: { kind: "kubernetes", context: "node-fixture" }, ...NODE_TEST_SIZING },
        "test",
    );
    const names = platformNames(c);
    const d = resolveSandboxPool(c, names);
    const ingress = { namespace: names.namespaces.ingress, podLabels: podLabels("vllm-ingress", names.ingress.deployment), port: 8080 };
    const trainer = {
        serviceAccount: names.training.serviceAccount,
        namespace: names.namespaces.training,
        podLabels: podLabels("trainer", names.training.job),
    };

    const podTemplate = (sandboxTemplateSpec(d) as any).podTemplate;
    const onNodeImage = (ctr: any) => ({ ...ctr, image: runtimeImage, imagePullPolicy: "Never" });
    const sandboxPod = {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "sandbox-node", namespace: d.names.namespace, labels: podTemplate.metadata.labels },
        spec: {
            ...podTemplate.spec,
            nodeName,
            initContainers: podTemplate.spec.initContainers.map(onNodeImage),
            containers: podTemplate.spec.containers.map(onNodeImage),
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
                    securityContext: HARDENED_CONTAINER,
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
            stringData: { [SANDBOX_KEY_SECRET_KEY]: "node-fixture-placeholder-key" },
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
    const runtime = podTemplate.spec.containers.find((ctr: any) => ctr.readinessProbe !== undefined) ?? podTemplate.spec.containers[0];
    return {
        objects: { apiVersion: "v1", kind: "List", items: objects },
        policy,
        sandboxNamespace: d.names.namespace,
        trainerNamespace: trainer.namespace,
        sandboxPod: sandboxPod.metadata.name,
        sandboxContainer: runtime.name,
        port: d.port,
        healthPath: d.runtime.healthPath,
        runAsUser: d.security.runAsUser,
        policyName: d.names.networkPolicy,
    };
}
