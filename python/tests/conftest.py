"""Shared fixtures: a runtime on loopback, started as the sandbox template runs it (its uid, a read-only root,
HOME seeded from the image layout), helpers to find processes and secrets on this machine, and the
`openenv_source` marker's bookkeeping (tests that need OpenEnv's source tree, OPENENV_SRC)."""

from __future__ import annotations

import http.client
import os
import random
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

from agent_rl_sandbox.runtime import group_members as process_group_members  # noqa: F401 - the tests import it from here
from waits import scaled, wait_for

REPO = Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO / "python"

#: The dir holding OpenEnv's `opencode_env` (<OpenEnv checkout>/envs). The opencode env is not on
#: PyPI; tests marked `openenv_source` import it from here. python/run-tests.sh and
#: scripts/test/run.ts resolve the same default.
OPENENV_SRC = Path(os.environ.get("OPENENV_SRC") or Path.home() / ".cache/agent-rl-infra/openenv-src/envs")


def openenv_source_missing() -> str | None:
    """Why the `openenv_source` tests cannot run here, or None."""
    if (OPENENV_SRC / "opencode_env/harness.py").exists():
        return None
    return f"OpenEnv's opencode env not found under OPENENV_SRC={OPENENV_SRC} (not on PyPI: point OPENENV_SRC at <OpenEnv checkout>/envs)"


_deselected: list[pytest.Item] = []


def pytest_deselected(items: list[pytest.Item]) -> None:
    _deselected.extend(items)


def pytest_terminal_summary(terminalreporter) -> None:
    """Name every deselected `openenv_source` test with the reason, one `EXCLUDED` line each
    (scripts/test/run.ts lists them in its summary: not run, and not skips)."""
    markexpr = terminalreporter.config.option.markexpr or ""
    excluded = [i for i in _deselected if i.get_closest_marker("openenv_source") is not None]
    if "openenv_source" not in markexpr or not excluded:
        return  # deselected by -k or the like: the caller named what to run
    reason = openenv_source_missing() or f"deselected by -m {markexpr!r}"
    terminalreporter.section("excluded: tests that need OpenEnv's source tree (marker openenv_source)")
    for item in excluded:
        terminalreporter.write_line(f"EXCLUDED {item.nodeid}: {reason}")


#: The trainer env of per-rollout keys (docs/design/rollout-keys.md): the verifier's admin URL and the forwarders' key port.
ROLLOUT_KEY_ENV = ("SANDBOX_ROLLOUT_KEYS_URL", "SANDBOX_FORWARDER_KEY_PORT")


def without_rollout_keys(env: dict[str, str]) -> dict[str, str]:
    """The plan's trainer env for a test that starts no key-taking forwarder beside its sandboxes (nowhere to
    deliver a rollout key) and no verifier: the sandboxes call the ingress with the pool's key, as before per-rollout
    keys. The rollout-key path itself: test_rollout_keys.py (rendered_path) and test_opencode_e2e.py (forwarded)."""
    return {k: v for k, v in env.items() if k not in ROLLOUT_KEY_ENV}


#: Where free_port draws from: below the kernel's ephemeral range (32768-60999 by default), where every outgoing
#: connection takes its local port, so a port checked free and released is not taken by another test's connect();
#: apart from the TypeScript tests' range (test/helpers/http.ts, 12400-19999), which run beside these.
FREE_PORT_RANGE = (20000, 28000)
_handed_out: set[int] = set()


def free_port_in(lo: int, hi: int, start: int | None = None) -> int:
    """A TCP port in [lo, hi) that nothing listens on or holds (an exclusive bind on 0.0.0.0 succeeds), not handed
    out before by this process; the scan starts at `start` (random when None) and wraps."""
    span = hi - lo
    first = random.randrange(span) if start is None else start % span
    for i in range(span):
        port = lo + (first + i) % span
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"free_port: no free TCP port from {lo} to {hi - 1} on this machine")


def free_port() -> int:
    return free_port_in(*FREE_PORT_RANGE)


def wait_http(url: str, timeout: float = 15.0, proc: subprocess.Popen | None = None) -> None:
    """Polls `url` until it answers 200; fails when `proc` exits first or after `timeout` seconds, scaled (waits.py)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError as e:
            last = e
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout:g}s: {last}")


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(scaled(timeout))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


def processes() -> list[tuple[int, int, str, bytes]]:
    """(pid, ppid, state, cmdline) of every process on this machine."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2 :].split()
        out.append((int(entry), int(rest[1]), rest[0], cmdline))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


