/**
 * The training node's metrics endpoints (observability.enabled): vLLM's metrics-only listener
 * wherever vLLM serves HTTP (an nginx beside it that passes `GET /metrics` to vLLM on loopback and
 * nothing else, so the scrape rule never opens port 8000, which also serves /update_weights and the
 * other weight-sync routes), and the trainer container's own port (the role runner's series). In
 * colocate vLLM runs inside the training script and serves no HTTP: not visible. Pure: no Pulumi.
 */
import {
    METRICS_PORTS,
    METRICS_PROGRAM_DIR,
    type MetricsLinks,
    type MetricsSidecar,
    type ScrapedPods,
    podAnnotationsOf,
    stackPodLabels,
} from "../shared/metrics-pods";
import { podLabels } from "../config/names";
import type { MultiNodeDescription, TrainingConfig, TrainingLinks, TrainingMetrics, TrainingNames } from "./model";

/** uid/gid of nginx in nginxinc/nginx-unprivileged, the image the listener runs (images.nginx). */
const NGINX_UID = 101;

/** vLLM's metrics-only listener: nginx, its config from the programs, pid and temp files in a memory-backed /tmp. */
function vllmListener(image: string, links: MetricsLinks): MetricsSidecar {
    const file = links.programs.vllmListener;
    return {
        name: METRICS_PORTS.vllm.container,
        image,
        command: ["nginx", "-e", "stderr", "-c", `${METRICS_PROGRAM_DIR}/${file.file}`, "-g", "daemon off;"],
        args: [],
        port: METRICS_PORTS.vllm,
        files: [file],
        cpu: "100m",
        memory: "64Mi",
        runAsUser: NGINX_UID,
        // nginxinc/nginx-unprivileged keeps its pid file and temp dirs under /tmp.
        scratchDir: "/tmp",
    };
}

/** The training node's metrics, or undefined with observability off. */
export function trainingMetrics(args: {
    readonly links: MetricsLinks;
    readonly nginxImage: string;
    /** Whether vLLM serves HTTP (every layout but colocate). */
    readonly vllmServes: boolean;
    readonly namespace: string;
    readonly trainerPodLabels: Readonly<Record<string, string>>;
    /** nodes > 1: vLLM's own pod's labels (the listener runs there). */
    readonly vllmPodLabels?: Readonly<Record<string, string>>;
}): TrainingMetrics {
    const vllm = args.vllmServes ? vllmListener(args.nginxImage, args.links) : undefined;
    const trainer = METRICS_PORTS.trainer;
    const scraped: ScrapedPods[] = [];
    if (vllm && args.vllmPodLabels) {
        scraped.push({ role: "trainer", namespace: args.namespace, podLabels: args.trainerPodLabels, ports: [trainer] });
        scraped.push({ role: "vllm", namespace: args.namespace, podLabels: args.vllmPodLabels, ports: [vllm.port] });
    } else {
        scraped.push({ role: "trainer", namespace: args.namespace, podLabels: args.trainerPodLabels, ports: vllm ? [vllm.port, trainer] : [trainer] });
    }
    return {
        scraper: args.links.scraper,
        vllm,
        trainer,
        scraped,
        podAnnotations: podAnnotationsOf(args.links, scraped),
        stackLabels: stackPodLabels(args.links),
    };
}

/** The training node's metrics with observability.enabled (the Platform hands the scraper and programs in links.metrics). */
export function observedMetrics(
    config: TrainingConfig,
    names: TrainingNames,
    links: TrainingLinks,
    node: { readonly vllmServes: boolean; readonly multiNode?: MultiNodeDescription },
    problems: string[],
): TrainingMetrics | undefined {
    const observed = config.observability?.enabled ?? false;
    if (observed && links.metrics === undefined)
        problems.push("observability.enabled: the training node needs the scraper and the metrics programs: the Platform must pass links.metrics");
    return observed && links.metrics !== undefined
        ? trainingMetrics({
              links: links.metrics,
              nginxImage: config.images.nginx,
              vllmServes: node.vllmServes,
              namespace: names.namespaces.training,
              trainerPodLabels: podLabels("trainer", names.training.job),
              vllmPodLabels: node.multiNode?.vllm.podLabels,
          })
        : undefined;
}

/** form annotations: a pod template's prometheus.io/* annotations (none otherwise). */
export function annotationsOf(d: { readonly metrics?: Pick<TrainingMetrics, "podAnnotations"> }, role: string): { annotations?: Record<string, string> } {
    const a = d.metrics?.podAnnotations[role];
    return a !== undefined && Object.keys(a).length > 0 ? { annotations: { ...a } } : {};
}
