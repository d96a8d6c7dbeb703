#!/usr/bin/env bash
# Builds the real-engine test fixture (see README.md next to this file):
#   bin/pulumi                      Pulumi CLI v3.274.1 (github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
#   bin/pulumi-resource-kubernetes  Kubernetes provider, plugin version 4.34.2 (own main, cli/../kubernetes)
#   bin/pulumi-resource-random      random provider bridged from hashicorp/terraform-provider-random,
#                                   plugin version 4.21.2 (own glue, ./random)
#   bin/kwok                        kwok v0.8.0 (simulated nodes and pods)
#   bin/kube-controller-manager, bin/kube-scheduler   k8s.io/kubernetes v1.36.3 (like test/apiserver)
# into ${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra/engine-<stamp hash>/.
#
# Contract: logs go to stderr; the LAST line of stdout is the output directory
# (also when it was already complete). Idempotent: exits at once when that
# directory is complete. Needs only Go (>= the go lines of the go.mod files
# here) and the Go module proxy. FORCE=1 rebuilds; AGENT_RL_ENGINE_CACHE_DIR
# sets the output directory.
set -euo pipefail

PULUMI_VERSION=v3.274.1                  # github.com/pulumi/pulumi/pkg/v3
K8S_PROVIDER_VERSION=4.34.2              # what @pulumi/kubernetes 4.34.2 asks for
K8S_PROVIDER_MODULE=v4.0.0-20260115033456-f47bc2d6f199
RANDOM_PROVIDER_VERSION=4.21.2           # what @pulumi/random 4.21.2 asks for
BRIDGE_VERSION=v3.120.0
TF_RANDOM_MODULE=v1.3.2-0.20260824155315-e1092b0cfc07
KWOK_VERSION=v0.8.0
K8S_VERSION=v1.36.3

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra"

log() { printf '[engine/build] %s\n' "$*" >&2; }

# The stamp records everything that goes into the directory: versions, each
# wrapper module's go.mod/go.sum and the glue sources. Any change gives a new
# directory name (older engine-* directories are left alone: another checkout may
# still use them; delete them by hand).
hash_files() { cat "$@" | sha256sum | cut -c1-16; }
stamp_content="pulumi=$PULUMI_VERSION kubernetes=$K8S_PROVIDER_VERSION($K8S_PROVIDER_MODULE)"
stamp_content+=" random=$RANDOM_PROVIDER_VERSION(bridge $BRIDGE_VERSION, tf $TF_RANDOM_MODULE)"
stamp_content+=" kwok=$KWOK_VERSION k8s=$K8S_VERSION"
stamp_content+=" sources=$(cd "$here" && hash_files setversion.go */go.mod */go.sum kubernetes/main.go \
  random/info.go random/cmd/*/main.go)"
stamp_hash="$(printf '%s' "$stamp_content" | sha256sum | cut -c1-12)"
out="${AGENT_RL_ENGINE_CACHE_DIR:-$cache_root/engine-$stamp_hash}"
binaries=(pulumi pulumi-resource-kubernetes pulumi-resource-random kwok kube-controller-manager kube-scheduler)

up_to_date() {
  [[ -f "$out/.complete" && "$(cat "$out/.complete")" == "$stamp_content" ]] || return 1
  local b
  for b in "${binaries[@]}"; do [[ -x "$out/bin/$b" ]] || return 1; done
}
if [[ "${FORCE:-0}" != 1 ]] && up_to_date; then log "up to date: $out"; echo "$out"; exit 0; fi

# Serialise concurrent runs (e.g. two test files starting the fixture at once).
mkdir -p "$cache_root" "$(dirname "$out")"
exec 9>"$cache_root/.build-engine.lock"
flock 9
if [[ "${FORCE:-0}" != 1 ]] && up_to_date; then
  log "up to date: $out (built by a concurrent run)"; echo "$out"; exit 0
fi

command -v go >/dev/null || { log "ERROR: go is not installed (needed to build the engine fixture)"; exit 1; }

start=$(date +%s)
tmp="$(mktemp -d "$cache_root/.build-engine.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
mkdir -p "$tmp/bin" "$tmp/src" "$tmp/tools"

