/**
 * How the stack's pods serve their metrics (metrics.ts says what is served and where): the named
 * container port of each endpoint, a metrics sidecar's description, the pods a Prometheus scrapes
 * and who may scrape them. Every component's resolve step, the NetworkPolicies and the monitors
 * read these, so a port name or a selector cannot differ between the pod, its policy and its monitor.
 */
import {
    ENV_ROUTER_METRICS,
    ENV_SESSION_METRICS,
    INGRESS_LOG_METRICS,
    INGRESS_STUB_METRICS,
    type MetricsEndpoint,
    TRAINER_METRICS,
    VLLM_METRICS,
} from "./metrics";

/**
 * The pod label naming the run stack (its value: the stack's prefix, config/names.ts) on every scraped
 * pod. A team's run stacks share the team's namespaces (`target.team`), so `namespace` alone cannot
 * tell two runs' series apart: the monitors copy this label onto every series as STACK_SERIES_LABEL,
 * and every rule and panel selects on it.
 */
export const STACK_POD_LABEL = "agentrl.dev/stack";
/** The target label carrying the stack on every scraped series (Prometheus label names take no dots or slashes). */
export const STACK_SERIES_LABEL = "agentrl_stack";

/** A pod label as Kubernetes service discovery exposes it to relabeling (every character outside [a-zA-Z0-9_] becomes `_`). */
export function podLabelMeta(label: string): string {
    return `__meta_kubernetes_pod_label_${label.replace(/[^a-zA-Z0-9_]/g, "_")}`;
}

/** The relabeling that copies the stack's pod label onto the target (a PodMonitor endpoint's, and the annotations form's scrape job). */
export const STACK_RELABELING = { sourceLabels: [podLabelMeta(STACK_POD_LABEL)], targetLabel: STACK_SERIES_LABEL } as const;

/** Where a metrics sidecar finds its program files (a ConfigMap on Kubernetes, an upload on Docker), read-only. */
export const METRICS_PROGRAM_DIR = "/opt/agentrl/observability";

/**
 * Each endpoint with its container port name: `metrics-<role>`, at most 15 characters (a port name is
 * an IANA_SVC_NAME, Kubernetes' core/v1 ContainerPort.name), which the PodMonitors name as `port`.
 */
export const METRICS_PORTS = {
    vllm: { ...VLLM_METRICS, name: "metrics-vllm" },
    trainer: { ...TRAINER_METRICS, name: "metrics-trainer" },
    ingressStub: { ...INGRESS_STUB_METRICS, name: "metrics-nginx" },
    ingressLog: { ...INGRESS_LOG_METRICS, name: "metrics-log" },
    envSessions: { ...ENV_SESSION_METRICS, name: "metrics-session" },
    envRouter: { ...ENV_ROUTER_METRICS, name: "metrics-router" },
} as const satisfies Record<string, MetricsEndpoint & { readonly name: string }>;

/** A metrics endpoint as a pod declares it: the contract's port, path and container, and its port name. */
export type MetricsPort = MetricsEndpoint & { readonly name: string };

/** The Prometheus pods the NetworkPolicies admit on the metrics ports (observability.scraper). */
export interface Scraper {
    readonly namespace: string;
    readonly podLabels: Readonly<Record<string, string>>;
}

/** A program file a metrics sidecar runs, mounted read-only as METRICS_PROGRAM_DIR/<file>. */
export interface MetricsFile {
    readonly file: string;
    readonly text: string;
}

