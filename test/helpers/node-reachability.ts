// The reachability matrix measured on the real node (issue #29): a recipe's rendered Namespaces
// and NetworkPolicies applied as they are, one stand-in pod per pod group the policies talk about
// (the group's namespace, labels and declared container ports; named ports resolve against them),
// each running test/node/standin.py's listener on every port it is probed on, and the outside
// addresses (internet, metadata service, an API server endpoint, the node-local DNS cache) served
// by the same listener in the node fixture's "outside" network namespace. Every source pod then
// opens a real connection (TCP) or exchange (UDP) to every other party on each of those ports; the
// result must equal what test/helpers/reachability.ts computes from the same manifests, port by
// port. The pods are stand-ins (python3 listeners on the fixture's sandbox-runtime image): they
// carry the workloads' labels and ports, not their programs.
import * as fs from "node:fs";
import * as path from "node:path";
import { HARDENED_CONTAINER, type Node, type NodeAddresses } from "./node";
import { evaluateReachability, type ExtraEndpoint, type Manifest, type Party, type Protocol, type Reachability } from "./reachability";
import { KUBE_DNS, OTHER_POD } from "./reachability-views";
import { scaledCount, scaledSeconds } from "./waits";

export type { NodeAddresses } from "./node";

const STANDIN = fs.readFileSync(path.resolve(__dirname, "..", "node", "standin.py"), "utf8");
const STANDIN_LABEL = "agentrl.test/reachability-standin";

/** Ports a pod stand-in serves beyond its declared ones: the API server's two, vLLM's, and one no policy names (the "any" rows). */
const EXTRA_POD_PORTS: ReadonlyArray<{ port: number; protocol: Protocol }> = [
    { port: 443, protocol: "TCP" },
    { port: 6443, protocol: "TCP" },
    { port: 8000, protocol: "TCP" },
    { port: 12345, protocol: "TCP" },
    { port: 12345, protocol: "UDP" },
];

/**
 * The endpoints of test/stack/reachability.test.ts at the node's addresses, plus the node's real API
 * server (`apiserver-node`, its kube-apiserver on the node address: only a TCP connect is checked,
 * it speaks TLS).
 */
export function nodeEndpoints(a: NodeAddresses): ExtraEndpoint[] {
    return [
        { name: "internet", ip: a.internet },
        { name: "metadata", ip: a.metadata },
        { name: "apiserver", ip: a.apiserverStandin, ports: [{ port: 443 }, { port: 6443 }] },
        KUBE_DNS,
        OTHER_POD,
        { name: APISERVER_NODE, ip: a.nodeIp, ports: [{ port: a.apiPort }] },
    ];
}
export const APISERVER_NODE = "apiserver-node";

/** The node-local DNS shape's addresses, on the outside host. */
export function nodeLocalEndpoints(a: NodeAddresses): ExtraEndpoint[] {
    return [
        { name: "node-local-dns", ip: a.nodeLocalDns },
        { name: "link-local-other", ip: a.linkLocalNeighbour },
    ];
}

interface Probe {
    readonly from: Party;
    readonly to: Party;
    readonly ip: string;
    readonly port: number;
    readonly protocol: Protocol;
    readonly expected: boolean;
}