# -mod=readonly: go.mod/go.sum in the repo are authoritative and must be complete.
# -dwarf=false: as test/apiserver/build.sh (the same flags, so shared packages are compiled once).
export GOFLAGS="-mod=readonly -buildvcs=false -gcflags=all=-dwarf=false"
# GC only near a 3 GiB soft limit, as test/apiserver/build.sh (less compile CPU, the same programs).
export GOGC=off GOMEMLIMIT=3GiB
export CGO_ENABLED=0
timings=()

build() { # <module dir> <output path> <package> <ldflags>
  local t0=$(date +%s) cpu
  log "go build $3 (in $1)"
  # CPU seconds (user+sys of go and its compilers) as well as wall time: on a
  # shared machine the wall time says more about the neighbours than the build.
  cpu="$( { TIMEFORMAT='%U %S'; time (cd "$1" && go build -trimpath -ldflags="$4" -o "$2" "$3" >&3 2>&4); } 3>&1 4>&2 2>&1 )" ||
    { log "ERROR: go build $3 failed"; return 1; }
  cpu="$(awk '{printf "%d", $1 + $2}' <<<"${cpu##*$'\n'}")"
  local dt=$(( $(date +%s) - t0 ))
  timings+=("$(basename "$2")=${dt}s")
  log "built $(basename "$2") in ${dt}s (${cpu} CPU-seconds)"
}
module_dir() { # <module dir> <module path>: the module's directory in the module cache
  local dir
  # `go list -m` reports .Dir only for modules already in the module cache.
  (cd "$1" && go mod download "$2") || { log "ERROR: go mod download $2 failed (in $1)"; return 1; }
  dir="$(cd "$1" && go list -m -f '{{if .Replace}}{{.Replace.Dir}}{{else}}{{.Dir}}{{end}}' "$2")"
  [[ -n "$dir" && -d "$dir" ]] || { log "ERROR: no module cache dir for $2 (in $1)"; return 1; }
  printf '%s' "$dir"
}

# 1. Pulumi CLI. version.Version is what `pulumi version` prints and what the
#    engine reports to plugins.
build "$here/cli" "$tmp/bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
  "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION"

# 2. Kubernetes provider: the wrapper's main embeds the provider's schema and
#    terraform mapping, which the module zip carries under
#    cmd/pulumi-resource-kubernetes/ (see kubernetes/main.go). Built from a
#    temp copy so the generated files never land in the repo.
cp -R "$here/kubernetes" "$tmp/src/kubernetes"
k8s_provider_dir="$(module_dir "$tmp/src/kubernetes" github.com/pulumi/pulumi-kubernetes/provider/v4)"
(cd "$tmp/src/kubernetes" &&
  go run "$here/setversion.go" "$k8s_provider_dir/cmd/pulumi-resource-kubernetes/schema.json" \
    schema-embed.json "$K8S_PROVIDER_VERSION" &&
  install -m 0644 "$k8s_provider_dir/cmd/pulumi-resource-kubernetes/terraform-mapping.json" \
    terraform-mapping-embed.json)
build "$tmp/src/kubernetes" "$tmp/bin/pulumi-resource-kubernetes" . \
  "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$K8S_PROVIDER_VERSION"

# 3. random provider: build pulumi-tfgen-random, let it write schema.json and
#    bridge-metadata.json (docs from the upstream module's docs/, no example
#    conversion), then build the provider with both embedded.
cp -R "$here/random" "$tmp/src/random"
random_ldflags="-s -w -X main.version=$RANDOM_PROVIDER_VERSION"
build "$tmp/src/random" "$tmp/tools/pulumi-tfgen-random" ./cmd/pulumi-tfgen-random "$random_ldflags"
tf_random_dir="$(module_dir "$tmp/src/random" github.com/terraform-providers/terraform-provider-random)"
t0=$(date +%s)
mkdir -p "$tmp/tfgen"
# tfgen is chatty (doc-conversion warnings): its output goes to a file, shown on failure.
if ! (cd "$tmp/tfgen" && RANDOM_UPSTREAM_DIR="$tf_random_dir" PULUMI_HOME="$tmp/tfgen/.pulumi" \
  "$tmp/tools/pulumi-tfgen-random" schema --skip-examples --out "$tmp/tfgen/out" >"$tmp/tfgen.log" 2>&1); then
  tail -n 50 "$tmp/tfgen.log" >&2; log "ERROR: pulumi-tfgen-random schema failed"; exit 1
fi
(cd "$tmp/src/random/cmd/pulumi-resource-random" &&
  go run "$here/setversion.go" "$tmp/tfgen/out/schema.json" schema-embed.json "$RANDOM_PROVIDER_VERSION" &&
  install -m 0644 "$tmp/tfgen/out/bridge-metadata.json" bridge-metadata.json)
timings+=("tfgen-random=$(( $(date +%s) - t0 ))s")
grep -q '"random:index/randomPassword:RandomPassword"' "$tmp/tfgen/out/schema.json" ||
  { log "ERROR: tfgen's schema has no random:index/randomPassword:RandomPassword"; exit 1; }
build "$tmp/src/random" "$tmp/bin/pulumi-resource-random" ./cmd/pulumi-resource-random "$random_ldflags"

# 4. kwok (its own default consts.Version is 0.8.0).
build "$here/kwok" "$tmp/bin/kwok" sigs.k8s.io/kwok/cmd/kwok "-s -w"

# 5. kube-controller-manager and kube-scheduler, with the version embedded as
#    test/apiserver/build.sh (and hack/lib/version.sh) does.
k8s_info_file="$(cd "$here/k8s" && go mod download -json k8s.io/kubernetes | sed -n 's/.*"Info": "\(.*\)",*$/\1/p')"
build_date="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$k8s_info_file" 2>/dev/null || true)"
build_date="${build_date:-1970-01-01T00:00:00Z}"
major="${K8S_VERSION#v}"; major="${major%%.*}"
minor="${K8S_VERSION#v*.}"; minor="${minor%%.*}"
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done
build "$here/k8s" "$tmp/bin/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager "$k8s_ldflags"
build "$here/k8s" "$tmp/bin/kube-scheduler" k8s.io/kubernetes/cmd/kube-scheduler "$k8s_ldflags"

