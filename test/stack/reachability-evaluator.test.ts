/**
 * The NetworkPolicy reachability evaluator (test/helpers/reachability.ts) on hand-made cases:
 * isolation and policyTypes defaulting, the union of policies, both ends deciding, every peer
 * form, selectors, ipBlock with except (and the pod-network flag), ports, protocols, endPort,
 * named ports, the workload kinds, input problems, the Markdown table, and the way in from a
 * Pulumi mock run.
 * Run: node --import tsx --test test/stack/reachability-evaluator.test.ts
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { manifestsOf } from "../../scripts/lib/plan";
import { evaluateReachability, reachabilityTable, ReachabilityInputError, type ExtraEndpoint, type Manifest, type Reachability } from "../helpers/reachability";
import type { RecordedResource } from "../helpers/mock";

// ---- hand-made objects ---------------------------------------------------------------------------

type Labels = Record<string, string>;
type Port = { containerPort: number; name?: string; protocol?: string };

const namespace = (name: string, labels: Labels = {}): Manifest => ({ apiVersion: "v1", kind: "Namespace", metadata: { name, labels } });
const podSpec = (ports: Port[]) => ({ containers: [{ name: "main", image: "example:1", ports }] });
const deployment = (ns: string, name: string, labels: Labels, ports: Port[] = []): Manifest => ({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: ns },
    spec: { selector: { matchLabels: labels }, template: { metadata: { labels }, spec: podSpec(ports) } },
});
const policy = (ns: string, name: string, spec: Record<string, unknown>): Manifest => ({
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name, namespace: ns },
    spec,
});

const INTERNET: ExtraEndpoint = { name: "internet", ip: "8.8.8.8" };
const METADATA: ExtraEndpoint = { name: "metadata", ip: "169.254.169.254" };
const APISERVER: ExtraEndpoint = { name: "apiserver", ip: "10.96.0.1", ports: [{ port: 443 }] };
const KUBE_DNS: ExtraEndpoint = {
    name: "kube-dns",
    namespace: "kube-system",
    labels: { "k8s-app": "kube-dns" },
    ports: [
        { port: 53, protocol: "UDP", name: "dns" },
        { port: 53, protocol: "TCP", name: "dns-tcp" },
    ],
};

/** Two namespaces: a (web, client) and b labeled team=x (db, client, other). */
const BASE: Manifest[] = [
    namespace("a"),
    namespace("b", { team: "x" }),
    deployment("a", "web", { app: "web" }, [{ containerPort: 8080, name: "http" }]),
    deployment("a", "client", { role: "client" }),
    deployment("b", "db", { app: "db" }, [
        { containerPort: 5432, name: "pg" },
        { containerPort: 9187, name: "metrics" },
    ]),
    deployment("b", "client", { role: "client" }),
    deployment("b", "other", { role: "other" }),
];
const PODS = ["a/client", "a/web", "b/client", "b/db", "b/other"];

/** Every source that may reach `to`, sorted. */
const sourcesOf = (r: Reachability, to: string): string[] => [...new Set(r.connections.filter((c) => c.to === to).map((c) => c.from))].sort();
/** Every destination `from` may reach, sorted. */
const destinationsOf = (r: Reachability, from: string): string[] => [...new Set(r.connections.filter((c) => c.from === from).map((c) => c.to))].sort();

// ---- isolation ----------------------------------------------------------------------------------

