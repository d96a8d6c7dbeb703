#!/usr/bin/env bash
# Builds the node fixture (see README.md next to this file) into
# ${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra/node-v1.36.3/ (AGENT_RL_NODE_DIR overrides it):
#   containerd/  Debian forky's containerd 2.1.9 package, unpacked (apt-get download through a
#                private sources list and lists dir, then dpkg-deb -x: the system's apt sources,
#                dpkg database and containerd are not touched)
#   bin/kubelet, bin/kube-proxy, bin/kube-controller-manager, bin/kube-scheduler
#                           k8s.io/kubernetes v1.36.3 cmd/<name> (wrapper module kubelet/)
#   bin/coredns             CoreDNS v1.14.1 with a cluster's plugins only (wrapper module coredns/)
#   bin/kube-router-netpol  kube-router v2.1.0's NetworkPolicy controller alone (wrapper module
#                           kube-router-netpol/: no gobgp, no aws-sdk-go)
#   bin/gpu-standin         a STAND-IN device plugin advertising fake nvidia.com/gpu devices (no GPU:
#                           kubelet/gpu-standin/, a second main package in the kubelet's module)
#   images/*.oci.tar        busybox (pod sandbox + clients), CoreDNS, the sandbox runtime, the nginx
#                           stand-in (Debian forky's nginx), the OpenEnv echo env server and the trainer
#                           stand-in (images.sh)
# Needs root (debootstrap, chroot), Go, node with the project's packages installed (npm ci: the
# trainer stand-in image's facts, trainer-standin/facts.ts), the Go module proxy, PyPI, Debian's package mirror, and the
# Debian packages in env.sh's BOOKWORM_PACKAGES (`npm test` installs them as root).
#
# Contract: logs go to stderr; the LAST line of stdout is the output directory (also when it was
# already complete). Idempotent: each part has its own stamp and is rebuilt only when its inputs
# changed; the whole exits at once when the top stamp matches. FORCE=1 rebuilds everything.
# Prints each part's wall time and CPU-seconds (user+sys).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../lib/debian-suite.sh"
out="$NODE_DIR"
blog() { printf '[node/build] %s\n' "$*" >&2; }

hash_of() { cat "$@" | sha256sum | cut -c1-16; }
kubelet_stamp="k8s=$K8S_VERSION mod=$(hash_of "$NODE_HERE/kubelet/go.mod" "$NODE_HERE/kubelet/go.sum")"
# gpu-standin shares the kubelet's module (go.mod/go.sum) and has its own source.
gpu_standin_stamp="src=$(hash_of "$NODE_HERE/kubelet/go.mod" "$NODE_HERE/kubelet/go.sum" "$NODE_HERE/kubelet/gpu-standin/main.go")"
coredns_stamp="coredns=$COREDNS_VERSION src=$(hash_of "$NODE_HERE/coredns/go.mod" "$NODE_HERE/coredns/go.sum" "$NODE_HERE/coredns/main.go")"
netpol_stamp="kube-router=$KUBE_ROUTER_VERSION src=$(hash_of "$NODE_HERE/kube-router-netpol/go.mod" "$NODE_HERE/kube-router-netpol/go.sum" "$NODE_HERE/kube-router-netpol/main.go")"
containerd_stamp="$CONTAINERD_DEB_VERSION"
images_stamp="src=$(hash_of "$NODE_HERE/images.sh" "$NODE_HERE/env.sh" "$NODE_HERE/coredns/go.mod" "$NODE_HERE/coredns/main.go" "$NODE_HERE/coredns/go.sum" "$REPO_ROOT/python/agent_rl_sandbox/runtime.py" "$REPO_ROOT/python/agent_rl_sandbox/forwarder.py" "$REPO_ROOT/python/image/install-layout.sh" "$REPO_ROOT/python/requirements-test.txt" "$REPO_ROOT/python/pyproject.toml" "$REPO_ROOT"/python/agent_rl_sandbox/*.py "$REPO_ROOT/components/training/args/args_check.py" "$REPO_ROOT/components/config/programs.ts" "$REPO_ROOT/python/tests/stub_model.py" "$NODE_HERE"/trainer-standin/{trainer.py,vllm,facts.ts})"
stamp_content="$kubelet_stamp gpu-standin=$gpu_standin_stamp $coredns_stamp $netpol_stamp containerd=$containerd_stamp images=$images_stamp"

