"""Fetch the attention kernel TRL's AsyncGRPO loads at its first forward, at a pinned commit, checked
against a pinned sha256 of its files, so the trainer never reaches the Hub for it.

TRL 1.16.0 calls `get_kernel("kernels-community/flash-attn3", version=1)` in
trl/experimental/async_grpo/packing.py (`_flash_attn`). The image sets the kernels library's own
local setting, `LOCAL_KERNELS=kernels-community/flash-attn3=<dest>` (kernels 0.18.3, kernels/load.py
`_get_local_kernel_overrides`), so that call resolves `<dest>/build/<variant>` and nothing else.

    fetch_kernel.py <dest-dir>          # image build: revision and digest from the build ARGs
    fetch_kernel.py --print <commit>    # workstation: download once, print the --build-args to pin

Only one build variant is fetched: KERNEL_FLASH_ATTN3_VARIANT, the default naming the vLLM 0.29.0
image's torch 2.11 with CUDA 13.0 (kernels/variants.py `parse_variant`). The digest is the sha256 of
`sha256sum` lines over that variant's files, sorted by path:
    (cd build/<variant> && find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs sha256sum) | sha256sum
AGENTRL_FETCH_BASE_URL replaces https://huggingface.co (a mirror, or a test server on loopback); it
must serve the Hub's tree listing (/api/kernels/<repo>/tree/<rev>/<path>) and files
(/kernels/<repo>/resolve/<rev>/<path>), as huggingface_hub's list_repo_tree and hf_hub_url ask them.
Stdlib only: it runs before and without the lock's packages.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import urllib.request
from pathlib import Path, PurePosixPath

REPO = "kernels-community/flash-attn3"
REVISION_ARG = "KERNEL_FLASH_ATTN3_REVISION"
DIGEST_ARG = "KERNEL_FLASH_ATTN3_SHA256"
VARIANT_ARG = "KERNEL_FLASH_ATTN3_VARIANT"
DEFAULT_VARIANT = "torch211-cxx11-cu130-x86_64-linux"
COMMIT = re.compile(r"[0-9a-f]{40}")
SHA256 = re.compile(r"[0-9a-f]{64}")
MAX_FILES = 1000


class FetchError(Exception):
    pass


def get(url: str) -> tuple[bytes, str]:
    """The body and the Link header of one GET; any failure names the URL."""
    try:
        with urllib.request.urlopen(url, timeout=120) as r:
            return r.read(), r.headers.get("Link", "")
    except OSError as e:
        raise FetchError(f"download failed: {url}: {e}") from e


def listing(base: str, revision: str, variant: str) -> list[str]:
    """Every file of build/<variant> at the commit (the Hub pages its tree listing by Link rel="next")."""
    url: str | None = f"{base}/api/kernels/{REPO}/tree/{revision}/build/{variant}?recursive=true"
    files: list[str] = []
    while url is not None:
        body, link = get(url)
        try:
            entries = json.loads(body)
        except ValueError as e:
            raise FetchError(f"{url}: not the Hub's tree listing (JSON list): {e}") from e
        for e in entries:
            if e.get("type") != "file":
                continue
            p = PurePosixPath(e["path"])
            if p.is_absolute() or ".." in p.parts or p.parts[:2] != ("build", variant):
                raise FetchError(f"{url}: listed path {e['path']!r} is not under build/{variant}/")
            if p.suffix != ".pyc" and "__pycache__" not in p.parts:  # kernels never downloads bytecode (resolver.py)
                files.append(str(p))
        m = re.search(r'<([^>]+)>;\s*rel="next"', link)
        url = m[1] if m else None
        if len(files) > MAX_FILES:
            raise FetchError(f"{REPO} build/{variant} lists more than {MAX_FILES} files: not a kernel build variant")
    if not files:
        raise FetchError(
            f"{REPO} at {revision} has no files under build/{variant}: pick a variant the commit builds ({VARIANT_ARG}) or another commit"
        )
    return sorted(files)


def tree_digest(root: Path) -> str:
    """sha256 of `sha256sum` lines ("<hex>  <path>") over every file under root, sorted by path."""
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    lines = "".join(f"{hashlib.sha256((root / f).read_bytes()).hexdigest()}  {f}\n" for f in files)
    return hashlib.sha256(lines.encode()).hexdigest()


def download(base: str, revision: str, variant: str, work: Path) -> Path:
    """build/<variant> of the commit under work; returns the variant folder."""
    for f in listing(base, revision, variant):
        body, _ = get(f"{base}/kernels/{REPO}/resolve/{revision}/{f}")
        target = work / f
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
    return work / "build" / variant


def main(argv: list[str]) -> int:
    base = (os.environ.get("AGENTRL_FETCH_BASE_URL") or "https://huggingface.co").rstrip("/")
    variant = os.environ.get(VARIANT_ARG) or DEFAULT_VARIANT
    if len(argv) == 2 and argv[0] == "--print":
        revision = argv[1]
        if not COMMIT.fullmatch(revision):
            raise FetchError(f"'{revision}' is not a full 40-hex commit: pin a commit, not a branch (the Hub's v1 branch gives it)")
        with tempfile.TemporaryDirectory() as work:
            digest = tree_digest(download(base, revision, variant, Path(work)))
        print(f"fetch_kernel: {REPO} build/{variant} at {revision}: read it before you pin its digest (trust on first use)", file=sys.stderr)
        print(f"--build-arg {REVISION_ARG}={revision}")
        print(f"--build-arg {DIGEST_ARG}={digest}")
        return 0
    if len(argv) != 1 or argv[0].startswith("-"):
        raise FetchError("usage: fetch_kernel.py <dest-dir> | fetch_kernel.py --print <commit>")
    dest = Path(argv[0])
    revision, pinned = os.environ.get(REVISION_ARG, ""), os.environ.get(DIGEST_ARG, "")
    problems = []
    if not COMMIT.fullmatch(revision):
        problems.append(f"build ARG {REVISION_ARG}='{revision}' is not a full 40-hex commit: pass --build-arg {REVISION_ARG}=<commit>")
    if not SHA256.fullmatch(pinned):
        problems.append(f"build ARG {DIGEST_ARG}='{pinned}' is not a sha256 (64 lowercase hex): pass --build-arg {DIGEST_ARG}=<digest>")
    if problems:
        problems.append(f"'trainer/fetch-scripts.sh --print flash-attn3 <commit>' prints both for {VARIANT_ARG}={variant}")
        raise FetchError("\n".join(problems))
    with tempfile.TemporaryDirectory() as work:
        got = download(base, revision, variant, Path(work))
        actual = tree_digest(got)
        if actual != pinned:
            raise FetchError(f"{REPO} build/{variant} at {revision}: sha256 mismatch: expected {pinned} ({DIGEST_ARG}), got {actual}")
        landed = dest / "build" / variant
        landed.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(got, landed)
    print(f"fetch_kernel: {landed} ({REPO} at {revision}, sha256 verified)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except FetchError as e:
        for line in str(e).splitlines():
            print(f"fetch_kernel: {line}", file=sys.stderr)
        sys.exit(1)
