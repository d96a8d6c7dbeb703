/**
 * The vLLM ingress on Kubernetes: nginx.conf in a ConfigMap, the keys only in a Secret
 * (mounted as a directory, never env, never the ConfigMap), a hardened Deployment for PSA
 * `restricted`, a PodDisruptionBudget, the Service (the platform's only LoadBalancer when
 * exposure is loadbalancer), a Gateway API HTTPRoute for exposure httproute, and a
 * NetworkPolicy: in from the sandboxes (or anywhere when exposed), out only to vLLM and DNS.
 *
 * The object bodies are pure functions of the description (exported for tests); the
 * resources are registered by `registerKubernetesIngress`.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { waitFor } from "./wait";
import { imagePullPolicy } from "../shared/images";
import { CHECKSUM_ANNOTATION } from "./model";
import type { IngressDescription } from "./resolve";
import { registerKubernetesVerifier, verifierEgressRule } from "./verifier-kubernetes";
import {
    clusterDnsEgress,
    hardenedServicePod,
    metricsSidecarContainer,
    metricsSidecarVolumes,
    NAMESPACE_NAME_LABEL,
    pullSecretRefs,
    restrictedContainerSecurity,
    scrapeIngressRule,
    tcpProbes,
} from "../shared/kubernetes";

/** Gateway API group/version of HTTPRoute (v1 since Gateway API v1.0). */
export const HTTPROUTE_API_VERSION = "gateway.networking.k8s.io/v1";

/** Labels on every object of the ingress (the pod labels are the selector and come from podLabels()). */
function objectLabels(): Record<string, string> {
    return { "app.kubernetes.io/part-of": "agent-rl-infra", "app.kubernetes.io/component": "vllm-ingress" };
}

/** The Service's ports: the listen port, plus 443 on a LoadBalancer for a public https://<host> (names.ts). */
export function ingressServicePorts(d: IngressDescription): k8s.types.input.core.v1.ServicePort[] {
    const ports: k8s.types.input.core.v1.ServicePort[] = [{ name: d.portName, port: d.port, targetPort: d.portName, protocol: "TCP" }];
    if (d.exposure === "loadbalancer" && d.publicPort !== d.port)
        ports.unshift({ name: "public", port: d.publicPort, targetPort: d.portName, protocol: "TCP" });
    return ports;
}

/** The Service body: ClusterIP, or LoadBalancer for exposure loadbalancer; it selects only the proxy pods. */
export function ingressServiceSpec(d: IngressDescription): k8s.types.input.core.v1.ServiceSpec {
    return {
        type: d.exposure === "loadbalancer" ? "LoadBalancer" : "ClusterIP",
        selector: { ...d.podLabels },
        ports: ingressServicePorts(d),
    };
}

/** The pod template body (no checksum: added by the caller from the keys). */
export function ingressPodSpec(d: IngressDescription): k8s.types.input.core.v1.PodSpec {
    const sec = d.security;
    const volumes: k8s.types.input.core.v1.Volume[] = [
        { name: "config", configMap: { name: d.names.config, defaultMode: 0o444 } },
        // 0440 + fsGroup: readable by the nginx group only. A directory mount (not subPath), so a rotated Secret reaches the file.
        { name: "keys", secret: { secretName: d.names.keysSecret, defaultMode: 0o440 } },
        { name: "runtime", emptyDir: { sizeLimit: sec.runtimeSizeLimit } },
    ];
    const mounts: k8s.types.input.core.v1.VolumeMount[] = [
        { name: "config", mountPath: d.paths.configDir, readOnly: true },
        { name: "keys", mountPath: d.paths.keysDir, readOnly: true },
        { name: "runtime", mountPath: d.paths.runtimeDir },
    ];
    if (d.tls.proxyTerminates && (d.tls.mode === "secret" || d.tls.mode === "cert-manager")) {
        volumes.push({
            name: "tls",
            secret: {
                secretName: d.tls.secretName!,
                defaultMode: 0o440,
                items: [
                    { key: "tls.crt", path: "tls.crt" },
                    { key: "tls.key", path: "tls.key" },
                ],
            },
        });
        mounts.push({ name: "tls", mountPath: d.paths.tlsDir, readOnly: true });
    }
    // observability: the JSON access log file on an emptyDir the proxy writes and mtail reads; the
    // exporter and mtail beside nginx, their program from the metrics ConfigMap.
    const m = d.metrics;
    const sidecars = m ? [m.exporter, m.log] : [];
    if (m) {
        volumes.push({ name: "access-log", emptyDir: { sizeLimit: m.accessLog.sizeLimit } }, ...metricsSidecarVolumes(sidecars, m.configMap));
        mounts.push({ name: "access-log", mountPath: m.accessLog.dir });
    }
    // No HTTP probe: every allow-listed path needs a key or reaches vLLM; a TCP check proves nginx accepts connections.
    return {
        // The proxy never talks to the API server; replicas spread over nodes.
        ...hardenedServicePod(sec, d.podLabels),
        ...pullSecretRefs(d.imagePullSecrets),
        containers: [
            {
                name: "nginx",
                image: d.image,
                imagePullPolicy: imagePullPolicy(d.image),
                command: [...d.command],
                ports: [{ name: d.portName, containerPort: d.port, protocol: "TCP" }],
                resources: { requests: { ...d.resources.requests }, limits: { ...d.resources.limits } },
                securityContext: restrictedContainerSecurity(sec),
                ...tcpProbes(d.portName),
                volumeMounts: mounts,
            },
            ...(m
                ? [metricsSidecarContainer(m.exporter), metricsSidecarContainer(m.log, [{ name: "access-log", mountPath: m.accessLog.dir, readOnly: true }])]
                : []),
        ],
        volumes,
    };
}

