"""The real opencode CLI from npm, installed once into the test cache and reused.

`opencode-ai` is a launcher whose postinstall (node ./postinstall.mjs) links the platform binary
from its optional dependency `opencode-linux-x64` (opencode-ai@1.18.33 package.json); the binary
itself is a standalone executable (Bun-compiled), so this installs both packages with
`--ignore-scripts` and runs the platform package's `bin/opencode` directly. Reaches only the npm
registry (what CI has).

    python python/tests/opencode_cli.py     # install (or find) it; prints the binary's path
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

from waits import scaled

VERSION = "1.18.33"
PACKAGES = (f"opencode-ai@{VERSION}", f"opencode-linux-x64@{VERSION}")

#: opencode's switches for a sandbox with no egress. Each name was read from the 1.18.33 binary
#: (`strings opencode | grep OPENCODE_`, the check is `test_rollout_worker.py`'s), not assumed.
OFFLINE_ENV = {
    # No fetch of models.dev's catalogue: the provider and model come from opencode.json alone.
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    # No version check against the npm registry / GitHub at start.
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    # No share links (opencode.ai).
    "OPENCODE_DISABLE_SHARE": "1",
    # No language-server downloads when a file is edited.
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    # No default plugins (they are npm packages opencode would install at start).
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
}


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "agent-rl-infra" / f"opencode-{VERSION}"


def binary_path(root: Path | None = None) -> Path:
    return (root or cache_dir()) / "node_modules/opencode-linux-x64/bin/opencode"


def installed() -> Path | None:
    """The binary when a complete install is cached, else None."""
    root = cache_dir()
    return binary_path(root) if (root / ".complete").exists() and binary_path(root).exists() else None


def install() -> Path:
    """Installs opencode-ai and its linux-x64 binary from npm once (flock'd); returns the binary."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".opencode-{VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / ".complete").exists() and binary_path(root).exists():
            return binary_path(root)
        for leftover in ("node_modules", "package.json", "package-lock.json"):
            p = root / leftover
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        (root / "package.json").write_text('{"name": "agent-rl-opencode-fixture", "private": true}\n')
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--no-save", "--prefix", str(root), *PACKAGES],
            check=True, stdout=subprocess.DEVNULL,
        )
        out = subprocess.run([str(binary_path(root)), "--version"], capture_output=True, text=True, timeout=scaled(60))
        if out.returncode != 0 or out.stdout.strip() != VERSION:
            raise RuntimeError(f"opencode --version gave {out.returncode} {out.stdout!r} {out.stderr[-500:]!r}, expected {VERSION}")
        (root / ".complete").touch()
        return binary_path(root)


if __name__ == "__main__":
    print(install())
    sys.exit(0)
