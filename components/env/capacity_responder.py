#!/usr/bin/env python3
"""Capacity responder of the env router (components/env/router.ts, ROUTER.md).

nginx sends `WS /ws` here only when every replica holds its k sessions. A refused upgrade
reaches OpenEnv's client as a bare "HTTP 503" (the body is dropped), so this answers the
upgrade (RFC 6455: Sec-WebSocket-Accept = base64(sha1(key + GUID))), sends one text frame in
OpenEnv's error shape, {"type":"error","data":{"code":"CAPACITY_REACHED","message":...}}, which
the client raises as RuntimeError("Server error: <message> (code: CAPACITY_REACHED)")
(openenv env_client.py _send_and_receive), then a close frame. A plain HTTP request gets the
router's 503 JSON body. Standard library only: it runs in the env's own image (any python3).

Bounded: one thread per connection, at most --max-connections at once (beyond that the socket
is closed at once and nginx answers its own 503), a request head of at most 16 KiB read within
--timeout seconds, and the close handshake waited for at most --timeout seconds.

With --metrics-listen it also serves GET /metrics there (README "Observability"): the counter
agentrl_env_capacity_reached_total{env}, one per CAPACITY_REACHED frame sent (a plain HTTP 503 is
not a session refused and is not counted). The refusals are counted here, where they happen, rather
than parsed out of nginx's log. At most 8 scrapes at once, each head read within --timeout.

With --probe host:port it is its own container's probe instead (the kubelet's exec probe: the
responder listens on loopback, which an httpGet probe from the node cannot reach): GET
/responder/health on that address, exit 0 on a 200 within --timeout, else 1 with the reason.

Usage: capacity_responder.py --listen 127.0.0.1:8081 --config responder.json [--metrics-listen 0.0.0.0:9403]
       capacity_responder.py --probe 127.0.0.1:8081 [--timeout 2]
responder.json: {"ws_frame": {...}, "http_body": "...", "env": "..."} (router.ts renders it).
Exit codes: 0 on SIGTERM/SIGINT, 1 when --listen or --metrics-listen cannot be bound, 2 on a bad
command line or config (message on stderr).
"""

import argparse
import base64
import hashlib
import json
import os
import signal
import socket
import socketserver
import struct
import sys
import threading

# The shared /metrics server, mounted beside this script (in the source tree: components/shared).
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, os.pardir, "shared")]
import metrics_http  # noqa: E402

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_HEAD_BYTES = 16 * 1024
# 1013 "Try Again Later" (RFC 6455 registry): the refusal is temporary.
CLOSE_CODE = 1013
HEALTH_PATH = "/responder/health"


def log(msg):
    sys.stderr.write("capacity-responder: %s\n" % msg)
    sys.stderr.flush()


