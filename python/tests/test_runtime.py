"""The runtime on loopback, driven through the trainer's handle (OpenEnv SandboxHandle/BgJob):
commands with env and cwd, background jobs (pid, wait, kill), files, timeouts, and the ingress
key never on a command line or in a log. The runtime runs as the sandbox template runs it (conftest.start_runtime:
the template's command as its uid on a read-only root, the image layout); the test reads its files through the
runtime, or through its container's root where only root may look (RunningRuntime.host)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from agent_rl_sandbox import RuntimeHandle, SandboxError, SandboxGone
from agent_rl_sandbox.runtime import MAX_OUTPUT_BYTES

from conftest import alive, process_group_members, processes, start_runtime, stop_process
from waits import scaled

SECRET = "sk-sandbox-7c1e0d9a4b"


def handle(rt, **kw) -> RuntimeHandle:
    return RuntimeHandle(rt.url, sandbox_id="test", **kw)


def test_home_is_seeded_from_the_image_skeleton(runtime):
    home, seed = runtime.home, runtime.seed
    for d in (".config/opencode", "logs/agent", "task", "workdir", "proxy", ".opencode/bin"):
        assert runtime.host(home / d).is_dir() and not runtime.host(home / d).is_symlink(), d
    tool = runtime.host(home / ".opencode/bin/opencode")
    assert tool.is_symlink() and os.readlink(tool) == str(seed / ".opencode/bin/opencode")
    h = handle(runtime)
    r = h.exec('"$HOME/.opencode/bin/opencode" --version')
    assert (r.exit_code, r.stdout.strip()) == (0, "1.0.0-stub"), r.stderr  # test_plan_contract.fake_stock_home's stand-in
    # The directories are writable by the sandbox's uid (the harness writes config, task and logs there).
    h.write_text(f"{home}/logs/agent/x.log", "ok")
    assert h.read_text(f"{home}/logs/agent/x.log") == "ok"
    assert h.exec(f"stat -c %u {home}/logs/agent/x.log").stdout.strip() == h.exec("id -u").stdout.strip() != "0"


def test_exec_returns_output_and_exit_code_with_env_and_cwd(runtime):
    h = handle(runtime)
    r = h.exec("echo out; echo err >&2; exit 7")
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (7, "out\n", "err\n", False)
    sub = runtime.workdir / "sub"
    assert h.exec(f"mkdir {sub}").exit_code == 0
    r = h.exec('echo "$FOO|$BAR|$PWD|$HOME"', envs={"FOO": "a b", "BAR": "x'y\"z"}, cwd=str(sub))
    assert r.stdout.strip() == f"a b|x'y\"z|{sub}|{runtime.home}"
    # Without cwd: the runtime's working dir; a relative cwd resolves against it.
    assert h.exec("pwd").stdout.strip() == str(runtime.workdir)
    assert h.exec("pwd", cwd="sub").stdout.strip() == str(sub)
    with pytest.raises(SandboxError, match="not a directory") as e:
        h.exec("true", cwd="/does/not/exist")
    assert e.value.status == 400


def test_exec_timeout_kills_the_command_and_its_children(runtime):
    h = handle(runtime)
    pidfile = runtime.workdir / "child.pid"
    started = time.monotonic()
    r = h.exec(f"sleep 300 & echo $! > {pidfile}; wait", timeout=1)
    took = time.monotonic() - started
    assert r.exit_code == 124 and r.timed_out
    assert "timed out after 1s" in r.stderr
    assert took < 5, took
    child = int(h.read_text(str(pidfile)))
    deadline = time.monotonic() + scaled(5)
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "the whole process group is killed at the timeout"


def test_exec_output_is_capped(runtime):
    r = handle(runtime).exec(f"head -c {MAX_OUTPUT_BYTES + 1000} /dev/zero | tr '\\0' a")
    assert r.exit_code == 0
    assert r.stdout.startswith("a" * 1000)
    assert r.stdout.endswith("[output cut: 1000 more bytes]")


def spool_bytes_on_disk(pid: int, spool_dir: str) -> int:
    """Disk blocks held by the runtime's open, unlinked files under `spool_dir` (its exec spools; its container's path)."""
    total = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
            if target.startswith(str(spool_dir)) and target.endswith("(deleted)"):
                total += os.stat(fd).st_blocks * 512
        except OSError:
            continue  # closed meanwhile
    return total


def test_exec_output_spool_on_disk_stays_at_the_cap(runtime):
    """A command that prints far past the cap: the spool holds the cap, not what it printed.
    On main's code (output to unlinked temp files read after the command) it held all 48 MiB.
    The spools sit where the pod's runtime puts them (no TMPDIR in the template's env): its container's /tmp."""
    spool_dir = "/tmp"
    ready, go = runtime.workdir / "printed", runtime.workdir / "go"
    printed = 48 * 1024 * 1024
    result: dict = {}
    cmd = f"head -c {printed} /dev/zero; touch {ready}; for i in $(seq 600); do [ -e {go} ] && break; sleep 0.05; done"
    t = threading.Thread(target=lambda: result.setdefault("r", handle(runtime).exec(cmd)))
    t.start()
    deadline = time.monotonic() + scaled(30)
    while not runtime.host(ready).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert runtime.host(ready).exists(), "the command printed its 48 MiB"
    held = spool_bytes_on_disk(runtime.proc.pid, spool_dir)
    assert handle(runtime).exec(f"touch {go}").exit_code == 0
    t.join(scaled(60))
    r = result["r"]
    assert r.exit_code == 0 and r.stdout.endswith(f"[output cut: {printed - MAX_OUTPUT_BYTES} more bytes]")
    assert 0 < held <= MAX_OUTPUT_BYTES + 1024 * 1024, f"the spool held {held} bytes on disk for a {MAX_OUTPUT_BYTES}-byte cap"


