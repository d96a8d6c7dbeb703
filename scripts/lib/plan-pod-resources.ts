/**
 * plan.md's "Pod resources" section (Kubernetes): every pod the rendered manifests make, with its
 * CPU, memory and GPU requests and limits read from the manifests themselves (not re-derived from
 * the config), how many such pods the objects ask for, and the totals per namespace beside each
 * namespace's ResourceQuota.
 */
import { addQuantities, multiplyQuantity, quantityValue } from "../../components/shared/quantity";

type Manifest = Record<string, any>;
type Resources = { cpu?: string; memory?: string; gpu?: string };

/** One kind of pod: the object that makes it, how many it asks for, and one pod's effective resources. */
export interface PodShape {
    readonly namespace: string;
    /** `Job/train-prod-001-...`, `Deployment/vllm-ingress`, `SandboxTemplate/sandbox-prod-001`. */
    readonly owner: string;
    readonly containers: readonly string[];
    /** Pods the objects ask for (replicas, parallelism, the warm pool's replicas). */
    readonly count: number;
    /** Why `count` is what it is, in words. */
    readonly countFrom: string;
    readonly requests: Resources;
    /** Undefined for a resource where some container sets no limit (the pod is unbounded in it). */
    readonly limits: Resources;
}

const GPU = "nvidia.com/gpu";

function containerResources(c: Manifest, kind: "requests" | "limits"): Resources {
    const r = (c.resources?.[kind] ?? {}) as Record<string, string>;
    return { cpu: r.cpu, memory: r.memory, gpu: r[GPU] };
}

function add(a: string | undefined, b: string | undefined): string | undefined {
    if (a === undefined) return b;
    if (b === undefined) return a;
    return addQuantities(a, b);
}

function larger(a: string | undefined, b: string | undefined): string | undefined {
    if (a === undefined) return b;
    if (b === undefined) return a;
    return quantityValue(b) > quantityValue(a) ? b : a;
}

/**
 * A pod's effective request or limit of one resource, as the scheduler computes it (Kubernetes
 * "Resource sharing within containers", sidecar containers KEP-753): the app containers plus the
 * sidecars (init containers with restartPolicy Always), or the largest plain init container plus
 * the sidecars, whichever is larger. For limits, a container with none leaves the pod unbounded.
 */
function effective(spec: Manifest, kind: "requests" | "limits", key: keyof Resources): string | undefined {
    const containers = (spec.containers ?? []) as Manifest[];
    const inits = (spec.initContainers ?? []) as Manifest[];
    const sidecars = inits.filter((c) => c.restartPolicy === "Always");
    const plain = inits.filter((c) => c.restartPolicy !== "Always");
    const value = (c: Manifest) => containerResources(c, kind)[key];
    if (kind === "limits" && key !== "gpu" && [...containers, ...sidecars].some((c) => value(c) === undefined)) return undefined;
    const sidecarSum = sidecars.map(value).reduce(add, undefined);
    const running = add(containers.map(value).reduce(add, undefined), sidecarSum);
    const initPeak = add(plain.map(value).reduce(larger, undefined), sidecarSum);
    return larger(running, initPeak);
}

function shape(namespace: string, owner: string, podSpec: Manifest, count: number, countFrom: string): PodShape {
    const pick = (kind: "requests" | "limits"): Resources => ({
        cpu: effective(podSpec, kind, "cpu"),
        memory: effective(podSpec, kind, "memory"),
        gpu: effective(podSpec, kind, "gpu"),
    });
    const names = [
        ...((podSpec.initContainers ?? []) as Manifest[]).filter((c) => c.restartPolicy === "Always"),
        ...((podSpec.containers ?? []) as Manifest[]),
    ].map((c) => String(c.name));
    return { namespace, owner, containers: names, count, countFrom, requests: pick("requests"), limits: pick("limits") };
}

/** Every pod shape the manifests make, in manifest order. */
export function podShapes(manifests: ReadonlyArray<Manifest>): PodShape[] {
    const out: PodShape[] = [];
    const warmPools = manifests.filter((m) => m.kind === "SandboxWarmPool");
    for (const m of manifests) {
        const ns = String(m.metadata?.namespace ?? "-");
        const owner = `${m.kind}/${m.metadata?.name}`;
        switch (m.kind) {
            case "Deployment":
            case "StatefulSet":
                out.push(shape(ns, owner, m.spec.template.spec, m.spec.replicas ?? 1, `spec.replicas ${m.spec.replicas ?? 1}`));
                break;
            case "Job":
                out.push(shape(ns, owner, m.spec.template.spec, m.spec.parallelism ?? 1, `parallelism ${m.spec.parallelism ?? 1}`));
                break;
            case "JobSet":
                for (const rj of (m.spec.replicatedJobs ?? []) as Manifest[]) {
                    const job = rj.template.spec;
                    const n = (rj.replicas ?? 1) * (job.parallelism ?? 1);
                    out.push(shape(ns, `${owner} job ${rj.name}`, job.template.spec, n, `replicas ${rj.replicas ?? 1} x parallelism ${job.parallelism ?? 1}`));
                }
                break;
            case "Pod":
                out.push(shape(ns, owner, m.spec, 1, "one pod"));
                break;
            case "SandboxTemplate": {
                const pools = warmPools.filter((p) => p.metadata?.namespace === m.metadata?.namespace && p.spec?.sandboxTemplateRef?.name === m.metadata?.name);
                const warm = pools.reduce((n, p) => n + (p.spec.replicas ?? 0), 0);
                const from =
                    pools.length > 0 ? pools.map((p) => `SandboxWarmPool/${p.metadata.name} replicas ${p.spec.replicas ?? 0}`).join(" + ") : "no warm pool";
                out.push(shape(ns, owner, m.spec.podTemplate.spec, warm, `${from}, warm; a claimed one is refilled`));
                break;
            }
        }
    }
    // One namespace's pods together, in manifest order within it.
    return out
        .map((s, i) => ({ s, i }))
        .sort((a, b) => a.s.namespace.localeCompare(b.s.namespace) || a.i - b.i)
        .map((x) => x.s);
}

