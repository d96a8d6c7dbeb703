/**
 * agentrl:env:EnvSpace: one OpenEnv environment server for the trainer: replicas behind the
 * session-aware router (router.ts), or nothing at all for an external env. Takes the resolved
 * description (from `resolveEnvSpace`) and registers the target's resources; the provider
 * (Kubernetes or Docker) arrives through `opts`.
 */
import * as pulumi from "@pulumi/pulumi";
import type { EnvCapacity, EnvDescription } from "./model";
import { registerDockerEnvSpace } from "./docker";
import { registerKubernetesEnvSpace } from "./kubernetes";

export interface EnvSpaceArgs {
    /** The resolved env (from `resolveEnvSpace(config, env, names)`). */
    readonly description: EnvDescription;
    /** Docker only: the private training network (created by the Platform). Required on Docker. @default none */
    readonly network?: pulumi.Input<string>;
    /** Kubernetes only: the envs namespace (the Platform's Namespace Output, so the objects wait for it). @default description.namespace */
    readonly namespace?: pulumi.Input<string>;
}

export class EnvSpace extends pulumi.ComponentResource {
    /** Base URL the trainer gets (`http://<router>:8000`, or the external URL); resolves once the env is up. */
    public readonly url: pulumi.Output<string>;
    /** The session route (`ws://<router>:8000/ws`). */
    public readonly wsUrl: pulumi.Output<string>;
    /** The capacity rule as numbers (sessions, demand, headroom) for the plan. */
    public readonly capacity: EnvCapacity;
    /** Replicas deployed (0 for an external env). */
    public readonly replicas: number;
    /** Sessions one replica holds, the router's per-replica cap (an external env: its declared sessions). */
    public readonly sessionsPerReplica: number;

    constructor(name: string, args: EnvSpaceArgs, opts?: pulumi.ComponentResourceOptions) {
        super("agentrl:env:EnvSpace", name, {}, opts);
        const d = args.description;
        let ready: pulumi.Output<unknown>[] = [];
        if (d.kind === "deployed") {
            if (d.target === "kubernetes") {
                const { statefulSet, routerDeployment, routerService } = registerKubernetesEnvSpace(
                    name,
                    { description: d, namespace: args.namespace ?? d.namespace },
                    this,
                );
                // Pulumi awaits StatefulSet and Deployment readiness: the URL resolves once replicas and routers are ready.
                ready = [statefulSet.metadata.name, routerDeployment.metadata.name, routerService.metadata.name];
            } else {
                if (args.network === undefined)
                    throw new pulumi.RunError(`EnvSpace ${name}: the docker target needs args.network (the private training network)`);
                const { replicas, router } = registerDockerEnvSpace(name, { description: d, network: args.network }, this);
                ready = [...replicas.map((c) => c.name), router.name];
            }
        }
        this.url = pulumi.all(ready).apply(() => d.url);
        this.wsUrl = pulumi.all(ready).apply(() => d.wsUrl);
        this.capacity = d.capacity;
        this.replicas = d.capacity.replicas;
        this.sessionsPerReplica = d.capacity.sessionsPerReplica;
        this.registerOutputs({
            url: this.url,
            wsUrl: this.wsUrl,
            capacity: this.capacity,
            replicas: this.replicas,
            sessionsPerReplica: this.sessionsPerReplica,
        });
    }
}