export interface Measurement {
    readonly r: Reachability;
    /** Probes whose measured result differs from the computed one, one line each; empty when they agree. */
    readonly mismatches: string[];
    readonly probes: number;
    readonly open: number;
    readonly attempts: number;
    readonly pods: number;
    readonly seconds: { readonly podsReady: number; readonly measured: number };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const probePorts = (p: Party, a: NodeAddresses): ReadonlyArray<{ port: number; protocol: Protocol }> => {
    if (p.servesOnlyPorts) return p.ports;
    const base = p.kind === "pods" ? [...p.ports, ...EXTRA_POD_PORTS] : a.outsidePorts;
    const seen = new Set<string>();
    return base.filter((x) => !seen.has(`${x.protocol}/${x.port}`) && seen.add(`${x.protocol}/${x.port}`) !== undefined);
};

const slug = (s: string) =>
    s
        .toLowerCase()
        .replace(/[^a-z0-9]+/g, "-")
        .replace(/^-|-$/g, "")
        .slice(0, 40);

/** Namespaces the parties live in, beyond the manifests' own, that the API server does not make itself. */
function extraNamespaces(parties: readonly Party[], manifests: readonly Manifest[]): string[] {
    const own = new Set([...manifests.filter((m) => m.kind === "Namespace").map((m) => m.metadata.name), "default", "kube-system"]);
    return [...new Set(parties.filter((p) => p.kind === "pods" && p.namespace && !own.has(p.namespace)).map((p) => p.namespace!))];
}

function standinPod(p: Party, name: string, nodeName: string, image: string, a: NodeAddresses): Manifest {
    const ports = probePorts(p, a);
    const list = (proto: Protocol) =>
        ports
            .filter((x) => x.protocol === proto)
            .map((x) => x.port)
            .join(",") || "-";
    const tcp = ports.find((x) => x.protocol === "TCP");
    return {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, namespace: p.namespace, labels: { ...p.labels, [STANDIN_LABEL]: "true" } },
        spec: {
            nodeName,
            automountServiceAccountToken: false,
            enableServiceLinks: false,
            terminationGracePeriodSeconds: 0,
            securityContext: {
                runAsNonRoot: true,
                runAsUser: 65532,
                runAsGroup: 65532,
                seccompProfile: { type: "RuntimeDefault" },
                // Declared ports below 1024 (DNS's 53, 443) without a capability.
                sysctls: [{ name: "net.ipv4.ip_unprivileged_port_start", value: "0" }],
            },
            containers: [
                {
                    name: "standin",
                    image,
                    imagePullPolicy: "Never",
                    command: ["python3", "-I", "-c", STANDIN, "listen", list("TCP"), list("UDP")],
                    // The group's own declared ports (names included: a policy's named port resolves against them).
                    ports: p.ports.map((x) => ({ containerPort: x.port, protocol: x.protocol, ...(x.name ? { name: x.name } : {}) })),
                    ...(tcp ? { readinessProbe: { tcpSocket: { port: tcp.port }, periodSeconds: 1 } } : {}),
                    resources: { requests: { cpu: "5m", memory: "24Mi" }, limits: { memory: "64Mi" } },
                    securityContext: HARDENED_CONTAINER,
                },
            ],
        },
    };
}

/**
 * Applies `manifests`' Namespaces and NetworkPolicies, runs a stand-in per pod group, measures
 * every path, and removes the stand-ins and the policies again (the namespaces stay: deleting
 * them would wait for the controller-manager's finalization, and the next case reuses them). Measures up to `attempts`
 * times (8 by default, scaled: waits.ts), 2 s apart, while the policies settle; the last measurement is returned.
 */
