/**
 * target.dns: each shape resolved into the DNS peers every locked-down pod's policy allows, and every
 * refusal's message. The policies themselves are proven in test/stack/reachability.test.ts.
 * Run: node --import tsx --test test/config/dns-egress.test.ts
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { dnsEgressFor } from "../../components/config";
import { clusterDnsEgress } from "../../components/shared/kubernetes";
import { configProblems, parseWithTestImages } from "../helpers/config";

const withDns = (dns: unknown) =>
    parseWithTestImages({ recipe: "opencode-blackbox", runId: "run-001", target: { kind: "kubernetes", context: "test", dns } }, "test");

describe("target.dns", () => {
    test("unset: the kube-dns pods, as before", () => {
        const c = parseWithTestImages({ recipe: "opencode-blackbox", runId: "run-001", target: { kind: "kubernetes", context: "test" } }, "test");
        assert.deepEqual(clusterDnsEgress(dnsEgressFor(c.target)), {
            to: [
                {
                    namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } },
                    podSelector: { matchLabels: { "k8s-app": "kube-dns" } },
                },
            ],
            ports: [
                { protocol: "UDP", port: 53 },
                { protocol: "TCP", port: 53 },
            ],
        });
    });

    test("node-local: NodeLocal DNSCache's 169.254.20.10 as a /32 beside the kube-dns pods, on 53 UDP+TCP", () => {
        const rule = clusterDnsEgress(dnsEgressFor(withDns({ kind: "node-local" }).target));
        assert.deepEqual(rule.to, [
            { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } }, podSelector: { matchLabels: { "k8s-app": "kube-dns" } } },
            { ipBlock: { cidr: "169.254.20.10/32" } },
        ]);
        const two = clusterDnsEgress(dnsEgressFor(withDns({ kind: "node-local", addresses: ["169.254.20.10", "10.96.0.10"] }).target));
        assert.deepEqual(
            (two.to as Array<{ ipBlock?: { cidr: string } }>).flatMap((p) => (p.ipBlock ? [p.ipBlock.cidr] : [])),
            ["169.254.20.10/32", "10.96.0.10/32"],
        );
    });

    test("selector: only the named pods", () => {
        const rule = clusterDnsEgress(dnsEgressFor(withDns({ kind: "selector", namespace: "dns", podLabels: { app: "unbound" } }).target));
        assert.deepEqual(rule.to, [
            { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "dns" } }, podSelector: { matchLabels: { app: "unbound" } } },
        ]);
    });

    test("refusals name the field and the fix: a range, the metadata address, a bad address, an empty selector", () => {
        assert.deepEqual(
            configProblems(() => withDns({ kind: "node-local", addresses: ["169.254.0.0/16"] })),
            ["target.dns.addresses.0: must be one IPv4 address such as 169.254.20.10 (no range)"],
        );
        assert.deepEqual(
            configProblems(() => withDns({ kind: "node-local", addresses: ["169.254.169.254", "169.254.20.300", "224.0.0.1"] })),
            [
                "target.dns.addresses[0]: 169.254.169.254 is the cloud metadata service, which the stack never opens (GKE's Cloud DNS without NodeLocal DNSCache answers there): use NodeLocal DNSCache's address (169.254.20.10) or the kube-dns shape",
                "target.dns.addresses[1]: '169.254.20.300' is not an IPv4 address: set the address NodeLocal DNSCache listens on (default 169.254.20.10)",
                "target.dns.addresses[2]: '224.0.0.1' cannot be a DNS server's address: set the address NodeLocal DNSCache listens on",
            ],
        );
        assert.deepEqual(
            configProblems(() => withDns({ kind: "selector", namespace: "dns", podLabels: {} })),
            [
                "target.dns.podLabels: empty, which would allow port 53 to every pod in namespace dns: set the DNS pods' labels (kubectl get pods -n dns --show-labels)",
            ],
        );
    });
});
