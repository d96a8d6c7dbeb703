/**
 * The contract every sandbox provider's module meets: what the sandbox component asks of it. The table
 * (index.ts) holds one module per `sandboxes.provider` name, typed over the names, so a provider without
 * a module, or a module without a member, fails `npm run typecheck`. What the config knows of a provider
 * (its layouts, its target, its pool, why it is refused) is its record, config/sandbox-providers.ts, which
 * every layer reads; what it renders is here.
 */
import type * as pulumi from "@pulumi/pulumi";
import type { SandboxProviderRecord } from "../../config/sandbox-providers";
import type { IngressPeer, TrainerPeer } from "../kubernetes";
import type { SandboxConfig, SandboxDescription, SandboxNames, SandboxPoolSpec } from "../model";

/** The SandboxPool component's args, which it hands its provider's module to register. */
export interface SandboxPoolArgs {
    /** The resolved pool (from `resolveSandboxPool(config, names)`). */
    readonly description: SandboxDescription;
    /**
     * The shared ingress key, for a pool whose forwarders hold one (secret; stored only in a Secret). A pool that takes
     * per-rollout keys (agent-sandbox) renders no shared key and needs none. @default undefined
     */
    readonly sandboxKey?: pulumi.Input<string>;
    /** Kubernetes: the ingress pods the sandboxes may reach (namespace, pod labels, container port). Required for agent-sandbox. */
    readonly ingress?: IngressPeer;
    /** Kubernetes: the trainer (ServiceAccount bound to the claim Role; its pods alone may reach sandboxes). Required for agent-sandbox. */
    readonly trainer?: TrainerPeer;
    /** Kubernetes: the sandboxes namespace (the Platform's Namespace output, so the objects wait for it). @default description.names.namespace */
    readonly namespace?: pulumi.Input<string>;
}

/** What the SandboxPool component exposes, as its provider's module registered it. */
export interface SandboxPoolOutputs {
    /** The warm pool; empty where nothing is deployed. */
    readonly poolName: pulumi.Output<string>;
    /** Namespace of the sandboxes; empty where nothing is deployed. */
    readonly namespace: pulumi.Output<string>;
    /** The SandboxTemplate; empty where nothing is deployed. */
    readonly template: pulumi.Output<string>;
    /** Sandboxes kept ready per pool; 0 where nothing is deployed. */
    readonly size: number;
    /** Every warm pool with its image (one, or one per Harbor task image). */
    readonly pools: ReadonlyArray<{ readonly image: string; readonly warmPool: pulumi.Output<string>; readonly size: number }>;
}

export interface SandboxProviderModule {
    /** What the config knows of it (config/sandbox-providers.ts): its layouts, target, warm pool, and why it is refused. */
    readonly record: SandboxProviderRecord;
    /**
     * The env vars the trainer gets: how it finds, claims and bounds its sandboxes (python/agent_rl_sandbox/settings.py
     * reads them). Pure.
     */
    trainerEnv(config: SandboxConfig, names: SandboxNames, pools: readonly SandboxPoolSpec[]): Record<string, string>;
    /** Registers what the provider deploys, as children of the SandboxPool component named from `name`. */
    register(name: string, args: SandboxPoolArgs, parent: pulumi.ComponentResource): SandboxPoolOutputs;
}
