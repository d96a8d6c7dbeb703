"""The key-holding forwarder of every sandbox pod: the one process that knows the ingress key.

It runs in a container of its own beside the agent's (a native sidecar on Kubernetes, a
container in the agent's network namespace on Docker), as a uid of its own, on a read-only
root, with the key in that container's env only. It listens on loopback, which the pod's
containers share, and forwards exactly two routes to the ingress with
``Authorization: Bearer <key>``:

- ``POST /v1/chat/completions``  (streamed through: SSE chunks reach the caller as they come)
- ``GET  /v1/models``

Everything else is a 404 that names nothing. Why a separate container and uid: the agent
(opencode's bash tool, i.e. the model being trained) runs arbitrary commands as the sandbox
uid, and a process can read ``/proc/<pid>/environ`` and ``cmdline`` of every process of its own
uid in its PID namespace. OpenEnv's in-sandbox capture proxy runs as that uid
(huggingface/OpenEnv ``envs/opencode_env/harness.py`` starts it through the sandbox backend),
so whatever key it holds, the agent can print. Here the capture proxy's upstream is this
forwarder and its key is the harness's placeholder (``OpenCodeConfig.api_key`` defaults to
``"intercepted"``), which the forwarder drops: the real key is in another container (another
mount and PID namespace: the agent sees neither its env nor its files), of another uid.

What the caller sends is not trusted: only ``Content-Type`` and ``Accept`` of its headers go
upstream (never its ``Authorization``, ``Cookie`` or ``Host``); only ``Content-Type``,
``Cache-Control`` and ``X-Request-Id`` of the upstream's come back; and the key is cut out of
every byte that comes back (body and headers), so an upstream that echoes its request cannot
hand it over either. Logs carry method, route, status and duration only.

The training trace. The forwarder is also where the trainer's record of a rollout is taken: every
``POST /v1/chat/completions`` answer it relays is recorded (vLLM's ``prompt_token_ids``, each
choice's ``token_ids``, ``logprobs`` and ``finish_reason``; JSON or server-sent events) in this
process's memory, and served to the trainer on a second port (``--trace-port``, the pod IP) as
``GET /trace``. The in-sandbox capture proxy of the harness runs as the agent's uid: the agent can
rewrite its trace, kill it and answer on its port. Here the record is in another uid's memory,
of a process the agent can neither signal nor ptrace, and only what the upstream answered is
recorded (what the agent sends is never trusted). ``/trace`` refuses callers on the pod's own
addresses (loopback, or the address the connection arrived on): the agent shares the pod's
network namespace, the trainer comes from another pod.

Ports the agent cannot take: a supervisor binds both ports before anything else runs (on the
pool the forwarder is a native sidecar whose startup probe passes before the agent's container
starts) and never closes them; it serves from a forked child that inherits them, and if that
child dies (its out-of-memory score is raised to the maximum, so the kernel picks it over the
supervisor) it starts another on the same sockets. A listening socket of another uid cannot be
bound over, SO_REUSEADDR or SO_REUSEPORT included. The trace of a child that died is lost, and
``/trace`` says so (``restarts``).

Bounded: request bodies are streamed upstream (never held whole) up to ``MAX_BODY_BYTES``; at most
``MAX_CONNECTIONS`` requests are served at once, the rest wait in a listen backlog of
``LISTEN_BACKLOG`` (not reset); an idle connection is closed after ``IDLE_SECONDS``; a recorded
answer is held up to ``MAX_RECORD_BYTES`` and the whole trace up to ``MAX_TRACE_BYTES`` (past
either, the entry is counted in ``dropped`` instead).

Per-rollout keys (docs/design/rollout-keys.md): with ``--key-port`` the forwarder also accepts, once,
``PUT /rollout-key`` on the pod's address: the trainer delivers the key it minted for this claim
right after the claim is Ready, before the agent runs anything, and the listener then closes. With
``--key-port`` the forwarder holds no other key: a key in the env is refused at start (no shared key
falls back), and model calls get 503 saying why until the delivery. The delivered key is held,
attached and redacted exactly as an env key is without ``--key-port``. The supervisor takes the delivery (it outlives the
serving child) and hands the key to the serving child through a pipe; a child started later
inherits it.

Standard library only, like ``runtime.py``: it runs on the sandbox image's own Python.
"""

from __future__ import annotations

