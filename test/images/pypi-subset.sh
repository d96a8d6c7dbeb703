#!/usr/bin/env bash
# A subset of PyPI for test/tooling/images-build.test.ts, served from loopback as a simple index (PEP 503:
# one directory per normalized project name, its wheels listed as python3 -m http.server lists a directory: test/images/serve.py): the real
# wheels of the requirements named, and of everything they need, at the versions the constraints
# file pins (the trainer lock), for the stand-in bases' Python (CPython 3.11 on x86_64 glibc).
# Downloaded with pip from PyPI once; nothing here is a stand-in.
#
#   pypi-subset.sh <out> <constraints.txt> <requirement>...
#
# leaves <out> -> a cached directory holding simple/<project>/<wheel> and lock.txt (one name==version
# per wheel, sorted). pip's log (a line per project it collects and file it downloads: the test's
# sign of progress) is $cache/pypi.log. Cached under ~/.cache/agent-rl-infra/images-standin by a stamp of this script,
# the constraints and the requirements, under a flock; idempotent.
set -euo pipefail
out="$1"
constraints="$2"
shift 2
cache="${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra/images-standin"
mkdir -p "$cache"
stamp="$( (cat "$0" "$constraints"; printf '%s\n' "$@") | sha256sum | cut -c1-16)"
dir="$cache/pypi-$stamp"
exec 9>"$cache/pypi.lock"
flock 9
find "$cache" -maxdepth 1 -name 'pypi-*' -type d ! -name "pypi-$stamp" -exec rm -rf {} +
if [[ ! -f "$dir/lock.txt" ]]; then
  python3 -m pip --version >/dev/null 2>&1 || { echo "pypi-subset: python3 has no pip (apt-get install -y python3-pip)" >&2; exit 1; }
  t0=$(date +%s)
  rm -rf "$dir.new"
  mkdir -p "$dir.new/wheels"
  # Every manylinux tag a bookworm glibc (2.36) runs, newest first: pip does not widen one given --platform.
  platforms=()
  for minor in $(seq 36 -1 17); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done
  platforms+=(--platform manylinux2014_x86_64)
  python3 -m pip download --progress-bar off --disable-pip-version-check --no-cache-dir --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 "${platforms[@]}" \
    -c "$constraints" -d "$dir.new/wheels" "$@" >"$cache/pypi.log" 2>&1 ||
    { tail -20 "$cache/pypi.log" >&2; echo "pypi-subset: pip download failed (log: $cache/pypi.log)" >&2; exit 1; }
  : >"$dir.new/lock.txt.tmp"
  for whl in "$dir.new/wheels"/*.whl; do
    base="${whl##*/}"
    name="${base%%-*}"
    version="${base#*-}"
    version="${version%%-*}"
    # PEP 503 normalized name: lowercase, runs of - _ . become one -.
    project="$(tr 'A-Z' 'a-z' <<<"$name" | sed -E 's/[-_.]+/-/g')"
    mkdir -p "$dir.new/simple/$project"
    mv "$whl" "$dir.new/simple/$project/"
    echo "$project==$version" >>"$dir.new/lock.txt.tmp"
  done
  rmdir "$dir.new/wheels"
  sort "$dir.new/lock.txt.tmp" >"$dir.new/lock.txt" && rm "$dir.new/lock.txt.tmp"
  rm -rf "$dir" && mv "$dir.new" "$dir"
  echo "pypi-subset: $(wc -l <"$dir/lock.txt") wheels in $(( $(date +%s) - t0 ))s ($(du -sh "$dir" | cut -f1))" >&2
fi
ln -sfn "$dir" "$out"
