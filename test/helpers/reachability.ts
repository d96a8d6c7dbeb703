/**
 * NetworkPolicy reachability, computed from manifests alone (no cluster, no CNI): which pod
 * group may open a connection to which pod group or named address, on which protocol and
 * ports. Semantics follow kubernetes.io/docs/concepts/services-networking/network-policies/
 * and the networking.k8s.io/v1 API reference; the choices the docs leave to the network
 * plugin are named where they are made (ipBlock and pod IPs, host-network pods).
 *
 *   const r = evaluateReachability(manifests, { endpoints: [{ name: "internet", ip: "8.8.8.8" }] });
 *   r.allows("ns-a/trainer", "internet", 443);   // true / false
 *   reachabilityTable(r);                         // | source | destination | ports |
 *
 * Pulumi mock runs: feed `manifestsOf(run.resources)` (scripts/lib/plan.ts), the update run
 * (a preview's unknown values are refused).
 */

// ---- public types ----------------------------------------------------------------------------

export type Protocol = "TCP" | "UDP" | "SCTP";
/** Protocols in the order every output lists them. */
export const PROTOCOLS: readonly Protocol[] = ["TCP", "UDP", "SCTP"];

/** A Kubernetes object as plain data: apiVersion, kind, metadata, spec. */
export type Manifest = Readonly<Record<string, any>>;

/** A port a pod's container declares, or an extra endpoint serves. */
export interface NamedPort {
    readonly port: number;
    /** @default "TCP" */
    readonly protocol?: Protocol;
    /** The name a NetworkPolicy's named `port` resolves against. */
    readonly name?: string;
}

/**
 * Something the manifests do not define but the policies talk about. With `ip`: an address
 * outside the pod network (internet, metadata, API server), matched by ipBlock peers only.
 * With `namespace` (+ `labels`): a pod the cluster runs (cluster DNS), matched by selectors
 * and subject to the policies of its namespace.
 */
export interface ExtraEndpoint {
    readonly name: string;
    /** IPv4 address of an endpoint outside the pod network. */
    readonly ip?: string;
    /** Namespace of a pod endpoint. */
    readonly namespace?: string;
    /** Labels of a pod endpoint. @default {} */
    readonly labels?: Readonly<Record<string, string>>;
    /** What it serves: connections to it are limited to these. @default every port */
    readonly ports?: readonly NamedPort[];
    /** Whether it appears as a destination, a source of connections, or both. @default "destination" */
    readonly role?: "destination" | "source" | "both";
}

export interface ReachabilityOptions {
    /** Named addresses and pods beyond the manifests. @default [] */
    readonly endpoints?: readonly ExtraEndpoint[];
    /**
     * The pod network's CIDRs (IPv4). Unset, pods are matched by selector peers only. Set, a pod
     * is also matched by an ipBlock whose range, minus its excepts, overlaps one of these (the
     * conservative view: some pod of the group may hold such an IP, as with Calico).
     * @default undefined
     */
    readonly podCidrs?: readonly string[];
}

/** A pod group (one workload's pods) or an extra endpoint. */
export interface Party {
    /** `<namespace>/<name>` for pods (with ` (<Kind>)` when two kinds share a name), the endpoint name for addresses. */
    readonly id: string;
    readonly kind: "pods" | "address";
    /** The workload kind (`Deployment`, `SandboxTemplate`, ...) or `endpoint`. */
    readonly origin: string;
    readonly name: string;
    readonly namespace?: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly ip?: string;
    /** Container ports (pods) or served ports (endpoints), protocol defaulted. */
    readonly ports: ReadonlyArray<Required<Pick<NamedPort, "port" | "protocol">> & Pick<NamedPort, "name">>;
    /** Whether connections to it are limited to `ports` (endpoints that list ports). */
    readonly servesOnlyPorts: boolean;
    readonly asSource: boolean;
    readonly asDestination: boolean;
}

/** An inclusive port range. */
export interface PortRange {
    readonly from: number;
    readonly to: number;
}

/** One allowed path: `from` may open connections to `to` on `protocol`, on `ports`. */
export interface Connection {
    readonly from: string;
    readonly to: string;
    readonly protocol: Protocol;
    readonly ports: readonly PortRange[];
}

export interface Reachability {
    readonly parties: readonly Party[];
    /** Every allowed path, sorted by source, destination, protocol. */
    readonly connections: readonly Connection[];
    /** Whether `from` may open a connection to `to` on `port`. */
    allows(from: string, to: string, port: number, protocol?: Protocol): boolean;
    /** The ports `from` may reach on `to`, as the table shows them ("TCP 53, UDP 53"); "" when none. */
    portsBetween(from: string, to: string): string;
}

