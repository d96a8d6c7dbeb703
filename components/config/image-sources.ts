/**
 * Where the image of each deployed image field comes from, for the messages that send a user to
 * make one (plan.md's example-registry warnings, the refusal of a real `up`): the Dockerfile and
 * the doc that builds it, or the public image a copy stands for. Pure data: no Pulumi, no I/O.
 */
import { ENV_CATALOG } from "./catalog";
import { DEFAULT_VLLM_IMAGE, STOCK_SANDBOX_IMAGE } from "./schema";
import { sandboxProviderRecord } from "./sandbox-providers";
import type { PlatformConfig } from "./types";

/** What makes the image `field` names: "build <Dockerfile> (<doc>)" or "copy <public image> ...". */
export function imageSource(c: PlatformConfig, field: string): string {
    if (field === "images.trainer") return `build trainer/${c.training.layout === "blackbox" ? "blackbox" : "whitebox"}/Dockerfile (trainer/README.md)`;
    if (field === "sandboxes.image")
        return sandboxProviderRecord(c).defaultImage === "required"
            ? "build python/Dockerfile (python/README.md, the sandbox image: the stock OpenEnv sandbox + the runtime on 8888)"
            : `copy the stock sandbox image ${STOCK_SANDBOX_IMAGE} (the default: remove sandboxes.image to use it)`;
    const env = c.envs.find((e) => field === `envs.${e.name}.image`);
    if (env !== undefined)
        return env.catalog === "custom"
            ? "build your env server (the OpenEnv server contract: components/env/README.md)"
            : `copy ${ENV_CATALOG[env.catalog].image} (the catalog's image: remove envs.${env.name}.image to use it)`;
    if (field.startsWith("harbor.taskImages["))
        return "build the Harbor task's image with the pool's runtime and forwarder in it and its agent pre-installed (docs/guides/harbor.md \"Task images\")";
    if (field === "images.vllm") return `copy ${DEFAULT_VLLM_IMAGE} (the default: remove images.vllm to use it)`;
    if (field === "images.mtail") return "build images/mtail/Dockerfile (npm run images -- <stack>, docs/guides/images.md)";
    return `copy the public image ${field} defaults to (remove ${field} to use it)`;
}
