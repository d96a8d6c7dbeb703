/**
 * The capacity responder beside each env router (capacity_responder.py, stdlib-only Python 3):
 * where its script lives, its file names in the router's config dir, and its command line.
 * router.ts renders its config (renderResponderConfig); ROUTER.md says why it exists.
 */
import * as fs from "node:fs";
import * as path from "node:path";

/** The script on disk, beside this module (scripts/build.sh copies it into dist). */
export const CAPACITY_RESPONDER_SCRIPT_PATH = path.join(__dirname, "capacity_responder.py");
/** File names of the script and its config in the router's config dir (ConfigMap keys / Docker uploads). */
export const RESPONDER_SCRIPT_FILE = "capacity_responder.py";
export const RESPONDER_CONFIG_FILE = "responder.json";

/** The script's text (for the ConfigMap / upload and the config checksum). */
export function capacityResponderScript(): string {
    return fs.readFileSync(CAPACITY_RESPONDER_SCRIPT_PATH, "utf8");
}

/**
 * argv of the responder: isolated mode (-I: no PYTHON* env vars, no user site, so the env image's
 * PYTHONPATH and packages play no part) and no bytecode writes (-B: the root FS is read-only).
 */
export function responderCommand(args: {
    readonly python?: string;
    readonly scriptPath: string;
    readonly configPath: string;
    readonly listen: string;
    /** host:port for GET /metrics (agentrl_env_capacity_reached_total, ENV_ROUTER_METRICS); unset: no metrics. */
    readonly metricsListen?: string;
}): string[] {
    const metrics = args.metricsListen !== undefined ? ["--metrics-listen", args.metricsListen] : [];
    return [args.python ?? "python3", "-I", "-B", args.scriptPath, "--listen", args.listen, "--config", args.configPath, ...metrics];
}

/**
 * argv of the responder's exec probe: the script's --probe mode, GET /responder/health on its
 * loopback listener (a kubelet httpGet probe goes to the pod's address, where nothing listens).
 */
export function responderProbeCommand(args: {
    readonly python?: string;
    readonly scriptPath: string;
    readonly address: string;
    readonly timeoutSeconds: number;
}): string[] {
    return [args.python ?? "python3", "-I", "-B", args.scriptPath, "--probe", args.address, "--timeout", String(args.timeoutSeconds)];
}