/** Manifests the evaluator cannot evaluate faithfully; every problem, one per line. */
export class ReachabilityInputError extends Error {
    constructor(readonly problems: readonly string[]) {
        super(`cannot evaluate reachability:\n${problems.map((p) => `- ${p}`).join("\n")}`);
        this.name = "ReachabilityInputError";
    }
}

// ---- intervals (ports and IPv4 addresses) ------------------------------------------------------

type Interval = readonly [number, number];

function normalize(xs: readonly Interval[]): Interval[] {
    const sorted = [...xs].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const out: Array<[number, number]> = [];
    for (const [lo, hi] of sorted) {
        const last = out[out.length - 1];
        if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
        else out.push([lo, hi]);
    }
    return out;
}

function intersect(a: readonly Interval[], b: readonly Interval[]): Interval[] {
    const out: Interval[] = [];
    for (const [alo, ahi] of a) for (const [blo, bhi] of b) if (Math.max(alo, blo) <= Math.min(ahi, bhi)) out.push([Math.max(alo, blo), Math.min(ahi, bhi)]);
    return normalize(out);
}

function subtract(a: readonly Interval[], b: readonly Interval[]): Interval[] {
    let rest: Interval[] = normalize(a);
    for (const [blo, bhi] of normalize(b)) {
        const next: Interval[] = [];
        for (const [lo, hi] of rest) {
            if (bhi < lo || blo > hi) next.push([lo, hi]);
            else {
                if (lo < blo) next.push([lo, blo - 1]);
                if (hi > bhi) next.push([bhi + 1, hi]);
            }
        }
        rest = next;
    }
    return rest;
}

const contains = (xs: readonly Interval[], v: number): boolean => xs.some(([lo, hi]) => lo <= v && v <= hi);

// ---- ports ------------------------------------------------------------------------------------

const MAX_PORT = 65535;
const ALL_PORTS: readonly Interval[] = [[1, MAX_PORT]];

/** Allowed ports per protocol. */
type PortSet = Readonly<Record<Protocol, readonly Interval[]>>;

const EMPTY: PortSet = { TCP: [], UDP: [], SCTP: [] };
const EVERYTHING: PortSet = { TCP: ALL_PORTS, UDP: ALL_PORTS, SCTP: ALL_PORTS };

const mapPorts = (f: (p: Protocol) => readonly Interval[]): PortSet => ({ TCP: f("TCP"), UDP: f("UDP"), SCTP: f("SCTP") });
const unionPorts = (a: PortSet, b: PortSet): PortSet => mapPorts((p) => normalize([...a[p], ...b[p]]));
const intersectPorts = (a: PortSet, b: PortSet): PortSet => mapPorts((p) => intersect(a[p], b[p]));
const isEmpty = (s: PortSet): boolean => PROTOCOLS.every((p) => s[p].length === 0);

function rangeText([lo, hi]: Interval): string {
    return lo === hi ? `${lo}` : `${lo}-${hi}`;
}

/** "TCP 53, UDP 53", "TCP 80,443", "TCP any", or "any" (every port of every protocol). */
function portSetText(s: PortSet): string {
    const full = (r: readonly Interval[]) => r.length === 1 && r[0][0] === 1 && r[0][1] === MAX_PORT;
    if (PROTOCOLS.every((p) => full(s[p]))) return "any";
    return PROTOCOLS.filter((p) => s[p].length > 0)
        .map((p) => `${p} ${full(s[p]) ? "any" : s[p].map(rangeText).join(",")}`)
        .join(", ");
}

// ---- IPv4 -------------------------------------------------------------------------------------

/** An IPv4 address as a number; undefined when not a dotted quad (leading zeros refused, as Go's net.ParseIP does). */
function parseIPv4(s: string): number | undefined {
    const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
    if (!m) return undefined;
    const octets = m.slice(1).map((o) => (o.length > 1 && o.startsWith("0") ? NaN : Number(o)));
    if (octets.some((o) => !(o >= 0 && o <= 255))) return undefined;
    return ((octets[0] * 256 + octets[1]) * 256 + octets[2]) * 256 + octets[3];
}

type Cidr = { readonly family: 4; readonly range: Interval; readonly prefix: number; readonly hostBits: boolean } | { readonly family: 6 };

