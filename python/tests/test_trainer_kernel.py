"""The black-box image's attention kernel (issue 59 item 3): TRL 1.16's AsyncGRPO loads
`kernels-community/flash-attn3` at its first forward (trl/experimental/async_grpo/packing.py,
_flash_attn). The image fetches the kernel at a pinned commit (trainer/fetch_kernel.py through
trainer/fetch-scripts.sh) and sets LOCAL_KERNELS; here the fetch runs against a loopback server laid
out as the Hub, and TRL's own `_flash_attn()` then runs with every socket refused.

The Hub is not reachable from the test machine: the kernel's files are a STAND-IN (a Python
`flash_attn_varlen_func` and a metadata.json of the shape kernels 0.18.3 parses), laid out as the
kernel repository lays out one build variant. The real `kernels` package runs, at the version the
lock pins, installed with pip --target; TRL is the installed 1.16.0.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_trainer_image import instructions, requirement_pins, served  # noqa: F401 - served is a fixture
from waits import scaled

REPO = Path(__file__).resolve().parents[2]
TRAINER = REPO / "trainer"
DOCKERFILE = TRAINER / "blackbox/Dockerfile"
PINS = REPO / "images/trainer-blackbox.pins.json"
KERNEL_REPO = "kernels-community/flash-attn3"
COMMIT = "0123456789abcdef0123456789abcdef01234567"

#: The STAND-IN kernel build: what TRL calls on it, and a metadata.json kernels accepts. Not flash-attn3.
STANDIN_FILES = {
    "__init__.py": (
        '"""STAND-IN for kernels-community/flash-attn3 (python/tests/test_trainer_kernel.py): not the kernel."""\n'
        "STANDIN = True\n\n\n"
        "def flash_attn_varlen_func(*args, **kwargs):\n"
        '    return "stand-in flash_attn_varlen_func"\n'
    ),
    "metadata.json": json.dumps(
        {"id": "_flash_attn3_standin", "name": "flash-attn3", "version": 1, "license": "Apache-2.0", "python-depends": [], "backend": {"type": "cuda", "archs": ["8.0", "9.0a"]}}
    ),
}

#: Every socket refused in the child: any reach for the Hub fails loudly.
NO_NETWORK = """
import socket
def _refused(*a, **k):
    raise OSError("network refused by python/tests/test_trainer_kernel.py")
socket.socket.connect = _refused
socket.create_connection = _refused
socket.getaddrinfo = _refused
"""


def this_variant() -> str:
    """The build variant kernels picks for this venv's torch (kernels/variants.py's naming)."""
    import torch

    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    cuda = (torch.version.cuda or "").replace(".", "")
    abi = "cxx11" if torch.compiled_with_cxx11_abi() else "cxx98"
    return f"torch{major}{minor}-{abi}-cu{cuda}-x86_64-linux"


def tree_digest(files: dict[str, str]) -> str:
    lines = "".join(f"{hashlib.sha256(files[f].encode()).hexdigest()}  {f}\n" for f in sorted(files))
    return hashlib.sha256(lines.encode()).hexdigest()


def publish_kernel(root: Path, variant: str, files: dict[str, str], commit: str = COMMIT) -> None:
    """The stand-in as the Hub serves a kernel repository: the tree listing and each file."""
    listing = root / "api/kernels" / KERNEL_REPO / "tree" / commit / "build" / variant
    listing.parent.mkdir(parents=True)
    listing.write_text(json.dumps([{"type": "directory", "path": f"build/{variant}"}] + [{"type": "file", "path": f"build/{variant}/{f}"} for f in files]))
    for name, text in files.items():
        target = root / "kernels" / KERNEL_REPO / "resolve" / commit / "build" / variant / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def fetch(base: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_")}
    return subprocess.run(
        ["bash", str(TRAINER / "fetch-scripts.sh"), *args], capture_output=True, text=True, timeout=scaled(60), env={**clean, "AGENTRL_FETCH_BASE_URL": base, **env}
    )


@pytest.fixture(scope="module")
def pinned_kernels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The `kernels` package at the lock's version (trainer/requirements.txt), in a folder of its own."""
    version = requirement_pins().get("kernels")
    assert version is not None, "trainer/requirements.txt pins no kernels package: TRL's AsyncGRPO imports it at the first forward"
    target = tmp_path_factory.mktemp("kernels")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--target", str(target), f"kernels=={version}"],
        capture_output=True, text=True, timeout=scaled(300),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    (target / "sitecustomize.py").write_text(NO_NETWORK)
    yield target


