/**
 * Who may reach whom, computed from the NetworkPolicies every Kubernetes recipe renders
 * (test/helpers/reachability.ts evaluates them as Kubernetes does), against the table of paths
 * the system needs, written in docs/design/network-paths.md: any path the policies allow that the doc does
 * not list fails, and so does a listed path they do not allow.
 * Run: node --import tsx --test test/stack/reachability.test.ts
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import { HARBOR_RECIPE_NAMES, MULTI_NODE_RECIPE_NAMES, RECIPE_NAMES } from "../../components/config";
import { METRICS_PORTS } from "../../components/shared/metrics-pods";
import { planToDir } from "../../scripts/lib/plan";
import { evaluateReachability, reachabilityTable, type ExtraEndpoint, type Manifest, type Reachability } from "../helpers/reachability";
import {
    concernsStack,
    DECOYS,
    ELSEWHERE_NAMESPACE,
    KUBE_DNS,
    OLD_RUN,
    OTHER_POD,
    OWN_DNS,
    OWN_DNS_SHAPE,
    observedManifests,
    oldRunJob,
    reachedFromElsewhere,
    readmeTable,
    roleName,
    SCRAPER,
    trainerElsewhere,
    widenTrainerPeers,
} from "../helpers/reachability-views";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "agentrl-reach-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** What the cluster has besides the stack: the internet, the metadata service, the API server, DNS, and any other pod. */
const ENDPOINTS: readonly ExtraEndpoint[] = [
    { name: "internet", ip: "8.8.8.8" },
    { name: "metadata", ip: "169.254.169.254" },
    // The API server's endpoint address (kube-proxy DNATs the Service to it before policies apply).
    { name: "apiserver", ip: "10.0.0.10", ports: [{ port: 443 }, { port: 6443 }] },
    KUBE_DNS,
    OTHER_POD,
];
const POD_CIDRS = ["10.244.0.0/16"];

async function reachabilityOf(
    recipe: string,
    extra: Manifest[] = [],
    platformOverride?: Record<string, unknown>,
    endpoints: readonly ExtraEndpoint[] = ENDPOINTS,
): Promise<{ r: Reachability; manifests: Manifest[] }> {
    const outDir = path.join(tmp, `${recipe}-${platformOverride ? JSON.stringify(platformOverride).replace(/[^a-z0-9]+/gi, "-") : "plain"}`);
    const res = await planToDir({ recipe, target: "kubernetes" }, { outDir, platformOverride });
    const manifests = [...res.manifests, ...extra];
    return { r: evaluateReachability(manifests, { endpoints, podCidrs: POD_CIDRS }), manifests };
}

describe("reachability: the rendered policies allow exactly the paths docs/design/network-paths.md lists", () => {
    for (const recipe of [...RECIPE_NAMES, ...MULTI_NODE_RECIPE_NAMES, ...HARBOR_RECIPE_NAMES]) {
        test(`${recipe} on kubernetes`, async () => {
            const { r } = await reachabilityOf(recipe);
            const computed = reachabilityTable(r, { name: roleName, include: concernsStack }).trim();
            assert.equal(
                computed,
                readmeTable(recipe),
                `docs/design/network-paths.md's table for ${recipe} differs from what the policies allow; computed:\n${computed}`,
            );
        });
    }
});

