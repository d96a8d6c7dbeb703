/**
 * The providers the config refuses for every stack that could use them, in one place: `docker` (a fixed pool on the
 * Docker host) and `hf` (hosted sandboxes). Their names stay in the schema so a stack naming one gets the reason and
 * the fix (config/sandbox-providers.ts DOCKER_BLACKBOX_REFUSED, HOSTED_BLACKBOX_REFUSED), not "unknown value"; nothing
 * of theirs is rendered. Reaching one of these members means the config check was skipped: it fails with the reason.
 */
import type { SandboxProviderRecord } from "../../config/sandbox-providers";
import type { SandboxProviderModule } from "./contract";

export function refusedProvider(name: string, record: SandboxProviderRecord & { readonly refused: string }): SandboxProviderModule {
    const refuse = (): never => {
        throw new Error(`sandboxes.provider ${name} renders nothing: ${record.refused}`);
    };
    return { record, trainerEnv: refuse, register: refuse };
}
