"""The command runtime inside every sandbox: a small HTTP server on port 8888 serving exactly
what the trainer's sandbox backend needs (OpenEnv opencode env, ``sandbox/base.py``):

- ``GET  /healthz``                    ready (HOME seeded, listening): the pod's readiness probe
- ``POST /exec``   {cmd, env, cwd, timeout} -> {exit_code, stdout, stderr, timed_out}  (``bash -c cmd``;
                                            each stream kept up to --max-output-bytes, 8 MiB by default,
                                            in memory and on disk alike; the rest counted and cut)
- ``POST /jobs``   {cmd, env, cwd}          -> {id, pid}          (background job)
- ``GET  /jobs/<id>?wait=S``                -> {id, pid, running, exit_code} (long poll <= 30 s)
- ``POST /jobs/<id>/kill``                  -> same, after SIGTERM then SIGKILL of its process group
- ``PUT  /files?path=P`` (body: bytes)      write, parent directories created (streamed, <= 64 MiB)
- ``GET  /files?path=P``                    read (404 when missing; a regular file only, streamed,
                                            413 past --max-read-bytes, 32 MiB by default, by its size:
                                            a sparse ``truncate -s 768M`` file is refused unread)
- ``GET  /exists?path=P``                   -> {exists}

Why not agent-sandbox's own runtime (examples/python-runtime-sandbox, v0.5.6): its /execute
refuses env and cwd, it has no background jobs, and it confines files to /app, which the
read-only root filesystem of our pods makes unwritable. The harness hands its proxy an upstream
key as an env var of a background job: here it travels in a JSON body and lands in the job's
environment, never on a command line. On the pool that key is only OpenEnv's placeholder: every
process this runtime starts runs as the agent's uid, which can read the env of all of them, so
the ingress key is held by the pod's forwarder (forwarder.py), another container and uid.

Standard library only: it runs on the sandbox image's own Python (3.11+), with nothing
installed. Requests and env values are never logged, only route, status and duration.
Access is limited by the pool's NetworkPolicy (only trainer pods reach port 8888).
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import io
import json
import logging
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

#: Port of the command API (agent-sandbox's runtime convention; the pool's template and probe use it).
DEFAULT_PORT = 8888
#: Exit code reported for a command killed at its timeout (coreutils `timeout`, OpenEnv's HF backend).
TIMEOUT_EXIT_CODE = 124
#: Longest long-poll of GET /jobs/<id>?wait=S; the client loops, so a wait is never one long request.
MAX_WAIT_SECONDS = 30.0
#: Output kept per stream of one exec (--max-output-bytes; the rest is counted, discarded while the
#: command runs, and reported with a marker): bounds the runtime's memory and its spool on disk.
MAX_OUTPUT_BYTES = 8 * 1024 * 1024
#: Longest the runtime reads a stream after its command has ended (a background child may hold it open).
DRAIN_SECONDS = 1.0
#: Largest file body accepted by PUT /files (streamed to the file, never held whole).
MAX_FILE_BYTES = 64 * 1024 * 1024
#: Largest file served by GET /files (--max-read-bytes): decided by the file's size before reading
#: (sparse files included), and never more sent than that size. The trainer's own cap
#: (handle.py DEFAULT_MAX_READ_BYTES, 64 MiB) is above it.
MAX_READ_BYTES = 32 * 1024 * 1024
#: Piece size of streamed file reads and writes.
PIECE_BYTES = 1024 * 1024
#: Largest JSON request body.
MAX_JSON_BYTES = 4 * 1024 * 1024
#: Seconds a killed job gets between SIGTERM and SIGKILL of its process group.
KILL_GRACE_SECONDS = 3.0
#: How long a kill waits, after SIGKILL to a job's process group, for the group's processes to end.
GROUP_EXIT_SECONDS = 5.0

log = logging.getLogger("agent_rl_sandbox.runtime")


class RequestError(Exception):
    """A refused request: answered with `status` and {"error": message}."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def signal_exit_code(returncode: int) -> int:
    """A Popen return code as a shell reports it: -N (killed by signal N) -> 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_members(pgid: int) -> list[int]:
    """The pids of process group `pgid` still running (zombies not counted), from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        # After the command (in parentheses, which may hold spaces): state, ppid, pgrp.
        rest = stat[stat.rindex(")") + 2 :].split()
        if int(rest[2]) == pgid and rest[0] != "Z":
            members.append(int(entry))
    return members


