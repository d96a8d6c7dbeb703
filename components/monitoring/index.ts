export { Monitors, type MonitorsArgs } from "./monitors";
export { JOB_LABEL, resolveMonitoring, type MonitoringDescription } from "./describe";
export { scrapeAnnotations } from "../shared/metrics-pods";
export { MONITORING_API_VERSION, podMonitorSpec, type PodMonitorDescription } from "../shared/pod-monitor";
