"""The training trace, as the agent would attack it: read it, rewrite it, replace its recorder,
take its ports. And the forwarder's bounds: large bodies, a connection burst.

The pod is a network namespace the test makes (netns.py) holding both of the template's containers as it runs them
(sandbox_root.rendered: each its uid on a read-only root, from the image layout): the forwarder with its exact command,
the runtime with its own; the agent's commands run in the runtime's container as the sandbox uid (sandbox_root.enter,
as `kubectl exec` does), and the trainer is this process, on the host's end of the veth pair (another address, as another
pod is). The model is stub_model.StubModel, a STAND-IN for vLLM (token ids and logprobs the way
vLLM returns them), on the host's end.

Each attack is checked against a control, so the probe is not blind: the harness's capture proxy as
it runs today, a process of the agent's uid on its port (a stand-in: `python3 -m http.server`), which
the same attacks kill and replace.

On main's code (before the trace port and the supervisor): no trace port (the trace tests fail
at their first read), and killing the forwarder's one process frees its port to the agent.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import pytest

import netns
import sandbox_root
from agent_rl_sandbox import RuntimeHandle, SandboxError
from conftest import free_port, stop_process, wait_http
from stub_model import StubModel
from test_forwarder import PYTHON3, SYSTEM_PATH, deliver_rollout_key, image_layout, start_forwarder
from test_plan_contract import container, forwarder, plain_env, plan_facts
from waits import scaled, wait_for

#: A rollout key's shape: the template's forwarder takes only its rollout's key, delivered on its key port.
KEY = "rk1.trust-test-3f1a9cyyyyyyyyyyyyyyyyyyyyyyyyyy"
MiB = 1024 * 1024

needs_root = pytest.mark.skipif(
    netns.missing_prerequisite() is not None or sandbox_root.available() is not None or PYTHON3 is None,
    reason=str(netns.missing_prerequisite() or sandbox_root.available() or "no python3 on the system PATH"),
)


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


class Pod:
    """One sandbox pod: a network namespace with the template's two containers as it runs them: the forwarder (its uid,
    its command) and the runtime (the sandbox uid, its command), each on a read-only root from the image layout.
    `prefix` runs before each container's command (joining the pod's cgroup)."""

    def __init__(self, tmp: Path, upstream_host: str | Callable[[str], str] | None = None, *, prefix: list[str] = (),
                 flags: dict[str, str] | None = None) -> None:
        facts = plan_facts()
        f, c = forwarder(facts), container(facts)
        spec = facts["template"]["podTemplate"]["spec"]
        self.agent_uid = sandbox_root.rendered(spec, c)["uid"]
        self.fwd_uid = sandbox_root.rendered(spec, f)["uid"]
        assert self.fwd_uid != self.agent_uid
        image_root = image_layout(tmp)
        self.ns = netns.create(os.getpid() % 240 + 7)
        self.model = StubModel(host=self.ns.host_ip)
        self.runtime: subprocess.Popen | None = None
        argv = list(f["command"])
        self.port = int(flag(argv, "--port"))
        self.trace_port = int(flag(argv, "--trace-port")) if "--trace-port" in argv else 7101
        if callable(upstream_host):
            upstream_host = upstream_host(self.ns.host_ip)  # an upstream of the test's own on the host's end
        argv[argv.index("--upstream") + 1] = upstream_host or self.model.url
        for name, value in (flags or {}).items():  # a rendered flag at a test's value (a small bound)
            argv[argv.index(name) + 1] = value
        assert "env" not in f, "no shared key in the forwarder's env: the rollout's key is delivered"
        self.log_path = tmp / "forwarder.log"
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [*prefix, *self.ns.exec_argv(*sandbox_root.command(image_root, argv, **sandbox_root.rendered(spec, f)))],
            env={"PATH": SYSTEM_PATH},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        # The agent's container: the runtime with the template's command and env, where the agent's commands run.
        self.runtime_port = int(flag(c["command"], "--port"))
        with open(tmp / "runtime.log", "wb") as rlog:
            self.runtime = subprocess.Popen(
                [*prefix, *self.ns.exec_argv(*sandbox_root.command(image_root, list(c["command"]), **sandbox_root.rendered(spec, c)))],
                env={**plain_env(c), "PATH": SYSTEM_PATH}, stdout=rlog, stderr=subprocess.STDOUT,
            )
        self.sandbox = RuntimeHandle(f"http://{self.ns.ns_ip}:{self.runtime_port}", sandbox_id="pod",
                                     trace_url=f"http://{self.ns.ns_ip}:{self.trace_port}")
        wait_http(f"{self.sandbox.base_url}{c['readinessProbe']['httpGet']['path']}", proc=self.runtime)
        wait_for("the forwarder listens", lambda: self.proc.poll() is not None or self.listening(self.port), 15)
        assert self.proc.poll() is None, self.log_path.read_text()
        # The trainer's delivery, on the pod's address (the template's --key-host 0.0.0.0 --key-port).
        deliver_rollout_key(self.ns.ns_ip, int(flag(argv, "--key-port")), KEY)

    def listening(self, port: int) -> bool:
        return self.agent(AGENT_CONNECTS, str(port)).returncode == 0

    def agent_argv(self, *argv: str) -> list[str]:
        """`argv` as the agent runs it: in the runtime's container (its mounts, the pod's network), as the sandbox uid."""
        return sandbox_root.enter(self.runtime.pid, list(argv), uid=self.agent_uid)

    def agent(self, code: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """`code` run by the agent: python3 in the runtime's container, as the sandbox uid."""
        return subprocess.run(
            self.agent_argv(PYTHON3, "-I", "-c", code, *args),
            env={"PATH": SYSTEM_PATH},
            capture_output=True,
            text=True,
            timeout=scaled(timeout),
        )

    def agent_json(self, code: str, *args: str, timeout: float = 30) -> object:
        r = self.agent(code, *args, timeout=timeout)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def forwarder_pids(self) -> list[int]:
        """The forwarder's processes: the one ip-netns-exec/setpriv became, and its children."""
        top = self.proc.pid
        kids = Path(f"/proc/{top}/task/{top}/children").read_text().split()
        return [top, *map(int, kids)]

    def trace(self) -> dict:
        """What the trainer reads: the trace port on the pod's address, through the backend's handle."""
        return self.sandbox.fetch_trace()

    def close(self) -> None:
        if self.runtime is not None:
            stop_process(self.runtime)
        stop_process(self.proc)
        self.model.stop()
        self.ns.delete()


