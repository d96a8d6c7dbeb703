/**
 * The target-neutral description of the vLLM ingress: every decision (ports, paths, the
 * rendered nginx config, TLS source, exposure, security settings, peers, names) is made
 * here, once, from the resolved config and the names. `kubernetes.ts` and `docker.ts` only
 * translate it. Pure: no Pulumi imports, no keys (those are secrets and arrive as Outputs).
 */
import { dnsEgressFor } from "../config/dns";
import type { DnsEgress } from "../shared/kubernetes";
import { dnsName, podLabels, type PlatformNames, vllmPodLabels } from "../config/names";
import { ConfigError } from "../config/parse";
import type { PlatformConfig } from "../config/resolve";
import {
    PROXY_PATH_FIELDS,
    allowedRoutes,
    renderNginxConfig,
    resolveProxySettings,
    validateProxySettings,
    type ResolvedProxySettings,
    type Route,
} from "./nginx";
import type { LocalProxyOverrides } from "./local";
import { DOCKER_EMBEDDED_DNS } from "../shared/docker";
import type { MetricsLinks } from "../shared/metrics-pods";
import { INGRESS_ACCESS_LOG_FILE, INGRESS_STUB_STATUS } from "../shared/metrics";
import { ingressMetrics, rotatingAccessLogCommand, type IngressMetrics } from "./metrics";
import type { DockerMetricsTarget } from "../shared/docker-metrics";

// The listen ports are decided once, in names.ts, which also builds the sandbox URLs with them.
export { INGRESS_HTTP_PORT, INGRESS_HTTPS_PORT } from "../config/names";
import { INGRESS_HTTP_PORT, INGRESS_HTTPS_PORT } from "../config/names";

/**
 * What the ingress reads of a stack's config: a narrow slice of PlatformConfig, fully defaulted
 * (`resolveDefaults` applies every default once), so the component can be used without the
 * Platform by building just these fields.
 */
export type IngressConfig = Pick<PlatformConfig, "target" | "ingress" | "images" | "training"> & {
    /** Metrics endpoints (observability.enabled). @default off */
    readonly observability?: Pick<PlatformConfig["observability"], "enabled">;
};
/** The object names the ingress uses (from `platformNames`). */
export type IngressNames = Pick<PlatformNames, "ingress" | "namespaces" | "networks" | "training">;
/** Port a public host name is reached on (`https://<host>` in names.ts): the LoadBalancer / published Docker port. */
export const PUBLIC_HTTPS_PORT = 443;

/** Where the container finds its files; the same on both targets, so both run the very same nginx.conf. */
export const INGRESS_PATHS = {
    /** ConfigMap (Kubernetes) / read-only volume (Docker) holding nginx.conf. */
    configDir: "/etc/nginx/ingress",
    configFile: "/etc/nginx/ingress/nginx.conf",
    /** Secret (Kubernetes) / read-only volume (Docker) holding keys.conf, mounted as a directory (no subPath: a rotated Secret reaches the pod). */
    keysDir: "/etc/nginx/keys",
    /** Key of the file inside the keys Secret and the file name in keysDir. */
    keysFileName: "keys.conf",
    /** kubernetes.io/tls Secret (keys tls.crt / tls.key) / host files bind-mounted read-only. */
    tlsDir: "/etc/nginx/tls",
    /** The only writable directory (emptyDir / tmpfs): pid file and temp dirs. */
    runtimeDir: "/tmp/nginx",
} as const;

/** Key of the checksum annotation (Kubernetes pod template) / label (Docker) that rolls the proxy when config or keys change. */
export const CHECKSUM_ANNOTATION = "agentrl.dev/config-checksum";