describe("reachability: what the issue promises", () => {
    test("coding env replicas reach nothing but DNS; their router alone reaches them", async () => {
        const { r } = await reachabilityOf("mbpp-whitebox");
        const replica = r.parties.find((p) => roleName(p) === "env-coding-replica")!;
        const out = [...new Set(r.connections.filter((c) => c.from === replica.id).map((c) => c.to))];
        assert.deepEqual(out, ["kube-system/kube-dns"]);
        assert.equal(r.portsBetween(replica.id, "kube-system/kube-dns"), "TCP 53, UDP 53");
        const into = r.connections.filter((c) => c.to === replica.id).map((c) => roleName(r.parties.find((p) => p.id === c.from)!));
        assert.deepEqual(into, ["env-coding-router"]);
        for (const target of ["internet", "metadata", "apiserver"]) assert.equal(r.allows(replica.id, target, 443), false, target);
    });

    test("sandboxes reach only DNS and the ingress; the other pod reaches no pod of the stack", async () => {
        const { r } = await reachabilityOf("opencode-blackbox");
        const sandbox = r.parties.find((p) => roleName(p) === "sandbox")!;
        const out = [...new Set(r.connections.filter((c) => c.from === sandbox.id).map((c) => roleName(r.parties.find((p) => p.id === c.to)!)))].sort();
        assert.deepEqual(out, ["kube-dns", "vllm-ingress"]);
        const strangerReaches = r.connections.filter((c) => c.from === "default/other-pod").map((c) => r.parties.find((p) => p.id === c.to)!);
        assert.deepEqual(
            strangerReaches.filter((p) => p.kind === "pods" && p.namespace !== "kube-system" && p.namespace !== "default").map((p) => p.id),
            [],
        );
    });

    test("an old run's trainer pod left behind is unreachable (the namespace's standing default deny)", async () => {
        const first = await reachabilityOf("opencode-blackbox");
        const { r } = await reachabilityOf("opencode-blackbox", [oldRunJob(first.manifests)]);
        const old = r.parties.find((p) => p.name === OLD_RUN)!;
        assert.ok(old, "the old Job is a pod group");
        assert.deepEqual(
            r.connections.filter((c) => c.to === old.id),
            [],
            "nothing may open a connection to it, vLLM's 8000 included",
        );
    });
});

describe("reachability: a pod elsewhere with the trainer's labels reaches nothing of the stack (the trainer peers' namespaceSelector matters)", () => {
    for (const recipe of RECIPE_NAMES) {
        test(`${recipe}: the trainer reaches the stack, its look-alike in namespace ${ELSEWHERE_NAMESPACE} nothing; widened to {}, it would`, async () => {
            const first = await reachabilityOf(recipe);
            const decoy = trainerElsewhere(first.manifests);
            assert.ok(decoy, `${recipe} has a trainer Job`);
            const endpoints = [...ENDPOINTS, decoy];
            const r = evaluateReachability(first.manifests, { endpoints, podCidrs: POD_CIDRS });
            const trainer = r.parties.find((p) => p.origin === "Job")!;
            assert.ok(
                r.connections.some((c) => c.from === trainer.id && stackPods(r).some((p) => p.id === c.to && p.id !== trainer.id)),
                `${recipe}: the trainer itself reaches a pod of the stack (else the look-alike proves nothing)`,
            );
            assert.deepEqual(reachedFromElsewhere(r), [], `${recipe}: the trainer's look-alike in ${ELSEWHERE_NAMESPACE}`);
            // The mutation the look-alike exists for: every namespaceSelector+podSelector peer widened to any namespace.
            const widened = evaluateReachability(widenTrainerPeers(first.manifests), { endpoints, podCidrs: POD_CIDRS });
            assert.notDeepEqual(reachedFromElsewhere(widened), [], `${recipe}: widened peers must let the look-alike in`);
        });
    }
});

/** Every pod group of the stack (not the cluster's own pods). */
const stackPods = (r: Reachability) =>
    r.parties.filter((p) => p.kind === "pods" && p.namespace !== "kube-system" && p.namespace !== "default" && p.namespace !== "dns");

/** Every ipBlock an egress rule of the manifests names, with the rule's ports. */
function egressIpBlocks(manifests: readonly Manifest[]): Array<{ policy: string; cidr: string; ports: string[] }> {
    return manifests
        .filter((m) => m.kind === "NetworkPolicy")
        .flatMap((m) =>
            (m.spec.egress ?? []).flatMap((rule: any) =>
                (rule.to ?? [])
                    .filter((peer: any) => peer.ipBlock)
                    .map((peer: any) => ({
                        policy: m.metadata.name,
                        cidr: peer.ipBlock.cidr,
                        ports: (rule.ports ?? []).map((p: any) => `${p.protocol} ${p.port}`),
                    })),
            ),
        );
}

