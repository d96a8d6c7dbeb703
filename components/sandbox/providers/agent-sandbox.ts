/**
 * agent-sandbox (kubernetes-sigs/agent-sandbox) on Kubernetes: one SandboxTemplate + SandboxWarmPool per pool, claimed by
 * the trainer's backend (python/agent_rl_sandbox/agent_sandbox.py), each pod's forwarder holding a per-rollout key and
 * recording the trace the trainer trains on. The objects are kubernetes.ts's; the trainer's env is listed here.
 */
import * as pulumi from "@pulumi/pulumi";
import { SANDBOX_PROVIDER_RECORDS, takesRolloutKeys } from "../../config/sandbox-providers";
import { registerKubernetesSandboxPool } from "../kubernetes";
import { SANDBOX_API_VERSION, SANDBOX_EXTENSIONS_GROUP, SANDBOX_HOME, SANDBOX_KEY_PORT, SANDBOX_PORT, SANDBOX_TRACE_PORT } from "../model";
import { commonTrainerEnv, harborTrainerEnv } from "../trainer-env";
import type { SandboxProviderModule } from "./contract";

export const agentSandboxProvider: SandboxProviderModule = {
    record: SANDBOX_PROVIDER_RECORDS["agent-sandbox"],
    trainerEnv(config, names, pools) {
        const s = config.sandboxes;
        // The settings' own pool (SANDBOX_IMAGE -> SANDBOX_WARM_POOL): the run's pool, or the first task image's.
        const first = pools[0];
        return {
            ...commonTrainerEnv(config, names, pools),
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
    },
    register(name, args, parent) {
        const d = args.description;
        if (args.ingress === undefined || args.trainer === undefined) {
            throw new pulumi.RunError(
                `SandboxPool ${name}: the agent-sandbox provider needs args.ingress (the ingress pods sandboxes may reach) and args.trainer (who may claim and call them)`,
            );
        }
        const { template, warmPool, pools } = registerKubernetesSandboxPool(
            name,
            { description: d, sandboxKey: args.sandboxKey, ingress: args.ingress, trainer: args.trainer, namespace: args.namespace },
            parent,
        );
        return {
            pools: pools.map((p, i) => ({ image: d.pools[i].image, warmPool: p.warmPool.metadata.name, size: d.pools[i].poolSize })),
            poolName: warmPool.metadata.name,
            namespace: warmPool.metadata.namespace,
            template: template.metadata.name,
            size: d.poolSize,
        };
    },
};