function parseCidr(s: unknown): Cidr | undefined {
    if (typeof s !== "string") return undefined;
    // IPv6 ranges match nothing here: the endpoints and pod CIDRs this evaluator models are IPv4.
    if (s.includes(":")) return /^[0-9a-fA-F:.]+\/\d{1,3}$/.test(s) && Number(s.split("/")[1]) <= 128 ? { family: 6 } : undefined;
    const m = /^([0-9.]+)\/(\d{1,2})$/.exec(s);
    const ip = m ? parseIPv4(m[1]) : undefined;
    const prefix = m ? Number(m[2]) : NaN;
    if (ip === undefined || !(prefix >= 0 && prefix <= 32)) return undefined;
    const size = 2 ** (32 - prefix);
    const lo = ip - (ip % size);
    return { family: 4, range: [lo, lo + size - 1], prefix, hostBits: ip !== lo };
}

// ---- label selectors --------------------------------------------------------------------------

type Labels = Readonly<Record<string, string>>;
type Selector = (labels: Labels) => boolean;

const isObj = (v: unknown): v is Record<string, any> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A metav1.LabelSelector: matchLabels AND matchExpressions; `{}` matches everything. */
function parseSelector(sel: unknown, where: string, problems: string[]): Selector {
    if (!isObj(sel)) {
        problems.push(`${where}: a label selector must be an object`);
        return () => false;
    }
    const tests: Selector[] = [];
    for (const [k, v] of Object.entries(sel.matchLabels ?? {})) {
        if (typeof v !== "string") problems.push(`${where}.matchLabels.${k}: the value must be a string`);
        tests.push((l) => l[k] === v);
    }
    ((sel.matchExpressions ?? []) as any[]).forEach((e, i) => {
        const at = `${where}.matchExpressions[${i}]`;
        const values: unknown[] = e?.values ?? [];
        const key = e?.key;
        if (typeof key !== "string" || key === "") problems.push(`${at}: key is required`);
        switch (e?.operator) {
            case "In":
            case "NotIn":
                if (values.length === 0) problems.push(`${at}: operator ${e.operator} needs at least one value`);
                tests.push(e.operator === "In" ? (l) => key in l && values.includes(l[key]) : (l) => !(key in l) || !values.includes(l[key]));
                break;
            case "Exists":
            case "DoesNotExist":
                if (values.length > 0) problems.push(`${at}: operator ${e.operator} takes no values`);
                tests.push(e.operator === "Exists" ? (l) => key in l : (l) => !(key in l));
                break;
            default:
                problems.push(`${at}: operator ${JSON.stringify(e?.operator)} is not one of In, NotIn, Exists, DoesNotExist`);
                tests.push(() => false);
        }
    });
    return (l) => tests.every((t) => t(l));
}

// ---- policies ---------------------------------------------------------------------------------

type Peer =
    | { readonly kind: "selector"; readonly namespaces?: Selector; readonly pods?: Selector }
    | { readonly kind: "ipBlock"; readonly ranges: readonly Interval[] };

interface RulePort {
    readonly protocol: Protocol;
    /** undefined: every port of the protocol. */
    readonly port?: number | string;
    readonly endPort?: number;
}

interface Rule {
    /** undefined: every peer (the rule's from/to is missing or empty). */
    readonly peers?: readonly Peer[];
    /** undefined: every port (the rule's ports is missing or empty). */
    readonly ports?: readonly RulePort[];
}

interface Policy {
    readonly id: string;
    readonly namespace: string;
    readonly selects: Selector;
    /** undefined: the policy does not isolate this direction. */
    readonly ingress?: readonly Rule[];
    readonly egress?: readonly Rule[];
}

// IANA_SVC_NAME, as the API server validates a named port (k8s.io/apimachinery validation.IsValidPortName).
const PORT_NAME = /^(?=.{1,15}$)(?=.*[a-z])[a-z0-9]+(-[a-z0-9]+)*$/;

