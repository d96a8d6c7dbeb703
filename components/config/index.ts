export { LAYOUTS, DTYPES, type Dtype, type Layout } from "./terms";
export { platformSchema, type PlatformConfigInput, type ParsedConfig } from "./schema";
export type { PlatformConfig, ResolvedEnv, Demand } from "./types";
export { resolveDefaults, computeDemand, isProdStack } from "./resolve";
export {
    validatePlatform,
    deployedImages,
    exampleImageProblems,
    placeholderImages,
    ALLOW_EXAMPLE_IMAGES_ENV,
    PLACEHOLDER_REGISTRY,
} from "./validate";
export { replicasFor } from "./env-sessions";
export {
    DOCKER_BLACKBOX_REFUSED,
    HOSTED_BLACKBOX_REFUSED,
    SANDBOX_PROVIDER_RECORDS,
    runsSandboxPool,
    sandboxPoolOf,
    takesRolloutKeys,
    type SandboxPoolFacts,
    type SandboxProviderRecord,
} from "./sandbox-providers";
export { SANDBOX_PROVIDER_NAMES, type SandboxProviderName } from "./terms";
export { PROGRAMS, PROGRAM_NAMES, CUSTOM_PROGRAM, programFacts, type ProgramFacts, type ProgramFlag, type ProgramName } from "./programs";
export { dnsEgressFor, validateDns, NODE_LOCAL_DNS_ADDRESS, METADATA_ADDRESS } from "./dns";
export { validateObservability, observabilityEnabled } from "./observability";
export {
    vllmServerSettings,
    validateVllmSettings,
    defaultToolCallParser,
    RESERVED_VLLM_FLAGS,
    RESERVED_VLLM_ENV,
    VLLM_TOOL_CALL_PARSERS,
    ASYNC_GRPO_DEFAULT_DTYPE,
    type VllmServerSettings,
} from "./vllm-settings";
export { validateProgram, programWarnings, programLabel } from "./program-rules";
export { claimChangeProblems, type ClaimRecord, type ClaimRecords } from "./claims";
export { INGRESS_LIMIT_DEFAULTS } from "./ingress-defaults";
export { BUILT_IMAGES, BUILT_IMAGE_NAMES, IMAGES_COMMAND, buildHint, trainerImageName, type BuiltImage, type BuiltImageName } from "./built-images";
export { ConfigError, formatZodIssues } from "./errors";
export { parsePlatformConfig, deepMerge } from "./parse";
export { IGNORED_SETTINGS, validateTargetSettings, type IgnoredSetting } from "./target-settings";
export { RECIPES, RECIPE_NAMES, MULTI_NODE_RECIPE_NAMES, HARBOR_RECIPE_NAMES, ALL_RECIPE_NAMES, type RecipeName, type Recipe } from "./recipes";
export { taskPoolKey, imageReferenceProblem, harborProblems } from "./harbor";
export {
    HARBOR_AGENTS,
    HARBOR_SANDBOX_DIRS,
    MAX_TASK_IMAGES,
    TASK_POOLS_ENV,
    HARBOR_AGENT_ENV,
    HARBOR_TELEMETRY_ENV,
    HARBOR_TASK_LABEL,
    type HarborAgent,
} from "./harbor-facts";
export { platformNames, dnsName, validateNames, podLabels, type PodRole, type PlatformNames, type EnvNames } from "./names";
export {
    checkRegistryAuth,
    DOCKER_HUB_CONFIG_KEYS,
    DOCKER_HUB_PULL_HOSTS,
    dockerProviderAddresses,
    REGISTRY_AUTH_KEY,
    type RegistryAuth,
} from "./load";
export { missingPlatformMessage, nearMiss, stackObject, unknownStackKeys, STACK_KEYS } from "./stack-keys";
export {
    credentialKind,
    ENV_SECRET_PREFIX,
    envSecretRefs,
    type EnvValue,
    INGRESS_KEY_CONFIG_PREFIX,
    isSecretRef,
    missingEnvSecretProblems,
    plainEnv,
    secretRefEnv,
    type SecretRef,
    isSecretConfigKey,
    isSecretEnvName,
    plainSecretProblems,
    platformSecretProblems,
    requiredSecretKeys,
    SECRET_STACK_KEYS,
    secretPlaceholder,
    setSecretCommand,
} from "./secrets";
export { loadClusterConfig, loadPlatformConfig, checkSuppliedKeys, ingressKeyConfigKey, toRunError, CONFIG_NAMESPACE, type PlatformSecrets } from "./load";
export {
    clusterSchema,
    AGENT_SANDBOX_VERSION,
    AGENT_SANDBOX_MANIFEST_URL,
    SANDBOX_CONTROLLER_LABEL,
    JOBSET_RELEASE,
    KUEUE_RELEASE,
    CLUSTER_OUTPUTS_KIND,
    type ClusterConfig,
    type ClusterOutputs,
    type TeamQuota,
    type TenantOutputs,
} from "./cluster-schema";
export { parseClusterConfig, clusterOutputs, applyClusterStack, clusterIdentityProblems } from "./cluster";
export {
    DEPLOYER_RULES,
    OPERATOR_RULES,
    POD_SECURITY,
    podSecurityLabels,
    ROLE_LABEL,
    ROLES,
    TEAM_LABEL,
    teamNamespace,
    teamNamespaces,
    type Role,
    type Rule,
} from "./tenancy";
