export { SESSION_COUNTER, INGRESS_MTAIL, programText, sessionCounterCommand, type ProgramFile } from "./programs";
export { renderVllmMetricsProxy, validateVllmMetricsProxy, type VllmMetricsProxySettings } from "./vllm-metrics-proxy";
export {
    alertRules,
    dashboardPanels,
    grafanaDashboard,
    durationSeconds,
    selectors,
    type AlertRule,
    type RuleGroup,
    type Panel,
    type PanelQuery,
    type ObservedStack,
    type EnvPlan,
    type ObservabilitySettings,
} from "./describe";
export { Observability, rulesFileText, RULES_FILE, DASHBOARD_FILE, type ObservabilityArgs } from "./observability";
export { prometheusConfig, prometheusConfigText, PROMETHEUS_CONFIG_FILE } from "./prometheus-config";
