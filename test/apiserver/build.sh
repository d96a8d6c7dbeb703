#!/usr/bin/env bash
# Builds the Kubernetes API server test fixture (see README.md next to this file):
#   bin/kube-apiserver, bin/kubectl  (k8s.io/kubernetes v1.36.3)
#   bin/etcd                         (go.etcd.io/etcd/server/v3 v3.6.8)
#   crds/*.yaml                      (agent-sandbox, Gateway API, cert-manager and JobSet CRDs, from the Go module cache;
#                                     the Prometheus Operator's PodMonitor, ServiceMonitor and PrometheusRule CRDs,
#                                     generated from its pkg/apis/monitoring module by controller-gen, as its Makefile does)
#   crds-kueue/*.yaml                (Kueue's CRDs, from its Go module: applied only by the test of the queues the
#                                     multi-node guide shows, test/cluster/cluster-stack.test.ts, not at every start)
# into ${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra/k8s-v1.36.3/.
#
# Idempotent: exits at once when the cache directory is complete. Only needs
# Go (>= the go line in go.mod) and the Go module proxy. Set
# AGENT_RL_K8S_CACHE_DIR to use another directory; set FORCE=1 to rebuild.
set -euo pipefail

K8S_VERSION=v1.36.3
ETCD_VERSION=v3.6.8
AGENT_SANDBOX_VERSION=v1.0.1
# The release a cluster stack upgrades from (test/stack/engine-cluster-stack.test.ts): its CRDs go to
# crds-previous/, which no test installs wholesale (crds/ is applied as one directory).
AGENT_SANDBOX_PREVIOUS_VERSION=v0.5.6
GATEWAY_API_VERSION=v1.6.3
CERT_MANAGER_VERSION=v1.21.2
JOBSET_VERSION=v0.12.0
# Kueue (the cluster stack's kueue.install, components/config/cluster-schema.ts KUEUE_RELEASE): its CRDs go to
# crds-kueue/, which only the guide's queues test applies (they are large; no plan holds a Kueue object).
KUEUE_VERSION=v0.17.0
# github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring (the Go types the CRDs are
# generated from; the proxy serves this module, not the repository's root module), and the
# controller-gen release prometheus-operator's own CRDs of that line are generated with.
PROMETHEUS_OPERATOR_VERSION=v0.95.2
CONTROLLER_TOOLS_VERSION=v0.21.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra"
out="${AGENT_RL_K8S_CACHE_DIR:-$cache_root/k8s-$K8S_VERSION}"
# Two stamps: .complete for the binaries (a change of a version or of go.sum rebuilds them),
# crds/.complete for the CRDs (a change of a CRD version only refreshes crds/, in seconds).
# The binaries do not depend on agent-sandbox: its version is in the CRD stamp only. A binaries
# stamp written before that (with an agent-sandbox= word) is read without that word, so a
# checkout on either side of the change reuses the same kube-apiserver build.
go_sum="go.sum=$(sha256sum "$here/go.sum" | cut -c1-16)"
stamp_content="k8s=$K8S_VERSION etcd=$ETCD_VERSION gateway-api=$GATEWAY_API_VERSION $go_sum"
crd_stamp="agent-sandbox=$AGENT_SANDBOX_VERSION agent-sandbox-previous=$AGENT_SANDBOX_PREVIOUS_VERSION gateway-api=$GATEWAY_API_VERSION cert-manager=$CERT_MANAGER_VERSION jobset=$JOBSET_VERSION kueue=$KUEUE_VERSION prometheus-operator=$PROMETHEUS_OPERATOR_VERSION controller-tools=$CONTROLLER_TOOLS_VERSION"

log() { printf '[apiserver/build] %s\n' "$*" >&2; }

bins_up_to_date() {
  [[ -f "$out/.complete" && "$(sed 's/ agent-sandbox=[^ ]*//' "$out/.complete")" == "$stamp_content" ]] || return 1
  local f
  for f in bin/kube-apiserver bin/kubectl bin/etcd; do [[ -x "$out/$f" ]] || return 1; done
}
crds_up_to_date() {
  [[ -f "$out/crds/.complete" && "$(cat "$out/crds/.complete")" == "$crd_stamp" ]] && compgen -G "$out/crds/*.yaml" >/dev/null &&
    compgen -G "$out/crds-previous/agent-sandbox-$AGENT_SANDBOX_PREVIOUS_VERSION.*.yaml" >/dev/null &&
    compgen -G "$out/crds-kueue/kueue-$KUEUE_VERSION.*.yaml" >/dev/null
}
up_to_date() { bins_up_to_date && crds_up_to_date; }
if [[ "${FORCE:-0}" != 1 ]] && up_to_date; then log "up to date: $out"; exit 0; fi

# Serialise concurrent runs (e.g. two test files starting the fixture at once).
mkdir -p "$cache_root" "$(dirname "$out")"
exec 9>"$(dirname "$out")/.build-k8s-$K8S_VERSION.lock"
flock 9
if [[ "${FORCE:-0}" != 1 ]] && up_to_date; then log "up to date: $out (built by a concurrent run)"; exit 0; fi

