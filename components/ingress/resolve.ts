/**
 * The target-neutral description of the vLLM ingress: every decision (ports, paths, the
 * rendered nginx config, TLS source, exposure, security settings, peers, names) is made
 * once, from the resolved config and the names, each in the module that owns it (proxy-settings.ts,
 * tls.ts, metrics.ts, model.ts's fixed facts); this file lists them. `kubernetes.ts` and `docker.ts`
 * only translate it. Pure: no Pulumi imports, no keys (those are secrets and arrive as Outputs).
 */
import { dnsEgressFor } from "../config/dns";
import { dnsName, podLabels, vllmPodLabels } from "../config/names";
import { ConfigError } from "../config/errors";
import type { DockerMetricsTarget } from "../shared/docker-metrics";
import type { DnsEgress } from "../shared/kubernetes";
import type { MetricsLinks } from "../shared/metrics-pods";
import { ingressMetrics, rotatingAccessLogCommand, type IngressMetrics } from "./metrics";
import {
    INGRESS_PATHS,
    INGRESS_RESOURCES,
    INGRESS_SECURITY,
    PUBLIC_HTTPS_PORT,
    type IngressConfig,
    type IngressNames,
    type IngressPeerPods,
    type IngressResources,
    type IngressSecurity,
    type IngressTls,
} from "./model";
import { allowedRoutes, renderNginxConfig, validateProxySettings, type ResolvedProxySettings, type Route } from "./nginx";
import { ingressProxySettings } from "./proxy-settings";
import { ingressTls } from "./tls";
import { rolloutKeyVerifier, type RolloutKeyVerifier } from "./verifier";

export interface IngressDescription {
    readonly target: "kubernetes" | "docker";
    /** Kubernetes: where the pods' DNS queries may go (target.dns, resolved by the config). */
    readonly dns: DnsEgress;
    /** Kubernetes: image pull Secrets every pod (and ServiceAccount) references; the Platform sets them when the stack has registryAuth. @default [] */
    readonly imagePullSecrets?: readonly string[];

    /** The proxy settings with every default filled in; the config below is rendered from exactly these. */
    readonly settings: ResolvedProxySettings;
    /** The rendered nginx.conf (no keys: it includes settings.keysFile). */
    readonly configText: string;
    /** The allow-listed routes (for docs, the HTTPRoute matches and the plan). */
    readonly routes: readonly Route[];
    /** Names of the Bearer keys nginx accepts, in config order (each generated unless supplied). */
    readonly keyNames: readonly string[];
    /**
     * The shared key the sandboxes use (ingress.sandboxKey), where the sandboxes hold one. Absent where they take
     * per-rollout keys (rolloutKeys): nginx then accepts only `rk1.` keys and the operators' keys, and nothing renders
     * the shared one (docs/design/rollout-keys.md). @default undefined
     */
    readonly sandboxKeyName?: string;
    /** The ingress.sandboxKey name left out of keyNames because the sandboxes take per-rollout keys. @default undefined */
    readonly retiredSandboxKey?: string;
    /** nginx's listen port (8443 with TLS at the proxy, else 8080). */
    readonly port: number;
    /** Port name on the container and the Service ("https" / "http"). */
    readonly portName: "https" | "http";
    /** Public port of the LoadBalancer / the Docker host (443 when a public host is exposed). */
    readonly publicPort: number;
    readonly exposure: "cluster" | "loadbalancer" | "httproute";
    /** Public host name (exposure loadbalancer/httproute). */
    readonly host?: string;
    /** Gateway API parent (exposure httproute). */
    readonly gateway?: { readonly name: string; readonly namespace: string; readonly sectionName?: string };
    readonly tls: IngressTls;
    readonly urls: {
        /** What sandboxes use (names.ingress.sandboxUrl). */
        readonly sandbox: string;
        /** The in-cluster / in-network address of the proxy. */
        readonly internal: string;
    };
    /** Proxy replicas (Kubernetes; Docker runs one container). */
    readonly replicas: number;
    /** Per-key rate limit across all replicas: limit_req counts per nginx instance, not cluster-wide. */
    readonly effectiveRateLimitPerSecond: number;
    /** Pinned nginx image (unprivileged build). */
    readonly image: string;
    /** The container's full command line. */
    readonly command: readonly string[];
    readonly paths: typeof INGRESS_PATHS;
    readonly security: IngressSecurity;
    readonly resources: IngressResources;
    /** THE pod labels and selector of the proxy (the training node's NetworkPolicy admits exactly these). */
    readonly podLabels: Readonly<Record<string, string>>;
    /** What the SandboxPool needs to let its sandboxes reach the proxy (its egress rule). */
    readonly peer: IngressPeerPods;
    /** The vLLM pods the proxy may reach (NetworkPolicy egress) and its host:port. */
    readonly upstream: IngressPeerPods & { readonly address: string };
    /** Namespace whose pods may call the proxy when it is only in-cluster (exposure cluster). */
    readonly clientNamespace: string;
    /** Docker host address the listen port is published on: loopback unless exposed. */
    readonly dockerPublishIp: string;
    readonly names: {
        readonly namespace: string;
        readonly deployment: string;
        readonly service: string;
        readonly keysSecret: string;
        readonly config: string;
        readonly networkPolicy: string;
        readonly disruptionBudget: string;
        readonly httpRoute: string;
        /** Docker: the nginx container (= deployment, the DNS name sandboxes use). */
        readonly container: string;
        /** Docker: the never-started container the config/keys are uploaded through (see docker.ts). */
        readonly filesContainer: string;
        readonly configVolume: string;
        readonly keysVolume: string;
        readonly trainingNetwork: string;
    };
    /** observability.enabled: the exporter and mtail beside each proxy, and who may scrape them; absent when off. */
    readonly metrics?: IngressMetrics;
    /** Docker, observability.enabled: the metrics ports its containers publish on the host's loopback (set by the Platform, platform/docker-metrics.ts). @default [] */
    readonly dockerMetrics?: readonly DockerMetricsTarget[];
    /** Kubernetes with an agent-sandbox pool: the per-rollout key verifier nginx asks (verifier.ts); absent elsewhere. */
    readonly rolloutKeys?: RolloutKeyVerifier;
}

