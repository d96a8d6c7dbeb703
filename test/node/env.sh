# Shared names of the node fixture (sourced by the other scripts in this folder; see README.md).
# Everything the node makes is named from these, so down.sh can find and remove all of it.
NODE_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$NODE_HERE/../.." && pwd)"
K8S_VERSION=v1.36.3
KUBE_ROUTER_VERSION=v2.1.0
COREDNS_VERSION=v1.14.1
# The k8s.io/kubernetes programs build.sh builds from the wrapper module kubelet/ (bin/<name>).
K8S_NODE_PROGRAMS=(kubelet kube-proxy kube-controller-manager kube-scheduler)
# Debian forky's containerd (2.1.9) runs on bookworm's libc (it needs libc6 >= 2.34); forky's runc
# 1.3.6 needs libc6 >= 2.38, so runc stays bookworm's 1.1.5.
CONTAINERD_DEB_VERSION=2.1.9+ds1-5
# Installed by `npm test` (scripts/test/run.ts) as root; build.sh only checks them.
BOOKWORM_PACKAGES=(ipset containernetworking-plugins busybox-static debootstrap runc iptables iproute2 openssl ca-certificates gettext-base)
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra"
# The fixture's output directory (build.sh prints it as its last stdout line): bin/, containerd/, images/.
NODE_DIR="${AGENT_RL_NODE_DIR:-$cache_root/node-$K8S_VERSION}"
K8S_CACHE="${AGENT_RL_K8S_CACHE_DIR:-$cache_root/k8s-$K8S_VERSION}"
# Work dir: short, because the containerd socket path must fit a sockaddr_un (108 bytes).
W=/tmp/arl-node
# Directories up.sh made outside $W (the device plugin mount point), one a line: beside $W, so that
# `down.sh --check`, run after $W is gone, still names one left behind.
HOST_DIRS_RECORD="$W.host-dirs"
NETNS=arl-node
CGROUP_NAME=arl-node                # kubelet's cgroupRoot: every pod cgroup lives under it
NODE_NAME=arl-node
NODE_DEV=arl-node0                  # veth end in the netns carrying the node address
# The node's only way out: its veth's peer, in a second network namespace that stands for
# everything outside the cluster and has no route anywhere else (never a real outside address is
# reached). It holds the addresses the reachability tables name, each served by standin.py.
OUTSIDE_NETNS=arl-outside
INTERNET_IP=203.0.113.10            # "internet": TEST-NET-3 (RFC 5737), public to a NetworkPolicy, routed nowhere
METADATA_IP=169.254.169.254         # the cloud metadata service's address
APISERVER_STANDIN_IP=10.215.0.10    # an API server endpoint address outside the pod network, 443 and 6443
NODE_LOCAL_DNS_IP=169.254.20.10     # NodeLocal DNSCache's default listen address
LINK_LOCAL_NEIGHBOUR_IP=169.254.20.11
OUTSIDE_TCP_PORTS=53,80,443,6443,8000,12345
OUTSIDE_UDP_PORTS=53,12345
NODE_IP=10.213.0.2
BRIDGE=arl-cni0
POD_SUBNET=10.214.0.0/24
SERVICE_RANGE=10.0.0.0/24
CLUSTER_DNS_IP=10.0.0.10            # the kube-dns Service (coredns.yaml), the kubelet's clusterDNS
CLUSTER_DOMAIN=cluster.local
CNI_NETWORK=arl-node
API_PORT=6443
ETCD_CLIENT_PORT=2379
ETCD_PEER_PORT=2380
# The stand-in device plugin (kubelet/gpu-standin/): fake devices of the stack's GPU resource, no GPU.
GPU_RESOURCE=nvidia.com/gpu
GPU_STANDIN_DEVICES=8
# The kubelet's device plugin directory is fixed, not under --root-dir (k8s.io/kubernetes v1.36.3
# pkg/kubelet/cm/devicemanager/manager.go NewManagerImpl: pluginapi.KubeletSocket). In the node's
# mount namespace $W/device-plugins is bind-mounted there, so the host's directory (and a real
# kubelet's sockets in it) is never touched; up.sh makes the empty mount point when it is missing.
KUBELET_DEVICE_PLUGINS=/var/lib/kubelet/device-plugins
BUSYBOX_IMAGE=localhost/arl-node/busybox:fixture
RUNTIME_IMAGE=localhost/arl-node/sandbox-runtime:fixture
COREDNS_IMAGE=localhost/arl-node/coredns:fixture
# Stand-in for the stack's images.nginx (nginxinc/nginx-unprivileged): Debian's nginx from this
# suite (>= 1.27.3 for the env router's `server ... resolve`; bookworm's 1.22 lacks it).
NGINX_IMAGE=localhost/arl-node/nginx:fixture
NGINX_SUITE=forky
# An OpenEnv env server: the echo env `openenv init` generates from openenv 0.10.0's own template.
OPENENV_IMAGE=localhost/arl-node/openenv-echo:fixture
OPENENV_VERSION=0.10.0
# A STAND-IN for the stack's images.trainer (black box): test/node/trainer-standin/.
TRAINER_STANDIN_IMAGE=localhost/arl-node/trainer-standin:fixture
CTR_BIN="$NODE_DIR/containerd/usr/bin"
# image_name_of ARCHIVE / image_ref_by_digest ARCHIVE: an images.sh archive's name
# (localhost/arl-node/<name>:fixture) and its digest reference (localhost/arl-node/<name>@sha256:...).
image_index() { tar -xOf "$1" index.json; }
image_name_of() { image_index "$1" | sed -n 's/.*"io.containerd.image.name":"\([^"]*\)".*/\1/p'; }
image_ref_by_digest() {
  local name digest
  name="$(image_name_of "$1")"
  digest="$(image_index "$1" | sed -n 's/.*"manifests":\[{[^}]*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p')"
  printf '%s@%s\n' "${name%:*}" "$digest"
}
log() { printf '[node %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
in_ns() { ip netns exec "$NETNS" "$@"; }
kc() { ip netns exec "$NETNS" "$K8S_CACHE/bin/kubectl" --kubeconfig "$W/kubeconfig" "$@"; }
ctr_() { "$CTR_BIN/ctr" --address "$W/containerd/containerd.sock" -n k8s.io "$@"; }
# The host's (not the netns's) filter/nat rules, counters dropped: compared before and after.
host_iptables() { { iptables-save; ipset list -n; } 2>/dev/null | sed '/^#/d; s/\[[0-9:]*\]//' | sha256sum | cut -c1-16; }
# secs T0: seconds since T0 (a `date +%s.%N` value), one decimal.
secs() { awk -v t0="$1" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }'; }
mark() { local s; s=$(secs "$T0"); printf '%s %s\n' "$s" "$1" >> "$W/timeline"; log "+${s}s $1"; }
# scaled N: N (seconds or tries) stretched by the tests' wait factor (AGENT_RL_TEST_TIME_SCALE, set
# by test/helpers/waits.ts; 1 when unset), rounded up: a busy machine slows what these loops wait on.
scaled() { awk -v n="$1" -v f="${AGENT_RL_TEST_TIME_SCALE:-1}" 'BEGIN { x = n * f; printf "%d\n", (x == int(x)) ? x : int(x) + 1 }'; }