import argparse
import array
import http.client
import ipaddress
import json
import logging
import os
import re
import signal
import socket
import ssl
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from urllib.parse import urlsplit

#: The forwarder's port on the pod's loopback (components/sandbox/model.ts SANDBOX_FORWARDER_PORT).
DEFAULT_PORT = 7100
#: The trace port, on the pod IP, for the trainer only (components/sandbox/model.ts SANDBOX_TRACE_PORT).
DEFAULT_TRACE_PORT = 7101
#: Env var holding the ingress key, in the forwarder's container only.
DEFAULT_KEY_ENV = "AGENT_RL_UPSTREAM_KEY"
#: Where the trainer delivers the rollout's own key at claim time (``--key-port``; docs/design/rollout-keys.md).
KEY_DELIVERY_PATH = "/rollout-key"
#: The shape of a rollout key (rollout_keys.py KEY_RE); nothing else is accepted there.
ROLLOUT_KEY_RE = re.compile(r"^rk1\.[A-Za-z0-9_-]{43}$")
#: The routes the sandboxes may call (the ingress's allow-list for sandbox keys).
ROUTES = frozenset({("POST", "/v1/chat/completions"), ("GET", "/v1/models")})
#: The route whose answers are the training trace.
TRACED = ("POST", "/v1/chat/completions")
#: Request headers passed upstream; every other header of the caller is dropped.
REQUEST_HEADERS = ("Content-Type", "Accept")
#: Response headers passed back; the rest (Set-Cookie, Server, anything echoed) is dropped.
RESPONSE_HEADERS = ("Content-Type", "Cache-Control", "X-Request-Id")
#: Largest request body (a long agent transcript is a few MiB of JSON). Streamed upstream in
#: STREAM_BYTES pieces, never held whole: the cap bounds what one call can send, not memory.
MAX_BODY_BYTES = 16 * 1024 * 1024
#: Requests served at once; more connections wait, unaccepted, in the listen backlog. The harness's
#: capture proxy and opencode make one model call at a time.
MAX_CONNECTIONS = 4
#: The listen backlog of both ports (the kernel caps it at net.core.somaxconn, 4096 on Linux >= 5.4).
LISTEN_BACKLOG = 512
#: Seconds a connection may stay silent (request line, headers, body) before it is closed.
IDLE_SECONDS = 60.0
#: Bytes of one upstream answer kept for the trace (16k tokens with logprobs is ~2 MiB of JSON).
MAX_RECORD_BYTES = 4 * 1024 * 1024
#: Bytes of the whole trace, stored compactly (8 bytes a token id or logprob): 2 M numbers, whose
#: JSON (at most ~22 bytes each) stays under the trainer's 64 MiB read cap (handle.py).
MAX_TRACE_BYTES = 16 * 1024 * 1024
#: Piece size of every streamed copy.
STREAM_BYTES = 64 * 1024
#: Seconds one upstream read may take (a long generation; OpenCodeConfig.request_timeout_ms is 600 s).
UPSTREAM_READ_SECONDS = 900.0
#: What replaces the key wherever it would come back.
REDACTED = b"[redacted]"
#: Seconds between a serving child's death and the next (the sockets stay bound meanwhile).
RESTART_DELAY_SECONDS = 0.5

log = logging.getLogger("agent_rl_sandbox.forwarder")


class Redactor:
    """Cuts `secret` out of a byte stream fed in pieces: holds back len(secret) - 1 bytes, so an
    occurrence split across two pieces is still found."""

    def __init__(self, secret: bytes) -> None:
        self.secret = secret
        self.held = b""

    def feed(self, chunk: bytes) -> bytes:
        data = (self.held + chunk).replace(self.secret, REDACTED)
        keep = len(self.secret) - 1
        if keep <= 0 or len(data) <= keep:
            self.held, out = (data, b"") if keep > 0 else (b"", data)
            return out
        self.held = data[-keep:]
        return data[:-keep]

    def flush(self) -> bytes:
        out, self.held = self.held, b""
        return out


