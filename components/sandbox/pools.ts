/**
 * The warm pools a run deploys (pure): the run's one pool of sandboxes.image, or on the Harbor path one
 * per task image (harbor.taskImages), each holding the whole burst (config/harbor.ts says why), with
 * Harbor's writable dirs beside the pool's own and a label naming its task image.
 */
import { HARBOR_SANDBOX_DIRS, HARBOR_TASK_LABEL } from "../config/harbor-facts";
import { dnsName } from "../config/names";
import { poolAutoscaleBounds } from "../config/pool-size";
import { SERIES, WARM_POOL_WANTED_LABEL } from "../shared/metrics";
import type { SandboxConfig, SandboxNames, SandboxPoolAutoscale, SandboxPoolSpec, SandboxSecurity } from "./model";

/** A pool's autoscaler where sandboxes.autoscale is on: min the pool's size, max the configured (or twice it). */
function poolAutoscale(s: SandboxConfig["sandboxes"], warmPool: string, template: string): { autoscale?: SandboxPoolAutoscale } {
    if (!s.autoscale.enabled) return {};
    return {
        autoscale: {
            ...poolAutoscaleBounds(s.poolSize, s.autoscale.maxPoolSize),
            name: dnsName([warmPool, "autoscaler"]),
            metric: SERIES.sandboxWarmPoolWanted,
            selector: { [WARM_POOL_WANTED_LABEL]: template },
        },
    };
}

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
                ...poolAutoscale(s, names.sandboxes.warmPool, names.sandboxes.template),
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
        ...poolAutoscale(s, names.sandboxes.taskPools[i].warmPool, names.sandboxes.taskPools[i].template),
    }));
}