describe("isolation and policyTypes", () => {
    test("no policy: every pod reaches every pod (itself included) and every address, on every port; addresses are destinations only", () => {
        const r = evaluateReachability(BASE, { endpoints: [INTERNET, APISERVER] });
        for (const from of PODS) {
            assert.deepEqual(destinationsOf(r, from), [...PODS, "apiserver", "internet"].sort());
            assert.equal(r.portsBetween(from, "b/db"), "any");
            assert.equal(r.portsBetween(from, "internet"), "any");
            // The API server serves 443 only.
            assert.equal(r.portsBetween(from, "apiserver"), "TCP 443");
        }
        assert.deepEqual(destinationsOf(r, "internet"), []);
        assert.equal(r.allows("a/web", "b/db", 12345, "SCTP"), true);
    });

    test("default-deny ingress {podSelector: {}, policyTypes: [Ingress]}: nothing reaches the namespace's pods, not even each other; their egress stays open", () => {
        const r = evaluateReachability([...BASE, policy("a", "deny", { podSelector: {}, policyTypes: ["Ingress"] })], { endpoints: [INTERNET] });
        assert.deepEqual(sourcesOf(r, "a/web"), []);
        assert.deepEqual(sourcesOf(r, "a/client"), []);
        assert.deepEqual(destinationsOf(r, "a/web"), ["b/client", "b/db", "b/other", "internet"]);
        assert.deepEqual(sourcesOf(r, "b/db"), PODS);
    });

    test("an egress-only policy (policyTypes [Egress]) does not isolate ingress", () => {
        const r = evaluateReachability(
            [
                ...BASE,
                policy("a", "web-out", {
                    podSelector: { matchLabels: { app: "web" } },
                    policyTypes: ["Egress"],
                    egress: [{ to: [{ podSelector: {}, namespaceSelector: {} }] }],
                }),
            ],
            {
                endpoints: [INTERNET],
            },
        );
        assert.deepEqual(sourcesOf(r, "a/web"), PODS);
        assert.deepEqual(destinationsOf(r, "a/web"), PODS);
        assert.equal(r.allows("a/web", "internet", 443), false);
    });

    test("policyTypes unset and a non-empty egress section: Ingress and Egress are both isolated", () => {
        const r = evaluateReachability(
            [...BASE, policy("a", "web", { podSelector: { matchLabels: { app: "web" } }, egress: [{ to: [{ ipBlock: { cidr: "0.0.0.0/0" } }] }] })],
            { endpoints: [INTERNET] },
        );
        // No ingress rule at all: ingress denied.
        assert.deepEqual(sourcesOf(r, "a/web"), []);
        // Egress only to the ipBlock, which pods do not match unless podCidrs is set.
        assert.deepEqual(destinationsOf(r, "a/web"), ["internet"]);
    });

    test("policyTypes unset and egress: [] isolates ingress only (an empty egress section does not count)", () => {
        const r = evaluateReachability([...BASE, policy("a", "web", { podSelector: { matchLabels: { app: "web" } }, egress: [] })], { endpoints: [INTERNET] });
        assert.deepEqual(sourcesOf(r, "a/web"), []);
        // Egress open: everything but itself (its own ingress is closed).
        assert.deepEqual(destinationsOf(r, "a/web"), ["a/client", "b/client", "b/db", "b/other", "internet"]);
    });

    test("policyTypes [Ingress, Egress] with no rules: nothing in, nothing out", () => {
        const r = evaluateReachability([...BASE, policy("a", "web", { podSelector: { matchLabels: { app: "web" } }, policyTypes: ["Ingress", "Egress"] })], {
            endpoints: [INTERNET],
        });
        assert.deepEqual(sourcesOf(r, "a/web"), []);
        assert.deepEqual(destinationsOf(r, "a/web"), []);
    });

    test("ingress: [{}], [{from: []}] and [{ports: []}] allow every source on every port; ingress: [] allows none", () => {
        for (const rule of [{}, { from: [] }, { ports: [] }, { from: [], ports: [] }]) {
            const r = evaluateReachability([...BASE, policy("a", "web", { podSelector: {}, policyTypes: ["Ingress"], ingress: [rule] })], {
                endpoints: [{ ...INTERNET, role: "both" }],
            });
            assert.deepEqual(sourcesOf(r, "a/web"), [...PODS, "internet"], JSON.stringify(rule));
            assert.equal(r.portsBetween("b/db", "a/web"), "any");
        }
        const none = evaluateReachability([...BASE, policy("a", "web", { podSelector: {}, policyTypes: ["Ingress"], ingress: [] })]);
        assert.deepEqual(sourcesOf(none, "a/web"), []);
    });

    test("a policy in namespace a whose podSelector matches labels of pods in b does not apply to them", () => {
        const r = evaluateReachability(
            [...BASE, policy("a", "db-lockdown", { podSelector: { matchLabels: { app: "db" } }, policyTypes: ["Ingress", "Egress"] })],
            { endpoints: [INTERNET] },
        );
        assert.deepEqual(sourcesOf(r, "b/db"), PODS);
        assert.deepEqual(destinationsOf(r, "b/db"), [...PODS, "internet"]);
    });

    test("the allowed set is the union over every policy that selects the pod", () => {
        const r = evaluateReachability([
            ...BASE,
            policy("a", "from-db", {
                podSelector: { matchLabels: { app: "web" } },
                ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: "db" } } }], ports: [{ port: 8080 }] }],
            }),
            policy("a", "from-client", {
                podSelector: {},
                ingress: [{ from: [{ podSelector: { matchLabels: { role: "client" } } }], ports: [{ port: 9090 }] }],
            }),
            policy("a", "dns-from-db", {
                podSelector: { matchLabels: { app: "web" } },
                ingress: [
                    {
                        from: [{ namespaceSelector: { matchLabels: { team: "x" } }, podSelector: { matchLabels: { app: "db" } } }],
                        ports: [{ port: 53, protocol: "UDP" }],
                    },
                ],
            }),
            // Egress-only: selects web but adds nothing to its ingress.
            policy("a", "out", { podSelector: {}, policyTypes: ["Egress"], egress: [{}] }),
        ]);
        assert.deepEqual(sourcesOf(r, "a/web"), ["a/client", "b/db"]);
        assert.equal(r.portsBetween("b/db", "a/web"), "TCP 8080, UDP 53");
        assert.equal(r.portsBetween("a/client", "a/web"), "TCP 9090");
    });

    test("a connection needs egress allowed at the source and ingress allowed at the destination", () => {
        const webOut = (ports: unknown[]) =>
            policy("a", "web-out", {
                podSelector: { matchLabels: { app: "web" } },
                policyTypes: ["Egress"],
                egress: [{ to: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: "db" } } }], ports }],
            });
        const dbIn = (from: unknown[], ports: unknown[]) => policy("b", "db-in", { podSelector: { matchLabels: { app: "db" } }, ingress: [{ from, ports }] });
        const fromWeb = [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "a" } }, podSelector: { matchLabels: { app: "web" } } }];
        // Egress allows, ingress admits only someone else.
        let r = evaluateReachability([...BASE, webOut([{ port: 5432 }]), dbIn([{ podSelector: { matchLabels: { role: "client" } } }], [{ port: 5432 }])]);
        assert.equal(r.allows("a/web", "b/db", 5432), false);
        assert.equal(r.allows("b/client", "b/db", 5432), true);
        // Ingress admits web, egress does not allow db.
        r = evaluateReachability([
            ...BASE,
            policy("a", "web-out", { podSelector: { matchLabels: { app: "web" } }, policyTypes: ["Egress"], egress: [] }),
            dbIn(fromWeb, [{ port: 5432 }]),
        ]);
        assert.equal(r.allows("a/web", "b/db", 5432), false);
        // Both allow: only the ports both sides allow.
        r = evaluateReachability([...BASE, webOut([{ port: 5400, endPort: 5432 }]), dbIn(fromWeb, [{ port: 5432, endPort: 5500 }])]);
        assert.equal(r.portsBetween("a/web", "b/db"), "TCP 5432");
    });
});

