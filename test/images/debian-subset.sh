#!/usr/bin/env bash
# A subset of deb.debian.org for test/tooling/images-build.test.ts, served from loopback as a mirror
# (images/mtail/Dockerfile's DEBIAN_MIRROR): Debian's own signed InRelease of a suite, its main amd64
# Packages.xz (where apt asks for it, by name and by hash: the suite's Release says
# Acquire-By-Hash), and the .deb files of the packages named, in their pool paths. Nothing here is a
# stand-in: apt in the build checks the signature and every hash, as against deb.debian.org; and it
# is checked here first (gpgv against Debian's archive keyring, each sha256). Only the packages named
# are served: their dependencies must be in the base already.
#
#   debian-subset.sh <out> <suite> <package>...
#
# leaves <out> -> a cached directory holding debian/dists/<suite>/... and debian/pool/...; cached
# under ~/.cache/agent-rl-infra/images-standin by a stamp of this script and the arguments, under a
# flock; idempotent.
set -euo pipefail
out="$1"
suite="$2"
shift 2
archive=http://deb.debian.org/debian
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
cache="${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra/images-standin"
mkdir -p "$cache"
stamp="$( (cat "$0"; printf '%s\n' "$suite" "$@") | sha256sum | cut -c1-16)"
dir="$cache/debian-$stamp"
exec 9>"$cache/debian.lock"
flock 9
find "$cache" -maxdepth 1 -name 'debian-*' -type d ! -name "debian-$stamp" -exec rm -rf {} +
die() { echo "debian-subset: $*" >&2; exit 1; }
fetch() { curl -fsS --retry 3 -o "$2" "$1" || die "download failed: $1"; }
if [[ ! -f "$dir/.complete" ]]; then
  [[ -f $keyring ]] || die "no $keyring (apt-get install -y debian-archive-keyring)"
  t0=$(date +%s)
  rm -rf "$dir"
  d="$dir/debian/dists/$suite"
  mkdir -p "$d/main/binary-amd64"
  fetch "$archive/dists/$suite/InRelease" "$d/InRelease"
  gpgv --keyring "$keyring" "$d/InRelease" 2>/dev/null || die "$archive/dists/$suite/InRelease: not signed by a key of $keyring"
  # The SHA256 section's line for main/binary-amd64/Packages.xz: " <sha256> <size> <path>".
  want="$(awk '/^SHA256:/{s=1; next} /^[^ ]/{s=0} s && $3 == "main/binary-amd64/Packages.xz" {print $1}' "$d/InRelease")"
  [[ -n "$want" ]] || die "$suite's InRelease lists no main/binary-amd64/Packages.xz"
  fetch "$archive/dists/$suite/main/binary-amd64/Packages.xz" "$d/main/binary-amd64/Packages.xz"
  [[ "$(sha256sum "$d/main/binary-amd64/Packages.xz" | cut -d' ' -f1)" == "$want" ]] || die "Packages.xz does not match $suite's InRelease (a mirror mid-update? run again)"
  mkdir -p "$d/main/binary-amd64/by-hash/SHA256"
  cp "$d/main/binary-amd64/Packages.xz" "$d/main/binary-amd64/by-hash/SHA256/$want"
  for pkg in "$@"; do
    # The package's stanza: its pool path and sha256.
    filename='' sha=''
    read -r filename sha < <(xz -dc "$d/main/binary-amd64/Packages.xz" | awk -v p="$pkg" '
      /^Package: /{hit = ($2 == p)} hit && /^Filename: /{f = $2} hit && /^SHA256: /{s = $2}
      /^$/{if (hit && f != "") {print f, s; exit} hit = 0}') || true
    [[ -n "$filename" ]] || die "$suite main amd64 has no package $pkg"
    mkdir -p "$dir/debian/$(dirname "$filename")"
    fetch "$archive/$filename" "$dir/debian/$filename"
    [[ "$(sha256sum "$dir/debian/$filename" | cut -d' ' -f1)" == "$sha" ]] || die "$filename does not match $suite's Packages"
    echo "debian-subset: $filename" >&2
  done
  touch "$dir/.complete"
  echo "debian-subset: $suite, $# package(s) in $(( $(date +%s) - t0 ))s ($(du -sh "$dir" | cut -f1))" >&2
fi
ln -sfn "$dir" "$out"
