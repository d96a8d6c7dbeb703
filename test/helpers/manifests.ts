/**
 * Kubernetes objects as the API server would get them, from the resources a mock run recorded:
 * the inputs (secrets unwrapped) with apiVersion and kind from the Pulumi type token, the one
 * rule the offline plan uses too (`kubernetesGvk`, scripts/lib/plan.ts).
 */
import { kubernetesGvk } from "../../scripts/lib/plan";
import type { RecordedResource } from "./mock";
import { unwrapSecrets } from "./secrets";

/**
 * Every Kubernetes resource the run registered, as a manifest. Throws when a resource's own
 * apiVersion or kind input disagrees with its type token, so neither can hide a wrong one.
 */
export function manifests(resources: readonly RecordedResource[]): Array<Record<string, any>> {
    const out: Array<Record<string, any>> = [];
    for (const r of resources) {
        const gvk = kubernetesGvk(r.type);
        if (!gvk || !r.custom) continue;
        const inputs = unwrapSecrets(r.inputs) as Record<string, any>;
        for (const field of ["apiVersion", "kind"] as const) {
            if (inputs[field] !== undefined && inputs[field] !== gvk[field]) {
                throw new Error(`${r.type} ${r.name}: input ${field} "${inputs[field]}" disagrees with the type token's "${gvk[field]}"`);
            }
        }
        out.push({ ...inputs, apiVersion: gvk.apiVersion, kind: gvk.kind });
    }
    return out;
}