// ---- peers and selectors ------------------------------------------------------------------------------

describe("peers and selectors", () => {
    const webIngressFrom = (from: unknown[]) => [...BASE, policy("a", "web-in", { podSelector: { matchLabels: { app: "web" } }, ingress: [{ from }] })];

    test("podSelector alone: pods of the policy's namespace only", () => {
        const r = evaluateReachability(webIngressFrom([{ podSelector: { matchLabels: { role: "client" } } }]));
        assert.deepEqual(sourcesOf(r, "a/web"), ["a/client"]);
    });

    test("namespaceSelector alone: every pod of the matching namespaces", () => {
        const r = evaluateReachability(webIngressFrom([{ namespaceSelector: { matchLabels: { team: "x" } } }]));
        assert.deepEqual(sourcesOf(r, "a/web"), ["b/client", "b/db", "b/other"]);
    });

    test("one peer with both selectors is an AND; two peers are an OR", () => {
        const and = evaluateReachability(
            webIngressFrom([{ namespaceSelector: { matchLabels: { team: "x" } }, podSelector: { matchLabels: { role: "client" } } }]),
        );
        assert.deepEqual(sourcesOf(and, "a/web"), ["b/client"]);
        const or = evaluateReachability(
            webIngressFrom([{ namespaceSelector: { matchLabels: { team: "x" } } }, { podSelector: { matchLabels: { role: "client" } } }]),
        );
        assert.deepEqual(sourcesOf(or, "a/web"), ["a/client", "b/client", "b/db", "b/other"]);
    });

    test("a scraper endpoint (a source pod of a namespace the manifests do not declare) is admitted by name and labels, on the rule's port only", () => {
        // b/db's metrics port admits the Prometheus pods of monitoring; a pod of monitoring without the labels and one with them elsewhere are refused.
        const scraper: ExtraEndpoint = { name: "prometheus", namespace: "monitoring", labels: { "app.kubernetes.io/name": "prometheus" }, role: "source" };
        const decoys: ExtraEndpoint[] = [
            { name: "grafana", namespace: "monitoring", labels: { "app.kubernetes.io/name": "grafana" }, role: "source" },
            { name: "prometheus", namespace: "elsewhere", labels: { "app.kubernetes.io/name": "prometheus" }, role: "source" },
        ];
        const r = evaluateReachability(
            [
                ...BASE,
                policy("b", "db-in", {
                    podSelector: { matchLabels: { app: "db" } },
                    ingress: [
                        {
                            from: [
                                {
                                    namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } },
                                    podSelector: { matchLabels: { "app.kubernetes.io/name": "prometheus" } },
                                },
                            ],
                            ports: [{ protocol: "TCP", port: 9187 }],
                        },
                    ],
                }),
            ],
            { endpoints: [scraper, ...decoys] },
        );
        assert.deepEqual(sourcesOf(r, "b/db"), ["monitoring/prometheus"]);
        assert.equal(r.portsBetween("monitoring/prometheus", "b/db"), "TCP 9187");
        assert.equal(r.allows("monitoring/prometheus", "b/db", 5432), false);
        // The scraper's own namespace has no policy: it is a source only, never a destination.
        assert.deepEqual(sourcesOf(r, "monitoring/prometheus"), []);
    });

    test("empty selectors: podSelector {} is every pod of the policy's namespace, namespaceSelector {} every namespace", () => {
        assert.deepEqual(sourcesOf(evaluateReachability(webIngressFrom([{ podSelector: {} }])), "a/web"), ["a/client", "a/web"]);
        assert.deepEqual(
            sourcesOf(evaluateReachability(webIngressFrom([{ namespaceSelector: {} }]), { endpoints: [{ ...INTERNET, role: "both" }] }), "a/web"),
            PODS,
        );
    });

    test("namespaces carry kubernetes.io/metadata.name = their name, declared or not, whatever the manifest says", () => {
        const manifests = [
            ...BASE.map((m) =>
                m.kind === "Namespace" && m.metadata.name === "b" ? namespace("b", { team: "x", "kubernetes.io/metadata.name": "spoofed" }) : m,
            ),
            policy("a", "web-in", {
                podSelector: { matchLabels: { app: "web" } },
                ingress: [{ from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "b" } } }] }],
            }),
            policy("a", "web-out", {
                podSelector: { matchLabels: { app: "web" } },
                policyTypes: ["Egress"],
                egress: [
                    {
                        to: [
                            {
                                namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } },
                                podSelector: { matchLabels: { "k8s-app": "kube-dns" } },
                            },
                        ],
                    },
                ],
            }),
        ];
        const r = evaluateReachability(manifests, { endpoints: [KUBE_DNS] });
        assert.deepEqual(sourcesOf(r, "a/web"), ["b/client", "b/db", "b/other"]);
        assert.deepEqual(destinationsOf(r, "a/web"), ["kube-system/kube-dns"]);
    });

    test("matchExpressions In, NotIn (an absent label counts as not in), Exists, DoesNotExist, and matchLabels AND matchExpressions", () => {
        const pods = [
            deployment("a", "target", { role: "target" }),
            deployment("a", "p1", { tier: "fe" }),
            deployment("a", "p2", { tier: "be" }),
            deployment("a", "p3", {}),
            deployment("a", "p4", { tier: "fe", canary: "true" }),
        ];
        const from = (podSelector: unknown) =>
            evaluateReachability([...pods, policy("a", "in", { podSelector: { matchLabels: { role: "target" } }, ingress: [{ from: [{ podSelector }] }] })]);
        const expr = (key: string, operator: string, values?: string[]) => ({ matchExpressions: [{ key, operator, ...(values ? { values } : {}) }] });
        assert.deepEqual(sourcesOf(from(expr("tier", "In", ["fe"])), "a/target"), ["a/p1", "a/p4"]);
        assert.deepEqual(sourcesOf(from(expr("tier", "In", ["fe", "be"])), "a/target"), ["a/p1", "a/p2", "a/p4"]);
        assert.deepEqual(sourcesOf(from(expr("tier", "NotIn", ["fe"])), "a/target"), ["a/p2", "a/p3", "a/target"]);
        assert.deepEqual(sourcesOf(from(expr("tier", "Exists")), "a/target"), ["a/p1", "a/p2", "a/p4"]);
        assert.deepEqual(sourcesOf(from(expr("tier", "DoesNotExist")), "a/target"), ["a/p3", "a/target"]);
        assert.deepEqual(sourcesOf(from({ matchLabels: { tier: "fe" }, ...expr("canary", "DoesNotExist") }), "a/target"), ["a/p1"]);
        // The policy's own podSelector takes expressions too.
        const r = evaluateReachability([...pods, policy("a", "deny", { podSelector: expr("tier", "Exists"), policyTypes: ["Ingress"] })]);
        assert.deepEqual(sourcesOf(r, "a/p1"), []);
        assert.equal(sourcesOf(r, "a/p3").length, 5);
    });
});

