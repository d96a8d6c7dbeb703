import * as docker from "@pulumi/docker";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { ClusterConfig } from "../config/cluster-schema";
import type { PlatformConfig } from "../config/types";
import { dockerProviderAddresses, type RegistryAuth } from "../config/load";

/** The target's provider, handed to the Platform through `opts.providers`. */
export function targetProvider(name: string, config: PlatformConfig, registryAuth?: RegistryAuth): pulumi.ProviderResource {
    const t = config.target;
    if (t.kind === "kubernetes") {
        return new k8s.Provider(`${name}-k8s`, {
            kubeconfig: t.kubeconfig,
            context: t.context,
            // Server-side apply: field ownership and conflicts are the API server's, not a client diff.
            enableServerSideApply: true,
        });
    }
    // Every image the stack pulls (RemoteImage has no credentials of its own in @pulumi/docker 5.2: the
    // provider's registryAuth serves them), one entry per registry the config.json names, and Docker
    // Hub's pull hosts for Hub credentials filed as `docker login` files them (dockerProviderAddresses).
    return new docker.Provider(`${name}-docker`, {
        host: t.host,
        ...(registryAuth
            ? {
                  registryAuth: dockerProviderAddresses(registryAuth.registries).map((address) => ({
                      address,
                      configFileContent: pulumi.secret(registryAuth.dockerConfigJson),
                  })),
              }
            : {}),
    });
}

/** The cluster stack's Kubernetes provider (server-side apply, the named context). */
export function clusterProvider(name: string, config: ClusterConfig): pulumi.ProviderResource {
    return new k8s.Provider(`${name}-k8s`, { kubeconfig: config.target.kubeconfig, context: config.target.context, enableServerSideApply: true });
}
