import * as docker from "@pulumi/docker";
import * as k8s from "@pulumi/kubernetes";
import type * as pulumi from "@pulumi/pulumi";
import type { ClusterConfig } from "../config/cluster";
import type { PlatformConfig } from "../config/resolve";

/** The target's provider, handed to the Platform through `opts.providers`. */
export function targetProvider(name: string, config: PlatformConfig): pulumi.ProviderResource {
    const t = config.target;
    if (t.kind === "kubernetes") {
        return new k8s.Provider(`${name}-k8s`, {
            kubeconfig: t.kubeconfig,
            context: t.context,
            // Server-side apply: field ownership and conflicts are the API server's, not a client diff.
            enableServerSideApply: true,
        });
    }
    return new docker.Provider(`${name}-docker`, { host: t.host });
}

/** The cluster stack's Kubernetes provider (server-side apply, the named context). */
export function clusterProvider(name: string, config: ClusterConfig): pulumi.ProviderResource {
    return new k8s.Provider(`${name}-k8s`, { kubeconfig: config.target.kubeconfig, context: config.target.context, enableServerSideApply: true });
}