@pytest.fixture
def pod(tmp_path):
    p = Pod(tmp_path)
    yield p
    p.close()


#: The agent connects to a loopback port: exit 0 when something accepts (the in-pod bound scaled as the test's).
AGENT_CONNECTS = """
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=CONNECT_TIMEOUT_S).close()
except OSError:
    sys.exit(1)
""".replace("CONNECT_TIMEOUT_S", repr(scaled(1)))

#: The agent's model calls (opencode through the capture proxy, or straight): one JSON, one SSE.
AGENT_CALLS = r'''
import json, sys, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions"
got = []
for stream in (False, True):
    body = {"model": "stub/model-1", "messages": [{"role": "user", "content": f"call {len(got)}"}], "logprobs": True, "return_token_ids": True, "stream": stream}
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as r:
        raw = r.read()
    if not stream:
        a = json.loads(raw)
        got.append({"prompt": a["prompt_token_ids"], "ids": a["choices"][0]["token_ids"], "lps": [c["logprob"] for c in a["choices"][0]["logprobs"]["content"]]})
    else:
        ids, lps, prompt = [], [], None
        for line in raw.decode().splitlines():
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                c = json.loads(line[5:])
                prompt = c.get("prompt_token_ids", prompt)
                for ch in c["choices"]:
                    ids += ch.get("token_ids") or []
                    lps += [x["logprob"] for x in (ch.get("logprobs") or {}).get("content") or []]
        got.append({"prompt": prompt, "ids": ids, "lps": lps})
print(json.dumps(got))
'''.replace("REQUEST_TIMEOUT_S", repr(scaled(30)))