/** Every problem of the ingress's config, each naming its field and the fix. */
function ingressProblems(config: IngressConfig, settings: ResolvedProxySettings, metricsLinks: MetricsLinks | undefined): string[] {
    const i = config.ingress;
    const problems: string[] = [];
    if (!i.enabled)
        problems.push("ingress.enabled: the ingress is disabled, so there is nothing to deploy: do not build VllmIngress (or set ingress.enabled to true)");
    if (i.exposure === "httproute" && (i.tls.mode === "secret" || i.tls.mode === "cert-manager")) {
        problems.push(
            "ingress.tls.mode: with exposure httproute TLS ends at the Gateway (its listener holds the certificate) and the Gateway talks plain HTTP to the proxy: set tls.mode to none and put the certificate on the Gateway listener",
        );
    }
    if (!i.keys.includes(i.sandboxKey)) problems.push(`ingress.sandboxKey: '${i.sandboxKey}' is not one of ingress.keys (${i.keys.join(", ")})`);
    problems.push(...validateProxySettings(settings).map((p) => `ingress (proxy settings): ${p}`));
    if ((config.observability?.enabled ?? false) && metricsLinks === undefined)
        problems.push(
            "observability.enabled: the ingress needs the scraper and the metrics programs: the Platform must pass them (resolveVllmIngress's metricsLinks)",
        );
    return problems;
}

/** The exporter and mtail beside each proxy (observability.enabled), or undefined. */
function metricsSidecars(
    config: IngressConfig,
    names: IngressNames,
    labels: Readonly<Record<string, string>>,
    metricsLinks: MetricsLinks | undefined,
): IngressMetrics | undefined {
    const observed = config.observability?.enabled ?? false;
    // A missing image is the config's to report (images.mtail: validateObservability).
    const mtail = config.images.mtail;
    return observed && metricsLinks !== undefined
        ? ingressMetrics({
              links: metricsLinks,
              images: { nginxExporter: config.images.nginxExporter, mtail: mtail ?? "" },
              deployment: names.ingress.deployment,
              namespace: names.namespaces.ingress,
              podLabels: labels,
          })
        : undefined;
}

/** The container's command line: nginx in the foreground, with the metrics log rotated beside it on Kubernetes. */
function proxyCommand(k8s: boolean, metrics: IngressMetrics | undefined): readonly string[] {
    // `nginx -e stderr`: the log nginx opens before it reads the config goes to stderr, not /var/log on a read-only root.
    const command = ["nginx", "-e", "stderr", "-c", INGRESS_PATHS.configFile, "-g", "daemon off;"];
    // observability (Kubernetes): the JSON log mtail reads is rotated beside nginx (metrics.ts AccessLogRotation).
    // Not on Docker: the log volume's directory is root's (docker.ts), so the loop could not put a new file there.
    return metrics && k8s ? rotatingAccessLogCommand(command, metrics.accessLog.rotation) : command;
}

