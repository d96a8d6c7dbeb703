"""Env-session figures for bench/env-session.ts, measured with openenv 0.10's own client.

usage: python bench/env_session.py DIRECT_URL ROUTER_URL ROUNDS STEPS SESSIONS DEADLINE_S
Prints one line `BENCH_JSON {...}`: per path ("direct", "router") every step latency (ms) and the
sessions opened per second (open + reset + close, one after another). Rounds alternate the order
of the two paths; every loop is bounded by its count and by DEADLINE_S.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from openenv.core.generic_client import GenericEnvClient


def _client(url: str) -> GenericEnvClient:
    # As the trainer's env class opens them: client pings off (the seed script's setting).
    return GenericEnvClient(base_url=url, connect_timeout_s=10.0, message_timeout_s=30.0, websocket_ping_interval_s=None)


async def step_latencies(url: str, steps: int, deadline: float) -> list[float]:
    client = _client(url)
    out: list[float] = []
    try:
        await client.connect()
        await client.reset(target=1)
        for _ in range(steps):
            if time.monotonic() > deadline:
                break
            t = time.perf_counter()
            await client.step({"code": "print(1)"})
            out.append((time.perf_counter() - t) * 1000.0)
    finally:
        await client.close()
    return out


async def sessions_per_second(url: str, sessions: int, deadline: float) -> tuple[int, float]:
    done = 0
    t0 = time.perf_counter()
    for _ in range(sessions):
        if time.monotonic() > deadline:
            break
        client = _client(url)
        try:
            await client.reset(target=1)
        finally:
            await client.close()
        done += 1
    return done, time.perf_counter() - t0


async def main(direct: str, router: str, rounds: int, steps: int, sessions: int, deadline_s: float) -> dict:
    deadline = time.monotonic() + deadline_s
    paths = {"direct": direct, "router": router}
    result = {name: {"steps_ms": [], "sessions": 0, "sessions_s": 0.0} for name in paths}
    # One warm-up session per path (first connect, imports, nginx's first upstream connection).
    for url in paths.values():
        await step_latencies(url, 5, deadline)
    for r in range(rounds):
        order = list(paths) if r % 2 == 0 else list(reversed(paths))
        for name in order:
            result[name]["steps_ms"] += await step_latencies(paths[name], steps, deadline)
        for name in order:
            n, s = await sessions_per_second(paths[name], sessions, deadline)
            result[name]["sessions"] += n
            result[name]["sessions_s"] += s
    return result


if __name__ == "__main__":
    d, rt, rounds, steps, sessions, deadline_s = sys.argv[1:7]
    res = asyncio.run(main(d, rt, int(rounds), int(steps), int(sessions), float(deadline_s)))
    print("BENCH_JSON " + json.dumps(res), flush=True)