/** A container of the pod that serves a metrics endpoint and nothing else (nginx, an exporter, mtail, a counter). */
export interface MetricsSidecar {
    /** Container name (the endpoint's `container`). */
    readonly name: string;
    readonly image: string;
    /** Entrypoint override; undefined keeps the image's (nginx-prometheus-exporter's). */
    readonly command?: readonly string[];
    readonly args: readonly string[];
    readonly port: MetricsPort;
    /** Program files (mounted under METRICS_PROGRAM_DIR); none for an exporter that takes flags only. */
    readonly files: readonly MetricsFile[];
    /** CPU and memory, requests = limits. */
    readonly cpu: string;
    readonly memory: string;
    /** Non-root uid and gid the container runs as (restricted Pod Security: read-only root, no capabilities). */
    readonly runAsUser: number;
    /** A writable scratch dir on a memory-backed emptyDir (nginx's pid and temp files), if the program needs one. */
    readonly scratchDir?: string;
    /** Env vars from the pod's own fields (Kubernetes downward API; Docker: the container's name), e.g. POD_NAME -> metadata.name. */
    readonly fieldEnv?: Readonly<Record<string, "metadata.name" | "metadata.namespace">>;
}

/** Every metrics port a pod declares (its sidecars' and its main containers'), what its monitor scrapes. */
export interface ScrapedPods {
    /** What the pods are, for plan.md and the monitor's name (`<instance>-<role>`). */
    readonly role: string;
    readonly namespace: string;
    /** THE pod labels (podLabels() in config/names.ts): the pods' own, the policy's and the monitor's selector. */
    readonly podLabels: Readonly<Record<string, string>>;
    readonly ports: readonly MetricsPort[];
}

/** The metrics programs' files (components/observability), which the Platform hands to the components that run them. */
export interface MetricsPrograms {
    /** nginx.conf of vLLM's metrics-only listener (GET /metrics to vLLM on loopback, nothing else). */
    readonly vllmListener: MetricsFile;
    /** The mtail program over the ingress's JSON access log. */
    readonly ingressLog: MetricsFile;
    /** The session counter each env replica runs beside its server. */
    readonly sessionCounter: MetricsFile;
}

/** What a component's resolve step gets when observability is on: who scrapes, and the programs its sidecars run. */
export interface MetricsLinks {
    readonly scraper: Scraper;
    readonly programs: MetricsPrograms;
    /** observability.form annotations: the pods carry prometheus.io/* annotations (scrapeAnnotations). @default false */
    readonly annotations?: boolean;
    /** The run stack's prefix: every scraped pod carries it as STACK_POD_LABEL. */
    readonly stack: string;
}

/** The labels every scraped pod's template adds to its selector labels (not part of any selector, so an existing workload's selector stays). */
export function stackPodLabels(links: Pick<MetricsLinks, "stack">): Readonly<Record<string, string>> {
    return { [STACK_POD_LABEL]: links.stack };
}

/** Each scraped pod group's annotations under form annotations, by role; {} otherwise. */
export function podAnnotationsOf(links: MetricsLinks, scraped: readonly ScrapedPods[]): Readonly<Record<string, Readonly<Record<string, string>>>> {
    return Object.fromEntries(scraped.map((s) => [s.role, links.annotations === true ? scrapeAnnotations(s.ports) : {}]));
}

/**
 * form `annotations`: `prometheus.io/scrape` and `prometheus.io/path` on every pod with metrics, and
 * `prometheus.io/port` only where the pod has exactly one metrics port. The convention has room for one
 * port per pod; pods with several (the training pod's listener and trainer, the ingress's exporter and
 * mtail) are scraped by the job docs/guides/observability.md gives, which keeps every container port named
 * `metrics-*` of an annotated pod. With only the classic port-rewriting job, those pods' other ports
 * would be tried too (and refused by their policies), so that job is not enough for them.
 */
export function scrapeAnnotations(ports: readonly MetricsPort[]): Record<string, string> {
    if (ports.length === 0) return {};
    const paths = [...new Set(ports.map((p) => p.path))];
    return {
        "prometheus.io/scrape": "true",
        ...(paths.length === 1 ? { "prometheus.io/path": paths[0]! } : {}),
        ...(ports.length === 1 ? { "prometheus.io/port": String(ports[0]!.port) } : {}),
    };
}
