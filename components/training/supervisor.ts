/**
 * Kubernetes with gpuSharing `shared`: vLLM and the trainer run in ONE container that holds
 * every training GPU, so NCCL's weight update takes P2P over NVLink instead of failing
 * ('Cuda failure 101 invalid device ordinal', NVIDIA/nccl issues 1529 and 1948) or crawling
 * over shared memory. The device plugin gives each container only its own GPUs, so two
 * containers cannot have this. A small POSIX-sh supervisor keeps what the sidecar layout gave:
 *
 * - (opt-in) the NCCL check between the two GPU sets, before anything loads;
 * - vLLM first, on its GPUs (CUDA_VISIBLE_DEVICES), the trainer only once vLLM's `/health`
 *   answers (what the native sidecar's startup probe gated), within modelLoadSeconds;
 * - a clean exit: the container exits with the trainer's code (the Job's podFailurePolicy reads
 *   it), vLLM is stopped when the trainer ends, and the trainer when vLLM dies (exit 1);
 *   SIGTERM (pod deletion, preemption) is passed to both;
 * - vLLM's liveness, in place of a kubelet liveness probe: here a probe's kill takes the trainer with
 *   it and the Job's FailJob rule ends the run, so one minute of a busy vLLM (6 x 10 s) would end a
 *   multi-hour run. The supervisor instead polls `/health` once training runs and counts only time
 *   without any answer: a request waits as long as the bound has left, so a slow answer (a busy event
 *   loop) is an answer; a vLLM that has not answered 200 for `unansweredSeconds` (503 from a dead
 *   engine, refused connections, hung requests) stops the trainer and vLLM (TERM, KILL after
 *   `stopGraceSeconds`) and the container exits 1, which ends the run as a crash does.
 *
 * Pure: builds text and a container description; no Pulumi.
 */
import type { ContainerDescription, TrainingDescription } from "./model";
import { CONTAINER, VLLM_UNANSWERED_SECONDS } from "./model";
import { VLLM_PORT } from "../config/names";
import { addQuantities } from "../shared/quantity";
import type { Role, RoleRunner } from "./model";
import { roleRunnerArgv } from "./role-runner";

/** The bound the supervisor's watch ends the run on: defined with the probes it replaces (./model). */
export { VLLM_UNANSWERED_SECONDS };
/** Seconds a stopped role gets between SIGTERM and SIGKILL (a hung vLLM may ignore TERM). */
export const STOP_GRACE_SECONDS = 30;