/** A namespace's sum over its pod shapes, and its ResourceQuota's hard bounds where the stack renders one. */
export interface NamespaceTotal {
    readonly namespace: string;
    readonly pods: number;
    readonly requests: Resources;
    /** Undefined where a pod in it sets no limit. */
    readonly limits: Resources;
    readonly quota?: Readonly<Record<string, string>>;
}

/** `q` x `n`, in the plainest unit ("2100m" x 10 = "21", "4224Mi" x 10 = "42240Mi"). */
function times(q: string | undefined, n: number): string | undefined {
    return q === undefined ? undefined : addQuantities(multiplyQuantity(q, n), "0");
}

export function namespaceTotals(shapes: readonly PodShape[], manifests: ReadonlyArray<Manifest>): NamespaceTotal[] {
    const byNs = new Map<string, PodShape[]>();
    for (const s of shapes) byNs.set(s.namespace, [...(byNs.get(s.namespace) ?? []), s]);
    return [...byNs.entries()].map(([namespace, list]) => {
        const sum = (kind: "requests" | "limits", key: keyof Resources): string | undefined => {
            if (kind === "limits" && key !== "gpu" && list.some((s) => s.count > 0 && s.limits[key] === undefined)) return undefined;
            return list.map((s) => times(s[kind][key], s.count)).reduce(add, undefined);
        };
        const quotas = manifests.filter((m) => m.kind === "ResourceQuota" && m.metadata?.namespace === namespace);
        const quota = quotas.length === 0 ? undefined : Object.assign({}, ...quotas.map((q) => q.spec?.hard ?? {}));
        return {
            namespace,
            pods: list.reduce((n, s) => n + s.count, 0),
            requests: { cpu: sum("requests", "cpu"), memory: sum("requests", "memory"), gpu: sum("requests", "gpu") },
            limits: { cpu: sum("limits", "cpu"), memory: sum("limits", "memory"), gpu: sum("limits", "gpu") },
            ...(quota ? { quota } : {}),
        };
    });
}

function table(header: string[], rows: string[][]): string {
    const line = (cells: string[]) => `| ${cells.map((c) => c.replace(/\|/g, "\\|")).join(" | ")} |`;
    return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

/** `16 / 16` (request / limit); `-` for neither, `none` for an unbounded limit. */
function pair(req: string | undefined, lim: string | undefined, unbounded: boolean): string {
    if (req === undefined && lim === undefined) return unbounded ? "- / none" : "-";
    return `${req ?? "-"} / ${lim ?? (unbounded ? "none" : "-")}`;
}

/** The section's lines; nothing for a plan without pods (Docker: its own host table). */
export function podResourcesSection(manifests: ReadonlyArray<Manifest>): string[] {
    const shapes = podShapes(manifests);
    if (shapes.length === 0) return [];
    const rows = shapes.map((s) => [
        s.namespace,
        `\`${s.owner}\` (${s.containers.join(", ")})`,
        `${s.count}: ${s.countFrom}`,
        pair(s.requests.cpu, s.limits.cpu, true),
        pair(s.requests.memory, s.limits.memory, true),
        pair(s.requests.gpu, s.limits.gpu, false),
    ]);
    const totals = namespaceTotals(shapes, manifests).map((t) => [
        t.namespace,
        String(t.pods),
        pair(t.requests.cpu, t.limits.cpu, true),
        pair(t.requests.memory, t.limits.memory, true),
        pair(t.requests.gpu, t.limits.gpu, false),
        t.quota === undefined
            ? "-"
            : Object.entries(t.quota)
                  .map(([k, v]) => `${k} ${v}`)
                  .join(", "),
    ]);
    return [
        "## Pod resources",
        "",
        "Read from the manifests in manifests/ (request / limit, per pod: the app containers plus sidecars, or the largest init container plus sidecars, whichever is larger, as the scheduler counts them).",
        "",
        table(["namespace", "pod (containers)", "pods", "CPU", "memory", "GPU"], rows),
        "",
        table(["namespace", "pods", "CPU", "memory", "GPU", "ResourceQuota (hard)"], totals),
        "",
        "Totals are the pods the objects ask for at once; a sandbox claimed from a warm pool is refilled, so the sandboxes namespace can hold more, up to its ResourceQuota.",
        "",
    ];
}
