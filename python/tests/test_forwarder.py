"""The ingress key reaches only the forwarder, and the agent's uid cannot get it.

As the pool runs them (components/sandbox/kubernetes.ts): the runtime with the template's exact
command and agent env as the sandbox uid on the image layout (sandbox_root.rendered), and the forwarder
with the template's exact command as its own uid on a read-only root, from the same layout, taking its key on its key port. The agent is a
command run through the runtime as opencode's bash tool runs it (``bash -c`` under a background
job, beside a stand-in of the harness's capture proxy holding the placeholder key). It looks for
the key in its env, in every /proc/<pid>/environ and cmdline it can read, in the files it can
read, and at the forwarder: every other path, its headers and error bodies, an upstream that
echoes the request back. The forwarder must still reach the upstream with the right key and
stream SSE through.

The control (``key-in-agent-env``: the template before the forwarder, the key in the agent
container's env and so in the capture proxy's) must find the key: the probe is not blind.
Here the forwarder shares the host's PID namespace, so only the uid keeps the agent out of its
/proc entries; in the pod it has its own PID namespace too (shareProcessNamespace: false).
"""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agent_rl_sandbox import RuntimeHandle
from agent_rl_sandbox.forwarder import REDACTED, Redactor

import sandbox_root
from conftest import deliver_rollout_key, free_port, stop_process, wait_http
from waits import scaled, wait_for
from test_plan_contract import container, fake_stock_home, forwarder, plain_env, plan_facts

#: A rollout key's shape: the template's forwarder takes only its rollout's key, delivered on its key port.
KEY = "rk1.fwd-test-5b8e1f0c9d2a7e4bxxxxxxxxxxxxxxxxxx"
#: A system Python outside /root (the venv's may sit in root's home, which other uids cannot enter).
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
PYTHON3 = shutil.which("python3", path=SYSTEM_PATH)

needs_root = pytest.mark.skipif(
    sandbox_root.available() is not None or PYTHON3 is None,
    reason=str(sandbox_root.available() or "no python3 on the system PATH"),
)


