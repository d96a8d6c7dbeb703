/**
 * Where the ingress's certificate comes from and where TLS ends: at the proxy, at the Gateway
 * (exposure httproute), or nowhere (in-cluster plain HTTP).
 */
import type { PlatformNames } from "../config/names";
import type { IngressConfig, IngressNames, IngressTls } from "./model";
import type { ResolvedProxySettings } from "./nginx";

/** The proxy Service's in-cluster DNS names: what sandboxes dial, so what its certificate must name. */
export function serviceDnsNames(names: Pick<PlatformNames, "ingress" | "namespaces">): string[] {
    const svc = names.ingress.service;
    const ns = names.namespaces.ingress;
    return [svc, `${svc}.${ns}`, `${svc}.${ns}.svc`, `${svc}.${ns}.svc.cluster.local`];
}

/** The ingress's TLS: the proxy terminates it when its settings listen with TLS. */
export function ingressTls(config: IngressConfig, names: IngressNames, settings: ResolvedProxySettings): IngressTls {
    const i = config.ingress;
    const proxyTerminates = settings.tlsEnabled;
    return {
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
    };
}
