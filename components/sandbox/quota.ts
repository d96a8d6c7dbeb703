/**
 * What the sandboxes namespace's ResourceQuota allows: every warm pool + the claimed burst (sizing.burst) +
 * headroom. Pure. The burst is counted once across pools: it is the run's claims at once, whatever their images.
 * An autoscaled pool counts at its maximum, so the autoscaler never scales it into the quota (a pod the quota
 * refuses is a warm sandbox missing, and a claim beyond the ready ones waits for a cold one).
 */
import { addQuantities, multiplyQuantity } from "../shared/quantity";
import { FORWARDER_CPU, FORWARDER_MEMORY, type SandboxConfig, type SandboxPoolSpec, type SandboxQuota } from "./model";

export function sandboxQuota(s: SandboxConfig["sandboxes"], burst: number, pools: readonly Pick<SandboxPoolSpec, "poolSize" | "autoscale">[]): SandboxQuota {
    const warm = pools.reduce((sum, p) => sum + (p.autoscale?.max ?? p.poolSize), 0);
    const pods = warm + burst + s.headroom;
    // Every pod holds the sandbox and its forwarder (Kubernetes counts a native sidecar's requests in the pod's).
    return {
        pods,
        cpu: addQuantities(multiplyQuantity(s.cpu, pods), multiplyQuantity(FORWARDER_CPU, pods)),
        memory: addQuantities(multiplyQuantity(s.memory, pods), multiplyQuantity(FORWARDER_MEMORY, pods)),
    };
}