class Upstream:
    """Where the forwarder sends (the ingress) and with which key."""

    def __init__(self, url: str, key: str, *, read_seconds: float = UPSTREAM_READ_SECONDS) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream must be an http(s) URL, got {url!r}")
        # "" only while a rollout key is awaited (--key-port): requests get 503 until it is delivered.
        if any(c in key for c in "\r\n\0"):
            raise ValueError("the upstream key must be without CR, LF or NUL")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.key = key
        self.read_seconds = read_seconds
        # The image's trust store (and SSL_CERT_FILE), as for the in-sandbox proxy it replaces as key holder.
        self._tls = ssl.create_default_context() if parts.scheme == "https" else None

    def connect(self) -> http.client.HTTPConnection:
        if self._tls is not None:
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.read_seconds, context=self._tls)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.read_seconds)


# --- the training trace ---------------------------------------------------------------------------
def _ids(value: Any) -> array.array:
    out = array.array("q")
    if isinstance(value, list):
        out.extend(int(v) for v in value if isinstance(v, int) and not isinstance(v, bool))
    return out


def _logprobs(logprobs: Any) -> array.array:
    out = array.array("d")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    for entry in content if isinstance(content, list) else []:
        lp = entry.get("logprob") if isinstance(entry, dict) else None
        out.append(float(lp) if isinstance(lp, (int, float)) and not isinstance(lp, bool) else float("nan"))
    return out


def completion_record(answer: bytes, content_type: str) -> dict[str, Any] | None:
    """The trace entry of one chat completion as the upstream sent it (a JSON object, or server-sent
    events whose chunks are merged in order); None when it carries no choice."""
    chunks: list[Any]
    if content_type.startswith("text/event-stream"):
        chunks = []
        for line in answer.split(b"\n"):
            line = line.strip()
            if line.startswith(b"data:") and line[5:].strip() not in (b"", b"[DONE]"):
                chunks.append(json.loads(line[5:]))
    else:
        chunks = [json.loads(answer)]
    prompt = array.array("q")
    choices: dict[int, dict[str, Any]] = {}
    model = None
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        model = chunk.get("model", model)
        if chunk.get("prompt_token_ids") is not None:
            prompt = _ids(chunk.get("prompt_token_ids"))
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or not isinstance(choice.get("index", 0), int):
                continue
            c = choices.setdefault(choice.get("index", 0), {"token_ids": array.array("q"), "logprobs": array.array("d"), "finish_reason": None})
            c["token_ids"].extend(_ids(choice.get("token_ids")))
            c["logprobs"].extend(_logprobs(choice.get("logprobs")))
            c["finish_reason"] = choice.get("finish_reason") or c["finish_reason"]
    if not choices:
        return None
    return {"model": model if isinstance(model, str) else None, "prompt_token_ids": prompt, "choices": [choices[i] | {"index": i} for i in sorted(choices)]}


def record_size(entry: dict[str, Any]) -> int:
    return 256 + 8 * (len(entry["prompt_token_ids"]) + sum(len(c["token_ids"]) + len(c["logprobs"]) for c in entry["choices"]))


def entry_json(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "seq": entry["seq"],
        "status": entry["status"],
        "model": entry["model"],
        "prompt_token_ids": entry["prompt_token_ids"].tolist(),
        "choices": [
            {"index": c["index"], "token_ids": c["token_ids"].tolist(), "logprobs": c["logprobs"].tolist(), "finish_reason": c["finish_reason"]}
            for c in entry["choices"]
        ],
    }


class Trace:
    """The completions this forwarder relayed, in order, within MAX_TRACE_BYTES."""

    def __init__(self, restarts: int = 0, limit: int = MAX_TRACE_BYTES) -> None:
        self.restarts = restarts
        self.limit = limit
        self.size = 0
        self.calls = 0
        self.dropped = 0
        self.entries: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def start(self) -> int:
        """A traced call begins: its sequence number (the order of the calls, recorded or not)."""
        with self._lock:
            self.calls += 1
            return self.calls

    def add(self, seq: int, status: int, answer: bytes | None, content_type: str) -> None:
        entry = None
        if answer is not None and status == HTTPStatus.OK:
            try:
                entry = completion_record(answer, content_type)
            except (ValueError, TypeError, AttributeError):
                entry = None
        with self._lock:
            if entry is None or self.size + record_size(entry) > self.limit:
                self.dropped += 1 if status == HTTPStatus.OK else 0
                return
            self.size += record_size(entry)
            self.entries.append({"seq": seq, "status": int(status), **entry})

    def lines(self) -> Iterator[bytes]:
        """JSON lines: a header ({"calls", "recorded", "dropped", "restarts", "complete"}), then one entry a line."""
        with self._lock:
            entries = sorted(self.entries, key=lambda e: e["seq"])
            header = {"calls": self.calls, "recorded": len(entries), "dropped": self.dropped, "restarts": self.restarts}
        header["complete"] = header["dropped"] == 0 and header["restarts"] == 0
        yield json.dumps(header).encode() + b"\n"
        for e in entries:
            yield json.dumps(entry_json(e)).encode() + b"\n"


