"""conftest.free_port: ports below the kernel's ephemeral range, apart from the TypeScript tests' range, each handed
out once per process, each one nothing else holds. Run: bash python/run-tests.sh python/tests/test_free_port.py"""
from __future__ import annotations

import random
import re
import socket
from pathlib import Path

import pytest

from conftest import FREE_PORT_RANGE, free_port, free_port_in

REPO = Path(__file__).resolve().parents[2]


def test_ports_are_below_the_ephemeral_range_distinct_and_listenable():
    ephemeral_from = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert FREE_PORT_RANGE[1] <= ephemeral_from
    ports = [free_port() for _ in range(40)]
    assert len(set(ports)) == len(ports)
    assert all(FREE_PORT_RANGE[0] <= p < FREE_PORT_RANGE[1] for p in ports), ports
    with socket.create_server(("127.0.0.1", ports[0])):
        pass


def test_the_range_is_apart_from_the_typescript_tests_range():
    ts = (REPO / "test" / "helpers" / "http.ts").read_text()
    m = re.search(r"FREE_PORT_RANGE = \{ from: ([\d_]+), to: ([\d_]+) \}", ts)
    assert m, "test/helpers/http.ts's FREE_PORT_RANGE"
    ts_from, ts_to = int(m[1]), int(m[2])
    assert ts_to <= FREE_PORT_RANGE[0] or FREE_PORT_RANGE[1] <= ts_from, ((ts_from, ts_to), FREE_PORT_RANGE)


def test_a_held_port_and_one_handed_out_are_skipped_then_it_fails_naming_the_range():
    # Three ports just below FREE_PORT_RANGE, so free_port's own picks cannot interfere; the middle one held.
    lo = FREE_PORT_RANGE[0] - 40 + random.randrange(30)
    with socket.create_server(("127.0.0.1", lo + 1)):
        assert free_port_in(lo, lo + 3, 0) == lo
        assert free_port_in(lo, lo + 3, 0) == lo + 2
        with pytest.raises(RuntimeError, match=rf"^free_port: no free TCP port from {lo} to {lo + 2} on this machine$"):
            free_port_in(lo, lo + 3, 0)
