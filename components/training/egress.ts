/**
 * The trainer's egress rules on Kubernetes, one rule for the one-node Job and the multi-node
 * JobSet: DNS, this stack's env routers / ingress / sandboxes (the peers), the API server when
 * it claims sandboxes, public addresses on the allowed ports (the Hub), plus what the layout
 * adds (the other trainer pods and vLLM on several nodes). `trainerEgress` decides the list (resolve
 * step), `trainerEgressRules` writes it as NetworkPolicy rules.
 */
import type * as k8s from "@pulumi/kubernetes";
import { dnsEgressFor } from "../config/dns";
import { clusterDnsEgress, podsInNamespace, PRIVATE_IPV4_RANGES, publicInternetEgress } from "../shared/kubernetes";
import type { TrainerEgress, TrainingConfig, TrainingLinks } from "./model";

/** HTTPS: the Hugging Face Hub (models, datasets, pushes), trackio Spaces, hosted sandboxes. */
const HTTPS_PORT = 443;
/** The API server's Service port and its usual endpoint ports (kubeadm 6443). */
const API_SERVER_PORTS = [443, 6443] as const;

export function trainerEgress(
    links: TrainingLinks,
    claimsSandboxes: boolean,
    apiServerCidrs: readonly string[] | undefined,
    config: TrainingConfig,
): TrainerEgress {
    // External env servers are reached on their URL's port over the internet.
    const externalPorts = config.envs
        .filter((e) => e.external)
        .map((e) => {
            const u = new URL(e.external!.url);
            return Number(u.port || (u.protocol === "https:" ? 443 : 80));
        });
    return {
        dns: dnsEgressFor(config.target),
        peers: [...(links.egressPeers ?? [])],
        internetPorts: [...new Set([HTTPS_PORT, ...externalPorts])].sort((a, b) => a - b),
        apiServer: claimsSandboxes ? { ...(apiServerCidrs ? { cidrs: [...apiServerCidrs] } : {}), ports: [...API_SERVER_PORTS] } : undefined,
    };
}

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