# --- the agent's side: the two routes ------------------------------------------------------------
class BodyReader:
    """Exactly `length` bytes of the caller's body, read as http.client sends them (never all at once)."""

    def __init__(self, rfile: Any, length: int) -> None:
        self.rfile = rfile
        self.left = length
        #: The caller's side broke (closed or went silent mid-body), as opposed to the upstream's.
        self.failed = False

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        n = self.left if size is None or size < 0 else min(size, self.left)
        try:
            data = self.rfile.read(min(n, STREAM_BYTES))
        except OSError:
            self.failed = True
            raise
        if not data:
            self.failed = True
            raise ConnectionResetError("the caller closed before its body ended")
        self.left -= len(data)
        return data


class Handler(BaseHTTPRequestHandler):
    server: "ForwarderServer"
    protocol_version = "HTTP/1.1"
    # No "Server: BaseHTTP/x Python/y" banner.
    server_version = "forwarder"
    sys_version = ""
    # A silent connection gives its slot back (socketserver sets it on the connection).
    timeout = IDLE_SECONDS

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass  # one line per request in _handle, without the query

    def _reply(self, status: HTTPStatus, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self, method: str) -> None:
        started = time.monotonic()
        route = urlsplit(self.path).path
        status: int = HTTPStatus.NOT_FOUND
        try:
            if (method, route) not in ROUTES:
                # An unread body must not become the next request.
                self.close_connection = True
                self._reply(status, "not found")
                return
            status = self._forward(method, route)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            status = HTTPStatus.BAD_GATEWAY  # the caller went away (or went silent) mid-request
            self.close_connection = True
        finally:
            shown = route if (method, route) in ROUTES else "<other>"
            log.info("%s %s %d %.3fs", method, shown, int(status), time.monotonic() - started)

    def _body(self) -> tuple[BodyReader | None, int, HTTPStatus | None]:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return None, 0, HTTPStatus.LENGTH_REQUIRED
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY_BYTES:
            return None, 0, HTTPStatus.REQUEST_ENTITY_TOO_LARGE
        return BodyReader(self.rfile, length), length, None

    def _forward(self, method: str, route: str) -> int:
        up = self.server.upstream
        body: BodyReader | None = None
        if not up.key:
            self.close_connection = True
            self._reply(
                HTTPStatus.SERVICE_UNAVAILABLE,
                "no key yet: this forwarder calls the model only with its rollout's key, which the trainer delivers when it claims the sandbox; no shared key falls back",
            )
            return HTTPStatus.SERVICE_UNAVAILABLE
        headers = {h: self.headers[h] for h in REQUEST_HEADERS if self.headers.get(h)}
        if method == "POST":
            body, length, refused = self._body()
            if refused is not None:
                self.close_connection = True
                limit = "Content-Length required" if refused == HTTPStatus.LENGTH_REQUIRED else f"body must be 0..{MAX_BODY_BYTES} bytes"
                self._reply(refused, limit)
                return refused
            headers["Content-Length"] = str(length)
        # Set last, whatever the caller sent: the caller's Authorization was never copied.
        headers["Authorization"] = f"Bearer {up.key}"
        seq = self.server.trace.start() if (method, route) == TRACED else None
        conn = up.connect()
        try:
            try:
                conn.request(method, up.prefix + route, body=body, headers=headers)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                if body is not None and body.failed:
                    raise ConnectionResetError from e  # the caller's body broke off, not the upstream
                self.close_connection = True
                # The error's class only: its text may carry the upstream's address details, never more is needed.
                self._reply(HTTPStatus.BAD_GATEWAY, f"upstream unreachable: {type(e).__name__}")
                if seq is not None:
                    self.server.trace.add(seq, HTTPStatus.BAD_GATEWAY, None, "")
                return HTTPStatus.BAD_GATEWAY
            answer = self._relay(resp, record=seq is not None)
            if seq is not None:
                self.server.trace.add(seq, resp.status, answer, resp.getheader("Content-Type") or "")
            return resp.status
        finally:
            conn.close()

    def _relay(self, resp: http.client.HTTPResponse, *, record: bool) -> bytes | None:
        """Streams the answer back (key cut out); returns what it relayed, when asked and within MAX_RECORD_BYTES."""
        key = self.server.upstream.key.encode()
        self.send_response(resp.status)
        for name in RESPONSE_HEADERS:
            value = resp.getheader(name)
            if value:
                self.send_header(name, value.replace(self.server.upstream.key, REDACTED.decode()))
        # Chunked towards the caller: the length may change (redaction) and SSE has none.
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        redactor = Redactor(key)
        kept: bytearray | None = bytearray() if record else None
        complete = True
        try:
            while True:
                chunk = resp.read1(STREAM_BYTES)
                if not chunk:
                    break
                if kept is not None:
                    kept += chunk
                    if len(kept) > MAX_RECORD_BYTES:
                        kept = None  # too large to keep: relayed, counted as dropped
                self._chunk(redactor.feed(chunk))
        except (OSError, http.client.HTTPException):
            # The upstream broke mid-stream: end the caller's stream, without detail.
            self.close_connection = True
            complete = False
        self._chunk(redactor.flush())
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        return bytes(kept) if kept is not None and complete else None

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def do_GET(self) -> None:  # noqa: N802 (stdlib naming)
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")

    def do_PATCH(self) -> None:  # noqa: N802
        self._handle("PATCH")

    def do_HEAD(self) -> None:  # noqa: N802
        self._handle("HEAD")

    def do_OPTIONS(self) -> None:  # noqa: N802
        self._handle("OPTIONS")


