"""Per-rollout ingress keys: the verifier nginx asks (``auth_request``) and the API the trainer mints
and revokes them through (docs/design/rollout-keys.md says why this mechanism).

A rollout key is ``rk1.`` followed by 43 URL-safe base64 characters (32 random bytes). The verifier
keeps, per live key, only its SHA-256, the rollout it belongs to and its expiry; a key is valid while
it is in that table and unexpired. Revoking (the rollout or claim ended) removes it: the next
request with it is refused, on every ingress replica at once, because every replica asks this one
process. With ``--state-file`` (an emptyDir on Kubernetes) the table survives a restart of the
process: each mint and revocation rewrites the file (digests, rollouts and wall-clock expiries, never
a key; written whole, then renamed), and a new process reads it back, dropping expired and malformed
entries. Without it a restart empties the table (every live rollout's key is refused: fail closed).

Two listeners, both plain HTTP:

- the **verify** listener (``--verify-host``/``--verify-port``), which only the ingress reaches:
  ``GET /verify`` with the client's ``Authorization`` and nginx's ``X-Original-URI`` /
  ``X-Original-Method``: 204 with ``X-Rollout-Id: <rollout>`` when the key is live and the route is
  an inference route, 401 when the key is missing, unknown, revoked or expired, 403 when the route
  is not one a rollout key may call. Nothing else is served there.
- the **admin** listener (``--admin-host``/``--admin-port``, loopback by default), with
  ``Authorization: Bearer <admin key>`` (from the file ``--admin-key-file``, a mounted Secret on
  Kubernetes, else from the env var ``--admin-key-env``; never a flag): ``POST /rollouts``
  ``{"rollout": id, "ttl_seconds": n}`` -> 201 ``{"key", "rollout", "expires_in"}`` (minting again for the same rollout revokes its earlier key), ``DELETE
  /rollouts/<id>`` -> 204 whether or not it was live, ``GET /rollouts`` -> ``{"live": n}``.

Bounds: at most ``MAX_LIVE_KEYS`` live keys (minting past it is 429 after expired ones are
dropped), ttl 1..``MAX_TTL_SECONDS``, rollout ids ``[A-Za-z0-9._-]{1,128}``, request bodies up to
``MAX_BODY_BYTES``. Standard library only, like runtime.py and forwarder.py.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.client
import json
import logging
import os
import re
import secrets
import signal
import sys
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import urlsplit

#: Prefix of every rollout key (the ingress's nginx map tells them from operators' keys by it).
KEY_PREFIX = "rk1."
#: A rollout key's full shape (components/ingress/nginx.ts ROLLOUT_KEY_PATTERN is the same).
KEY_RE = re.compile(r"^rk1\.[A-Za-z0-9_-]{43}$")
ROLLOUT_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
#: The routes a rollout key may call: the inference routes and nothing else.
INFERENCE_ROUTES = frozenset({("POST", "/v1/chat/completions"), ("POST", "/v1/completions"), ("GET", "/v1/models")})
MAX_LIVE_KEYS = 4096
MAX_TTL_SECONDS = 86400
DEFAULT_TTL_SECONDS = 3600
MAX_BODY_BYTES = 4096
#: The state file's format (``--state-file``), and its largest size: MAX_LIVE_KEYS rows of about 160 bytes.
STATE_VERSION = 1
MAX_STATE_BYTES = 2 * 1024 * 1024
DEFAULT_VERIFY_PORT = 7200
DEFAULT_ADMIN_PORT = 7201
DEFAULT_ADMIN_KEY_ENV = "AGENT_RL_ROLLOUT_ADMIN_KEY"
#: The most an admin key file may hold (a key is 16..MAX_ADMIN_KEY_BYTES characters; the rendered one is 48).
MAX_ADMIN_KEY_BYTES = 1024

log = logging.getLogger("agent_rl_sandbox.rollout_keys")


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class _Entry:
    rollout: str
    expires_at: float


class MintRefused(ValueError):
    """A mint request the table will not honour (bad id or ttl, table full); the message says which."""

    def __init__(self, message: str, status: int = HTTPStatus.BAD_REQUEST) -> None:
        super().__init__(message)
        self.status = status


class KeyTable:
    """The live rollout keys: digest -> (rollout, expiry), and rollout -> digest. Thread-safe."""

    def __init__(self, *, max_live: int = MAX_LIVE_KEYS, clock: Callable[[], float] = time.monotonic, state_file: str | None = None,
                 wall: Callable[[], float] = time.time) -> None:
        self.max_live = max_live
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._by_digest: dict[str, _Entry] = {}
        self._by_rollout: dict[str, str] = {}
        #: Where the table is kept across restarts (``--state-file``); None: in memory only.
        self.state_file = state_file
        if state_file is not None:
            self._load(state_file)

    def mint(self, rollout: str, ttl_seconds: int) -> str:
        if not isinstance(rollout, str) or not ROLLOUT_ID_RE.match(rollout):
            raise MintRefused("rollout: must match [A-Za-z0-9._-]{1,128}")
        if not isinstance(ttl_seconds, int) or isinstance(ttl_seconds, bool) or not 1 <= ttl_seconds <= MAX_TTL_SECONDS:
            raise MintRefused(f"ttl_seconds: must be an integer in 1..{MAX_TTL_SECONDS}")
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        with self._lock:
            self._drop_expired()
            self._revoke(rollout)
            if len(self._by_digest) >= self.max_live:
                raise MintRefused(f"{self.max_live} rollout keys are live: revoke ended rollouts first", HTTPStatus.TOO_MANY_REQUESTS)
            d = _digest(key)
            self._by_digest[d] = _Entry(rollout, self._clock() + ttl_seconds)
            self._by_rollout[rollout] = d
            self._save()
        return key

    def revoke(self, rollout: str) -> bool:
        with self._lock:
            gone = self._revoke(rollout)
            if gone:
                self._save()
            return gone

    def rollout_of(self, key: str) -> str | None:
        """The rollout a live key belongs to, or None (unknown, revoked, expired, malformed)."""
        if not KEY_RE.match(key):
            return None
        d = _digest(key)
        with self._lock:
            e = self._by_digest.get(d)
            if e is None:
                return None
            if self._clock() >= e.expires_at:
                self._revoke(e.rollout)
                return None
            # Constant-time compare of what was looked up (the dict lookup already matched the digest).
            return e.rollout if hmac.compare_digest(self._by_rollout.get(e.rollout, ""), d) else None

    def live(self) -> int:
        with self._lock:
            self._drop_expired()
            return len(self._by_digest)

    def _revoke(self, rollout: str) -> bool:
        d = self._by_rollout.pop(rollout, None)
        if d is None:
            return False
        self._by_digest.pop(d, None)
        return True

    def _drop_expired(self) -> None:
        now = self._clock()
        for rollout in [e.rollout for e in self._by_digest.values() if now >= e.expires_at]:
            self._revoke(rollout)

    def _save(self) -> None:
        """Writes the table to the state file (under the lock): whole to a temporary file, then renamed over it, so a
        process killed mid-write leaves the previous table. A failed write is logged; the table in memory still holds."""
        if self.state_file is None:
            return
        now, wall = self._clock(), self._wall()
        rows = [{"digest": d, "rollout": e.rollout, "expires": wall + (e.expires_at - now)} for d, e in self._by_digest.items()]
        tmp = f"{self.state_file}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump({"version": STATE_VERSION, "keys": rows}, f)
            os.replace(tmp, self.state_file)
        except OSError as e:
            log.error("cannot write the key table to %s (%s): a restart would lose the live keys", self.state_file, e.strerror)

    def _load(self, path: str) -> None:
        """Reads back a table _save wrote; expired, malformed and surplus entries are left out. No file: an empty table."""
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_STATE_BYTES + 1)
        except FileNotFoundError:
            return
        except OSError as e:
            log.error("cannot read the key table from %s (%s): starting empty", path, e.strerror)
            return
        try:
            state = json.loads(raw) if len(raw) <= MAX_STATE_BYTES else None
        except ValueError:
            state = None
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION or not isinstance(state.get("keys"), list):
            log.error("the key table in %s is not one this verifier wrote (or over %d bytes): starting empty", path, MAX_STATE_BYTES)
            return
        now, wall = self._clock(), self._wall()
        for row in state["keys"][: self.max_live]:
            if not isinstance(row, dict):
                continue
            d, rollout, expires = row.get("digest"), row.get("rollout"), row.get("expires")
            if not (isinstance(d, str) and re.fullmatch(r"[0-9a-f]{64}", d) and isinstance(rollout, str) and ROLLOUT_ID_RE.match(rollout)):
                continue
            if isinstance(expires, bool) or not isinstance(expires, (int, float)) or expires <= wall or rollout in self._by_rollout:
                continue
            self._by_digest[d] = _Entry(rollout, now + min(expires - wall, MAX_TTL_SECONDS))
            self._by_rollout[rollout] = d
        log.info("read %d live key(s) back from %s", len(self._by_digest), path)


def _bearer(value: str | None) -> str:
    if value and value.startswith("Bearer "):
        return value[len("Bearer ") :]
    return ""


class _Base(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "rollout-keys"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass  # never log a request line or header: they carry keys

    def _reply(self, status: int, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)


class VerifyHandler(_Base):
    server: "VerifyServer"

    def do_GET(self) -> None:  # noqa: N802 (stdlib naming)
        if urlsplit(self.path).path != "/verify":
            self._reply(HTTPStatus.NOT_FOUND)
            return
        route = (self.headers.get("X-Original-Method", ""), urlsplit(self.headers.get("X-Original-URI", "")).path)
        rollout = self.server.table.rollout_of(_bearer(self.headers.get("Authorization")))
        if rollout is None:
            self._reply(HTTPStatus.UNAUTHORIZED, headers={"WWW-Authenticate": 'Bearer realm="vllm-ingress"'})
        elif route not in INFERENCE_ROUTES:
            self._reply(HTTPStatus.FORBIDDEN)
        else:
            self._reply(HTTPStatus.NO_CONTENT, headers={"X-Rollout-Id": rollout})


class AdminHandler(_Base):
    server: "AdminServer"

    def _authorized(self) -> bool:
        if hmac.compare_digest(_bearer(self.headers.get("Authorization")).encode(), self.server.admin_key.encode()):
            return True
        self.close_connection = True
        self._reply(HTTPStatus.UNAUTHORIZED, {"error": "admin key required"})
        return False

    def do_GET(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        if urlsplit(self.path).path != "/rollouts":
            self._reply(HTTPStatus.NOT_FOUND, {"error": "not found"})
            return
        self._reply(HTTPStatus.OK, {"live": self.server.table.live()})

    def do_POST(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        if urlsplit(self.path).path != "/rollouts":
            self.close_connection = True
            self._reply(HTTPStatus.NOT_FOUND, {"error": "not found"})
            return
        try:
            length = int(self.headers.get("Content-Length", "-1"))
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY_BYTES:
            self.close_connection = True
            self._reply(HTTPStatus.BAD_REQUEST, {"error": f"a JSON body of 1..{MAX_BODY_BYTES} bytes with Content-Length is required"})
            return
        try:
            req = json.loads(self.rfile.read(length))
            if not isinstance(req, dict):
                raise MintRefused("body: must be a JSON object {rollout, ttl_seconds}")
            ttl = req.get("ttl_seconds", DEFAULT_TTL_SECONDS)
            key = self.server.table.mint(req.get("rollout"), ttl)
        except json.JSONDecodeError:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": "body: not JSON"})
            return
        except MintRefused as e:
            self._reply(e.status, {"error": str(e)})
            return
        log.info("minted a key for rollout %s (ttl %ss)", req["rollout"], ttl)
        self._reply(HTTPStatus.CREATED, {"key": key, "rollout": req["rollout"], "expires_in": ttl})

    def do_DELETE(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        path = urlsplit(self.path).path
        rollout = path[len("/rollouts/") :] if path.startswith("/rollouts/") else ""
        if not ROLLOUT_ID_RE.match(rollout):
            self._reply(HTTPStatus.NOT_FOUND, {"error": "not found"})
            return
        if self.server.table.revoke(rollout):
            log.info("revoked the key of rollout %s", rollout)
        self._reply(HTTPStatus.NO_CONTENT)


class VerifyServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], table: KeyTable) -> None:
        self.table = table
        super().__init__(address, VerifyHandler)


class AdminServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], table: KeyTable, admin_key: str) -> None:
        if len(admin_key) < 16:
            raise ValueError("the admin key must be at least 16 characters")
        self.table = table
        self.admin_key = admin_key
        super().__init__(address, AdminHandler)


class RolloutKeyError(RuntimeError):
    """The verifier refused or could not be reached; the message never carries a key."""


class RolloutKeysClient:
    """The trainer's side: mint a rollout's key at claim time, revoke it when the claim ends."""

    def __init__(self, admin_url: str, admin_key: str, *, timeout: float = 10.0) -> None:
        parts = urlsplit(admin_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the rollout keys admin URL must be http://host:port, got {admin_url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.admin_key = admin_key
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Authorization": f"Bearer {self.admin_key}"}
            if data is not None:
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read(MAX_BODY_BYTES + 1)
        except (OSError, http.client.HTTPException) as e:
            raise RolloutKeyError(f"rollout keys verifier unreachable at {self.host}:{self.port}: {type(e).__name__}") from None
        finally:
            conn.close()
        try:
            parsed = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            parsed = {}
        return resp.status, parsed if isinstance(parsed, dict) else {}

    def mint(self, rollout: str, ttl_seconds: int) -> str:
        status, body = self._call("POST", "/rollouts", {"rollout": rollout, "ttl_seconds": int(ttl_seconds)})
        key = body.get("key")
        if status != HTTPStatus.CREATED or not isinstance(key, str) or not KEY_RE.match(key):
            raise RolloutKeyError(f"minting a key for rollout {rollout} failed: {status} {body.get('error', '')}".rstrip())
        return key

    def revoke(self, rollout: str) -> None:
        status, body = self._call("DELETE", f"/rollouts/{rollout}")
        if status != HTTPStatus.NO_CONTENT:
            raise RolloutKeyError(f"revoking rollout {rollout}'s key failed: {status} {body.get('error', '')}".rstrip())


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="agent_rl_sandbox.rollout_keys", description="Per-rollout ingress keys: verifier and admin API (module docstring).")
    p.add_argument("--verify-host", default="0.0.0.0", help="where nginx's auth_request reaches the verifier")
    p.add_argument("--verify-port", type=int, default=DEFAULT_VERIFY_PORT)
    p.add_argument("--admin-host", default="127.0.0.1", help="where the trainer mints and revokes (loopback unless the trainer is elsewhere)")
    p.add_argument("--admin-port", type=int, default=DEFAULT_ADMIN_PORT)
    source = p.add_mutually_exclusive_group()
    source.add_argument("--admin-key-file", help="file holding the admin key (a mounted Secret: no env var carries it); a trailing newline is ignored")
    source.add_argument("--admin-key-env", default=DEFAULT_ADMIN_KEY_ENV, help="env var holding the admin key when no file is given (never a flag: argv is readable)")
    p.add_argument("--max-live", type=int, default=MAX_LIVE_KEYS)
    p.add_argument("--state-file", default=None,
                   help="keep the table here across restarts (digests and expiries, never a key; an emptyDir on Kubernetes); default: memory only")
    return p.parse_args(argv)


def read_admin_key(args: argparse.Namespace) -> tuple[str, str]:
    """The admin key and where it came from (for the error message): the file when given, else the env var."""
    if args.admin_key_file:
        where = f"the file {args.admin_key_file}"
        try:
            with open(args.admin_key_file, "rb") as f:
                raw = f.read(MAX_ADMIN_KEY_BYTES + 1)
        except OSError as e:
            return "", f"{where} ({e.strerror})"
        if len(raw) > MAX_ADMIN_KEY_BYTES:
            return "", f"{where} (over {MAX_ADMIN_KEY_BYTES} bytes)"
        return raw.decode("utf-8", "replace").rstrip("\r\n"), where
    return os.environ.pop(args.admin_key_env, ""), f"${args.admin_key_env}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s rollout-keys %(message)s", stream=sys.stderr)
    admin_key, where = read_admin_key(args)
    if len(admin_key) < 16 or any(c in admin_key for c in "\r\n\0"):
        log.error("needs the admin key (16+ characters, one line) in %s", where)
        return 2
    table = KeyTable(max_live=args.max_live, state_file=args.state_file)
    verify = VerifyServer((args.verify_host, args.verify_port), table)
    admin = AdminServer((args.admin_host, args.admin_port), table, admin_key)
    threading.Thread(target=admin.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True).start()

    def stop(_sig: int, _frame: Any) -> None:
        threading.Thread(target=verify.shutdown, daemon=True).start()
        threading.Thread(target=admin.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("verify on %s:%d, admin on %s:%d", args.verify_host, verify.server_address[1], args.admin_host, admin.server_address[1])
    try:
        verify.serve_forever(poll_interval=0.5)
    finally:
        verify.server_close()
        admin.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
