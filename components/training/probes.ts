/** vLLM's health probes: how long a model may load, and when a silent vLLM ends the run. Pure. */
import { type ContainerDescription, type HttpProbe, VLLM_PORT, VLLM_UNANSWERED_SECONDS } from "./model";

const PROBE_PERIOD = 10;

/**
 * The liveness probe of a vLLM in a pod of its own with training.nodes > 1. Its kill is not a restart
 * in place (restartPolicy Never): vLLM's Job fails and the JobSet's `vllmFailed` rule restarts every
 * trainer with it (their NCCL weight-sync group with vLLM does not survive a vLLM restart), counted
 * against training.backoffLimit (0 by default: the run ends). So it ends the run on point 8's bound,
 * not after a minute of a busy vLLM: 30 consecutive failures 10 s apart, each waiting at most 10 s
 * (the kubelet probes once per period and a probe blocks its worker up to its timeout,
 * pkg/kubelet/prober/worker.go, Kubernetes 1.36), i.e. VLLM_UNANSWERED_SECONDS without a 200 within
 * 10 s. Unlike the supervisor's watch, an answer slower than 10 s counts as none: the kubelet cannot
 * wait longer per probe without loosening the bound.
 */
function ownPodLiveness(path: string): HttpProbe {
    return { path, port: VLLM_PORT, periodSeconds: PROBE_PERIOD, failureThreshold: VLLM_UNANSWERED_SECONDS / PROBE_PERIOD, timeoutSeconds: PROBE_PERIOD };
}

export function healthProbes(path: string, modelLoadSeconds: number, ownPod: boolean): ContainerDescription["probes"] {
    return {
        // period x threshold >= modelLoadSeconds: a slow model download is not a crash loop.
        startup: { path, port: VLLM_PORT, periodSeconds: PROBE_PERIOD, failureThreshold: Math.ceil(modelLoadSeconds / PROBE_PERIOD), timeoutSeconds: 5 },
        // Runs only once the startup probe passed (Kubernetes semantics).
        liveness: ownPod ? ownPodLiveness(path) : { path, port: VLLM_PORT, periodSeconds: PROBE_PERIOD, failureThreshold: 6, timeoutSeconds: 10 },
        readiness: { path, port: VLLM_PORT, periodSeconds: 5, failureThreshold: 3, timeoutSeconds: 5 },
    };
}
