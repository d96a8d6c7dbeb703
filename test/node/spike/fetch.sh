#!/usr/bin/env bash
# Installs the Debian packages the node spike runs (as root, with apt), and unpacks Debian forky's
# containerd 2 into the spike's cache without installing it (bookworm's containerd 1.6 stays the
# system's; the spike runs its own instance from the cache). Prints each step's wall time.
#   bookworm: ipset containernetworking-plugins busybox-static debootstrap (+ runc iptables iproute2
#             openssl, already on the machine)
#   forky:    containerd 2.1.9+ds1-5 (apt-get download through a private sources list and lists dir,
#             then dpkg-deb -x: the system's apt sources and dpkg database are not changed)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
[[ $EUID == 0 ]] || { log "ERROR: run as root (apt-get install)"; exit 1; }

t() { local t0; t0=$(date +%s.%N); "$@"; log "$(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)")s: $*"; }

missing=()
for p in "${BOOKWORM_PACKAGES[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed' || missing+=("$p"); done
if (( ${#missing[@]} > 0 )); then
  t apt-get update -qq
  t env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
for p in "${BOOKWORM_PACKAGES[@]}"; do dpkg-query -W -f='${Package} ${Version}\n' "$p"; done

if [[ -x "$CTR_BIN/containerd" && "$(cat "$SPIKE_CACHE/containerd/.complete" 2>/dev/null)" == "$CONTAINERD_DEB_VERSION" ]]; then
  log "containerd $CONTAINERD_DEB_VERSION: up to date in $SPIKE_CACHE/containerd"
  exit 0
fi
apt_dir="$SPIKE_CACHE/forky-apt"
mkdir -p "$apt_dir"/{lists/partial,archives/partial,sources}
cat > "$apt_dir/sources/forky.sources" <<'EOS'
Types: deb
URIs: http://deb.debian.org/debian
Suites: forky
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt_dir/sources"
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache::Archives=$apt_dir/archives"
  -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Architecture=amd64)
t apt-get "${apt_opts[@]}" update -qq
(cd "$apt_dir/archives" && t apt-get "${apt_opts[@]}" download "containerd=$CONTAINERD_DEB_VERSION")
rm -rf "$SPIKE_CACHE/containerd.new"
t dpkg-deb -x "$apt_dir/archives/containerd_${CONTAINERD_DEB_VERSION//:/%3a}_amd64.deb" "$SPIKE_CACHE/containerd.new"
"$SPIKE_CACHE/containerd.new/usr/bin/containerd" --version >&2
printf '%s' "$CONTAINERD_DEB_VERSION" > "$SPIKE_CACHE/containerd.new/.complete"
rm -rf "$SPIKE_CACHE/containerd"; mv "$SPIKE_CACHE/containerd.new" "$SPIKE_CACHE/containerd"
rm -rf "$apt_dir/lists"   # the forky index (~100 MB unpacked) is only needed for the download
