/**
 * The docker target's metrics (observability.enabled, docs/guides/observability.md): the same sidecars the
 * Kubernetes pods run (metrics-pods.ts MetricsSidecar), each a container of its own in the network
 * namespace of the container it watches (`container:<id>`, as the pod's containers share one), and the
 * metrics ports published on the host's loopback only, where a Prometheus on the host scrapes them.
 * A container that joins another's network namespace cannot publish ports (dockerd refuses port
 * bindings with network mode container:), so the container that owns the namespace publishes them.
 */
import * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import { METRICS_PROGRAM_DIR, type MetricsSidecar } from "./metrics-pods";
import { dockerCpus, dockerMemoryMiB } from "./quantity";

/** The only host address a metrics port is published on: a Prometheus on the host, nothing beyond it. */
export const DOCKER_METRICS_HOST_IP = "127.0.0.1";

/**
 * One scrape target of a Docker stack: a port in `container`'s network namespace published on the
 * host's loopback, with the labels a PodMonitor's target gets on Kubernetes (namespace, pod,
 * container, job), so the same rules and dashboard select it unchanged.
 */
export interface DockerMetricsTarget {
    /** The container that owns the network namespace and publishes the port. */
    readonly container: string;
    /** The port in that namespace (the sidecar's or the main process's). */
    readonly containerPort: number;
    /** The port on the host's loopback (observability.hostPortBase + its offset). */
    readonly hostPort: number;
    /** What Prometheus requests (a relayed replica's own path). */
    readonly path: string;
    /** Static target labels: namespace (the stack's names for it), agentrl_stack, pod (the container watched), container (what serves), job. */
    readonly labels: Readonly<Record<string, string>>;
}

/** `docker run -p 127.0.0.1:<host>:<port>` for each distinct metrics port `container` publishes. */
export function publishedMetricsPorts(targets: readonly DockerMetricsTarget[] | undefined, container: string): docker.types.input.ContainerPort[] {
    const seen = new Map<number, number>();
    for (const t of targets ?? []) if (t.container === container) seen.set(t.containerPort, t.hostPort);
    return [...seen].map(([internal, external]) => ({ internal, external, ip: DOCKER_METRICS_HOST_IP, protocol: "tcp" }));
}

/** publishedMetricsPorts for a container that publishes nothing else: undefined when there are none, so a stack without observability keeps its container inputs as they were. */
export function metricsPortsOnly(targets: readonly DockerMetricsTarget[] | undefined, container: string): docker.types.input.ContainerPort[] | undefined {
    const ports = publishedMetricsPorts(targets, container);
    return ports.length > 0 ? ports : undefined;
}

/**
 * A sidecar's argv on Docker: `$(POD_NAME)` / `$(POD_NAMESPACE)` (the Kubernetes downward API's
 * expansion of fieldEnv) become the watched container's name and the stack's namespace name.
 */
export function dockerSidecarArgs(s: MetricsSidecar, pod: { readonly name: string; readonly namespace: string }): string[] {
    const values: Record<string, string> = { "metadata.name": pod.name, "metadata.namespace": pod.namespace };
    return s.args.map((a) => a.replace(/\$\(([A-Z_][A-Z0-9_]*)\)/g, (m, v: string) => (s.fieldEnv?.[v] !== undefined ? values[s.fieldEnv[v]]! : m)));
}

