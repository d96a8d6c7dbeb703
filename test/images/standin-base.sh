#!/usr/bin/env bash
# Builds a STAND-IN base image of test/tooling/images-build.test.ts as a rootfs tar (for `docker import`):
# Debian bookworm minbase (debootstrap) with python3, pip, curl and bash, apt told to fetch no
# translations (as Docker's debian images are: debuerreotype's docker-no-languages), plus per variant:
#   trainer  git (vLLM's docker/Dockerfile installs it in its final stage; pip clones OpenEnv with it)
#            and a stub vllm 0.29.0 distribution (metadata only): the trainer Dockerfiles'
#            install-lock.sh holds the base's vllm, so it must see one. It stands in for
#            vllm/vllm-openai:v0.29.0, which cannot be pulled here; it holds no vLLM. The same tar
#            stands in for debian:bookworm-slim (the mtail image's base): it is Debian bookworm.
#   sandbox  the sandbox proxy's deps (fastapi, uvicorn, httpx, from Debian) and
#            /root/.opencode/bin/opencode, a stand-in script: it stands in for OpenEnv's
#            ghcr.io/huggingface/openenv-opencode-sandbox, whose layout python/Dockerfile expects.
#            Not in the trainer variant: Debian's fastapi wants pydantic < 2, which the trainer lock's
#            pydantic 2 would break (install-lock.sh's pip check refuses that, as it should).
# Usage: standin-base.sh trainer|sandbox <out.tar>. Cached under
# ~/.cache/agent-rl-infra/images-standin by a stamp of this script, under a flock; idempotent.
set -euo pipefail
variant="$1"
out="$2"
case "$variant" in
  trainer) extra=git ;;
  sandbox) extra=python3-fastapi,python3-uvicorn,python3-httpx ;;
  *) echo "standin-base: unknown variant '$variant' (trainer, sandbox)" >&2; exit 2 ;;
esac
cache="${XDG_CACHE_HOME:-$HOME/.cache}/agent-rl-infra/images-standin"
mkdir -p "$cache/debs"
stamp="$(sha256sum "$0" | cut -c1-16)"
tar_path="$cache/standin-$variant-$stamp.tar"
exec 9>"$cache/lock"
flock 9
# Tars of an older version of this script.
find "$cache" -maxdepth 1 -name 'standin-*.tar' ! -name "*-$stamp.tar" -delete
if [[ ! -f "$tar_path" ]]; then
  r="$cache/rootfs.$$"
  rm -rf "$r"
  t0=$(date +%s)
  debootstrap --variant=minbase --include="python3,python-is-python3,python3-pip,curl,ca-certificates,$extra" \
    --cache-dir="$cache/debs" bookworm "$r" http://deb.debian.org/debian >"$cache/debootstrap.log" 2>&1 ||
    { tail -20 "$cache/debootstrap.log" >&2; echo "standin-base: debootstrap failed (log: $cache/debootstrap.log)" >&2; exit 1; }
  echo 'Acquire::Languages "none";' >"$r/etc/apt/apt.conf.d/docker-no-languages"
  if [[ $variant == trainer ]]; then
    site="$r/usr/local/lib/python3.11/dist-packages/vllm-0.29.0.dist-info"
    mkdir -p "$site"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.29.0\nSummary: STAND-IN: metadata only (test/images/standin-base.sh), not vLLM\n' >"$site/METADATA"
    printf 'pip\n' >"$site/INSTALLER"
    : >"$site/RECORD"
  else
    mkdir -p "$r/root/.opencode/bin"
    printf '#!/bin/sh\necho "opencode stand-in (test/images/standin-base.sh: not the OpenEnv opencode sandbox base)"\n' >"$r/root/.opencode/bin/opencode"
    chmod 755 "$r/root/.opencode/bin/opencode"
  fi
  rm -rf "$r/var/cache/apt/archives"/*.deb "$r/var/lib/apt/lists"/*
  tar --numeric-owner -C "$r" -cf "$tar_path.new" . && mv "$tar_path.new" "$tar_path"
  rm -rf "$r"
  echo "standin-base: $variant built in $(( $(date +%s) - t0 ))s ($(du -h "$tar_path" | cut -f1))" >&2
fi
ln -sf "$tar_path" "$out"
