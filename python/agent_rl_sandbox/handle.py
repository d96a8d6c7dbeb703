"""The trainer's side of one sandbox: OpenEnv's ``SandboxHandle`` and ``BgJob`` protocols
(huggingface/OpenEnv ``envs/opencode_env/sandbox/base.py``) over the runtime's HTTP API
(``runtime.py``). Standard library only; one connection per request, so a handle may be used
from several threads (TRL closes in-flight sessions from another thread on stop).

Every wait is bounded: a command by its timeout (or the sandbox's remaining lifetime), a
background job's ``wait`` by long polls of at most 5 s until its timeout or the lifetime.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import shlex
import tarfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import quote, urlsplit

#: Seconds an HTTP read waits beyond the command's own timeout (the runtime answers after killing it).
RESPONSE_MARGIN_SECONDS = 15.0
#: Timeout of requests that do no waiting (files, job start, kill).
SHORT_REQUEST_SECONDS = 30.0
#: Longest single poll of a background wait: a kill or a trainer shutdown is noticed within it.
WAIT_POLL_SECONDS = 5.0
#: Consecutive transport failures a background wait tolerates before giving up.
WAIT_TRANSPORT_RETRIES = 3
#: Largest answer read from a sandbox (settings.max_read_bytes, SANDBOX_MAX_READ_BYTES): a file, a
#: command's output (the runtime cuts each stream at 8 MiB, JSON escaping may grow it), the trace.
DEFAULT_MAX_READ_BYTES = 64 * 1024 * 1024
#: Piece size of a streamed read.
READ_PIECE_BYTES = 1024 * 1024
#: Largest upload the runtime accepts (runtime.py MAX_FILE_BYTES): refused here before sending.
MAX_UPLOAD_BYTES = 64 * 1024 * 1024


@dataclass
class ExecResult:
    """Result of a synchronous command (same fields as OpenEnv's ``sandbox.base.ExecResult``)."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False


class SandboxError(RuntimeError):
    """The sandbox refused a request or could not be reached."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class SandboxGone(SandboxError):
    """The sandbox was killed (claim deleted) or is shutting down."""


class SandboxAnswerTooLarge(SandboxError):
    """An answer from the sandbox went past the read cap: nothing of it is returned."""


def read_capped(resp: http.client.HTTPResponse, limit: int, what: str) -> bytes:
    """The whole body of `resp`, read in pieces; past `limit` bytes it stops and raises, so memory
    never holds more than `limit` (a declared Content-Length over it is refused before reading)."""
    declared = resp.getheader("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise SandboxAnswerTooLarge(f"{what}: the answer is {int(declared)} bytes, over the {limit}-byte read cap (SANDBOX_MAX_READ_BYTES)", status=resp.status)
    data = bytearray()
    while True:
        piece = resp.read(min(READ_PIECE_BYTES, limit + 1 - len(data)))
        if not piece:
            return bytes(data)
        data += piece
        if len(data) > limit:
            raise SandboxAnswerTooLarge(f"{what}: the answer went past the {limit}-byte read cap (SANDBOX_MAX_READ_BYTES)", status=resp.status)


def dir_archive(source_dir: str | os.PathLike[str]) -> bytes:
    """A gzipped tar of the folder's contents, each entry named relative to it, never the folder itself.

    The target is often a mount point the sandbox's uid does not own: the Harbor pools' ``/tests`` and
    ``/solution`` are emptyDirs, root-owned and group-writable for the pod's fsGroup (kubelet
    ``pkg/volume/volume_linux.go``). Extracting a ``.`` entry, tar must set that folder's mode and
    times, which only its owner may: GNU tar says "Cannot utime" / "Cannot change mode" and exits 2.
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for child in sorted(Path(source_dir).iterdir()):
            tf.add(str(child), arcname=child.name)
    return buf.getvalue()


def extract_command(staged: str, target_dir: str) -> str:
    """The sandbox's command that unpacks a staged ``dir_archive`` into `target_dir` (made if missing) and removes it."""
    q = shlex.quote
    return f"mkdir -p {q(target_dir)} && tar xzf {q(staged)} -C {q(target_dir)}; rc=$?; rm -f {q(staged)}; exit $rc"


class RuntimeClient:
    """JSON over HTTP to one runtime, a new connection per request."""

    def __init__(self, base_url: str, *, max_read_bytes: int = DEFAULT_MAX_READ_BYTES) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"runtime URL must be http://host:port, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self._host = parts.hostname
        self._port = parts.port or 80
        self.max_read_bytes = max_read_bytes

    def request(self, method: str, path: str, *, body: bytes | None = None, json_body: Any = None, timeout: float) -> tuple[int, bytes]:
        data = json.dumps(json_body).encode() if json_body is not None else body
        headers = {"Content-Type": "application/json" if json_body is not None else "application/octet-stream"}
        conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        try:
            conn.request(method, path, body=data if data is not None else (b"" if method in ("POST", "PUT") else None), headers=headers)
            resp = conn.getresponse()
            return resp.status, read_capped(resp, self.max_read_bytes, f"{method} {path.split('?')[0]}")
        except (OSError, http.client.HTTPException) as e:
            # The path may name a file; never the body (env values, file contents).
            raise SandboxError(f"{method} {self.base_url}{path.split('?')[0]} failed: {type(e).__name__}: {e}") from e
        finally:
            conn.close()

    def call(self, method: str, path: str, *, json_body: Any = None, body: bytes | None = None, timeout: float, ok: tuple[int, ...] = (200,)) -> Any:
        status, data = self.request(method, path, json_body=json_body, body=body, timeout=timeout)
        if status not in ok:
            try:
                message = json.loads(data).get("error", "")
            except (ValueError, AttributeError):
                message = data[:200].decode("utf-8", errors="replace")
            raise SandboxError(f"{method} {path.split('?')[0]}: HTTP {status}: {message}", status=status)
        return data