/** The Deployment body; `checksum` (of config + keys, not secret) on the pod template rolls the pods when either changes. */
export function ingressDeploymentSpec(d: IngressDescription, checksum: pulumi.Input<string>): k8s.types.input.apps.v1.DeploymentSpec {
    return {
        replicas: d.replicas,
        selector: { matchLabels: { ...d.podLabels } },
        // Never below the current capacity while rolling (a key rotation rolls every replica).
        strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
        template: {
            metadata: {
                labels: { ...d.podLabels, ...d.metrics?.stackLabels },
                annotations: { ...(d.metrics?.podAnnotations["vllm-ingress"] ?? {}), [CHECKSUM_ANNOTATION]: checksum },
            },
            spec: ingressPodSpec(d),
        },
    };
}

/**
 * The NetworkPolicy of the proxy pods. In: the listen port only, from the sandboxes namespace
 * (exposure cluster) or from anywhere (loadbalancer / httproute: the load balancer or the
 * Gateway's data plane, wherever it runs; the keys still guard every route). Out: the vLLM pods
 * on vLLM's port (pod port: NetworkPolicy sees traffic after the Service's DNAT) and cluster DNS.
 */
export function ingressNetworkPolicySpec(d: IngressDescription): k8s.types.input.networking.v1.NetworkPolicySpec {
    const port = [{ protocol: "TCP", port: d.port }];
    return {
        podSelector: { matchLabels: { ...d.podLabels } },
        policyTypes: ["Ingress", "Egress"],
        ingress: [
            ...(d.exposure === "cluster"
                ? [{ from: [{ namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: d.clientNamespace } } }], ports: port }]
                : [{ ports: port }]),
            // observability: the scraper on the exporter's and mtail's ports alone.
            ...(d.metrics
                ? [
                      scrapeIngressRule(
                          d.metrics.scraper,
                          d.metrics.scraped.flatMap((s) => s.ports),
                      ),
                  ]
                : []),
        ],
        egress: [
            clusterDnsEgress(d.dns),
            {
                to: [
                    {
                        namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: d.upstream.namespace } },
                        podSelector: { matchLabels: { ...d.upstream.podLabels } },
                    },
                ],
                ports: [{ protocol: "TCP", port: d.upstream.port }],
            },
            // agent-sandbox pools: the per-rollout key verifier on its verify port.
            ...(d.rolloutKeys ? [verifierEgressRule(d, d.rolloutKeys)] : []),
        ],
    };
}

/** The PodDisruptionBudget body (only with more than one replica: minAvailable 1 of 1 would block every node drain). */
export function ingressDisruptionBudgetSpec(d: IngressDescription): k8s.types.input.policy.v1.PodDisruptionBudgetSpec {
    return { minAvailable: 1, selector: { matchLabels: { ...d.podLabels } } };
}

/**
 * The HTTPRoute body: the Gateway listener terminates TLS for `host` and forwards only the
 * allow-listed paths (exact matches; the proxy checks them again) to the proxy Service.
 */
export function ingressHttpRouteSpec(d: IngressDescription): Record<string, unknown> {
    const g = d.gateway!;
    return {
        parentRefs: [
            {
                group: "gateway.networking.k8s.io",
                kind: "Gateway",
                name: g.name,
                namespace: g.namespace,
                ...(g.sectionName !== undefined ? { sectionName: g.sectionName } : {}),
            },
        ],
        hostnames: [d.host!],
        rules: [
            {
                // Exact path matches are Core in Gateway API; method matching is only Extended, so nginx checks methods.
                matches: d.routes.map((r) => ({ path: { type: "Exact", value: r.path } })),
                backendRefs: [{ group: "", kind: "Service", name: d.names.service, port: d.port }],
            },
        ],
    };
}