class StubUpstream:
    """The ingress stand-in: records each request; echoes what it got (headers into the body and
    into X-Request-Id), answers a chosen status, or streams SSE in two parts with a pause."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.release = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, payload: dict, extra: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                stub.requests.append({"method": "GET", "path": self.path, "headers": dict(self.headers.items())})
                self._send(200, {"object": "list", "data": [{"id": "m"}], "seen_authorization": self.headers.get("Authorization")})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                stub.requests.append({"method": "POST", "path": self.path, "headers": dict(self.headers.items()), "body": body})
                echoed = {"echo": dict(self.headers.items())}
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()  # no length: the stream ends with the connection
                    # Longer than a rollout key: the forwarder's redactor holds back len(key) - 1 bytes of a stream.
                    self.wfile.write(b'data: {"part": 1, "pad": "' + b"p" * 64 + b'"}\n\n')
                    self.wfile.flush()
                    stub.release.wait(10)
                    self.wfile.write(b'data: {"part": 2}\n\ndata: [DONE]\n\n')
                    self.wfile.flush()
                    self.close_connection = True
                    return
                status = int(body.get("user") or 200)  # the status to answer, in a parameter the forwarder passes as sent
                self._send(status, echoed, {"X-Request-Id": self.headers.get("Authorization", ""), "Set-Cookie": "s=1"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def image_layout(tmp: Path) -> Path:
    """The sandbox image's layout (install-layout.sh on test_plan_contract's stand-in stock HOME), made once per test."""
    image_root = tmp / "image"
    if not image_root.exists():
        sandbox_root.install_layout(fake_stock_home(tmp), image_root)
    return image_root


def start_forwarder(facts: dict, upstream: str, tmp: Path) -> tuple[subprocess.Popen, int, int]:
    """The template's forwarder command as the template runs it (sandbox_root.rendered: its own uid, a read-only root,
    /opt/agent-rl/forwarder.py of the image layout), with this machine's ports and upstream."""
    f = forwarder(facts)
    spec = facts["template"]["podTemplate"]["spec"]
    port = free_port()
    argv = list(f["command"])
    argv[argv.index("--port") + 1] = str(port)
    if "--trace-port" in argv:
        argv[argv.index("--trace-port") + 1] = str(free_port())
    argv[argv.index("--upstream") + 1] = upstream
    # No key in its env (per-rollout keys): the trainer's delivery on the key port, here on loopback.
    assert "env" not in f
    key_port = free_port()
    argv[argv.index("--key-host") + 1] = "127.0.0.1"
    argv[argv.index("--key-port") + 1] = str(key_port)
    run_as = sandbox_root.rendered(spec, f)
    log = open(tmp / "forwarder.log", "wb")
    proc = subprocess.Popen(sandbox_root.command(image_layout(tmp), argv, **run_as), env={"PATH": SYSTEM_PATH}, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    # The template's startup probe, run in the forwarder's container as its uid (as the kubelet execs it).
    probe = list(f["startupProbe"]["exec"]["command"])
    probe[probe.index("--port") + 1] = str(port)
    deadline = time.monotonic() + scaled(15)
    while subprocess.run(sandbox_root.enter(proc.pid, probe, uid=run_as["uid"]), env={"PATH": SYSTEM_PATH}, capture_output=True).returncode != 0:
        assert proc.poll() is None and time.monotonic() < deadline, (tmp / "forwarder.log").read_text()
        time.sleep(0.1)
    uid = run_as["uid"]
    deliver_rollout_key("127.0.0.1", key_port, KEY)
    return proc, port, uid


#: What the agent runs (opencode's bash tool: `bash -c`), standard library only. It prints JSON.
AGENT_PROBE = r'''
import json, os, sys, urllib.request, urllib.error
fwd = sys.argv[1]
out = {"env": dict(os.environ), "proc": {}, "http": []}
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    entry = {}
    for part in ("environ", "cmdline"):
        try:
            entry[part] = open(f"/proc/{pid}/{part}", "rb").read().decode(errors="replace")
        except OSError as e:
            entry[part] = f"error: {type(e).__name__}"
    out["proc"][pid] = entry
attempts = [
    ("GET", "/", None), ("GET", "/healthz", None), ("GET", "/metrics", None), ("POST", "/v1/completions", {}),
    ("GET", "/v1/chat/completions", None), ("POST", "/v1/models", {}), ("GET", "/v1/models/../../pause", None),
    ("GET", "/v1/models", None), ("POST", "/v1/chat/completions", {"messages": []}),
    ("POST", "/v1/chat/completions", {"messages": [], "user": "401"}), ("POST", "/v1/chat/completions", {"messages": [], "user": "500"}),
    ("DELETE", "/v1/models", None), ("PUT", "/v1/chat/completions", {}),
]
for method, path, body in attempts:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(fwd + path, data=data, method=method, headers={
        "Authorization": "Bearer agent-made-up-token", "Cookie": "c=agent", "X-Forwarded-For": "1.2.3.4",
        **({"Content-Type": "application/json"} if data else {})})
    try:
        with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as r:
            rec = {"status": r.status, "headers": dict(r.headers.items()), "body": r.read().decode(errors="replace")}
    except urllib.error.HTTPError as e:
        rec = {"status": e.code, "headers": dict(e.headers.items()), "body": e.read().decode(errors="replace")}
    rec.update(method=method, path=path)
    out["http"].append(rec)
print(json.dumps(out))
'''


def run_as_the_agent(h: RuntimeHandle, forwarder_url: str) -> tuple[str, dict]:
    """The harness's shape: the capture proxy as one background job (placeholder key, as
    OpenCodeConfig.api_key leaves it), opencode as another, whose bash tool runs the probe."""
    proxy = h.start_bg("exec sleep 120", envs={"OPENCODE_UPSTREAM_API_KEY": "intercepted"})
    # The probe runs as the agent, without this module: its request timeout is written in, scaled here.
    h.write_text("/tmp/workspace/probe.py", AGENT_PROBE.replace("REQUEST_TIMEOUT_S", repr(scaled(10))))
    agent = h.start_bg(f"bash -c 'python3 /tmp/workspace/probe.py {forwarder_url} > /tmp/workspace/out.json 2> /tmp/workspace/err.txt'")
    try:
        assert agent.wait(60) == 0, h.read_text("/tmp/workspace/err.txt")
        text = h.read_text("/tmp/workspace/out.json")
        # Files: everything the agent's uid can read where a key could have been put.
        found = h.exec('grep -rslF -e "$NEEDLE" /tmp /root /home/user /opt /etc /run /var/tmp /dev/shm 2>/dev/null; true', envs={"NEEDLE": KEY}, timeout=scaled(120))
        return text + found.stdout, json.loads(text)
    finally:
        proxy.kill()


@needs_root
@pytest.mark.parametrize("design", ["forwarder", "key-in-agent-env"])
def test_the_agents_uid_cannot_get_the_key_and_the_forwarder_sends_it(tmp_path, design):
    facts = plan_facts()
    c = container(facts)
    pod = facts["template"]["podTemplate"]["spec"]
    agent_uid = pod["securityContext"]["runAsUser"]
    image_root = image_layout(tmp_path)
    stub = StubUpstream()
    fwd, fwd_port, fwd_uid = start_forwarder(facts, stub.url, tmp_path)
    assert fwd_uid != agent_uid and pod["shareProcessNamespace"] is False
    # The agent container's env as kubelet makes it: a reference to the key Secret would resolve to the key.
    env = {**plain_env(c), **{e["name"]: KEY for e in c["env"] if "secretKeyRef" in e.get("valueFrom", {})}, "PATH": SYSTEM_PATH}
    if design == "key-in-agent-env":
        env["OPENCODE_UPSTREAM_API_KEY"] = KEY  # the template before the forwarder (secretKeyRef in the agent's container)
    port = free_port()
    argv = list(c["command"])
    argv[argv.index("--port") + 1] = str(port)
    argv += ["--host", "127.0.0.1"]
    log = open(tmp_path / "runtime.log", "wb")
    runtime = subprocess.Popen(sandbox_root.command(image_root, argv, **sandbox_root.rendered(pod, c)), env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc=runtime)
        h = RuntimeHandle(f"http://127.0.0.1:{port}", sandbox_id="agent")
        assert h.exec("id -u").stdout.strip() == str(agent_uid)
        everything, seen = run_as_the_agent(h, f"http://127.0.0.1:{fwd_port}")
    finally:
        stop_process(runtime)
        stop_process(fwd)
        stub.stop()

    if design == "key-in-agent-env":
        assert KEY in json.dumps(seen["env"]), "control: a key in the agent's env is found"
        return
    assert KEY not in everything, "the agent found the key"
    # The forwarder was there: its cmdline visible (no key in it), its environ refused to the agent's uid.
    (fwd_entry,) = [e for pid, e in seen["proc"].items() if int(pid) == fwd.pid]
    assert "forwarder.py" in fwd_entry["cmdline"] and fwd_entry["environ"] == "error: PermissionError"
    statuses = [(r["method"], r["path"], r["status"]) for r in seen["http"]]
    allowed = {("GET", "/v1/models"), ("POST", "/v1/chat/completions")}
    for r in seen["http"]:
        if (r["method"], r["path"]) not in allowed:
            assert r["status"] == 404 and json.loads(r["body"]) == {"error": "not found"}, statuses
        assert "Set-Cookie" not in r["headers"], "only Content-Type, Cache-Control and X-Request-Id come back"
    ok = [r for r in seen["http"] if (r["method"], r["path"]) in allowed]
    assert sorted(r["status"] for r in ok) == [200, 200, 401, 500], statuses
    # The stub echoed what it got (headers in the body and in X-Request-Id): the key came back cut out.
    for r in ok:
        if r["method"] == "POST":
            assert REDACTED.decode() in r["body"] and r["headers"]["X-Request-Id"] == f"Bearer {REDACTED.decode()}"
    # Upstream: exactly the allowed routes, each with the key and nothing the agent sent.
    assert sorted({(q["method"], q["path"]) for q in stub.requests}) == sorted(allowed)
    for q in stub.requests:
        headers = {k.lower(): v for k, v in q["headers"].items()}
        assert headers["authorization"] == f"Bearer {KEY}"
        assert set(headers) <= {"host", "accept-encoding", "content-type", "content-length", "accept", "authorization"}, headers
        assert "agent-made-up-token" not in json.dumps(q)


@needs_root
def test_the_forwarder_streams_sse_through_and_hides_its_errors(tmp_path):
    facts = plan_facts()
    stub = StubUpstream()
    fwd, port, _uid = start_forwarder(facts, stub.url, tmp_path)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=scaled(20))
        conn.request("POST", "/v1/chat/completions", body=json.dumps({"stream": True}), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
        first = b""
        while b'"part": 1' not in first:
            chunk = resp.read1(1024)
            assert chunk, "stream ended before the first event"
            first += chunk
        # The first event arrived while the upstream still holds the rest: nothing is buffered whole.
        assert not stub.release.is_set()
        stub.release.set()
        rest = resp.read()
        assert b'"part": 2' in rest and rest.endswith(b"data: [DONE]\n\n")
        conn.close()
    finally:
        stop_process(fwd)
        stub.stop()
    # An unreachable upstream: a 502 that names the error's class, nothing more.
    dead, port, _uid = start_forwarder(facts, f"http://127.0.0.1:{free_port()}", tmp_path)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=scaled(20))
        conn.request("GET", "/v1/models")
        resp = conn.getresponse()
        body = resp.read().decode()
        assert resp.status == 502 and json.loads(body) == {"error": "upstream unreachable: ConnectionRefusedError"}
    finally:
        stop_process(dead)
    for line in (tmp_path / "forwarder.log").read_text().splitlines():
        assert KEY not in line
    assert "GET /v1/models 502" in (tmp_path / "forwarder.log").read_text()


