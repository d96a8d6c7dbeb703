export { SESSION_COUNTER, ROLE_RUNNER, INGRESS_MTAIL, programText, sessionCounterCommand, type ProgramFile } from "./programs";
export { renderVllmMetricsProxy, validateVllmMetricsProxy, type VllmMetricsProxySettings } from "./vllm-metrics-proxy";