/** The upstream vLLM pods the proxy may reach, and their host:port. */
function upstreamPeer(config: IngressConfig, names: IngressNames, settings: ResolvedProxySettings): IngressDescription["upstream"] {
    const upstreamPort = Number(settings.upstream.slice(settings.upstream.lastIndexOf(":") + 1));
    return {
        address: settings.upstream,
        namespace: names.namespaces.training,
        podLabels: vllmPodLabels(config, names),
        port: upstreamPort,
    };
}

/** The names of every object of the ingress, on both targets. */
function objectNames(names: IngressNames): IngressDescription["names"] {
    const deployment = names.ingress.deployment;
    return {
        namespace: names.namespaces.ingress,
        deployment,
        service: names.ingress.service,
        keysSecret: names.ingress.keysSecret,
        config: names.ingress.config,
        networkPolicy: deployment,
        disruptionBudget: deployment,
        httpRoute: deployment,
        container: deployment,
        filesContainer: dnsName([deployment, "files"]),
        configVolume: names.ingress.config,
        keysVolume: names.ingress.keysSecret,
        trainingNetwork: names.networks.training,
    };
}

/**
 * The keys nginx accepts. With per-rollout keys the sandboxes send only their rollout's `rk1.` key (no forwarder holds
 * the shared one: components/sandbox/forwarder.ts), so ingress.sandboxKey is left out: a leaked copy of it would skip
 * the verifier, share one bucket and outlive every rollout.
 */
function ingressKeyNames(config: IngressConfig, rolloutKeys: boolean): Pick<IngressDescription, "keyNames" | "sandboxKeyName" | "retiredSandboxKey"> {
    const i = config.ingress;
    if (!rolloutKeys) return { keyNames: [...i.keys], sandboxKeyName: i.sandboxKey };
    return { keyNames: i.keys.filter((k) => k !== i.sandboxKey), retiredSandboxKey: i.sandboxKey };
}

/** Resolves the ingress from the platform config and names; throws ConfigError with every problem. */
export function resolveVllmIngress(config: IngressConfig, names: IngressNames, metricsLinks?: MetricsLinks): IngressDescription {
    const i = config.ingress;
    const settings = ingressProxySettings(config, names);
    const problems = ingressProblems(config, settings, metricsLinks);
    if (problems.length > 0) throw new ConfigError(problems);
    const k8s = config.target.kind === "kubernetes";
    const port = settings.listenPort;
    const exposed = i.exposure !== "cluster";
    const labels = podLabels("vllm-ingress", names.ingress.deployment);
    const metrics = metricsSidecars(config, names, labels, metricsLinks);
    const rolloutKeys = rolloutKeyVerifier(config, names);
    return {
        target: config.target.kind,
        dns: dnsEgressFor(config.target),
        settings,
        configText: renderNginxConfig(settings),
        routes: allowedRoutes(settings),
        ...ingressKeyNames(config, rolloutKeys !== undefined),
        port,
        portName: settings.tlsEnabled ? "https" : "http",
        // A public host is reached as https://<host> (names.ts), i.e. on 443.
        publicPort: exposed && i.host ? PUBLIC_HTTPS_PORT : port,
        exposure: i.exposure,
        host: i.host,
        gateway: i.gateway,
        tls: ingressTls(config, names, settings),
        urls: { sandbox: names.ingress.sandboxUrl, internal: names.ingress.inClusterUrl },
        replicas: k8s ? i.replicas : 1,
        effectiveRateLimitPerSecond: i.rateLimitPerSecond * (k8s ? i.replicas : 1),
        image: config.images.nginx,
        command: proxyCommand(k8s, metrics),
        paths: INGRESS_PATHS,
        security: INGRESS_SECURITY,
        resources: INGRESS_RESOURCES,
        podLabels: labels,
        peer: { namespace: names.namespaces.ingress, podLabels: labels, port },
        upstream: upstreamPeer(config, names, settings),
        clientNamespace: names.namespaces.sandboxes,
        // Unexposed on Docker: only the host itself (ssh tunnel for operators); sandboxes use the internal network.
        dockerPublishIp: exposed ? "0.0.0.0" : "127.0.0.1",
        names: objectNames(names),
        metrics,
        rolloutKeys,
    };
}
