/**
 * The checkpoint volume on the cluster: the claim the stack keeps across runs (and `destroy`) against
 * training.checkpoints.size and the size rule (config/checkpoints.ts). A claim that exists already
 * never shrinks, keeps its StorageClass, and grows only where that class allows volume expansion
 * (Kubernetes refuses the resize of a claim whose class lacks allowVolumeExpansion; the
 * PersistentVolumeClaimResize admission plugin).
 */
import { checkpointNeed, describeNeed } from "../../config/checkpoints";
import type { PlatformPlan } from "../../platform";
import { quantityValue } from "../../shared/quantity";
import { fail, type Finding, human, ok, value, warn } from "../report";
import type { ClaimFacts } from "./facts";

/** "holds 2 runs of Qwen/Qwen3-8B by the checkpoint rule (one run: 89Gi = ...)", or why the rule cannot say. */
export function ruleText(plan: PlatformPlan, bytes: number): string {
    const c = plan.config;
    const need = checkpointNeed(c);
    if (need === undefined) return `the checkpoint rule cannot size a run: no parameter count for ${c.model.name} (set training.checkpoints.parameters)`;
    if (need.runBytes === 0) return `${c.model.name}'s program writes nothing there by the checkpoint rule (${need.writes.why})`;
    const runs = Math.floor(bytes / need.runBytes);
    return `${human("storage", bytes)} holds ${runs} run${runs === 1 ? "" : "s"} of ${c.model.name} by the checkpoint rule (one run: ${need.runSize} = ${describeNeed(need)})`;
}

/**
 * training.checkpoints against the claim of that name in the training namespace (undefined: none
 * yet) and the cluster's StorageClasses; undefined when the stack keeps no checkpoints.
 */
export function checkCheckpointVolume(plan: PlatformPlan, claim: ClaimFacts | undefined, classes: readonly any[]): Finding | undefined {
    const v = plan.training.checkpoints;
    if (v === undefined) return undefined;
    const check = "Checkpoint volume";
    const id = `${plan.training.namespace}/${v.name}`;
    const wanted = quantityValue(v.size);
    if (claim === undefined) return ok(check, `no claim ${id} yet: up creates it at ${v.size} (training.checkpoints.size); ${ruleText(plan, wanted)}`);
    const requested = value(claim.requested);
    const named = plan.training.scheduling.storageClassName;
    const has = `the claim ${id} (${claim.requested}, class ${claim.storageClassName || "none"}, ${claim.phase})`;
    const problems: string[] = [];
    const fixes: string[] = [];
    if (named !== undefined && claim.storageClassName !== named) {
        problems.push(`${has} has another class than target.storageClassName ${named}, and a claim's class cannot change`);
        fixes.push(
            `set target.storageClassName to ${claim.storageClassName || "the claim's"}; to move the checkpoints, copy them out (npm run checkpoints), pulumi destroy (which keeps the claim), kubectl -n ${plan.training.namespace} delete pvc ${v.name}, then up`,
        );
    }
    if (wanted < requested) {
        problems.push(`training.checkpoints.size ${v.size} is smaller than ${has}: Kubernetes never shrinks a claim`);
        fixes.push(`set training.checkpoints.size to ${claim.requested} or more`);
    } else if (wanted > requested) {
        const sc = classes.find((c) => c.metadata?.name === claim.storageClassName);
        if (claim.storageClassName === "" || sc === undefined) {
            problems.push(
                `training.checkpoints.size ${v.size} grows ${has}, but ${claim.storageClassName === "" ? "a claim without a class" : `its StorageClass ${claim.storageClassName} no longer exists, and a claim without one`} cannot be expanded`,
            );
            fixes.push(`keep training.checkpoints.size at ${claim.requested}`);
        } else if (sc.allowVolumeExpansion !== true) {
            problems.push(
                `training.checkpoints.size ${v.size} grows ${has}, but StorageClass ${sc.metadata.name} does not allow volume expansion: the API server refuses the resize and the up fails`,
            );
            fixes.push(
                `keep training.checkpoints.size at ${claim.requested}, or, if its CSI driver (${sc.provisioner}) can expand volumes: kubectl patch storageclass ${sc.metadata.name} -p '{"allowVolumeExpansion":true}'`,
            );
        }
    }
    if (problems.length > 0) return fail(check, `${problems.join("; ")}; ${ruleText(plan, requested)}`, fixes.join("; "));
    const capacity = claim.capacity !== undefined ? value(claim.capacity) : undefined;
    const resizing = claim.conditions.filter((c) => c === "Resizing" || c === "FileSystemResizePending");
    if (resizing.length > 0 || (capacity !== undefined && capacity < requested))
        return warn(
            check,
            `${has} has ${claim.capacity ?? "no capacity yet"} of the ${claim.requested} it asks (${resizing.join(", ") || "a resize not finished"}); ${ruleText(plan, capacity ?? 0)}`,
            `wait for the resize (kubectl -n ${plan.training.namespace} describe pvc ${v.name}); a file system resize finishes when a pod mounts the claim`,
        );
    const grow = wanted > requested ? `; up grows it to ${v.size} (StorageClass ${claim.storageClassName} allows volume expansion)` : "";
    const rule = ruleText(plan, Math.max(wanted, capacity ?? 0));
    if (claim.partOf !== "agent-rl-infra")
        return warn(
            check,
            `${has} exists without the app.kubernetes.io/part-of=agent-rl-infra label, so this project did not make it: up adopts it (patchForce) with what it holds${grow}; ${rule}`,
            `if it is not this stack's checkpoints, move it aside first (copy out what it holds, kubectl -n ${plan.training.namespace} delete pvc ${v.name}) or run the stack under another target.namespacePrefix`,
        );
    return ok(check, `${has} is kept and reused${grow}; ${rule}`);
}