def test_exec_answers_when_a_background_child_keeps_printing(runtime):
    """`yes &` outlives the command and holds its stdout: the answer comes anyway, the kept output is
    capped, and the child's writes end at EPIPE once the runtime stops reading (no endless spool)."""
    started = time.monotonic()
    r = handle(runtime).exec("yes & echo $! >&2; echo done >&2")
    assert time.monotonic() - started < scaled(10)
    assert r.exit_code == 0 and r.stderr.endswith("done\n") and len(r.stdout) <= MAX_OUTPUT_BYTES + 100, r.stderr
    pid = int(r.stderr.split()[0])
    deadline = time.monotonic() + scaled(10)
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "the background writer ended at EPIPE"


def test_background_job_pid_wait_and_exit_code(runtime):
    h = handle(runtime)
    out = runtime.workdir / "bg.txt"
    job = h.start_bg(f'echo "$$ $GREETING" > {out}; exit 3', envs={"GREETING": "hi"})
    assert job.wait(timeout=scaled(10)) == 3
    pid, greeting = h.read_text(str(out)).split()
    assert (int(pid), greeting) == (job.pid, "hi")
    # A finished job keeps its exit code.
    assert job.wait(timeout=1) == 3


def test_background_wait_times_out_then_kill_ends_the_whole_group(runtime):
    h = handle(runtime)
    job = h.start_bg("sleep 300 | cat; sleep 300")
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        job.wait(timeout=1)
    assert 0.9 < time.monotonic() - started < 4
    members = process_group_members(job.pid)
    assert len(members) >= 2, "sleep and cat run in the job's own process group"
    started = time.monotonic()
    job.kill()
    assert time.monotonic() - started < 5
    assert job.wait(timeout=scaled(5)) == 128 + signal.SIGTERM
    assert process_group_members(job.pid) == []
    job.kill()  # idempotent


def test_a_job_ignoring_sigterm_is_killed(runtime):
    h = handle(runtime)
    job = h.start_bg("trap '' TERM; sleep 300")
    time.sleep(0.3)
    started = time.monotonic()
    job.kill()
    assert time.monotonic() - started < 8
    assert job.wait(timeout=scaled(5)) == 128 + signal.SIGKILL
    assert process_group_members(job.pid) == []


def test_files_round_trip(runtime):
    h = handle(runtime)
    path = f"{runtime.home}/task/deep/er/instruction.md"
    text = "Write solution.py — ünïcödé ✓\nline 2\n"
    assert not h.exists(path)
    h.write_text(path, text)
    assert h.exists(path) and h.read_text(path) == text
    h.write_text(path, "shorter")
    assert h.read_text(path) == "shorter"
    # Relative paths resolve against the working dir.
    h.write_text("rel/file.txt", "r")
    assert h.read_text(f"{runtime.workdir}/rel/file.txt") == "r"
    assert h.exists("rel/file.txt")
    with pytest.raises(FileNotFoundError):
        h.read_text(f"{runtime.home}/missing")
    with pytest.raises(SandboxError, match="is a directory"):
        h.read_text(str(runtime.home))
    # The seeded image copies are read-only: links into the image layout on the pod's read-only root. Refused as a
    # permission is (403), as is a write to the root itself; the runtime answered 409 for a read-only file system
    # before, unseen while this test ran the runtime as root and skipped the check.
    for path in (f"{runtime.home}/proxy/interception.py", "/probe"):
        with pytest.raises(SandboxError) as e:
            h.write_text(path, "overwrite")
        assert e.value.status == 403 and "Read-only file system" in str(e.value), e.value