/** The Docker inputs of a metrics sidecar in `main`'s network namespace (pure: the mock tests read them). */
export function dockerMetricsSidecarInputs(
    s: MetricsSidecar,
    main: { readonly name: string; readonly id: pulumi.Input<string>; readonly namespace: string },
    image: pulumi.Input<string>,
    labels: ReadonlyArray<{ readonly label: string; readonly value: string }> = [],
): docker.ContainerArgs {
    return {
        name: `${main.name}-${s.name}`,
        image,
        ...(s.command !== undefined ? { entrypoints: [...s.command] } : {}),
        command: dockerSidecarArgs(s, main),
        envs: Object.entries(s.fieldEnv ?? {}).map(([k, f]) => `${k}=${f === "metadata.name" ? main.name : main.namespace}`),
        user: `${s.runAsUser}:${s.runAsUser}`,
        // The watched process's loopback, as in the pod; the ports are published by `main` (see the top of this file).
        networkMode: pulumi.interpolate`container:${main.id}`,
        // Read-only root only without uploads: the daemon refuses to copy uploads into a read-only root
        // filesystem (moby daemon/archive.go). The program files themselves are 0444.
        readOnly: s.files.length === 0,
        uploads: s.files.map((f) => ({ file: `${METRICS_PROGRAM_DIR}/${f.file}`, content: f.text, permissions: "0444" })),
        ...(s.scratchDir !== undefined ? { tmpfs: { [s.scratchDir]: `rw,noexec,nosuid,nodev,size=16m,uid=${s.runAsUser},gid=${s.runAsUser},mode=0700` } } : {}),
        labels: [{ label: "app.kubernetes.io/part-of", value: "agent-rl-infra" }, { label: "app.kubernetes.io/component", value: "metrics" }, ...labels],
        cpus: dockerCpus(s.cpu),
        memory: dockerMemoryMiB(s.memory),
        memorySwap: dockerMemoryMiB(s.memory),
        restart: "unless-stopped",
        destroyGraceSeconds: 5,
        capabilities: { drops: ["ALL"] },
        securityOpts: ["no-new-privileges:true"],
        privileged: false,
    };
}

/**
 * Registers a metrics sidecar beside `main` (child `${name}-<sidecar>`). It follows `main`: a new
 * main container (new id) replaces it, a restarted one keeps its namespace.
 */
export function registerDockerMetricsSidecar(
    name: string,
    s: MetricsSidecar,
    main: { readonly name: string; readonly container: docker.Container; readonly namespace: string },
    image: pulumi.Input<string>,
    parent: pulumi.Resource,
    extra: Partial<docker.ContainerArgs> = {},
): docker.Container {
    return new docker.Container(
        `${name}-${s.name}`,
        { ...dockerMetricsSidecarInputs(s, { name: main.name, id: main.container.id, namespace: main.namespace }, image), ...extra },
        // Fixed name: the old one must go before its replacement.
        { parent, deleteBeforeReplace: true },
    );
}

/**
 * Where each scrape target sits on the host, as offsets from observability.hostPortBase: fixed
 * slots for the training node and the ingress, then two per deployed env in name order (its
 * router's capacity responder, its replicas' relay). An env's replica count never moves a port;
 * adding or removing an env moves the ports of the envs after it by name.
 */
export const DOCKER_METRICS_SLOTS = { vllm: 0, ingressStub: 1, ingressLog: 2, firstEnv: 10, perEnv: 2 } as const;

/** The host ports of a Docker stack's metrics targets, from the base and its deployed envs' names. */
export function dockerMetricsHostPorts(
    base: number,
    envNames: readonly string[],
): {
    readonly vllm: number;
    readonly ingressStub: number;
    readonly ingressLog: number;
    readonly envs: Readonly<Record<string, { readonly router: number; readonly replicas: number }>>;
    /** The highest port the layout uses. */
    readonly last: number;
} {
    const s = DOCKER_METRICS_SLOTS;
    const sorted = [...envNames].sort((a, b) => a.localeCompare(b));
    const envs = Object.fromEntries(sorted.map((n, i) => [n, { router: base + s.firstEnv + s.perEnv * i, replicas: base + s.firstEnv + s.perEnv * i + 1 }]));
    return {
        vllm: base + s.vllm,
        ingressStub: base + s.ingressStub,
        ingressLog: base + s.ingressLog,
        envs,
        last: base + (sorted.length > 0 ? s.firstEnv + s.perEnv * sorted.length - 1 : s.ingressLog),
    };
}
