export { ENV_CATALOG, CATALOG_NAMES, type CatalogEntry, type CatalogName } from "../config/catalog";
export { EnvSpace, type EnvSpaceArgs } from "./env-space";
export { resolveEnvSpace, wsUrlOf } from "./resolve";
export { nginxImageVersion, nginxImageSupportsResolve } from "./nginx-image";
export {
    SESSIONS_ENV_VAR,
    WEB_INTERFACE_ENV_VAR,
    KUBERNETES_RESOLVER,
    DOCKER_RESOLVER,
    ROUTER_CHECKSUM_ANNOTATION,
    ROUTER_CONFIG_FILE,
    ROUTER_REPLICAS,
    type EnvDescription,
    type EnvConfig,
    type EnvNames,
    type DeployedEnvDescription,
    type ExternalEnvDescription,
    type EnvCapacity,
    type EnvProbe,
    type EnvReplicasDescription,
    type EnvRouterDescription,
    type TrainerPods,
} from "./model";
export {
    replicaStatefulSetSpec,
    replicaPodSpec,
    headlessServiceSpec,
    routerDeploymentSpec,
    routerPodSpec,
    routerServiceSpec,
    replicaDisruptionBudgetSpec,
    routerDisruptionBudgetSpec,
    replicaNetworkPolicySpec,
    routerNetworkPolicySpec,
} from "./kubernetes";
export { dockerCpus, dockerMemoryMiB, replicaHealthcheck, routerHealthcheck } from "./docker";
export { replicaMetricsPath, replicaMetricsRelay, renderReplicaMetricsRelay, REPLICA_METRICS_RELAY_PORT, REPLICA_METRICS_RELAY_FILE } from "./docker-metrics";
export {
    renderRouterConfig,
    validateRouterSettings,
    routerCommand,
    statefulSetReplicaAddresses,
    ROUTER_HEALTH_PATH,
    NGINX_MIN_VERSION_FOR_RESOLVE,
} from "./router";
export type { RouterSettings } from "./model";
