/**
 * The programs of components/observability/ that run in containers (standard-library Python 3, or
 * an mtail program), each a file beside this module mounted by ConfigMap the way the env router's
 * capacity responder is (components/env/responder.ts): where each lives, its file name in a
 * ConfigMap, and its command line. scripts/build.sh copies the files into dist. The trainer's
 * series come from the training node's own role runner (components/training/role-runner.ts).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { ENV_SESSION_METRICS } from "../shared/metrics";

/** One program file: its path on disk beside this module and its ConfigMap key. */
export interface ProgramFile {
    /** Absolute path of the file in this package. */
    readonly sourcePath: string;
    /** File name in a ConfigMap / Docker upload. */
    readonly file: string;
}

function program(file: string): ProgramFile {
    return { sourcePath: path.join(__dirname, file), file };
}

/** Counts an env replica's sessions (established connections to its port): agentrl_env_sessions_*. */
export const SESSION_COUNTER = program("session_counter.py");
/** mtail program turning the ingress's JSON access log into agentrl_ingress_* series. */
export const INGRESS_MTAIL = program("ingress.mtail");

/** A program's text (for a ConfigMap, an upload or a checksum). */
export function programText(p: ProgramFile): string {
    return fs.readFileSync(p.sourcePath, "utf8");
}

/**
 * argv of the session counter beside one env replica. `replica` is the pod's name (the downward
 * API's metadata.name through $(POD_NAME) on Kubernetes, the container name on Docker): one series
 * per replica, never per session.
 */
export function sessionCounterCommand(args: {
    readonly python?: string;
    readonly scriptPath: string;
    readonly envName: string;
    readonly replica: string;
    readonly replicaPort: number;
    readonly capacity: number;
    /** @default `0.0.0.0:${ENV_SESSION_METRICS.port}` */
    readonly listen?: string;
}): string[] {
    return [
        args.python ?? "python3",
        "-I",
        "-B",
        args.scriptPath,
        "--port",
        String(args.replicaPort),
        "--env",
        args.envName,
        "--replica",
        args.replica,
        "--capacity",
        String(args.capacity),
        "--listen",
        args.listen ?? `0.0.0.0:${ENV_SESSION_METRICS.port}`,
    ];
}