/** How the proxy process runs, on both targets. */
export interface IngressSecurity {
    /** uid of the nginx user in the unprivileged nginx images (nginxinc/nginx-unprivileged: 101). */
    readonly runAsUser: number;
    /** Kubernetes: primary group and fsGroup, so the Secret/ConfigMap files (mode 0440) are readable by the group. */
    readonly runAsGroup: number;
    /**
     * Docker: the process group. Docker uploads land root-owned (the provider writes uid/gid 0 into the tar it
     * copies, terraform-provider-docker resource_docker_container_funcs.go), so the keys file is root:root 0440
     * and readable through gid 0, as the unprivileged nginx image expects (it runs under OpenShift's gid 0).
     */
    readonly dockerGroup: number;
    readonly readOnlyRootFilesystem: true;
    readonly allowPrivilegeEscalation: false;
    readonly dropCapabilities: readonly ["ALL"];
    readonly seccompProfile: "RuntimeDefault";
    /** Size of the runtimeDir emptyDir / tmpfs. */
    readonly runtimeSizeLimit: string;
    /** Seconds in-flight requests get on shutdown (the image's STOPSIGNAL SIGQUIT = nginx graceful stop). */
    readonly terminationGraceSeconds: number;
}

/** CPU/memory of one proxy replica (requests and limits), the same numbers on Docker. */
export interface IngressResources {
    readonly requests: { readonly cpu: string; readonly memory: string };
    readonly limits: { readonly cpu: string; readonly memory: string };
}

/** Where the certificate comes from and where TLS ends. */
export interface IngressTls {
    /** nginx itself terminates TLS on the listen port. */
    readonly proxyTerminates: boolean;
    /** `secret` (Kubernetes TLS Secret), `cert-manager` (a Certificate the stack requests), `files` (Docker host files), `none`. */
    readonly mode: "secret" | "cert-manager" | "files" | "none";
    /** Where TLS ends for clients: at the proxy, at the Gateway (exposure httproute), or nowhere (in-cluster plain HTTP). */
    readonly terminatedAt: "proxy" | "gateway" | "none";
    readonly secretName?: string;
    /** cert-manager: the Certificate to request (its Secret is `secretName`). */
    readonly certificate?: {
        readonly name: string;
        readonly issuer: { readonly name: string; readonly kind: "Issuer" | "ClusterIssuer"; readonly group: string };
        /** The proxy Service's in-cluster names, then the public host if any. */
        readonly dnsNames: readonly string[];
    };
    readonly certFile?: string;
    readonly keyFile?: string;
    readonly publiclyTrusted: boolean;
}

/** The pods a NetworkPolicy admits or targets. */
export interface IngressPeerPods {
    readonly namespace: string;
    readonly podLabels: Readonly<Record<string, string>>;
    readonly port: number;
}

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
    /** Names of the Bearer keys, in config order (each generated unless supplied). */
    readonly keyNames: readonly string[];
    /** The key the sandboxes use (handed to the trainer). */
    readonly sandboxKeyName: string;
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
        readonly sandboxesNetwork: string;
    };
    /** observability.enabled: the exporter and mtail beside each proxy, and who may scrape them; absent when off. */
    readonly metrics?: IngressMetrics;
    /** Docker, observability.enabled: the metrics ports its containers publish on the host's loopback (set by the Platform, platform/docker-metrics.ts). @default [] */
    readonly dockerMetrics?: readonly DockerMetricsTarget[];
}

/** The ProxySettings the component deploys, from config and names (exported so tests and `ingress:local` prove the same mapping). */
/** Whether the proxy feeds the metrics sidecars (observability on, either target: ingress/metrics.ts). */
function metricsPath(config: IngressConfig): boolean {
    return config.observability?.enabled ?? false;
}

