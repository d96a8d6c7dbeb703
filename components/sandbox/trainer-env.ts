/**
 * The env vars every provider's trainer gets (what the pool is, whose run, how long a sandbox lives, where the agent's
 * side calls), and the Harbor path's. Each provider's module (providers/) adds its own. Pure.
 */
import { HARBOR_AGENT_ENV, HARBOR_TELEMETRY_ENV, TASK_POOLS_ENV } from "../config/harbor-facts";
import { FORWARDER_URL } from "./forwarder";
import type { SandboxConfig, SandboxNames, SandboxPoolSpec } from "./model";

/**
 * The Harbor path: the agent, Harbor's telemetry off, and the task image -> warm pool map python/agent_rl_sandbox/harbor_env.py reads
 * (harbor_checks.task_pools), so a task whose image no pool serves is refused before any claim, naming it.
 */
export function harborTrainerEnv(config: SandboxConfig, pools: readonly SandboxPoolSpec[]): Record<string, string> {
    if (config.harbor === undefined) return {};
    return {
        [HARBOR_AGENT_ENV]: config.harbor.agent,
        [HARBOR_TELEMETRY_ENV]: "0",
        [TASK_POOLS_ENV]: JSON.stringify(Object.fromEntries(pools.map((p) => [p.image, p.warmPool]))),
    };
}

/** What every provider's trainer is told: the provider, the image, the bounds, the run, and where the agent's side calls. */
export function commonTrainerEnv(config: SandboxConfig, names: SandboxNames, pools: readonly SandboxPoolSpec[]): Record<string, string> {
    const s = config.sandboxes;
    return {
        SANDBOX_PROVIDER: s.provider,
        SANDBOX_IMAGE: pools[0]?.image ?? s.image,
        SANDBOX_MAX_INFLIGHT: String(config.training.maxInflight),
        SANDBOX_MAX_LIFETIME_SECONDS: String(s.maxLifetimeSeconds),
        SANDBOX_RUN_LABEL: names.sandboxes.runLabel,
        SANDBOX_RUN_ID: config.runId,
        // What the agent's side calls (TRL's --sandbox-vllm-url, OpenCodeConfig.base_url without /v1): the pod's forwarder.
        SANDBOX_UPSTREAM_URL: FORWARDER_URL,
    };
}
