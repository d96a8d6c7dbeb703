"""The GET /metrics server the project's own programs share (README "Observability").

Serves the Prometheus text format 0.0.4 on GET /metrics and nothing else: another path is 404,
another method (HEAD included) 405 with `Allow: GET`. At most `max_connections` requests at once
(more are closed at once), each request head read within `timeout` seconds, no access log.

Mounted beside each program that imports it, in the same directory (a ConfigMap, a Docker upload):
components/env/capacity_responder.py, components/observability/session_counter.py and
components/training/role_runner.py. They run as `python3 -I`, which leaves the script's directory
out of sys.path, so each puts its own directory there (and, run from the source tree, this one's).
Standard library only.
"""

import http.server
import re
import threading

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
ONLY_METRICS = "only GET /metrics is served\n"


class Unavailable(Exception):
    """Raised by a render function when its series cannot be read now: answered 500 with the message."""


def host_port(value):
    """(host, port) of "host:port" or "[v6 address]:port"; None when it is neither or the port is not 1..65535."""
    m = re.match(r"^(\[[^\]]+\]|[^:]+):(\d+)$", value)
    if m is None or not 1 <= int(m.group(2)) <= 65535:
        return None
    return m.group(1).strip("[]"), int(m.group(2))


class MetricsHandler(http.server.BaseHTTPRequestHandler):
    def setup(self):
        # The server's name (the Server header) and head-read timeout, set per server.
        self.server_version = self.server.name
        self.timeout = self.server.timeout_s
        http.server.BaseHTTPRequestHandler.setup(self)

    def _send(self, status, body, content_type="text/plain; charset=utf-8"):
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if status == 405:
            self.send_header("Allow", "GET")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_GET(self):
        if self.path != "/metrics":
            self._send(404, ONLY_METRICS)
            return
        try:
            body = self.server.render()
        except Unavailable as e:
            self._send(500, str(e))
            return
        self._send(200, body, CONTENT_TYPE)

    def _refuse(self):
        self._send(405, ONLY_METRICS)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _refuse

    def log_message(self, *_args):
        pass


class MetricsServer(http.server.ThreadingHTTPServer):
    """Serves render() (the exposition text) on `address`; raises OSError when it cannot bind."""

    daemon_threads = True

    def __init__(self, address, render, name, timeout=5.0, max_connections=8):
        self.render = render
        self.name = name
        self.timeout_s = timeout
        self.slots = threading.BoundedSemaphore(max_connections)
        http.server.ThreadingHTTPServer.__init__(self, address, MetricsHandler)

    def verify_request(self, request, client_address):
        return self.slots.acquire(blocking=False)

    def process_request_thread(self, request, client_address):
        try:
            http.server.ThreadingHTTPServer.process_request_thread(self, request, client_address)
        finally:
            self.slots.release()

    def serve_in_background(self):
        """serve_forever on a daemon thread (stopped by shutdown())."""
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True).start()
