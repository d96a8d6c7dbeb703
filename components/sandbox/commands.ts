/**
 * What the processes of a sandbox pod run: the command runtime as PID 1 and the key-holding
 * forwarder beside it (python/agent_rl_sandbox/runtime.py, forwarder.py). Pure.
 */
import {
    type ForwarderBounds,
    SANDBOX_FORWARDER_PATH,
    SANDBOX_FORWARDER_PORT,
    SANDBOX_HOME_SEED,
    SANDBOX_KEY_ENV,
    SANDBOX_PORT,
    SANDBOX_RUNTIME_PATH,
    SANDBOX_TRACE_PORT,
} from "./model";

/**
 * The forwarder's command: the model routes on loopback only (the agent's container shares the pod's loopback,
 * nothing outside the pod reaches it), the trace on the pod IP for the trainer, the ingress as upstream, the run's
 * sampling and the rollout's bounds, and the key: with `keyPort`, only the rollout's, delivered once by the
 * trainer; else the pool's, from its own container's env.
 */
export function sandboxForwarderCommand(
    upstreamUrl: string,
    bounds: ForwarderBounds,
    port: number = SANDBOX_FORWARDER_PORT,
    tracePort: number = SANDBOX_TRACE_PORT,
    keyPort?: number,
): string[] {
    return [
        "python3",
        "-I",
        SANDBOX_FORWARDER_PATH,
        "--host",
        "127.0.0.1",
        "--port",
        String(port),
        "--trace-host",
        "0.0.0.0",
        "--trace-port",
        String(tracePort),
        "--upstream",
        upstreamUrl,
        // The sampling the trainer checks the record against (trusted_trace.check_sampling), forced here.
        "--temperature",
        String(bounds.temperature),
        "--max-tokens",
        String(bounds.maxTokens),
        "--max-calls",
        String(bounds.maxCalls),
        "--max-rollout-tokens",
        String(bounds.maxRolloutTokens),
        // Agent-sandbox pools: the rollout's key, delivered once by the trainer on the pod IP (docs/design/rollout-keys.md).
        ...(keyPort !== undefined ? ["--key-host", "0.0.0.0", "--key-port", String(keyPort)] : ["--key-env", SANDBOX_KEY_ENV]),
    ];
}

/** PID 1 of every Kubernetes sandbox: the runtime (python -I: nothing from the writable HOME, e.g. a planted sitecustomize, is imported). */
export function sandboxRuntimeCommand(port: number = SANDBOX_PORT): string[] {
    return ["python3", "-I", SANDBOX_RUNTIME_PATH, "--port", String(port), "--home-seed", SANDBOX_HOME_SEED];
}