export function ingressProxySettings(config: IngressConfig, names: IngressNames): ResolvedProxySettings {
    const i = config.ingress;
    // exposure httproute: TLS ends at the Gateway and tls.mode must be none (checked in resolveVllmIngress).
    const tlsEnabled = i.tls.mode !== "none";
    return resolveProxySettings({
        listenAddress: "0.0.0.0",
        listenPort: tlsEnabled ? INGRESS_HTTPS_PORT : INGRESS_HTTP_PORT,
        tlsEnabled,
        tlsCertFile: `${INGRESS_PATHS.tlsDir}/tls.crt`,
        tlsKeyFile: `${INGRESS_PATHS.tlsDir}/tls.key`,
        upstream: names.training.vllmUpstream,
        // Docker: vLLM is a container whose address changes when it is recreated (a new run, a changed vLLM
        // setting, a host reboot): look its name up while nginx runs. Kubernetes: a ClusterIP Service's address
        // is fixed, so nginx resolves it once and keeps its connections alive.
        upstreamResolver: config.target.kind === "docker" ? DOCKER_EMBEDDED_DNS : undefined,
        keysFile: `${INGRESS_PATHS.keysDir}/${INGRESS_PATHS.keysFileName}`,
        allowCompletions: i.allowCompletions,
        healthUnauthenticated: i.healthUnauthenticated,
        maxBodySize: i.maxBodySize,
        rateLimitPerSecond: i.rateLimitPerSecond,
        rateLimitBurst: i.rateLimitBurst,
        readTimeoutSeconds: i.readTimeoutSeconds,
        runtimeDir: INGRESS_PATHS.runtimeDir,
        // The container's stdout/stderr: kubectl logs / docker logs, never a file on the read-only root.
        errorLog: "stderr",
        accessLog: "/dev/stdout",
        // Matches the CPU limit below (auto would count the host's CPUs).
        workerProcesses: 2,
        // observability: the JSON log also to the file mtail reads, stub_status for the exporter on loopback.
        ...(metricsPath(config)
            ? { metricsAccessLog: INGRESS_ACCESS_LOG_FILE, stubStatusListen: `${INGRESS_STUB_STATUS.address}:${INGRESS_STUB_STATUS.port}` }
            : {}),
    });
}

/** The settings `startLocalIngress` accepts, taken from the deployed ones (everything but paths, listen, upstream, TLS). */
export function localOverrides(settings: ResolvedProxySettings): LocalProxyOverrides {
    const out: Record<string, unknown> = { ...settings };
    // upstreamResolver names the deployment's DNS (Docker's), which a local run does not have.
    // The metrics log's file and stub_status are the deployment's (an emptyDir, the pod's loopback); a local run asks for its own.
    for (const f of [...PROXY_PATH_FIELDS, "listenAddress", "listenPort", "upstream", "upstreamResolver", "tlsEnabled", "metricsAccessLog", "stubStatusListen"])
        delete out[f];
    return out as LocalProxyOverrides;
}

/** The proxy Service's in-cluster DNS names: what sandboxes dial, so what its certificate must name. */
export function serviceDnsNames(names: Pick<PlatformNames, "ingress" | "namespaces">): string[] {
    const svc = names.ingress.service;
    const ns = names.namespaces.ingress;
    return [svc, `${svc}.${ns}`, `${svc}.${ns}.svc`, `${svc}.${ns}.svc.cluster.local`];
}

