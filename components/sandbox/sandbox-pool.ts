/**
 * agentrl:sandbox:SandboxPool: warm, isolated, egress-locked sandboxes with a hard lifetime,
 * one per in-flight black-box rollout. The description (`resolveSandboxPool`) decides
 * everything; this component has its provider's module (providers/) register it:
 * agent-sandbox (Kubernetes), or nothing (`none`).
 */
import * as pulumi from "@pulumi/pulumi";
import { SANDBOX_PROVIDERS, type SandboxPoolArgs } from "./providers";

export type { SandboxPoolArgs };

export class SandboxPool extends pulumi.ComponentResource {
    /** The warm pool; empty where nothing is deployed. */
    public readonly poolName: pulumi.Output<string>;
    /** Namespace of the sandboxes; empty where nothing is deployed. */
    public readonly namespace: pulumi.Output<string>;
    /** SandboxTemplate name; empty where nothing is deployed. */
    public readonly template: pulumi.Output<string>;
    /** Sandboxes kept ready per pool (warm pool replicas); 0 when nothing is deployed. */
    public readonly size: number;
    /** Every warm pool with its image (one, or one per Harbor task image); empty where nothing is deployed. */
    public readonly pools: ReadonlyArray<{ readonly image: string; readonly warmPool: pulumi.Output<string>; readonly size: number }>;
    /** Non-secret env vars for the trainer: where and how to claim sandboxes (see README). */
    public readonly trainerEnv: Record<string, string>;

    constructor(name: string, args: SandboxPoolArgs, opts?: pulumi.ComponentResourceOptions) {
        super("agentrl:sandbox:SandboxPool", name, {}, opts);
        this.trainerEnv = { ...args.description.trainerEnv };
        const out = SANDBOX_PROVIDERS[args.description.provider].register(name, args, this);
        this.pools = out.pools;
        this.poolName = out.poolName;
        this.namespace = out.namespace;
        this.template = out.template;
        this.size = out.size;
        this.registerOutputs({
            poolName: this.poolName,
            namespace: this.namespace,
            template: this.template,
            size: this.size,
            pools: this.pools,
            trainerEnv: this.trainerEnv,
        });
    }
}