function parsePorts(ports: unknown, where: string, problems: string[]): RulePort[] | undefined {
    if (ports === undefined || ports === null) return undefined;
    if (!Array.isArray(ports)) {
        problems.push(`${where}: must be a list`);
        return [];
    }
    // An empty list means every port (API reference: "If this field is empty or missing, this rule matches all ports").
    if (ports.length === 0) return undefined;
    return ports.map((p, i) => {
        const at = `${where}[${i}]`;
        const protocol = p?.protocol ?? "TCP";
        if (!PROTOCOLS.includes(protocol)) problems.push(`${at}.protocol: ${JSON.stringify(protocol)} is not TCP, UDP or SCTP`);
        const port = p?.port;
        const endPort = p?.endPort;
        if (typeof port === "number" && !(Number.isInteger(port) && port >= 1 && port <= MAX_PORT))
            problems.push(`${at}.port: ${port} is not a port number (1-65535)`);
        if (typeof port === "string" && !PORT_NAME.test(port))
            problems.push(`${at}.port: ${JSON.stringify(port)} is not a valid port name (IANA_SVC_NAME; a number must be written as a number)`);
        if (port !== undefined && port !== null && typeof port !== "number" && typeof port !== "string")
            problems.push(`${at}.port: must be a number or a name`);
        if (endPort !== undefined && endPort !== null) {
            if (typeof port !== "number") problems.push(`${at}.endPort: may only be set with a numeric port`);
            else if (!(Number.isInteger(endPort) && endPort >= port && endPort <= MAX_PORT))
                problems.push(`${at}.endPort: ${endPort} must be a port number >= port ${port}`);
        }
        return { protocol, ...(port !== undefined && port !== null ? { port } : {}), ...(typeof endPort === "number" ? { endPort } : {}) };
    });
}

function parsePeers(peers: unknown, where: string, problems: string[]): Peer[] | undefined {
    if (peers === undefined || peers === null) return undefined;
    if (!Array.isArray(peers)) {
        problems.push(`${where}: must be a list`);
        return [];
    }
    // An empty list means every peer, in and outside the cluster (API reference, from/to).
    if (peers.length === 0) return undefined;
    return peers.map((p, i): Peer => {
        const at = `${where}[${i}]`;
        const hasPods = isObj(p) && p.podSelector !== undefined && p.podSelector !== null;
        const hasNamespaces = isObj(p) && p.namespaceSelector !== undefined && p.namespaceSelector !== null;
        const block = isObj(p) ? p.ipBlock : undefined;
        if (block !== undefined && block !== null) {
            if (hasPods || hasNamespaces) problems.push(`${at}: ipBlock may not be combined with podSelector or namespaceSelector`);
            const cidr = parseCidr(block.cidr);
            if (!cidr) {
                problems.push(`${at}.ipBlock.cidr: ${JSON.stringify(block.cidr)} is not a CIDR`);
                return { kind: "ipBlock", ranges: [] };
            }
            if (cidr.family === 4 && cidr.hostBits) problems.push(`${at}.ipBlock.cidr: ${block.cidr} has bits set beyond the prefix length`);
            const excepts: Interval[] = [];
            ((block.except ?? []) as unknown[]).forEach((e, j) => {
                const ex = parseCidr(e);
                if (!ex) problems.push(`${at}.ipBlock.except[${j}]: ${JSON.stringify(e)} is not a CIDR`);
                else if (
                    ex.family !== cidr.family ||
                    (ex.family === 4 && cidr.family === 4 && (ex.prefix <= cidr.prefix || intersect([ex.range], [cidr.range]).length === 0))
                )
                    problems.push(`${at}.ipBlock.except[${j}]: ${e} must be a strict subset of cidr ${block.cidr}`);
                else if (ex.family === 4) excepts.push(ex.range);
            });
            return { kind: "ipBlock", ranges: cidr.family === 4 ? subtract([cidr.range], excepts) : [] };
        }
        if (!hasPods && !hasNamespaces) {
            problems.push(`${at}: a peer must set podSelector, namespaceSelector or ipBlock`);
            return { kind: "selector", pods: () => false };
        }
        return {
            kind: "selector",
            ...(hasNamespaces ? { namespaces: parseSelector(p.namespaceSelector, `${at}.namespaceSelector`, problems) } : {}),
            ...(hasPods ? { pods: parseSelector(p.podSelector, `${at}.podSelector`, problems) } : {}),
        };
    });
}

function parseRules(rules: unknown, peerField: "from" | "to", where: string, problems: string[]): Rule[] {
    if (rules === undefined || rules === null) return [];
    if (!Array.isArray(rules)) {
        problems.push(`${where}: must be a list`);
        return [];
    }
    return rules.map((r, i) => {
        const peers = parsePeers(r?.[peerField], `${where}[${i}].${peerField}`, problems);
        const ports = parsePorts(r?.ports, `${where}[${i}].ports`, problems);
        return { ...(peers ? { peers } : {}), ...(ports ? { ports } : {}) };
    });
}

