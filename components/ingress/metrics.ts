/**
 * The ingress pod's metrics endpoints (observability.enabled): nginx-prometheus-exporter over the
 * proxy's stub_status on loopback (connections, requests), and mtail over the JSON access log the
 * proxy writes to a file beside stdout (responses by status and key name, latency). Both are
 * sidecars of every proxy replica; the access log file lives on an emptyDir they share. Pure.
 *
 * nginx-prometheus-exporter's flags (`--nginx.scrape-uri`, `--web.listen-address`): its exporter.go
 * (nginx/nginx-prometheus-exporter 1.4); its image runs from scratch as uid 1001. mtail's
 * (`--progs`, `--logs`, `--port`, `--logtostderr` for glog on a read-only root): google/mtail
 * cmd/mtail/main.go.
 */
import * as path from "node:path";
import { INGRESS_ACCESS_LOG_FILE, INGRESS_STUB_STATUS } from "../shared/metrics";
import {
    METRICS_PORTS,
    METRICS_PROGRAM_DIR,
    type MetricsLinks,
    type MetricsSidecar,
    type Scraper,
    type ScrapedPods,
    podAnnotationsOf,
    stackPodLabels,
} from "../shared/metrics-pods";
import { dnsName } from "../config/names";

/** The uid both sidecars run as: the proxy's (nginx-unprivileged's 101), the owner of the access log mtail reads. */
const SIDECAR_UID = 101;

export interface IngressMetrics {
    readonly scraper: Scraper;
    readonly exporter: MetricsSidecar;
    readonly log: MetricsSidecar;
    /** The ConfigMap holding mtail's program. */
    readonly configMap: string;
    /** The JSON access log file the proxy writes (and mtail reads), on an emptyDir of this size. */
    readonly accessLog: { readonly dir: string; readonly file: string; readonly sizeLimit: string };
    readonly scraped: readonly ScrapedPods[];
    /** form annotations: the prometheus.io/* annotations of each scraped pod group, by role ({} otherwise). */
    readonly podAnnotations: Readonly<Record<string, Readonly<Record<string, string>>>>;
    /** The run stack's pod label (STACK_POD_LABEL), on every scraped pod's template beside its selector labels. */
    readonly stackLabels: Readonly<Record<string, string>>;
}

export function ingressMetrics(args: {
    readonly links: MetricsLinks;
    readonly images: { readonly nginxExporter: string; readonly mtail: string };
    readonly deployment: string;
    readonly namespace: string;
    readonly podLabels: Readonly<Record<string, string>>;
}): IngressMetrics {
    const stub = `http://${INGRESS_STUB_STATUS.address}:${INGRESS_STUB_STATUS.port}${INGRESS_STUB_STATUS.path}`;
    const exporter: MetricsSidecar = {
        name: METRICS_PORTS.ingressStub.container,
        image: args.images.nginxExporter,
        args: [`--nginx.scrape-uri=${stub}`, `--web.listen-address=:${METRICS_PORTS.ingressStub.port}`],
        port: METRICS_PORTS.ingressStub,
        files: [],
        cpu: "50m",
        memory: "32Mi",
        runAsUser: SIDECAR_UID,
    };
    const program = args.links.programs.ingressLog;
    const log: MetricsSidecar = {
        name: METRICS_PORTS.ingressLog.container,
        image: args.images.mtail,
        command: ["mtail"],
        // --emit_prog_label=false: the series keep only their own labels (components/observability/ingress.mtail).
        args: [
            "--progs",
            METRICS_PROGRAM_DIR,
            "--logs",
            INGRESS_ACCESS_LOG_FILE,
            "--port",
            String(METRICS_PORTS.ingressLog.port),
            "--logtostderr",
            "--emit_prog_label=false",
        ],
        port: METRICS_PORTS.ingressLog,
        files: [program],
        cpu: "100m",
        memory: "128Mi",
        runAsUser: SIDECAR_UID,
    };
    const scraped: ScrapedPods[] = [{ role: "vllm-ingress", namespace: args.namespace, podLabels: args.podLabels, ports: [exporter.port, log.port] }];
    return {
        scraper: args.links.scraper,
        exporter,
        log,
        configMap: dnsName([args.deployment, "metrics"]),
        // Sized for a run's worth of JSON lines (about 300 bytes each: ~3.5 million requests); the kubelet
        // evicts a pod whose emptyDir outgrows it, and nginx does not rotate its own logs.
        accessLog: { dir: path.posix.dirname(INGRESS_ACCESS_LOG_FILE), file: INGRESS_ACCESS_LOG_FILE, sizeLimit: "1Gi" },
        scraped,
        podAnnotations: podAnnotationsOf(args.links, scraped),
        stackLabels: stackPodLabels(args.links),
    };
}
