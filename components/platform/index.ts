export { Platform, type PlatformArgs, type PlatformOutputs } from "./platform";
export { namespaceRoles } from "./namespaces";
export { resolvePlatform } from "./resolve";
export type { PlatformPlan } from "./model";
export { checkAgainstPrevious, checkClusterIdentity, previousClaims, withClusterStack, CLAIMS_OUTPUT } from "./previous";
export { clusterProvider, targetProvider } from "./providers";
export { dockerHostNeeds, formatMiB, type DockerHostNeeds, type HostShare } from "./docker-host";
export { dockerMetricsTargets, dockerMetricsPortProblems, dockerMetricsAddress } from "./docker-metrics";