export async function measureReachability(
    node: Node,
    manifests: readonly Manifest[],
    endpoints: readonly ExtraEndpoint[],
    a: NodeAddresses,
    opts: { readonly tag: string; readonly image: string; readonly attempts?: number },
): Promise<Measurement> {
    const r = evaluateReachability(manifests, { endpoints, podCidrs: [a.podSubnet] });
    const podParties = r.parties.filter((p) => p.kind === "pods");
    const sources = podParties.filter((p) => p.asSource);
    const maxAttempts = opts.attempts ?? scaledCount(8);
    const namespaces = [
        ...manifests.filter((m) => m.kind === "Namespace"),
        ...extraNamespaces(r.parties, manifests).map((name) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name } })),
    ];
    const nsNames = [...new Set([...namespaces.map((m) => m.metadata.name as string), "default", "kube-system"])];
    // Every namespace needs its default ServiceAccount (the pods' admission asks for it): made here, as the pods may come before the controller-manager makes it (node.apply retries a create that met it).
    const serviceAccounts = nsNames.map((ns) => ({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "default", namespace: ns } }));
    const policies = manifests.filter((m) => m.kind === "NetworkPolicy");
    const podName = new Map(podParties.map((p, i) => [p.id, `${opts.tag}-${i}-${slug(p.name)}`.slice(0, 63).replace(/-$/, "")]));
    const pods = podParties.map((p) => standinPod(p, podName.get(p.id)!, node.names.nodeName, opts.image, a));

    const apply = (items: readonly unknown[]) => node.apply({ apiVersion: "v1", kind: "List", items });
    const t0 = Date.now();
    try {
        await apply([...namespaces, ...serviceAccounts]);
        await apply(policies);
        await apply(pods);
        for (const p of podParties) {
            const w = await node.kubectl(
                ["-n", p.namespace!, "wait", "--for=condition=Ready", `--timeout=${scaledSeconds(120)}s`, `pod/${podName.get(p.id)}`],
                undefined,
                130_000,
            );
            if (w.code !== 0) {
                const d = await node.kubectl(["-n", p.namespace!, "describe", "pod", podName.get(p.id)!]);
                throw new Error(`stand-in ${p.id} (${podName.get(p.id)}) not Ready: ${w.stderr}\n${d.stdout}`);
            }
        }
        const podsReady = (Date.now() - t0) / 1000;
        const ipOf = new Map<string, string>();
        for (const p of r.parties) if (p.ip) ipOf.set(p.id, p.ip);
        for (const p of podParties) {
            const ip = (await node.kubectlOk(["-n", p.namespace!, "get", "pod", podName.get(p.id)!, "-o", "jsonpath={.status.podIP}"])).trim();
            ipOf.set(p.id, ip);
        }

        const probes: Probe[] = [];
        for (const from of sources) {
            for (const to of r.parties.filter((p) => p.asDestination && p.id !== from.id)) {
                for (const { port, protocol } of probePorts(to, a)) {
                    probes.push({ from, to, ip: ipOf.get(to.id)!, port, protocol, expected: r.allows(from.id, to.id, port, protocol) });
                }
            }
        }
        const apiserverNode = r.parties.find((p) => p.name === APISERVER_NODE)?.id;
        let mismatches: string[] = [];
        let open = 0;
        let attempt = 0;
        const t1 = Date.now();
        while (attempt < maxAttempts) {
            attempt++;
            const results = await Promise.all(
                sources.map(async (from) => {
                    const mine = probes.filter((x) => x.from.id === from.id);
                    const targets = mine.map((x) => [x.ip, x.port, x.protocol, x.to.id === apiserverNode ? "connect" : x.port === 53 ? "dns" : "ok"]);
                    const res = await node.kubectl(
                        [
                            "-n",
                            from.namespace!,
                            "exec",
                            podName.get(from.id)!,
                            "-c",
                            "standin",
                            "--",
                            "python3",
                            "-I",
                            "-c",
                            STANDIN,
                            "probe",
                            JSON.stringify(targets),
                        ],
                        undefined,
                        60_000,
                    );
                    if (res.code !== 0) throw new Error(`probe from ${from.id} failed (exit ${res.code}): ${res.stderr}`);
                    const got = JSON.parse(res.stdout) as string[];
                    return mine.map((x, i) => ({ x, got: got[i]! }));
                }),
            );
            const flat = results.flat();
            open = flat.filter((o) => o.got === "open").length;
            mismatches = flat
                .filter(({ x, got }) => (got === "open") !== x.expected)
                .map(
                    ({ x, got }) =>
                        `${x.from.id} -> ${x.to.id} (${x.ip}) ${x.protocol} ${x.port}: computed ${x.expected ? "allowed" : "refused"}, measured ${got}`,
                );
            if (mismatches.length === 0) break;
            if (attempt < maxAttempts) await sleep(2000);
        }
        return {
            r,
            mismatches,
            probes: probes.length,
            open,
            attempts: attempt,
            pods: pods.length,
            seconds: { podsReady, measured: (Date.now() - t1) / 1000 },
        };
    } finally {
        for (const ns of nsNames) {
            await node.kubectl(["-n", ns, "delete", "pod", "-l", STANDIN_LABEL, "--force", "--grace-period=0", "--ignore-not-found"]);
            await node.kubectl(["-n", ns, "delete", "networkpolicy", "--all", "--ignore-not-found"]);
        }
    }
}
