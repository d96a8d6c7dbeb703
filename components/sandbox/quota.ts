/** What the sandboxes namespace's ResourceQuota allows: warm pool + the claimed burst (sizing.burst) + headroom. Pure. */
import { addQuantities, multiplyQuantity } from "../shared/quantity";
import { FORWARDER_CPU, FORWARDER_MEMORY, type SandboxConfig, type SandboxQuota } from "./model";

export function sandboxQuota(s: SandboxConfig["sandboxes"], burst: number): SandboxQuota {
    const pods = s.poolSize + burst + s.headroom;
    // Every pod holds the sandbox and its forwarder (Kubernetes counts a native sidecar's requests in the pod's).
    return {
        pods,
        cpu: addQuantities(multiplyQuantity(s.cpu, pods), multiplyQuantity(FORWARDER_CPU, pods)),
        memory: addQuantities(multiplyQuantity(s.memory, pods), multiplyQuantity(FORWARDER_MEMORY, pods)),
    };
}
