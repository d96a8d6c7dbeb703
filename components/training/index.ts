export { TrainingNode, type TrainingNodeArgs } from "./training-node";
export { resolveTrainingNode } from "./resolve";
export { describeGpuSharing } from "./gpus";
export { envUrlVar } from "./trainer-env";
export {
    NCCL_CHECK_PATH,
    NCCL_CHECK_PORT,
    VLLM_PORT,
    TRL_GROUP_PORT,
    INTERNAL_VLLM_URL,
    CHECKPOINT_ROOT,
    MODEL_CACHE_PATH,
    CONTAINER,
    SECRET_ENV,
    type TrainingLinks,
    type EgressPeer,
    type TrainerEgress,
    type TrainingDescription,
    type TrainingConfig,
    type TrainingNames,
    type GpuSharingDescription,
    type ContainerDescription,
    type HttpProbe,
    type SecretName,
    type Role,
    type RoleRunner,
} from "./model";
export { quantityToMiB, gpuDeviceRequests } from "./docker";
export { renderSupervisor, oneContainer, ncclCheckArgv, shellQuote, type SupervisorSpec } from "./supervisor";
export { NCCL_CHECK_SCRIPT, ncclCheckSource } from "./nccl-check";
export { ROLE_RUNNER, roleRunnerArgv, roleRunnerAt, roleRunnerFiles } from "./role-runner";
