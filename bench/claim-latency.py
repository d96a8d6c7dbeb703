"""Warm-pool claims under load (bench/claim-latency.ts runs it): the backend (AgentSandboxBackend,
the trainer's ServiceAccount) against the REAL agent-sandbox v1.0.1 controller on the simulated
cluster of python/tests/test_controller.py. kwok plays the kubelets and starts no container: the
test's pod network starts each pod's runtime (the real runtime.py, a process on this machine, up to
test_controller.POD_STARTERS at once) and only then makes the pod Ready at its loopback address.
So a "pod start" here is a process start, not an image pull or a container start.

For each level C of claims at once (AGENT_RL_POOL_LEVELS; cluster_up.ts plans each level, so the
pool and its ResourceQuota are exactly what the plan renders for training.maxInflight = C):

1. sized: the pool at the rule's size (C + headroom, components/config/pool-size.ts) and full; C
   threads (one official client each, made before the clock starts, as TRL's rollout threads keep
   theirs) each time `create()` (claim, controller adoption, Ready, runtime health) and the first
   `exec("true")`, all released at once. The claims are held until the pool is full again: the
   refill after a burst (C replacements). Repeated until about `samples` claims were timed.
2. drained: the pool scaled to 0 and empty, then the same bursts: every claim finds no warm
   sandbox and waits for a cold one (the controller's cold path, a pod start).
3. refill after a drain: the pool scaled back from 0 to its size; sandboxes Ready per second.

Per claim it also splits `create()` into the claim POST, the wait for the claim's Ready (the
official client's watch) and the rest (the Sandbox read for the pod IP, the runtime's health),
by timing the official client's two calls; and reads the controller's own metrics
(agent_sandbox_claim_controller_startup_latency_ms, agent_sandbox_claim_creation_total: warm vs
cold) before and after each phase. Bounded by counts and a deadline (BUDGET_SECONDS; SIGTERM stops
it through `finally`, which stops the cluster). Needs root (the pods' mount namespaces) and the
fixtures test_controller.py needs. Prints one line `BENCH_JSON {...}`.

On the real node (bench/claim-latency-node.ts, `--node FACTS`): the same phases against real pods
(containerd + kubelet) that the node fixture runs; the cluster is already up, FACTS (JSON) names its
kubeconfigs, the trainer's env, the pool, its quota and the levels, and this runs in the node's
network namespace (the pods' addresses, the API server, the controller's metrics on its loopback).
A warm sandbox there is one whose Sandbox is Ready (the kubelet's readiness probe passed) with a pod IP.

usage (repo root): python bench/claim-latency.py LEVELS SAMPLES BUDGET_SECONDS
                   python bench/claim-latency.py --node FACTS SAMPLES BUDGET_SECONDS
  e.g. python bench/claim-latency.py 1,8,32,128 20 900
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "python"), str(REPO / "python/tests")]

import test_controller as tc  # noqa: E402
from agent_rl_sandbox.agent_sandbox import AgentSandboxBackend  # noqa: E402

LEVELS_ENV = "AGENT_RL_POOL_LEVELS"
WARM_POOLS = ("extensions.agents.x-k8s.io", "v1beta1", "sandboxwarmpools")
#: Seconds between two looks at the pool (the refill figures are this precise).
POLL_S = 0.3
#: The longest any one phase may wait for the pool, whatever the deadline leaves.
PHASE_WAIT_S = 420.0
#: How long the threads of one burst wait for each other to start (all C are idle in the pool by then).
BARRIER_S = 60.0


class _TmpFactory:
    """What the cluster fixture asks of pytest's tmp_path_factory."""

    def mktemp(self, name: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=f"{name}-"))


class BenchTimeout(Exception):
    pass


_phase = threading.local()