// ---- ipBlock --------------------------------------------------------------------------------------

describe("ipBlock", () => {
    const webEgress = (to: unknown[], extra: Manifest[] = []) => [
        ...BASE,
        ...extra,
        policy("a", "web-out", { podSelector: { matchLabels: { app: "web" } }, policyTypes: ["Egress"], egress: [{ to }] }),
    ];
    const ENDPOINTS = [INTERNET, METADATA, APISERVER];

    test("0.0.0.0/0 except 169.254.0.0/16: the internet and the API server, not the metadata address; pods are matched by selectors only", () => {
        const r = evaluateReachability(webEgress([{ ipBlock: { cidr: "0.0.0.0/0", except: ["169.254.0.0/16"] } }]), { endpoints: ENDPOINTS });
        assert.deepEqual(destinationsOf(r, "a/web"), ["apiserver", "internet"]);
        assert.equal(r.portsBetween("a/web", "apiserver"), "TCP 443");
        assert.equal(r.allows("a/web", "metadata", 80), false);
    });

    test("podCidrs: a pod is matched by a block that overlaps the pod network once the excepts are taken out", () => {
        const podCidrs = ["10.244.0.0/16"];
        const opts = { endpoints: ENDPOINTS, podCidrs };
        const to = (block: Record<string, unknown>) => destinationsOf(evaluateReachability(webEgress([{ ipBlock: block }]), opts), "a/web");
        assert.deepEqual(to({ cidr: "0.0.0.0/0", except: ["169.254.0.0/16"] }), [...PODS, "apiserver", "internet"].sort());
        assert.deepEqual(to({ cidr: "0.0.0.0/0", except: ["10.0.0.0/8", "169.254.0.0/16"] }), ["internet"]);
        assert.deepEqual(to({ cidr: "0.0.0.0/0", except: ["10.244.0.0/16"] }), ["apiserver", "internet", "metadata"]);
        // Conservative: an except that covers part of the pod network leaves the rest matched.
        assert.deepEqual(to({ cidr: "0.0.0.0/0", except: ["10.244.0.0/24"] }), [...PODS, "apiserver", "internet", "metadata"].sort());
        // A block inside the pod network.
        assert.deepEqual(to({ cidr: "10.244.1.0/24" }), PODS);
        assert.deepEqual(to({ cidr: "192.168.0.0/16" }), []);
        // Without podCidrs the same block matches no pod.
        assert.deepEqual(destinationsOf(evaluateReachability(webEgress([{ ipBlock: { cidr: "10.244.1.0/24" } }]), { endpoints: ENDPOINTS }), "a/web"), []);
    });

    test("ingress from an ipBlock admits addresses in the block (as sources) and no pod", () => {
        const r = evaluateReachability(
            [...BASE, policy("b", "db-in", { podSelector: { matchLabels: { app: "db" } }, ingress: [{ from: [{ ipBlock: { cidr: "8.0.0.0/8" } }] }] })],
            {
                endpoints: [
                    { ...INTERNET, role: "both" },
                    { ...METADATA, role: "source" },
                ],
            },
        );
        assert.deepEqual(sourcesOf(r, "b/db"), ["internet"]);
        // Addresses never reach addresses; a source-only endpoint is never a destination.
        assert.deepEqual(destinationsOf(r, "internet"), ["a/client", "a/web", "b/client", "b/db", "b/other"]);
        assert.deepEqual(sourcesOf(r, "metadata"), []);
    });

    test("an IPv6 block matches none of the IPv4 endpoints", () => {
        const r = evaluateReachability(webEgress([{ ipBlock: { cidr: "::/0" } }]), { endpoints: ENDPOINTS, podCidrs: ["10.244.0.0/16"] });
        assert.deepEqual(destinationsOf(r, "a/web"), []);
    });
});

