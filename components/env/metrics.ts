/**
 * One env's metrics endpoints (observability.enabled): a session counter beside every replica (OpenEnv
 * 0.10 serves no /metrics, and open-source nginx keeps no per-upstream connection counts, so a small
 * program of the project's own counts the established connections to the replica's port, one per live
 * session, against the replica's cap), and the capacity responder's port in each router pod
 * (CAPACITY_REACHED refusals). The counter runs in the env's own image (every OpenEnv image has
 * python3; the program is stdlib-only) as a non-root uid with nothing writable. Pure.
 */
import { NON_ROOT_UID } from "../config/catalog";
import { dnsName } from "../config/names";
import {
    METRICS_PORTS,
    METRICS_PROGRAM_DIR,
    type MetricsLinks,
    type MetricsSidecar,
    type ScrapedPods,
    podAnnotationsOf,
    stackPodLabels,
} from "../shared/metrics-pods";
import { metricsHttpModule } from "../shared/metrics-http";
import type { EnvMetrics } from "./model";

export function envMetrics(args: {
    readonly links: MetricsLinks;
    readonly env: string;
    readonly image: string;
    /** The replica's server port (the connections counted) and its session cap. */
    readonly port: number;
    readonly sessionsPerReplica: number;
    readonly statefulSet: string;
    readonly namespace: string;
    readonly replicaPodLabels: Readonly<Record<string, string>>;
    readonly routerPodLabels: Readonly<Record<string, string>>;
}): EnvMetrics {
    const program = args.links.programs.sessionCounter;
    const sessions: MetricsSidecar = {
        name: METRICS_PORTS.envSessions.container,
        image: args.image,
        // -I -B: isolated from the image's PYTHON* settings and packages, no bytecode writes (read-only root).
        command: ["python3", "-I", "-B", `${METRICS_PROGRAM_DIR}/${program.file}`],
        args: [
            "--listen",
            `0.0.0.0:${METRICS_PORTS.envSessions.port}`,
            "--port",
            String(args.port),
            "--capacity",
            String(args.sessionsPerReplica),
            "--env",
            args.env,
            "--replica",
            "$(POD_NAME)",
        ],
        port: METRICS_PORTS.envSessions,
        // The counter imports the shared /metrics server from its own directory.
        files: [program, metricsHttpModule()],
        cpu: "50m",
        memory: "64Mi",
        runAsUser: NON_ROOT_UID,
        fieldEnv: { POD_NAME: "metadata.name" },
    };
    const scraped: ScrapedPods[] = [
        { role: "env-replica", namespace: args.namespace, podLabels: args.replicaPodLabels, ports: [sessions.port] },
        { role: "env-router", namespace: args.namespace, podLabels: args.routerPodLabels, ports: [METRICS_PORTS.envRouter] },
    ];
    return {
        scraper: args.links.scraper,
        sessions,
        router: METRICS_PORTS.envRouter,
        configMap: dnsName([args.statefulSet, "metrics"]),
        scraped,
        podAnnotations: podAnnotationsOf(args.links, scraped),
        stackLabels: stackPodLabels(args.links),
    };
}