def read_head(sock):
    """Bytes up to and including the blank line ending the request head; None if too big or cut."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD_BYTES:
            return None
        chunk = sock.recv(4096)
        if not chunk:
            return None
        data += chunk
    return data[: data.index(b"\r\n\r\n") + 4]


def parse_head(head):
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    headers = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            return None
        headers[name.strip().lower()] = value.strip()
    return parts[0], parts[1], headers


def frame(opcode, payload):
    """One unmasked, final server frame (RFC 6455 5.2)."""
    n = len(payload)
    if n < 126:
        header = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 65536:
        header = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        header = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return header + payload


def wait_for_close(sock, budget=64 * 1024):
    """Reads client frames (skipping e.g. a queued reset) until a close frame, EOF, the timeout or `budget` bytes."""
    buf = b""
    while len(buf) <= budget:
        # Frame head: 2 bytes, then 2 or 8 bytes of length, then a 4-byte mask (clients always mask).
        if len(buf) >= 2:
            opcode, n = buf[0] & 0x0F, buf[1] & 0x7F
            if opcode == 0x8:
                return
            ext = 2 if n == 126 else 8 if n == 127 else 0
            if len(buf) >= 2 + ext:
                if ext:
                    n = struct.unpack("!H" if ext == 2 else "!Q", buf[2 : 2 + ext])[0]
                total = 2 + ext + (4 if buf[1] & 0x80 else 0) + n
                if len(buf) >= total:
                    buf = buf[total:]
                    continue
        chunk = sock.recv(4096)
        if not chunk:
            return
        buf += chunk


def accept_key(key):
    return base64.b64encode(hashlib.sha1((key + WS_GUID).encode("ascii")).digest()).decode("ascii")


def valid_key(key):
    try:
        return len(base64.b64decode(key, validate=True)) == 16
    except (ValueError, TypeError):
        return False


def http_response(status, reason, body, extra=""):
    data = body.encode("utf-8")
    return (
        "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%sConnection: close\r\n\r\n"
        % (status, reason, len(data), extra)
    ).encode("latin-1") + data


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        cfg = self.server.cfg
        sock.settimeout(self.server.timeout_s)
        try:
            head = read_head(sock)
            parsed = parse_head(head) if head is not None else None
            if parsed is None:
                sock.sendall(http_response(400, "Bad Request", json.dumps({"error": "malformed or oversized request head (max %d bytes)" % MAX_HEAD_BYTES})))
                return
            method, target, headers = parsed
            path = target.split("?", 1)[0]
            if method == "GET" and path == HEALTH_PATH:
                sock.sendall(http_response(200, "OK", json.dumps({"status": "healthy", "role": "capacity-responder", "env": cfg["env"]})))
                return
            upgrade = headers.get("upgrade", "").lower() == "websocket" and "upgrade" in headers.get("connection", "").lower()
            if not upgrade:
                # nginx in front adds Retry-After (router.ts @sessions_unavailable).
                sock.sendall(http_response(503, "Service Unavailable", cfg["http_body"]))
                log("%s %s: 503 (plain HTTP)" % (method, path))
                return
            key = headers.get("sec-websocket-key", "")
            if headers.get("sec-websocket-version") != "13" or not valid_key(key):
                sock.sendall(http_response(400, "Bad Request", json.dumps({"error": "websocket upgrade needs Sec-WebSocket-Version 13 and a 16-byte Sec-WebSocket-Key"}), "Sec-WebSocket-Version: 13\r\n"))
                return
            sock.sendall(
                (
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n"
                    % accept_key(key)
                ).encode("latin-1")
            )
            sock.sendall(frame(0x1, json.dumps(cfg["ws_frame"]).encode("utf-8")))
            sock.sendall(frame(0x8, struct.pack("!H", CLOSE_CODE) + b"env at capacity"))
            self.server.count_refusal()
            log("WS %s: CAPACITY_REACHED frame sent" % path)
            # Wait (bounded) for the client's close frame, so it has read the error frame before the TCP close.
            wait_for_close(sock)
        except (socket.timeout, OSError) as e:
            log("connection from %s ended: %s" % (self.client_address[0], e))
        finally:
            self.server.slots.release()


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, cfg, timeout_s, max_connections):
        self.cfg = cfg
        self.timeout_s = timeout_s
        self.slots = threading.BoundedSemaphore(max_connections)
        self.refusals = 0
        self.refusals_lock = threading.Lock()
        socketserver.ThreadingTCPServer.__init__(self, address, Handler)

    def count_refusal(self):
        with self.refusals_lock:
            self.refusals += 1

    def metrics_text(self):
        with self.refusals_lock:
            n = self.refusals
        return (
            "# HELP agentrl_env_capacity_reached_total WebSocket sessions the env router refused with CAPACITY_REACHED (every replica full).\n"
            "# TYPE agentrl_env_capacity_reached_total counter\n"
            'agentrl_env_capacity_reached_total{env="%s"} %d\n' % (self.cfg["env"], n)
        )

    def verify_request(self, request, client_address):
        # Over the bound: drop the connection; nginx then answers its own 503 (ROUTER.md).
        if not self.slots.acquire(blocking=False):
            log("over --max-connections: closing a connection from %s" % client_address[0])
            return False
        return True

    def handle_error(self, request, client_address):
        log("error on a connection from %s: %s" % (client_address[0], sys.exc_info()[1]))


def probe(address, timeout_s):
    """0 when the responder at address answers GET /responder/health with 200 within timeout_s; 1 otherwise (reason on stderr)."""
    try:
        with socket.create_connection(address, timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            sock.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n" % (HEALTH_PATH, address[0], address[1])).encode("latin-1"))
            head = read_head(sock)
    except OSError as e:
        log("probe %s:%d: %s" % (address[0], address[1], e))
        return 1
    status = head.split(b"\r\n", 1)[0].decode("latin-1") if head is not None else "no complete response head"
    if not status.startswith("HTTP/1.1 200 "):
        log("probe %s:%d: %s" % (address[0], address[1], status))
        return 1
    return 0


def load_config(path):
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    frame_ = cfg.get("ws_frame")
    if not isinstance(frame_, dict) or frame_.get("type") != "error" or not isinstance(frame_.get("data"), dict):
        raise ValueError("ws_frame must be OpenEnv's error message {\"type\": \"error\", \"data\": {...}}")
    if not isinstance(cfg.get("http_body"), str) or not isinstance(cfg.get("env"), str):
        raise ValueError("http_body and env must be strings")
    return cfg


def main(argv):
    p = argparse.ArgumentParser(description="Answers an env router's over-capacity websocket sessions with OpenEnv's CAPACITY_REACHED frame.")
    p.add_argument("--listen", help="host:port to bind, e.g. 127.0.0.1:8081 (loopback: only nginx beside it calls); required unless --probe")
    p.add_argument("--config", help="JSON rendered by router.ts (renderResponderConfig); required unless --probe")
    p.add_argument("--probe", help="host:port of a running responder: check its health route and exit (0 healthy, 1 not)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds for reading a request head and for the close handshake")
    p.add_argument("--max-connections", type=int, default=64, help="connections handled at once")
    p.add_argument("--metrics-listen", help="host:port to serve GET /metrics on (agentrl_env_capacity_reached_total), e.g. 0.0.0.0:9403; unset: no metrics")
    args = p.parse_args(argv)
    if args.probe is not None:
        target = metrics_http.host_port(args.probe)
        if target is None:
            p.error("--probe must be host:port, e.g. 127.0.0.1:8081")
        return probe(target, args.timeout)
    if args.listen is None or args.config is None:
        p.error("--listen and --config are required (or --probe host:port)")
    listen = metrics_http.host_port(args.listen)
    if listen is None:
        p.error("--listen must be host:port")
    metrics_listen = None
    if args.metrics_listen is not None:
        metrics_listen = metrics_http.host_port(args.metrics_listen)
        if metrics_listen is None:
            p.error("--metrics-listen %r must be host:port, e.g. 0.0.0.0:9403" % args.metrics_listen)
    try:
        cfg = load_config(args.config)
    except (OSError, ValueError) as e:
        log("cannot use --config %s: %s" % (args.config, e))
        return 2
    try:
        server = Server(listen, cfg, args.timeout, args.max_connections)
        metrics = (
            metrics_http.MetricsServer(metrics_listen, server.metrics_text, "agentrl-capacity-responder", args.timeout)
            if metrics_listen is not None
            else None
        )
    except OSError as e:
        log("cannot listen: %s" % e)
        return 1
    if metrics is not None:
        metrics.serve_in_background()
        log("serving /metrics on %s" % args.metrics_listen)

    def stop(_signum, _frame):
        threading.Thread(target=server.shutdown, daemon=True).start()
        if metrics is not None:
            threading.Thread(target=metrics.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log("listening on %s for env %s" % (args.listen, cfg["env"]))
    server.serve_forever(poll_interval=0.5)
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
