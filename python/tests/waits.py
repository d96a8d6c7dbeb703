"""The Python tests' one wait scaler: test/helpers/waits.ts's rule, the same variable.

Every wall-clock wait for something that makes progress (a readiness poll, a claim, a process
start, a subprocess `timeout=`) is a budget, and a busy machine makes that progress slower: one
factor scales them all, AGENT_RL_TEST_TIME_SCALE when set, else the busier of the 1- and 5-minute
load averages per CPU (between 1 and MAX_LOAD_SCALE), read once per process and written back to the
environment, so the processes a test starts (the trainer stand-in, its rollout child) use the same
factor. A bound that is itself the behaviour under test (a claim's lifetime, "deleted within 20 s
of SIGTERM") is not scaled. No pytest import: the stand-ins import it in their own processes.
"""

from __future__ import annotations

import math
import os
import time
from typing import Callable, Sequence, TypeVar

#: The environment variable that fixes the factor (a number >= 1; "1" keeps every wait as written).
TIME_SCALE_ENV = "AGENT_RL_TEST_TIME_SCALE"
#: The most the load average stretches a wait by default (a hung process still fails in bounded time).
MAX_LOAD_SCALE = 8.0

T = TypeVar("T")


def time_scale_from(fixed: str | None, loadavg: Sequence[float], cpus: int) -> float:
    """The factor from its inputs: `fixed` (the variable) when set, else the busier of the 1- and
    5-minute load averages per CPU, between 1 and MAX_LOAD_SCALE. A `fixed` that is not a number
    >= 1 is refused (a typo must not silently shorten every wait)."""
    if fixed is not None and fixed.strip() != "":
        try:
            n = float(fixed)
        except ValueError:
            n = math.nan
        if not math.isfinite(n) or n < 1:
            raise ValueError(f"{TIME_SCALE_ENV}={fixed!r}: expected a number >= 1 (the factor every test wait is multiplied by)")
        return n
    load = max(list(loadavg[:2]) + [0.0]) / max(1, cpus)
    return min(MAX_LOAD_SCALE, max(1.0, round(load, 2)))


_scale: float | None = None


def time_scale() -> float:
    """This process's factor: measured on first use, then fixed and exported to child processes."""
    global _scale
    if _scale is None:
        _scale = time_scale_from(os.environ.get(TIME_SCALE_ENV), os.getloadavg(), os.cpu_count() or 1)
        os.environ[TIME_SCALE_ENV] = f"{_scale:g}"
    return _scale


def scaled(seconds: float) -> float:
    """`seconds` stretched by this process's factor: the budget of a wait for something that makes progress."""
    return seconds * time_scale()


def wait_for(what: str, check: Callable[[], T], timeout: float = 60.0, interval: float = 0.3, *, scale: bool = True) -> T:
    """Polls `check` until it returns something truthy and returns it; past `timeout` seconds
    (scaled, unless `scale=False`: a bound that is the behaviour under test) raises TimeoutError
    naming `what`, the bound and the last value."""
    bound = scaled(timeout) if scale else timeout
    deadline = time.monotonic() + bound
    last = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {bound:g}s (last: {last!r})")
