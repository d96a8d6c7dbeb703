/**
 * The target-neutral description of a run's sandbox pool: every decision (image, size,
 * security settings, deadlines, quota, names, the trainer's env) is made once, from the resolved
 * config and the names, each in its own module (process.ts, forwarder.ts, quota.ts,
 * commands.ts, and the provider's module in providers/ for the trainer's env); this file lists
 * them. The provider's module translates it into objects (agent-sandbox: kubernetes.ts).
 */
import { dnsEgressFor } from "../config/dns";
import { dnsName, podLabels } from "../config/names";
import { sandboxRuntimeCommand } from "./commands";
import { FORWARDER_URL, forwarderDescription } from "./forwarder";
import { sandboxAgentEnv, sandboxSecurity } from "./process";
import { sandboxPools } from "./pools";
import { sandboxQuota } from "./quota";
import { SANDBOX_PROVIDERS } from "./providers";
import { SANDBOX_HEALTH_PATH, SANDBOX_PORT, type SandboxConfig, type SandboxDescription, type SandboxNames } from "./model";

/** Resolves a run's sandbox pool from the platform config and names. */
export function resolveSandboxPool(config: SandboxConfig, names: SandboxNames): SandboxDescription {
    const s = config.sandboxes;
    const url = names.ingress.sandboxUrl;
    const labels = { ...podLabels("sandbox", names.sandboxes.warmPool), [names.sandboxes.runLabel]: config.runId };
    const security = sandboxSecurity(s);
    const pools = sandboxPools(config, names, labels, security);
    return {
        provider: s.provider,
        dns: dnsEgressFor(config.target),
        runId: config.runId,
        runLabel: names.sandboxes.runLabel,
        image: s.image,
        cpu: s.cpu,
        memory: s.memory,
        runtimeClassName: s.runtimeClassName,
        priorityClassName: s.priorityClassName,
        poolSize: s.poolSize,
        sizing: s.sizing,
        maxInflight: config.training.maxInflight,
        headroom: s.headroom,
        maxLifetimeSeconds: s.maxLifetimeSeconds,
        maxWarmWaitSeconds: s.maxWarmWaitSeconds,
        deadlineSeconds: s.maxLifetimeSeconds + s.maxWarmWaitSeconds,
        port: SANDBOX_PORT,
        runtime: { command: sandboxRuntimeCommand(SANDBOX_PORT), healthPath: SANDBOX_HEALTH_PATH },
        security,
        env: sandboxAgentEnv(FORWARDER_URL),
        upstreamUrl: url,
        forwarder: forwarderDescription(config, url),
        labels,
        quota: sandboxQuota(s, s.sizing.burst, pools),
        ...(config.target.kind === "kubernetes" && config.target.team !== undefined ? { team: config.target.team } : {}),
        names: objectNames(config, names),
        pools,
        trainerEnv: SANDBOX_PROVIDERS[s.provider].trainerEnv(config, names, pools),
    };
}

/** Names of every object of the pool: the run's own, and the cluster-scoped ones carrying the stack prefix and run id. */
function objectNames(config: SandboxConfig, names: SandboxNames): SandboxDescription["names"] {
    const pool = names.sandboxes.warmPool;
    return {
        namespace: names.namespaces.sandboxes,
        template: names.sandboxes.template,
        warmPool: pool,
        keySecret: names.sandboxes.keySecret,
        networkPolicy: dnsName([pool, "network"]),
        quota: dnsName([pool, "quota"]),
        role: dnsName([pool, "claimer"]),
        roleBinding: dnsName([pool, "claimer"]),
        admissionPolicy: dnsName([names.prefix, "sandbox-claims", config.runId]),
        admissionBinding: dnsName([names.prefix, "sandbox-claims", config.runId, "binding"]),
    };
}
