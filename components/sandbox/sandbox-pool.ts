/**
 * agentrl:sandbox:SandboxPool: warm, isolated, egress-locked sandboxes with a hard lifetime,
 * one per in-flight black-box rollout. The description (`resolveSandboxPool`) decides
 * everything; this component registers it for the provider it describes:
 * agent-sandbox (Kubernetes), a fixed Docker pool, or nothing (hosted `hf`, `none`).
 */
import * as pulumi from "@pulumi/pulumi";
import type { SandboxDescription } from "./model";
import { registerDockerSandboxPool } from "./docker";
import { registerKubernetesSandboxPool, type IngressPeer, type TrainerPeer } from "./kubernetes";

export interface SandboxPoolArgs {
    /** The resolved pool (from `resolveSandboxPool(config, names)`). */
    readonly description: SandboxDescription;
    /** The ingress key the sandboxes send to vLLM (secret; stored only in a Secret / secret env). */
    readonly sandboxKey: pulumi.Input<string>;
    /** Kubernetes: the ingress pods the sandboxes may reach (namespace, pod labels, container port). Required for agent-sandbox. */
    readonly ingress?: IngressPeer;
    /** Kubernetes: the trainer (ServiceAccount bound to the claim Role; its pods alone may reach sandboxes). Required for agent-sandbox. */
    readonly trainer?: TrainerPeer;
    /** Kubernetes: the sandboxes namespace (the Platform's Namespace output, so the objects wait for it). @default description.names.namespace */
    readonly namespace?: pulumi.Input<string>;
    /** Docker: the internal sandbox network. Required for docker. @default description.names.network */
    readonly network?: pulumi.Input<string>;
}

export class SandboxPool extends pulumi.ComponentResource {
    /** Warm pool (Kubernetes) / container name prefix (Docker); empty for hosted and none. */
    public readonly poolName: pulumi.Output<string>;
    /** Namespace (Kubernetes) / network (Docker) of the sandboxes; empty for hosted and none. */
    public readonly namespace: pulumi.Output<string>;
    /** SandboxTemplate name (Kubernetes) / image (Docker, hosted). */
    public readonly template: pulumi.Output<string>;
    /** Sandboxes kept ready per pool (warm pool replicas / containers); 0 when nothing is deployed. */
    public readonly size: number;
    /** Kubernetes: every warm pool with its image (one, or one per Harbor task image); empty elsewhere. */
    public readonly pools: ReadonlyArray<{ readonly image: string; readonly warmPool: pulumi.Output<string>; readonly size: number }>;
    /** Non-secret env vars for the trainer: where and how to claim sandboxes (see README). */
    public readonly trainerEnv: Record<string, string>;

    constructor(name: string, args: SandboxPoolArgs, opts?: pulumi.ComponentResourceOptions) {
        super("agentrl:sandbox:SandboxPool", name, {}, opts);
        const d = args.description;
        this.trainerEnv = { ...d.trainerEnv };
        if (d.provider === "agent-sandbox") {
            if (args.ingress === undefined || args.trainer === undefined) {
                throw new pulumi.RunError(
                    `SandboxPool ${name}: the agent-sandbox provider needs args.ingress (the ingress pods sandboxes may reach) and args.trainer (who may claim and call them)`,
                );
            }
            const { template, warmPool, pools } = registerKubernetesSandboxPool(
                name,
                { description: d, sandboxKey: args.sandboxKey, ingress: args.ingress, trainer: args.trainer, namespace: args.namespace },
                this,
            );
            this.pools = pools.map((p, i) => ({ image: d.pools[i].image, warmPool: p.warmPool.metadata.name, size: d.pools[i].poolSize }));
            this.poolName = warmPool.metadata.name;
            this.namespace = warmPool.metadata.namespace;
            this.template = template.metadata.name;
            this.size = d.poolSize;
        } else if (d.provider === "docker") {
            const network = args.network ?? d.names.network;
            const containers = registerDockerSandboxPool(name, { description: d, sandboxKey: args.sandboxKey, network }, this);
            this.pools = [];
            this.poolName = pulumi.all(containers.map((c) => c.name)).apply(() => d.names.template);
            this.namespace = pulumi.output(network);
            this.template = pulumi.output(d.image);
            this.size = d.poolSize;
        } else {
            // Hosted sandboxes are created per rollout by the trainer (huggingface_hub Sandbox.create): nothing to deploy.
            this.pools = [];
            this.poolName = pulumi.output("");
            this.namespace = pulumi.output("");
            this.template = pulumi.output(d.provider === "hf" ? d.image : "");
            this.size = 0;
        }
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