class RuntimeBgJob:
    """OpenEnv ``BgJob``: a background process in the sandbox."""

    def __init__(self, handle: "RuntimeHandle", job_id: str, pid: int) -> None:
        self._handle = handle
        self._id = job_id
        self._pid = pid

    @property
    def pid(self) -> int:
        return self._pid

    def wait(self, timeout: float | None = None) -> int:
        """The job's exit code; ``TimeoutError`` once `timeout` (or the sandbox's lifetime) passes."""
        h = self._handle
        budget = h.remaining_seconds() if timeout is None else min(float(timeout), h.remaining_seconds())
        deadline = time.monotonic() + max(0.0, budget)
        failures = 0
        while True:
            h.check_alive()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"background job {self._pid} did not exit within {timeout if timeout is not None else budget:g}s")
            poll = min(remaining, WAIT_POLL_SECONDS)
            try:
                data = h.client.call("GET", f"/jobs/{self._id}?wait={poll:.3f}", timeout=poll + RESPONSE_MARGIN_SECONDS)
            except SandboxError as e:
                if e.status is not None:
                    raise
                failures += 1
                if failures > WAIT_TRANSPORT_RETRIES:
                    raise
                time.sleep(min(1.0 * failures, max(0.0, deadline - time.monotonic())))
                continue
            failures = 0
            state = json.loads(data)
            if not state["running"]:
                return int(state["exit_code"])

    def kill(self) -> None:
        """SIGTERM, then SIGKILL, of the job's whole process group; no-op once the sandbox is gone."""
        if self._handle.killed:
            return
        self._handle.client.call("POST", f"/jobs/{self._id}/kill", json_body={}, timeout=SHORT_REQUEST_SECONDS)


