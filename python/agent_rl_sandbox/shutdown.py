"""Process-wide release of sandboxes when the trainer stops.

Every live sandbox registers a release function here. They all run once: at interpreter exit
(``atexit``), on SIGTERM (Kubernetes stopping the trainer pod; multiprocessing terminating
TRL's rollout child), or when ``release_all()`` is called. SIGTERM also raises the shutdown
flag that every bounded wait in ``handle.py`` checks, so pool threads blocked in a rollout
return instead of holding the exit up. A claim the trainer could not delete (SIGKILL, lost
node) still ends at its ``shutdownTime`` (policy Delete): the controller deletes it.
"""

from __future__ import annotations

import atexit
import logging
import signal
import threading
from typing import Any, Callable

log = logging.getLogger("agent_rl_sandbox")

_lock = threading.Lock()
_releases: dict[str, Callable[[], None]] = {}
_stopping = threading.Event()
_installed = False
_previous_sigterm: Any = None


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
    _stopping.set()
    release_all()
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_IGN:
        return
    else:
        raise SystemExit(128 + signum)


def install() -> None:
    """Registers the atexit hook once per process, and the SIGTERM handler when called on the
    main thread (a signal handler can only be set there); an existing Python handler is chained."""
    global _installed, _previous_sigterm
    with _lock:
        if not _installed:
            atexit.register(release_all)
            _installed = True
    if threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGTERM)
    if current is _on_sigterm:
        return
    _previous_sigterm = current
    signal.signal(signal.SIGTERM, _on_sigterm)