describe("reachability: DNS egress in each shape (target.dns) allows DNS and nothing more", () => {
    // Stand-ins the policies talk about: the node-local cache's address, a neighbour on the same
    // link-local range, and DNS pods of a provider of one's own.
    const nodeLocal = { name: "node-local-dns", ip: "169.254.20.10" };
    const linkLocalNeighbour = { name: "link-local-other", ip: "169.254.20.11" };
    const endpoints: readonly ExtraEndpoint[] = [...ENDPOINTS, nodeLocal, linkLocalNeighbour, OWN_DNS];
    const recipes = [...RECIPE_NAMES, ...MULTI_NODE_RECIPE_NAMES, ...HARBOR_RECIPE_NAMES];

    for (const recipe of recipes) {
        test(`${recipe}, node-local: every stack pod reaches the cache on 53 UDP+TCP only, the metadata service and the rest of 169.254/16 on nothing`, async () => {
            const { r, manifests } = await reachabilityOf(recipe, [], { target: { dns: { kind: "node-local" } } }, endpoints);
            const pods = stackPods(r);
            const dnsClients = pods.filter((p) => r.allows(p.id, "kube-system/kube-dns", 53, "UDP"));
            assert.ok(dnsClients.length >= 3, `${recipe}: the locked-down pods still reach kube-dns (the cache's upstream and fallback)`);
            for (const p of dnsClients) {
                assert.equal(r.portsBetween(p.id, "node-local-dns"), "TCP 53, UDP 53", `${p.id} -> node-local cache`);
            }
            for (const p of pods) {
                for (const port of [53, 80, 443]) {
                    assert.equal(r.allows(p.id, "metadata", port, "UDP"), false, `${p.id} -> metadata UDP ${port}`);
                    assert.equal(r.allows(p.id, "metadata", port, "TCP"), false, `${p.id} -> metadata TCP ${port}`);
                    assert.equal(r.allows(p.id, "link-local-other", port, "UDP"), false, `${p.id} -> 169.254.20.11 UDP ${port}`);
                }
                assert.equal(r.allows(p.id, "node-local-dns", 80), false, `${p.id} -> the cache on 80`);
            }
            // The policies themselves: a link-local address appears only as the cache's /32, only on 53.
            for (const b of egressIpBlocks(manifests).filter((b) => b.cidr.startsWith("169.254."))) {
                assert.equal(b.cidr, "169.254.20.10/32", `${b.policy}: ${b.cidr}`);
                assert.deepEqual(b.ports, ["UDP 53", "TCP 53"], `${b.policy}: ${b.cidr}`);
            }
        });
    }

    test("kube-dns (the default): no link-local address anywhere, the cache unreachable", async () => {
        const { r, manifests } = await reachabilityOf("opencode-blackbox", [], undefined, endpoints);
        assert.deepEqual(
            egressIpBlocks(manifests).filter((b) => b.cidr.startsWith("169.254.")),
            [],
        );
        for (const p of stackPods(r)) assert.equal(r.allows(p.id, "node-local-dns", 53, "UDP"), false, p.id);
    });

    test("selector: the stack's pods reach the named DNS pods on 53 only, and kube-dns not at all", async () => {
        const { r } = await reachabilityOf("opencode-blackbox", [], { target: { dns: OWN_DNS_SHAPE } }, endpoints);
        const clients = stackPods(r).filter((p) => r.allows(p.id, "dns/own-dns", 53, "UDP"));
        assert.ok(clients.length >= 3);
        for (const p of clients) {
            assert.equal(r.allows(p.id, "dns/own-dns", 53, "TCP"), true, p.id);
            // The trainer's API-server rule (any private address on 443/6443 when apiServerCidrs is unset) is not DNS's.
            assert.equal(r.allows(p.id, "dns/own-dns", 80), false, p.id);
        }
        for (const p of stackPods(r)) assert.equal(r.allows(p.id, "kube-system/kube-dns", 53, "UDP"), false, p.id);
    });
});

const OBSERVED_ENDPOINTS: readonly ExtraEndpoint[] = [...ENDPOINTS, SCRAPER, ...DECOYS];
/** Every metrics port of the contract; vLLM's 8000 is not one. */
const METRICS_PORT_NUMBERS = new Set(Object.values(METRICS_PORTS).map((p) => p.port));

async function observedReachability(recipe: string, mutate: (ms: Manifest[]) => Manifest[] = (ms) => ms): Promise<Reachability> {
    return evaluateReachability(mutate(await observedManifests(recipe)), { endpoints: OBSERVED_ENDPOINTS, podCidrs: POD_CIDRS });
}

