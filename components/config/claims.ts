/**
 * The stack-wide volume claims (model cache, checkpoints) outlive runs, and the checkpoints
 * outlive the stack. Two changes to an existing claim cannot be applied by Kubernetes: its
 * StorageClass (immutable; the provider plans a replace, which for a retained claim meets the
 * claim it kept) and a smaller size (the API server refuses to shrink a claim). Both are
 * refused here, against what the stack's last successful `up` recorded (its `claims` output),
 * before any resource registers.
 */
import { quantityValue } from "../shared/quantity";
import type { PlatformNames } from "./names";
import type { PlatformConfig } from "./types";

/** One claim as the last `up` made it: where it is, the size it asked for, the class it got. */
export interface ClaimRecord {
    readonly namespace: string;
    readonly name: string;
    /** The requested size, as configured (e.g. "100Gi"). */
    readonly size: string;
    /** The class the claim has on the cluster (the cluster default's name when none was configured). */
    readonly storageClassName?: string;
}

/** The `claims` stack output: the Kubernetes claims the stack made. */
export interface ClaimRecords {
    readonly modelCache?: ClaimRecord;
    readonly checkpoints?: ClaimRecord;
}

type Role = keyof ClaimRecords;

const FIELD: Readonly<Record<Role, string>> = { modelCache: "training.modelCache", checkpoints: "training.checkpoints" };

/** How to really change the class of each claim, given that Kubernetes cannot. */
function classFix(role: Role, claim: ClaimRecord, wanted: string): string {
    const where = `-n ${claim.namespace} ${claim.name}`;
    if (role === "checkpoints")
        return (
            `the checkpoints outlive the stack by design: to move them to '${wanted}', copy out what you keep, ` +
            `then \`pulumi destroy\` (which keeps the claim), \`kubectl delete pvc ${where}\`, and \`pulumi up\` with the new class`
        );
    return `set ${FIELD[role]}.enabled to false for one up (the cache claim goes once no pod uses it), then enable it again with the new class`;
}

/**
 * Problems with moving from the claims the last `up` recorded to what `config` asks for; empty
 * when nothing was recorded (first up, after `destroy`, Docker) or nothing conflicts.
 */
export function claimChangeProblems(previous: ClaimRecords | undefined, config: PlatformConfig, names: PlatformNames): string[] {
    if (previous === undefined || config.target.kind !== "kubernetes") return [];
    const wantedClass = config.target.storageClassName;
    const problems: string[] = [];
    for (const role of ["modelCache", "checkpoints"] as const) {
        const before = previous[role];
        const volume = config.training[role];
        if (before === undefined || !volume.enabled) continue;
        // Another claim (a new namespace prefix or stack name) starts empty: nothing to compare.
        if (before.namespace !== names.namespaces.training || before.name !== names.training[role]) continue;
        const claim = `${before.namespace}/${before.name}`;
        if (wantedClass !== undefined && before.storageClassName !== undefined && wantedClass !== before.storageClassName) {
            problems.push(
                `target.storageClassName: '${wantedClass}' differs from '${before.storageClassName}', the class of the ${role} claim ${claim} ` +
                    `this stack made; Kubernetes cannot change a claim's class: keep '${before.storageClassName}', or ${classFix(role, before, wantedClass)}`,
            );
        }
        if (quantityValue(volume.size) < quantityValue(before.size)) {
            problems.push(
                `${FIELD[role]}.size: ${volume.size} is smaller than the ${before.size} of the claim ${claim} this stack made; ` +
                    `Kubernetes never shrinks a claim: keep ${before.size} or more (growing works where the StorageClass allows volume expansion)`,
            );
        }
    }
    return problems;
}
