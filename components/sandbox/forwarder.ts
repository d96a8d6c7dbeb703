/**
 * The key-holding forwarder beside every sandbox (model.ts SandboxForwarder says why the key lives
 * there), and where the agent's side sends its model calls. Pure.
 */
import { sandboxForwarderCommand } from "./commands";
import {
    FORWARDER_CPU,
    FORWARDER_MEMORY,
    SANDBOX_FORWARDER_PATH,
    SANDBOX_FORWARDER_PORT,
    SANDBOX_KEY_ENV,
    SANDBOX_KEY_PORT,
    SANDBOX_TRACE_PORT,
    type SandboxConfig,
    type SandboxForwarder,
} from "./model";

/** The forwarder's URL on the pod's loopback. */
const FORWARDER_URL = `http://127.0.0.1:${SANDBOX_FORWARDER_PORT}`;

/** What the agent's side calls: hosted sandboxes (hf) have no forwarder, they call the ingress themselves with the key the trainer hands them. */
export function agentUpstreamOf(provider: SandboxConfig["sandboxes"]["provider"], ingressUrl: string): string {
    return provider === "hf" ? ingressUrl : FORWARDER_URL;
}

/**
 * Whether the pool's forwarders take a per-rollout key from the trainer: Kubernetes agent-sandbox pools, the
 * only ones with a claim backend that marks a rollout's start and end (components/ingress/verifier.ts renders
 * the verifier for exactly these).
 */
export function takesRolloutKeys(config: Pick<SandboxConfig, "sandboxes" | "target">): boolean {
    return config.target.kind === "kubernetes" && config.sandboxes.provider === "agent-sandbox";
}

/** The forwarder: loopback only, the ingress as upstream, a uid of its own beside the sandbox's. */
export function forwarderDescription(config: Pick<SandboxConfig, "sandboxes" | "target">, ingressUrl: string): SandboxForwarder {
    const s = config.sandboxes;
    const keyPort = takesRolloutKeys(config) ? SANDBOX_KEY_PORT : undefined;
    return {
        command: sandboxForwarderCommand(ingressUrl, SANDBOX_FORWARDER_PORT, SANDBOX_TRACE_PORT, keyPort),
        probeCommand: ["python3", "-I", SANDBOX_FORWARDER_PATH, "--probe", "--port", String(SANDBOX_FORWARDER_PORT)],
        port: SANDBOX_FORWARDER_PORT,
        tracePort: SANDBOX_TRACE_PORT,
        ...(keyPort !== undefined ? { keyPort } : {}),
        url: FORWARDER_URL,
        // A uid of its own beside the sandbox's (schema: runAsUser in 1000..2^31-1).
        runAsUser: s.runAsUser < 2147483647 ? s.runAsUser + 1 : s.runAsUser - 1,
        keyEnv: SANDBOX_KEY_ENV,
        cpu: FORWARDER_CPU,
        memory: FORWARDER_MEMORY,
    };
}