# --- the trainer's side: the trace ---------------------------------------------------------------
def from_the_pod_itself(peer: str, local: str) -> bool:
    """A caller inside the pod's network namespace: loopback, or the very address it connected to."""
    p = ipaddress.ip_address(peer.split("%")[0])
    if isinstance(p, ipaddress.IPv6Address) and p.ipv4_mapped is not None:
        p = p.ipv4_mapped
    lo = ipaddress.ip_address(local.split("%")[0])
    if isinstance(lo, ipaddress.IPv6Address) and lo.ipv4_mapped is not None:
        lo = lo.ipv4_mapped
    return p.is_loopback or p == lo or p.is_unspecified


class TraceHandler(BaseHTTPRequestHandler):
    server: "TraceServer"
    protocol_version = "HTTP/1.1"
    server_version = "forwarder"
    sys_version = ""
    timeout = IDLE_SECONDS

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _reply(self, status: HTTPStatus, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        if from_the_pod_itself(self.client_address[0], self.connection.getsockname()[0]):
            return self._reply(HTTPStatus.FORBIDDEN, "the trace is for the trainer, not for the sandbox")
        if urlsplit(self.path).path != "/trace":
            return self._reply(HTTPStatus.NOT_FOUND, "not found")
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for line in self.server.trace.lines():
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_POST(self) -> None:  # noqa: N802
        self._reply(HTTPStatus.NOT_FOUND, "not found")


# --- servers on sockets bound once ---------------------------------------------------------------
def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket, bound once by the supervisor and never given up. No SO_REUSEADDR:
    nothing may bind beside it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


class BoundedServer(ThreadingHTTPServer):
    """A threading server on an already listening socket, serving at most `slots` requests at once:
    it accepts only when a slot is free, so the rest wait in the kernel's backlog."""

    daemon_threads = True

    def __init__(self, sock: socket.socket, handler: type[BaseHTTPRequestHandler], slots: int) -> None:
        super().__init__(sock.getsockname()[:2], handler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock
        self.server_address = sock.getsockname()
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])
        self._slots = threading.BoundedSemaphore(slots)

    def get_request(self) -> tuple[socket.socket, Any]:
        if not self._slots.acquire(timeout=0.5):
            raise OSError("every slot busy")  # _handle_request_noblock returns; serve_forever polls again
        try:
            return super().get_request()
        except BaseException:
            self._slots.release()
            raise

    def shutdown_request(self, request: Any) -> None:
        try:
            super().shutdown_request(request)
        finally:
            self._slots.release()

    def server_close(self) -> None:
        pass  # the supervisor's socket: never closed here


