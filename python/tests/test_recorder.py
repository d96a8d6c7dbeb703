"""Issue 56: the recorder the agent cannot displace, answers it cannot use to exhaust the recorder, and sampling it
cannot steer. Each attack runs as the agent would run it: the pod is a network namespace (netns.py), the forwarder runs
there with the template's exact command as its own uid, the agent's code as the sandbox uid, the trainer is this
process on the host's side. The model is stub_model.StubModel, a STAND-IN for vLLM, or, where an upstream must answer
what no model would (huge answers), `HugeAnswers`, a STAND-IN named as such.

What each test shows on the code before issue 56 is in its docstring.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agent_rl_sandbox.trusted_trace import UntrustedTrace, forwarder_calls
from conftest import stop_process
from test_forwarder import PYTHON3, SYSTEM_PATH
from test_sandbox_trust import AGENT_CALLS, Pod, as_uid, needs_root, pss_mib, tree
from waits import scaled, wait_for

MiB = 1024 * 1024


# --- a pids cgroup for the pod ----------------------------------------------------------------------
def pids_cgroup_root() -> Path | None:
    """Where pids cgroups can be made here: cgroup v1's pids hierarchy, or v2 with the pids controller."""
    v1 = Path("/sys/fs/cgroup/pids")
    if (v1 / "cgroup.procs").exists() and os.access(v1, os.W_OK):
        return v1
    v2 = Path("/sys/fs/cgroup")
    if "pids" in (v2 / "cgroup.controllers").read_text(errors="replace").split() if (v2 / "cgroup.controllers").exists() else False:
        return v2
    return None


class PidsCgroup:
    """The pod's PID limit (a kubelet's podPidsLimit): every process and thread of the pod counts against pids.max."""

    def __init__(self, limit: int) -> None:
        root = pids_cgroup_root()
        assert root is not None
        self.path = root / f"agent-rl-pod-{os.getpid()}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(limit))

    def prefix(self) -> list[str]:
        """An argv prefix that joins the cgroup (as root, before the namespace and uid change), then runs the rest."""
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.path)]

    def current(self) -> int:
        return int((self.path / "pids.current").read_text())

    def remove(self) -> None:
        for _ in range(100):  # bounded: the members were killed by their owners' cleanup
            try:
                self.path.rmdir()
                return
            except OSError:
                for pid in (self.path / "cgroup.procs").read_text().split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.05)


needs_pids_cgroup = pytest.mark.skipif(os.geteuid() != 0 or pids_cgroup_root() is None, reason="needs root and a writable pids cgroup")

#: The agent takes every PID the pod has left (forks until EAGAIN, bounded by the limit), says so, then on "bind" tries
#: every bind of both ports. A port it gets is served with its own trace: `restarts: 0, complete: true`, one entry.
AGENT_EXHAUSTS_AND_BINDS = r'''
import json, os, select, socket, sys
limit, ports, pod_ip = int(sys.argv[1]), [int(p) for p in sys.argv[2].split(",")], sys.argv[3]
r, w = os.pipe()
kids = 0
for _ in range(limit):  # bounded by the pod's limit: each fork takes one PID
    try:
        pid = os.fork()
    except BlockingIOError:
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)  # until the agent lets go (EOF)
        os._exit(0)
    kids += 1
print(json.dumps({"full": kids}), flush=True)
# Until told to bind: take every PID that frees up (the dying child's), as a fork loop in the pod would. Bounded.
for _ in range(GRAB_TRIES):
    if select.select([sys.stdin], [], [], 0.002)[0]:
        break
    try:
        pid = os.fork()
    except BlockingIOError:
        continue
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    kids += 1
sys.stdin.readline()
bound, held = {}, []
for port in ports:
    for host in ("127.0.0.1", "0.0.0.0", pod_ip):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            s.listen(8)
            bound[f"{host}:{port}"] = "bound"
            held.append((port, s))
        except OSError as e:
            bound[f"{host}:{port}"] = type(e).__name__
            s.close()
print(json.dumps(bound), flush=True)
forged = json.dumps({"calls": 1, "recorded": 1, "dropped": 0, "restarts": 0, "complete": True}) + "\n" + json.dumps(
    {"seq": 1, "status": 200, "model": "stub/model-1", "prompt_token_ids": [7], "choices": [{"index": 0, "token_ids": [42], "logprobs": [-0.01], "finish_reason": "stop"}]}) + "\n"
trace_socks = [s for port, s in held if port == ports[1]]
ready = select.select(trace_socks, [], [], TIMEOUT_S)[0] if trace_socks else []
for s in ready[:1]:  # the trainer's one read
    c, _ = s.accept()
    c.recv(65536)
    c.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nContent-Length: {len(forged)}\r\nConnection: close\r\n\r\n{forged}".encode())
    c.close()
sys.stdin.readline()
os.close(w)
'''.replace("TIMEOUT_S", repr(scaled(20))).replace("GRAB_TRIES", str(int(scaled(30) / 0.002)))


