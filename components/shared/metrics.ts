/**
 * What the stack's metrics are, where they are served and what serves them: one table that the
 * pods (their metrics containers and ports), the NetworkPolicies (the scrape rule), the monitors,
 * the alert rules and the dashboards all read, so none of them can name a port or a series the
 * others do not. Upstream series (vLLM's, nginx-prometheus-exporter's, agent-sandbox's) keep
 * their upstream names; the project's own series start with `agentrl_`.
 *
 * No series carries a per-session or per-request label (cardinality): the only free-form label is
 * the ingress key name, bounded by the stack's config.
 */

/** A port that serves only `GET /metrics` (each is a container port named `metrics-<role>`). */
export interface MetricsEndpoint {
    /** Container port. */
    readonly port: number;
    /** HTTP path Prometheus scrapes. */
    readonly path: "/metrics";
    /** The container serving it. */
    readonly container: string;
    /** What serves it, for docs and plan.md. */
    readonly what: string;
}

/**
 * vLLM's own /metrics, re-served by a metrics-only nginx in the pod that runs vLLM: nginx allows
 * `GET /metrics` to 127.0.0.1:8000 and nothing else, so the scrape rule never opens port 8000 (which
 * also serves /update_weights, /pause and the other weight-sync routes). Absent in colocate, where
 * vLLM runs inside the training script and serves no HTTP.
 */
export const VLLM_METRICS: MetricsEndpoint = {
    port: 9400,
    path: "/metrics",
    container: "vllm-metrics",
    what: "vLLM /metrics through a GET /metrics-only nginx",
};
/** The supervisor's liveness and step-progress series (agentrl_trainer_*), in the trainer container. */
export const TRAINER_METRICS: MetricsEndpoint = { port: 9401, path: "/metrics", container: "trainer", what: "the training supervisor" };
/** nginx-prometheus-exporter (default listen :9113) reading the ingress's stub_status on loopback. */
export const INGRESS_STUB_METRICS: MetricsEndpoint = {
    port: 9113,
    path: "/metrics",
    container: "nginx-exporter",
    what: "nginx-prometheus-exporter over stub_status",
};
/** The ingress's JSON access log turned into per-status and per-key series (mtail's default port 3903). */
export const INGRESS_LOG_METRICS: MetricsEndpoint = {
    port: 3903,
    path: "/metrics",
    container: "log-metrics",
    what: "mtail over the ingress's JSON access log",
};
/** Each env replica's sessions in use (established connections to its port) against its capacity. */
export const ENV_SESSION_METRICS: MetricsEndpoint = { port: 9402, path: "/metrics", container: "session-metrics", what: "the session counter sidecar" };
/**
 * The env router's capacity responder: CAPACITY_REACHED refusals. Served by the responder itself, so
 * the port belongs to its container (`capacity-responder` in components/env/kubernetes.ts), not nginx's.
 */
export const ENV_ROUTER_METRICS: MetricsEndpoint = { port: 9403, path: "/metrics", container: "capacity-responder", what: "the capacity responder" };

/** nginx's stub_status, on the ingress pod's loopback only (the exporter's source; never a Service port). */
export const INGRESS_STUB_STATUS = { address: "127.0.0.1", port: 9114, path: "/stub_status" } as const;
/** The JSON access log file the ingress writes beside stdout, on an emptyDir shared with mtail. */
export const INGRESS_ACCESS_LOG_FILE = "/var/log/agentrl-ingress/access.json";

/** The project's own series (components/observability/ holds the programs that serve them). */
export const SERIES = {
    /** gauge {env, replica}: established connections to the replica's port (one per live session). */
    envSessionsInUse: "agentrl_env_sessions_in_use",
    /** gauge {env, replica}: the sessions the replica holds at most (MAX_CONCURRENT_ENVS). */
    envSessionsCapacity: "agentrl_env_sessions_capacity",
    /** counter {env}: WebSocket upgrades the router refused with CAPACITY_REACHED. */
    envCapacityReached: "agentrl_env_capacity_reached_total",
    /** counter {status, key}: ingress responses by HTTP status and key name (never the key). */
    ingressRequests: "agentrl_ingress_requests_total",
    /** histogram {key}: ingress request time (nginx $request_time), seconds. */
    ingressRequestSeconds: "agentrl_ingress_request_duration_seconds",
    /** gauge: 1 while the supervised trainer process runs. */
    trainerUp: "agentrl_trainer_up",
    /** gauge: the last training step the trainer logged. */
    trainerStep: "agentrl_trainer_step",
    /** gauge: unix time of the last step seen (the stall alert's input). */
    trainerLastProgress: "agentrl_trainer_last_progress_timestamp_seconds",
    /** gauge: 1 while vLLM's /health answers the supervisor (shared layout). */
    trainerVllmHealthy: "agentrl_trainer_vllm_healthy",
    /**
     * recording rule {sandbox_template}: the warm sandboxes one pool wants now, from the live claims (claimed in flight +
     * claim rate x sandboxes.refillSeconds + sandboxes.headroom); the pool's autoscaler reads it through the cluster's
     * external metrics adapter (components/observability/alerts.ts warmPoolWantedRule).
     */
    sandboxWarmPoolWanted: "agentrl_sandbox_warm_pool_wanted",
} as const;

/** The label of SERIES.sandboxWarmPoolWanted naming its pool's template (agent-sandbox's own label on its series). */
export const WARM_POOL_WANTED_LABEL = "sandbox_template";
