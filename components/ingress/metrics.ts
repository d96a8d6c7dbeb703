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

/**
 * How the JSON access log mtail reads stays bounded: nginx never rotates its own logs; its documented way
 * is to rename the file and send the master USR1, which reopens it (nginx docs, "Controlling nginx",
 * Rotating Log-files). Every `everySeconds` a loop beside nginx in the proxy's container checks the size;
 * above `maxBytes` it puts a new empty file in the old one's place (an atomic rename) and sends USR1.
 * mtail (3.0.0~rc50 internal/tailer/logstream/filestream.go) reads the old file to its end, sees another
 * file at the path and reads that one from its start. Lines nginx writes to the old file between the
 * rename and its reopen (milliseconds) after mtail has left it are not counted.
 * At most two files of about maxBytes plus everySeconds of lines each, against the emptyDir's 1Gi.
 * Not syslog over UDP: mtail rc50's datagram reader takes one datagram per poll tick (250 ms; dgramstream.go),
 * so it would drop nearly every line at load.
 */
export interface AccessLogRotation {
    readonly file: string;
    readonly maxBytes: number;
    readonly everySeconds: number;
}

/** The deployed rotation: above 64 MiB (about 220 000 requests), checked every 10 s. */
export const ACCESS_LOG_ROTATION: AccessLogRotation = { file: INGRESS_ACCESS_LOG_FILE, maxBytes: 64 * 1024 * 1024, everySeconds: 10 };

/**
 * The loop; `$$` is the shell's pid, which `exec` hands to nginx (the master: USR1 reopens the logs).
 * It ends once nginx is gone. sh, stat and mv are in every nginx image (Debian's and Alpine's).
 */
const ROTATE_SCRIPT = [
    'log="$1"; max="$2"; every="$3"; shift 3',
    "(",
    '  while sleep "$every" && kill -0 $$ 2>/dev/null; do',
    '    size=$(stat -c %s "$log" 2>/dev/null) || continue',
    '    if [ "$size" -gt "$max" ]; then : > "$log.next" && mv -f "$log.next" "$log" && kill -USR1 $$; fi',
    "  done",
    ") &",
    'exec "$@"',
].join("\n");

/** nginx's command line under the access log's rotation (same pid: the shell execs nginx). */
export function rotatingAccessLogCommand(command: readonly string[], r: AccessLogRotation): string[] {
    return ["sh", "-c", ROTATE_SCRIPT, "rotate-access-log", r.file, String(r.maxBytes), String(r.everySeconds), ...command];
}

export interface IngressMetrics {
    readonly scraper: Scraper;
    readonly exporter: MetricsSidecar;
    readonly log: MetricsSidecar;
    /** The ConfigMap holding mtail's program. */
    readonly configMap: string;
    /** The JSON access log file the proxy writes (and mtail reads), on an emptyDir of this size. */
    readonly accessLog: { readonly dir: string; readonly file: string; readonly sizeLimit: string; readonly rotation: AccessLogRotation };
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
        // The kubelet evicts a pod whose emptyDir outgrows its limit; the rotation keeps the log far below it.
        accessLog: { dir: path.posix.dirname(INGRESS_ACCESS_LOG_FILE), file: INGRESS_ACCESS_LOG_FILE, sizeLimit: "1Gi", rotation: ACCESS_LOG_ROTATION },
        scraped,
        podAnnotations: podAnnotationsOf(args.links, scraped),
        stackLabels: stackPodLabels(args.links),
    };
}