class RuntimeHandle:
    """OpenEnv ``SandboxHandle`` over one sandbox's runtime.

    `on_kill` releases the sandbox (the agent-sandbox backend deletes the claim there); `env`
    applies to every command under the per-call env (agent-sandbox claims cannot carry env:
    the pool's template refuses it, and it would force a cold start).
    """

    def __init__(
        self,
        base_url: str,
        *,
        sandbox_id: str,
        on_kill: Callable[[], None] | None = None,
        env: Mapping[str, str] | None = None,
        lifetime_seconds: float | None = None,
        trace_url: str | None = None,
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
    ) -> None:
        self.client = RuntimeClient(base_url, max_read_bytes=max_read_bytes)
        self._trace = RuntimeClient(trace_url, max_read_bytes=max_read_bytes) if trace_url else None
        self._sandbox_id = sandbox_id
        self._on_kill = on_kill
        self._env = dict(env or {})
        self._expires = time.monotonic() + lifetime_seconds if lifetime_seconds is not None else None
        self._killed = threading.Event()
        self._kill_lock = threading.Lock()

    @property
    def sandbox_id(self) -> str:
        return self._sandbox_id

    @property
    def base_url(self) -> str:
        return self.client.base_url

    @property
    def killed(self) -> bool:
        return self._killed.is_set()

    def remaining_seconds(self) -> float:
        """Until the sandbox's lifetime ends (a day when it has none: a bound, not a promise)."""
        if self._expires is None:
            return 24 * 3600.0
        return max(0.0, self._expires - time.monotonic())

    def check_alive(self) -> None:
        if self._killed.is_set():
            raise SandboxGone(f"sandbox {self._sandbox_id} was killed")
        from .shutdown import shutting_down  # late: shutdown imports nothing from here

        if shutting_down():
            raise SandboxGone(f"sandbox {self._sandbox_id}: the trainer is shutting down")

    def _merged_env(self, envs: Mapping[str, str] | None) -> dict[str, str]:
        return {**self._env, **(envs or {})}

    def exec(self, cmd: str, *, envs: dict[str, str] | None = None, cwd: str | None = None, timeout: float | None = 60) -> ExecResult:
        """Runs `cmd` with ``bash -c``; a command past `timeout` is killed: exit code 124, ``timed_out``."""
        self.check_alive()
        limit = self.remaining_seconds() if timeout is None else min(float(timeout), self.remaining_seconds())
        if limit <= 0:
            raise SandboxGone(f"sandbox {self._sandbox_id}: its lifetime is over")
        body = {"cmd": cmd, "env": self._merged_env(envs), "cwd": cwd, "timeout": limit}
        data = json.loads(self.client.call("POST", "/exec", json_body=body, timeout=limit + RESPONSE_MARGIN_SECONDS))
        return ExecResult(exit_code=int(data["exit_code"]), stdout=data["stdout"], stderr=data["stderr"], timed_out=bool(data["timed_out"]))

    def start_bg(self, cmd: str, *, envs: dict[str, str] | None = None, cwd: str | None = None) -> RuntimeBgJob:
        """Starts `cmd` (``bash -c``) in its own process group; env values travel in the request body."""
        self.check_alive()
        body = {"cmd": cmd, "env": self._merged_env(envs), "cwd": cwd}
        data = json.loads(self.client.call("POST", "/jobs", json_body=body, timeout=SHORT_REQUEST_SECONDS))
        return RuntimeBgJob(self, data["id"], int(data["pid"]))

    def write_text(self, path: str, content: str) -> None:
        self.check_alive()
        data = content.encode("utf-8")
        if len(data) > MAX_UPLOAD_BYTES:
            raise SandboxError(f"PUT /files: {len(data)} bytes, over the runtime's {MAX_UPLOAD_BYTES}-byte upload cap", status=413)
        self.client.call("PUT", f"/files?path={quote(path, safe='')}", body=data, timeout=SHORT_REQUEST_SECONDS)

    def upload_dir(self, source_dir: str | os.PathLike[str], target_dir: str, *, staging_dir: str = "/tmp", timeout: float = 600) -> None:
        """Copies a local folder's contents into `target_dir`: one archive staged under `staging_dir` (writable on
        the pool's pods), unpacked there by tar as the sandbox's uid. Raises SandboxError naming tar's exit and words."""
        self.check_alive()
        data = dir_archive(source_dir)
        if len(data) > MAX_UPLOAD_BYTES:
            raise SandboxError(f"upload_dir {source_dir}: {len(data)} bytes archived, over the runtime's {MAX_UPLOAD_BYTES}-byte upload cap", status=413)
        staged = f"{staging_dir.rstrip('/')}/.upload-{uuid.uuid4().hex}.tar.gz"
        self.client.call("PUT", f"/files?path={quote(staged, safe='')}", body=data, timeout=SHORT_REQUEST_SECONDS)
        result = self.exec(extract_command(staged, target_dir), timeout=timeout)
        if result.exit_code != 0:
            raise SandboxError(f"upload_dir {source_dir} -> {target_dir}: tar exited {result.exit_code}: {result.stderr or result.stdout}")

    def read_text(self, path: str) -> str:
        self.check_alive()
        try:
            data = self.client.call("GET", f"/files?path={quote(path, safe='')}", timeout=SHORT_REQUEST_SECONDS)
        except SandboxError as e:
            if e.status == 404:
                raise FileNotFoundError(path) from None
            raise
        return data.decode("utf-8", errors="replace")

    def exists(self, path: str) -> bool:
        self.check_alive()
        data = self.client.call("GET", f"/exists?path={quote(path, safe='')}", timeout=SHORT_REQUEST_SECONDS)
        return bool(json.loads(data)["exists"])

    @property
    def has_trace(self) -> bool:
        """Whether this sandbox's pool has a forwarder trace port (settings ``trace_port``; 0: none)."""
        return self._trace is not None

    def fetch_trace(self) -> dict[str, Any]:
        """The forwarder's record of every completion the sandbox's agent side got (forwarder.py
        ``GET /trace``): ``{"calls", "recorded", "dropped", "refused", "limited", "broken", "in_flight", "tokens",
        "restarts", "complete", "entries"}``, each entry ``{"seq", "status", "model", "prompt_token_ids", "choices": [{"index", "token_ids",
        "logprobs", "finish_reason"}]}``. It comes from the forwarder's uid, not through the runtime,
        which runs as the agent's: train on this, not on what the in-sandbox capture proxy says."""
        self.check_alive()
        if self._trace is None:
            raise SandboxError(f"sandbox {self._sandbox_id}: no trace port (SANDBOX_TRACE_PORT)")
        lines = self._trace.call("GET", "/trace", timeout=SHORT_REQUEST_SECONDS).splitlines()
        if not lines:
            raise SandboxError(f"sandbox {self._sandbox_id}: the forwarder answered an empty trace")
        header = json.loads(lines[0])
        entries = [json.loads(line) for line in lines[1:] if line.strip()]
        if len(entries) != header.get("recorded"):
            raise SandboxError(f"sandbox {self._sandbox_id}: the trace announced {header.get('recorded')} entries and carried {len(entries)}")
        return {**header, "entries": entries}

    def kill(self) -> None:
        """Releases the sandbox once (idempotent); later calls on the handle raise ``SandboxGone``."""
        with self._kill_lock:
            if self._killed.is_set():
                return
            self._killed.set()
        if self._on_kill is not None:
            self._on_kill()

    def __repr__(self) -> str:
        return f"RuntimeHandle({self._sandbox_id!r}, {self.base_url!r})"