#: The agent reads the trace from inside the pod: loopback and the pod's own address.
AGENT_READS_TRACE = r'''
import json, sys, urllib.request, urllib.error
out = {}
for host in ("127.0.0.1", sys.argv[2]):
    try:
        with urllib.request.urlopen(f"http://{host}:{sys.argv[1]}/trace", timeout=REQUEST_TIMEOUT_S) as r:
            out[host] = [r.status, r.read().decode()[:200]]
    except urllib.error.HTTPError as e:
        out[host] = [e.code, e.read().decode()[:200]]
    except OSError as e:
        out[host] = [type(e).__name__, ""]
print(json.dumps(out))
'''.replace("REQUEST_TIMEOUT_S", repr(scaled(10)))


#: The agent reads the trace from an address of the pod that is not the one it connects to: it binds its socket to the
#: pod IP and connects to loopback (the kernel routes it: both are the pod's), so neither end is both loopback and equal.
AGENT_READS_TRACE_CROSSED = r"""
import json, socket, sys
port, pod_ip = int(sys.argv[1]), sys.argv[2]
out = {}
for src, dst in ((pod_ip, "127.0.0.1"), ("127.0.0.1", pod_ip)):
    s = socket.socket()
    s.settimeout(REQUEST_TIMEOUT_S)
    try:
        s.bind((src, 0))
        s.connect((dst, port))
        s.sendall(b"GET /trace HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = b""
        while piece := s.recv(65536):
            got += piece
        out[f"{src}->{dst}"] = got.decode("latin-1")[:300]
    except OSError as e:
        out[f"{src}->{dst}"] = type(e).__name__
    finally:
        s.close()
print(json.dumps(out))
""".replace("REQUEST_TIMEOUT_S", repr(scaled(10)))

#: The agent holds the trace port's connections (slowloris): `n` connections from inside the pod, each with a request
#: line and then a byte of a header now and then, so no idle timeout ever fires. It reports how many the forwarder
#: closed, and stops once all are (or after `seconds`).
AGENT_HOLDS_TRACE = r"""
import json, socket, sys, time
port, pod_ip, n, seconds = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
held = []
for i in range(n):
    s = socket.socket()
    if i % 2:
        s.bind((pod_ip, 0))
        s.connect(("127.0.0.1", port))
    else:
        s.connect((pod_ip, port))
    try:
        s.sendall(b"GET /trace HTTP/1.1\r\n")
    except OSError:
        pass
    s.setblocking(False)
    held.append(s)
print("holding", flush=True)
closed = set()
deadline = time.monotonic() + seconds
while len(closed) < n and time.monotonic() < deadline:
    for i, s in enumerate(held):
        if i in closed:
            continue
        try:
            if s.recv(65536) == b"":
                closed.add(i)
        except BlockingIOError:
            try:
                s.send(b"X")
            except OSError:
                closed.add(i)
        except OSError:
            closed.add(i)
    time.sleep(0.2)
print(json.dumps({"held": n, "closed": len(closed)}), flush=True)
"""

#: The agent frames its calls to desync the forwarder: two requests in one write, a chat request as the body of a GET,
#: `Transfer-Encoding: identity` then `chunked`, and two Content-Lengths (the first is taken); prints each connection's
#: status lines.
AGENT_PIPELINES = r"""
import json, socket, sys
port = int(sys.argv[1])
def chat(i, extra=b""):
    body = json.dumps({"model": "stub/model-1", "messages": [{"role": "user", "content": f"p{i}"}]}).encode()
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra
            + b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
close = b"Connection: close\r\n"
inner = chat(3, close)
body = json.dumps({"model": "stub/model-1", "messages": [{"role": "user", "content": "p5"}]}).encode()
ways = {
    "pipelined": chat(1) + chat(2, close),
    "chat in a GET's body": b"GET /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(inner) + inner,
    "TE identity, chunked": chat(4, close + b"Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n"),
    "two Content-Lengths": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nContent-Length: 5\r\n\r\n%s" % (len(body), body) + chat(6, close),
}
out = {}
for name, data in ways.items():
    s = socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S)
    s.sendall(data)
    got = b""
    while piece := s.recv(65536):
        got += piece
    s.close()
    out[name] = [line.decode() for line in got.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]
print(json.dumps(out))
""".replace("REQUEST_TIMEOUT_S", repr(scaled(30)))


