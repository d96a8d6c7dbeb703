"""Warm-pool claim to first command (bench/claim-latency.ts runs it): the backend
(AgentSandboxBackend, the trainer's ServiceAccount) against the REAL agent-sandbox v1.0.1
controller on the simulated cluster of python/tests/test_controller.py (kwok pods, each pod's
runtime started with the pod's own command at a loopback IP). kwok starts no container, so this
measures the controller and the backend, not a pod start.

One sample: wait until the warm pool is full (not timed), then time `create()` (claim, controller
adoption, Ready, runtime health) and the first `exec("true")`; then delete the claim. Bounded by a
count and a deadline. Needs root (the pods' mount namespaces) and the fixtures test_controller.py
needs. Prints one line `BENCH_JSON {...}`.

usage (repo root): python bench/claim-latency.py SAMPLES BUDGET_SECONDS
"""

from __future__ import annotations

import json
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "python"), str(REPO / "python/tests")]

import test_controller as tc  # noqa: E402
from agent_rl_sandbox.agent_sandbox import AgentSandboxBackend  # noqa: E402


class _TmpFactory:
    """What the cluster fixture asks of pytest's tmp_path_factory."""

    def mktemp(self, name: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=f"{name}-"))


def main(samples: int, budget_s: float) -> int:
    deadline = time.monotonic() + budget_s
    # The bench's deadline stops this with SIGTERM: exit through `finally`, which stops the cluster.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    fixture = tc.cluster.__wrapped__(_TmpFactory())
    c = next(fixture)
    out: dict = {"create_ms": [], "first_exec_ms": [], "total_ms": [], "pool_size": c["poolSize"], "cluster_up_s": None}
    try:
        tc.TRAINER_KUBECONFIG = c["trainerKubeconfig"]
        backend = AgentSandboxBackend.from_env(c["trainerEnv"], client_factory=tc.trainer_client, handle_sigterm=False)
        for _ in range(samples):
            left = deadline - time.monotonic()
            if left < 10:
                break
            tc.wait_for("the warm pool full", lambda: tc.warm_pool_full(c), timeout=min(120.0, left - 5))
            t0 = time.perf_counter()
            handle = backend.create(timeout_s=300)
            t1 = time.perf_counter()
            result = handle.exec("true", timeout=30)
            t2 = time.perf_counter()
            handle.kill()
            if result.exit_code != 0:
                raise RuntimeError(f"first command failed: {result}")
            out["create_ms"].append((t1 - t0) * 1000)
            out["first_exec_ms"].append((t2 - t1) * 1000)
            out["total_ms"].append((t2 - t0) * 1000)
        backend.close()
    finally:
        fixture.close()
    print("BENCH_JSON " + json.dumps(out), flush=True)
    return 0 if out["total_ms"] else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), float(sys.argv[2])))
