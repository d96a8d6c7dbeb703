import type * as pulumi from "@pulumi/pulumi";

/**
 * `deps`, plus what `ready` resolves to once it does: lets the proxy wait for the
 * TrainingNode, which is built after the ingress because it needs the ingress's key.
 */
export function waitFor(ready: Promise<pulumi.Resource> | undefined, deps: pulumi.Resource[]): pulumi.Input<pulumi.Input<pulumi.Resource>[]> {
    return ready === undefined ? deps : ready.then((r) => [...deps, r]);
}
