#!/usr/bin/env bash
# Run by up.sh in the node's network namespace and a mount namespace of its own: starts the daemons
# in order, each in its own session (pid files in $W/pids, logs in $W/logs), waiting for each to be
# ready, then writes $W/inner.done ("ok" or "failed") and stays as their parent (exec sleep,
# $W/pids/keeper.pid) until down.sh ends it: the daemons are never orphans re-parented to init,
# which another test runner's leftover check would take for its own and kill (scripts/test/run.ts).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
echo $$ > "$W/pids/keeper.pid"
keep() { printf '%s' "$1" > "$W/inner.done"; exec sleep 2147483647; }
trap 'keep failed' ERR
export PATH="$CTR_BIN:$PATH"   # containerd finds its shim (containerd-shim-runc-v2 2.1.9) on PATH
start() { # NAME CMD...
  local name=$1; shift
  setsid "$@" > "$W/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$W/pids/$name.pid"
}
wait_for() { # NAME TIMEOUT_S CHECK... (TIMEOUT_S scaled: env.sh)
  local name=$1 timeout i; timeout=$(scaled "$2"); shift 2
  for ((i = 0; i < timeout * 4; i++)); do
    "$@" >/dev/null 2>&1 && { mark "$name ready"; return 0; }
    kill -0 "$(cat "$W/pids/$name.pid")" 2>/dev/null || { tail -30 "$W/logs/$name.log" >&2; log "ERROR: $name exited"; return 1; }
    sleep 0.25
  done
  tail -30 "$W/logs/$name.log" >&2; log "ERROR: $name not ready after ${timeout}s"; return 1
}
p="$W/pki"

start etcd "$K8S_CACHE/bin/etcd" --name=default --data-dir="$W/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="default=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state=new --unsafe-no-fsync --log-level=warn
wait_for etcd 60 sh -c "wget -qO- http://127.0.0.1:$ETCD_CLIENT_PORT/health 2>/dev/null || curl -sf http://127.0.0.1:$ETCD_CLIENT_PORT/health"

start kube-apiserver "$K8S_CACHE/bin/kube-apiserver" --bind-address="$NODE_IP" --advertise-address="$NODE_IP" \
  --secure-port="$API_PORT" --cert-dir="$W/apiserver-certs" --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" \
  --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT" --token-auth-file="$p/tokens.csv" --authorization-mode=RBAC \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local --service-account-key-file="$p/sa.pub" \
  --service-account-signing-key-file="$p/sa.key" --service-cluster-ip-range="$SERVICE_RANGE" --allow-privileged=true \
  --kubelet-preferred-address-types=InternalIP --profiling=false --v=1
wait_for kube-apiserver 120 "$K8S_CACHE/bin/kubectl" --kubeconfig "$W/kubeconfig" get --raw /readyz

# The controllers a cluster runs beside its API server: ServiceAccounts and their root CA
# ConfigMap, Deployment/StatefulSet/ReplicaSet pods, EndpointSlices for Services, namespace
# deletion, garbage collection; and the scheduler. Neither serves HTTPS (--secure-port=0).
start kube-controller-manager "$NODE_DIR/bin/kube-controller-manager" --kubeconfig="$W/kubeconfig" \
  --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" --use-service-account-credentials=false \
  --leader-elect=false --secure-port=0 --controllers='*' --concurrent-deployment-syncs=2 --concurrent-statefulset-syncs=2 \
  --node-monitor-grace-period=60s --profiling=false --v=1
start kube-scheduler "$NODE_DIR/bin/kube-scheduler" --kubeconfig="$W/kubeconfig" --leader-elect=false --secure-port=0 \
  --profiling=false --v=1
wait_for kube-controller-manager 60 sh -c "'$K8S_CACHE/bin/kubectl' --kubeconfig '$W/kubeconfig' -n default get serviceaccount default"

start containerd "$CTR_BIN/containerd" --config "$W/containerd/config.toml"
wait_for containerd 60 "$CTR_BIN/ctr" --address "$W/containerd/containerd.sock" version
[[ "${UP_UNTIL:-node}" == containerd ]] && keep ok

# The kubelet's fixed device plugin directory, the node's own (this mount namespace only).
mount --bind "$W/device-plugins" "$KUBELET_DEVICE_PLUGINS"
start kubelet "$NODE_DIR/bin/kubelet" --config="$W/kubelet.yaml" --kubeconfig="$W/kubeconfig" \
  --root-dir="$W/kubelet" --cert-dir="$W/kubelet/pki" --volume-plugin-dir="$W/volume-plugins" \
  --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=2
wait_for kubelet 120 "$K8S_CACHE/bin/kubectl" --kubeconfig "$W/kubeconfig" get node "$NODE_NAME"

# kube-proxy (iptables mode) in the node's network namespace, as a DaemonSet with hostNetwork would
# run it: Service addresses ($SERVICE_RANGE) reach their pods. Conntrack limits are left as they
# are (maxPerCore 0, timeouts 0): nf_conntrack_max is not settable from a network namespace.
start kube-proxy "$NODE_DIR/bin/kube-proxy" --config="$W/kube-proxy.yaml" --v=1
wait_for kube-proxy 60 sh -c 'iptables-save -t nat | grep -q "^-A KUBE-SERVICES .*default/kubernetes:https"'

# STAND-IN device plugin: fake $GPU_RESOURCE devices (no GPU), registered on the kubelet's socket.
start gpu-standin "$NODE_DIR/bin/gpu-standin" --devices="$GPU_STANDIN_DEVICES" --resource="$GPU_RESOURCE" \
  --plugin-dir="$W/device-plugins"
# Ready when the node's allocatable shows them (the kubelet reports it with the node status).
node_gpus() {
  [[ "$("$K8S_CACHE/bin/kubectl" --kubeconfig "$W/kubeconfig" get node "$NODE_NAME" \
    -o jsonpath="{.status.allocatable.${GPU_RESOURCE//./\\.}}")" == "$GPU_STANDIN_DEVICES" ]]
}
wait_for gpu-standin 60 node_gpus

[[ "${UP_UNTIL:-node}" == kubelet ]] && keep ok

start kube-router "$NODE_DIR/bin/kube-router-netpol" --kubeconfig="$W/kubeconfig" --hostname-override="$NODE_NAME" \
  --run-firewall=true --run-router=false --run-service-proxy=false --enable-cni=false \
  --enable-ipv4=true --enable-ipv6=false --service-cluster-ip-range="$SERVICE_RANGE" \
  --metrics-port=0 --health-port=20244 --v=2
wait_for kube-router 60 sh -c 'iptables-save -t filter | grep -q KUBE-ROUTER-FORWARD'
keep ok