#: The agent tries to sniff the pod's traffic (the forwarder's upstream requests carry the key, in plain HTTP to an
#: in-cluster ingress): a packet socket and a raw TCP socket in the pod's network namespace, then the same in a user
#: namespace of its own (where it would hold every capability, but over no network namespace of the pod's).
AGENT_SNIFFS = r"""
import ctypes, errno, json, os, socket
def sockets():
    got = {}
    for name, args in (("packet", (socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))), ("raw tcp", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP))):
        try:
            socket.socket(*args).close()
            got[name] = "opened"
        except OSError as e:
            got[name] = errno.errorcode.get(e.errno, str(e.errno))
    return got
out = {"pod": sockets()}
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    res = {"unshare": "ok" if libc.unshare(0x10000000) == 0 else errno.errorcode.get(ctypes.get_errno(), "?")}  # CLONE_NEWUSER
    if res["unshare"] == "ok":
        res.update(sockets())
    os.write(w, json.dumps(res).encode())
    os._exit(0)
os.close(w)
out["own user namespace"] = json.loads(os.read(r, 65536))
os.waitpid(pid, 0)
print(json.dumps(out))
"""


#: The agent goes after a process: signals, its memory, its env; and after its port: every bind it can try.
AGENT_ATTACKS = r'''
import ctypes, errno, json, os, signal, socket, sys, time
pids = [int(p) for p in sys.argv[1].split(",")]
port = int(sys.argv[2])
out = {"kill": {}, "mem": {}, "ptrace": {}, "bind": {}}
libc = ctypes.CDLL(None, use_errno=True)
for pid in pids:
    try:
        with open(f"/proc/{pid}/mem", "rb") as f:
            out["mem"][pid] = "read"
    except OSError as e:
        out["mem"][pid] = errno.errorcode.get(e.errno, str(e.errno))
    rc = libc.ptrace(16, pid, None, None)  # PTRACE_ATTACH
    out["ptrace"][pid] = "attached" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
    try:
        os.kill(pid, signal.SIGKILL)
        out["kill"][pid] = "killed"
    except OSError as e:
        out["kill"][pid] = errno.errorcode.get(e.errno, str(e.errno))
for pid in [p for p in pids if out["kill"][p] == "killed"]:
    for _ in range(500):  # bounded: until it is gone or a zombie (its sockets closed)
        try:
            if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        except OSError:
            break
        time.sleep(0.01)
held = []
for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0"), (socket.AF_INET, sys.argv[3]), (socket.AF_INET6, "::")):
    for opts in ((), ("SO_REUSEADDR",), ("SO_REUSEADDR", "SO_REUSEPORT")):
        s = socket.socket(family, socket.SOCK_STREAM)
        for o in opts:
            s.setsockopt(socket.SOL_SOCKET, getattr(socket, o), 1)
        try:
            s.bind((host, port))
            s.listen(8)
            out["bind"][f"{host} {'+'.join(opts) or '-'}"] = "bound"
            held.append(s)
        except OSError as e:
            out["bind"][f"{host} {'+'.join(opts) or '-'}"] = errno.errorcode.get(e.errno, str(e.errno))
            s.close()
print(json.dumps(out))
'''

#: The agent's bind loop while the forwarder's serving process is down: bounded, it reports the first success.
AGENT_RACES = r'''
import json, socket, sys, time
port, tries = int(sys.argv[1]), int(sys.argv[2])
print("racing", flush=True)
for i in range(tries):
    for host in ("127.0.0.1", "0.0.0.0"):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            s.listen(8)
            print(json.dumps({"bound": host, "try": i}))
            sys.exit(0)
        except OSError:
            s.close()
    time.sleep(0.002)
print(json.dumps({"bound": None, "tries": tries}))
'''


