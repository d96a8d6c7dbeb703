export { SESSION_COUNTER, INGRESS_MTAIL, programText, sessionCounterCommand, type ProgramFile } from "./programs";
export { renderVllmMetricsProxy, validateVllmMetricsProxy, type VllmMetricsProxySettings } from "./vllm-metrics-proxy";
export { alertRules, durationSeconds, warmPoolWantedRule } from "./alerts";
export { dashboardPanels, grafanaDashboard } from "./dashboard";
export { selectors } from "./selectors";
export {
    RULES_FILE,
    DASHBOARD_FILE,
    type AlertRule,
    type RecordingRule,
    type RuleGroup,
    type Panel,
    type PanelQuery,
    type ObservedStack,
    type EnvPlan,
    type ObservabilitySettings,
} from "./model";
export { Observability, rulesFileText, type ObservabilityArgs } from "./observability";
export { prometheusConfig, prometheusConfigText, PROMETHEUS_CONFIG_FILE } from "./prometheus-config";
