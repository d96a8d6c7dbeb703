/**
 * The env vars the trainer gets for its sandboxes: how it finds, claims and bounds them, per
 * provider (python/agent_rl_sandbox/settings.py reads them). Pure.
 */
import { HARBOR_AGENT_ENV, TASK_POOLS_ENV } from "../config/harbor-facts";
import { takesRolloutKeys } from "./forwarder";
import {
    SANDBOX_API_VERSION,
    SANDBOX_EXTENSIONS_GROUP,
    SANDBOX_HOME,
    SANDBOX_KEY_PORT,
    SANDBOX_PORT,
    SANDBOX_TRACE_PORT,
    type SandboxConfig,
    type SandboxNames,
    type SandboxPoolSpec,
} from "./model";

/**
 * The Harbor path: the agent, and the task image -> warm pool map python/agent_rl_sandbox/harbor_env.py reads
 * (harbor_checks.task_pools), so a task whose image no pool serves is refused before any claim, naming it.
 */
function harborTrainerEnv(config: SandboxConfig, pools: readonly SandboxPoolSpec[]): Record<string, string> {
    if (config.harbor === undefined) return {};
    return {
        [HARBOR_AGENT_ENV]: config.harbor.agent,
        [TASK_POOLS_ENV]: JSON.stringify(Object.fromEntries(pools.map((p) => [p.image, p.warmPool]))),
    };
}

export function sandboxTrainerEnv(
    config: SandboxConfig,
    names: SandboxNames,
    agentUpstream: string,
    containers: readonly string[],
    pools: readonly SandboxPoolSpec[],
): Record<string, string> {
    const s = config.sandboxes;
    const provider = s.provider;
    // The settings' own pool (SANDBOX_IMAGE -> SANDBOX_WARM_POOL): the run's pool, or the first task image's.
    const first = pools[0];
    const common: Record<string, string> = {
        SANDBOX_PROVIDER: provider,
        SANDBOX_IMAGE: first?.image ?? s.image,
        SANDBOX_MAX_INFLIGHT: String(config.training.maxInflight),
        SANDBOX_MAX_LIFETIME_SECONDS: String(s.maxLifetimeSeconds),
        SANDBOX_RUN_LABEL: names.sandboxes.runLabel,
        SANDBOX_RUN_ID: config.runId,
        // What the agent's side calls (TRL's --sandbox-vllm-url, OpenCodeConfig.base_url without /v1).
        SANDBOX_UPSTREAM_URL: agentUpstream,
    };
    if (provider === "agent-sandbox") {
        return {
            ...common,
            SANDBOX_NAMESPACE: names.namespaces.sandboxes,
            SANDBOX_WARM_POOL: first?.warmPool ?? names.sandboxes.warmPool,
            SANDBOX_TEMPLATE: first?.template ?? names.sandboxes.template,
            SANDBOX_API_GROUP: SANDBOX_EXTENSIONS_GROUP,
            SANDBOX_API_VERSION: SANDBOX_API_VERSION,
            SANDBOX_SHUTDOWN_POLICY: "Delete",
            SANDBOX_PORT: String(SANDBOX_PORT),
            // The forwarder's trace port on the same pod IP: the trace the trainer trains on (python/agent_rl_sandbox/handle.py fetch_trace).
            SANDBOX_TRACE_PORT: String(SANDBOX_TRACE_PORT),
            // The forwarder's one-time rollout-key port on the same pod IP (python/agent_rl_sandbox/agent_sandbox.py
            // _deliver_rollout_key); the verifier's admin URL comes from the ingress (platform/resolve.ts).
            ...(takesRolloutKeys(config) ? { SANDBOX_FORWARDER_KEY_PORT: String(SANDBOX_KEY_PORT) } : {}),
            // OpenCodeConfig.sandbox_home: where the harness writes config, task and logs (python/agent_rl_sandbox/settings.py).
            SANDBOX_HOME: SANDBOX_HOME,
            SANDBOX_POOL_SIZE: String(s.poolSize),
            // What a sandbox gets (the backend maps HF flavors onto it: python/agent_rl_sandbox/agent_sandbox.py).
            SANDBOX_CPU: s.cpu,
            SANDBOX_MEMORY: s.memory,
            ...harborTrainerEnv(config, pools),
        };
    }
    if (provider === "docker") {
        return { ...common, SANDBOX_NETWORK: names.networks.sandboxes, SANDBOX_CONTAINERS: containers.join(","), SANDBOX_POOL_SIZE: String(s.poolSize) };
    }
    if (provider === "hf") return { ...common, SANDBOX_FLAVOR: s.hfFlavor };
    return { SANDBOX_PROVIDER: "none" };
}
