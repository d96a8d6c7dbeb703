#!/usr/bin/env bash
# Builds the STAND-IN base image of test/images-build.test.ts as a rootfs tar (for `docker import`):
# Debian bookworm minbase (debootstrap) with python3, pip, curl, bash and the sandbox proxy's deps
# (fastapi, uvicorn, httpx), plus
#   - a stub vllm 0.29.0 distribution (metadata only): the trainer Dockerfiles' install-lock.sh
#     holds the base's vllm, so it must see one. It stands in for vllm/vllm-openai:v0.29.0, which
#     cannot be pulled here; it holds no vLLM.
#   - /root/.opencode/bin/opencode, a stand-in script: it stands in for OpenEnv's
#     ghcr.io/huggingface/openenv-opencode-sandbox, whose layout python/Dockerfile expects.
# Usage: standin-base.sh <out.tar>. Cached under ~/.cache/agent-rl-infra/images-standin by a stamp of
# this script, under a flock; idempotent.
set -euo pipefail
out="$1"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra/images-standin"
mkdir -p "$cache/debs"
stamp="$(sha256sum "$0" | cut -c1-16)"
tar_path="$cache/standin-base-$stamp.tar"
exec 9>"$cache/lock"
flock 9
if [[ ! -f "$tar_path" ]]; then
  r="$cache/rootfs.$$"
  rm -rf "$r"
  t0=$(date +%s)
  debootstrap --variant=minbase --include=python3,python-is-python3,python3-pip,python3-fastapi,python3-uvicorn,python3-httpx,curl,ca-certificates \
    --cache-dir="$cache/debs" bookworm "$r" http://deb.debian.org/debian >"$cache/debootstrap.log" 2>&1 ||
    { tail -20 "$cache/debootstrap.log" >&2; echo "standin-base: debootstrap failed (log: $cache/debootstrap.log)" >&2; exit 1; }
  site="$r/usr/local/lib/python3.11/dist-packages/vllm-0.29.0.dist-info"
  mkdir -p "$site"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.29.0\nSummary: STAND-IN: metadata only (test/images/standin-base.sh), not vLLM\n' >"$site/METADATA"
  printf 'pip\n' >"$site/INSTALLER"
  : >"$site/RECORD"
  mkdir -p "$r/root/.opencode/bin"
  printf '#!/bin/sh\necho "opencode stand-in (test/images/standin-base.sh: not the OpenEnv opencode sandbox base)"\n' >"$r/root/.opencode/bin/opencode"
  chmod 755 "$r/root/.opencode/bin/opencode"
  rm -rf "$r/var/cache/apt/archives"/*.deb "$r/var/lib/apt/lists"/*
  tar --numeric-owner -C "$r" -cf "$tar_path.new" . && mv "$tar_path.new" "$tar_path"
  rm -rf "$r"
  echo "standin-base: built in $(( $(date +%s) - t0 ))s ($(du -h "$tar_path" | cut -f1))" >&2
fi
ln -sf "$tar_path" "$out"
