#!/usr/bin/env bash
# Builds the node spike's Go programs into $SPIKE_CACHE/bin:
#   kubelet      k8s.io/kubernetes v1.36.3 cmd/kubelet, from the wrapper module test/node/kubelet
#                (the API server fixture's version and replace lines: test/apiserver/go.mod)
#   kube-router  github.com/cloudnativelabs/kube-router/v2 v2.1.0 cmd/kube-router (the only version
#                the Go module proxy serves; its go.mod has no replace lines, so `go install @v2.1.0`)
# Prints each build's wall time. GOCACHE / GOMODCACHE are taken from the environment, so a
# measurement from empty caches is `GOCACHE=$(mktemp -d) GOMODCACHE=$(mktemp -d) bash build.sh`.
# Usage: build.sh [kubelet] [kube-router]   (default: both; a built one is skipped unless FORCE=1)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
command -v go >/dev/null || { log "ERROR: go is not installed"; exit 1; }
mkdir -p "$SPIKE_CACHE/bin"
export CGO_ENABLED=0 GOFLAGS="-buildvcs=false"
what=("$@"); (( ${#what[@]} > 0 )) || what=(kubelet kube-router)

secs() { printf '%.1f' "$(echo "$(date +%s.%N) - $1" | bc)"; }

build_kubelet() {
  local t0 info build_date major minor ldflags pkg
  t0=$(date +%s.%N)
  cd "$REPO_ROOT/test/node/kubelet"
  info="$(GOFLAGS=-mod=readonly go mod download -json k8s.io/kubernetes | sed -n 's/.*"Info": "\(.*\)",*$/\1/p')"
  build_date="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info" 2>/dev/null || true)"
  build_date="${build_date:-1970-01-01T00:00:00Z}"
  major="${K8S_VERSION#v}"; major="${major%%.*}"
  minor="${K8S_VERSION#v*.}"; minor="${minor%%.*}"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
  done
  GOFLAGS="-mod=readonly -buildvcs=false" go build -trimpath -ldflags="$ldflags" -o "$SPIKE_CACHE/bin/kubelet.new" k8s.io/kubernetes/cmd/kubelet
  mv "$SPIKE_CACHE/bin/kubelet.new" "$SPIKE_CACHE/bin/kubelet"
  "$SPIKE_CACHE/bin/kubelet" --version >&2
  log "kubelet built in $(secs "$t0")s"
}

build_kube_router() {
  local t0 tmp
  t0=$(date +%s.%N)
  tmp="$(mktemp -d)"
  (cd "$tmp" && GOBIN="$tmp" go install -trimpath \
    -ldflags="-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION")
  mv "$tmp/kube-router" "$SPIKE_CACHE/bin/kube-router"; rm -rf "$tmp"
  "$SPIKE_CACHE/bin/kube-router" --version >&2 || true
  log "kube-router built in $(secs "$t0")s"
}

for w in "${what[@]}"; do
  case "$w" in
    kubelet) [[ "${FORCE:-0}" != 1 && -x "$SPIKE_CACHE/bin/kubelet" ]] && { log "kubelet: already built"; continue; }; build_kubelet ;;
    kube-router) [[ "${FORCE:-0}" != 1 && -x "$SPIKE_CACHE/bin/kube-router" ]] && { log "kube-router: already built"; continue; }; build_kube_router ;;
    *) log "ERROR: unknown program '$w' (kubelet or kube-router)"; exit 2 ;;
  esac
done
