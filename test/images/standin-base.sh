#!/usr/bin/env bash
# Builds a STAND-IN base image of test/tooling/images-build.test.ts as a rootfs tar (for `docker import`):
# Debian bookworm minbase (debootstrap) with python3, pip, curl and bash, apt told to fetch no
# translations (as Docker's debian images are: debuerreotype's docker-no-languages), plus per variant:
#   trainer  git (vLLM's docker/Dockerfile installs it in its final stage; pip clones OpenEnv with it)
#            and a stub vllm 0.29.0 distribution (metadata only): the trainer Dockerfiles'
#            install-lock.sh holds the base's vllm, so it must see one. It stands in for
#            vllm/vllm-openai:v0.29.0, which cannot be pulled here; it holds no vLLM. And a stand-in
#            torch 2.11.0 (a distribution and a module giving only the version facts of the image's
#            torch 2.11 + CUDA 13.0 that kernels' variant resolver reads): the black-box Dockerfile's
#            kernel check resolves the pinned build variant for that torch. It holds no PyTorch. The same tar
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
    # A stand-in torch: the facts kernels' variant resolver reads (kernels 0.18.3 kernels/variants.py
    # resolve_variants, kernels/backends.py _backend: torch.__version__, torch.version.cuda,
    # torch.compiled_with_cxx11_abi()), as the vLLM 0.29.0 image's torch 2.11 + CUDA 13.0 gives them
    # (trainer/fetch_kernel.py DEFAULT_VARIANT). No tensors, no CUDA.
    pkgs="$r/usr/local/lib/python3.11/dist-packages"
    mkdir -p "$pkgs/torch" "$pkgs/torch-2.11.0.dist-info"
    printf 'Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\nSummary: STAND-IN: version facts only (test/images/standin-base.sh), not PyTorch\n' >"$pkgs/torch-2.11.0.dist-info/METADATA"
    printf 'pip\n' >"$pkgs/torch-2.11.0.dist-info/INSTALLER"
    : >"$pkgs/torch-2.11.0.dist-info/RECORD"
    printf '"""STAND-IN for torch (test/images/standin-base.sh): the version facts of torch 2.11 + CUDA 13.0, not PyTorch."""\n\nfrom . import version\n\n__version__ = "2.11.0"\nSTANDIN = True\n\n\ndef compiled_with_cxx11_abi():\n    return True\n' >"$pkgs/torch/__init__.py"
    printf '"""STAND-IN for torch.version (test/images/standin-base.sh)."""\n\n__version__ = "2.11.0"\ncuda = "13.0"\nhip = None\n' >"$pkgs/torch/version.py"
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
