export { namespaceRoles, Platform, type PlatformArgs, type PlatformOutputs } from "./platform";
export { resolvePlatform, type PlatformPlan } from "./resolve";
export { checkAgainstPrevious, checkClusterIdentity, previousClaims, withClusterStack, CLAIMS_OUTPUT } from "./previous";
export { clusterProvider, targetProvider } from "./providers";
export { dockerHostNeeds, formatMiB, type DockerHostNeeds, type HostShare } from "./docker-host";
export { dockerMetricsTargets, dockerMetricsPortProblems, dockerMetricsAddress } from "./docker-metrics";
