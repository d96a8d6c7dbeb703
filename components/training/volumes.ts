/**
 * The training node's volumes: the stack-wide model cache and checkpoint claims (Kubernetes PVCs,
 * Docker host directories), where each is mounted, and the run's output directory on the checkpoints.
 */
import {
    CHECKPOINT_ROOT,
    MODEL_CACHE_PATH,
    type MultiNodeDescription,
    type TrainingConfig,
    type TrainingNames,
    type VolumeDescription,
    type VolumeMount,
} from "./model";

/** The claims of a run and where every role mounts them (vLLM leaves out the checkpoints). */
export interface TrainingVolumes {
    readonly modelCache?: VolumeDescription;
    readonly checkpoints?: VolumeDescription;
    readonly mounts: readonly VolumeMount[];
}

/**
 * A stack-wide claim's name: ReadWriteMany claims (nodes > 1) get their own name, since a claim's
 * access mode is immutable and a retained claim replaced under its own name would collide with itself.
 */
export function volumeName(name: string, multiNode: MultiNodeDescription | undefined): string {
    return multiNode ? `${name}-rwx` : name;
}

/** A directory under the Docker host's data dir; undefined on Kubernetes (PVCs there). */
function hostDir(config: TrainingConfig, name: string): string | undefined {
    return config.target.kind === "docker" ? `${config.target.dataDir.replace(/\/+$/, "")}/${name}` : undefined;
}

/** The model cache and checkpoint claims the config enables; across nodes every pod mounts them (ReadWriteMany). */
export function trainingVolumes(config: TrainingConfig, names: TrainingNames, multiNode: MultiNodeDescription | undefined): TrainingVolumes {
    const t = config.training;
    const accessMode = multiNode ? "ReadWriteMany" : "ReadWriteOnce";
    const modelCache: VolumeDescription | undefined = t.modelCache.enabled
        ? { name: volumeName(names.training.modelCache, multiNode), size: t.modelCache.size, accessMode, hostPath: hostDir(config, names.training.modelCache) }
        : undefined;
    const checkpoints: VolumeDescription | undefined = t.checkpoints.enabled
        ? {
              name: volumeName(names.training.checkpoints, multiNode),
              size: t.checkpoints.size,
              accessMode,
              hostPath: hostDir(config, names.training.checkpoints),
          }
        : undefined;
    const mounts: VolumeMount[] = [
        { volume: "shm", path: "/dev/shm" },
        { volume: "modelCache", path: MODEL_CACHE_PATH },
        { volume: "checkpoints", path: CHECKPOINT_ROOT },
    ];
    return { modelCache, checkpoints, mounts };
}

/** Where the Hub keeps its downloads: under the model cache, for both roles. */
export function modelCacheEnv(): Record<string, string> {
    return { HF_HOME: `${MODEL_CACHE_PATH}/huggingface` };
}

/** Where the run writes its checkpoints: its own directory on the shared volume. */
export function runOutputDir(runId: string): string {
    return `${CHECKPOINT_ROOT}/${runId}`;
}
