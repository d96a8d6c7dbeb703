/**
 * The proxy settings the ingress deploys, decided once from the config and the names, and the part of
 * them a local run (`ingress:local`, the bench) takes over.
 */
import { INGRESS_HTTP_PORT, INGRESS_HTTPS_PORT } from "../config/names";
import { DOCKER_EMBEDDED_DNS } from "../shared/docker";
import { INGRESS_ACCESS_LOG_FILE, INGRESS_STUB_STATUS } from "../shared/metrics";
import type { LocalProxyOverrides } from "./local";
import { INGRESS_PATHS, type IngressConfig, type IngressNames } from "./model";
import { PROXY_PATH_FIELDS, resolveProxySettings, type ResolvedProxySettings } from "./nginx";
import { rolloutKeyVerifier } from "./verifier";

/** Whether the proxy feeds the metrics sidecars (observability on, either target: ingress/metrics.ts). */
function metricsPath(config: IngressConfig): boolean {
    return config.observability?.enabled ?? false;
}

/** The ProxySettings the component deploys, from config and names (exported so tests and `ingress:local` prove the same mapping). */
export function ingressProxySettings(config: IngressConfig, names: IngressNames): ResolvedProxySettings {
    const i = config.ingress;
    // exposure httproute: TLS ends at the Gateway and tls.mode must be none (checked in resolveVllmIngress).
    const tlsEnabled = i.tls.mode !== "none";
    const verifier = rolloutKeyVerifier(config, names);
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
        // agent-sandbox pools on Kubernetes: rollout keys are asked of the verifier (docs/design/rollout-keys.md).
        ...(verifier ? { rolloutKeyVerifier: verifier.verifyAddress } : {}),
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
    // upstreamResolver names the deployment's DNS (Docker's), which a local run does not have; rolloutKeyVerifier the deployment's verifier.
    // The metrics log's file and stub_status are the deployment's (an emptyDir, the pod's loopback); a local run asks for its own.
    for (const f of [
        ...PROXY_PATH_FIELDS,
        "listenAddress",
        "listenPort",
        "upstream",
        "upstreamResolver",
        "rolloutKeyVerifier",
        "tlsEnabled",
        "metricsAccessLog",
        "stubStatusListen",
    ])
        delete out[f];
    return out as LocalProxyOverrides;
}