@dataclass
class RunningRuntime:
    """A runtime started as the sandbox template runs it. `home`, `seed` and `workdir` are its paths (inside its
    mount namespace: HOME, the image's HOME skeleton, the working dir); `host(path)` reads one from this process."""

    url: str
    port: int
    proc: subprocess.Popen
    home: PurePosixPath
    seed: PurePosixPath
    workdir: PurePosixPath
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def host(self, path: str | PurePosixPath) -> Path:
        """`path` of the runtime's container, through its root (sandbox_root.in_container): for what only root may
        look at (stat, a symlink's target); what the agent's uid sees is read through the runtime itself."""
        import sandbox_root

        return sandbox_root.in_container(self.proc.pid, str(path))


def start_runtime(tmp: Path, *, extra_args: list[str] = (), env: dict[str, str] | None = None, port: int | None = None, host: str = "127.0.0.1",
                  pod: tuple[dict, dict] | None = None, emptydir_root: str | None = None, wrap: list[str] = ()) -> RunningRuntime:
    """The sandbox template's runtime as the plan's pod runs it (sandbox_root.rendered: its uid, a read-only root, its
    emptyDirs; the template's command and env) from the image layout (install-layout.sh on test_plan_contract's
    stand-in stock HOME); only the port and the listen address are this machine's. `pod`: (pod spec, container) of
    another template than the opencode pool's; `emptydir_root`: sandbox_root.command's; `wrap`: an argv prefix that
    runs the sandbox root (a chroot that makes the pod's fixed paths)."""
    import sandbox_root
    from test_plan_contract import container, fake_stock_home, plain_env, plan_facts

    if (why := sandbox_root.available()) is not None:
        pytest.skip(f"the runtime runs as the template runs it, in a sandbox root: {why}")
    if pod is None:
        facts = plan_facts()
        pod = facts["template"]["podTemplate"]["spec"], container(facts)
    spec, c = pod
    image_root = tmp / "image"
    if not image_root.exists():
        sandbox_root.install_layout(fake_stock_home(tmp), image_root)
    port = port or free_port()
    log_path = tmp / "runtime.log"
    run_env = {**plain_env(c), "PATH": "/usr/local/bin:/usr/bin:/bin", **(env or {})}
    argv = list(c["command"])
    argv[argv.index("--port") + 1] = str(port)
    argv += ["--host", host, *extra_args]
    log_file = open(log_path, "wb")
    where = {} if emptydir_root is None else {"emptydir_root": emptydir_root}
    proc = subprocess.Popen([*wrap, *sandbox_root.command(image_root, argv, **sandbox_root.rendered(spec, c), **where)], env=run_env,
                            stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    log_file.close()
    seed = argv[argv.index("--home-seed") + 1]
    rt = RunningRuntime(url=f"http://{host}:{port}", port=port, proc=proc, home=PurePosixPath(run_env["HOME"]), seed=PurePosixPath(seed),
                        workdir=PurePosixPath(sandbox_root.WORKDIR), log_path=log_path)
    try:
        wait_http(rt.url + c["readinessProbe"]["httpGet"]["path"], proc=proc)
    except Exception:
        stop_process(proc)
        raise RuntimeError(f"runtime did not start:\n{rt.log()}")
    return rt


@pytest.fixture
def runtime(tmp_path: Path):
    rt = start_runtime(tmp_path)
    yield rt
    stop_process(rt.proc)
    try:
        os.killpg(rt.proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def deliver_rollout_key(host: str, port: int, key: str) -> None:
    """What the trainer's backend does at claim (agent_sandbox.py _deliver_rollout_key): PUT the key once."""
    def delivered() -> bool:
        conn = http.client.HTTPConnection(host, port, timeout=scaled(5))
        try:
            conn.request("PUT", "/rollout-key", body=key.encode(), headers={"Content-Type": "text/plain"})
            status = conn.getresponse().status
        except OSError:
            return False
        finally:
            conn.close()
        assert status == 204, status
        return True

    wait_for(f"the forwarder takes the rollout key on {host}:{port}", delivered, timeout=15)