/** What the scrape rule may allow: the scraper to the metrics ports, nothing else new; every problem, one per line. */
function scrapeProblems(r: Reachability): string[] {
    const problems: string[] = [];
    const stack = r.parties.filter((p) => p.kind === "pods" && p.origin !== "endpoint");
    for (const p of stack) {
        for (const c of r.connections.filter((c) => c.from === "monitoring/prometheus" && c.to === p.id)) {
            for (const range of c.ports) {
                for (let port = range.from; port <= Math.min(range.to, range.from + 70000); port++)
                    if (c.protocol !== "TCP" || !METRICS_PORT_NUMBERS.has(port))
                        problems.push(`the scraper reaches ${p.id} on ${c.protocol} ${port}, not a metrics port`);
            }
        }
        if (r.allows("monitoring/prometheus", p.id, 8000)) problems.push(`the scraper reaches ${p.id} on vLLM's 8000`);
        for (const d of DECOYS) {
            const id = `${d.namespace}/${d.name}`;
            if (r.connections.some((c) => c.from === id && c.to === p.id)) problems.push(`${id} (not the scraper) reaches ${p.id}`);
        }
    }
    return [...new Set(problems)];
}

describe("reachability: observability on, the scraper reaches the metrics ports and nothing else", () => {
    for (const recipe of ["mbpp-whitebox", "opencode-blackbox", "opencode-blackbox-32b"]) {
        test(`${recipe} with observability: the network-paths table`, async () => {
            const r = await observedReachability(recipe);
            const computed = reachabilityTable(r, { name: roleName, include: concernsStack }).trim();
            assert.equal(
                computed,
                readmeTable(`${recipe}+observability`),
                `docs/design/network-paths.md's table for ${recipe}+observability differs; computed:\n${computed}`,
            );
        });
    }

    for (const recipe of [...RECIPE_NAMES, ...MULTI_NODE_RECIPE_NAMES, ...HARBOR_RECIPE_NAMES]) {
        test(`${recipe}: only the scraper, only on the metrics ports (never 8000), and every other path as with observability off`, async () => {
            const r = await observedReachability(recipe);
            assert.deepEqual(scrapeProblems(r), []);
            const off = (await reachabilityOf(recipe)).r;
            const others = (x: Reachability) =>
                reachabilityTable(x, { name: roleName, include: (from, to) => concernsStack(from, to) && from.name !== "prometheus" }).trim();
            assert.equal(others(r), others(off));
            const scraped = r.connections.filter((c) => c.from === "monitoring/prometheus" && r.parties.find((p) => p.id === c.to)?.origin !== "endpoint");
            assert.ok(scraped.length > 0, "the scraper reaches the stack's metrics ports");
        });
    }

    test("the check fails when the scrape rule opens vLLM's 8000", async () => {
        const r = await observedReachability("opencode-blackbox", (ms) =>
            ms.map((m) =>
                m.kind === "NetworkPolicy" && m.metadata.namespace.endsWith("-training")
                    ? structuredClone({
                          ...m,
                          spec: {
                              ...m.spec,
                              ingress: (m.spec.ingress ?? []).map((rule: any) =>
                                  rule.from?.some((f: any) => f.namespaceSelector?.matchLabels?.["kubernetes.io/metadata.name"] === "monitoring")
                                      ? { ...rule, ports: [...rule.ports, { protocol: "TCP", port: 8000 }] }
                                      : rule,
                              ),
                          },
                      })
                    : m,
            ),
        );
        assert.ok(
            scrapeProblems(r).some((p) => p.includes("on vLLM's 8000")),
            scrapeProblems(r).join("\n"),
        );
    });

    test("the check fails when the scrape rule admits any pod of the namespace", async () => {
        const r = await observedReachability("mbpp-whitebox", (ms) =>
            ms.map((m) =>
                m.kind === "NetworkPolicy"
                    ? structuredClone({
                          ...m,
                          spec: {
                              ...m.spec,
                              ingress: (m.spec.ingress ?? []).map((rule: any) => ({
                                  ...rule,
                                  from: rule.from?.map((f: any) =>
                                      f.namespaceSelector?.matchLabels?.["kubernetes.io/metadata.name"] === "monitoring"
                                          ? { namespaceSelector: f.namespaceSelector }
                                          : f,
                                  ),
                              })),
                          },
                      })
                    : m,
            ),
        );
        assert.ok(
            scrapeProblems(r).some((p) => p.startsWith("monitoring/grafana (not the scraper) reaches")),
            scrapeProblems(r).join("\n"),
        );
    });
});
