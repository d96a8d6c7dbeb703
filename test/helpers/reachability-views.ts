/**
 * How the reachability tests name and select what test/helpers/reachability.ts computes, shared by
 * the computed check (test/stack/reachability.test.ts) and the measured one on the real node
 * (test/node-suites/sandbox-reachability.ts): role names, the paths that concern the stack, the tables of
 * docs/design/network-paths.md, and
 * the stand-ins the policies talk about (the scraper and its decoys, DNS of each shape).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { HARBOR_TASK_LABEL } from "../../components/config";
import { parseWithTestImages } from "./config";
import { OBSERVABILITY_ON, platformManifests } from "./observability";
import type { ExtraEndpoint, Manifest, Party, Reachability } from "./reachability";

const NETWORK_PATHS = path.resolve(__dirname, "..", "..", "docs", "design", "network-paths.md");

/** Stack pods by role (the env ones by instance, so two envs stay apart; a Harbor pool's sandboxes by task image); endpoints by name. */
export function roleName(p: Party): string {
    if (p.kind !== "pods") return p.name;
    if (p.namespace === "kube-system" || p.namespace === "default") return p.name;
    const role = p.labels["app.kubernetes.io/name"] ?? p.name;
    const task = p.labels[HARBOR_TASK_LABEL];
    if (task !== undefined) return `${role} (${task})`;
    return role.startsWith("env-") ? (p.labels["app.kubernetes.io/instance"] ?? role) : role;
}

/** Paths that concern the stack: from or to one of its pods (the other pod, or a scraper, reaching the internet is not ours). */
export const concernsStack = (from: Party, to: Party): boolean => [from, to].some((p) => p.kind === "pods" && p.origin !== "endpoint");

/** The table of docs/design/network-paths.md for a recipe, between `<!-- reachability:<recipe> -->` and `<!-- /reachability -->`; throws when there is none. */
export function readmeTable(recipe: string): string {
    const text = fs.readFileSync(NETWORK_PATHS, "utf8");
    const start = text.indexOf(`<!-- reachability:${recipe} -->`);
    if (start < 0) throw new Error(`docs/design/network-paths.md has no reachability table for ${recipe}`);
    const end = text.indexOf("<!-- /reachability -->", start);
    return text.slice(text.indexOf("\n", start) + 1, end).trim();
}

/** Cluster DNS as the kube-dns shape has it. */
export const KUBE_DNS: ExtraEndpoint = {
    name: "kube-dns",
    namespace: "kube-system",
    labels: { "k8s-app": "kube-dns" },
    ports: [
        { port: 53, protocol: "UDP" },
        { port: 53, protocol: "TCP" },
    ],
};

/** A pod of someone else's, in a namespace without policies. */
export const OTHER_POD: ExtraEndpoint = { name: "other-pod", namespace: "default", labels: { app: "other" }, role: "both" };

/** DNS pods of a provider of one's own (`target.dns: {kind: selector, namespace: dns, podLabels: {app: unbound}}`). */
export const OWN_DNS: ExtraEndpoint = { name: "own-dns", namespace: "dns", labels: { app: "unbound" } };
export const OWN_DNS_SHAPE = { kind: "selector", namespace: "dns", podLabels: { app: "unbound" } } as const;

/** The scraper (observability.scraper's default: the Operator's Prometheus pods in monitoring). */
export const SCRAPER: ExtraEndpoint = { name: "prometheus", namespace: "monitoring", labels: { "app.kubernetes.io/name": "prometheus" }, role: "source" };
/** Two decoys that must reach nothing: another pod of the monitoring namespace, a pod with the scraper's labels elsewhere. */
export const DECOYS: readonly ExtraEndpoint[] = [
    { name: "grafana", namespace: "monitoring", labels: { "app.kubernetes.io/name": "grafana" }, role: "source" },
    { name: "prometheus-elsewhere", namespace: "default", labels: { "app.kubernetes.io/name": "prometheus" }, role: "source" },
];

/** The name of an old run's trainer left behind (oldRunJob). */
export const OLD_RUN = "train-old-run";

/** An old run's trainer left behind: the manifests' trainer Job under another name and instance label. */
export function oldRunJob(manifests: readonly Manifest[]): Manifest {
    const job = manifests.find((m) => m.kind === "Job");
    if (!job) throw new Error("the manifests hold no trainer Job");
    const old = structuredClone(job) as Record<string, any>;
    old.metadata.name = OLD_RUN;
    old.spec.template.metadata.labels = { ...old.spec.template.metadata.labels, "app.kubernetes.io/instance": OLD_RUN };
    return old;
}

/** Every Kubernetes object a staging stack of `recipe` registers with observability on (the Platform under the mocks). */
export function observedManifests(recipe: string): Promise<Manifest[]> {
    return platformManifests(parseWithTestImages({ recipe, runId: "r1", target: { kind: "kubernetes", context: "test" }, ...OBSERVABILITY_ON }, "staging"));
}

/** The name of a pod in another namespace that carries the trainer's pod labels (trainerElsewhere). */
export const TRAINER_ELSEWHERE = "trainer-elsewhere";
/** Its namespace: one the stack does not make, with no policy of its own. */
export const ELSEWHERE_NAMESPACE = "elsewhere";

/**
 * A pod outside the training namespace with every label the trainer's pods carry (the Job's
 * template labels and the Job controller's): a policy whose trainer peer lost its
 * namespaceSelector (widened to {}, or dropped) admits it, so a matrix without such a pod cannot
 * tell the two apart. Undefined when the manifests hold no trainer Job (the JobSet recipe).
 */
export function trainerElsewhere(manifests: readonly Manifest[]): ExtraEndpoint | undefined {
    const job = manifests.find((m) => m.kind === "Job" && m.metadata?.name !== OLD_RUN);
    if (!job) return undefined;
    const name: string = job.metadata.name;
    return {
        name: TRAINER_ELSEWHERE,
        namespace: ELSEWHERE_NAMESPACE,
        labels: { ...job.spec.template.metadata.labels, "batch.kubernetes.io/job-name": name, "job-name": name },
        role: "source",
    };
}

/** The stack's pods (not the endpoints) the trainer-elsewhere pod reaches: must be none. */
export function reachedFromElsewhere(r: Reachability): string[] {
    const stackPod = new Set(r.parties.filter((p) => p.kind === "pods" && p.origin !== "endpoint").map((p) => p.id));
    const from = `${ELSEWHERE_NAMESPACE}/${TRAINER_ELSEWHERE}`;
    return [...new Set(r.connections.filter((c) => c.from === from && stackPod.has(c.to)).map((c) => `${c.to} (${r.portsBetween(c.from, c.to)})`))];
}

/** The same manifests with every NetworkPolicy peer that pairs a namespaceSelector with a podSelector widened to any namespace ({}): the mutation the pod above must catch. */
export function widenTrainerPeers(manifests: readonly Manifest[]): Manifest[] {
    const widen = (rules: any[] | undefined, key: "from" | "to") =>
        rules?.map((rule) => ({
            ...rule,
            [key]: rule[key]?.map((peer: any) => (peer.namespaceSelector && peer.podSelector ? { ...peer, namespaceSelector: {} } : peer)),
        }));
    return manifests.map((m) =>
        m.kind === "NetworkPolicy" ? { ...m, spec: { ...m.spec, ingress: widen(m.spec?.ingress, "from"), egress: widen(m.spec?.egress, "to") } } : m,
    );
}
