/** The component library: use these from your own Pulumi program. */
export * from "./config";
export * from "./platform";
export { ENV_CATALOG, CATALOG_NAMES, type CatalogEntry, type CatalogName } from "./config/catalog";
export { EnvSpace, resolveEnvSpace, type EnvSpaceArgs, type EnvDescription } from "./env";
export { TrainingNode, resolveTrainingNode, type TrainingNodeArgs, type TrainingDescription, type TrainingLinks } from "./training";
export { VllmIngress, resolveVllmIngress, type VllmIngressArgs, type IngressDescription } from "./ingress";
export { SandboxPool, resolveSandboxPool, type SandboxPoolArgs, type SandboxDescription } from "./sandbox";
export { ClusterBase, teamQuota, type ClusterBaseArgs } from "./cluster";