up_to_date() {
  [[ -f "$out/.complete" && "$(cat "$out/.complete")" == "$stamp_content" ]] || return 1
  local f
  for f in "${K8S_NODE_PROGRAMS[@]/#/bin/}" bin/coredns bin/gpu-standin bin/kube-router-netpol containerd/usr/bin/containerd images/busybox.oci.tar images/coredns.oci.tar images/sandbox-runtime.oci.tar images/nginx.oci.tar images/openenv-echo.oci.tar images/trainer-standin.oci.tar; do
    [[ -e "$out/$f" ]] || return 1
  done
}
if [[ "${FORCE:-0}" != 1 ]] && up_to_date; then blog "up to date: $out"; echo "$out"; exit 0; fi

[[ $EUID == 0 ]] || { blog "ERROR: run as root (debootstrap and chroot build the images)"; exit 1; }
missing=()
for p in "${BOOKWORM_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed' || missing+=("$p")
done
(( ${#missing[@]} == 0 )) || { blog "ERROR: missing Debian packages: ${missing[*]} (npm test installs them as root: apt-get install -y --no-install-recommends ${missing[*]})"; exit 1; }
command -v go >/dev/null || { blog "ERROR: go is not installed (needed to build kubelet and kube-router-netpol)"; exit 1; }

mkdir -p "$cache_root" "$out/bin"
exec 9>"$cache_root/.build-node-$K8S_VERSION.lock"
flock 9
if [[ "${FORCE:-0}" != 1 ]] && up_to_date; then blog "up to date: $out (built by a concurrent run)"; echo "$out"; exit 0; fi
start=$(date +%s)

# timed LABEL CMD...: runs CMD in a subshell (errexit on) with its stdout on stderr, and logs
# its wall time and CPU time (bash's `time`).
timed() {
  local label=$1; shift
  local TIMEFORMAT="[node/build] $label: %1R s wall, %1U s user + %1S s sys"
  time ( "$@" >&2 )
}
part_current() { [[ "${FORCE:-0}" != 1 && -f "$out/$1" && "$(cat "$out/$1")" == "$2" ]]; }

# --- containerd 2 from Debian forky -----------------------------------------------------------
fetch_containerd() {
  local apt_dir="$out/.forky-apt"
  debian_suite_download forky "$apt_dir" "containerd=$CONTAINERD_DEB_VERSION"
  rm -rf "$out/containerd.new"
  dpkg-deb -x "$apt_dir/archives/containerd_${CONTAINERD_DEB_VERSION//:/%3a}_amd64.deb" "$out/containerd.new"
  "$out/containerd.new/usr/bin/containerd" --version
  rm -rf "$out/containerd"; mv "$out/containerd.new" "$out/containerd"
  rm -rf "$apt_dir"   # the forky index (~100 MB unpacked) is only needed for the download
  printf '%s' "$containerd_stamp" > "$out/containerd/.stamp"
}
if ! part_current containerd/.stamp "$containerd_stamp"; then timed "containerd $CONTAINERD_DEB_VERSION (forky index, download, unpack)" fetch_containerd; fi

# --- Go programs -------------------------------------------------------------------------------
# -dwarf=false: as test/apiserver/build.sh (the same flags, so shared packages are compiled once).
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false -gcflags=all=-dwarf=false"
# GC only near a 3 GiB soft limit, as test/apiserver/build.sh (less compile CPU, the same programs).
export GOGC=off GOMEMLIMIT=3GiB
# build_k8s NAME: k8s.io/kubernetes cmd/NAME from the wrapper module kubelet/.
build_k8s() {
  local name=$1 info build_date major minor ldflags pkg
  cd "$NODE_HERE/kubelet"
  # The version embedded as hack/lib/version.sh does, buildDate from the module's .info (as test/apiserver/build.sh).
  info="$(go mod download -json k8s.io/kubernetes | sed -n 's/.*"Info": "\(.*\)",*$/\1/p')"
  build_date="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info" 2>/dev/null || true)"
  build_date="${build_date:-1970-01-01T00:00:00Z}"
  major="${K8S_VERSION#v}"; major="${major%%.*}"
  minor="${K8S_VERSION#v*.}"; minor="${minor%%.*}"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
  done
  go build -trimpath -ldflags="$ldflags" -o "$out/bin/$name.new" "k8s.io/kubernetes/cmd/$name"
  "$out/bin/$name.new" --version
  mv "$out/bin/$name.new" "$out/bin/$name"
  printf '%s' "$kubelet_stamp" > "$out/bin/.$name.stamp"
}
build_coredns() {
  cd "$NODE_HERE/coredns"
  go build -trimpath -ldflags="-s -w" -o "$out/bin/coredns.new" .
  "$out/bin/coredns.new" -version
  "$out/bin/coredns.new" -plugins | grep -qx '[[:space:]]*kubernetes' || { echo "coredns: no kubernetes plugin" >&2; return 1; }
  mv "$out/bin/coredns.new" "$out/bin/coredns"
  printf '%s' "$coredns_stamp" > "$out/bin/.coredns.stamp"
}
build_gpu_standin() {
  cd "$NODE_HERE/kubelet"
  go build -trimpath -ldflags="-s -w" -o "$out/bin/gpu-standin.new" ./gpu-standin
  local help
  help="$("$out/bin/gpu-standin.new" --help 2>&1)"   # not `| head -1`: SIGPIPE under pipefail
  [[ "$help" == *STAND-IN* ]] || { echo "gpu-standin --help does not name the stand-in: $help"; return 1; }
  echo "${help%%$'\n'*}"
  mv "$out/bin/gpu-standin.new" "$out/bin/gpu-standin"
  printf '%s' "$gpu_standin_stamp" > "$out/bin/.gpu-standin.stamp"
}
build_netpol() {
  cd "$NODE_HERE/kube-router-netpol"
  go build -trimpath -ldflags="-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION" \
    -o "$out/bin/kube-router-netpol.new" .
  "$out/bin/kube-router-netpol.new" --version
  mv "$out/bin/kube-router-netpol.new" "$out/bin/kube-router-netpol"
  printf '%s' "$netpol_stamp" > "$out/bin/.kube-router-netpol.stamp"
}
# Module downloads first, timed apart from the compiles.
timed "Go modules (kubelet, kube-router-netpol)" sh -c "cd '$NODE_HERE/kubelet' && go mod download && cd '$NODE_HERE/kube-router-netpol' && go mod download"
for name in "${K8S_NODE_PROGRAMS[@]}"; do
  if ! part_current "bin/.$name.stamp" "$kubelet_stamp"; then timed "go build $name $K8S_VERSION" build_k8s "$name"; fi
done
# CoreDNS's go.mod lists every module its plugins' tests need; the build fetches only what it compiles.
if ! part_current bin/.coredns.stamp "$coredns_stamp"; then timed "go build coredns $COREDNS_VERSION" build_coredns; fi
if ! part_current bin/.gpu-standin.stamp "$gpu_standin_stamp"; then timed "go build gpu-standin (stand-in device plugin)" build_gpu_standin; fi
if ! part_current bin/.kube-router-netpol.stamp "$netpol_stamp"; then timed "go build kube-router-netpol ($KUBE_ROUTER_VERSION netpol)" build_netpol; fi

# --- images ------------------------------------------------------------------------------------
if ! part_current images/.stamp "$images_stamp"; then
  timed "images (busybox, coredns, sandbox-runtime, nginx, openenv-echo, trainer-standin)" bash "$NODE_HERE/images.sh"
  printf '%s' "$images_stamp" > "$out/images/.stamp"
fi

printf '%s' "$stamp_content" > "$out/.complete"
blog "done in $(( $(date +%s) - start ))s: $out"
echo "$out"