function parsePolicy(m: Manifest, problems: string[]): Policy {
    const namespace: string = m.metadata?.namespace ?? "default";
    const id = `NetworkPolicy ${namespace}/${m.metadata?.name}`;
    const spec = m.spec ?? {};
    const where = (f: string) => `${id}: spec.${f}`;
    const types: unknown[] | undefined = Array.isArray(spec.policyTypes) && spec.policyTypes.length > 0 ? spec.policyTypes : undefined;
    for (const t of types ?? []) if (t !== "Ingress" && t !== "Egress") problems.push(`${where("policyTypes")}: ${JSON.stringify(t)} is not Ingress or Egress`);
    // Defaulting (k8s pkg/apis/networking/v1/defaults.go): Ingress always, Egress only when the
    // egress list is non-empty; `egress: []` alone does not isolate egress.
    const ingressType = types ? types.includes("Ingress") : true;
    const egressType = types ? types.includes("Egress") : Array.isArray(spec.egress) && spec.egress.length > 0;
    const ingress = parseRules(spec.ingress, "from", where("ingress"), problems);
    const egress = parseRules(spec.egress, "to", where("egress"), problems);
    return {
        id,
        namespace,
        // A missing podSelector is the empty selector: every pod of the namespace (API reference).
        selects: parseSelector(spec.podSelector ?? {}, where("podSelector"), problems),
        ...(ingressType ? { ingress } : {}),
        ...(egressType ? { egress } : {}),
    };
}

// ---- pod groups ---------------------------------------------------------------------------------

/** Where each workload kind keeps its pod template. */
const POD_TEMPLATES: Readonly<Record<string, { readonly group: string; readonly template: (m: Manifest) => any }>> = {
    Pod: { group: "", template: (m) => ({ metadata: m.metadata, spec: m.spec }) },
    Deployment: { group: "apps", template: (m) => m.spec?.template },
    StatefulSet: { group: "apps", template: (m) => m.spec?.template },
    DaemonSet: { group: "apps", template: (m) => m.spec?.template },
    ReplicaSet: { group: "apps", template: (m) => m.spec?.template },
    Job: { group: "batch", template: (m) => m.spec?.template },
    CronJob: { group: "batch", template: (m) => m.spec?.jobTemplate?.spec?.template },
    SandboxTemplate: { group: "extensions.agents.x-k8s.io", template: (m) => m.spec?.podTemplate },
    // One pod group per replicated job (podGroups below splits them): here the first one's template.
    JobSet: { group: "jobset.x-k8s.io", template: (m) => m.spec?.replicatedJobs?.[0]?.template?.spec?.template },
};

const groupOf = (apiVersion: unknown): string =>
    typeof apiVersion === "string" && apiVersion.includes("/") ? apiVersion.slice(0, apiVersion.indexOf("/")) : "";

type Draft = Omit<Party, "id"> & { readonly id?: string };

function containerPorts(spec: any, where: string, problems: string[]): Party["ports"] {
    const containers: any[] = [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])];
    return containers.flatMap((c) =>
        ((c?.ports ?? []) as any[]).map((p) => {
            const protocol: Protocol = p?.protocol ?? "TCP";
            if (!(Number.isInteger(p?.containerPort) && p.containerPort >= 1 && p.containerPort <= MAX_PORT))
                problems.push(`${where}: container ${c?.name}: containerPort ${JSON.stringify(p?.containerPort)} is not a port number`);
            if (!PROTOCOLS.includes(protocol))
                problems.push(`${where}: container ${c?.name} port ${p?.containerPort}: protocol ${JSON.stringify(protocol)} is not TCP, UDP or SCTP`);
            return { port: p?.containerPort, protocol, ...(typeof p?.name === "string" ? { name: p.name } : {}) };
        }),
    );
}

/** A JobSet's pods are one group per replicated job (the multi-node run's vLLM and its trainers), each named <jobset>-<replicatedJob>. */
function podGroups(m: Manifest, problems: string[]): Draft[] {
    if (m.kind !== "JobSet" || groupOf(m.apiVersion) !== "jobset.x-k8s.io") {
        const g = podGroup(m, problems);
        return g ? [g] : [];
    }
    const rjs: any[] = Array.isArray(m.spec?.replicatedJobs) ? m.spec.replicatedJobs : [];
    if (rjs.length === 0) problems.push(`JobSet ${m.metadata?.namespace}/${m.metadata?.name}: no replicatedJobs`);
    return rjs.flatMap((rj) => {
        const g = podGroup({ ...m, spec: { ...m.spec, replicatedJobs: [rj] } }, problems);
        if (!g) return [];
        // The JobSet controller labels every pod with its replicated job's name too (ReplicatedJobNameKey).
        return [{ ...g, name: `${g.name}-${rj.name}`, labels: { ...g.labels, "jobset.sigs.k8s.io/replicatedjob-name": rj.name } }];
    });
}

