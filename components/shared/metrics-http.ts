/**
 * The GET /metrics server the project's Python programs share (metrics_http.py beside this module):
 * the env router's capacity responder, the env replicas' session counter and the training pod's role
 * runner each import it from their own directory, so whoever mounts one of them (a ConfigMap, a Docker
 * upload) mounts this file beside it. scripts/build.sh copies it into dist.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import type { MetricsFile } from "./metrics-pods";

/** The module on disk, beside this file. */
export const METRICS_HTTP_PATH = path.join(__dirname, "metrics_http.py");
/** Its file name beside each program (the programs import `metrics_http`). */
export const METRICS_HTTP_FILE = "metrics_http.py";

/** The module as a file to mount beside a program that imports it. */
export function metricsHttpModule(): MetricsFile {
    return { file: METRICS_HTTP_FILE, text: fs.readFileSync(METRICS_HTTP_PATH, "utf8") };
}
