"""Runs a process the way a sandbox pod runs its container, on this machine: in a private mount
namespace where /opt/agent-rl is the image layout (read-only), /root a fresh tmpfs (the HOME
emptyDir: HOME=/root, TRL's opencode example's SANDBOX_HOME), /home/user a link to it (as the
image lays it out: python/image/install-layout.sh) and /tmp a fresh tmpfs holding /tmp/workspace
(standing in for the /workspace emptyDir, the working dir), as the rendered pod's uid on a read-only root (the
template's readOnlyRootFilesystem; `rendered` reads both, and the further emptyDirs, from a pod spec). Root and a
writable root are for a test that says why. Further emptyDirs (the Harbor pools' /tests,
/solution, ...) are tmpfs mounts under EMPTYDIR_ROOT, made as the kubelet makes an emptyDir for a pod
with an fsGroup: owned by root, group fsGroup, mode 2777 (kubelet pkg/volume/volume_linux.go
SetVolumeOwnership); the host has no /tests, so they sit at EMPTYDIR_ROOT + their pod path. Needs
root (unshare -m); the host's /opt, /root, /home and /tmp are untouched (the mounts exist only in
the namespace). The test's own Python may live under the host's /root or /tmp (run-tests.sh puts
its venv under ~/.cache): its prefixes are bound back read-only at their paths, nothing else."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

SETUP = r"""set -e
image_root=$1; uid=$2; keep=$3; emptydirs=$4; fsgroup=$5; rootfs=$6; volumes=$7; secrets=$8; at=$9; shift 9
IFS=:
for p in $emptydirs; do
  if [ -n "$volumes" ]; then mkdir -p "$volumes$p"; chown "0:$fsgroup" "$volumes$p"; chmod 2777 "$volumes$p"; fi
done
unset IFS
if [ "$rootfs" = ro ]; then mount --bind / /; mount -o remount,bind,ro /; fi
mount -t tmpfs -o mode=0755 tmpfs /opt
IFS=:
for p in $emptydirs; do
  mkdir -p "$at$p"
  if [ -n "$volumes" ]; then
    mount --bind "$volumes$p" "$at$p"
    mount -o remount,bind,rw "$at$p"
  else
    mount -t tmpfs -o "uid=0,gid=$fsgroup,mode=2777" tmpfs "$at$p"
  fi
