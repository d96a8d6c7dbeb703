#!/usr/bin/env bash
# Fetch the training scripts a trainer image bakes in, at a pinned commit, each checked
# against its pinned sha256. Nothing is downloaded from a branch: the revision must be a
# full 40-hex commit.
#
#   fetch-scripts.sh <set> <dest-dir>          # image build: revision and digests come from
#                                              # the build ARGs (environment variables)
#   fetch-scripts.sh --print <set> <commit>    # workstation: download once, print one
#                                              # --build-arg per line to pin (trust on first use):
#                                              # docker build $(fetch-scripts.sh --print ...) ...
#
# Sets (one table, below):
#   seed          Hugging Face sergiopaniego/rl-envs-youtube-livestream-4-scripts: the
#                 white-box scripts; ARGs SEED_REVISION, SEED_SHA256_<SCRIPT>
#   trl-opencode  GitHub huggingface/trl examples/async_grpo_opencode/opencode_hf_sandbox.py;
#                 ARGs TRL_REVISION, TRL_SHA256_OPENCODE_HF_SANDBOX
#   flash-attn3   Hugging Face kernels-community/flash-attn3 build/<variant>: a folder, not a list of
#                 files, so trainer/fetch_kernel.py fetches it (same modes, same mirror variable);
#                 ARGs KERNEL_FLASH_ATTN3_REVISION, KERNEL_FLASH_ATTN3_SHA256 (KERNEL_FLASH_ATTN3_VARIANT)
#
# AGENTRL_FETCH_BASE_URL replaces the host part (https://huggingface.co or
# https://raw.githubusercontent.com), e.g. for a mirror or a test server on loopback.
# Each script lands as <dest-dir>/<file name>; a file whose digest differs never lands.
set -euo pipefail

die() {
    echo "fetch-scripts: $*" >&2
    exit 1
}

# set_table <set>: the source of one set. Prints lines "base|url-prefix|revision-var" then
# one "file|sha-var" per script. URL = <base>/<url-prefix with REV replaced>/<file>.
set_table() {
    case "$1" in
    seed)
        # Hugging Face file URLs: https://huggingface.co/<repo>/resolve/<revision>/<path>
        echo "https://huggingface.co|sergiopaniego/rl-envs-youtube-livestream-4-scripts/resolve/REV|SEED_REVISION"
        echo "train_coding_whitebox_eval.py|SEED_SHA256_TRAIN_CODING_WHITEBOX_EVAL"
        echo "train_coding_whitebox.py|SEED_SHA256_TRAIN_CODING_WHITEBOX"
        echo "train_wordle_whitebox.py|SEED_SHA256_TRAIN_WORDLE_WHITEBOX"
        ;;
    trl-opencode)
        # GitHub raw file URLs: https://raw.githubusercontent.com/<owner>/<repo>/<commit>/<path>
        echo "https://raw.githubusercontent.com|huggingface/trl/REV/examples/async_grpo_opencode|TRL_REVISION"
        echo "opencode_hf_sandbox.py|TRL_SHA256_OPENCODE_HF_SANDBOX"
        ;;
    *) die "unknown set '$1' (known: seed, trl-opencode, flash-attn3)" ;;
    esac
}

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        python3 -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1"
    fi
}

download() { # <url> <file>
    if command -v curl >/dev/null 2>&1; then
        curl -fsSL --retry 3 -o "$2" "$1" || die "download failed: $1"
    else
        python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' "$1" "$2" 2>/dev/null ||
            die "download failed: $1"
    fi
}

is_commit() { [[ "$1" =~ ^[0-9a-f]{40}$ ]]; }

if [[ "${1:-}" == "flash-attn3" ]]; then
    shift
    exec python3 "$(dirname "$0")/fetch_kernel.py" "$@"
elif [[ "${1:-}" == "--print" && "${2:-}" == "flash-attn3" ]]; then
    exec python3 "$(dirname "$0")/fetch_kernel.py" --print "${@:3}"
fi

mode=fetch
if [[ "${1:-}" == "--print" ]]; then
    mode=print
    shift
fi
[[ $# -eq 2 ]] || die "usage: fetch-scripts.sh <set> <dest-dir> | fetch-scripts.sh --print <set> <commit>"
set_name="$1"
table="$(set_table "$set_name")"
IFS='|' read -r default_base prefix revision_var <<<"$(head -n1 <<<"$table")"
base="${AGENTRL_FETCH_BASE_URL:-$default_base}"
base="${base%/}"
mapfile -t scripts < <(tail -n +2 <<<"$table")

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [[ $mode == print ]]; then
    revision="$2"
    is_commit "$revision" || die "'$revision' is not a full 40-hex commit: pin a commit, not a branch or tag (git ls-remote <repo URL> <branch> gives it)"
    # The digests on stdout, one --build-arg per line (docker build $(fetch-scripts.sh --print ...));
    # the reminder on stderr.
    echo "fetch-scripts: $set_name at $revision: read these scripts before you pin their digests (trust on first use)" >&2
    echo "--build-arg $revision_var=$revision"
    for entry in "${scripts[@]}"; do
        IFS='|' read -r file sha_var <<<"$entry"
        download "$base/${prefix//REV/$revision}/$file" "$work/$file"
        echo "--build-arg $sha_var=$(sha256_of "$work/$file")"
    done
    exit 0
fi

dest="$2"
# Every missing or malformed build ARG at once, each with the fix.
problems=()
revision="${!revision_var:-}"
if [[ -z "$revision" ]]; then
    problems+=("build ARG $revision_var is not set: pass --build-arg $revision_var=<40-hex commit>")
elif ! is_commit "$revision"; then
    problems+=("build ARG $revision_var='$revision' is not a full 40-hex commit: pin a commit, not a branch or tag")
fi
for entry in "${scripts[@]}"; do
    IFS='|' read -r file sha_var <<<"$entry"
    digest="${!sha_var:-}"
    if [[ -z "$digest" ]]; then
        problems+=("build ARG $sha_var is not set: pass --build-arg $sha_var=<sha256 of $file>")
    elif ! [[ "$digest" =~ ^[0-9a-f]{64}$ ]]; then
        problems+=("build ARG $sha_var='$digest' is not a sha256 (64 lowercase hex digits)")
    fi
done
if [[ ${#problems[@]} -gt 0 ]]; then
    printf 'fetch-scripts: %s\n' "${problems[@]}" >&2
    echo "fetch-scripts: 'trainer/fetch-scripts.sh --print $set_name <commit>' prints every --build-arg of this set" >&2
    exit 1
fi

# Download and check every file before any lands, and report every mismatch.
failed=0
for entry in "${scripts[@]}"; do
    IFS='|' read -r file sha_var <<<"$entry"
    url="$base/${prefix//REV/$revision}/$file"
    download "$url" "$work/$file"
    actual="$(sha256_of "$work/$file")"
    if [[ "$actual" != "${!sha_var}" ]]; then
        echo "fetch-scripts: $file ($url): sha256 mismatch: expected ${!sha_var} ($sha_var), got $actual" >&2
        failed=1
    fi
done
[[ $failed == 0 ]] || exit 1
mkdir -p "$dest"
for entry in "${scripts[@]}"; do
    IFS='|' read -r file _ <<<"$entry"
    install -m 0644 "$work/$file" "$dest/$file"
    echo "fetch-scripts: $dest/$file ($set_name at $revision, sha256 verified)"
done
