/**
 * The pod settings every training pod shares on Kubernetes (the one-node Job's, the multi-node
 * JobSet's trainers and vLLM): the trainer's ServiceAccount without an automounted
 * token, the runtime's default seccomp profile, and the GPU scheduling the config asks for.
 */
import { pullSecretRefs } from "../shared/kubernetes";
import type * as k8s from "@pulumi/kubernetes";
import type { TrainingDescription } from "./model";

export function trainingPodBase(d: TrainingDescription): Omit<k8s.types.input.core.v1.PodSpec, "containers"> {
    return {
        serviceAccountName: d.serviceAccount,
        automountServiceAccountToken: false,
        ...pullSecretRefs(d.imagePullSecrets),
        securityContext: { seccompProfile: { type: "RuntimeDefault" } },
        ...(Object.keys(d.scheduling.nodeSelector).length > 0 ? { nodeSelector: { ...d.scheduling.nodeSelector } } : {}),
        ...(d.scheduling.tolerations.length > 0 ? { tolerations: d.scheduling.tolerations.map((x) => ({ ...x })) } : {}),
        ...(d.scheduling.priorityClassName !== undefined ? { priorityClassName: d.scheduling.priorityClassName } : {}),
    };
}
