#!/usr/bin/env bash
# Builds the agent-sandbox controller test fixture (see README.md next to this file):
#   bin/agent-sandbox-controller   sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller v1.0.1
# into ${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra/sandbox-controller-v1.0.1-<go.sum hash>/.
#
# Contract: logs go to stderr; the LAST line of stdout is the output directory
# (also when it was already complete). Idempotent: exits at once when that
# directory is complete. Needs only Go and the Go module proxy. FORCE=1
# rebuilds; AGENT_RL_SANDBOX_CONTROLLER_CACHE_DIR sets the output directory.
set -euo pipefail

AGENT_SANDBOX_VERSION=v1.0.1

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra"
sum_hash="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)"
out="${AGENT_RL_SANDBOX_CONTROLLER_CACHE_DIR:-$cache_root/sandbox-controller-$AGENT_SANDBOX_VERSION-$sum_hash}"
stamp_content="agent-sandbox=$AGENT_SANDBOX_VERSION go.mod+go.sum=$sum_hash"

log() { printf '[sandbox-controller/build] %s\n' "$*" >&2; }

up_to_date() {
  [[ -f "$out/.complete" && "$(cat "$out/.complete")" == "$stamp_content" ]] &&
    [[ -x "$out/bin/agent-sandbox-controller" ]]
}
if [[ "${FORCE:-0}" != 1 ]] && up_to_date; then log "up to date: $out"; echo "$out"; exit 0; fi

mkdir -p "$cache_root" "$(dirname "$out")"
exec 9>"$cache_root/.build-sandbox-controller.lock"
flock 9
if [[ "${FORCE:-0}" != 1 ]] && up_to_date; then
  log "up to date: $out (built by a concurrent run)"; echo "$out"; exit 0
fi

command -v go >/dev/null || { log "ERROR: go is not installed (needed to build agent-sandbox-controller)"; exit 1; }

start=$(date +%s)
tmp="$(mktemp -d "$cache_root/.build-sandbox-controller.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
mkdir -p "$tmp/bin"

cd "$here"
# -dwarf=false: as test/apiserver/build.sh (the same flags, so shared packages are compiled once).
export GOFLAGS="-mod=readonly -buildvcs=false -gcflags=all=-dwarf=false"
# GC only near a 3 GiB soft limit, as test/apiserver/build.sh (less compile CPU, the same programs).
export GOGC=off GOMEMLIMIT=3GiB
export CGO_ENABLED=0

# Version, commit and date as the release's Makefile embeds them, taken from
# the module's .info file (the tag's commit and time), so `--version` is right
# and the link step stays cacheable.
info_file="$(go mod download -json sigs.k8s.io/agent-sandbox | sed -n 's/.*"Info": "\(.*\)",*$/\1/p')"
git_sha="$(sed -n 's/.*"Hash":"\([0-9a-f]\{7\}\)[^"]*".*/\1/p' "$info_file" 2>/dev/null || true)"
build_date="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info_file" 2>/dev/null || true)"
pkg=sigs.k8s.io/agent-sandbox/internal/version
ldflags="-s -w -X $pkg.gitVersion=$AGENT_SANDBOX_VERSION -X $pkg.gitSHA=${git_sha:-unknown}"
ldflags+=" -X $pkg.buildDate=${build_date:-1970-01-01T00:00:00Z}"

log "go build sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
t0=$(date +%s)
cpu="$( { TIMEFORMAT='%U %S'; time (go build -trimpath -ldflags="$ldflags" -o "$tmp/bin/agent-sandbox-controller" \
  sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller >&3 2>&4); } 3>&1 4>&2 2>&1 )" ||
  { log "ERROR: go build sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller failed"; exit 1; }
cpu="$(awk '{printf "%d", $1 + $2}' <<<"${cpu##*$'\n'}")"
log "built agent-sandbox-controller in $(( $(date +%s) - t0 ))s (${cpu} CPU-seconds)"
"$tmp/bin/agent-sandbox-controller" --version >&2

printf '%s' "$stamp_content" > "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
log "done in $(( $(date +%s) - start ))s: $out"
echo "$out"
