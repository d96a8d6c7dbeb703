#!/usr/bin/env bash
# Builds the Harbor fixture: Python 3.13 (Harbor 0.25 needs >= 3.12; the trainer side's lock is
# Python 3.11) and a venv holding harbor==0.25.0 with the sandbox backend's client
# (python/requirements-harbor.txt), into
# ${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra/harbor-<stamp hash>/:
#   root/       Debian trixie's python3.13 packages and the libraries it links, unpacked (apt-get
#               download through a private sources list and lists dir, then dpkg-deb -x, as
#               test/node/build.sh fetches forky's containerd: the system's apt sources, dpkg
#               database and Python are not touched)
#   venv/       python3.13 -m venv --without-pip, pip from trixie's python3-pip-whl, then
#               python/requirements-harbor.txt
#   eval/venv/  a venv of the same python3.13 with python/requirements-harbor-eval.txt: harbor 0.26.0 without
#               openenv (its fastmcp pin excludes openenv 0.10.0's), the evaluation venv; run-tests.sh runs the
#               environment's tests in it too. Stamped on its own (eval/.complete), as agents/ is.
#   agents/mini-swe-agent/   a second venv of the same python3.13 with python/requirements-harbor-agents.txt:
#               the STAND-IN sandbox image's pre-installed mini-swe-agent (the pool's sandboxes have no
#               egress, so Harbor's install step cannot fetch it; python/tests/test_harbor_trial.py runs it
#               in the simulated pods). Stamped on its own (agents/.complete): adding or changing it
#               rebuilds only it (about 30 s wall and CPU from empty caches, ~60 MB of wheels).
#
# trixie's python3.13 needs glibc 2.38 (this Debian 12 host has 2.36): its ELF interpreter is set to
# trixie's own ld.so and its RPATH to $ORIGIN/../lib/x86_64-linux-gnu (trixie's patchelf, run by
# trixie's ld.so), so it loads trixie's libc and libraries only; nothing of the host's changes, and
# the programs it starts (bash, node, ...) are the host's own.
#
# Contract: logs go to stderr; the LAST line of stdout is the venv's python (also when it was
# already complete). Idempotent: exits at once when the output directory is complete (a stamp of the
# package versions and the requirements file). FORCE=1 rebuilds; AGENT_RL_HARBOR_CACHE_DIR sets the
# output directory. Needs apt-get, dpkg-deb, deb.debian.org and PyPI.
set -euo pipefail

# Debian trixie's packages, each at the version apt resolves today (pinned: a new point release is a
# new stamp). The interpreter, its standard library, venv and the wheels its venv bootstraps from,
# and every library the interpreter and its lib-dynload modules link (glibc included: the host's is
# older), and patchelf with its libstdc++.
TRIXIE_PACKAGES=(
  python3.13=3.13.5-2+deb13u5 python3.13-minimal=3.13.5-2+deb13u5 libpython3.13-minimal=3.13.5-2+deb13u5
  libpython3.13-stdlib=3.13.5-2+deb13u5 python3.13-venv=3.13.5-2+deb13u5 python3-pip-whl=25.1.1+dfsg-1
  python3-setuptools-whl=78.1.1-0.1 libc6=2.41-12+deb13u5 libexpat1=2.9.0-1~deb13u1 libffi8=3.4.8-2
  libssl3t64=3.5.9-1~deb13u1 libsqlite3-0=3.46.1-7+deb13u2 libbz2-1.0=1.0.8-6 liblzma5=5.8.1-1+deb13u2
  libzstd1=1.5.7+dfsg-1 zlib1g=1:1.3.dfsg+really1.3.1-1+deb13u1 libncursesw6=6.5+20250216-2
  libtinfo6=6.5+20250216-2 libreadline8t64=8.2-6 libuuid1=2.41.5-0+deb13u1 libgcc-s1=14.2.0-19
  libdb5.3t64=5.3.28+dfsg2-9 libmpdec4=4.0.1-5 patchelf=0.18.0-1.4 libstdc++6=14.2.0-19
)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
. "$here/../lib/debian-suite.sh"
reqs="$repo/python/requirements-harbor.txt"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra"
stamp_content="trixie=${TRIXIE_PACKAGES[*]} requirements=$(sha256sum "$reqs" | cut -c1-12)"
stamp_hash="$(printf '%s' "$stamp_content" | sha256sum | cut -c1-12)"
agents_reqs="$repo/python/requirements-harbor-agents.txt"
agents_stamp="requirements=$(sha256sum "$agents_reqs" | cut -c1-12)"
eval_reqs="$repo/python/requirements-harbor-eval.txt"
eval_stamp="requirements=$(sha256sum "$eval_reqs" | cut -c1-12)"
out="${AGENT_RL_HARBOR_CACHE_DIR:-$cache_root/harbor-$stamp_hash}"