def test_concurrent_use_of_one_handle(runtime):
    h = handle(runtime)
    results: dict[int, str] = {}

    def run(i: int) -> None:
        results[i] = h.exec(f"sleep 0.2; echo {i}").stdout.strip()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == {i: str(i) for i in range(8)}
    assert time.monotonic() - started < 5, "commands run in parallel"


def test_the_key_never_reaches_a_command_line_or_a_log(runtime):
    h = handle(runtime)
    job = h.start_bg("exec sleep 30", envs={"OPENCODE_UPSTREAM_API_KEY": SECRET})
    r = h.exec('test "$OPENCODE_UPSTREAM_API_KEY" = "$EXPECTED" && echo same', envs={"OPENCODE_UPSTREAM_API_KEY": SECRET, "EXPECTED": SECRET})
    assert r.stdout.strip() == "same", "the value arrives in the command's environment"
    assert SECRET.encode() in Path(f"/proc/{job.pid}/environ").read_bytes(), "the job holds it as env"
    on_cmdline = [pid for pid, _pp, _st, cmdline in processes() if SECRET.encode() in cmdline]
    assert on_cmdline == []
    job.kill()
    assert SECRET not in runtime.log()
    assert "POST /jobs" in runtime.log() and "POST /exec" in runtime.log(), "requests are logged, by route"


def test_kill_releases_once_and_ends_the_handle(runtime):
    calls: list[int] = []
    h = handle(runtime, on_kill=lambda: calls.append(1))
    job = h.start_bg("sleep 300")
    threads = [threading.Thread(target=h.kill) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert calls == [1]
    for call in (lambda: h.exec("true"), lambda: h.read_text("x"), lambda: job.wait(1)):
        with pytest.raises(SandboxGone):
            call()
    job.kill()  # a no-op once the sandbox is gone


def test_wait_is_bounded_by_the_sandbox_lifetime(runtime):
    h = handle(runtime, lifetime_seconds=1.5)
    job = h.start_bg("sleep 300")
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        job.wait()  # no timeout: the lifetime bounds it
    assert time.monotonic() - started < 4
    with pytest.raises(SandboxGone, match="lifetime is over"):
        h.exec("true")
    r = handle(runtime, lifetime_seconds=1.5).exec("sleep 300", timeout=None)
    assert r.timed_out and r.exit_code == 124


def test_init_mode_reaps_orphans_and_stops_on_sigterm(tmp_path):
    rt = start_runtime(tmp_path, extra_args=["--init"])
    try:
        h = handle(rt)
        # Orphans (double fork) are reparented to the init (a child subreaper) and reaped there.
        job = h.start_bg("(sleep 0.5 &) ; (sleep 0.5 &) ; exit 0")
        assert job.wait(timeout=scaled(10)) == 0
        time.sleep(scaled(1.5))  # the orphans' 0.5 s sleeps ended and were reaped
        init_pid = rt.proc.pid
        zombies = [pid for pid, ppid, state, _ in processes() if ppid == init_pid and state == "Z"]
        assert zombies == []
        long_job = h.start_bg("sleep 300")
        assert stop_process(rt.proc, signal.SIGTERM) == 0
        deadline = time.monotonic() + scaled(5)
        while process_group_members(long_job.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process_group_members(long_job.pid) == [], "jobs die with the runtime"
    finally:
        stop_process(rt.proc, signal.SIGKILL)


def test_kill_returns_only_once_the_jobs_processes_are_gone(monkeypatch):
    """SIGKILL is delivered at once, but a busy machine may take a moment to end the processes:
    Job.kill waits (bounded by GROUP_EXIT_SECONDS) until none of the group's is left running."""
    from agent_rl_sandbox import runtime as rt

    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    job = rt.Job("j1", proc)
    seen: list[list[int]] = []
    real = rt.group_members

    def slow_to_die(pgid: int) -> list[int]:
        # The group's processes as /proc shows them, with the first two looks finding one still running.
        members = real(pgid) or ([pgid] if len(seen) < 2 else [])
        seen.append(members)
        return members

    monkeypatch.setattr(rt, "group_members", slow_to_die)
    job.kill(grace=0.5)
    assert len(seen) >= 3 and seen[-1] == [], "kill looked again until the group was gone"
    assert real(proc.pid) == []
    assert job.wait(5)["exit_code"] == 128 + signal.SIGTERM

    # Bounded: a group that never ends holds kill for GROUP_EXIT_SECONDS, not for ever.
    monkeypatch.setattr(rt, "GROUP_EXIT_SECONDS", 0.3)
    monkeypatch.setattr(rt, "group_members", lambda pgid: [pgid])
    proc2 = subprocess.Popen(["sleep", "300"], start_new_session=True)
    job2 = rt.Job("j2", proc2)
    started = time.monotonic()
    job2.kill(grace=0.5)
    assert 0.3 <= time.monotonic() - started < 3
