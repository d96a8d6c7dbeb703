// Cluster services on the node fixture (test/node/README.md): objects for the check that the
// controller-manager, scheduler, kube-proxy and CoreDNS do on the node what a cluster's do. The
// workloads are busybox stand-ins (httpd serving its own pod name), not the stack's programs.

/** Python run in the client pod: `get URL` prints the body, `resolve NAME` every address, `connect HOST PORT`. */
export const CLIENT_PY = [
    "import socket, sys, urllib.request",
    "op, arg = sys.argv[1], sys.argv[2]",
    "if op == 'get': print(urllib.request.urlopen(arg, timeout=5).read().decode().strip())",
    "elif op == 'resolve': print(' '.join(sorted({a[4][0] for a in socket.getaddrinfo(arg, None, socket.AF_INET)})))",
    "elif op == 'connect': socket.create_connection((arg, int(sys.argv[3])), 3); print('connected')",
].join("\n");
import { HARDENED_CONTAINER } from "./node";
import type { Manifest } from "./reachability";

export interface ClusterCheck {
    readonly namespace: string;
    readonly objects: readonly Manifest[];
    /** A Deployment behind a ClusterIP Service (port 80 -> 8080): the scheduler places its pods, kube-proxy balances. */
    readonly web: { readonly deployment: string; readonly service: string; readonly replicas: number; readonly port: number };
    /** A StatefulSet behind a headless Service: each pod has a DNS name `<pod>.<service>.<ns>.svc.<domain>`. */
    readonly stateful: { readonly statefulSet: string; readonly service: string; readonly replicas: number; readonly port: number };
    /**
     * A client pod on the sandbox runtime image (python3 on Debian's glibc, so names resolve as real
     * programs resolve them: busybox-static's getaddrinfo crashes), its default ServiceAccount token
     * mounted (which needs the controller-manager's kube-root-ca.crt).
     */
    readonly client: string;
}

/** busybox httpd on `port`, answering `GET /` with the pod's name (downward API). */
function httpdContainer(image: string, port: number) {
    return {
        name: "httpd",
        image,
        imagePullPolicy: "Never",
        command: ["sh", "-c", `mkdir -p /tmp/www && printf '%s\\n' "$POD_NAME" > /tmp/www/index.html && exec httpd -f -p ${port} -h /tmp/www`],
        env: [{ name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }],
        ports: [{ name: "http", containerPort: port }],
        readinessProbe: { httpGet: { path: "/", port }, periodSeconds: 1 },
        securityContext: HARDENED_CONTAINER,
        volumeMounts: [{ name: "tmp", mountPath: "/tmp" }],
    };
}

export function clusterCheckObjects(busyboxImage: string, clientImage: string, namespace = "arl-cluster-check"): ClusterCheck {
    const port = 8080;
    const podSecurity = { runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534 };
    const tmp = [{ name: "tmp", emptyDir: { sizeLimit: "8Mi" } }];
    const web = { deployment: "web", service: "web", replicas: 2, port };
    const stateful = { statefulSet: "echo", service: "echo-pods", replicas: 2, port };
    const client = "client";
    const objects: Manifest[] = [
        { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } },
        {
            apiVersion: "apps/v1",
            kind: "Deployment",
            metadata: { name: web.deployment, namespace },
            spec: {
                replicas: web.replicas,
                selector: { matchLabels: { app: web.deployment } },
                // No nodeName: the scheduler places these pods.
                template: {
                    metadata: { labels: { app: web.deployment } },
                    spec: { securityContext: podSecurity, containers: [httpdContainer(busyboxImage, port)], volumes: tmp },
                },
            },
        },
        {
            apiVersion: "v1",
            kind: "Service",
            metadata: { name: web.service, namespace },
            spec: { selector: { app: web.deployment }, ports: [{ name: "http", port: 80, targetPort: "http" }] },
        },
        {
            apiVersion: "v1",
            kind: "Service",
            metadata: { name: stateful.service, namespace },
            spec: { clusterIP: "None", selector: { app: stateful.statefulSet }, ports: [{ name: "http", port, targetPort: "http" }] },
        },
        {
            apiVersion: "apps/v1",
            kind: "StatefulSet",
            metadata: { name: stateful.statefulSet, namespace },
            spec: {
                serviceName: stateful.service,
                replicas: stateful.replicas,
                podManagementPolicy: "Parallel",
                selector: { matchLabels: { app: stateful.statefulSet } },
                template: {
                    metadata: { labels: { app: stateful.statefulSet } },
                    spec: { securityContext: podSecurity, containers: [httpdContainer(busyboxImage, port)], volumes: tmp },
                },
            },
        },
        {
            apiVersion: "v1",
            kind: "Pod",
            metadata: { name: client, namespace },
            spec: {
                securityContext: podSecurity,
                containers: [
                    { name: "client", image: clientImage, imagePullPolicy: "Never", command: ["sleep", "2147483647"], securityContext: HARDENED_CONTAINER },
                ],
            },
        },
    ];
    return { namespace, objects, web, stateful, client };
}