class ForwarderServer(BoundedServer):
    def __init__(self, sock: socket.socket, upstream: Upstream, trace: Trace, slots: int = MAX_CONNECTIONS) -> None:
        self.upstream = upstream
        self.trace = trace
        super().__init__(sock, Handler, slots)


class TraceServer(BoundedServer):
    def __init__(self, sock: socket.socket, trace: Trace) -> None:
        self.trace = trace
        super().__init__(sock, TraceHandler, 2)


class KeyDeliveryHandler(BaseHTTPRequestHandler):
    """``PUT /rollout-key`` with the rollout's key as the body, once: the key replaces the upstream's,
    and the listener closes. Never answers with a key; anything else is 404."""

    server: "KeyDeliveryServer"
    protocol_version = "HTTP/1.1"
    server_version = "forwarder"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass

    def _status(self, status: HTTPStatus) -> None:
        self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_PUT(self) -> None:  # noqa: N802
        raw = self.headers.get("Content-Length") or "0"
        length = int(raw) if raw.isdigit() else -1
        if urlsplit(self.path).path != KEY_DELIVERY_PATH or not 0 < length <= 256:
            self._status(HTTPStatus.NOT_FOUND)
            return
        key = self.rfile.read(length).decode("ascii", "replace").strip()
        if not ROLLOUT_KEY_RE.match(key):
            self._status(HTTPStatus.BAD_REQUEST)
            return
        if not self.server.deliver(key):
            self._status(HTTPStatus.CONFLICT)
            return
        log.info("rollout key delivered")
        self._status(HTTPStatus.NO_CONTENT)
        # One delivery per pod (a claim is one rollout): the port closes behind it.
        threading.Thread(target=self.server.close, daemon=True).start()

    def do_GET(self) -> None:  # noqa: N802
        self._status(HTTPStatus.NOT_FOUND)


class KeyHandOver:
    """The supervisor's side of a delivered rollout key: kept for every later child, written to the current one's pipe."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.lock = threading.Lock()
        self.pipe = -1
        self.listener: socket.socket | None = None  # the delivery port's socket (KeyDeliveryServer), the supervisor's alone

    def close_in_child(self) -> None:
        """In a new child: the delivery socket and the pipe's write end are the supervisor's (else the port would outlive its close)."""
        if self.listener is not None:
            self.listener.close()
        if self.pipe >= 0:
            os.close(self.pipe)

    def child_pipe(self) -> int:
        """A new pipe for the next child; returns its read end (the write end replaces the last child's)."""
        r, w = os.pipe()
        with self.lock:
            if self.pipe >= 0:
                os.close(self.pipe)
            self.pipe = w
        return r

    def deliver(self, key: str) -> None:
        with self.lock:
            self.upstream.key = key
            if self.pipe >= 0:
                try:
                    os.write(self.pipe, key.encode() + b"\n")
                except OSError:
                    pass  # the child is gone: the next one inherits upstream.key


class KeyDeliveryServer(ThreadingHTTPServer):
    """The one-time delivery, taken by the supervisor and handed to the serving child (KeyHandOver)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], hand_over: KeyHandOver) -> None:
        self.hand_over = hand_over
        self._lock = threading.Lock()
        self._delivered = False
        super().__init__(address, KeyDeliveryHandler)
        hand_over.listener = self.socket

    def close(self) -> None:
        """Stops serving and closes the listening socket (connections are refused from then on)."""
        self.shutdown()
        self.server_close()

    def deliver(self, key: str) -> bool:
        with self._lock:
            if self._delivered:
                return False
            self._delivered = True
        self.hand_over.deliver(key)
        return True


def probe(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when something accepts TCP on host:port (the sidecar's startup probe, run in its container)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="agent_rl_sandbox.forwarder", description="The sandbox pod's key-holding forwarder (see module docstring).")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on: loopback, shared with the agent's container and nothing else")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--trace-host", default="0.0.0.0", help="address of the trace port (the pod IP: the trainer reads it)")
    p.add_argument("--trace-port", type=int, default=DEFAULT_TRACE_PORT, help="0: no trace port")
    p.add_argument("--upstream", help="the ingress URL (its /v1/chat/completions and /v1/models are called)")
    p.add_argument("--key-env", default=DEFAULT_KEY_ENV, help="env var holding the ingress key (never a flag: argv is readable)")
    p.add_argument("--key-host", default="0.0.0.0", help="where the trainer delivers the rollout's key (the pod's address)")
    p.add_argument("--key-port", type=int, default=0, help="accept the rollout's key once on this port, the only key then held (0: none; the env key only)")
    p.add_argument("--probe", action="store_true", help="exit 0 when the forwarder accepts connections, else 1")
    return p.parse_args(argv)


def read_keys(fd: int, upstream: Upstream) -> None:
    """The serving child's end of the supervisor's key pipe: each line is the rollout's key."""
    with os.fdopen(fd, "rb") as f:
        for line in f:
            key = line.rstrip(b"\n").decode("utf-8", "replace")
            if key and not any(c in key for c in "\r\n\0"):
                upstream.key = key


def serve(forward: socket.socket, traced: socket.socket | None, upstream: Upstream, restarts: int, keys: int | None = None) -> int:
    """The serving child: both servers on the supervisor's sockets until SIGTERM."""
    if keys is not None:
        threading.Thread(target=read_keys, args=(keys, upstream), daemon=True).start()
    try:
        # The kernel's first pick under memory pressure: this child, never the supervisor holding the ports.
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    trace = Trace(restarts)
    server = ForwarderServer(forward, upstream, trace)
    servers = [server] + ([TraceServer(traced, trace)] if traced is not None else [])

    def stop(_sig: int, _frame: Any) -> None:
        for s in servers:
            threading.Thread(target=s.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True) for s in servers[1:]]
    for t in threads:
        t.start()
    server.serve_forever(poll_interval=0.5)
    for t in threads:
        t.join(5)
    return 0