def timed_client(settings):
    """test_controller.trainer_client, with its claim POST and its Ready wait timed into this thread's record."""
    client = tc.trainer_client(settings)
    post, wait = client._create_claim, client._wait_for_claim_ready

    def timed_post(*a, **kw):
        t = time.perf_counter()
        try:
            return post(*a, **kw)
        finally:
            _phase.post_ms = (time.perf_counter() - t) * 1000

    def timed_wait(*a, **kw):
        t = time.perf_counter()
        try:
            return wait(*a, **kw)
        finally:
            _phase.ready_ms = (time.perf_counter() - t) * 1000

    client._create_claim, client._wait_for_claim_ready = timed_post, timed_wait
    return client


# --- the controller's metrics ------------------------------------------------------------------
_SAMPLE = re.compile(r'^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$')


def scrape(url: str | None) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The controller's agent_sandbox_claim_* samples, keyed by name and labels; {} without a URL."""
    if not url:
        return {}
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m["name"].startswith("agent_sandbox_claim_"):
            labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', m["labels"])))
            out[(m["name"], labels)] = float(m["value"])
    return out


_GAUGE = re.compile(r'^agent_sandboxes\{(?P<labels>[^}]*)\} (?P<value>\S+)$')


def warm_ready_gauge(url: str | None, namespace: str) -> float | None:
    """What the pool-drain alert reads (components/observability/alerts.ts): the controller's agent_sandboxes
    gauge of its warm pool's Ready members (owned_by SandboxWarmPool, ready_condition true) in `namespace`;
    None without a URL or an answer."""
    if not url:
        return None
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return None
    total = 0.0
    for line in text.splitlines():
        m = _GAUGE.match(line)
        if m:
            lab = dict(re.findall(r'(\w+)="([^"]*)"', m["labels"]))
            if lab.get("namespace") == namespace and lab.get("owned_by") == "SandboxWarmPool" and lab.get("ready_condition") == "true":
                total += float(m["value"])
    return total


def metrics_delta(before: dict, after: dict) -> dict:
    """Per launch type: claims created (and whether their sandbox was Ready then), and the controller's
    first-observed -> Ready latency as bucket counts (le -> count) over the phase."""
    res: dict = {}
    for (name, labels), v in after.items():
        d = v - before.get((name, labels), 0.0)
        if d <= 0:
            continue
        lab = dict(labels)
        kind = lab.get("launch_type", "?")
        entry = res.setdefault(kind, {"created": {}, "controller_ms_buckets": {}})
        if name == "agent_sandbox_claim_creation_total":
            cond = lab.get("pod_condition", "?")
            entry["created"][cond] = entry["created"].get(cond, 0) + d
        elif name == "agent_sandbox_claim_controller_startup_latency_ms_bucket":
            le = lab["le"]
            entry["controller_ms_buckets"][le] = entry["controller_ms_buckets"].get(le, 0) + d
    return res


# --- the bench ---------------------------------------------------------------------------------
def first_command(handle) -> tuple[bool, str | None, dict]:
    """The first command through the runtime, `true`."""
    result = handle.exec("true", timeout=60)
    ok = result.exit_code == 0
    return ok, None if ok else f"first command exited {result.exit_code}", {}