# Smoke checks (each well under a second).
v="$("$tmp/bin/pulumi" version)"
[[ "$v" == "$PULUMI_VERSION" ]] || { log "ERROR: pulumi version printed '$v', want $PULUMI_VERSION"; exit 1; }
v="$("$tmp/bin/pulumi-resource-random" -version)"
[[ "$v" == "$RANDOM_PROVIDER_VERSION" ]] || { log "ERROR: pulumi-resource-random -version printed '$v'"; exit 1; }
# Each provider plugin serves GetSchema with its own name and version (the
# engine starts it as it would for `pulumi up`).
for plugin in kubernetes:$K8S_PROVIDER_VERSION random:$RANDOM_PROVIDER_VERSION; do
  name="${plugin%%:*}" version="${plugin#*:}"
  PULUMI_HOME="$tmp/.pulumi-home" PULUMI_SKIP_UPDATE_CHECK=1 \
    "$tmp/bin/pulumi" package get-schema "$tmp/bin/pulumi-resource-$name" > "$tmp/.schema.json"
  grep -qx "  \"name\": \"$name\"," "$tmp/.schema.json" &&
    grep -qx "  \"version\": \"$version\"," "$tmp/.schema.json" ||
    { log "ERROR: pulumi package get-schema pulumi-resource-$name did not report $name $version"; exit 1; }
  log "GetSchema ok: $name $version ($(wc -c < "$tmp/.schema.json") bytes)"
done
grep -q '"random:index/randomPassword:RandomPassword"' "$tmp/.schema.json" ||
  { log "ERROR: the random plugin's schema has no random:index/randomPassword:RandomPassword"; exit 1; }
rm -rf "$tmp/.pulumi-home" "$tmp/.schema.json"
"$tmp/bin/kwok" --version >&2
"$tmp/bin/kube-controller-manager" --version >&2
"$tmp/bin/kube-scheduler" --version >&2

rm -rf "$tmp/src" "$tmp/tools" "$tmp/tfgen" "$tmp/tfgen.log"
printf '%s' "$stamp_content" > "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
log "done in $(( $(date +%s) - start ))s (${timings[*]}): $out"
echo "$out"