def supervise(forward: socket.socket, traced: socket.socket | None, upstream: Upstream, hand_over: KeyHandOver | None = None) -> int:
    """Holds the sockets for the forwarder's whole life and keeps one serving child on them."""
    stopping = False
    child = 0

    def stop(sig: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        if child:
            try:
                os.kill(child, sig)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    restarts = 0
    while True:
        keys = hand_over.child_pipe() if hand_over is not None else None
        child = os.fork()
        if child == 0:
            if hand_over is not None:
                hand_over.close_in_child()
            os._exit(serve(forward, traced, upstream, restarts, keys))
        if keys is not None:
            os.close(keys)
        while True:
            try:
                _pid, status = os.waitpid(child, 0)
                break
            except InterruptedError:
                continue
        if stopping:
            return 0
        restarts += 1
        log.error("the serving process ended (%s); serving again on the same sockets (restart %d)", status, restarts)
        time.sleep(RESTART_DELAY_SECONDS)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.probe:
        return 0 if probe(args.host, args.port) else 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s forwarder %(message)s", stream=sys.stderr)
    key = os.environ.pop(args.key_env, "")
    if not args.upstream or not (key or args.key_port):
        log.error("needs --upstream and the key in $%s (or --key-port to receive the rollout's)", args.key_env)
        return 2
    if key and args.key_port:
        # Per-rollout keys replace the pool's shared key: holding both would make the shared one a fallback.
        log.error("--key-port takes only the rollout's key, but $%s holds a key too: unset it (docs/design/rollout-keys.md)", args.key_env)
        return 2
    try:
        upstream = Upstream(args.upstream, key)
    except ValueError as e:
        log.error("%s", e)
        return 2
    # Both ports first, before anything else: the startup probe passes only once they are held.
    try:
        forward = listen(args.host, args.port)
        traced = listen(args.trace_host, args.trace_port) if args.trace_port else None
    except OSError as e:
        log.error("cannot listen: %s", e)
        return 2
    log.info(
        "listening on %s:%d, forwarding %s to %s; trace on %s",
        args.host, forward.getsockname()[1], " ".join(sorted(r for _m, r in ROUTES)), args.upstream,
        f"{args.trace_host}:{traced.getsockname()[1]}" if traced is not None else "no port",
    )
    hand_over = None
    if args.key_port:
        hand_over = KeyHandOver(upstream)
        try:
            delivery = KeyDeliveryServer((args.key_host, args.key_port), hand_over)
        except OSError as e:
            log.error("cannot listen for the rollout key: %s", e)
            return 2
        threading.Thread(target=delivery.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True).start()
    return supervise(forward, traced, upstream, hand_over)


if __name__ == "__main__":
    sys.exit(main())