class OutputSpool:
    """One stream of an exec: a pipe read by a thread that keeps the first `limit` bytes in an unlinked
    temp file (memory stays bounded) and counts and discards the rest, so the spool on disk never
    passes `limit` however much the command prints (`yes` for hours, or a sparse file cat'ed)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = tempfile.TemporaryFile()
        self.size = 0
        self._stop = threading.Event()
        self.read_fd, self.write_fd = os.pipe()
        self._thread = threading.Thread(target=self._pump, name="exec-output", daemon=True)

    def start(self) -> None:
        """After the child has its copy of the write end: ours closes, so EOF comes when the command's do."""
        os.close(self.write_fd)
        self._thread.start()

    def _take(self, chunk: bytes) -> None:
        room = self.limit - self.size
        if room > 0:
            self.kept.write(chunk[:room])
        self.size += len(chunk)

    def _pump(self) -> None:
        drain_until: float | None = None
        try:
            while True:
                if drain_until is None and self._stop.is_set():
                    drain_until = time.monotonic() + DRAIN_SECONDS
                if drain_until is not None and time.monotonic() > drain_until:
                    return
                ready, _, _ = select.select([self.read_fd], [], [], 0.1)
                if not ready:
                    if drain_until is not None:
                        return  # nothing more buffered after the command ended
                    continue
                chunk = os.read(self.read_fd, PIECE_BYTES)
                if not chunk:
                    return
                self._take(chunk)
        finally:
            os.close(self.read_fd)  # a background child still writing gets EPIPE, not a growing spool

    def text(self) -> str:
        """Once the command has ended: what it printed (up to the cap), with a marker for the rest."""
        self._stop.set()
        self._thread.join()
        self.kept.seek(0)
        text = self.kept.read(self.limit).decode("utf-8", errors="replace")
        self.kept.close()
        if self.size > self.limit:
            text += f"\n[output cut: {self.size - self.limit} more bytes]"
        return text

    def abandon(self) -> None:
        """The command never started: close both ends."""
        os.close(self.write_fd)
        os.close(self.read_fd)
        self.kept.close()


