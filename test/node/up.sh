#!/usr/bin/env bash
# Starts one real node and its control plane inside the network namespace $NETNS (the kubelet
# refuses a loopback node address, so the node gets $NODE_IP on a veth in the netns):
#   etcd + kube-apiserver (the API server fixture's binaries, bound to $NODE_IP),
#   containerd 2 (Debian forky's, its own root/state/socket/config, CRI on) + runc (bookworm's),
#   CNI bridge $BRIDGE ($POD_SUBNET, Debian's containernetworking-plugins),
#   kube-controller-manager and kube-scheduler v1.36.3 beside the API server,
#   kubelet v1.36.3 (cgroup v1, cgroupfs, cgroupRoot /$CGROUP_NAME), kube-proxy v1.36.3 (iptables),
#   gpu-standin: a STAND-IN device plugin, $GPU_STANDIN_DEVICES fake $GPU_RESOURCE devices (no GPU),
#   kube-router v2.1.0, NetworkPolicy controller only (iptables + ipset),
# then imports the fixture's images with `ctr -n k8s.io images import` and waits for the node to be
# Ready, and applies cluster DNS (cluster-dns.yaml: CoreDNS behind the kube-dns Service), waiting
# for it to be Ready. Run down.sh to remove it all (the test does, on any exit).
# UP_UNTIL=containerd stops after containerd and the image import (no kubelet, kube-proxy,
# kube-router, CoreDNS);
# UP_UNTIL=kubelet starts everything but kube-router (the kubelet, kube-proxy, the GPU stand-in, CoreDNS). UP_IMAGES
# (e.g. "sandbox-runtime") limits the imports to those images, busybox and coredns (default: every
# image images.sh builds).
# Prints a timeline (seconds since start) on stderr and writes it to $W/timeline.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
[[ $EUID == 0 ]] || { log "ERROR: run as root"; exit 1; }
UP_UNTIL="${UP_UNTIL:-node}"
needs=("$K8S_CACHE/bin/etcd" "$K8S_CACHE/bin/kube-apiserver" "$K8S_CACHE/bin/kubectl" "$NODE_DIR/bin/kube-controller-manager" "$NODE_DIR/bin/kube-scheduler")
[[ "$UP_UNTIL" == containerd ]] || needs+=("$NODE_DIR/bin/kubelet" "$NODE_DIR/bin/kube-proxy" "$NODE_DIR/bin/gpu-standin" "$NODE_DIR/images/coredns.oci.tar" "$NODE_DIR/images/sandbox-runtime.oci.tar")
[[ "$UP_UNTIL" == node ]] && needs+=("$NODE_DIR/bin/kube-router-netpol")
for f in "${needs[@]}" "$CTR_BIN/containerd" "$NODE_DIR/images/busybox.oci.tar"; do
  [[ -e "$f" ]] || { log "ERROR: missing $f (run test/node/build.sh and test/apiserver/build.sh)"; exit 1; }
done
for c in ipset runc iptables-save ip openssl envsubst; do command -v "$c" >/dev/null || { log "ERROR: $c not found (fetch.sh installs it)"; exit 1; }; done

bash "$NODE_HERE/down.sh" >/dev/null 2>&1 || bash "$NODE_HERE/down.sh"
T0=$(date +%s.%N)
mkdir -p "$W"/{pids,logs,pki,cni/net.d,cni/ipam,containerd,kubelet,pod-logs,volume-plugins,device-plugins}
# The mount point for the node's device plugin directory (env.sh); down.sh removes what was made here.
for d in "${KUBELET_DEVICE_PLUGINS%/*}" "$KUBELET_DEVICE_PLUGINS"; do
  [[ -d "$d" ]] || { mkdir "$d"; printf '%s\n' "$d" >> "$HOST_DIRS_RECORD"; }
done

# Host state to restore or compare at cleanup.
for k in vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes; do
  printf '%s %s\n' "$k" "$(sysctl -n "$k")"
done > "$W/sysctl.orig"
host_iptables > "$W/host-iptables.sha"

# Network namespace with the node's address.
ip netns add "$NETNS"
in_ns ip link set lo up
# A veth pair with both ends in the netns (this kernel has no dummy devices): carrier is up.
in_ns ip link add "$NODE_DEV" type veth peer name "${NODE_DEV}p"
in_ns ip addr add "$NODE_IP/24" dev "$NODE_DEV"
in_ns ip link set "$NODE_DEV" up
in_ns ip route add default dev "$NODE_DEV"
# The peer end in the "outside" namespace: the addresses beyond the cluster (env.sh), on-link to
# the node, with routes back to the node and its pods only.
ip netns add "$OUTSIDE_NETNS"
in_ns ip link set "${NODE_DEV}p" netns "$OUTSIDE_NETNS"
out_ns() { ip netns exec "$OUTSIDE_NETNS" "$@"; }
out_ns ip link set lo up
for a in "$INTERNET_IP" "$METADATA_IP" "$APISERVER_STANDIN_IP" "$NODE_LOCAL_DNS_IP" "$LINK_LOCAL_NEIGHBOUR_IP"; do
  out_ns ip addr add "$a/32" dev "${NODE_DEV}p"