def test_redaction_finds_the_key_split_across_pieces():
    secret = b"sk-abcdef"
    stream = b"xx" + secret + b"yy" + secret
    for size in range(1, len(stream) + 1):
        r = Redactor(secret)
        out = b"".join(r.feed(stream[i : i + size]) for i in range(0, len(stream), size)) + r.flush()
        assert out == b"xx" + REDACTED + b"yy" + REDACTED, size


def test_a_call_right_after_the_delivery_waits_for_the_key_the_serving_child_has_not_read_yet():
    """The race the rollout-start bench found (bench/results.md 6c): the supervisor answers the trainer's PUT once the key
    is in the serving child's pipe; a call the agent makes before the child has read it got 503 "no key yet". In process:
    the child's pipe reader (read_keys) and its server; the key written into the pipe only after the call arrived."""
    import os

    from agent_rl_sandbox.forwarder import ForwarderServer, Trace, Upstream, listen, read_keys

    stub = StubUpstream()
    upstream = Upstream(stub.url, "")
    r, w = os.pipe()
    threading.Thread(target=read_keys, args=(r, upstream), daemon=True).start()
    server = ForwarderServer(listen("127.0.0.1", 0), upstream, Trace())
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    port = server.socket.getsockname()[1]
    got: dict = {}

    def call() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=scaled(20))
        conn.request("GET", "/v1/models")
        got["status"] = conn.getresponse().status

    # Progress, not a clock: the key goes into the pipe once the call has found no key (its handler asks key_held).
    asked = threading.Event()
    wait = upstream.key_held.wait
    upstream.key_held.wait = lambda timeout=None: (asked.set(), wait(timeout))[1]  # type: ignore[method-assign]
    caller = threading.Thread(target=call)
    try:
        caller.start()
        assert asked.wait(scaled(20)), "the call reached the forwarder's key check"
        os.write(w, b"rk1.handed-over-after-the-call-arrived\n")
        caller.join(scaled(20))
        assert got == {"status": 200}, got
        assert stub.requests[-1]["headers"]["Authorization"] == "Bearer rk1.handed-over-after-the-call-arrived"
    finally:
        os.close(w)
        server.shutdown()
        server.server_close()
        stub.stop()