class Bench:
    def __init__(self, c: dict, deadline: float, local_pods: bool = True) -> None:
        self.c = c
        self.deadline = deadline
        self.ns = c["sandboxesNamespace"]
        #: The simulated cluster's pods answer on this machine's loopback only once their runtime runs (a real node's have pod IPs).
        self.local_pods = local_pods
        #: Where the simulated cluster's pod network serves pods (kwok's own addresses answer nothing); the rollout-start
        #: bench adds its pod namespaces' subnet (bench/rollout_start.py).
        self.served = ("127.",)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def wait(self, what: str, predicate, limit: float = PHASE_WAIT_S):
        """Polls `predicate` until it returns something truthy; bounded by `limit` and the deadline."""
        end = time.monotonic() + min(limit, max(0.0, self.left() - 5))
        while True:
            v = predicate()
            if v:
                return v
            if time.monotonic() >= end:
                raise BenchTimeout(f"{what}: not within {limit:g}s (or the bench's deadline); pod network errors: {self.c['net'].errors[:3]}")
            time.sleep(POLL_S)

    # the cluster side (admin)
    def set_quota(self, hard: dict) -> None:
        self.c["core"].patch_namespaced_resource_quota(self.c["quota"], self.ns, {"spec": {"hard": hard}})

    def set_replicas(self, n: int, pool: str | None = None) -> None:
        """Scales `pool` (the plan's warm pool unless named) to n."""
        self.c["custom"].patch_namespaced_custom_object(*WARM_POOLS[:2], self.ns, WARM_POOLS[2], pool or self.c["warmPool"], {"spec": {"replicas": n}})

    def warm(self, pool: str | None = None) -> int:
        """Sandboxes a warm pool (`pool`, else any) still owns (not adopted by a claim), Ready at an address (on the
        simulated cluster: one this machine serves)."""
        items = self.c["custom"].list_namespaced_custom_object(*tc.SANDBOXES[:2], self.ns, tc.SANDBOXES[2])["items"]
        n = 0
        for s in items:
            meta, st = s["metadata"], s.get("status") or {}
            owners = meta.get("ownerReferences") or []
            if meta.get("deletionTimestamp") or not any(o.get("kind") == "SandboxWarmPool" and pool in (None, o.get("name")) for o in owners):
                continue
            ready = any(x["type"] == "Ready" and x["status"] == "True" for x in st.get("conditions", []))
            ips = [p if isinstance(p, str) else p.get("ip") for p in st.get("podIPs", [])]
            n += ready and bool(ips) and (not self.local_pods or all(ip.startswith(self.served) for ip in ips))
        return n

    def pods(self) -> int:
        return len(self.c["core"].list_namespaced_pod(self.ns).items)

    def wait_full(self, size: int, since: float) -> float:
        """Seconds from `since` until `size` warm sandboxes are Ready at their runtimes' addresses."""
        self.wait(f"the warm pool back to {size} Ready", lambda: self.warm() >= size)
        return time.monotonic() - since

    def refill_series(self, size: int, since: float) -> dict:
        """Like wait_full, also when the first one was Ready (the refill's start-up)."""
        first = None
        end = time.monotonic() + min(PHASE_WAIT_S, max(0.0, self.left() - 5))
        while True:
            n = self.warm()
            now = time.monotonic()
            if n > 0 and first is None:
                first = now - since
            if n >= size:
                total = now - since
                return {"sandboxes": size, "seconds": total, "first_ready_s": first, "per_s": size / total if total > 0 else None}
            if now >= end:
                raise BenchTimeout(f"refill to {size}: {n} Ready after {now - since:.0f}s; pod network errors: {self.c['net'].errors[:3]}")
            time.sleep(POLL_S)

    # the trainer side
    def warm_clients(self, ex: ThreadPoolExecutor, backend: AgentSandboxBackend, n: int) -> None:
        """Makes every one of the n threads exist and hold its own client before any clock starts."""
        barrier = threading.Barrier(n)

        def one():
            backend._client()
            barrier.wait(BARRIER_S)

        for f in [ex.submit(one) for _ in range(n)]:
            f.result()

    def burst(self, ex: ThreadPoolExecutor, backend: AgentSandboxBackend, n: int, first=None) -> tuple[list[dict], list, float]:
        """n claims released at once: each claim's figures, the handles of those created, and when they were released.
        `first(handle)` -> (ok, error, figures) is what runs once a claim is made (default: first_command)."""
        barrier = threading.Barrier(n + 1)
        first = first or first_command

        def one() -> dict:
            barrier.wait(BARRIER_S)
            _phase.post_ms = _phase.ready_ms = _phase.mint_ms = _phase.keys_ms = None
            t0 = time.perf_counter()
            try:
                handle = backend.create(timeout_s=300)
            except Exception as e:  # noqa: BLE001 - counted and reported, the bench goes on
                return {"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}", "after_ms": (time.perf_counter() - t0) * 1000, "handle": None}
            t1 = time.perf_counter()
            try:
                ok, error, figures = first(handle)
            except Exception as e:  # noqa: BLE001
                ok, error, figures = False, f"{type(e).__name__}: {str(e)[:300]}", {}
            t2 = time.perf_counter()
            post, ready, keys = _phase.post_ms, _phase.ready_ms, _phase.keys_ms
            create_ms = (t1 - t0) * 1000
            rest = create_ms - (post or 0) - (ready or 0) - (keys or 0)
            out = {"ok": ok, "error": error, "handle": handle, "create_ms": create_ms, "post_ms": post, "ready_ms": ready, "rest_ms": rest,
                   "exec_ms": (t2 - t1) * 1000, "total_ms": (t2 - t0) * 1000, **figures}
            if keys is not None:
                # Per-rollout keys (the rollout-start bench's TimedBackend): the mint at the verifier, then the PUT to the forwarder.
                out.update(mint_ms=_phase.mint_ms, delivery_ms=keys - (_phase.mint_ms or 0))
            return out

        futures = [ex.submit(one) for _ in range(n)]
        barrier.wait(BARRIER_S)
        started = time.monotonic()
        results = [f.result() for f in futures]
        handles = [r.pop("handle") for r in results]
        return results, [h for h in handles if h is not None], started

    def release(self, ex: ThreadPoolExecutor, handles: list) -> None:
        """Deletes every claim of a burst (not timed), in parallel, as the rollouts ending would."""
        for f in [ex.submit(h.kill) for h in handles]:
            try:
                f.result()
            except Exception as e:  # noqa: BLE001
                self.c["net"].errors.append(f"kill: {e}")

    def level(self, p: dict, samples: int, backend: AgentSandboxBackend, out: dict) -> None:
        """Fills `out` as it goes (what was measured before a timeout is kept)."""
        c, size = p["concurrency"], p["replicas"]
        rounds = max(1, -(-samples // c))  # ceil: about `samples` claims per case
        out.update({**p, "rounds": rounds, "sized": [], "refill_after_burst_s": [], "gauge_after_burst": [], "gauge_after_refill": [], "drained": [], "phases_done": []})
        url = self.c.get("controllerMetrics")
        self.set_quota(p["quota"])
        self.set_replicas(size)
        t = time.monotonic()
        out["fill_s"] = self.wait_full(size, t)
        with ThreadPoolExecutor(max_workers=c, thread_name_prefix=f"claims-{c}") as ex:
            self.warm_clients(ex, backend, c)
            # 1. sized by the rule
            m0 = scrape(url)
            for r in range(rounds):
                if r > 0:
                    self.wait_full(size, time.monotonic())
                results, handles, started = self.burst(ex, backend, c)
                out["sized"].extend(results)
                # The controller's own gauge of the pool right after the burst (what the pool-drain alert reads), beside the bench's count.
                out["gauge_after_burst"].append({"controller": warm_ready_gauge(url, self.ns), "bench": self.warm()})
                if self.c.get("releaseBeforeRefill"):
                    # One node cannot hold the claimed pods beside a refilled pool: the refill's pods wait for their CPU.
                    self.release(ex, handles)
                out["refill_after_burst_s"].append(self.wait_full(size, started))
                out["gauge_after_refill"].append({"controller": warm_ready_gauge(url, self.ns), "bench": self.warm()})
                if not self.c.get("releaseBeforeRefill"):
                    self.release(ex, handles)
            out["controller_sized"] = metrics_delta(m0, scrape(url))
            out["phases_done"].append("sized")
            # 2. drained: no warm sandbox at all
            self.set_replicas(0)
            self.wait("the pool drained (no sandbox pod left)", lambda: self.pods() == 0)
            m0 = scrape(url)
            for _ in range(rounds):
                results, handles, _started = self.burst(ex, backend, c)
                out["drained"].extend(results)
                self.release(ex, handles)
                self.wait("the drained burst's pods gone", lambda: self.pods() == 0)
            out["controller_drained"] = metrics_delta(m0, scrape(url))
            out["phases_done"].append("drained")
            # 3. refill from empty
            t = time.monotonic()
            self.set_replicas(size)
            out["refill_after_drain"] = self.refill_series(size, t)
            out["phases_done"].append("refill")


def run_levels(c: dict, levels: list[dict], samples: int, deadline: float, out: dict, local_pods: bool) -> None:
    """Every level in turn, as long as the deadline leaves 30 s; what was measured before a timeout is kept in `out`."""
    tc.TRAINER_KUBECONFIG = c["trainerKubeconfig"]
    backend = AgentSandboxBackend.from_env(c["trainerEnv"], client_factory=timed_client, handle_sigterm=False)
    bench = Bench(c, deadline, local_pods)
    for p in levels:
        if bench.left() < 30:
            out["not_run"].append(p["concurrency"])
            continue
        print(f"claim-latency: {p['concurrency']} at once, pool {p['replicas']} ({bench.left():.0f}s left)", file=sys.stderr, flush=True)
        level: dict = {}
        out["levels"].append(level)
        try:
            bench.level(p, samples, backend, level)
        except BenchTimeout as e:
            out["errors"].append(f"{p['concurrency']} at once: {e}")
            break
    backend.close()


def main(levels: list[int], samples: int, budget_s: float) -> int:
    deadline = time.monotonic() + budget_s
    # The bench's deadline stops this with SIGTERM: exit through `finally`, which stops the cluster.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ[LEVELS_ENV] = ",".join(str(n) for n in levels)
    t0 = time.monotonic()
    fixture = tc.cluster.__wrapped__(_TmpFactory())
    c = next(fixture)
    out: dict = {"levels": [], "cluster_up_s": time.monotonic() - t0, "pod_starters": tc.POD_STARTERS, "controller_args": c.get("controllerArgs", []), "errors": [], "not_run": []}
    try:
        run_levels(c, c["levels"], samples, deadline, out, local_pods=True)
    finally:
        out["net_errors"] = c["net"].errors[:20]
        try:
            fixture.close()
        except Exception as e:  # noqa: BLE001 - the figures still print
            out["errors"].append(f"stopping the cluster: {e}")
    print("BENCH_JSON " + json.dumps(out), flush=True)
    return 0 if out["levels"] else 1


class _Errors:
    """Where the simulated cluster's pod network collects its errors; a real node has none to report here."""

    def __init__(self) -> None:
        self.errors: list[str] = []


def main_node(facts_path: str, samples: int, budget_s: float) -> int:
    """The same levels on the real node that bench/claim-latency-node.ts brought up (it stops the node)."""
    from conftest import without_rollout_keys
    from kubernetes import client, config

    deadline = time.monotonic() + budget_s
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    c = json.loads(Path(facts_path).read_text())
    # No verifier runs beside the pool here: the sandboxes call out with the pool's key, as on the simulated cluster.
    c["trainerEnv"] = without_rollout_keys(c["trainerEnv"])
    admin = config.new_client_from_config(config_file=c["adminKubeconfig"])
    c.update(core=client.CoreV1Api(admin), custom=client.CustomObjectsApi(admin), net=_Errors())
    out: dict = {"levels": [], "cluster_up_s": c.get("clusterUpSeconds", 0), "pod_starters": 0, "controller_args": c.get("controllerArgs", []), "errors": [], "not_run": []}
    try:
        run_levels(c, c["levels"], samples, deadline, out, local_pods=False)
    finally:
        out["net_errors"] = c["net"].errors[:20]
    print("BENCH_JSON " + json.dumps(out), flush=True)
    return 0 if out["levels"] else 1


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--node":
        sys.exit(main_node(sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("usage")[1])
    sys.exit(main([int(x) for x in sys.argv[1].split(",")], int(sys.argv[2]), float(sys.argv[3])))