class Runtime:
    """The state behind the HTTP API: base env, working dir, background jobs."""

    def __init__(
        self,
        *,
        workdir: str,
        base_env: dict[str, str],
        max_exec_seconds: float,
        max_read_bytes: int = MAX_READ_BYTES,
        max_output_bytes: int | None = None,
    ) -> None:
        self.workdir = workdir
        self.base_env = dict(base_env)
        self.max_exec_seconds = max_exec_seconds
        self.max_read_bytes = max_read_bytes
        self.max_output_bytes = MAX_OUTPUT_BYTES if max_output_bytes is None else max_output_bytes
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    # --- requests -> processes -------------------------------------------------------------
    def _env(self, extra: Any) -> dict[str, str]:
        env = dict(self.base_env)
        if extra is None:
            return env
        if not isinstance(extra, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in extra.items()):
            raise RequestError(HTTPStatus.BAD_REQUEST, "env must be an object of string values")
        for k in extra:
            if not k or "=" in k or "\0" in k or "\0" in extra[k]:
                raise RequestError(HTTPStatus.BAD_REQUEST, "env names must be non-empty, without '=' or NUL")
        env.update(extra)
        return env

    def _cwd(self, cwd: Any) -> str:
        if cwd is None:
            return self.workdir
        if not isinstance(cwd, str) or not cwd:
            raise RequestError(HTTPStatus.BAD_REQUEST, "cwd must be a non-empty string")
        path = self.resolve(cwd)
        if not os.path.isdir(path):
            raise RequestError(HTTPStatus.BAD_REQUEST, f"cwd {cwd!r} is not a directory")
        return path

    @staticmethod
    def _cmd(body: dict[str, Any]) -> list[str]:
        cmd = body.get("cmd")
        if not isinstance(cmd, str) or not cmd.strip():
            raise RequestError(HTTPStatus.BAD_REQUEST, "cmd must be a non-empty string")
        # Not a login shell (OpenEnv's HF backend uses bash -lc): Debian's /etc/profile would reset
        # PATH and drop the image's and the request's own; the pod's env stays authoritative.
        return ["bash", "-c", cmd]

    def resolve(self, path: str) -> str:
        """Absolute paths as given; relative ones against the working dir."""
        if "\0" in path:
            raise RequestError(HTTPStatus.BAD_REQUEST, "path contains NUL")
        return path if os.path.isabs(path) else os.path.join(self.workdir, path)

    def exec(self, body: dict[str, Any]) -> dict[str, Any]:
        argv = self._cmd(body)
        env = self._env(body.get("env"))
        cwd = self._cwd(body.get("cwd"))
        timeout = body.get("timeout")
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
            raise RequestError(HTTPStatus.BAD_REQUEST, "timeout must be a positive number of seconds or null")
        limit = min(float(timeout), self.max_exec_seconds) if timeout is not None else self.max_exec_seconds
        # Output goes through pipes into capped spools (OutputSpool): memory and disk stay bounded, and a
        # command that leaves a background child holding its stdout cannot block the answer (the spool
        # stops reading DRAIN_SECONDS after the command ends).
        out, err = OutputSpool(self.max_output_bytes), OutputSpool(self.max_output_bytes)
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out.write_fd, stderr=err.write_fd, start_new_session=True)
        except BaseException:
            out.abandon()
            err.abandon()
            raise
        out.start()
        err.start()
        timed_out = False
        try:
            code = signal_exit_code(proc.wait(timeout=limit))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
            code = TIMEOUT_EXIT_CODE
        stdout = out.text()
        stderr = err.text()
        if timed_out:
            stderr += f"\n[timed out after {limit:g}s]"
        return {"exit_code": code, "stdout": stdout, "stderr": stderr, "timed_out": timed_out}

    def start_job(self, body: dict[str, Any]) -> dict[str, Any]:
        argv = self._cmd(body)
        env = self._env(body.get("env"))
        cwd = self._cwd(body.get("cwd"))
        # Its own session: kill() reaches everything it started (the harness pipes opencode into tee).
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        job = Job(uuid.uuid4().hex, proc)
        with self._lock:
            self._jobs[job.id] = job
        return job.state()

    def job(self, job_id: str) -> "Job":
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise RequestError(HTTPStatus.NOT_FOUND, f"no job {job_id!r}")
        return job

    def kill_all(self) -> None:
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            job.kill(grace=0.5)

    # --- files ------------------------------------------------------------------------------
    def write_file(self, path: str, data: Any, length: int | None = None) -> None:
        """Writes `data` (bytes, or a stream of which `length` bytes are copied in pieces) to `path`."""
        target = self.resolve(path)
        try:
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            with open(target, "wb") as f:
                if isinstance(data, (bytes, bytearray)):
                    f.write(data)
                    return
                left = int(length or 0)
                while left > 0:
                    piece = data.read(min(PIECE_BYTES, left))
                    if not piece:
                        raise RequestError(HTTPStatus.BAD_REQUEST, f"the body of {path!r} ended {left} bytes early")
                    f.write(piece)
                    left -= len(piece)
        except IsADirectoryError:
            raise RequestError(HTTPStatus.BAD_REQUEST, f"{path!r} is a directory") from None
        except PermissionError as e:
            raise RequestError(HTTPStatus.FORBIDDEN, f"cannot write {path!r}: {e.strerror}") from None
        except OSError as e:
            # The pod's read-only root (and the image layout HOME's seeded copies link into) refuses as a permission does.
            status = HTTPStatus.FORBIDDEN if e.errno == errno.EROFS else HTTPStatus.CONFLICT
            raise RequestError(status, f"cannot write {path!r}: {e.strerror}") from None

    def read_file(self, path: str) -> bytes:
        """The whole file, for callers that want bytes (the HTTP route streams with open_file)."""
        f, size = self.open_file(path)
        with f:
            return f.read(size) if size else f.read()

    def open_file(self, path: str) -> tuple[Any, int]:
        """`path` opened for a bounded read, and how many bytes to send: a regular file only (a FIFO
        would block, /dev/zero never end); its size decides, before any byte is read, so a sparse file
        of 768 MiB (no blocks, nothing counted against the emptyDir) is refused as what it claims to be.
        A size-0 regular file (procfs) is read up to the cap + 1 to see."""
        target = self.resolve(path)
        try:
            # Non-blocking: opening a FIFO must not wait for a writer (it is refused below, unread).
            fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except FileNotFoundError:
            raise RequestError(HTTPStatus.NOT_FOUND, f"{path!r} does not exist") from None
        except PermissionError as e:
            raise RequestError(HTTPStatus.FORBIDDEN, f"cannot read {path!r}: {e.strerror}") from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise RequestError(HTTPStatus.BAD_REQUEST, f"{path!r} is a directory")
            if not stat.S_ISREG(st.st_mode):
                raise RequestError(HTTPStatus.BAD_REQUEST, f"{path!r} is not a regular file")
            if st.st_size > self.max_read_bytes:
                raise RequestError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"{path!r} is {st.st_size} bytes, over the {self.max_read_bytes}-byte read cap (--max-read-bytes)")
            f = os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
        if st.st_size > 0:
            return f, st.st_size
        with f:
            data = f.read(self.max_read_bytes + 1)
        if len(data) > self.max_read_bytes:
            raise RequestError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"{path!r} reads past the {self.max_read_bytes}-byte read cap (--max-read-bytes)")
        return io.BytesIO(data), len(data)

    def exists(self, path: str) -> bool:
        return os.path.exists(self.resolve(path))


