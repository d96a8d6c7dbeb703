"""Reads from a sandbox and uploads into it are bounded, as an agent would attack them.

The agent controls every byte of its sandbox: it can leave a sparse file the harness reads
(`truncate -s 768M`: no blocks, so the emptyDir's sizeLimit never sees it), or replace the runtime's
answers altogether (the runtime runs as the agent's uid). Measured on main's code before these
bounds: the trainer went from 18 MiB to 1.5 GiB reading one such file (issue 42).

- the runtime refuses a file by its size before reading it (413, naming the size and the cap), and
  never streams more than that size;
- the trainer's client stops at its read cap whatever the runtime (or what answers in its place)
  sends: a declared Content-Length over the cap, or an endless chunked body;
- an upload is streamed to its file: the runtime's peak memory does not grow with it.

The runtime runs as the sandbox template runs it (conftest.start_runtime: its uid, a read-only root); the files
are made and looked at through it, as the agent and the trainer would.
"""

from __future__ import annotations

import resource
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent_rl_sandbox import RuntimeHandle, SandboxError
from agent_rl_sandbox.handle import SandboxAnswerTooLarge
from agent_rl_sandbox.runtime import MAX_FILE_BYTES, MAX_READ_BYTES
from waits import scaled

MiB = 1024 * 1024


def handle(rt, **kw) -> RuntimeHandle:
    return RuntimeHandle(rt.url, sandbox_id="bounds", **kw)


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (Linux: ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def vm_hwm_mib(pid: int) -> float:
    """Peak resident memory of `pid` so far (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for {pid}")


def test_a_sparse_file_is_refused_by_its_size_and_costs_the_trainer_nothing(runtime):
    h = handle(runtime)
    sparse = runtime.workdir / "sparse.bin"
    # What the agent's bash runs: 768 MiB that take no block on disk.
    assert h.exec(f"truncate -s 768M {sparse} && stat -c %b {sparse}").stdout.split() == ["0"]
    before = peak_rss_mib()
    with pytest.raises(SandboxError) as e:
        h.read_text(str(sparse))
    assert e.value.status == 413
    assert f"is {768 * MiB} bytes, over the {MAX_READ_BYTES}-byte read cap" in str(e.value)
    # On main's code this read returned 768 MiB of zeros (and the decoded text beside them).
    assert peak_rss_mib() - before < 64, f"the trainer's peak memory grew {peak_rss_mib() - before:.0f} MiB"
    # A file at the cap still reads whole; devices and FIFOs are refused instead of read forever.
    at_cap = runtime.workdir / "at-cap.bin"
    h.exec(f"truncate -s {MAX_READ_BYTES} {at_cap}")
    assert len(h.read_text(str(at_cap))) == MAX_READ_BYTES
    for path in ("/dev/zero", str(runtime.workdir / "fifo")):
        if path.endswith("fifo"):
            assert h.exec(f"mkfifo {path}").exit_code == 0  # the agent's own FIFO
        with pytest.raises(SandboxError, match="is not a regular file") as e:
            h.read_text(path)
        assert e.value.status == 400
    # Command output stays cut at the runtime (8 MiB a stream), whatever the command prints.
    r = h.exec(f"head -c {64 * MiB} {sparse}")
    assert r.exit_code == 0 and "[output cut:" in r.stdout and len(r.stdout) < 9 * MiB


class HostileRuntime:
    """What may answer in the runtime's place: the agent's uid can kill the runtime's server and
    serve its port. It answers every GET with a declared length over the cap, or with an endless
    chunked body, and counts what it managed to send."""

    def __init__(self) -> None:
        self.sent = 0
        self.stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                piece = b"\0" * MiB
                self.send_response(200)
                if "declared" in self.path:
                    self.send_header("Content-Length", str(768 * MiB))
                    self.end_headers()
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for _ in range(2048):  # bounded: 2 GiB at most, far past any cap
                        if outer.stop.is_set():
                            break
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        outer.sent += len(piece)
                except OSError:
                    pass  # the client stopped reading and closed: what the test wants

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


def test_the_trainer_stops_at_its_read_cap_whatever_answers():
    hostile = HostileRuntime()
    cap = 8 * MiB
    try:
        h = RuntimeHandle(hostile.url, sandbox_id="hostile", max_read_bytes=cap)
        with pytest.raises(SandboxAnswerTooLarge, match=f"is {768 * MiB} bytes, over the {cap}-byte read cap"):
            h.read_text("declared")
        before = peak_rss_mib()
        with pytest.raises(SandboxAnswerTooLarge, match=f"went past the {cap}-byte read cap"):
            h.read_text("endless")
        # It read the cap and a piece, then hung up: the server's writes stop there (plus the socket buffers).
        assert hostile.sent < cap + 16 * MiB, hostile.sent
        assert peak_rss_mib() - before < 48
    finally:
        hostile.close()


def test_uploads_are_streamed_to_their_file_and_bounded(runtime):
    h = handle(runtime)
    before = vm_hwm_mib(runtime.proc.pid)
    size = 48 * MiB
    h.write_text(str(runtime.workdir / "upload.bin"), "a" * size)
    assert h.exec(f"stat -c %s {runtime.workdir}/upload.bin").stdout.strip() == str(size)
    # On main's code the runtime held the whole body before writing it (its peak grew by the body).
    assert vm_hwm_mib(runtime.proc.pid) - before < 16, f"the runtime's peak memory grew {vm_hwm_mib(runtime.proc.pid) - before:.0f} MiB"
    # Over the cap: the trainer refuses before sending; the runtime refuses by the declared length, unread.
    with pytest.raises(SandboxError, match=f"over the runtime's {MAX_FILE_BYTES}-byte upload cap") as e:
        h.write_text(str(runtime.workdir / "big.bin"), "a" * (MAX_FILE_BYTES + 1))
    assert e.value.status == 413
    with socket.create_connection(("127.0.0.1", runtime.port), timeout=scaled(30)) as s:
        s.sendall(f"PUT /files?path={runtime.workdir}/big.bin HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_FILE_BYTES + 1}\r\n\r\n".encode())
        answer = s.makefile("rb").read().decode()
    assert answer.startswith("HTTP/1.1 413") and f"body over {MAX_FILE_BYTES} bytes" in answer, answer[:300]
    assert not h.exists(f"{runtime.workdir}/big.bin")