command -v go >/dev/null || { log "ERROR: go is not installed (needed to build kube-apiserver/etcd/kubectl)"; exit 1; }

# CRDs come from the module cache (checksummed through sum.golang.org), never
# from files committed to this repo. Downloaded outside this module so go.sum
# is not touched.
module_dir() { # <module@version>
  local json dir
  json="$(cd "$(dirname "$out")" && GOFLAGS= go mod download -json "$1")" || { log "ERROR: go mod download $1 failed: $json"; return 1; }
  dir="$(printf '%s' "$json" | sed -n 's/.*"Dir": "\(.*\)",*$/\1/p' | head -1)"
  [[ -n "$dir" && -d "$dir" ]] || { log "ERROR: no Dir for $1: $json"; return 1; }
  printf '%s' "$dir"
}
# prometheus-operator's Makefile (generate-crds): cd pkg/apis/monitoring && controller-gen
# crd:crdVersions=v1 paths=./v1/. ... output:crd:dir=example/prometheus-operator-crd/. Here over a
# writable copy of the module (the module cache is read-only), v1 only: PodMonitor, ServiceMonitor,
# PrometheusRule (and the v1 kinds beside them, not installed).
prometheus_operator_crds() { # <dir to fill>
  local into="$1" src work t0=$(date +%s)
  src="$(module_dir "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring@$PROMETHEUS_OPERATOR_VERSION")"
  work="$(mktemp -d "$(dirname "$out")/.prometheus-operator-crds.XXXXXX")"
  cp -r "$src" "$work/monitoring" && chmod -R u+w "$work/monitoring"
  GOFLAGS= GOBIN="$work/bin" go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION" \
    || { log "ERROR: go install controller-gen@$CONTROLLER_TOOLS_VERSION failed"; rm -rf "$work"; return 1; }
  (cd "$work/monitoring" && GOFLAGS=-mod=mod "$work/bin/controller-gen" crd:crdVersions=v1 paths=./v1/. output:crd:dir="$work/out") \
    || { log "ERROR: controller-gen over pkg/apis/monitoring@$PROMETHEUS_OPERATOR_VERSION failed"; rm -rf "$work"; return 1; }
  local kind
  for kind in podmonitors servicemonitors prometheusrules; do
    [[ -f "$work/out/monitoring.coreos.com_$kind.yaml" ]] || { log "ERROR: controller-gen made no $kind CRD"; rm -rf "$work"; return 1; }
    install -m 0644 "$work/out/monitoring.coreos.com_$kind.yaml" "$into/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION.monitoring.coreos.com_$kind.yaml"
  done
  rm -rf "$work"
  log "Prometheus Operator CRDs generated in $(( $(date +%s) - t0 ))s"
}