@needs_root
def test_the_trace_is_what_the_model_answered_and_only_the_trainer_reads_it(pod):
    calls = pod.agent_json(AGENT_CALLS, str(pod.port))
    t = pod.trace()
    assert (t["calls"], t["recorded"], t["dropped"], t["restarts"], t["complete"]) == (2, 2, 0, 0, True), t
    for got, entry in zip(calls, t["entries"]):
        (choice,) = entry["choices"]
        assert entry["prompt_token_ids"] == got["prompt"] and choice["token_ids"] == got["ids"] and choice["logprobs"] == got["lps"]
        assert entry["status"] == 200 and choice["finish_reason"] == "stop"
    # From inside the pod (the agent's side), loopback or the pod's address: refused.
    seen = pod.agent_json(AGENT_READS_TRACE, str(pod.trace_port), pod.ns.ns_ip)
    for host, (status, body) in seen.items():
        assert status == 403 and "for the trainer" in body, (host, status, body)
    # Issue 56 red team: a socket bound to the pod IP and connected to loopback read the whole trace (the peer was
    # neither loopback nor the address it arrived on), and the agent's silent connections held both of the trace port's
    # slots, so the trainer's read waited for as long as the agent trickled bytes. On the code before: "the agent read
    # the trace (<pod IP>->127.0.0.1): HTTP/1.1 200 OK", and without that check, the trainer's read: TimeoutError.
    seen = pod.agent_json(AGENT_READS_TRACE_CROSSED, str(pod.trace_port), pod.ns.ns_ip)
    for way, got in seen.items():
        assert '"calls"' not in got and '"entries"' not in got, f"the agent read the trace ({way}): {got[:200]}"
    holder = subprocess.Popen(
        pod.agent_argv(PYTHON3, "-I", "-c", AGENT_HOLDS_TRACE, str(pod.trace_port), pod.ns.ns_ip, "16", repr(scaled(60))),
        env={"PATH": SYSTEM_PATH}, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        # The trainer's read, while the agent holds its connections: answered, not queued behind them.
        with urllib.request.urlopen(f"http://{pod.ns.ns_ip}:{pod.trace_port}/trace", timeout=scaled(10)) as r:
            header = json.loads(r.readline())
        assert (header["calls"], header["recorded"], header["complete"]) == (2, 2, True), header
        out, _ = holder.communicate(timeout=scaled(90))
        assert json.loads(out) == {"held": 16, "closed": 16}, out
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    # The trace port serves nothing else, and nothing that writes.
    for method in ("POST", "PUT", "DELETE"):
        req = urllib.request.Request(f"http://{pod.ns.ns_ip}:{pod.trace_port}/trace", data=b"{}", method=method)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=scaled(10))
        assert e.value.code in (404, 501), (method, e.value.code)
    assert pod.trace()["entries"] == t["entries"], "nothing the agent did changed the trace"
    # Issue 56 red team (held): however the agent frames its calls, each chat request the model answers is one call of
    # the record, recorded (the forwarder frames its upstream requests itself, one connection each).
    before = len(pod.model.chat_requests())
    seen = pod.agent_json(AGENT_PIPELINES, str(pod.port))
    assert seen == {"pipelined": ["HTTP/1.1 200 OK"] * 2, "chat in a GET's body": ["HTTP/1.1 200 OK"] * 2,
                    "TE identity, chunked": ["HTTP/1.1 200 OK"], "two Content-Lengths": ["HTTP/1.1 200 OK"] * 2}, seen
    t = pod.trace()
    sent = [r["body"]["messages"][0]["content"] for r in pod.model.chat_requests()[before:]]
    assert sent == ["p1", "p2", "p3", "p4", "p5", "p6"], sent
    assert (t["calls"], t["recorded"], t["complete"]) == (8, 8, True), {k: v for k, v in t.items() if k != "entries"}


