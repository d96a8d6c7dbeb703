/**
 * The docker target's scrape targets (observability.enabled): every metrics port the stack's
 * containers serve, published on the host's loopback at a port decided here once
 * (shared/docker-metrics.ts dockerMetricsHostPorts), with the labels a PodMonitor's target carries on
 * Kubernetes. The containers publish these ports (each component's docker.ts) and prometheus.yml
 * lists them (components/observability prometheusConfig): one table for both, so they cannot differ.
 *
 * Not visible on Docker: the trainer (it runs bare there, without the role runner), and the
 * agent-sandbox controller (it does not exist on Docker; the pool is plain containers).
 */
import { replicaMetricsPath, REPLICA_METRICS_RELAY_PORT } from "../env";
import { DOCKER_METRICS_HOST_IP, dockerMetricsHostPorts, type DockerMetricsTarget } from "../shared/docker-metrics";
import { type MetricsPort, type ScrapedPods, STACK_SERIES_LABEL } from "../shared/metrics-pods";
import type { PlatformPlan } from "./model";

type Planned = Pick<PlatformPlan, "config" | "names" | "training" | "ingress" | "envs">;

/** The `job` label a PodMonitor gives the pods serving `port` (their app.kubernetes.io/name). */
function jobOf(scraped: readonly ScrapedPods[], port: MetricsPort): string {
    return scraped.find((s) => s.ports.some((p) => p.name === port.name))?.podLabels["app.kubernetes.io/name"] ?? port.container;
}

function deployedEnvNames(p: Pick<PlatformPlan, "envs">): string[] {
    return p.envs.filter((e) => e.kind === "deployed").map((e) => e.name);
}

/** Every metrics target of a Docker stack with observability on; [] otherwise. */
export function dockerMetricsTargets(p: Planned): DockerMetricsTarget[] {
    const c = p.config;
    if (c.target.kind !== "docker" || !c.observability.enabled) return [];
    const hostPorts = dockerMetricsHostPorts(c.observability.hostPortBase, deployedEnvNames(p));
    const out: DockerMetricsTarget[] = [];
    // What the monitors copy from the pods' STACK_POD_LABEL on Kubernetes: the rules select on it beside namespace.
    const stack = { [STACK_SERIES_LABEL]: p.names.prefix };
    const t = p.training;
    const listener = t.metrics?.vllm;
    if (t.vllm !== undefined && listener !== undefined) {
        out.push({
            container: t.vllm.dockerName,
            containerPort: listener.port.port,
            hostPort: hostPorts.vllm,
            path: listener.port.path,
            labels: { namespace: t.namespace, ...stack, pod: t.vllm.dockerName, container: listener.name, job: jobOf(t.metrics!.scraped, listener.port) },
        });
    }
    const m = p.ingress?.metrics;
    if (p.ingress !== undefined && m !== undefined) {
        const container = p.ingress.names.container;
        const ns = p.names.namespaces.ingress;
        for (const [s, hostPort] of [
            [m.exporter, hostPorts.ingressStub],
            [m.log, hostPorts.ingressLog],
        ] as const) {
            out.push({
                container,
                containerPort: s.port.port,
                hostPort,
                path: s.port.path,
                labels: { namespace: ns, ...stack, pod: container, container: s.name, job: jobOf(m.scraped, s.port) },
            });
        }
    }
    for (const e of p.envs) {
        if (e.kind !== "deployed" || e.metrics === undefined) continue;
        const ports = hostPorts.envs[e.name]!;
        const router = e.router.service;
        out.push({
            container: router,
            containerPort: e.metrics.router.port,
            hostPort: ports.router,
            path: e.metrics.router.path,
            labels: { namespace: e.namespace, ...stack, pod: router, container: e.metrics.router.container, job: jobOf(e.metrics.scraped, e.metrics.router) },
        });
        for (const replica of e.replicas.containerNames) {
            out.push({
                container: router,
                containerPort: REPLICA_METRICS_RELAY_PORT,
                hostPort: ports.replicas,
                path: replicaMetricsPath(replica),
                labels: {
                    namespace: e.namespace,
                    ...stack,
                    pod: replica,
                    container: e.metrics.sessions.name,
                    job: jobOf(e.metrics.scraped, e.metrics.sessions.port),
                },
            });
        }
    }
    return out;
}

/**
 * What the host ports cannot be: above 65535, or a port the stack already publishes (the ingress's).
 * Each message names observability.hostPortBase and the fix.
 */
export function dockerMetricsPortProblems(p: Planned, targets: readonly DockerMetricsTarget[]): string[] {
    const c = p.config;
    if (c.target.kind !== "docker" || !c.observability.enabled) return [];
    const base = c.observability.hostPortBase;
    const problems: string[] = [];
    const { last } = dockerMetricsHostPorts(base, deployedEnvNames(p));
    if (last > 65535)
        problems.push(
            `observability.hostPortBase: ${base} puts the last metrics port at ${last} (10 ports, then 2 per deployed env), above 65535: lower hostPortBase (default 19400)`,
        );
    const ingress = p.ingress;
    if (ingress !== undefined) {
        const clash = targets.find((t) => t.hostPort === ingress.publicPort);
        if (clash !== undefined)
            problems.push(
                `observability.hostPortBase: host port ${clash.hostPort} (${clash.labels.container} of ${clash.labels.pod}) is the port the ingress publishes on ${ingress.dockerPublishIp}: move hostPortBase (default 19400) so that ${base}..${last} leaves out ${ingress.publicPort}`,
            );
    }
    return problems;
}

/** What plan.md and docs/guides/observability.md list: each target's host address and what serves it. */
export function dockerMetricsAddress(t: DockerMetricsTarget): string {
    return `${DOCKER_METRICS_HOST_IP}:${t.hostPort}${t.path}`;
}
