export { VllmIngress, configChecksum, retiredSandboxKeyMessage, GENERATED_KEY_LENGTH, type VllmIngressArgs } from "./vllm-ingress";
export { resolveVllmIngress, type IngressDescription } from "./resolve";
export { ingressProxySettings, localOverrides } from "./proxy-settings";
export {
    CHECKSUM_ANNOTATION,
    INGRESS_HTTP_PORT,
    INGRESS_HTTPS_PORT,
    INGRESS_PATHS,
    PUBLIC_HTTPS_PORT,
    type IngressConfig,
    type IngressNames,
    type IngressPeerPods,
    type IngressResources,
    type IngressSecurity,
    type IngressTls,
} from "./model";
export {
    HTTPROUTE_API_VERSION,
    ingressDeploymentSpec,
    ingressDisruptionBudgetSpec,
    ingressHttpRouteSpec,
    ingressNetworkPolicySpec,
    ingressPodSpec,
    ingressServicePorts,
    ingressServiceSpec,
} from "./kubernetes";
export { dockerIngressHealthcheck, dockerIngressPorts } from "./docker";
export {
    allowedRoutes,
    renderKeysFile,
    renderNginxConfig,
    resolveProxySettings,
    validateKeys,
    validateProxySettings,
    PROXY_DEFAULTS,
    type IngressKey,
    type ProxySettings,
    type ResolvedProxySettings,
    type Route,
} from "./nginx";