done
out_ns ip link set "${NODE_DEV}p" up
out_ns ip route add "${NODE_IP%.*}.0/24" dev "${NODE_DEV}p"
out_ns ip route add "$POD_SUBNET" via "$NODE_IP" dev "${NODE_DEV}p"
# Every outside address serves the same ports (standin.py): a refusal measured from a pod is the
# policy's, never a port without a listener.
STANDIN_UDP_ADDRESSES="$INTERNET_IP,$METADATA_IP,$APISERVER_STANDIN_IP,$NODE_LOCAL_DNS_IP,$LINK_LOCAL_NEIGHBOUR_IP" \
  out_ns python3 -I "$NODE_HERE/standin.py" listen "$OUTSIDE_TCP_PORTS" "$OUTSIDE_UDP_PORTS" > "$W/logs/outside.log" 2>&1 &
echo $! > "$W/pids/outside.pid"
in_ns sysctl -q -w net.ipv4.ip_forward=1
in_ns sysctl -q -w net.bridge.bridge-nf-call-iptables=1
mark "netns $NETNS up ($NODE_IP on $NODE_DEV; its peer in $OUTSIDE_NETNS)"

# cgroup root for the kubelet in every v1 hierarchy (it must exist; cpuset needs cpus/mems).
for m in /sys/fs/cgroup/*/; do
  [[ "$m" == */unified/ ]] && continue
  mkdir -p "$m$CGROUP_NAME"
  if [[ -f "${m}cpuset.cpus" ]]; then cat "${m}cpuset.cpus" > "$m$CGROUP_NAME/cpuset.cpus"; cat "${m}cpuset.mems" > "$m$CGROUP_NAME/cpuset.mems"; fi
done