/** One shell word, single-quoted (the only safe quoting for arbitrary text). */
export function shellQuote(word: string): string {
    return /^[A-Za-z0-9_./:=,@%+-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

function words(argv: readonly string[]): string {
    return argv.map(shellQuote).join(" ");
}

export interface SupervisorSpec {
    /** vLLM's command line. */
    readonly vllm: readonly string[];
    /** Env vars only vLLM's process gets (CUDA_VISIBLE_DEVICES, VLLM_SERVER_DEV_MODE, ...). */
    readonly vllmEnv: Readonly<Record<string, string>>;
    /** Env vars of the container vLLM's process must not see (the trainer's secrets). */
    readonly vllmUnset: readonly string[];
    /** The trainer's command line. */
    readonly trainer: readonly string[];
    /** Env vars only the trainer's process gets. */
    readonly trainerEnv: Readonly<Record<string, string>>;
    /** vLLM's health URL, polled before the trainer starts. */
    readonly healthUrl: string;
    /** Seconds vLLM may take to become healthy. */
    readonly loadSeconds: number;
    /** Seconds between health polls. */
    readonly pollSeconds?: number;
    /** Seconds vLLM may go without answering /health once training runs. @default VLLM_UNANSWERED_SECONDS */
    readonly unansweredSeconds?: number;
    /** Seconds between SIGTERM and SIGKILL when a role is stopped for the other's failure. @default STOP_GRACE_SECONDS */
    readonly stopGraceSeconds?: number;
    /** The NCCL check to run first (argv), if any. */
    readonly check?: readonly string[];
    /**
     * The role runner (role_runner.py, ./role-runner) each role runs under: every output line prefixed
     * with its role (`[vllm] `, `[trainer] `), and with `metricsListen` the trainer's liveness and step
     * progress on GET /metrics there. oneContainer always sets it. @default undefined (roles run bare)
     */
    readonly roleRunner?: RoleRunner;
}

/** argv of one role, under the role runner when there is one. */
function roleArgv(s: SupervisorSpec, role: Role, argv: readonly string[]): readonly string[] {
    return s.roleRunner === undefined ? argv : roleRunnerArgv(s.roleRunner, role, argv, s.healthUrl);
}

function assignments(env: Readonly<Record<string, string>>): string {
    return Object.entries(env)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => `${k}=${shellQuote(v)}`)
        .join(" ");
}

/** The supervisor's script text (run as `/bin/sh -c <script> agentrl-supervisor`). */
export function renderSupervisor(s: SupervisorSpec): string {
    const poll = s.pollSeconds ?? 5;
    const bound = s.unansweredSeconds ?? VLLM_UNANSWERED_SECONDS;
    const grace = s.stopGraceSeconds ?? STOP_GRACE_SECONDS;
    const unset = s.vllmUnset.map((k) => `-u ${k}`).join(" ");
    const health = `import urllib.request; urllib.request.urlopen(${JSON.stringify(s.healthUrl)}, timeout=5)`;
    // Exits 3 once vLLM has gone `bound` seconds without a 200; each request may take what is left of it.
    const watch = [
        "import sys, time, urllib.request",
        "url, bound, poll = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])",
        "last = time.monotonic()",
        "while True:",
        "    left = bound - (time.monotonic() - last)",
        "    if left <= 0: sys.exit(3)",
        "    try:",
        "        urllib.request.urlopen(url, timeout=left).close()",
        "        last = time.monotonic()",
        "    except Exception:",
        "        pass",
        "    time.sleep(poll)",
    ].join("\n");
    const lines = [
        `set -u`,
        `log() { echo "agentrl-supervisor: $*" >&2; }`,
        `vllm_pid=; trainer_pid=; watch_pid=`,
        `stop_all() { for p in $watch_pid $trainer_pid $vllm_pid; do kill -TERM "$p" 2>/dev/null; done; }`,
        // TERM, then KILL after the grace (a hung process may ignore TERM), then reap.
        `stop_hard() { stop_all; n=0; while [ "$n" -lt ${grace} ]; do alive=; for p in $trainer_pid $vllm_pid; do kill -0 "$p" 2>/dev/null && alive=1; done; [ -z "$alive" ] && break; sleep 1; n=$((n + 1)); done; for p in $trainer_pid $vllm_pid; do kill -KILL "$p" 2>/dev/null; done; wait; }`,
        `trap 'log "signal: stopping vLLM and the trainer"; stop_all; wait; exit 143' TERM INT`,
    ];
    if (s.check) {
        lines.push(
            `log "NCCL check between the vLLM and trainer GPUs"`,
            `${words(s.check)} || { code=$?; log "NCCL check failed (exit $code): the weight update would fail; see its output above"; exit 1; }`,
        );
    }
    lines.push(
        `log "starting vLLM"`,
        `env ${unset} ${assignments(s.vllmEnv)} ${words(roleArgv(s, "vllm", s.vllm))} &`,
        `vllm_pid=$!`,
        `deadline=$(( $(date +%s) + ${s.loadSeconds} ))`,
        `until python3 -c ${shellQuote(health)} 2>/dev/null; do`,
        `  if ! kill -0 "$vllm_pid" 2>/dev/null; then wait "$vllm_pid"; code=$?; log "vLLM exited ($code) before it was healthy"; exit 1; fi`,
        `  if [ "$(date +%s)" -ge "$deadline" ]; then log "vLLM not healthy after ${s.loadSeconds} s (training.modelLoadSeconds)"; stop_all; wait; exit 1; fi`,
        `  sleep ${poll}`,
        `done`,
        `log "vLLM is healthy: starting the trainer"`,
        `env ${assignments(s.trainerEnv)} ${words(roleArgv(s, "trainer", s.trainer))} &`,
        `trainer_pid=$!`,
        `python3 -c ${shellQuote(watch)} ${shellQuote(s.healthUrl)} ${bound} ${poll} 2>/dev/null &`,
        `watch_pid=$!`,
        `while kill -0 "$trainer_pid" 2>/dev/null; do`,
        `  if ! kill -0 "$vllm_pid" 2>/dev/null; then log "vLLM exited during training: stopping the trainer"; kill -TERM "$watch_pid" "$trainer_pid" 2>/dev/null; wait "$trainer_pid"; exit 1; fi`,
        `  if ! kill -0 "$watch_pid" 2>/dev/null; then log "vLLM has not answered ${s.healthUrl} for ${bound} s: stopping the trainer and vLLM"; watch_pid=; stop_hard; exit 1; fi`,
        `  sleep 1`,
        `done`,
        `wait "$trainer_pid"; code=$?`,
        `kill -TERM "$watch_pid" 2>/dev/null`,
        `log "trainer exited ($code): stopping vLLM"`,
        `kill -TERM "$vllm_pid" 2>/dev/null; wait "$vllm_pid" 2>/dev/null`,
        `exit "$code"`,
    );
    return `${lines.join("\n")}\n`;
}

/** NCCL check argv for a description (spawn mode: both ranks from one process tree). */
export function ncclCheckArgv(d: TrainingDescription): string[] | undefined {
    const c = d.gpuSharing.check;
    if (!c) return undefined;
    return [
        "python3",
        c.path,
        "--spawn",
        "--vllm-devices",
        d.gpuLayout.vllm.join(","),
        "--trainer-devices",
        d.gpuLayout.trainer.join(","),
        "--size-gib",
        String(c.sizeGiB),
        "--timeout",
        String(c.timeoutSeconds),
        "--port",
        String(c.port),
    ];
}

/**
 * The one container of a shared-GPU Kubernetes training pod: the trainer's image, every GPU,
 * both roles' CPU and memory, vLLM's port, its startup and readiness probes (no liveness probe: the
 * supervisor watches vLLM, see VLLM_UNANSWERED_SECONDS), and the supervisor as its command.
 */
export function oneContainer(d: TrainingDescription): ContainerDescription {
    const v = d.vllm;
    if (!v || !d.gpuSharing.oneContainer) throw new Error(`oneContainer: layout ${d.layout} with gpuSharing ${d.gpuSharing.mode} has no second role to merge`);
    if (d.roleRunner === undefined)
        throw new Error("oneContainer: the description has no role runner (resolveTrainingNode sets one for the one-container layout)");
    const t = d.trainer;
    const { CUDA_VISIBLE_DEVICES: trainerDevices, ...containerEnv } = t.env;
    const vllmEnv: Record<string, string> = {};
    for (const [k, value] of Object.entries(v.env)) if (containerEnv[k] !== value) vllmEnv[k] = value;
    // vLLM's process never sees the trainer's own secrets (the sandbox key).
    const vllmUnset = Object.keys(t.secretEnv)
        .filter((k) => !(k in v.secretEnv))
        .sort();
    const script = renderSupervisor({
        vllm: [...(v.command ?? []), ...v.args],
        vllmEnv,
        vllmUnset,
        trainer: [...(t.command ?? []), ...t.args],
        trainerEnv: trainerDevices !== undefined ? { CUDA_VISIBLE_DEVICES: trainerDevices } : {},
        healthUrl: `http://127.0.0.1:${VLLM_PORT}${v.probes?.startup.path ?? "/health"}`,
        loadSeconds: d.modelLoadSeconds,
        check: ncclCheckArgv(d),
        // Each role under the role runner: its lines prefixed; with observability on, the trainer's series served.
        roleRunner: d.roleRunner,
    });
    return {
        name: CONTAINER.trainer,
        dockerName: t.dockerName,
        image: t.image,
        command: ["/bin/sh", "-c", script, "agentrl-supervisor"],
        args: [],
        env: containerEnv,
        secretEnv: { ...v.secretEnv, ...t.secretEnv },
        gpus: v.gpus + t.gpus,
        gpuDevices: [...d.gpuLayout.vllm, ...d.gpuLayout.trainer],
        ports: [...v.ports],
        // The trainer's metrics (the supervisor serves them); vLLM's go through its own listener.
        ...(t.metricsPorts !== undefined ? { metricsPorts: [...t.metricsPorts] } : {}),
        // The startup probe bounds the load as the supervisor does; readiness keeps the Service's endpoint honest.
        probes: v.probes ? { startup: v.probes.startup, readiness: v.probes.readiness } : undefined,
        cpu: addQuantities(v.cpu, t.cpu),
        memory: addQuantities(v.memory, t.memory),
        mounts: t.mounts,
    };
}
