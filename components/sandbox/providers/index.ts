/**
 * The sandbox providers' table: one module per `sandboxes.provider` name (config/terms.ts SANDBOX_PROVIDER_NAMES). Typed
 * over the names, so a name without a module fails `npm run typecheck`; the contract (contract.ts) says what each gives.
 */
import { SANDBOX_PROVIDER_RECORDS } from "../../config/sandbox-providers";
import type { SandboxProviderName } from "../../config/terms";
import { agentSandboxProvider } from "./agent-sandbox";
import type { SandboxProviderModule } from "./contract";
import { noSandboxProvider } from "./none";
import { refusedProvider } from "./refused";

export const SANDBOX_PROVIDERS: { readonly [P in SandboxProviderName]: SandboxProviderModule } = {
    "agent-sandbox": agentSandboxProvider,
    docker: refusedProvider("docker", SANDBOX_PROVIDER_RECORDS.docker),
    hf: refusedProvider("hf", SANDBOX_PROVIDER_RECORDS.hf),
    none: noSandboxProvider,
};

export type { SandboxPoolOutputs, SandboxProviderModule, SandboxPoolArgs } from "./contract";