function podGroup(m: Manifest, problems: string[]): Draft | undefined {
    const kind = POD_TEMPLATES[m.kind];
    if (!kind || groupOf(m.apiVersion) !== kind.group) return undefined;
    const namespace: string = m.metadata?.namespace ?? "default";
    const name: string = m.metadata?.name;
    const where = `${m.kind} ${namespace}/${name}`;
    const template = kind.template(m);
    if (!isObj(template) || !isObj(template.spec)) {
        problems.push(`${where}: no pod template found`);
        return undefined;
    }
    if (m.kind === "SandboxTemplate" && m.spec?.networkPolicyManagement !== "Unmanaged")
        problems.push(
            `${where}: agent-sandbox creates its own NetworkPolicy for this template (networkPolicyManagement ${m.spec?.networkPolicyManagement ?? "Managed, the default"}), which is not among the manifests: set networkPolicyManagement: Unmanaged or add that policy`,
        );
    // NetworkPolicy behaviour for host-network pods is undefined (network-policies docs); refuse to guess.
    if (template.spec.hostNetwork === true) problems.push(`${where}: hostNetwork pods are outside what NetworkPolicy defines`);
    const labels: Record<string, string> = { ...(template.metadata?.labels ?? {}) };
    // The Job controller labels its pods with the Job's name (batch/v1 Job, unless manualSelector).
    if (m.kind === "Job" && m.spec?.manualSelector !== true) Object.assign(labels, { "batch.kubernetes.io/job-name": name, "job-name": name });
    // The JobSet controller labels every pod with its JobSet's name (jobset api/jobset/v1alpha2/jobset_types.go JobSetNameKey).
    if (m.kind === "JobSet") Object.assign(labels, { "jobset.sigs.k8s.io/jobset-name": name });
    return {
        kind: "pods",
        origin: m.kind,
        name,
        namespace,
        labels,
        ports: containerPorts(template.spec, where, problems),
        servesOnlyPorts: false,
        asSource: true,
        asDestination: true,
    };
}

function endpointParty(e: ExtraEndpoint, problems: string[]): Draft {
    const where = `endpoint ${e.name}`;
    if ((e.ip === undefined) === (e.namespace === undefined)) problems.push(`${where}: set exactly one of ip (an address) or namespace (a pod)`);
    if (e.ip !== undefined && parseIPv4(e.ip) === undefined) problems.push(`${where}: ip ${JSON.stringify(e.ip)} is not an IPv4 address`);
    const role = e.role ?? "destination";
    const ports = (e.ports ?? []).map((p) => ({ port: p.port, protocol: p.protocol ?? "TCP", ...(p.name !== undefined ? { name: p.name } : {}) }));
    for (const p of ports) {
        if (!(Number.isInteger(p.port) && p.port >= 1 && p.port <= MAX_PORT)) problems.push(`${where}: port ${JSON.stringify(p.port)} is not a port number`);
        if (!PROTOCOLS.includes(p.protocol)) problems.push(`${where}: protocol ${JSON.stringify(p.protocol)} is not TCP, UDP or SCTP`);
    }
    const base = {
        origin: "endpoint",
        name: e.name,
        ports,
        servesOnlyPorts: ports.length > 0,
        asSource: role !== "destination",
        asDestination: role !== "source",
    };
    if (e.namespace !== undefined) return { ...base, id: `${e.namespace}/${e.name}`, kind: "pods", namespace: e.namespace, labels: { ...(e.labels ?? {}) } };
    return { ...base, id: e.name, kind: "address", labels: {}, ...(e.ip !== undefined ? { ip: e.ip } : {}) };
}

/** Pulumi's placeholder for a value a preview does not know (@pulumi/pulumi runtime/rpc.js unknownValue). */
const PULUMI_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

// ---- evaluation ---------------------------------------------------------------------------------