class Job:
    """One background process (a session leader) and a thread that reaps it."""

    def __init__(self, job_id: str, proc: subprocess.Popen[bytes]) -> None:
        self.id = job_id
        self.proc = proc
        self.exit_code: int | None = None
        self.done = threading.Event()
        threading.Thread(target=self._reap, name=f"job-{job_id[:8]}", daemon=True).start()

    def _reap(self) -> None:
        self.exit_code = signal_exit_code(self.proc.wait())
        self.done.set()

    def state(self) -> dict[str, Any]:
        running = not self.done.is_set()
        return {"id": self.id, "pid": self.proc.pid, "running": running, "exit_code": None if running else self.exit_code}

    def wait(self, seconds: float) -> dict[str, Any]:
        self.done.wait(max(0.0, min(seconds, MAX_WAIT_SECONDS)))
        return self.state()

    def kill(self, grace: float = KILL_GRACE_SECONDS) -> dict[str, Any]:
        if not self.done.is_set():
            _kill_group(self.proc.pid, signal.SIGTERM)
            if not self.done.wait(grace):
                _kill_group(self.proc.pid, signal.SIGKILL)
                self.done.wait(5.0)
        # Whatever of its group outlived the leader goes too (e.g. `cmd &` inside the job), and a
        # killed job is one whose processes are gone: SIGKILL is delivered at once, but a busy
        # machine may take a moment to end them (seen: a capture proxy still running after kill).
        _kill_group(self.proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + GROUP_EXIT_SECONDS
        while group_members(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.state()


def _query(handler: BaseHTTPRequestHandler) -> tuple[str, dict[str, str]]:
    parts = urlsplit(handler.path)
    return parts.path, {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}


class Handler(BaseHTTPRequestHandler):
    """Routes requests to the Runtime; never logs bodies, env or query values."""

    server: "RuntimeServer"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass  # replaced by the one line per request in _dispatch (the stdlib line shows the query)

    def _send(self, status: HTTPStatus, payload: Any = None, raw: bytes | None = None) -> None:
        body = raw if raw is not None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream" if raw is not None else "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _length(self, limit: int) -> int:
        length = self.headers.get("Content-Length")
        if length is None:
            raise RequestError(HTTPStatus.LENGTH_REQUIRED, "Content-Length required")
        n = int(length)
        if n < 0 or n > limit:
            raise RequestError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {limit} bytes")
        return n

    def _body(self, limit: int) -> bytes:
        return self.rfile.read(self._length(limit))

    def _send_file(self, f: Any, size: int) -> None:
        """Exactly `size` bytes of `f`, in pieces; a file that shrank meanwhile ends the connection short."""
        with f:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            left = size
            while left > 0:
                piece = f.read(min(PIECE_BYTES, left))
                if not piece:
                    self.close_connection = True
                    return
                self.wfile.write(piece)
                left -= len(piece)

    def _json(self) -> dict[str, Any]:
        try:
            body = json.loads(self._body(MAX_JSON_BYTES) or b"{}")
        except json.JSONDecodeError:
            raise RequestError(HTTPStatus.BAD_REQUEST, "body is not JSON") from None
        if not isinstance(body, dict):
            raise RequestError(HTTPStatus.BAD_REQUEST, "body must be a JSON object")
        return body

    def _path_arg(self, query: dict[str, str]) -> str:
        path = query.get("path")
        if not path:
            raise RequestError(HTTPStatus.BAD_REQUEST, "query parameter 'path' required")
        return path

    def _dispatch(self, method: str) -> None:
        started = time.monotonic()
        route, query = _query(self)
        rt = self.server.runtime
        status = HTTPStatus.OK
        try:
            parts = route.strip("/").split("/")
            if method == "GET" and route == "/healthz":
                self._send(status, {"ok": True})
            elif method == "POST" and route == "/exec":
                self._send(status, rt.exec(self._json()))
            elif method == "POST" and route == "/jobs":
                self._send(status, rt.start_job(self._json()))
            elif method == "GET" and len(parts) == 2 and parts[0] == "jobs":
                wait = float(query.get("wait", "0") or 0)
                self._send(status, rt.job(parts[1]).wait(wait))
            elif method == "POST" and len(parts) == 3 and parts[0] == "jobs" and parts[2] == "kill":
                self._body(MAX_JSON_BYTES)
                self._send(status, rt.job(parts[1]).kill())
            elif method == "PUT" and route == "/files":
                path = self._path_arg(query)
                rt.write_file(path, self.rfile, self._length(MAX_FILE_BYTES))
                self._send(status, {"ok": True})
            elif method == "GET" and route == "/files":
                self._send_file(*rt.open_file(self._path_arg(query)))
            elif method == "GET" and route == "/exists":
                self._send(status, {"exists": rt.exists(self._path_arg(query))})
            else:
                raise RequestError(HTTPStatus.NOT_FOUND, f"no route {method} {route}")
        except (RequestError, ValueError) as e:
            status = e.status if isinstance(e, RequestError) else HTTPStatus.BAD_REQUEST
            self.close_connection = True  # an unread body must not become the next request
            self._send(status, {"error": str(e) if isinstance(e, RequestError) else f"bad request: {e}"})
        except Exception as e:  # noqa: BLE001 - one request must not take the runtime down
            status = HTTPStatus.INTERNAL_SERVER_ERROR
            self.close_connection = True
            log.exception("%s %s failed", method, route)
            self._send(status, {"error": f"{type(e).__name__}"})
        finally:
            # Route only: a query holds file paths, a body env values (the ingress key among them).
            shown = "/jobs/<id>" + ("/kill" if route.endswith("/kill") else "") if route.startswith("/jobs/") else route
            log.info("%s %s %d %.3fs", method, shown, int(status), time.monotonic() - started)

    def do_GET(self) -> None:  # noqa: N802 (stdlib naming)
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch("PUT")


class RuntimeServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], runtime: Runtime) -> None:
        self.runtime = runtime
        super().__init__(address, Handler)


