/**
 * The trainer's launcher: `python x.py` or `accelerate launch x.py` with every process of the run, and
 * across nodes the rank and rendezvous flags JobSet's labels fill in. Pure; refusals go to `problems`.
 */
import type { MultiNodeDescription } from "./model";

/** accelerate flags the platform sets for a multi-node run (from JobSet's labels); the command may not set them. */
const MULTI_NODE_FLAGS = ["--num_machines", "--machine_rank", "--main_process_ip", "--main_process_port"] as const;

/**
 * Multi-node: `accelerate launch` with every process of the run (`--num_processes` is the total over
 * all machines), this pod's rank and the rank-0 address, both expanded by Kubernetes from env vars
 * the downward API fills from JobSet's labels.
 */
export function multiNodeLauncher(command: readonly string[] | undefined, m: MultiNodeDescription, problems: string[]): string[] | undefined {
    const before = problems.length;
    const single = launcher(command, m.processesPerNode * m.nodes, problems);
    // launcher already said why a command that is not accelerate (nor python) cannot start the processes.
    if (single === undefined || problems.length > before) return undefined;
    const taken = MULTI_NODE_FLAGS.filter((f) => single.includes(f));
    if (taken.length > 0) {
        problems.push(
            `training.command: ${taken.join(", ")} ${taken.length === 1 ? "is" : "are"} set by the platform from JobSet's labels when training.nodes > 1: remove ${taken.length === 1 ? "it" : "them"} from the command`,
        );
        return undefined;
    }
    return [
        ...single.slice(0, 2),
        "--num_machines",
        String(m.nodes),
        "--machine_rank",
        "$(MACHINE_RANK)",
        "--main_process_ip",
        "$(MAIN_PROCESS_IP)",
        "--main_process_port",
        String(m.mainProcessPort),
        ...single.slice(2),
    ];
}

/** `python x.py` or `accelerate launch x.py`, with `--num_processes` set for accelerate. */
export function launcher(command: readonly string[] | undefined, numProcesses: number, problems: string[]): string[] | undefined {
    if (command === undefined) {
        problems.push(
            `training.command: required: the command that starts the training script baked into the trainer image (e.g. [python, /app/train.py]${numProcesses > 1 ? `; ${numProcesses} processes need 'accelerate launch <script>'` : ""})`,
        );
        return undefined;
    }
    const [first, second, ...rest] = command;
    if (first === "accelerate" && second === "launch") {
        return command.includes("--num_processes") ? [...command] : ["accelerate", "launch", "--num_processes", String(numProcesses), ...rest];
    }
    if (numProcesses > 1) {
        if (first === "python" || first === "python3") return ["accelerate", "launch", "--num_processes", String(numProcesses), ...command.slice(1)];
        problems.push(
            `training.command: ${numProcesses} trainer processes need 'accelerate launch <script>' (or 'python <script>', turned into it), got '${command.join(" ")}'`,
        );
    }
    return [...command];
}
