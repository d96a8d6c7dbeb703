export { SandboxPool, type SandboxPoolArgs } from "./sandbox-pool";
export {
    resolveSandboxPool,
    multiplyQuantity,
    quantityValue,
    AGENT_SANDBOX_VERSION,
    CONTROLLER_MANIFEST_URL,
    SANDBOX_API_VERSION,
    SANDBOX_CORE_GROUP,
    SANDBOX_EXTENSIONS_GROUP,
    SANDBOX_KEY_ENV,
    SANDBOX_PORT,
    SANDBOX_URL_ENV,
    type SandboxDescription,
    type SandboxQuota,
    type SandboxSecurity,
    type WritablePath,
} from "./describe";
export {
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
export { dockerSandboxCommand } from "./docker";