// ---- ports ------------------------------------------------------------------------------------------

describe("ports and protocols", () => {
    const webEgressPorts = (ports: unknown[], to?: unknown[]) => [
        ...BASE,
        policy("a", "web-out", { podSelector: { matchLabels: { app: "web" } }, policyTypes: ["Egress"], egress: [{ ...(to ? { to } : {}), ports }] }),
    ];
    const dns = [{ namespaceSelector: {}, podSelector: { matchLabels: { "k8s-app": "kube-dns" } } }];

    test("UDP 53 is not TCP 53", () => {
        const udp = evaluateReachability(webEgressPorts([{ protocol: "UDP", port: 53 }], dns), { endpoints: [KUBE_DNS] });
        assert.equal(udp.allows("a/web", "kube-system/kube-dns", 53, "UDP"), true);
        assert.equal(udp.allows("a/web", "kube-system/kube-dns", 53, "TCP"), false);
        assert.equal(udp.portsBetween("a/web", "kube-system/kube-dns"), "UDP 53");
        const both = evaluateReachability(
            webEgressPorts(
                [
                    { protocol: "UDP", port: 53 },
                    { protocol: "TCP", port: 53 },
                ],
                dns,
            ),
            { endpoints: [KUBE_DNS] },
        );
        assert.equal(both.portsBetween("a/web", "kube-system/kube-dns"), "TCP 53, UDP 53");
    });

    test("protocol defaults to TCP", () => {
        const r = evaluateReachability(webEgressPorts([{ port: 5432 }]));
        assert.equal(r.allows("a/web", "b/db", 5432), true);
        assert.equal(r.allows("a/web", "b/db", 5432, "UDP"), false);
        assert.equal(r.portsBetween("a/web", "b/db"), "TCP 5432");
    });

    test("endPort makes an inclusive range", () => {
        const r = evaluateReachability(webEgressPorts([{ port: 8000, endPort: 8010 }]));
        assert.deepEqual(
            [7999, 8000, 8005, 8010, 8011].map((p) => r.allows("a/web", "b/db", p)),
            [false, true, true, true, false],
        );
        assert.equal(r.portsBetween("a/web", "b/db"), "TCP 8000-8010");
        assert.deepEqual(
            r.connections.filter((c) => c.from === "a/web" && c.to === "b/db"),
            [{ from: "a/web", to: "b/db", protocol: "TCP", ports: [{ from: 8000, to: 8010 }] }],
        );
    });

    test("a protocol without a port is every port of that protocol; ports: [] is every port of every protocol", () => {
        assert.equal(evaluateReachability(webEgressPorts([{ protocol: "UDP" }])).portsBetween("a/web", "b/db"), "UDP any");
        assert.equal(evaluateReachability(webEgressPorts([])).portsBetween("a/web", "b/db"), "any");
        assert.equal(evaluateReachability(webEgressPorts([{ port: 80 }, { port: 443 }, { port: 81 }])).portsBetween("a/web", "b/db"), "TCP 80-81,443");
    });

    test("an endpoint's served ports bound what reaches it", () => {
        const r = evaluateReachability(webEgressPorts([]), { endpoints: [APISERVER, KUBE_DNS] });
        assert.equal(r.portsBetween("a/web", "apiserver"), "TCP 443");
        assert.equal(r.portsBetween("a/web", "kube-system/kube-dns"), "TCP 53, UDP 53");
        assert.equal(r.allows("a/web", "apiserver", 6443), false);
    });
});

describe("named ports", () => {
    const dbIngressPorts = (ports: unknown[]) => [...BASE, policy("b", "db-in", { podSelector: { matchLabels: { app: "db" } }, ingress: [{ ports }] })];

    test("an ingress rule's named port resolves against the destination pod's container ports", () => {
        const r = evaluateReachability(dbIngressPorts([{ port: "pg" }]));
        assert.equal(r.portsBetween("a/web", "b/db"), "TCP 5432");
        assert.equal(r.allows("a/web", "b/db", 9187), false);
    });

    test("a name the destination does not declare, or declares for another protocol, allows nothing", () => {
        assert.deepEqual(sourcesOf(evaluateReachability(dbIngressPorts([{ port: "postgres" }])), "b/db"), []);
        assert.deepEqual(sourcesOf(evaluateReachability(dbIngressPorts([{ port: "pg", protocol: "UDP" }])), "b/db"), []);
        // Resolved by name and protocol: a UDP port named dns, a TCP one named dns-tcp.
        const r = evaluateReachability(
            [
                ...BASE,
                policy("a", "web-out", {
                    podSelector: { matchLabels: { app: "web" } },
                    policyTypes: ["Egress"],
                    egress: [
                        {
                            ports: [
                                { port: "dns", protocol: "UDP" },
                                { port: "dns", protocol: "TCP" },
                            ],
                        },
                    ],
                }),
            ],
            { endpoints: [KUBE_DNS] },
        );
        assert.equal(r.portsBetween("a/web", "kube-system/kube-dns"), "UDP 53");
    });

    test("an egress rule's named port resolves per destination, and never matches an address", () => {
        const manifests = [
            ...BASE,
            deployment("b", "api", { app: "api" }, [{ containerPort: 9090, name: "http" }]),
            policy("a", "web-out", { podSelector: { matchLabels: { app: "web" } }, policyTypes: ["Egress"], egress: [{ ports: [{ port: "http" }] }] }),
        ];
        const r = evaluateReachability(manifests, { endpoints: [INTERNET] });
        assert.equal(r.portsBetween("a/web", "a/web"), "TCP 8080");
        assert.equal(r.portsBetween("a/web", "b/api"), "TCP 9090");
        assert.equal(r.portsBetween("a/web", "b/db"), "");
        assert.equal(r.portsBetween("a/web", "internet"), "");
    });
});