@needs_root
@needs_pids_cgroup
def test_the_agent_cannot_take_the_ports_by_exhausting_the_pods_pids(tmp_path):
    """The serving child dies (the OOM killer's pick) while the agent holds every PID the pod has left: the supervisor's
    fork fails, and it must keep the sockets and retry. On the code before issue 56 the fork's BlockingIOError ended the
    supervisor, the agent bound 7100 and 7101 and the trainer read the agent's trace: `restarts: 0, complete: true`."""
    cgroup = PidsCgroup(48)
    pod = Pod(tmp_path, prefix=cgroup.prefix())
    agent = None
    try:
        pod.agent_json(AGENT_CALLS, str(pod.port))
        serving = pod.forwarder_pids()[-1]
        agent = subprocess.Popen(
            [*cgroup.prefix(), *pod.ns.exec_argv(*as_uid(pod.agent_uid), PYTHON3, "-I", "-c", AGENT_EXHAUSTS_AND_BINDS, "48",
                                                 f"{pod.port},{pod.trace_port}", pod.ns.ns_ip)],
            env={"PATH": SYSTEM_PATH}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        full = json.loads(agent.stdout.readline())
        assert full["full"] > 0 and agent.poll() is None, full
        os.kill(serving, signal.SIGKILL)  # as the kernel's OOM killer would
        # Progress, either way: the supervisor gone (the old code) or its second failed fork logged.
        wait_for("the supervisor exits or fails to fork twice",
                 lambda: pod.proc.poll() is not None or pod.log_path.read_text().count("cannot start the serving process") >= 2, 30)
        agent.stdin.write("bind\n")
        agent.stdin.flush()
        binds = json.loads(agent.stdout.readline())
        taken = {k: v for k, v in binds.items() if v == "bound" and not k.startswith(f"{pod.ns.ns_ip}:{pod.port}")}
        if taken:
            try:
                seen = pod.trace()
            except Exception as e:  # noqa: BLE001 - shown in the failure
                seen = f"{type(e).__name__}: {e}"
            pytest.fail(f"the agent took {sorted(taken)} of {binds} (forwarder exit code {pod.proc.poll()}); the trainer read: {seen}")
        assert pod.proc.poll() is None, pod.log_path.read_text()
        # The agent lets go of the PIDs: the supervisor's next retry starts a child on the same sockets.
        agent.stdin.write("done\n")
        agent.stdin.flush()
        agent.wait(scaled(30))
        # A listening socket accepts into its backlog with no child: wait for the child itself.
        wait_for("a serving child again", lambda: len(pod.forwarder_pids()) > 1, 30)
        t = pod.trace()
        # Each child that could not start its threads under the exhausted limit is a restart of its own.
        assert t["restarts"] >= 1 and (t["complete"], t["recorded"]) == (False, 0), t
        with pytest.raises(UntrustedTrace, match="restarted"):
            forwarder_calls(t)
        assert "serving process started after" in pod.log_path.read_text()
    finally:
        if agent is not None:
            stop_process(agent, signal.SIGKILL)
        pod.close()
        cgroup.remove()


def test_a_failed_fork_is_retried_with_a_bounded_backoff_and_never_given_up(monkeypatch):
    """The supervisor's fork, failing 12 times (EAGAIN), then succeeding: retried with delays doubling up to the cap,
    never raised (on the code before issue 56 the first BlockingIOError ended the supervisor and freed its ports)."""
    from agent_rl_sandbox import forwarder

    failures = iter(range(12))

    def fork() -> int:
        if next(failures, None) is not None:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        return 4242  # the parent's side of a fork that worked

    slept: list[float] = []
    monkeypatch.setattr(forwarder.os, "fork", fork)
    assert forwarder.start_child(lambda keys: 0, None, lambda: False, sleep=slept.append) == 4242
    assert len(slept) == 12 and slept[:3] == [0.05, 0.1, 0.2] and max(slept) == forwarder.FORK_RETRY_MAX_SECONDS, slept
    # Stopped while failing: returns None (the supervisor then exits with 0), after no more than one more try.
    monkeypatch.setattr(forwarder.os, "fork", lambda: (_ for _ in ()).throw(BlockingIOError(11, "again")))
    stops = iter([False, False, True])
    assert forwarder.start_child(lambda keys: 0, None, lambda: next(stops), sleep=slept.append) is None