# Credentials: CA, API server serving certificate, service-account keys, an admin token.
p="$W/pki"
"$NODE_HERE/pki.sh" "$p" "$NODE_IP"
token="$(openssl rand -hex 32)"
printf '%s,arl-node-admin,arl-node-admin,"system:masters"\n' "$token" > "$p/tokens.csv"
chmod 600 "$p"/*.key "$p/tokens.csv"
cat > "$W/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: node, cluster: {server: "https://$NODE_IP:$API_PORT", certificate-authority: "$p/ca.crt"}}]
users: [{name: admin, user: {token: "$token"}}]
contexts: [{name: node, context: {cluster: node, user: admin}}]
current-context: node
EOF
chmod 600 "$W/kubeconfig"

# containerd: a second instance, its own root, state, socket, runc root and CNI dirs; CRI on.
cat > "$W/containerd/config.toml" <<EOF
version = 3
root = '$W/containerd/root'
state = '$W/containerd/state'
disabled_plugins = ['io.containerd.nri.v1.nri', 'io.containerd.snapshotter.v1.btrfs', 'io.containerd.snapshotter.v1.devmapper',
  'io.containerd.snapshotter.v1.blockfile', 'io.containerd.snapshotter.v1.erofs', 'io.containerd.differ.v1.erofs',
  'io.containerd.snapshotter.v1.zfs', 'io.containerd.tracing.processor.v1.otlp', 'io.containerd.internal.v1.tracing']
[grpc]
  address = '$W/containerd/containerd.sock'
[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = '$W/containerd/opt'
  [plugins.'io.containerd.image-verifier.v1.bindir']
    bin_dir = '$W/containerd/image-verifier'
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '$BUSYBOX_IMAGE'
  [plugins.'io.containerd.cri.v1.runtime']
    # Without it every pod sandbox fails here: runc cannot set oom_score_adj -998 (issue #29).
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    enable_cdi = false
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      Root = '$W/containerd/runc'
      SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['/usr/lib/cni']
      conf_dir = '$W/cni/net.d'
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
EOF

cat > "$W/cni/net.d/10-$CNI_NETWORK.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "$CNI_NETWORK", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$W/cni/ipam", "ranges": [[{"subnet": "$POD_SUBNET"}]], "routes": [{"dst": "0.0.0.0/0"}]}}
]}
EOF

# The node's own resolver (what dnsPolicy Default pods, CoreDNS among them, get): nothing answers on
# the node address, so names outside the cluster fail at once; cluster names go to CoreDNS.
printf 'nameserver %s\n' "$NODE_IP" > "$W/resolv.conf"
cat > "$W/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $W/kubeconfig}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_SUBNET
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s, udpTimeout: 0s, udpStreamTimeout: 0s}
EOF
cat > "$W/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_NAME
containerRuntimeEndpoint: unix://$W/containerd/containerd.sock
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
failSwapOn: false
resolvConf: $W/resolv.conf
clusterDNS: [$CLUSTER_DNS_IP]
clusterDomain: $CLUSTER_DOMAIN
podLogsDir: $W/pod-logs
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%, imagefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
protectKernelDefaults: false
fileCheckFrequency: 5s
syncFrequency: 10s
nodeStatusUpdateFrequency: 5s
EOF

# All daemons start in one new mount namespace (slave of the host's: the kubelet's volume mounts
# and containerd's rootfs mounts must see each other, and all of them go when the processes do),
# joined to the node's network namespace with nsenter. Not `ip netns exec`: it remounts /sys for
# the netns, which hides /sys/fs/cgroup (runc: "no cgroup mount found in mountinfo").
unshare --mount --propagation slave nsenter --net="/run/netns/$NETNS" \
  env W="$W" T0="$T0" UP_UNTIL="$UP_UNTIL" bash "$NODE_HERE/node-inner.sh" > "$W/logs/node-inner.log" 2>&1 &
inner=$!
for _ in $(seq 1 "$(scaled 1800)"); do [[ -f "$W/inner.done" ]] && break; kill -0 "$inner" 2>/dev/null || break; sleep 0.25; done
cat "$W/logs/node-inner.log" >&2
[[ "$(cat "$W/inner.done" 2>/dev/null)" == ok ]] || { log "ERROR: the node's daemons did not all come up (above)"; exit 1; }
ctr_ version >/dev/null

# UP_IMAGES: the images to import besides busybox (the pause image) and coredns (cluster DNS), always imported; default all.
imports=(busybox coredns)
for img in ${UP_IMAGES:-sandbox-runtime nginx openenv-echo trainer-standin}; do [[ "$img" == busybox || "$img" == coredns ]] || imports+=("$img"); done
for img in "${imports[@]}"; do
  [[ -f "$NODE_DIR/images/$img.oci.tar" ]] || { log "ERROR: missing $NODE_DIR/images/$img.oci.tar (run test/node/build.sh)"; exit 1; }
  t0=$(date +%s.%N)
  # Once (of about ten runs) the import's stream was reset by containerd ("connection reset by
  # peer"): one retry while containerd is alive, else its log.
  if ! ctr_ images import "$NODE_DIR/images/$img.oci.tar" >&2; then
    tail -40 "$W/logs/containerd.log" >&2
    kill -0 "$(cat "$W/pids/containerd.pid")" 2>/dev/null && ctr_ version >/dev/null || { log "ERROR: containerd exited during the import of $img (its log above)"; exit 1; }
    log "ctr images import $img failed with containerd alive (its log above): retrying once"
    ctr_ images import "$NODE_DIR/images/$img.oci.tar" >&2 || { log "ERROR: ctr images import $img failed twice"; exit 1; }
  fi
  # Also under its digest reference (<repository>@sha256:<manifest digest>), as an image pulled by
  # digest is known: a stack pinned by digest (imagePullPolicy IfNotPresent) runs it, pulling nothing.
  ref="$(image_ref_by_digest "$NODE_DIR/images/$img.oci.tar")"
  ctr_ images tag --force "$(image_name_of "$NODE_DIR/images/$img.oci.tar")" "$ref" >/dev/null
  mark "imported $img image ($(secs "$t0")s) as $ref"
done
[[ "$UP_UNTIL" == containerd ]] && exit 0

for _ in $(seq 1 "$(scaled 240)"); do
  [[ "$(kc get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]] && break
  sleep 0.5
done
[[ "$(kc get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]] || {
  kc get node -o wide >&2 || true; tail -30 "$W/logs/kubelet.log" >&2; log "ERROR: node $NODE_NAME not Ready"; exit 1; }
mark "node $NODE_NAME Ready"

# Cluster DNS (cluster-dns.yaml): CoreDNS's pod Ready behind its /ready probe, the kube-dns
# Service's address routed to it by kube-proxy.
CLUSTER_DOMAIN="$CLUSTER_DOMAIN" CLUSTER_DNS_IP="$CLUSTER_DNS_IP" COREDNS_IMAGE="$COREDNS_IMAGE" \
  envsubst '${CLUSTER_DOMAIN} ${CLUSTER_DNS_IP} ${COREDNS_IMAGE}' < "$NODE_HERE/cluster-dns.yaml" | kc apply -f - >&2
kc -n kube-system rollout status deployment/coredns --timeout="$(scaled 120)s" >&2 || {
  kc -n kube-system get pods -o wide >&2 || true; kc -n kube-system describe pods -l k8s-app=kube-dns | tail -30 >&2 || true
  log "ERROR: CoreDNS not Ready"; exit 1; }
mark "cluster DNS Ready ($CLUSTER_DNS_IP)"
