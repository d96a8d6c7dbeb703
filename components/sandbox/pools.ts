/**
 * The warm pools a run deploys (pure): the run's one pool of sandboxes.image, or on the Harbor path one
 * per task image (harbor.taskImages), each holding the whole burst (config/harbor.ts says why), with
 * Harbor's writable dirs beside the pool's own and a label naming its task image.
 */
import { HARBOR_SANDBOX_DIRS, HARBOR_TASK_LABEL } from "../config/harbor-facts";
import type { SandboxConfig, SandboxNames, SandboxPoolSpec, SandboxSecurity } from "./model";

export function sandboxPools(
    config: SandboxConfig,
    names: SandboxNames,
    labels: Readonly<Record<string, string>>,
    security: SandboxSecurity,
): SandboxPoolSpec[] {
    const s = config.sandboxes;
    const harbor = config.harbor;
    if (harbor === undefined) {
        return [
            {
                image: s.image,
                template: names.sandboxes.template,
                warmPool: names.sandboxes.warmPool,
                poolSize: s.poolSize,
                labels,
                writablePaths: security.writablePaths,
            },
        ];
    }
    const writablePaths = [...security.writablePaths, ...HARBOR_SANDBOX_DIRS.map(({ name, path, sizeLimit }) => ({ name, path, sizeLimit }))];
    // names.sandboxes.taskPools is made from the same list, in its order (config/names.ts).
    return harbor.taskImages.map((t, i) => ({
        image: t.image,
        template: names.sandboxes.taskPools[i].template,
        warmPool: names.sandboxes.taskPools[i].warmPool,
        poolSize: s.poolSize,
        taskKey: t.key,
        labels: { ...labels, [HARBOR_TASK_LABEL]: t.key },
        writablePaths,
    }));
}
