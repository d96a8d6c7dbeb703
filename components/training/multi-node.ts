/**
 * training.nodes > 1 (Kubernetes; validation refuses it elsewhere): the trainer as a JobSet of one-pod
 * Jobs, vLLM on a node of its own, and where the trainer reaches vLLM. Pure.
 */
import { vllmPodLabels } from "../config/names";
import {
    INTERNAL_VLLM_URL,
    JOBSET_LABELS,
    MAIN_PROCESS_PORT,
    type MultiNodeDescription,
    TRAINER_REPLICATED_JOB,
    type TrainingConfig,
    type TrainingNames,
    VLLM_REPLICATED_JOB,
} from "./model";

/** The multi-node layout of a run, or undefined on one node. */
export function multiNodeOf(config: TrainingConfig, names: TrainingNames): MultiNodeDescription | undefined {
    const t = config.training;
    if (t.nodes <= 1) return undefined;
    return {
        nodes: t.nodes,
        processesPerNode: t.numProcesses,
        replicatedJob: TRAINER_REPLICATED_JOB,
        mainProcessPort: MAIN_PROCESS_PORT,
        labelEnv: { JOBSET_NAME: JOBSET_LABELS.jobSetName, MACHINE_RANK: JOBSET_LABELS.jobIndex },
        // JobSet's headless Service is named after the JobSet and each pod's hostname is
        // <jobset>-<replicatedJob>-<jobIndex>-<podIndex> (jobset pkg/controllers/jobset_controller.go).
        derivedEnv: { MAIN_PROCESS_IP: `$(JOBSET_NAME)-${TRAINER_REPLICATED_JOB}-0-0.$(JOBSET_NAME)` },
        exclusiveTopology: "kubernetes.io/hostname",
        vllm: { replicatedJob: VLLM_REPLICATED_JOB, podLabels: vllmPodLabels(config, names) },
        vllmService: names.training.vllmService,
    };
}

/** Where the trainer reaches vLLM: the same pod on one node, vLLM's Service across nodes. */
export function trainerVllmUrl(names: TrainingNames, multiNode: MultiNodeDescription | undefined): string {
    return multiNode ? `http://${names.training.vllmUpstream}` : INTERNAL_VLLM_URL;
}