done
for s in $secrets; do
  p=${s%%=*}; rest=${s#*=}; src=${rest%=*}; mode=${rest##*=}
  mkdir -p "$at$p"
  mount -t tmpfs -o "mode=0755" tmpfs "$at$p"
  for f in "$src"/*; do install -o 0 -g "$fsgroup" -m "$mode" "$f" "$at$p/"; done
  mount -o remount,ro "$at$p"
done
unset IFS
mkdir /opt/agent-rl /opt/.host-root /opt/.host-tmp
mount --bind "$image_root/opt/agent-rl" /opt/agent-rl
mount -o remount,bind,ro /opt/agent-rl
mount --bind /root /opt/.host-root
mount --bind /tmp /opt/.host-tmp
mount -t tmpfs -o mode=0700 tmpfs /root
mount -t tmpfs -o mode=1777 tmpfs /tmp
IFS=:
for p in $keep; do
  case $p in /root/*) host=/opt/.host-root/${p#/root/} ;; /tmp/*) host=/opt/.host-tmp/${p#/tmp/} ;; *) continue ;; esac
  mkdir -p "$p"
  mount --bind "$host" "$p"
  mount -o remount,bind,ro "$p"
done
unset IFS
umount /opt/.host-root /opt/.host-tmp
rmdir /opt/.host-root /opt/.host-tmp
mount -t tmpfs -o mode=0755 tmpfs /home
ln -s /root /home/user
mkdir -m 0700 /tmp/workspace
if [ "$uid" != root ]; then
  chown "$uid:$uid" /root /tmp/workspace
  # The dirs mkdir -p made above the bound-back paths (/root/.cache, ...) are HOME's, as in the pod's HOME emptyDir:
  # the uid's, or the agent could not make ~/.cache/<tool> beside them. The bound paths themselves stay read-only.
  IFS=:
  for p in $keep; do
    d=$(dirname "$p")
    while [ "$d" != /root ] && [ "$d" != /tmp ] && [ "$d" != / ]; do chown "$uid:$uid" "$d" 2>/dev/null || true; d=$(dirname "$d"); done
  done
  unset IFS
fi
cd /tmp/workspace
if [ "$uid" = root ]; then exec "$@"; fi
exec setpriv --reuid "$uid" --regid "$uid" --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs "$@"
"""

#: HOME inside the namespace, and the alias that leads to it (components/sandbox/model.ts).
HOME = "/root"
HOME_ALIAS = "/home/user"


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
    """python/image/install-layout.sh, as the Dockerfile runs it, into `prefix`, and the verifier beside it as the
    Dockerfile installs it (`install -m 0444 ... /opt/agent-rl/rollout_keys.py`)."""
    repo_python = Path(__file__).resolve().parents[1]
    pkg = repo_python / "agent_rl_sandbox"
    subprocess.run(["sh", str(repo_python / "image/install-layout.sh"), str(stock_home), str(pkg / "runtime.py"), str(pkg / "forwarder.py"), str(prefix)], check=True)
    subprocess.run(["install", "-m", "0444", str(pkg / "rollout_keys.py"), str(prefix / "opt/agent-rl/rollout_keys.py")], check=True)


#: The pod paths sandbox_root always makes (HOME, its alias, the working dir's stand-in, /tmp): not extra emptyDirs.
BUILT_IN_DIRS = frozenset({HOME, HOME_ALIAS, "/workspace", "/tmp"})


def rendered(pod_spec: Any, container: Any) -> dict[str, Any]:
    """`command`'s uid, fs_group, empty_dirs and read_only_root for `container` of `pod_spec` (the manifest's dicts, or
    kubernetes client models as the simulated cluster's pods carry them): the container's securityContext over the
    pod's, and every emptyDir it mounts beyond the built-in ones. A container with no uid, uid 0 or a writable root
    is refused: a test of it would run more kindly than the plan's pods."""
    if not isinstance(pod_spec, dict):
        from kubernetes.client import ApiClient

        pod_spec, container = (ApiClient().sanitize_for_serialization(x) for x in (pod_spec, container))
    pod_sc, c_sc = pod_spec.get("securityContext") or {}, container.get("securityContext") or {}
    uid = c_sc.get("runAsUser", pod_sc.get("runAsUser"))
    if uid in (None, 0) or c_sc.get("readOnlyRootFilesystem") is not True:
        raise ValueError(f"container {container.get('name')}: runAsUser {uid!r}, readOnlyRootFilesystem "
                         f"{c_sc.get('readOnlyRootFilesystem')!r}: not how the plan runs its sandboxes")
    empty = {v["name"] for v in pod_spec.get("volumes") or [] if "emptyDir" in v}
    dirs = [m["mountPath"] for m in container.get("volumeMounts") or [] if m["name"] in empty and m["mountPath"] not in BUILT_IN_DIRS]
    return {"uid": uid, "fs_group": pod_sc.get("fsGroup"), "empty_dirs": dirs, "read_only_root": True}


#: Where the extra emptyDirs sit inside the namespace: the pod's /tests is EMPTYDIR_ROOT + "/tests".
EMPTYDIR_ROOT = "/opt/pod"

#: The working dir inside the namespace (the pod's is /workspace, which this machine lacks).
WORKDIR = "/tmp/workspace"


def host_root_paths() -> list[str]:
    """This Python's prefixes that sit under the host's /root or /tmp (bound back into the fresh ones)."""
    keep = []
    for p in {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}:
        if p.startswith(("/root/", "/tmp/")) and os.path.isdir(p):
            keep.append(p)
    return sorted(keep)


def command(image_root: Path, argv: list[str], *, uid: int | None, own_pids: bool = False,
            empty_dirs: Sequence[str] = (), fs_group: int | None = None, read_only_root: bool = True,
            volumes: Path | None = None, secrets: Sequence[tuple[str, Path, int]] = (), emptydir_root: str = EMPTYDIR_ROOT) -> list[str]:
    """The argv that runs `argv` in a sandbox root. With `own_pids` it also gets its own PID namespace,
    as a pod's container has: `argv` is its pid 1, and when the returned process (unshare) dies, by any
    signal, the kernel kills everything started inside (what a kubelet's container stop does to
    background processes of an exec, which leave the runtime's process group). `empty_dirs` (pod paths)
    are made under EMPTYDIR_ROOT as emptyDirs of a pod with `fs_group`: tmpfs mounts, or with `volumes` (a host dir)
    binds of volumes + their pod path, which outlive the container as a pod's emptyDir outlives a container restart.
    `secrets` are Secret volumes: (pod path, host dir, mode): a read-only tmpfs at EMPTYDIR_ROOT + pod path holding the
    host dir's files, owned by root, group `fs_group`, with the volume's defaultMode (as the kubelet makes them).
    `emptydir_root` "" puts the volumes at their own paths, for a caller whose root has them (a chroot that made them).
    `read_only_root` remounts / read-only."""
    if (empty_dirs or secrets) and fs_group is None:
        raise ValueError("empty_dirs and secrets need the pod's fs_group (the kubelet makes them group-owned by it)")
    for path, host, _mode in secrets:
        if any(c in f"{path}{host}" for c in ":="):
            raise ValueError(f"secret volume {path} from {host}: ':' and '=' separate the list")
    keep = ":".join(host_root_paths())
    pids = ["--pid", "--kill-child"] if own_pids else []
    return ["unshare", "-m", *pids, "--propagation", "private", "bash", "-c", SETUP, "sandbox-root", str(image_root),
            "root" if uid is None else str(uid), keep, ":".join(empty_dirs), str(fs_group if fs_group is not None else 0),
            "ro" if read_only_root else "rw", str(volumes or ""), ":".join(f"{p}={h}={m:o}" for p, h, m in secrets), emptydir_root, *argv]


def enter(pid: int, argv: list[str], *, uid: int) -> list[str]:
    """The argv that runs `argv` inside the running container `pid` (one `command` started, without own_pids), as
    `kubectl exec` does: its mount and network namespaces, its root and working dir (the target's: its root is the
    read-only bind over the namespace's /, which setns alone would not give), `uid` with no capabilities."""
    return ["nsenter", "-t", str(pid), "-m", "-n", "--root", "--wd", "setpriv", "--reuid", str(uid), "--regid", str(uid),
            "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", *argv]


def in_container(pid: int, path: str) -> Path:
    """`path` of the running container `pid` as this (root) process reads it: through the container's root."""
    return Path(f"/proc/{pid}/root") / path.lstrip("/")
