export { Monitors, type MonitorsArgs } from "./monitors";
export { JOB_LABEL, type MonitoringDescription } from "./model";
export { resolveMonitoring } from "./resolve";
export { scrapeAnnotations } from "../shared/metrics-pods";
export { MONITORING_API_VERSION, podMonitorSpec, type PodMonitorDescription } from "../shared/pod-monitor";
