/**
 * The trainer's egress rules on Kubernetes, one rule for the one-node Job and the multi-node
 * JobSet: DNS, this stack's env routers / ingress / sandboxes (the peers), the API server when
 * it claims sandboxes, public addresses on the allowed ports (the Hub), plus what the layout
 * adds (the other trainer pods and vLLM on several nodes).
 */
import type * as k8s from "@pulumi/kubernetes";
import type { TrainerEgress } from "./describe";
import { clusterDnsEgress, podsInNamespace, PRIVATE_IPV4_RANGES, publicInternetEgress } from "../shared/kubernetes";

export function trainerEgressRules(
    egress: TrainerEgress,
    within: readonly k8s.types.input.networking.v1.NetworkPolicyPeer[] = [],
): k8s.types.input.networking.v1.NetworkPolicyEgressRule[] {
    const apiServer = egress.apiServer;
    return [
        clusterDnsEgress(egress.dns),
        ...(within.length > 0 ? [{ to: [...within] }] : []),
        ...egress.peers.map((p) => ({ to: [podsInNamespace(p.namespace, p.podLabels)], ports: [{ protocol: "TCP", port: p.port }] })),
        ...(apiServer
            ? [
                  {
                      // Private ranges when the API server's address is not configured (training.egress.apiServerCidrs).
                      to: (apiServer.cidrs ?? PRIVATE_IPV4_RANGES).map((cidr) => ({ ipBlock: { cidr } })),
                      ports: apiServer.ports.map((port) => ({ protocol: "TCP", port })),
                  },
              ]
            : []),
        publicInternetEgress(egress.internetPorts),
    ];
}