install_crds() { # <dir to fill>
  local into="$1" sandbox_dir gateway_dir cert_manager_dir jobset_dir f
  sandbox_dir="$(module_dir "sigs.k8s.io/agent-sandbox@$AGENT_SANDBOX_VERSION")"
  gateway_dir="$(module_dir "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION")"
  cert_manager_dir="$(module_dir "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION")"
  jobset_dir="$(module_dir "sigs.k8s.io/jobset@$JOBSET_VERSION")"
  shopt -s nullglob
  local sandbox_crds=("$sandbox_dir"/k8s/crds/*.yaml)
  local gateway_crds=("$gateway_dir"/config/crd/standard/*.yaml)
  local cert_manager_crds=("$cert_manager_dir"/deploy/crds/*.yaml)
  local jobset_crds=("$jobset_dir"/config/components/crd/bases/*.yaml)
  (( ${#sandbox_crds[@]} > 0 )) || { log "ERROR: no CRDs in $sandbox_dir/k8s/crds"; return 1; }
  (( ${#gateway_crds[@]} > 0 )) || { log "ERROR: no CRDs in $gateway_dir/config/crd/standard"; return 1; }
  (( ${#cert_manager_crds[@]} > 0 )) || { log "ERROR: no CRDs in $cert_manager_dir/deploy/crds"; return 1; }
  (( ${#jobset_crds[@]} > 0 )) || { log "ERROR: no CRDs in $jobset_dir/config/components/crd/bases"; return 1; }
  mkdir -p "$into"
  for f in "${sandbox_crds[@]}"; do install -m 0644 "$f" "$into/agent-sandbox-$AGENT_SANDBOX_VERSION.$(basename "$f")"; done
  for f in "${gateway_crds[@]}"; do install -m 0644 "$f" "$into/gateway-api-$GATEWAY_API_VERSION.$(basename "$f")"; done
  for f in "${cert_manager_crds[@]}"; do install -m 0644 "$f" "$into/cert-manager-$CERT_MANAGER_VERSION.$(basename "$f")"; done
  for f in "${jobset_crds[@]}"; do install -m 0644 "$f" "$into/jobset-$JOBSET_VERSION.$(basename "$f")"; done
  prometheus_operator_crds "$into"
  printf '%s' "$crd_stamp" > "$into/.complete"
}
install_previous_crds() { # <dir to fill>
  local into="$1" dir f
  dir="$(module_dir "sigs.k8s.io/agent-sandbox@$AGENT_SANDBOX_PREVIOUS_VERSION")"
  mkdir -p "$into"
  for f in "$dir"/k8s/crds/*.yaml; do install -m 0644 "$f" "$into/agent-sandbox-$AGENT_SANDBOX_PREVIOUS_VERSION.$(basename "$f")"; done
  compgen -G "$into/agent-sandbox-$AGENT_SANDBOX_PREVIOUS_VERSION.*.yaml" >/dev/null || { log "ERROR: no CRDs in $dir/k8s/crds"; return 1; }
}
install_kueue_crds() { # <dir to fill>
  local into="$1" dir f
  dir="$(module_dir "sigs.k8s.io/kueue@$KUEUE_VERSION")"
  mkdir -p "$into"
  for f in "$dir"/config/components/crd/bases/*.yaml; do install -m 0644 "$f" "$into/kueue-$KUEUE_VERSION.$(basename "$f")"; done
  compgen -G "$into/kueue-$KUEUE_VERSION.*.yaml" >/dev/null || { log "ERROR: no CRDs in $dir/config/components/crd/bases"; return 1; }
}

# Binaries current, CRDs not: refresh crds/ only (swapped in whole).
if [[ "${FORCE:-0}" != 1 ]] && bins_up_to_date; then
  new_crds="$(mktemp -d "$out/.crds.XXXXXX")"
  install_crds "$new_crds" || { rm -rf "$new_crds"; exit 1; }
  new_previous="$(mktemp -d "$out/.crds-previous.XXXXXX")"
  install_previous_crds "$new_previous" || { rm -rf "$new_crds" "$new_previous"; exit 1; }
  new_kueue="$(mktemp -d "$out/.crds-kueue.XXXXXX")"
  install_kueue_crds "$new_kueue" || { rm -rf "$new_crds" "$new_previous" "$new_kueue"; exit 1; }
  chmod 755 "$new_crds" "$new_previous" "$new_kueue"
  rm -rf "$out/crds-previous"; mv "$new_previous" "$out/crds-previous"
  rm -rf "$out/crds-kueue"; mv "$new_kueue" "$out/crds-kueue"
  rm -rf "$out/crds.old"; [[ -d "$out/crds" ]] && mv "$out/crds" "$out/crds.old"
  mv "$new_crds" "$out/crds"; rm -rf "$out/crds.old"
  log "CRDs refreshed: $crd_stamp"
  exit 0
fi

start=$(date +%s)
tmp="$(mktemp -d "$(dirname "$out")/.build-k8s-$K8S_VERSION.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
mkdir -p "$tmp/bin" "$tmp/crds"

cd "$here"
# -mod=readonly: go.mod/go.sum in the repo are authoritative and must be complete.
# -gcflags=all=-dwarf=false: the compiler writes no debug information, which the links (-ldflags -w)
# drop anyway: the same programs for about 5% less compile CPU (`go build std` from an empty build
# cache: 90.9 CPU-s, 95.6 without). Every fixture builds with the same flags, so the packages they
# share (same module versions) are compiled once.
export GOFLAGS="-mod=readonly -buildvcs=false -gcflags=all=-dwarf=false"
export CGO_ENABLED=0
# GOGC=off with a 3 GiB soft memory limit: the compilers collect garbage only near the limit
# instead of at every doubling of the heap. From an empty build cache, `go build
# k8s.io/apiserver/pkg/server`: 254 CPU-s against 299 with the default GOGC, and
# k8s.io/client-go/kubernetes 118 against 132 (max RSS under 1 GB); the programs are the same.
# Every fixture build sets the same.
export GOGC=off GOMEMLIMIT=3GiB

# Embed the version like hack/lib/version.sh does, so `kube-apiserver --version`
# and `kubectl version` report v1.36.3 (and the API server's /version matches).
# buildDate = the release's commit time from the module's .info file, so the
# link step stays cacheable and the binaries reproducible.
k8s_info_file="$(go mod download -json k8s.io/kubernetes | sed -n 's/.*"Info": "\(.*\)",*$/\1/p')"
build_date="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$k8s_info_file" 2>/dev/null || true)"
build_date="${build_date:-1970-01-01T00:00:00Z}"
major="${K8S_VERSION#v}"; major="${major%%.*}"
minor="${K8S_VERSION#v*.}"; minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

build() { # <output name> <package>
  local t0=$(date +%s)
  log "go build $2"
  go build -trimpath -ldflags="$ldflags" -o "$tmp/bin/$1" "$2"
  log "built $1 in $(( $(date +%s) - t0 ))s"
}
build etcd go.etcd.io/etcd/server/v3
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kubectl k8s.io/kubernetes/cmd/kubectl

install_crds "$tmp/crds"
install_previous_crds "$tmp/crds-previous"
install_kueue_crds "$tmp/crds-kueue"

"$tmp/bin/kube-apiserver" --version >&2
"$tmp/bin/etcd" --version >&2
"$tmp/bin/kubectl" version --client >&2

printf '%s' "$stamp_content" > "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
log "done in $(( $(date +%s) - start ))s: $out"
