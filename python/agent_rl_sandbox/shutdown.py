"""Process-wide release of sandboxes when the trainer stops.

Every live sandbox registers a release function here. They all run once: at interpreter exit
(``atexit``), on SIGTERM (Kubernetes stopping the trainer pod; multiprocessing terminating
TRL's rollout child), or when ``release_all()`` is called. SIGTERM also raises the shutdown
flag that every bounded wait in ``handle.py`` checks, so pool threads blocked in a rollout
return instead of holding the exit up. A claim the trainer could not delete (SIGKILL, lost
node) still ends at its ``shutdownTime`` (policy Delete): the controller deletes it.

A process that multiprocessing started (TRL's rollout child: ``HarnessRolloutWorker`` spawns
it, trl/experimental/async_grpo/openenv_harness.py) also watches its parent: when the parent
dies without terminating it (SIGTERM's default action, SIGKILL, an exception past
multiprocessing's exit hook), the child releases every sandbox and exits (status 143).
Without the watch, a trainer that never built a backend itself (the backend made inside the
session factory, in the child) would leave the child, and its claims, running after SIGTERM.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from typing import Any, Callable

log = logging.getLogger("agent_rl_sandbox")

_lock = threading.Lock()
_releases: dict[str, Callable[[], None]] = {}
_stopping = threading.Event()
_installed = False
_previous_sigterm: Any = None
_watching = False


def shutting_down() -> bool:
    return _stopping.is_set()


def register(key: str, release: Callable[[], None]) -> None:
    with _lock:
        _releases[key] = release


def unregister(key: str) -> None:
    with _lock:
        _releases.pop(key, None)


def live() -> list[str]:
    with _lock:
        return sorted(_releases)


def release_all() -> int:
    """Runs every registered release (each at most once); returns how many failed."""
    with _lock:
        pending = list(_releases.items())
        _releases.clear()
    failed = 0
    for key, release in pending:
        try:
            release()
        except Exception as e:  # noqa: BLE001 - release the others regardless
            failed += 1
            log.warning("releasing %s failed: %s: %s (it ends at its shutdownTime)", key, type(e).__name__, e)
    return failed


def _on_sigterm(signum: int, frame: Any) -> None:
    if _stopping.is_set():
        return  # a second SIGTERM (the parent watch, a second kill) must not cut the first release short
    _stopping.set()
    release_all()
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_IGN:
        return
    else:
        raise SystemExit(128 + signum)


def _on_parent_death() -> None:
    """The parent is gone: release every sandbox here, then end this process at once with
    SIGTERM's exit status. Not by signalling itself: TRL's rollout loop turns the SystemExit of
    the handler above into a failure it reports to its (dead) parent, and the orphan then lingers."""
    _stopping.set()
    live_keys = live()
    failed = release_all()
    log.warning("parent process gone: released %d sandbox(es) (%d failed), exiting", len(live_keys), failed)
    logging.shutdown()
    os._exit(128 + signal.SIGTERM)


def _watch_parent() -> None:
    """Started once in a multiprocessing child: waits on the parent's sentinel (readable when the
    parent exits, spawn and forkserver), or polls getppid() where there is none (fork)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    sentinel = getattr(parent, "sentinel", None)
    if sentinel is not None:
        multiprocessing.connection.wait([sentinel])
    else:
        ppid = os.getppid()
        while os.getppid() == ppid:
            if _stopping.wait(0.5):
                return
    if not _stopping.is_set():  # else the SIGTERM handler is already releasing and exiting
        _on_parent_death()


def install() -> None:
    """Registers the atexit hook once per process, the parent watch in a multiprocessing child,
    and the SIGTERM handler when called on the main thread (a signal handler can only be set
    there); an existing Python handler is chained."""
    global _installed, _previous_sigterm, _watching
    with _lock:
        if not _installed:
            atexit.register(release_all)
            _installed = True
        if not _watching and multiprocessing.parent_process() is not None:
            threading.Thread(target=_watch_parent, name="agent-rl-sandbox-parent-watch", daemon=True).start()
            _watching = True
    if threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGTERM)
    if current is _on_sigterm:
        return
    _previous_sigterm = current
    signal.signal(signal.SIGTERM, _on_sigterm)
