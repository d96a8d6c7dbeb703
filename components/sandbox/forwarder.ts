/**
 * The key-holding forwarder beside every sandbox (model.ts SandboxForwarder says why the key lives
 * there), and where the agent's side sends its model calls. Pure.
 */
import { runSampling } from "../config/run-sampling";
import { takesRolloutKeys } from "../config/sandbox-providers";
import { sandboxForwarderCommand } from "./commands";
import {
    FORWARDER_CPU,
    type ForwarderBounds,
    FORWARDER_MEMORY,
    SANDBOX_FORWARDER_PATH,
    SANDBOX_FORWARDER_PORT,
    SANDBOX_KEY_ENV,
    SANDBOX_KEY_PORT,
    SANDBOX_TRACE_PORT,
    type SandboxConfig,
    type SandboxForwarder,
} from "./model";

/** The forwarder's URL on the pod's loopback: what the agent's side calls (the capture proxy's upstream). */
export const FORWARDER_URL = `http://127.0.0.1:${SANDBOX_FORWARDER_PORT}`;

/** The run's sampling (config/run-sampling.ts, as the trainer runs it) and the rollout's bounds, for the forwarder to force. */
export function forwarderBounds(config: Pick<SandboxConfig, "sandboxes" | "training">): ForwarderBounds {
    const sampling = runSampling(config);
    return {
        temperature: sampling.temperature,
        maxTokens: sampling.maxCompletionTokens,
        maxCalls: config.sandboxes.maxCallsPerRollout,
        maxRolloutTokens: config.sandboxes.maxTokensPerRollout,
    };
}

/** The forwarder: loopback only, the ingress as upstream, a uid of its own beside the sandbox's. */
export function forwarderDescription(config: Pick<SandboxConfig, "sandboxes" | "target" | "training">, ingressUrl: string): SandboxForwarder {
    const s = config.sandboxes;
    const keyPort = takesRolloutKeys(config) ? SANDBOX_KEY_PORT : undefined;
    const bounds = forwarderBounds(config);
    return {
        command: sandboxForwarderCommand(ingressUrl, bounds, SANDBOX_FORWARDER_PORT, SANDBOX_TRACE_PORT, keyPort),
        bounds,
        probeCommand: ["python3", "-I", SANDBOX_FORWARDER_PATH, "--probe", "--port", String(SANDBOX_FORWARDER_PORT)],
        port: SANDBOX_FORWARDER_PORT,
        tracePort: SANDBOX_TRACE_PORT,
        ...(keyPort !== undefined ? { keyPort } : {}),
        url: FORWARDER_URL,
        // A uid of its own beside the sandbox's (schema: runAsUser in 1000..2^31-1).
        runAsUser: s.runAsUser < 2147483647 ? s.runAsUser + 1 : s.runAsUser - 1,
        // Per-rollout keys replace the pool's key: no shared key in this container (docs/design/rollout-keys.md).
        ...(keyPort === undefined ? { keyEnv: SANDBOX_KEY_ENV } : {}),
        cpu: FORWARDER_CPU,
        memory: FORWARDER_MEMORY,
    };
}
