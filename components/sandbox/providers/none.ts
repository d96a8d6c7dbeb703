/** No sandboxes: the white boxes, whose model's code runs in env servers. Nothing is deployed and the trainer is told so. */
import * as pulumi from "@pulumi/pulumi";
import { SANDBOX_PROVIDER_RECORDS } from "../../config/sandbox-providers";
import type { SandboxPoolOutputs, SandboxProviderModule } from "./contract";

/** What a SandboxPool that deploys nothing exposes. */
export function nothingDeployed(): SandboxPoolOutputs {
    return { poolName: pulumi.output(""), namespace: pulumi.output(""), template: pulumi.output(""), size: 0, pools: [] };
}

export const noSandboxProvider: SandboxProviderModule = {
    record: SANDBOX_PROVIDER_RECORDS.none,
    trainerEnv: () => ({ SANDBOX_PROVIDER: "none" }),
    register: () => nothingDeployed(),
};
