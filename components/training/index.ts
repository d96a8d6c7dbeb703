export { TrainingNode, type TrainingNodeArgs } from "./training-node";
export {
    resolveTrainingNode,
    envUrlVar,
    VLLM_PORT,
    TRL_GROUP_PORT,
    INTERNAL_VLLM_URL,
    CHECKPOINT_ROOT,
    MODEL_CACHE_PATH,
    CONTAINER,
    SECRET_ENV,
    type TrainingLinks,
    type TrainingDescription,
    type ContainerDescription,
    type HttpProbe,
    type SecretName,
} from "./describe";
export { quantityToMiB, gpuDeviceRequest } from "./docker";