def image_env() -> dict[str, str]:
    """The ENV lines of the black-box Dockerfile."""
    return dict(args.split("=", 1) for op, args in instructions(DOCKERFILE) if op == "ENV")


def trl_first_forward_kernel(kernels_dir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """TRL's own `_flash_attn()` (what tree_attention calls at the first forward), sockets refused."""
    code = "from trl.experimental.async_grpo import packing\nk = packing._flash_attn()\nprint(k.__file__)\nprint(k.flash_attn_varlen_func())\n"
    clean = {k: v for k, v in os.environ.items() if k not in ("LOCAL_KERNELS", "HF_HUB_OFFLINE", "PYTHONPATH")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(300), env={**clean, "PYTHONPATH": str(kernels_dir), **env})


def test_trl_loads_its_kernel_from_the_fetched_folder_with_no_network(served: tuple[str, Path], pinned_kernels: Path, tmp_path: Path) -> None:
    base, root = served
    variant = this_variant()
    publish_kernel(root, variant, STANDIN_FILES)
    printed = fetch(base, "--print", "flash-attn3", COMMIT, KERNEL_FLASH_ATTN3_VARIANT=variant)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.splitlines() == [
        f"--build-arg KERNEL_FLASH_ATTN3_REVISION={COMMIT}",
        f"--build-arg KERNEL_FLASH_ATTN3_SHA256={tree_digest(STANDIN_FILES)}",
    ]
    pins = dict(line.removeprefix("--build-arg ").split("=", 1) for line in printed.stdout.splitlines())

    # Where the image fetches it and what it sets, read from the Dockerfile.
    env = image_env()
    assert "LOCAL_KERNELS" in env, "trainer/blackbox/Dockerfile sets no LOCAL_KERNELS: TRL's get_kernel reaches the Hub"
    repo, folder = env["LOCAL_KERNELS"].split("=", 1)
    assert repo == KERNEL_REPO
    assert ("RUN", f"bash /opt/agentrl/fetch-scripts.sh flash-attn3 {folder}") in instructions(DOCKERFILE)

    dest = tmp_path / folder.lstrip("/")
    r = fetch(base, "flash-attn3", str(dest), KERNEL_FLASH_ATTN3_VARIANT=variant, **pins)
    assert r.returncode == 0, r.stderr
    assert (dest / "build" / variant / "__init__.py").read_text() == STANDIN_FILES["__init__.py"]

    # The image as it was (no local setting): TRL's call goes for the Hub, and with no network it fails.
    before = trl_first_forward_kernel(pinned_kernels, {})
    assert before.returncode != 0 and "network refused" in before.stderr, before.stderr[-2000:]
    # With the image's setting pointing at what the fetch landed: resolved, imported, called.
    after = trl_first_forward_kernel(pinned_kernels, {"LOCAL_KERNELS": f"{repo}={dest}"})
    assert after.returncode == 0, after.stderr[-3000:]
    assert after.stdout.splitlines() == [str(dest / "build" / variant / "__init__.py"), "stand-in flash_attn_varlen_func"]


def test_a_changed_kernel_file_fails_naming_both_digests_and_nothing_lands(served: tuple[str, Path], tmp_path: Path) -> None:
    base, root = served
    variant = this_variant()
    publish_kernel(root, variant, {**STANDIN_FILES, "__init__.py": STANDIN_FILES["__init__.py"] + "# changed upstream\n"})
    pinned = tree_digest(STANDIN_FILES)
    r = fetch(base, "flash-attn3", str(tmp_path / "k"), KERNEL_FLASH_ATTN3_VARIANT=variant, KERNEL_FLASH_ATTN3_REVISION=COMMIT, KERNEL_FLASH_ATTN3_SHA256=pinned)
    assert r.returncode == 1
    assert f"sha256 mismatch: expected {pinned} (KERNEL_FLASH_ATTN3_SHA256), got " in r.stderr
    assert not (tmp_path / "k").exists()


def test_missing_kernel_pins_and_a_branch_are_refused_naming_each(served: tuple[str, Path], tmp_path: Path) -> None:
    base, _ = served
    r = fetch(base, "flash-attn3", str(tmp_path / "k"))
    assert r.returncode == 1
    assert "build ARG KERNEL_FLASH_ATTN3_REVISION='' is not a full 40-hex commit: pass --build-arg KERNEL_FLASH_ATTN3_REVISION=<commit>" in r.stderr
    assert "build ARG KERNEL_FLASH_ATTN3_SHA256='' is not a sha256 (64 lowercase hex): pass --build-arg KERNEL_FLASH_ATTN3_SHA256=<digest>" in r.stderr
    assert "'trainer/fetch-scripts.sh --print flash-attn3 <commit>' prints both" in r.stderr
    printed = fetch(base, "--print", "flash-attn3", "v1")
    assert printed.returncode == 1 and "'v1' is not a full 40-hex commit" in printed.stderr


def test_a_variant_the_commit_does_not_build_is_named(served: tuple[str, Path]) -> None:
    base, root = served
    publish_kernel(root, "torch211-cxx11-cu130-x86_64-linux", STANDIN_FILES)
    (root / "api/kernels" / KERNEL_REPO / "tree" / COMMIT / "build" / "torch299-cxx11-cu999-x86_64-linux").write_text("[]")
    r = fetch(base, "--print", "flash-attn3", COMMIT, KERNEL_FLASH_ATTN3_VARIANT="torch299-cxx11-cu999-x86_64-linux")
    assert r.returncode == 1
    assert f"{KERNEL_REPO} at {COMMIT} has no files under build/torch299-cxx11-cu999-x86_64-linux: pick a variant the commit builds (KERNEL_FLASH_ATTN3_VARIANT)" in r.stderr


def test_the_image_pins_the_kernel_trl_asks_for_after_the_lock_and_checks_the_variant() -> None:
    # TRL's call as installed: the repository and version the pins must name.
    import trl.experimental.async_grpo.packing as packing

    source = Path(packing.__file__).read_text()
    assert f'get_kernel("{KERNEL_REPO}", version=1)' in source
    source_pin = next(s for s in json.loads(PINS.read_text())["sources"] if s.get("fetchSet") == "flash-attn3")
    assert source_pin["repo"] == f"huggingface:{KERNEL_REPO}" and source_pin["repoType"] == "kernel"
    assert source_pin["resolve"]["branch"] == "v1"  # kernels/_versions.py: version N is the branch vN
    ops = instructions(DOCKERFILE)
    default_variant = next(a.split("=", 1)[1] for op, a in ops if op == "ARG" and a.startswith("KERNEL_FLASH_ATTN3_VARIANT="))
    assert source_pin["scripts"] == [{"file": f"build/{default_variant}", "digestArg": "KERNEL_FLASH_ATTN3_SHA256"}]
    assert ("ARG", "KERNEL_FLASH_ATTN3_REVISION") in ops and ("ARG", "KERNEL_FLASH_ATTN3_SHA256") in ops
    order = [args for op, args in ops if op == "RUN"]
    at = {key: next(i for i, a in enumerate(order) if key in a) for key in ("install-lock.sh", "fetch-scripts.sh flash-attn3", "_get_local_kernel_overrides")}
    assert at["install-lock.sh"] < at["fetch-scripts.sh flash-attn3"] < at["_get_local_kernel_overrides"], "the kernel is fetched after the lock and its variant checked by kernels"
    assert re.search(r"torch211-cxx11-cu130", default_variant), "the vLLM 0.29.0 image's torch is 2.11 + CUDA 13.0 (bench/gpu/results.md)"
