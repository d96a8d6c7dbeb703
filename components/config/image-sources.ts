/**
 * Where the image of each deployed image field comes from, for the messages that send a user to
 * make one (plan.md's example-registry warnings, the refusal of a real `up`): `npm run images` for
 * the images this repository builds (built-images.ts), else what builds it or the public image a copy
 * stands for. Pure data: no Pulumi, no I/O.
 */
import { buildHint, trainerImageName } from "./built-images";
import { ENV_CATALOG } from "./catalog";
import { DEFAULT_VLLM_IMAGE, STOCK_SANDBOX_IMAGE } from "./schema";
import { sandboxProviderRecord } from "./sandbox-providers";
import type { PlatformConfig } from "./types";

/** The fix for the image `field` names: "npm run images -- <stack> ... builds <image> ..., pushes it and sets <field>", or what builds it or the public image to copy, then push and name. */
export function imageSource(c: PlatformConfig, field: string): string {
    if (field === "images.trainer") return buildHint(trainerImageName(c.training.layout));
    if (field === "images.mtail") return buildHint("mtail");
    if (field === "sandboxes.image" && sandboxProviderRecord(c).defaultImage === "required")
        return `${buildHint("sandbox")} (the stock OpenEnv sandbox + the runtime on 8888)`;
    return `${otherSource(c, field)}, push it to your registry and set ${field} to it`;
}

/** What makes an image this repository does not build: "build ..." or "copy <public image> ...". */
function otherSource(c: PlatformConfig, field: string): string {
    if (field === "sandboxes.image") return `copy the stock sandbox image ${STOCK_SANDBOX_IMAGE} (the default: remove sandboxes.image to use it)`;
    const env = c.envs.find((e) => field === `envs.${e.name}.image`);
    if (env !== undefined)
        return env.catalog === "custom"
            ? "build your env server (the OpenEnv server contract: components/env/README.md)"
            : `copy ${ENV_CATALOG[env.catalog].image} (the catalog's image: remove envs.${env.name}.image to use it)`;
    if (field.startsWith("harbor.taskImages["))
        return "build the Harbor task's image with the pool's runtime and forwarder in it and its agent pre-installed (docs/guides/harbor.md \"Task images\")";
    if (field === "images.vllm") return `copy ${DEFAULT_VLLM_IMAGE} (the default: remove images.vllm to use it)`;
    return `copy the public image ${field} defaults to (remove ${field} to use it)`;
}