/** Ports of a rule, resolved for the destination: named ports against its declared ports (name and protocol). */
function rulePorts(ports: readonly RulePort[] | undefined, dest: Party): PortSet {
    if (!ports) return EVERYTHING;
    const out: Record<Protocol, Interval[]> = { TCP: [], UDP: [], SCTP: [] };
    for (const p of ports) {
        if (!PROTOCOLS.includes(p.protocol)) continue;
        if (p.port === undefined) out[p.protocol].push(...ALL_PORTS);
        else if (typeof p.port === "number") out[p.protocol].push([p.port, p.endPort ?? p.port]);
        else for (const d of dest.ports) if (d.name === p.port && d.protocol === p.protocol) out[p.protocol].push([d.port, d.port]);
    }
    return mapPorts((p) => normalize(out[p]));
}

/**
 * Computes every allowed connection between the pod groups of `manifests` and the extra
 * endpoints. Throws ReachabilityInputError listing every manifest it cannot evaluate faithfully.
 */
export function evaluateReachability(manifests: readonly Manifest[], options: ReachabilityOptions = {}): Reachability {
    const problems: string[] = [];
    if (JSON.stringify(manifests).includes(PULUMI_UNKNOWN)) problems.push("a manifest holds a value unknown at preview: evaluate the update run's resources");

    const namespaceLabels = new Map<string, Labels>();
    const policies: Policy[] = [];
    const drafts: Draft[] = [];
    for (const m of manifests) {
        if (m.kind === "Namespace" && m.apiVersion === "v1") namespaceLabels.set(m.metadata?.name, { ...(m.metadata?.labels ?? {}) });
        else if (m.kind === "NetworkPolicy") {
            if (m.apiVersion !== "networking.k8s.io/v1")
                problems.push(
                    `NetworkPolicy ${m.metadata?.namespace}/${m.metadata?.name}: apiVersion ${JSON.stringify(m.apiVersion)} is not networking.k8s.io/v1`,
                );
            else policies.push(parsePolicy(m, problems));
        } else {
            drafts.push(...podGroups(m, problems));
        }
    }
    for (const e of options.endpoints ?? []) drafts.push(endpointParty(e, problems));

    const podRanges: Interval[] = [];
    (options.podCidrs ?? []).forEach((c) => {
        const cidr = parseCidr(c);
        if (cidr?.family === 4) podRanges.push(cidr.range);
        else problems.push(`podCidrs: ${JSON.stringify(c)} is not an IPv4 CIDR`);
    });

    // Ids: <namespace>/<name>, with the kind added where two kinds share a name.
    const baseId = (d: Draft) => d.id ?? `${d.namespace}/${d.name}`;
    const counts = new Map<string, number>();
    for (const d of drafts) counts.set(baseId(d), (counts.get(baseId(d)) ?? 0) + 1);
    const parties: Party[] = drafts.map((d) => ({ ...d, id: counts.get(baseId(d))! > 1 && d.id === undefined ? `${baseId(d)} (${d.origin})` : baseId(d) }));
    const seen = new Set<string>();
    for (const p of parties) {
        if (seen.has(p.id)) problems.push(`${p.id}: two pod groups or endpoints share this id`);
        seen.add(p.id);
    }
    if (problems.length > 0) throw new ReachabilityInputError(problems);

    // The API server labels every namespace with its own name (kubernetes.io/metadata.name, since 1.22).
    const nsLabels = (ns: string): Labels => ({ ...(namespaceLabels.get(ns) ?? {}), "kubernetes.io/metadata.name": ns });

    function peerMatches(peer: Peer, policyNamespace: string, other: Party): boolean {
        if (peer.kind === "ipBlock") {
            if (other.kind === "address") return other.ip !== undefined && contains(peer.ranges, parseIPv4(other.ip)!);
            // Pod IPs are unknown here: a pod matches an ipBlock only when the caller names the pod
            // network and the block (minus its excepts) overlaps it. The docs leave this to the plugin
            // ("These should be cluster-external IPs, since Pod IPs are ephemeral and unpredictable").
            return intersect(peer.ranges, podRanges).length > 0;
        }
        if (other.kind !== "pods") return false;
        // namespaceSelector alone: every pod of the matching namespaces; podSelector alone: the policy's namespace; both: AND.
        const nsOk = peer.namespaces ? peer.namespaces(nsLabels(other.namespace!)) : other.namespace === policyNamespace;
        return nsOk && (peer.pods ? peer.pods(other.labels) : true);
    }

    const selecting = (p: Party, dir: "ingress" | "egress") =>
        p.kind === "pods" ? policies.filter((pol) => pol[dir] !== undefined && pol.namespace === p.namespace && pol.selects(p.labels)) : [];

    /** What the policies of `subject` allow in `dir` towards `other`, for traffic that ends at `dest`. */
    function allowed(subject: Party, dir: "ingress" | "egress", other: Party, dest: Party): PortSet {
        const pols = selecting(subject, dir);
        // Not isolated in this direction: everything (only a selecting policy of that type isolates).
        if (pols.length === 0) return EVERYTHING;
        let out = EMPTY;
        for (const pol of pols)
            for (const rule of pol[dir]!)
                if (!rule.peers || rule.peers.some((peer) => peerMatches(peer, pol.namespace, other))) out = unionPorts(out, rulePorts(rule.ports, dest));
        return out;
    }

    const served = (p: Party): PortSet => {
        if (!p.servesOnlyPorts) return EVERYTHING;
        const out: Record<Protocol, Interval[]> = { TCP: [], UDP: [], SCTP: [] };
        for (const x of p.ports) out[x.protocol].push([x.port, x.port]);
        return mapPorts((pr) => normalize(out[pr]));
    };

    const byPair = new Map<string, PortSet>();
    const key = (a: string, b: string) => JSON.stringify([a, b]);
    const connections: Connection[] = [];
    const sorted = [...parties].sort((a, b) => cmp(a.id, b.id));
    for (const src of sorted.filter((p) => p.asSource)) {
        for (const dst of sorted.filter((p) => p.asDestination)) {
            // Between two addresses NetworkPolicy has nothing to say.
            if (src.kind === "address" && dst.kind === "address") continue;
            // Egress is decided at the source, ingress at the destination; both must allow.
            const set = intersectPorts(intersectPorts(allowed(src, "egress", dst, dst), allowed(dst, "ingress", src, dst)), served(dst));
            if (isEmpty(set)) continue;
            byPair.set(key(src.id, dst.id), set);
            for (const protocol of PROTOCOLS)
                if (set[protocol].length > 0)
                    connections.push({ from: src.id, to: dst.id, protocol, ports: set[protocol].map(([from, to]) => ({ from, to })) });
        }
    }

    const known = (id: string) => {
        if (!seen.has(id)) throw new Error(`no pod group or endpoint ${JSON.stringify(id)}; known: ${[...seen].sort(cmp).join(", ")}`);
    };
    return {
        parties,
        connections,
        allows(from, to, port, protocol = "TCP") {
            known(from);
            known(to);
            return contains(byPair.get(key(from, to))?.[protocol] ?? [], port);
        },
        portsBetween(from, to) {
            known(from);
            known(to);
            const set = byPair.get(key(from, to));
            return set ? portSetText(set) : "";
        },
    };
}