log() { printf '[harbor/build] %s\n' "$*" >&2; }

up_to_date() {
  [[ -f "$out/.complete" && "$(cat "$out/.complete")" == "$stamp_content" && -x "$out/venv/bin/harbor" ]]
}
agents_up_to_date() {
  [[ -f "$out/agents/.complete" && "$(cat "$out/agents/.complete")" == "$agents_stamp" && -x "$out/agents/mini-swe-agent/bin/mini-swe-agent" ]]
}
# The stand-in image's mini-swe-agent venv (see the header), built in place beside a complete Harbor venv.
build_agents() {
  local t0 cpu venv="$out/agents/mini-swe-agent"
  t0=$(date +%s)
  rm -rf "$out/agents"
  mkdir -p "$out/agents"
  "$out/root/usr/bin/python3.13" -m venv --without-pip "$venv"
  local pip_whl
  pip_whl="$(ls "$out"/root/usr/share/python-wheels/pip-*.whl)"
  "$venv/bin/python" "$pip_whl/pip" install --quiet --disable-pip-version-check "$pip_whl" >&2
  cpu="$( { TIMEFORMAT='%U %S'; time ("$venv/bin/pip" install --quiet --disable-pip-version-check -r "$agents_reqs" >&2); } 2>&1 )" ||
    { log "ERROR: pip install -r python/requirements-harbor-agents.txt failed"; rm -rf "$out/agents"; return 1; }
  cpu="$(awk '{printf "%d", $1 + $2}' <<<"${cpu##*$'\n'}")"
  [[ -x "$venv/bin/mini-swe-agent" ]] || { log "ERROR: no mini-swe-agent in $venv"; rm -rf "$out/agents"; return 1; }
  printf '%s' "$agents_stamp" > "$out/agents/.complete"
  log "agents/mini-swe-agent (stand-in image's) in $(( $(date +%s) - t0 ))s (pip ${cpu} CPU-seconds)"
}
eval_up_to_date() {
  [[ -f "$out/eval/.complete" && "$(cat "$out/eval/.complete")" == "$eval_stamp" && -x "$out/eval/venv/bin/harbor" ]]
}
# The evaluation venv (harbor 0.26.0, no openenv: python/requirements-harbor-eval.txt says why), built in
# place beside a complete Harbor venv and stamped on its own, as the agents' venv is.
build_eval() {
  local t0 cpu venv="$out/eval/venv"
  t0=$(date +%s)
  rm -rf "$out/eval"
  mkdir -p "$out/eval"
  "$out/root/usr/bin/python3.13" -m venv --without-pip "$venv"
  local pip_whl
  pip_whl="$(ls "$out"/root/usr/share/python-wheels/pip-*.whl)"
  "$venv/bin/python" "$pip_whl/pip" install --quiet --disable-pip-version-check "$pip_whl" >&2
  cpu="$( { TIMEFORMAT='%U %S'; time ("$venv/bin/pip" install --quiet --disable-pip-version-check -r "$eval_reqs" >&2); } 2>&1 )" ||
    { log "ERROR: pip install -r python/requirements-harbor-eval.txt failed"; rm -rf "$out/eval"; return 1; }
  cpu="$(awk '{printf "%d", $1 + $2}' <<<"${cpu##*$'\n'}")"
  "$venv/bin/harbor" --version >&2
  printf '%s' "$eval_stamp" > "$out/eval/.complete"
  log "eval/venv (harbor 0.26) in $(( $(date +%s) - t0 ))s (pip ${cpu} CPU-seconds)"
}
if [[ "${FORCE:-0}" != 1 ]] && up_to_date && agents_up_to_date && eval_up_to_date; then log "up to date: $out"; echo "$out/venv/bin/python"; exit 0; fi

mkdir -p "$cache_root" "$(dirname "$out")"
exec 9>"$cache_root/.build-harbor.lock"
flock 9
if [[ "${FORCE:-0}" != 1 ]] && up_to_date; then
  agents_up_to_date || build_agents
  eval_up_to_date || build_eval
  log "up to date: $out"; echo "$out/venv/bin/python"; exit 0
fi
for c in apt-get dpkg-deb; do command -v "$c" >/dev/null || { log "ERROR: $c is not installed (a Debian machine's apt and dpkg fetch trixie's python3.13)"; exit 1; }; done

start=$(date +%s)
# Built in place (a venv's scripts name its absolute path): a partial one is removed first.
rm -rf "$out"
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT

# --- trixie's python3.13, unpacked ------------------------------------------------------------
apt_dir="$out/.trixie-apt"
t0=$(date +%s)
debian_suite_download trixie "$apt_dir" "${TRIXIE_PACKAGES[@]}" ||
  { log "ERROR: apt-get download of trixie's packages failed (a pinned version gone from the archive? update TRIXIE_PACKAGES)"; exit 1; }
root="$out/root"
mkdir -p "$root"
for deb in "$apt_dir"/archives/*.deb; do dpkg-deb -x "$deb" "$root"; done
rm -rf "$apt_dir"   # the index (~100 MB unpacked) is only needed for the download
lib="$root/usr/lib/x86_64-linux-gnu"
patchelf() { "$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$root/usr/bin/patchelf" "$@"; }
# Two calls: one call setting both gave a binary that crashed at start (patchelf 0.18).
patchelf --force-rpath --set-rpath '$ORIGIN/../lib/x86_64-linux-gnu' "$root/usr/bin/python3.13"
patchelf --set-interpreter "$lib/ld-linux-x86-64.so.2" "$root/usr/bin/python3.13"
"$root/usr/bin/python3.13" -c 'import ssl, sqlite3, ctypes, decimal, lzma, bz2, sys; print("python", sys.version.split()[0], ssl.OPENSSL_VERSION)' >&2
log "trixie's python3.13 unpacked in $(( $(date +%s) - t0 ))s"

# --- the venv ---------------------------------------------------------------------------------
t0=$(date +%s)
"$root/usr/bin/python3.13" -m venv --without-pip "$out/venv"
pip_whl="$(ls "$root"/usr/share/python-wheels/pip-*.whl)"
"$out/venv/bin/python" "$pip_whl/pip" install --quiet --disable-pip-version-check "$pip_whl" >&2
cpu="$( { TIMEFORMAT='%U %S'; time ("$out/venv/bin/pip" install --quiet --disable-pip-version-check -r "$reqs" >&2); } 2>&1 )" ||
  { log "ERROR: pip install -r python/requirements-harbor.txt failed"; exit 1; }
cpu="$(awk '{printf "%d", $1 + $2}' <<<"${cpu##*$'\n'}")"
"$out/venv/bin/harbor" --version >&2
log "venv (harbor) in $(( $(date +%s) - t0 ))s (pip ${cpu} CPU-seconds)"

build_agents
build_eval
printf '%s' "$stamp_content" > "$out/.complete"
trap - EXIT
log "done in $(( $(date +%s) - start ))s: $out"
echo "$out/venv/bin/python"
