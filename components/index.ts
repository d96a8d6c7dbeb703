/** The component library: use these from your own Pulumi program. */
export * from "./config";
export * from "./platform";
export { ENV_CATALOG, CATALOG_NAMES, type CatalogEntry, type CatalogName } from "./config/catalog";
export { EnvSpace, resolveEnvSpace, type EnvSpaceArgs, type EnvDescription, type EnvConfig, type EnvNames } from "./env";
export {
    TrainingNode,
    resolveTrainingNode,
    type TrainingNodeArgs,
    type TrainingDescription,
    type TrainingLinks,
    type TrainingConfig,
    type TrainingNames,
} from "./training";
export { VllmIngress, resolveVllmIngress, type VllmIngressArgs, type IngressDescription, type IngressConfig, type IngressNames } from "./ingress";
export { SandboxPool, resolveSandboxPool, type SandboxPoolArgs, type SandboxDescription, type SandboxConfig, type SandboxNames } from "./sandbox";
export { ClusterBase, teamQuota, type ClusterBaseArgs } from "./cluster";
