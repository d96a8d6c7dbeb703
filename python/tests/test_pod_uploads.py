"""Harbor's folder uploads into a Harbor pool's pod, as the plan renders the pod: the sandbox template's
exact command as its uid (runAsUser 65532) on a read-only root, the image layout read-only, and the
Harbor pool's writable dirs (/tests, /solution, /logs, /installed-agent; harbor_plan_facts.ts) as the
kubelet makes emptyDirs for a pod with the template's fsGroup: owned by root, group fsGroup, mode 2777
(sandbox_root). Harbor copies the task's tests into /tests at grading and the oracle's solution into
/solution (harbor 0.25.0 ``harbor/verifier/verifier.py``, ``harbor/agents/oracle.py``) with
``environment.upload_dir``, which is ``RuntimeHandle.upload_dir`` with ``harbor_env.TRANSFER_DIR``
(/tmp) as the staging dir.

The task's folders are made here (a stand-in task); the runtime, the archive and tar are the real ones.
Needs root to make the namespace (sandbox_root.available()); the runtime itself never runs as root.
"""

from __future__ import annotations

import json
import subprocess
from functools import lru_cache

import pytest

from agent_rl_sandbox import RuntimeHandle

import sandbox_root
from conftest import REPO, free_port, stop_process, wait_http
from test_plan_contract import container, fake_stock_home, plain_env, plan_facts
from waits import scaled

#: harbor_env.TRANSFER_DIR (harbor_env imports harbor, which this venv lacks).
TRANSFER_DIR = "/tmp"


@lru_cache(maxsize=None)
def harbor_writable_dirs() -> tuple[str, ...]:
    """The Harbor pool's template's writable dirs, from the real resolve step."""
    out = subprocess.run(["node", "--import", "tsx", "python/harbor_tests/harbor_plan_facts.ts"], cwd=REPO, capture_output=True, text=True, timeout=scaled(120))
    assert out.returncode == 0, out.stderr
    (first, *_) = json.loads(out.stdout)["pools"]
    return tuple(first["writable"])


@pytest.mark.skipif(sandbox_root.available() is not None, reason=str(sandbox_root.available()))
def test_harbor_uploads_tests_and_solution_into_the_pools_root_owned_mounts_as_the_sandbox_uid(tmp_path):
    facts = plan_facts()
    c = container(facts)
    security = facts["template"]["podTemplate"]["spec"]["securityContext"]
    uid, fs_group = security["runAsUser"], security["fsGroup"]
    assert uid != 0
    # sandbox_root makes HOME, the working dir and /tmp itself; the Harbor dirs are the pool's further emptyDirs.
    harbor_dirs = [d for d in harbor_writable_dirs() if d not in ("/root", "/workspace", "/tmp")]
    assert {"/tests", "/solution"} <= set(harbor_dirs), harbor_dirs
    image_root = tmp_path / "image"
    sandbox_root.install_layout(fake_stock_home(tmp_path), image_root)
    port = free_port()
    argv = list(c["command"])
    argv[argv.index("--port") + 1] = str(port)
    argv += ["--host", "127.0.0.1"]
    env = {**plain_env(c), "PATH": "/usr/local/bin:/usr/bin:/bin"}
    log = open(tmp_path / "runtime.log", "wb")
    proc = subprocess.Popen(
        sandbox_root.command(image_root, argv, uid=uid, empty_dirs=harbor_dirs, fs_group=fs_group, read_only_root=True),
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    # The task's folders: an executable test script, a nested data file, the oracle's solution.
    tests = tmp_path / "task/tests"
    (tests / "data").mkdir(parents=True)
    (tests / "test.sh").write_text('#!/bin/sh\ncat "$(dirname "$0")/data/expected.json"\n')
    (tests / "test.sh").chmod(0o755)
    (tests / "data/expected.json").write_text('{"answer": 42}')
    solution = tmp_path / "task/solution"
    solution.mkdir()
    (solution / "solve.sh").write_text("#!/bin/sh\necho 42 > answer.txt\n")
    (solution / "solve.sh").chmod(0o755)
    pod = sandbox_root.EMPTYDIR_ROOT
    try:
        wait_http(f"http://127.0.0.1:{port}{c['readinessProbe']['httpGet']['path']}", proc=proc)
        h = RuntimeHandle(f"http://127.0.0.1:{port}", sandbox_id="harbor-pod")
        assert h.exec("id -u").stdout.strip() == str(uid)
        # The mounts as the kubelet leaves them: not the sandbox uid's, writable through the group.
        assert h.exec(f"stat -c '%u %g %a' {pod}/tests {pod}/solution").stdout.split("\n")[:2] == [f"0 {fs_group} 2777"] * 2
        assert h.exec("touch /probe").exit_code != 0, "the root filesystem is read-only"

        h.upload_dir(solution, f"{pod}/solution", staging_dir=TRANSFER_DIR)  # the oracle agent
        h.upload_dir(tests, f"{pod}/tests", staging_dir=TRANSFER_DIR)  # the verifier
        r = h.exec(f"{pod}/tests/test.sh")
        assert (r.exit_code, r.stdout) == (0, '{"answer": 42}'), r.stderr
        r = h.exec(f"cd {sandbox_root.WORKDIR} && {pod}/solution/solve.sh && cat answer.txt")
        assert (r.exit_code, r.stdout) == (0, "42\n"), r.stderr
        # The uploaded files are the sandbox uid's; the mount points keep their owner and mode.
        assert h.exec(f"stat -c '%u' {pod}/tests/test.sh").stdout.strip() == str(uid)
        assert h.exec(f"stat -c '%u %g %a' {pod}/tests").stdout.strip() == f"0 {fs_group} 2777"
        assert h.exec(f"ls -A {TRANSFER_DIR}").stdout.split() == ["workspace"], "the staged archives are removed"
        # A second upload into the same folder (a retried verifier) replaces the files.
        (tests / "data/expected.json").write_text('{"answer": 43}')
        h.upload_dir(tests, f"{pod}/tests", staging_dir=TRANSFER_DIR)
        assert h.read_text(f"{pod}/tests/data/expected.json") == '{"answer": 43}'
    finally:
        stop_process(proc)
        log.close()
    assert proc.returncode == 0, (tmp_path / "runtime.log").read_text()
