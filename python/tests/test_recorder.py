"""Issue 56: the recorder the agent cannot displace, answers it cannot use to exhaust the recorder, and sampling it
cannot steer. Each attack runs as the agent would run it: the pod is test_sandbox_trust.Pod, a network namespace
(netns.py) with the template's forwarder and runtime as it runs them (each its uid on a read-only root), the agent's
code in the runtime's container as the sandbox uid, the trainer is this process on the host's side. The model is stub_model.StubModel, a STAND-IN for vLLM, or, where an upstream must answer
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
from test_sandbox_trust import AGENT_CALLS, Pod, needs_root, pss_mib, tree
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
            [*cgroup.prefix(), *pod.agent_argv(PYTHON3, "-I", "-c", AGENT_EXHAUSTS_AND_BINDS, "48",
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


# --- answers bounded (issue 56 item 2) --------------------------------------------------------------
class HugeAnswers:
    """STAND-IN for vLLM answering what a real model answers only at length: the user message `json N` gets a JSON
    answer of about N bytes (token ids and logprobs, no alternatives: cheap to make, dense in the record), `sse N` a
    streamed answer of about N bytes, each event one token with 20 top logprobs (what `top_logprobs: 20` asks for)."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                kind, size = body["messages"][-1]["content"].split()
                size = int(size)
                if kind == "json":
                    n = size // 44
                    ids = [1000 + i % 30000 for i in range(n)]
                    answer = {"model": "stub/huge", "prompt_token_ids": [5, 6, 7], "choices": [{"index": 0, "finish_reason": "length", "token_ids": ids,
                              "message": {"role": "assistant", "content": "x" * 16}, "logprobs": {"content": [{"token": f"token_id:{t}", "logprob": -0.5} for t in ids]}}]}
                    data = json.dumps(answer).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                first = {"model": "stub/huge", "prompt_token_ids": [5, 6, 7], "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
                self.wfile.write(b"data: " + json.dumps(first).encode() + b"\n\n")
                sent, i, batch = 0, 0, []
                while sent < size:
                    t = 1000 + i % 30000
                    alts = [{"token": f"token_id:{t + j}", "logprob": -0.1 - j, "bytes": [120, 121]} for j in range(20)]
                    event = {"model": "stub/huge", "choices": [{"index": 0, "delta": {"content": "x"}, "token_ids": [t],
                             "logprobs": {"content": [{"token": f"token_id:{t}", "logprob": -0.1, "bytes": [120], "top_logprobs": alts}]}, "finish_reason": None}]}
                    line = b"data: " + json.dumps(event).encode() + b"\n\n"
                    batch.append(line)
                    sent += len(line)
                    i += 1
                    if len(batch) == 64:
                        self.wfile.write(b"".join(batch))
                        batch = []
                batch.append(b'data: {"model": "stub/huge", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}\n\ndata: [DONE]\n\n')
                self.wfile.write(b"".join(batch))

        # On every address: the pod's upstream is the host's end of its veth pair, made after this.
        self.server = ThreadingHTTPServer(("0.0.0.0", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


#: The agent asks for answers through the forwarder: `kind size count`, one after another; prints [[status, bytes], ...].
AGENT_ASKS = r'''
import http.client, json, sys
port, kind, size, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
out = []
for _ in range(count):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    body = json.dumps({"model": "stub/huge", "messages": [{"role": "user", "content": f"{kind} {size}"}], "stream": kind == "sse"})
    conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    n = 0
    while piece := r.read(256 * 1024):
        n += len(piece)
    out.append([r.status, n])
    conn.close()
print(json.dumps(out))
'''.replace("TIMEOUT_S", repr(scaled(300)))


def asking(pod: Pod, kind: str, size: int, count: int = 1) -> subprocess.Popen:
    return subprocess.Popen(pod.agent_argv(PYTHON3, "-I", "-c", AGENT_ASKS, str(pod.port), kind, str(size), str(count)),
                            env={"PATH": SYSTEM_PATH}, stdout=subprocess.PIPE, text=True)


@needs_root
def test_answers_are_bounded_in_what_the_forwarder_keeps(tmp_path):
    """The record is filled by calls of dense answers, then four streamed answers with 20 top logprobs a token arrive at
    once, three times over, and one streamed answer far past the per-answer bound: the forwarder's memory (PSS of the
    supervisor and the child) stays under half its 128Mi limit, every answer is relayed whole, and what could not be
    kept is counted (`dropped`, so the trainer refuses the rollout), never grown. On the code before issue 56 the
    streamed answers were held whole (up to 4 MiB each) and parsed whole, every alternative included."""
    upstream = HugeAnswers()
    pod = Pod(tmp_path, upstream_host=lambda host_ip: f"http://{host_ip}:{upstream.port}")
    try:
        watched = tree(pod.proc.pid)
        peak = [pss_mib(watched)]

        def watch(procs: list[subprocess.Popen]) -> list:
            while any(p.poll() is None for p in procs):
                peak.append(pss_mib(tree(pod.proc.pid)))
                time.sleep(0.02)
            return [json.loads(p.communicate()[0]) for p in procs]

        (dense,) = watch([asking(pod, "json", int(3.8 * MiB), 12)])  # cheap dense answers fill the record
        streamed = []
        for _round in range(3):
            streamed += [r for out in watch([asking(pod, "sse", int(3.9 * MiB)) for _ in range(4)]) for r in out]
        (big,) = watch([asking(pod, "sse", 24 * MiB)])  # long, but little in the record: kept event by event
        (over,) = watch([asking(pod, "json", 6 * MiB)])  # past the 4 MiB a JSON answer may hold: relayed, dropped
        assert all(st == 200 for st, _n in dense) and len(dense) == 12, dense
        assert all(st == 200 and n >= 3.9 * MiB for st, n in streamed) and len(streamed) == 12, streamed
        assert big[0][0] == 200 and big[0][1] >= 24 * MiB, big
        assert over[0][0] == 200 and over[0][1] >= 6 * MiB, over
        print(f"peak PSS {max(peak):.1f} MiB")
        assert max(peak) < 64, f"the forwarder's memory peaked at {max(peak):.0f} MiB (limit 128Mi)"
        t = pod.trace()
        head = {k: v for k, v in t.items() if k != "entries"}
        # The 12th dense answer passes the whole record's 16 MiB; the 6 MiB one its own 4 MiB: both counted, not kept.
        assert t["calls"] == 26 and t["dropped"] >= 2 and t["recorded"] + t["dropped"] == 26 and t["complete"] is False, head
        assert any(len(e["choices"][0]["token_ids"]) > 10000 and e["choices"][0]["finish_reason"] == "length" for e in t["entries"]), head
    finally:
        pod.close()
        upstream.stop()


# --- sampling the agent cannot steer (issue 56 item 3) ----------------------------------------------
#: The agent calls the forwarder straight with sampling of its own: each body in argv, one call each; prints [[status, body], ...].
AGENT_STEERS = r'''
import json, sys, urllib.request, urllib.error
out = []
for body in sys.argv[2:]:
    req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions", data=body.encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            out.append([r.status, r.read().decode()[:300]])
    except urllib.error.HTTPError as e:
        out.append([e.code, e.read().decode()[:300]])
print(json.dumps(out))
'''.replace("TIMEOUT_S", repr(scaled(30)))

STEERING = {
    "logit_bias": {"5": 100},
    "allowed_token_ids": [5, 6],
    "structured_outputs": {"regex": "yes|no"},
    "guided_json": {"type": "object"},
    "n": 4,
    "tool_choice": "required",
    "response_format": {"type": "json_object"},
    "min_tokens": 5000,
    "ignore_eos": True,
    "vllm_xargs": {"x": 1},
    # Issue 56 red team: the refused continue_final_message / add_generation_prompt / chat_template, inside the kwargs
    # that vLLM merges over its own template arguments (on the code before, this one reached the model: 200).
    "chat_template_kwargs": {"continue_final_message": True, "add_generation_prompt": False, "chat_template": "{{ messages }}"},
}


@needs_root
def test_the_agent_cannot_steer_the_sampling_it_is_trained_on(tmp_path):
    """The agent, calling the forwarder straight, asks for logit_bias, allowed_token_ids, structured outputs, n, a
    forced tool call, json mode, min_tokens, ignore_eos: each is refused with a 400 naming the parameter and never
    reaches the model. Its temperature, top_p, max_tokens: 100000 and seed reach the model normalised (the plan's forwarder forces the run's
    temperature, top_p 1.0, max_tokens at the run's bound, no seed), the record carries what was sent, and the trainer's
    check refuses a record whose temperature or max_tokens is not the run's. On the code before issue 56 every one reached the model unchanged (200) and the record
    kept none of them."""
    pod = Pod(tmp_path)
    try:
        base = {"model": "stub/model-1", "messages": [{"role": "user", "content": "hi"}]}
        bodies = [json.dumps({**base, name: value}) for name, value in STEERING.items()]
        steered = {**base, "temperature": 0.05, "top_p": 0.1, "max_tokens": 100000, "seed": 7, "top_logprobs": 20, "presence_penalty": 2.0}
        bodies.append(json.dumps(steered))
        seen = pod.agent_json(AGENT_STEERS, str(pod.port), *bodies)
        for (name, _v), (status, body) in zip(STEERING.items(), seen):
            assert status == 400 and name in body, (name, status, body)
        assert seen[-1][0] == 200, seen[-1]
        (sent,) = [r["body"] for r in pod.model.chat_requests()]  # the refused ones never reached the model
        # The plan's forwarder forces the run's temperature (1.0, the program's) and cuts max_tokens to the run's 4096.
        assert (sent["temperature"], sent["top_p"], sent["max_tokens"], sent["top_logprobs"], sent["presence_penalty"]) == (1.0, 1.0, 4096, 5, 0.0), sent
        assert "seed" not in sent and sent["logprobs"] is True and sent["return_token_ids"] is True, sent
        t = pod.trace()
        assert (t["calls"], t["recorded"], t["refused"], t["complete"]) == (len(bodies), 1, len(STEERING), True), {k: v for k, v in t.items() if k != "entries"}
        (entry,) = t["entries"]
        assert entry["sampling"] == {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "frequency_penalty": 0.0, "presence_penalty": 0.0,
                                     "repetition_penalty": 1.0, "max_tokens": 4096, "n": 1, "seed": None, "logprobs": True, "top_logprobs": 5,
                                     "return_token_ids": True}, entry["sampling"]
        from agent_rl_sandbox.trusted_trace import check_sampling

        check_sampling(t, {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_tokens": 4096})
        # A forwarder forcing another run's sampling is still caught by the trainer's check.
        with pytest.raises(UntrustedTrace, match=rf"call {len(bodies)}: temperature 1.0, the run's is 0.7"):
            check_sampling(t, {"temperature": 0.7, "top_p": 1.0, "max_tokens": 4096})
        with pytest.raises(UntrustedTrace, match=rf"call {len(bodies)}: max_tokens 4096, over the run's 2048"):
            check_sampling(t, {"temperature": 1.0, "max_tokens": 2048})
    finally:
        pod.close()


def test_the_request_filter_passes_messages_byte_for_byte_and_refuses_what_the_table_refuses():
    """RequestFilter on bodies fed in pieces of every size: messages and tools arrive unchanged (quotes, braces,
    escapes, non-ASCII), the body is exactly its declared length, and each refusal names its parameter."""
    from agent_rl_sandbox.forwarder import BODY_RESERVE_BYTES, SAMPLING_TABLE, Refused, RequestFilter, SamplingPolicy

    body = {"messages": [{"role": "user", "content": 'a "q" {b} [c] \\ \u00e9 \\u0041 }]'}], "model": "m", "temperature": 0.7, "top_p": 0.5,
            "max_completion_tokens": 900, "max_tokens": 100000, "seed": 3, "tools": [{"type": "function", "function": {"name": "bash"}}], "stream": True, "n": 1}
    raw = json.dumps(body).encode()
    for step in (1, 2, 7, 64, len(raw)):
        f = RequestFilter(SamplingPolicy(temperature=1.0, max_tokens=4096), len(raw) + BODY_RESERVE_BYTES)
        out = b"".join(f.feed(raw[i:i + step]) for i in range(0, len(raw), step)) + f.finish()
        assert len(out) == len(raw) + BODY_RESERVE_BYTES
        got = json.loads(out)
        assert got["messages"] == body["messages"] and got["tools"] == body["tools"]
        assert (got["temperature"], got["top_p"], got["max_tokens"], "seed" in got, "max_completion_tokens" in got) == (1.0, 1.0, 900, False, False), got

    def refusal(raw: bytes) -> str:
        f = RequestFilter(SamplingPolicy(), len(raw) + BODY_RESERVE_BYTES)
        with pytest.raises(Refused) as e:
            f.feed(raw)
            f.finish()
        return str(e.value)

    for name, row in SAMPLING_TABLE.items():
        if row.action == "refuse":
            assert name in refusal(json.dumps({"messages": [], name: {"bad": 1}}).encode())
    assert "appears twice" in refusal(b'{"messages": [], "temp\\u0065rature": 0.1, "temperature": 2}')
    # Issue 56 red team: the template's own arguments inside chat_template_kwargs (vLLM merges them over its own), a
    # key spelled with an escape included; a template variable of the model's passes.
    from agent_rl_sandbox.forwarder import TEMPLATE_ARGUMENTS

    for name in sorted(TEMPLATE_ARGUMENTS):
        assert "chat_template_kwargs" in refusal(json.dumps({"messages": [], "chat_template_kwargs": {"enable_thinking": False, name: True}}).encode())
    assert "chat_template_kwargs" in refusal(b'{"messages": [], "chat_template_kwargs": {"continue\\u005ffinal_message": true}}')
    assert "chat_template_kwargs" in refusal(b'{"messages": [], "chat_template_kwargs": "x"}')
    ok = b'{"messages": [], "chat_template_kwargs": {"enable_thinking": false}}'
    f = RequestFilter(SamplingPolicy(), len(ok) + BODY_RESERVE_BYTES)
    assert json.loads(f.feed(ok) + f.finish())["chat_template_kwargs"] == {"enable_thinking": False}
    assert "not in the forwarder's allow-list" in refusal(b'{"messages": [], "sneaky": 1}')
    assert "must be a JSON object" in refusal(b'[1, 2]')
    assert "not a complete JSON object" in refusal(b'{"messages": [')
    assert "over 65536 bytes" in refusal(json.dumps({"stop": ["x" * 70000]}).encode())
    assert "must be an integer" in refusal(b'{"max_tokens": "lots"}')


# --- a record the agent cannot truncate (issue 56 item 3) -------------------------------------------
class HeldStream:
    """STAND-IN for vLLM streaming one answer in two parts: the first event (role and one token) at once, the rest
    (more tokens, the finish, [DONE]) only once the test sets `release`, so the test decides when the caller is gone."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.finished = threading.Event()
        stream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True

                def event(i: int, finish: str | None = None) -> bytes:
                    e = {"model": "stub/held", "choices": [{"index": 0, "delta": {"content": "x"}, "token_ids": [100 + i],
                         "logprobs": {"content": [{"token": f"token_id:{100 + i}", "logprob": -0.5}]}, "finish_reason": finish}]}
                    if i == 0:
                        e["prompt_token_ids"] = [5, 6, 7]
                    return b"data: " + json.dumps(e).encode() + b"\n\n"

                self.wfile.write(event(0))
                self.wfile.flush()
                stream.release.wait(scaled(30))
                try:
                    for i in range(1, 40):  # one event at a time: the forwarder relays each as it comes
                        self.wfile.write(event(i, "length" if i == 39 else None))
                        self.wfile.flush()
                        time.sleep(0.01)
                    self.wfile.write(b"data: [DONE]\n\n")
                except OSError:
                    pass
                finally:
                    stream.finished.set()

        self.server = ThreadingHTTPServer(("0.0.0.0", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


#: The agent asks for a streamed answer, reads its first piece and hangs up (RST: SO_LINGER 0); prints the bytes it got.
AGENT_HANGS_UP = r'''
import json, socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=TIMEOUT_S)
body = json.dumps({"model": "stub/held", "messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
got = b""
while b"token_ids" not in got:
    piece = s.recv(65536)
    if not piece:
        break
    got += piece
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()
print(json.dumps(len(got)))
'''.replace("TIMEOUT_S", repr(scaled(30)))


@needs_root
def test_a_call_the_agent_hangs_up_on_mid_answer_makes_the_record_incomplete(tmp_path):
    """The agent (or a capture proxy of its making) asks for a streamed answer and hangs up after its first event: the
    model sampled the whole answer, the forwarder could relay none of the rest. On the code before issue 56's item 3
    such a call vanished (counted in `calls`, neither recorded nor dropped) and the trace said `complete: true`, so a
    trainer trained on a record the agent had cut. Now it is counted (`broken`), the trace is not complete, and the
    trainer refuses the rollout."""
    upstream = HeldStream()
    pod = Pod(tmp_path, lambda host: f"http://{host}:{upstream.port}")
    try:
        got = pod.agent_json(AGENT_HANGS_UP, str(pod.port))
        assert got > 0, "the agent read the first event before it hung up"
        # Issue 56 red team: read while the call is still being answered (the stand-in holds the rest), the record is
        # not complete. On the code before: calls 1, recorded 0, complete true, and a trace with other calls trained them
        # without this one.
        t = pod.trace()
        assert (t["calls"], t["recorded"], t.get("in_flight"), t["complete"]) == (1, 0, 1, False), {k: v for k, v in t.items() if k != "entries"}
        with pytest.raises(UntrustedTrace, match="1 call\\(s\\) were still being answered"):
            forwarder_calls(t)
        upstream.release.set()
        assert upstream.finished.wait(scaled(30)), "the stand-in sent the rest of the answer"
        # The forwarder logs each call when it ends; a relay broken off by the caller logs its 502.
        wait_for("the forwarder ends the broken-off call", lambda: "POST /v1/chat/completions 502" in pod.log_path.read_text(), 30)
        t = pod.trace()
        header = {k: v for k, v in t.items() if k != "entries"}
        assert (t["calls"], t["recorded"], t.get("broken"), t["in_flight"], t["complete"]) == (1, 0, 1, 0, False), header
        with pytest.raises(UntrustedTrace, match="hung up on 1 call"):
            forwarder_calls(t)
    finally:
        pod.close()
        upstream.stop()


#: The agent makes `count` plain calls one after another; prints [[status, error or ""], ...].
AGENT_CALLS_N = r'''
import json, sys, urllib.request, urllib.error
out = []
for _ in range(int(sys.argv[2])):
    body = json.dumps({"model": "stub/model-1", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 100000}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            r.read()
            out.append([r.status, ""])
    except urllib.error.HTTPError as e:
        out.append([e.code, json.loads(e.read()).get("error", "")])
print(json.dumps(out))
'''.replace("TIMEOUT_S", repr(scaled(30)))


@needs_root
def test_a_rollout_gets_the_calls_and_tokens_the_run_sets_and_no_more(tmp_path):
    """The plan's forwarder with the run's bounds at small values (--max-calls 3; --max-rollout-tokens 20): past
    either, a call gets 429 naming the flag and the stack setting, never reaches the model, and the trace counts it in
    `limited` (the record of what was sampled stays whole). Each call's max_tokens is cut to what the rollout has left.
    On the code before, the forwarder had neither flag and relayed every call."""
    pod = Pod(tmp_path, flags={"--max-calls": "3"})
    try:
        seen = pod.agent_json(AGENT_CALLS_N, str(pod.port), "5")
        assert [s for s, _e in seen] == [200, 200, 200, 429, 429], seen
        assert "made its 3 calls (--max-calls, the run's sandboxes.maxCallsPerRollout)" in seen[3][1], seen[3]
        assert len(pod.model.chat_requests()) == 3, "the limited calls never reached the model"
        t = pod.trace()
        assert (t["calls"], t["recorded"], t["limited"], t["complete"]) == (3, 3, 2, True), {k: v for k, v in t.items() if k != "entries"}
    finally:
        pod.close()
    pod = Pod(tmp_path, flags={"--max-rollout-tokens": "20"})
    try:
        seen = pod.agent_json(AGENT_CALLS_N, str(pod.port), "6")
        sent = [r["body"]["max_tokens"] for r in pod.model.chat_requests()]
        t = pod.trace()
        sampled = [len(e["choices"][0]["token_ids"]) for e in t["entries"]]
        assert sent[0] == 20 and all(m == 20 - sum(sampled[:i]) for i, m in enumerate(sent)), (sent, sampled)
        assert sum(sampled) >= 20 and sum(sampled[:-1]) < 20, "calls are relayed while tokens are left, and no more"
        assert [s for s, _e in seen] == [200] * len(sent) + [429] * (6 - len(sent)), seen
        assert "sampled its 20 completion tokens (--max-rollout-tokens, the run's sandboxes.maxTokensPerRollout)" in seen[-1][1], seen
        assert (t["tokens"], t["limited"], t["complete"]) == (sum(sampled), 6 - len(sent), True), {k: v for k, v in t.items() if k != "entries"}
    finally:
        pod.close()
