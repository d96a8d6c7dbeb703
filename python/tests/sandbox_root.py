"""Runs a process the way a sandbox pod runs its container, on this machine: in a private mount
namespace where /opt/agent-rl is the image layout (read-only), /home a fresh tmpfs holding an
empty /home/user (the HOME emptyDir) and /tmp a fresh tmpfs holding /tmp/workspace (standing in
for the /workspace emptyDir, the working dir), optionally as uid 1000. Needs root (unshare -m);
the host's /opt, /home and /tmp are untouched (the mounts exist only in the namespace)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SETUP = r"""set -e
image_root=$1; uid=$2; shift 2
mount -t tmpfs -o mode=0755 tmpfs /opt
mkdir /opt/agent-rl
mount --bind "$image_root/opt/agent-rl" /opt/agent-rl
mount -o remount,bind,ro /opt/agent-rl
mount -t tmpfs -o mode=0755 tmpfs /home
mkdir -m 0700 /home/user
mount -t tmpfs -o mode=1777 tmpfs /tmp
mkdir -m 0700 /tmp/workspace
if [ "$uid" != root ]; then chown "$uid:$uid" /home/user /tmp/workspace; fi
cd /tmp/workspace
if [ "$uid" = root ]; then exec "$@"; fi
exec setpriv --reuid "$uid" --regid "$uid" --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs "$@"
"""


def available() -> str | None:
    """Why sandbox roots cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (unshare -m)"
    for tool in ("unshare", "setpriv", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    if probe.returncode != 0:
        return f"unshare -m failed: {probe.stderr.decode(errors='replace').strip()}"
    return None


def install_layout(stock_home: Path, prefix: Path) -> None:
    """python/image/install-layout.sh, as the Dockerfile runs it, into `prefix`."""
    repo_python = Path(__file__).resolve().parents[1]
    subprocess.run(
        ["sh", str(repo_python / "image/install-layout.sh"), str(stock_home), str(repo_python / "agent_rl_sandbox/runtime.py"), str(prefix)],
        check=True,
    )


#: The working dir inside the namespace (the pod's is /workspace, which this machine lacks).
WORKDIR = "/tmp/workspace"


def command(image_root: Path, argv: list[str], *, uid: int | None) -> list[str]:
    return ["unshare", "-m", "--propagation", "private", "bash", "-c", SETUP, "sandbox-root", str(image_root), "root" if uid is None else str(uid), *argv]
