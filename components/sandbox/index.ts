export { SandboxPool, type SandboxPoolArgs } from "./sandbox-pool";
export { resolveSandboxPool } from "./resolve";
export { sandboxPools } from "./pools";
export { sandboxForwarderCommand, sandboxRuntimeCommand } from "./commands";
export { multiplyQuantity, quantityValue } from "../shared/quantity";
export {
    AGENT_SANDBOX_VERSION,
    SANDBOX_API_VERSION,
    SANDBOX_CORE_GROUP,
    SANDBOX_EXTENSIONS_GROUP,
    FORWARDER_CPU,
    FORWARDER_MEMORY,
    SANDBOX_FORWARDER_PATH,
    SANDBOX_FORWARDER_PORT,
    SANDBOX_HEALTH_PATH,
    SANDBOX_HOME,
    SANDBOX_HOME_ALIAS,
    SANDBOX_HOME_SEED,
    SANDBOX_KEY_ENV,
    SANDBOX_PORT,
    SANDBOX_RUNTIME_PATH,
    SANDBOX_TRACE_PORT,
    SANDBOX_URL_ENV,
    type SandboxDescription,
    type SandboxForwarder,
    type SandboxConfig,
    type SandboxNames,
    type SandboxPoolSpec,
    type SandboxQuota,
    type SandboxSecurity,
    type WritablePath,
} from "./model";
export {
    forwarderContainer,
    sandboxClaimBindingSpec,
    sandboxClaimPolicySpec,
    sandboxClaimerRules,
    sandboxNetworkPolicySpec,
    sandboxQuotaSpec,
    sandboxTemplateSpec,
    sandboxWarmPoolSpec,
    type IngressPeer,
    type TrainerPeer,
} from "./kubernetes";
export { SANDBOX_PROVIDERS, type SandboxPoolOutputs, type SandboxProviderModule } from "./providers";
