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
import { type GpuSharingDescription, type Role, type RoleRunner, type TrainingConfig, type TrainingMetrics, VLLM_PORT } from "./model";

/** The program on disk (sourcePath) and its file name where it is mounted. */
export const ROLE_RUNNER = { sourcePath: path.join(__dirname, "role_runner.py"), file: "role_runner.py" } as const;

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

/** The trainer's role runner, if any, and the trainer's command as it runs (wrapped by the runner where it serves metrics). */
export interface TrainerRunner {
    readonly roleRunner?: RoleRunner;
    readonly command: string[] | undefined;
}

/**
 * The role runner: each role of the one container (every line prefixed with its role: supervisor.ts),
 * whatever observability says; elsewhere it wraps the trainer's command on Kubernetes with observability
 * on only. The trainer's metrics listener only with observability on.
 */
export function trainerRunner(
    config: TrainingConfig,
    node: { readonly sharing: GpuSharingDescription; readonly metrics?: TrainingMetrics; readonly vllmServes: boolean; readonly multiNode: boolean },
    trainerCommand: string[] | undefined,
    problems: string[],
): TrainerRunner {
    const { sharing, metrics } = node;
    const wrapped = metrics !== undefined && !sharing.oneContainer && config.target.kind === "kubernetes";
    const roleRunner = sharing.oneContainer || wrapped ? roleRunnerAt(metrics ? `0.0.0.0:${metrics.trainer.port}` : undefined) : undefined;
    if (wrapped && trainerCommand === undefined)
        problems.push(
            "observability.enabled: the trainer's metrics come from a runner that wraps its command line, and training.command is unset (the image's entrypoint runs): set training.command",
        );
    const vllmHealth = node.vllmServes && !node.multiNode ? `http://127.0.0.1:${VLLM_PORT}/health` : undefined;
    const command =
        wrapped && roleRunner !== undefined && trainerCommand !== undefined
            ? roleRunnerArgv(roleRunner, "trainer", trainerCommand, vllmHealth)
            : trainerCommand;
    return { roleRunner, command };
}