/** Resolves the ingress from the platform config and names; throws ConfigError with every problem. */
export function resolveVllmIngress(config: IngressConfig, names: IngressNames, metricsLinks?: MetricsLinks): IngressDescription {
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
    const settings = ingressProxySettings(config, names);
    problems.push(...validateProxySettings(settings).map((p) => `ingress (proxy settings): ${p}`));
    const observed = config.observability?.enabled ?? false;
    if (observed && metricsLinks === undefined)
        problems.push(
            "observability.enabled: the ingress needs the scraper and the metrics programs: the Platform must pass them (resolveVllmIngress's metricsLinks)",
        );
    // A missing image is the config's to report (images.mtail: validateObservability).
    const mtail = config.images.mtail;
    if (problems.length > 0) throw new ConfigError(problems);

    const k8s = config.target.kind === "kubernetes";
    const proxyTerminates = settings.tlsEnabled;
    const port = settings.listenPort;
    const exposed = i.exposure !== "cluster";
    const upstreamPort = Number(settings.upstream.slice(settings.upstream.lastIndexOf(":") + 1));
    const labels = podLabels("vllm-ingress", names.ingress.deployment);
    const deployment = names.ingress.deployment;
    const internal = names.ingress.inClusterUrl;
    // `nginx -e stderr`: the log nginx opens before it reads the config goes to stderr, not /var/log on a read-only root.
    const command = ["nginx", "-e", "stderr", "-c", INGRESS_PATHS.configFile, "-g", "daemon off;"];
    const metrics =
        observed && metricsLinks !== undefined
            ? ingressMetrics({
                  links: metricsLinks,
                  images: { nginxExporter: config.images.nginxExporter, mtail: mtail ?? "" },
                  deployment,
                  namespace: names.namespaces.ingress,
                  podLabels: labels,
              })
            : undefined;
    return {
        target: config.target.kind,
        dns: dnsEgressFor(config.target),
        settings,
        configText: renderNginxConfig(settings),
        routes: allowedRoutes(settings),
        keyNames: [...i.keys],
        sandboxKeyName: i.sandboxKey,
        port,
        portName: proxyTerminates ? "https" : "http",
        // A public host is reached as https://<host> (names.ts), i.e. on 443.
        publicPort: exposed && i.host ? PUBLIC_HTTPS_PORT : port,
        exposure: i.exposure,
        host: i.host,
        gateway: i.gateway,
        tls: {
            proxyTerminates,
            mode: i.tls.mode,
            terminatedAt: proxyTerminates ? "proxy" : i.exposure === "httproute" ? "gateway" : "none",
            secretName: i.tls.secretName ?? (i.tls.mode === "cert-manager" ? names.ingress.tlsSecret : undefined),
            certificate:
                i.tls.mode === "cert-manager" && i.tls.issuer
                    ? { name: names.ingress.certificate, issuer: { ...i.tls.issuer }, dnsNames: [...serviceDnsNames(names), ...(i.host ? [i.host] : [])] }
                    : undefined,
            certFile: i.tls.certFile,
            keyFile: i.tls.keyFile,
            publiclyTrusted: i.tls.publiclyTrusted,
        },
        urls: { sandbox: names.ingress.sandboxUrl, internal },
        replicas: k8s ? i.replicas : 1,
        effectiveRateLimitPerSecond: i.rateLimitPerSecond * (k8s ? i.replicas : 1),
        image: config.images.nginx,
        // observability (Kubernetes): the JSON log mtail reads is rotated beside nginx (metrics.ts AccessLogRotation).
        // Not on Docker: the log volume's directory is root's (docker.ts), so the loop could not put a new file there.
        command: metrics && k8s ? rotatingAccessLogCommand(command, metrics.accessLog.rotation) : command,
        paths: INGRESS_PATHS,
        security: {
            runAsUser: 101,
            runAsGroup: 101,
            dockerGroup: 0,
            readOnlyRootFilesystem: true,
            allowPrivilegeEscalation: false,
            dropCapabilities: ["ALL"],
            seccompProfile: "RuntimeDefault",
            runtimeSizeLimit: "256Mi",
            terminationGraceSeconds: 60,
        },
        resources: { requests: { cpu: "500m", memory: "128Mi" }, limits: { cpu: "2", memory: "512Mi" } },
        podLabels: labels,
        peer: { namespace: names.namespaces.ingress, podLabels: labels, port },
        upstream: {
            address: settings.upstream,
            namespace: names.namespaces.training,
            podLabels: vllmPodLabels(config, names),
            port: upstreamPort,
        },
        clientNamespace: names.namespaces.sandboxes,
        // Unexposed on Docker: only the host itself (ssh tunnel for operators); sandboxes use the internal network.
        dockerPublishIp: exposed ? "0.0.0.0" : "127.0.0.1",
        names: {
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
            sandboxesNetwork: names.networks.sandboxes,
        },
        metrics,
    };
}
