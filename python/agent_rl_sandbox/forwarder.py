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

Per-rollout keys (docs/design/rollout-keys.md): with ``--key-port`` the forwarder also accepts, once,
``PUT /rollout-key`` on the pod's address: the trainer delivers the key it minted for this claim
right after the claim is Ready, before the agent runs anything, and the listener then closes. That
key replaces the env's (which may then be absent: requests get 503 until the delivery) and is held,
attached and redacted exactly as the env's was.

Standard library only, like ``runtime.py``: it runs on the sandbox image's own Python.
"""

from __future__ import annotations

import argparse
import http.client
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
from typing import Any
from urllib.parse import urlsplit

#: The forwarder's port on the pod's loopback (components/sandbox/model.ts SANDBOX_FORWARDER_PORT).
DEFAULT_PORT = 7100
#: Env var holding the ingress key, in the forwarder's container only.
DEFAULT_KEY_ENV = "AGENT_RL_UPSTREAM_KEY"
#: Where the trainer delivers the rollout's own key at claim time (``--key-port``; docs/design/rollout-keys.md).
KEY_DELIVERY_PATH = "/rollout-key"
#: The shape of a rollout key (rollout_keys.py KEY_RE); nothing else is accepted there.
ROLLOUT_KEY_RE = re.compile(r"^rk1\.[A-Za-z0-9_-]{43}$")
#: The routes the sandboxes may call (the ingress's allow-list for sandbox keys).
ROUTES = frozenset({("POST", "/v1/chat/completions"), ("GET", "/v1/models")})
#: Request headers passed upstream; every other header of the caller is dropped.
REQUEST_HEADERS = ("Content-Type", "Accept")
#: Response headers passed back; the rest (Set-Cookie, Server, anything echoed) is dropped.
RESPONSE_HEADERS = ("Content-Type", "Cache-Control", "X-Request-Id")
#: Largest request body (a long agent transcript is a few MiB of JSON).
MAX_BODY_BYTES = 16 * 1024 * 1024
#: Seconds one upstream read may take (a long generation; OpenCodeConfig.request_timeout_ms is 600 s).
UPSTREAM_READ_SECONDS = 900.0
#: What replaces the key wherever it would come back.
REDACTED = b"[redacted]"

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


class Handler(BaseHTTPRequestHandler):
    server: "ForwarderServer"
    protocol_version = "HTTP/1.1"
    # No "Server: BaseHTTP/x Python/y" banner.
    server_version = "forwarder"
    sys_version = ""

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
        except (BrokenPipeError, ConnectionResetError):
            status = HTTPStatus.BAD_GATEWAY  # the caller went away mid-stream
            self.close_connection = True
        finally:
            shown = route if (method, route) in ROUTES else "<other>"
            log.info("%s %s %d %.3fs", method, shown, int(status), time.monotonic() - started)

    def _forward(self, method: str, route: str) -> int:
        up = self.server.upstream
        body: bytes | None = None
        if method == "POST":
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                self.close_connection = True
                self._reply(HTTPStatus.LENGTH_REQUIRED, "Content-Length required")
                return HTTPStatus.LENGTH_REQUIRED
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY_BYTES:
                self.close_connection = True
                self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body must be 0..{MAX_BODY_BYTES} bytes")
                return HTTPStatus.REQUEST_ENTITY_TOO_LARGE
            body = self.rfile.read(length)
        if not up.key:
            self.close_connection = True
            self._reply(HTTPStatus.SERVICE_UNAVAILABLE, "no key yet: the rollout's key is delivered when the sandbox is claimed")
            return HTTPStatus.SERVICE_UNAVAILABLE
        headers = {h: self.headers[h] for h in REQUEST_HEADERS if self.headers.get(h)}
        # Set last, whatever the caller sent: the caller's Authorization was never copied.
        headers["Authorization"] = f"Bearer {up.key}"
        conn = up.connect()
        try:
            try:
                conn.request(method, up.prefix + route, body=body, headers=headers)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                self.close_connection = True
                # The error's class only: its text may carry the upstream's address details, never more is needed.
                self._reply(HTTPStatus.BAD_GATEWAY, f"upstream unreachable: {type(e).__name__}")
                return HTTPStatus.BAD_GATEWAY
            self._relay(resp)
            return resp.status
        finally:
            conn.close()

    def _relay(self, resp: http.client.HTTPResponse) -> None:
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
        try:
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                self._chunk(redactor.feed(chunk))
        except (OSError, http.client.HTTPException):
            # The upstream broke mid-stream: end the caller's stream, without detail.
            self.close_connection = True
        self._chunk(redactor.flush())
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

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


class ForwarderServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], upstream: Upstream) -> None:
        self.upstream = upstream
        super().__init__(address, Handler)


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


class KeyDeliveryServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], upstream: Upstream) -> None:
        self.upstream = upstream
        self._lock = threading.Lock()
        self._delivered = False
        super().__init__(address, KeyDeliveryHandler)

    def close(self) -> None:
        """Stops serving and closes the listening socket (connections are refused from then on)."""
        self.shutdown()
        self.server_close()

    def deliver(self, key: str) -> bool:
        with self._lock:
            if self._delivered:
                return False
            self._delivered = True
            self.upstream.key = key
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
    p.add_argument("--upstream", help="the ingress URL (its /v1/chat/completions and /v1/models are called)")
    p.add_argument("--key-env", default=DEFAULT_KEY_ENV, help="env var holding the ingress key (never a flag: argv is readable)")
    p.add_argument("--key-host", default="0.0.0.0", help="where the trainer delivers the rollout's key (the pod's address)")
    p.add_argument("--key-port", type=int, default=0, help="accept the rollout's key once on this port (0: none; the env key only)")
    p.add_argument("--probe", action="store_true", help="exit 0 when the forwarder accepts connections, else 1")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.probe:
        return 0 if probe(args.host, args.port) else 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s forwarder %(message)s", stream=sys.stderr)
    key = os.environ.pop(args.key_env, "")
    if not args.upstream or not (key or args.key_port):
        log.error("needs --upstream and the key in $%s (or --key-port to receive the rollout's)", args.key_env)
        return 2
    try:
        upstream = Upstream(args.upstream, key)
    except ValueError as e:
        log.error("%s", e)
        return 2
    server = ForwarderServer((args.host, args.port), upstream)
    if args.key_port:
        delivery = KeyDeliveryServer((args.key_host, args.key_port), upstream)
        threading.Thread(target=delivery.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True).start()

    def stop(_sig: int, _frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("listening on %s:%d, forwarding %s to %s", args.host, server.server_address[1], " ".join(sorted(r for _m, r in ROUTES)), args.upstream)
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
