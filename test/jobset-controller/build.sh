#!/usr/bin/env bash
# Builds the JobSet controller test fixture (see README.md next to this file):
#   bin/jobset-controller   sigs.k8s.io/jobset v0.12.0 (its main package is the module root)
#   webhook/*.yaml          the module's webhook configurations and their kustomize patches
#                           (config/components/webhook), for a test to point at the controller
# into ${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra/jobset-controller-v0.12.0-<go.mod+go.sum hash>/.
#
# Contract: logs go to stderr; the LAST line of stdout is the output directory
# (also when it was already complete). Idempotent: exits at once when that
# directory is complete. Needs only Go and the Go module proxy. FORCE=1
# rebuilds; AGENT_RL_JOBSET_CONTROLLER_CACHE_DIR sets the output directory.
set -euo pipefail

JOBSET_VERSION=v0.12.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra"
sum_hash="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)"
out="${AGENT_RL_JOBSET_CONTROLLER_CACHE_DIR:-$cache_root/jobset-controller-$JOBSET_VERSION-$sum_hash}"
stamp_content="jobset=$JOBSET_VERSION go.mod+go.sum=$sum_hash"

log() { printf '[jobset-controller/build] %s\n' "$*" >&2; }

up_to_date() {
  [[ -f "$out/.complete" && "$(cat "$out/.complete")" == "$stamp_content" ]] &&
    [[ -x "$out/bin/jobset-controller" && -f "$out/webhook/manifests.yaml" ]]
}
if [[ "${FORCE:-0}" != 1 ]] && up_to_date; then log "up to date: $out"; echo "$out"; exit 0; fi

mkdir -p "$cache_root" "$(dirname "$out")"
exec 9>"$cache_root/.build-jobset-controller.lock"
flock 9
if [[ "${FORCE:-0}" != 1 ]] && up_to_date; then
  log "up to date: $out (built by a concurrent run)"; echo "$out"; exit 0
fi

command -v go >/dev/null || { log "ERROR: go is not installed (needed to build the JobSet controller)"; exit 1; }

start=$(date +%s)
tmp="$(mktemp -d "$cache_root/.build-jobset-controller.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
mkdir -p "$tmp/bin" "$tmp/webhook"

cd "$here"
# -dwarf=false: as test/apiserver/build.sh (the same flags, so shared packages are compiled once).
export GOFLAGS="-mod=readonly -buildvcs=false -gcflags=all=-dwarf=false"
# GC only near a 3 GiB soft limit, as test/apiserver/build.sh (less compile CPU, the same programs).
export GOGC=off GOMEMLIMIT=3GiB
export CGO_ENABLED=0

# Version and commit as the release's Makefile embeds them (LD_FLAGS, jobset
# Makefile), taken from the module's .info file (the tag's commit).
json="$(go mod download -json sigs.k8s.io/jobset)"
info_file="$(sed -n 's/.*"Info": "\(.*\)",*$/\1/p' <<<"$json")"
module_dir="$(sed -n 's/.*"Dir": "\(.*\)",*$/\1/p' <<<"$json")"
git_sha="$(sed -n 's/.*"Hash":"\([0-9a-f]*\)".*/\1/p' "$info_file" 2>/dev/null || true)"
pkg=sigs.k8s.io/jobset/pkg/version
ldflags="-s -w -X $pkg.GitVersion=$JOBSET_VERSION -X $pkg.GitCommit=${git_sha:-unknown}"

log "go build sigs.k8s.io/jobset"
t0=$(date +%s)
cpu="$( { TIMEFORMAT='%U %S'; time (go build -trimpath -ldflags="$ldflags" -o "$tmp/bin/jobset-controller" \
  sigs.k8s.io/jobset >&3 2>&4); } 3>&1 4>&2 2>&1 )" ||
  { log "ERROR: go build sigs.k8s.io/jobset failed"; exit 1; }
cpu="$(awk '{printf "%d", $1 + $2}' <<<"${cpu##*$'\n'}")"
log "built jobset-controller in $(( $(date +%s) - t0 ))s (${cpu} CPU-seconds)"

install -m 0644 "$module_dir/config/components/webhook/manifests.yaml" "$tmp/webhook/manifests.yaml"
install -m 0644 "$module_dir/config/components/webhook/patches/mutating-patch.yaml" "$tmp/webhook/mutating-patch.yaml"
install -m 0644 "$module_dir/config/components/webhook/patches/validating-patch.yaml" "$tmp/webhook/validating-patch.yaml"

printf '%s' "$stamp_content" > "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
log "done in $(( $(date +%s) - start ))s: $out"
echo "$out"