// ---- workloads ----------------------------------------------------------------------------------------

describe("workloads", () => {
    test("Deployment, StatefulSet, DaemonSet, Job, CronJob, Pod and SandboxTemplate pods become groups; other objects are ignored", () => {
        const tpl = (labels: Labels, ports: Port[]) => ({ metadata: { labels }, spec: podSpec(ports) });
        const manifests: Manifest[] = [
            {
                apiVersion: "apps/v1",
                kind: "StatefulSet",
                metadata: { name: "replicas", namespace: "env" },
                spec: { serviceName: "x", selector: {}, template: tpl({ app: "env" }, [{ containerPort: 8000, name: "http" }]) },
            },
            {
                apiVersion: "apps/v1",
                kind: "DaemonSet",
                metadata: { name: "agent", namespace: "env" },
                spec: { selector: {}, template: tpl({ app: "agent" }, []) },
            },
            {
                apiVersion: "batch/v1",
                kind: "Job",
                metadata: { name: "train-run-1", namespace: "training" },
                spec: {
                    template: {
                        metadata: { labels: { app: "trainer" } },
                        spec: {
                            // A native sidecar's ports count.
                            initContainers: [{ name: "vllm", image: "v:1", restartPolicy: "Always", ports: [{ containerPort: 8000, name: "vllm" }] }],
                            containers: [{ name: "trainer", image: "t:1", ports: [{ containerPort: 29500, name: "dist", protocol: "TCP" }] }],
                        },
                    },
                },
            },
            {
                apiVersion: "batch/v1",
                kind: "CronJob",
                metadata: { name: "cleanup", namespace: "training" },
                spec: { schedule: "@daily", jobTemplate: { spec: { template: tpl({ app: "cleanup" }, []) } } },
            },
            {
                apiVersion: "v1",
                kind: "Pod",
                metadata: { name: "debug", namespace: "training", labels: { app: "debug" } },
                spec: podSpec([{ containerPort: 53, protocol: "UDP", name: "dns" }]),
            },
            {
                apiVersion: "extensions.agents.x-k8s.io/v1beta1",
                kind: "SandboxTemplate",
                metadata: { name: "pool", namespace: "sandboxes" },
                spec: { podTemplate: tpl({ app: "sandbox" }, [{ containerPort: 8888, name: "command" }]), networkPolicyManagement: "Unmanaged" },
            },
            { apiVersion: "v1", kind: "Service", metadata: { name: "svc", namespace: "env" }, spec: { selector: { app: "env" }, ports: [{ port: 80 }] } },
            { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cm", namespace: "env" }, data: {} },
            // Same kind name, other group: not a workload this evaluator knows.
            { apiVersion: "example.com/v1", kind: "Deployment", metadata: { name: "fake", namespace: "env" }, spec: { template: tpl({}, []) } },
        ];
        const r = evaluateReachability(manifests);
        const summary = r.parties.map((p) => [p.id, p.origin, p.labels, p.ports.map((x) => `${x.name ?? ""}=${x.protocol}/${x.port}`)]);
        assert.deepEqual(summary, [
            ["env/replicas", "StatefulSet", { app: "env" }, ["http=TCP/8000"]],
            ["env/agent", "DaemonSet", { app: "agent" }, []],
            [
                "training/train-run-1",
                "Job",
                { app: "trainer", "batch.kubernetes.io/job-name": "train-run-1", "job-name": "train-run-1" },
                ["vllm=TCP/8000", "dist=TCP/29500"],
            ],
            ["training/cleanup", "CronJob", { app: "cleanup" }, []],
            ["training/debug", "Pod", { app: "debug" }, ["dns=UDP/53"]],
            ["sandboxes/pool", "SandboxTemplate", { app: "sandbox" }, ["command=TCP/8888"]],
        ]);
    });

    test("a policy may select a Job's pods by the job-name label the Job controller adds", () => {
        const job = (name: string): Manifest => ({
            apiVersion: "batch/v1",
            kind: "Job",
            metadata: { name, namespace: "training" },
            spec: { template: { metadata: { labels: { app: "trainer" } }, spec: podSpec([]) } },
        });
        const r = evaluateReachability([
            job("train-old"),
            job("train-new"),
            policy("training", "new-only", { podSelector: { matchLabels: { "batch.kubernetes.io/job-name": "train-new" } }, ingress: [] }),
        ]);
        assert.deepEqual(sourcesOf(r, "training/train-new"), []);
        assert.deepEqual(sourcesOf(r, "training/train-old"), ["training/train-new", "training/train-old"]);
    });

    test("two kinds with one name in one namespace get the kind in their ids", () => {
        const r = evaluateReachability([
            deployment("a", "x", { app: "x" }),
            {
                apiVersion: "apps/v1",
                kind: "StatefulSet",
                metadata: { name: "x", namespace: "a" },
                spec: { template: { metadata: { labels: {} }, spec: podSpec([]) } },
            },
        ]);
        assert.deepEqual(
            r.parties.map((p) => p.id),
            ["a/x (Deployment)", "a/x (StatefulSet)"],
        );
    });

    test("asking about an unknown id fails and names the known ones", () => {
        const r = evaluateReachability(BASE);
        assert.throws(() => r.allows("a/web", "b/nope", 80), /no pod group or endpoint "b\/nope"; known: a\/client, a\/web, b\/client, b\/db, b\/other/);
    });
});

// ---- input problems -------------------------------------------------------------------------------------

describe("input problems", () => {
    test("every problem is reported at once, each naming the object and the field", () => {
        const bad = policy("a", "bad", {
            podSelector: { matchExpressions: [{ key: "tier", operator: "Equals", values: ["x"] }] },
            policyTypes: ["Ingress", "Sideways"],
            ingress: [
                {
                    from: [
                        { ipBlock: { cidr: "10.0.0.0/8" }, podSelector: {} },
                        {},
                        { ipBlock: { cidr: "10.0.0.0/24", except: ["192.168.0.0/24", "10.0.0.0/24"] } },
                        { ipBlock: { cidr: "10.0.0.1/8" } },
                        { ipBlock: { cidr: "300.0.0.0/8" } },
                        {
                            podSelector: {
                                matchExpressions: [
                                    { key: "a", operator: "In" },
                                    { key: "b", operator: "Exists", values: ["x"] },
                                ],
                            },
                        },
                    ],
                    ports: [{ port: "http", endPort: 90 }, { port: 100, endPort: 99 }, { protocol: "ICMP" }, { port: 0 }, { port: "8080" }],
                },
            ],
        });
        const managedTemplate: Manifest = {
            apiVersion: "extensions.agents.x-k8s.io/v1beta1",
            kind: "SandboxTemplate",
            metadata: { name: "pool", namespace: "sb" },
            spec: { podTemplate: { spec: podSpec([]) } },
        };
        const hostNet: Manifest = { ...deployment("a", "node-agent", {}), spec: { template: { spec: { hostNetwork: true, containers: [] } } } };
        const oldApi = { ...policy("a", "old", { podSelector: {} }), apiVersion: "extensions/v1beta1" };
        const err = (() => {
            try {
                evaluateReachability([bad, managedTemplate, hostNet, oldApi], {
                    endpoints: [
                        { name: "both", ip: "1.2.3.4", namespace: "x" },
                        { name: "bad-ip", ip: "1.2.3", ports: [{ port: 70000 }] },
                    ],
                    podCidrs: ["10.244.0.0/33"],
                });
            } catch (e) {
                return e;
            }
            return undefined;
        })();
        assert.ok(err instanceof ReachabilityInputError, String(err));
        const at = "NetworkPolicy a/bad: spec.";
        assert.deepEqual(err.problems, [
            `${at}policyTypes: "Sideways" is not Ingress or Egress`,
            `${at}ingress[0].from[0]: ipBlock may not be combined with podSelector or namespaceSelector`,
            `${at}ingress[0].from[1]: a peer must set podSelector, namespaceSelector or ipBlock`,
            `${at}ingress[0].from[2].ipBlock.except[0]: 192.168.0.0/24 must be a strict subset of cidr 10.0.0.0/24`,
            `${at}ingress[0].from[2].ipBlock.except[1]: 10.0.0.0/24 must be a strict subset of cidr 10.0.0.0/24`,
            `${at}ingress[0].from[3].ipBlock.cidr: 10.0.0.1/8 has bits set beyond the prefix length`,
            `${at}ingress[0].from[4].ipBlock.cidr: "300.0.0.0/8" is not a CIDR`,
            `${at}ingress[0].from[5].podSelector.matchExpressions[0]: operator In needs at least one value`,
            `${at}ingress[0].from[5].podSelector.matchExpressions[1]: operator Exists takes no values`,
            `${at}ingress[0].ports[0].endPort: may only be set with a numeric port`,
            `${at}ingress[0].ports[1].endPort: 99 must be a port number >= port 100`,
            `${at}ingress[0].ports[2].protocol: "ICMP" is not TCP, UDP or SCTP`,
            `${at}ingress[0].ports[3].port: 0 is not a port number (1-65535)`,
            `${at}ingress[0].ports[4].port: "8080" is not a valid port name (IANA_SVC_NAME; a number must be written as a number)`,
            `${at}podSelector.matchExpressions[0]: operator "Equals" is not one of In, NotIn, Exists, DoesNotExist`,
            "SandboxTemplate sb/pool: agent-sandbox creates its own NetworkPolicy for this template (networkPolicyManagement Managed, the default), which is not among the manifests: set networkPolicyManagement: Unmanaged or add that policy",
            "Deployment a/node-agent: hostNetwork pods are outside what NetworkPolicy defines",
            'NetworkPolicy a/old: apiVersion "extensions/v1beta1" is not networking.k8s.io/v1',
            "endpoint both: set exactly one of ip (an address) or namespace (a pod)",
            'endpoint bad-ip: ip "1.2.3" is not an IPv4 address',
            "endpoint bad-ip: port 70000 is not a port number",
            'podCidrs: "10.244.0.0/33" is not an IPv4 CIDR',
        ]);
        assert.match(err.message, /^cannot evaluate reachability:\n- NetworkPolicy a\/bad: spec\.policyTypes/);
    });

    test("a preview's unknown values are refused", () => {
        const unknown = policy("a", "p", { podSelector: { matchLabels: { app: "04da6b54-80e4-46f7-96ec-b56ff0331ba9" } } });
        assert.throws(() => evaluateReachability([...BASE, unknown]), /a manifest holds a value unknown at preview: evaluate the update run's resources/);
    });
});

// ---- the table ----------------------------------------------------------------------------------------

describe("reachabilityTable", () => {
    const manifests = [
        ...BASE,
        policy("a", "deny", { podSelector: {}, policyTypes: ["Ingress", "Egress"] }),
        policy("a", "web", {
            podSelector: { matchLabels: { app: "web" } },
            ingress: [{ from: [{ podSelector: { matchLabels: { role: "client" } } }], ports: [{ port: "http" }] }],
            egress: [
                {
                    to: [{ namespaceSelector: {}, podSelector: { matchLabels: { "k8s-app": "kube-dns" } } }],
                    ports: [
                        { protocol: "UDP", port: 53 },
                        { protocol: "TCP", port: 53 },
                    ],
                },
                { to: [{ ipBlock: { cidr: "0.0.0.0/0", except: ["169.254.0.0/16"] } }], ports: [{ port: 443 }] },
            ],
        }),
        policy("a", "client", { podSelector: { matchLabels: { role: "client" } }, egress: [{ to: [{ podSelector: { matchLabels: { app: "web" } } }] }] }),
        policy("b", "deny", { podSelector: {}, policyTypes: ["Ingress", "Egress"] }),
    ];
    const endpoints = [INTERNET, METADATA, APISERVER, KUBE_DNS];
    const EXPECTED = [
        "| source | destination | ports |",
        "|---|---|---|",
        "| a/client | a/web | TCP 8080 |",
        "| a/web | apiserver | TCP 443 |",
        "| a/web | internet | TCP 443 |",
        "| a/web | kube-system/kube-dns | TCP 53, UDP 53 |",
        "",
    ].join("\n");

    test("one row per allowed pair, sorted, the same whatever the manifests' order", () => {
        assert.equal(reachabilityTable(evaluateReachability(manifests, { endpoints })), EXPECTED);
        assert.equal(reachabilityTable(evaluateReachability([...manifests].reverse(), { endpoints: [...endpoints].reverse() })), EXPECTED);
    });

    test("names and the rows shown are the caller's to choose; a | in a name is escaped", () => {
        const table = reachabilityTable(evaluateReachability(manifests, { endpoints }), {
            name: (p) => (p.kind === "pods" ? `${p.name} pods` : `${p.name} | addr`),
            include: (_from, to) => to.kind === "address",
        });
        assert.equal(
            table,
            [
                "| source | destination | ports |",
                "|---|---|---|",
                "| web pods | apiserver \\| addr | TCP 443 |",
                "| web pods | internet \\| addr | TCP 443 |",
                "",
            ].join("\n"),
        );
    });

    test("an empty result is a header alone", () => {
        const r = evaluateReachability([
            ...BASE,
            policy("a", "deny", { podSelector: {}, policyTypes: ["Ingress", "Egress"] }),
            policy("b", "deny", { podSelector: {}, policyTypes: ["Ingress", "Egress"] }),
        ]);
        assert.equal(reachabilityTable(r), "| source | destination | ports |\n|---|---|---|\n");
    });
});

// ---- from a Pulumi mock run -------------------------------------------------------------------------------

describe("from recorded resources", () => {
    test("manifestsOf (scripts/lib/plan.ts) turns recorded Kubernetes resources into objects the evaluator reads; components are skipped", () => {
        const rec = (type: string, inputs: Record<string, any>, custom = true): RecordedResource => ({
            type,
            name: inputs.metadata?.name ?? type,
            inputs,
            custom,
        });
        const resources: RecordedResource[] = [
            rec("agentrl:index:Platform", {}, false),
            rec("kubernetes:yaml/v2:ConfigFile", { file: "x.yaml" }, false),
            rec("kubernetes:core/v1:Namespace", { metadata: { name: "training", labels: { "agentrl.dev/role": "training" } } }),
            rec("kubernetes:batch/v1:Job", {
                metadata: { name: "train-1", namespace: "training" },
                spec: { template: { metadata: { labels: { app: "trainer" } }, spec: podSpec([{ containerPort: 8000, name: "vllm" }]) } },
            }),
            rec("kubernetes:apps/v1:Deployment", deployment("ingress", "proxy", { app: "proxy" }, [{ containerPort: 8080 }])),
            rec("kubernetes:networking.k8s.io/v1:NetworkPolicy", {
                metadata: { name: "vllm", namespace: "training" },
                spec: {
                    podSelector: { matchLabels: { app: "trainer" } },
                    policyTypes: ["Ingress"],
                    ingress: [
                        {
                            from: [
                                {
                                    namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "ingress" } },
                                    podSelector: { matchLabels: { app: "proxy" } },
                                },
                            ],
                            ports: [{ port: "vllm" }],
                        },
                    ],
                },
            }),
        ];
        const r = evaluateReachability(manifestsOf(resources));
        assert.deepEqual(r.parties.map((p) => p.id).sort(), ["ingress/proxy", "training/train-1"]);
        assert.deepEqual(sourcesOf(r, "training/train-1"), ["ingress/proxy"]);
        assert.equal(r.portsBetween("ingress/proxy", "training/train-1"), "TCP 8000");
    });
});
