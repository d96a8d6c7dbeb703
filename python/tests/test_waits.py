"""waits.py, the Python tests' one wait scaler: the factor from AGENT_RL_TEST_TIME_SCALE or the
load average, once per process and passed to child processes, and wait_for that uses it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import waits
from waits import MAX_LOAD_SCALE, TIME_SCALE_ENV, scaled, time_scale, time_scale_from, wait_for

TESTS = Path(__file__).resolve().parent


def in_fresh_process(code: str, **env: str | None) -> str:
    """Runs `code` (waits imported) in a new interpreter with `env` (None unsets); its stdout."""
    run_env = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    r = subprocess.run([sys.executable, "-c", f"import waits\n{code}"], cwd=TESTS, env={**run_env, "PYTHONPATH": str(TESTS)}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_an_idle_or_lightly_loaded_machine_keeps_every_wait_as_written():
    assert time_scale_from(None, (0.0, 0.0, 0.0), 2) == 1
    assert time_scale_from(None, (1.5, 1.2, 1.0), 2) == 1


def test_load_14_on_2_cpus_stretches_waits_7x_and_the_5_minute_average_counts_when_busier():
    assert time_scale_from(None, (14.0, 9.0, 5.0), 2) == 7
    assert time_scale_from(None, (2.0, 10.0, 12.0), 2) == 5


def test_the_loads_factor_stops_at_its_maximum():
    assert time_scale_from(None, (100.0, 100.0, 100.0), 2) == MAX_LOAD_SCALE


def test_the_variable_wins_over_the_load_and_an_empty_one_is_unset():
    assert time_scale_from("3", (100.0, 100.0, 100.0), 2) == 3
    assert time_scale_from("1", (14.0, 14.0, 14.0), 2) == 1
    assert time_scale_from("", (14.0, 14.0, 14.0), 2) == 7


@pytest.mark.parametrize("bad", ["0.5", "0", "-2", "fast", "nan", "inf"])
def test_a_variable_below_1_or_not_a_number_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match=rf"^{TIME_SCALE_ENV}=.*expected a number >= 1"):
        time_scale_from(bad, (0.0, 0.0, 0.0), 2)


def test_a_processs_factor_is_measured_once_and_exported_to_the_processes_it_starts():
    assert in_fresh_process("print(waits.scaled(10), __import__('os').environ['AGENT_RL_TEST_TIME_SCALE'])", **{TIME_SCALE_ENV: "2.5"}) == "25.0 2.5"
    factor, exported, again, child = in_fresh_process(
        "import os, subprocess, sys\n"
        "a = waits.time_scale()\n"
        "c = subprocess.run([sys.executable, '-c', 'import os; print(os.environ[\"AGENT_RL_TEST_TIME_SCALE\"])'], capture_output=True, text=True).stdout.strip()\n"
        "print(a, os.environ['AGENT_RL_TEST_TIME_SCALE'], waits.time_scale(), c)",
        **{TIME_SCALE_ENV: None},
    ).split()
    assert 1 <= float(factor) <= MAX_LOAD_SCALE
    assert float(exported) == float(factor) == float(again) == float(child)


def test_scaled_multiplies_by_this_processs_factor():
    assert scaled(10) == pytest.approx(10 * time_scale())


def test_wait_for_returns_the_first_truthy_value_polling_until_then():
    tries = []
    assert wait_for("the third try", lambda: tries.append(1) or (len(tries) >= 3 and f"try {len(tries)}"), timeout=5, interval=0.001) == "try 3"
    assert len(tries) == 3


def test_wait_for_past_its_scaled_bound_fails_naming_what_the_bound_and_the_last_value(monkeypatch):
    monkeypatch.setattr(waits, "_scale", 3.0)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"^the thing ready: not within 0.3s \(last: \[\]\)$"):
        wait_for("the thing ready", lambda: [], timeout=0.1, interval=0.01)
    assert time.monotonic() - t0 >= 0.3


def test_wait_for_with_scale_false_keeps_a_bound_that_is_the_behaviour_under_test(monkeypatch):
    monkeypatch.setattr(waits, "_scale", 50.0)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"not within 0.1s"):
        wait_for("deleted within the bound", lambda: None, timeout=0.1, interval=0.01, scale=False)
    assert time.monotonic() - t0 < 2.0