/** Code-unit order: the same in every locale. */
function cmp(a: string, b: string): number {
    return a < b ? -1 : a > b ? 1 : 0;
}

// ---- printing -----------------------------------------------------------------------------------

export interface TableOptions {
    /** How a party is named in the table. @default its id */
    readonly name?: (party: Party) => string;
    /** Which source -> destination pairs to show. @default every allowed pair */
    readonly include?: (from: Party, to: Party) => boolean;
}

/**
 * The allowed paths as a Markdown table (source | destination | ports), one row per pair,
 * sorted by the names shown, ports as "TCP 53, UDP 53" / "TCP 8000-8010" / "any".
 */
export function reachabilityTable(r: Reachability, opts: TableOptions = {}): string {
    const byId = new Map(r.parties.map((p) => [p.id, p]));
    const name = (p: Party) => (opts.name ?? ((x: Party) => x.id))(p);
    const cell = (s: string) => s.replace(/\|/g, "\\|");
    const pairs = new Map<string, { from: Party; to: Party }>();
    for (const c of r.connections) pairs.set(JSON.stringify([c.from, c.to]), { from: byId.get(c.from)!, to: byId.get(c.to)! });
    const rows = [...pairs.values()]
        .filter(({ from, to }) => (opts.include ? opts.include(from, to) : true))
        .map(({ from, to }) => [name(from), name(to), r.portsBetween(from.id, to.id)])
        .sort((a, b) => cmp(a[0], b[0]) || cmp(a[1], b[1]) || cmp(a[2], b[2]));
    return `${["| source | destination | ports |", "|---|---|---|", ...rows.map((row) => `| ${row.map(cell).join(" | ")} |`)].join("\n")}\n`;
}
