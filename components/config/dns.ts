/**
 * The DNS egress of the stack's locked-down pods (target.dns), resolved once into the peers every
 * component's NetworkPolicies allow on 53 UDP+TCP, and its checks. Pure: no Pulumi here.
 */
import { type DnsEgress, KUBE_DNS_EGRESS } from "../shared/kubernetes";
import type { PlatformConfig } from "./types";

/** NodeLocal DNSCache's default listen address (kubernetes cluster/addons/dns/nodelocaldns, __PILLAR__LOCAL__DNS__). */
export const NODE_LOCAL_DNS_ADDRESS = "169.254.20.10";
/** The cloud metadata service: never opened, not even on 53. */
export const METADATA_ADDRESS = "169.254.169.254";

/**
 * The peers DNS queries may go to. node-local: the cache's addresses (each a /32) and the kube-dns
 * pods (the cache's upstream, and where queries go while a node's cache is down).
 */
export function dnsEgressFor(target: PlatformConfig["target"]): DnsEgress {
    if (target.kind !== "kubernetes") return KUBE_DNS_EGRESS;
    const dns = target.dns;
    switch (dns.kind) {
        case "kube-dns":
            return KUBE_DNS_EGRESS;
        case "node-local":
            return { pods: KUBE_DNS_EGRESS.pods, addresses: [...new Set(dns.addresses)] };
        case "selector":
            return { pods: [{ namespace: dns.namespace, podLabels: dns.podLabels }], addresses: [] };
    }
}

function octets(address: string): number[] {
    return address.split(".").map(Number);
}

/** target.dns: every problem, each naming the field and the fix. */
export function validateDns(c: PlatformConfig): string[] {
    if (c.target.kind !== "kubernetes") return [];
    const dns = c.target.dns;
    const errors: string[] = [];
    if (dns.kind === "node-local") {
        dns.addresses.forEach((a, i) => {
            const field = `target.dns.addresses[${i}]`;
            if (octets(a).some((o) => o > 255))
                errors.push(`${field}: '${a}' is not an IPv4 address: set the address NodeLocal DNSCache listens on (default ${NODE_LOCAL_DNS_ADDRESS})`);
            else if (a === METADATA_ADDRESS)
                errors.push(
                    `${field}: ${METADATA_ADDRESS} is the cloud metadata service, which the stack never opens (GKE's Cloud DNS without NodeLocal DNSCache answers there): use NodeLocal DNSCache's address (${NODE_LOCAL_DNS_ADDRESS}) or the kube-dns shape`,
                );
            else if (octets(a)[0] === 0 || octets(a)[0] >= 224)
                errors.push(`${field}: '${a}' cannot be a DNS server's address: set the address NodeLocal DNSCache listens on`);
        });
    }
    if (dns.kind === "selector") {
        if (Object.keys(dns.podLabels).length === 0)
            errors.push(
                `target.dns.podLabels: empty, which would allow port 53 to every pod in namespace ${dns.namespace}: set the DNS pods' labels (kubectl get pods -n ${dns.namespace} --show-labels)`,
            );
    }
    return errors;
}
