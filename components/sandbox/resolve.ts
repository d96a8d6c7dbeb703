/**
 * The target-neutral description of a run's sandbox pool: every decision (image, size,
 * security settings, deadlines, quota, names, the trainer's env) is made once, from the resolved
 * config and the names, each in its own module (process.ts, forwarder.ts, quota.ts,
 * trainer-env.ts, commands.ts); this file lists them. `kubernetes.ts` and `docker.ts` only
 * translate it. Pure: no Pulumi imports.
 */
import { dnsEgressFor } from "../config/dns";
import { dnsName, podLabels } from "../config/names";
import { sandboxRuntimeCommand } from "./commands";
import { agentUpstreamOf, forwarderDescription } from "./forwarder";
import { sandboxAgentEnv, sandboxSecurity } from "./process";
import { sandboxPools } from "./pools";
import { sandboxQuota } from "./quota";
import { sandboxTrainerEnv } from "./trainer-env";
import { SANDBOX_HEALTH_PATH, SANDBOX_PORT, type SandboxConfig, type SandboxDescription, type SandboxNames } from "./model";

/** Resolves a run's sandbox pool from the platform config and names. */
export function resolveSandboxPool(config: SandboxConfig, names: SandboxNames): SandboxDescription {
    const s = config.sandboxes;
    const url = names.ingress.sandboxUrl;
    const agentUpstream = agentUpstreamOf(s.provider, url);
    const containers = sandboxContainers(config, names);
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
        env: sandboxAgentEnv(agentUpstream),
        upstreamUrl: url,
        forwarder: forwarderDescription(config, url),
        labels,
        quota: sandboxQuota(s, s.sizing.burst, pools),
        ...(config.target.kind === "kubernetes" && config.target.team !== undefined ? { team: config.target.team } : {}),
        hfFlavor: s.hfFlavor,
        names: objectNames(config, names, containers),
        pools,
        trainerEnv: sandboxTrainerEnv(config, names, agentUpstream, containers, pools),
    };
}

/** Docker: one container per pooled sandbox (none on other providers). */
function sandboxContainers(config: SandboxConfig, names: SandboxNames): string[] {
    const s = config.sandboxes;
    return s.provider === "docker" ? Array.from({ length: s.poolSize }, (_, i) => dnsName([names.sandboxes.template, String(i)])) : [];
}

/** Names of every object of the pool: the run's own, and the cluster-scoped ones carrying the stack prefix and run id. */
function objectNames(config: SandboxConfig, names: SandboxNames, containers: readonly string[]): SandboxDescription["names"] {
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
        network: names.networks.sandboxes,
        containers,
    };
}