class AgentUidProxy:
    """CONTROL: the capture proxy as the harness runs it today, a process of the agent's uid on its
    port in the pod (a stand-in: the standard library's http.server)."""

    def __init__(self, p: Pod, port: int) -> None:
        self.port = port
        self.proc = subprocess.Popen(
            p.agent_argv(PYTHON3, "-I", "-m", "http.server", "--bind", "127.0.0.1", str(port), "--directory", "/"),
            env={"PATH": SYSTEM_PATH},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for("the control proxy listens", lambda: p.listening(port), 15)


@needs_root
def test_the_agent_can_neither_kill_nor_read_nor_bind_over_the_recorder(pod):
    pod.agent_json(AGENT_CALLS, str(pod.port))
    control = AgentUidProxy(pod, free_port())
    try:
        seen = pod.agent_json(AGENT_ATTACKS, ",".join(map(str, [control.proc.pid])), str(control.port), pod.ns.ns_ip)
        # CONTROL: the agent kills a process of its own uid and takes its port.
        assert seen["kill"][str(control.proc.pid)] == "killed", seen
        assert "bound" in seen["bind"].values(), seen
    finally:
        stop_process(control.proc)
    pids = pod.forwarder_pids()
    for port in (pod.port, pod.trace_port):
        seen = pod.agent_json(AGENT_ATTACKS, ",".join(map(str, pids)), str(port), pod.ns.ns_ip)
        assert set(seen["kill"].values()) == {"EPERM"}, seen
        assert set(seen["mem"].values()) <= {"EACCES", "EPERM"} and set(seen["ptrace"].values()) == {"EPERM"}, seen
        taken = {k for k, v in seen["bind"].items() if v == "bound"}
        if port == pod.port:
            # The model port is 127.0.0.1's: a socket on the pod IP's port 7100 takes nothing (no one calls it there);
            # every bind that would receive loopback's connections (127.0.0.1, 0.0.0.0, ::) is refused.
            taken = {k for k in taken if not k.startswith(pod.ns.ns_ip + " ")}
        assert not taken, (port, seen["bind"])
    # Issue 56 red team (held): nor sniff the forwarder's upstream traffic, which carries the key: no packet or raw
    # socket in the pod's network namespace (every capability dropped), none in a user namespace of the agent's own.
    seen = pod.agent_json(AGENT_SNIFFS)
    assert seen["pod"] == {"packet": "EPERM", "raw tcp": "EPERM"}, seen
    assert "opened" not in seen["own user namespace"].values(), seen
    t = pod.trace()
    assert pod.forwarder_pids() == pids and (t["calls"], t["recorded"], t["complete"]) == (2, 2, True), t


@needs_root
def test_the_ports_stay_held_when_the_serving_process_dies(pod):
    pod.agent_json(AGENT_CALLS, str(pod.port))
    pids = pod.forwarder_pids()
    # The serving process: the supervisor's child (on main's code, the forwarder's only process).
    serving = pids[-1]
    racer = subprocess.Popen(
        pod.agent_argv(PYTHON3, "-I", "-c", AGENT_RACES, str(pod.port), "1500"),
        env={"PATH": SYSTEM_PATH},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert racer.stdout.readline().strip() == "racing"
    os.kill(serving, signal.SIGKILL)  # as the kernel's OOM killer would
    out, _ = racer.communicate(timeout=scaled(60))
    assert json.loads(out)["bound"] is None, f"the agent took the forwarder's port: {out}"
    wait_for("the forwarder serves again", lambda: pod.listening(pod.port) and len(pod.forwarder_pids()) == len(pids), 15)
    # It serves again on the same socket, and the trace says what was lost.
    calls = pod.agent_json(AGENT_CALLS, str(pod.port))
    t = pod.trace()
    assert (t["restarts"], t["complete"], t["recorded"]) == (1, False, 2), t
    assert t["entries"][0]["choices"][0]["token_ids"] == calls[0]["ids"]
    assert "serving again on the same sockets (restart 1)" in pod.log_path.read_text()


# --- the forwarder's bounds -----------------------------------------------------------------------
class SlowSink:
    """An upstream that reads each body slowly, then answers a small JSON: requests pile up in the forwarder."""

    def __init__(self) -> None:
        self.bodies: list[int] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _answer(self) -> None:
                data = b'{"object": "list", "data": []}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                self._answer()

            def do_POST(self) -> None:  # noqa: N802
                left, n = int(self.headers.get("Content-Length", "0")), 0
                while left > 0:
                    piece = self.rfile.read(min(left, 256 * 1024))
                    if not piece:
                        break
                    left -= len(piece)
                    n += len(piece)
                    time.sleep(0.01)
                sink.bodies.append(n)
                self._answer()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def pss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def tree(pid: int) -> list[int]:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [pid, *(p for k in kids for p in tree(int(k)))]


@pytest.fixture
def loopback_forwarder(tmp_path):
    """The template's forwarder on this machine's loopback, as its own uid (no namespace: the bounds are about memory and sockets)."""
    sink = SlowSink()
    proc, port, _uid = start_forwarder(plan_facts(), sink.url, tmp_path)
    yield proc, port, sink
    stop_process(proc)
    sink.stop()


def post(port: int, size: int, *, body: bool = True) -> int:
    """One POST of a chat request of `size` bytes, one long user message (or its headers only), on a raw socket; the
    answer's status."""
    s = socket.create_connection(("127.0.0.1", port), timeout=scaled(120))
    try:
        s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n\r\n".encode())
        head, tail = b'{"messages": [{"role": "user", "content": "', b'"}]}'
        piece = b"a" * MiB
        left = size - len(head) - len(tail) if body else 0
        try:
            if body:
                s.sendall(head)
            while left > 0:
                s.sendall(piece[: min(left, MiB)])
                left -= min(left, MiB)
            if body:
                s.sendall(tail)
        except OSError:
            pass  # refused before the body was read
        status = s.makefile("rb").readline().split()
        return int(status[1]) if len(status) > 1 else 0
    finally:
        s.close()


@needs_root
def test_large_bodies_stay_below_the_forwarders_memory_limit(loopback_forwarder):
    proc, port, sink = loopback_forwarder
    from agent_rl_sandbox.forwarder import BODY_RESERVE_BYTES, MAX_BODY_BYTES

    # Nine 16 MiB bodies at once: on main's code, 21 MB to 168 MB (over the 128Mi limit).
    peak = [pss_mib(tree(proc.pid))]
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(post(port, MAX_BODY_BYTES))) for _ in range(9)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak.append(pss_mib(tree(proc.pid)))
        time.sleep(0.05)
    for t in threads:
        t.join()
    # Each reaches the upstream whole: normalised (SAMPLING_TABLE), padded to its declared length.
    assert results == [200] * 9 and sink.bodies == [MAX_BODY_BYTES + BODY_RESERVE_BYTES] * 9, (results, sink.bodies)
    assert max(peak) < 64, f"the forwarder's memory peaked at {max(peak):.0f} MiB (limit 128Mi)"
    assert post(port, MAX_BODY_BYTES + 1, body=False) == 413


@needs_root
def test_a_connection_burst_is_queued_not_reset(loopback_forwarder):
    _proc, port, _sink = loopback_forwarder
    results: list[str] = []
    lock = threading.Lock()

    def one() -> None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=scaled(60)) as r:
                outcome = str(r.status)
        except Exception as e:  # noqa: BLE001 - the outcome is counted
            outcome = type(e).__name__ + ("" if not getattr(e, "reason", None) else f":{type(e.reason).__name__}")
        with lock:
            results.append(outcome)

    # 200 at once (issue 42: a backlog of 5 reset 23 of them).
    threads = [threading.Thread(target=one) for _ in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(scaled(120))
    failed = [r for r in results if r != "200"]
    assert len(results) == 200 and not failed, f"{len(failed)} of 200 failed: {sorted(set(failed))}"
