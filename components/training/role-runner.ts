/**
 * The role runner (role_runner.py beside this module, stdlib-only Python 3): every line a role writes
 * comes out prefixed with `[<role>] `, and with a metrics address the trainer's liveness and step
 * progress are served on GET /metrics there. It runs each role of the shared single container
 * (supervisor.ts) whatever observability says, so one container's interleaved log always says who
 * wrote each line, and the trainer elsewhere on Kubernetes only with observability on (its
 * agentrl_trainer_* series). Mounted read-only at METRICS_PROGRAM_DIR with the shared /metrics
 * server it imports (components/shared/metrics_http.py). scripts/build.sh copies it into dist.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { metricsHttpModule } from "../shared/metrics-http";
import { METRICS_PROGRAM_DIR, type MetricsFile } from "../shared/metrics-pods";

/** The program on disk (sourcePath) and its file name where it is mounted. */
export const ROLE_RUNNER = { sourcePath: path.join(__dirname, "role_runner.py"), file: "role_runner.py" } as const;

/** The roles it runs; each is the prefix of its lines (`[vllm] `, `[trainer] `). */
export type Role = "vllm" | "trainer";

/** How a pod runs the role runner. */
export interface RoleRunner {
    /** Its path in the container (METRICS_PROGRAM_DIR/role_runner.py). */
    readonly path: string;
    /** observability.enabled: where the trainer's runner serves GET /metrics. @default undefined (no listener) */
    readonly metricsListen?: string;
}

/** The role runner mounted at METRICS_PROGRAM_DIR, serving the trainer's metrics on `metricsListen` when given. */
export function roleRunnerAt(metricsListen?: string): RoleRunner {
    return { path: `${METRICS_PROGRAM_DIR}/${ROLE_RUNNER.file}`, ...(metricsListen !== undefined ? { metricsListen } : {}) };
}

/** The files to mount together at METRICS_PROGRAM_DIR: the runner and the module it imports. */
export function roleRunnerFiles(): MetricsFile[] {
    return [{ file: ROLE_RUNNER.file, text: fs.readFileSync(ROLE_RUNNER.sourcePath, "utf8") }, metricsHttpModule()];
}

/**
 * argv of one role under the runner: isolated Python (-I: the image's PYTHON* vars and user site play
 * no part; -B: no bytecode writes). The trainer's metrics flags only where the runner serves them.
 */
export function roleRunnerArgv(runner: RoleRunner, role: Role, argv: readonly string[], vllmHealthUrl?: string): string[] {
    const metrics =
        role === "trainer" && runner.metricsListen !== undefined
            ? ["--metrics-listen", runner.metricsListen, ...(vllmHealthUrl !== undefined ? ["--vllm-health-url", vllmHealthUrl] : [])]
            : [];
    return ["python3", "-I", "-B", runner.path, "--role", role, ...metrics, "--", ...argv];
}