export interface KubernetesIngressArgs {
    readonly description: IngressDescription;
    /** Namespace of every object (the Platform's ingress namespace Output, so the objects wait for it). */
    readonly namespace: pulumi.Input<string>;
    /** The rendered keys file (secret). */
    readonly keysText: pulumi.Output<string>;
    /** Checksum of config + keys (not secret: a keyed hash, see vllm-ingress.ts). */
    readonly checksum: pulumi.Output<string>;
    /** Resolves to what serves vLLM; the Deployment waits for it (nginx resolves the vLLM Service name at start). */
    readonly upstreamReady?: Promise<pulumi.Resource | undefined>;
    /** The verifier's admin key (secret; required when description.rolloutKeys is set). */
    readonly rolloutAdminKey?: pulumi.Output<string>;
}

export interface KubernetesIngressResources {
    readonly service: k8s.core.v1.Service;
    readonly deployment: k8s.apps.v1.Deployment;
}

/** Registers the ingress's Kubernetes objects as children of `parent`, named `${name}-<role>`. */
export function registerKubernetesIngress(name: string, args: KubernetesIngressArgs, parent: pulumi.Resource): KubernetesIngressResources {
    const d = args.description;
    const child = { parent };
    const labels = objectLabels();
    const meta = (objName: string) => ({ name: objName, namespace: args.namespace, labels });

    const config = new k8s.core.v1.ConfigMap(`${name}-config`, { metadata: meta(d.names.config), data: { "nginx.conf": d.configText } }, child);
    // observability: mtail's program, mounted by every proxy replica's log-metrics sidecar.
    const m = d.metrics;
    const metricsConfig = m
        ? new k8s.core.v1.ConfigMap(
              `${name}-metrics`,
              { metadata: meta(m.configMap), data: Object.fromEntries([m.exporter, m.log].flatMap((s) => s.files).map((f) => [f.file, f.text])) },
              child,
          )
        : undefined;
    const keys = new k8s.core.v1.Secret(
        `${name}-keys`,
        { metadata: meta(d.names.keysSecret), type: "Opaque", stringData: { [d.paths.keysFileName]: pulumi.secret(args.keysText) } },
        child,
    );
    // Lock the pods down before they exist.
    const policy = new k8s.networking.v1.NetworkPolicy(`${name}-network`, { metadata: meta(d.names.networkPolicy), spec: ingressNetworkPolicySpec(d) }, child);
    // tls.mode cert-manager: the Certificate for the proxy's Service names (and the public host),
    // written by cert-manager into the Secret the pods mount; the pods start once it exists.
    // agent-sandbox pools: the per-rollout key verifier; nginx resolves its Service name at start, so it waits for it.
    const verifier = d.rolloutKeys && args.rolloutAdminKey ? registerKubernetesVerifier(name, d, d.rolloutKeys, args.rolloutAdminKey, meta, parent) : [];
    if (d.rolloutKeys && !args.rolloutAdminKey) throw new pulumi.RunError(`VllmIngress ${name}: the rollout key verifier needs its admin key`);
    const cert = d.tls.certificate;
    const certificate = cert
        ? new k8s.apiextensions.CustomResource(
              `${name}-certificate`,
              {
                  apiVersion: "cert-manager.io/v1",
                  kind: "Certificate",
                  metadata: meta(cert.name),
                  spec: {
                      secretName: d.tls.secretName,
                      dnsNames: [...cert.dnsNames],
                      issuerRef: { name: cert.issuer.name, kind: cert.issuer.kind, group: cert.issuer.group },
                      privateKey: { algorithm: "ECDSA", size: 256, rotationPolicy: "Always" },
                      usages: ["digital signature", "key encipherment", "server auth"],
                  },
              },
              child,
          )
        : undefined;
    const deployment = new k8s.apps.v1.Deployment(
        `${name}-deployment`,
        { metadata: meta(d.names.deployment), spec: ingressDeploymentSpec(d, args.checksum) },
        {
            ...child,
            dependsOn: waitFor(args.upstreamReady, [
                config,
                keys,
                policy,
                ...verifier,
                ...(certificate ? [certificate] : []),
                ...(metricsConfig ? [metricsConfig] : []),
            ]),
        },
    );
    if (d.replicas > 1) {
        new k8s.policy.v1.PodDisruptionBudget(
            `${name}-disruption-budget`,
            { metadata: meta(d.names.disruptionBudget), spec: ingressDisruptionBudgetSpec(d) },
            child,
        );
    }
    const service = new k8s.core.v1.Service(`${name}-service`, { metadata: meta(d.names.service), spec: ingressServiceSpec(d) }, child);
    if (d.exposure === "httproute") {
        new k8s.apiextensions.CustomResource(
            `${name}-route`,
            { apiVersion: HTTPROUTE_API_VERSION, kind: "HTTPRoute", metadata: meta(d.names.httpRoute), spec: ingressHttpRouteSpec(d) },
            { ...child, dependsOn: [service] },
        );
    }
    return { service, deployment };
}
