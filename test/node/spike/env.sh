# Shared names of the node spike (sourced by the other scripts in this folder; see ../SPIKE.md).
# Everything the spike makes is named from these, so cleanup.sh can find and remove all of it.
SPIKE_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SPIKE_HERE/../../.." && pwd)"
K8S_VERSION=v1.36.3
KUBE_ROUTER_VERSION=v2.1.0
# Debian forky's containerd (2.1.9) runs on bookworm's libc (it needs libc6 >= 2.34); forky's runc
# 1.3.6 needs libc6 >= 2.38, so runc stays bookworm's 1.1.5.
CONTAINERD_DEB_VERSION=2.1.9+ds1-5
BOOKWORM_PACKAGES=(ipset containernetworking-plugins busybox-static debootstrap runc iptables iproute2 openssl)
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra"
SPIKE_CACHE="${ARL_NODE_SPIKE_CACHE:-$cache_root/node-spike}"
K8S_CACHE="${AGENT_RL_K8S_CACHE_DIR:-$cache_root/k8s-$K8S_VERSION}"
# Work dir: short, because the containerd socket path must fit a sockaddr_un (108 bytes).
W="${ARL_NODE_SPIKE_DIR:-/tmp/arl-node-spike}"
NETNS=arl-node-spike
CGROUP_NAME=arl-node-spike          # kubelet's cgroupRoot: every pod cgroup lives under it
NODE_NAME=arl-node
NODE_DEV=arl-node0                  # veth end in the netns carrying the node address
NODE_IP=10.213.0.2
BRIDGE=arl-cni0
POD_SUBNET=10.214.0.0/24
SERVICE_RANGE=10.0.0.0/24
CNI_NETWORK=arl-node-spike
API_PORT=6443
ETCD_CLIENT_PORT=2379
ETCD_PEER_PORT=2380
BUSYBOX_IMAGE=localhost/arl-node-spike/busybox:spike
RUNTIME_IMAGE=localhost/arl-node-spike/sandbox-runtime:spike
CTR_BIN="$SPIKE_CACHE/containerd/usr/bin"
log() { printf '[node-spike %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
in_ns() { ip netns exec "$NETNS" "$@"; }
kc() { ip netns exec "$NETNS" "$K8S_CACHE/bin/kubectl" --kubeconfig "$W/kubeconfig" "$@"; }
ctr_() { "$CTR_BIN/ctr" --address "$W/containerd/containerd.sock" -n k8s.io "$@"; }
# The host's (not the netns's) filter/nat rules, counters dropped: compared before and after.
host_iptables() { { iptables-save; ipset list -n; } 2>/dev/null | sed '/^#/d; s/\[[0-9:]*\]//' | sha256sum | cut -c1-16; }