# --- start-up ---------------------------------------------------------------------------------
def seed_home(home: str, seed: str) -> list[str]:
    """Mirrors the image's HOME skeleton `seed` into `home` (an emptyDir that hides the image's
    own HOME): directories are created, files and links become symlinks to the read-only image
    copy (so the 100 MB opencode binary is not copied per sandbox). Existing entries are kept.
    Returns the created paths, relative to home."""
    created: list[str] = []
    seed_root = Path(seed)
    if not seed_root.is_dir():
        raise FileNotFoundError(f"home seed {seed!r} is not a directory")
    for src in sorted(seed_root.rglob("*")):
        rel = src.relative_to(seed_root)
        dst = Path(home) / rel
        if src.is_dir() and not src.is_symlink():
            if not dst.exists():
                dst.mkdir(parents=True)
                created.append(str(rel))
        elif not dst.exists() and not dst.is_symlink():
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.symlink_to(src)
            created.append(str(rel))
    return created


PR_SET_CHILD_SUBREAPER = 36


def become_init() -> None:
    """Splits the process in two when it is PID 1 of the container (Kubernetes gives a pod no
    init): the parent stays behind as init, reaping every orphan of the sandbox (as a child
    subreaper, so also when not PID 1) and forwarding SIGTERM/SIGINT/SIGHUP to the server; it
    exits with the server's status and never returns. The child returns and serves: its Popen
    waits get their exit codes, which a reaper in the same process would steal."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    child = os.fork()
    if child == 0:
        return
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: os.kill(child, s))
    code = 1
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == child:
            code = signal_exit_code(os.waitstatus_to_exitcode(status))
            break
    os._exit(code)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="agent_rl_sandbox.runtime", description="The sandbox's command runtime (see module docstring).")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (the pod IP: 0.0.0.0)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--home-seed", default=os.environ.get("SANDBOX_HOME_SEED"), help="image dir mirrored into $HOME before listening")
    p.add_argument("--workdir", default=None, help="working dir of commands without cwd (default: the runtime's)")
    p.add_argument("--max-exec-seconds", type=float, default=6 * 3600, help="upper bound of any one exec")
    p.add_argument("--max-read-bytes", type=int, default=MAX_READ_BYTES, help="largest file GET /files serves (by its size, sparse files included)")
    p.add_argument("--max-output-bytes", type=int, default=MAX_OUTPUT_BYTES, help="output kept per stream of one exec, in memory and on disk (the rest is discarded as it comes, and counted)")
    init = p.add_mutually_exclusive_group()
    init.add_argument("--init", dest="init", action="store_true", default=None, help="fork and reap as init (default: when PID 1)")
    init.add_argument("--no-init", dest="init", action="store_false")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.init or (args.init is None and os.getpid() == 1):
        become_init()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s runtime %(message)s", stream=sys.stderr)
    home = os.environ.get("HOME", "")
    if args.home_seed:
        if not home or not os.path.isabs(home):
            log.error("HOME must be an absolute path to seed it from %s", args.home_seed)
            return 2
        created = seed_home(home, args.home_seed)
        log.info("seeded HOME %s from %s (%d entries)", home, args.home_seed, len(created))
    if shutil.which("bash") is None:
        log.error("bash is not on PATH: commands run as bash -c")
        return 2
    if args.max_output_bytes < 1 or args.max_read_bytes < 1:
        log.error("--max-output-bytes and --max-read-bytes must be positive byte counts")
        return 2
    workdir = os.path.abspath(args.workdir or os.getcwd())
    runtime = Runtime(
        workdir=workdir,
        base_env=dict(os.environ),
        max_exec_seconds=args.max_exec_seconds,
        max_read_bytes=args.max_read_bytes,
        max_output_bytes=args.max_output_bytes,
    )
    server = RuntimeServer((args.host, args.port), runtime)

    def stop(_sig: int, _frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("listening on %s:%d (workdir %s)", args.host, server.server_address[1], workdir)
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        runtime.kill_all()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
