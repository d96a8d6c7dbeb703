import type * as pulumi from "@pulumi/pulumi";

/**
 * `deps`, plus what `ready` resolves to once it does: lets the proxy wait for vLLM's upstream
 * (the TrainingNode's Service or container), registered after the ingress because the
 * TrainingNode needs the ingress's key.
 */
export function waitFor(ready: Promise<pulumi.Resource | undefined> | undefined, deps: pulumi.Resource[]): pulumi.Input<pulumi.Input<pulumi.Resource>[]> {
    return ready === undefined ? deps : ready.then((r) => (r === undefined ? deps : [...deps, r]));
}
