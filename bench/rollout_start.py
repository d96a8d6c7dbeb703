"""A rollout's start under load (bench/rollout-start.ts runs it; issue 58 point 4): claim to the agent's first model
call with per-rollout keys, beside the same load on a bare agent-sandbox pool, in one run on the simulated cluster of
python/tests/test_controller.py (the REAL agent-sandbox v1.0.1 controller; kwok plays the kubelets and starts no
container, the pod network below starts each pod's processes on this machine).

Two warm pools of the same size side by side (the size the plan renders for training.maxInflight = each level):

- full: the plan's SandboxTemplate. Each pod is a network namespace of its own holding the runtime AND the key-holding
  forwarder, both with the template's command, uid and read-only root (pod_netns.ForwardedPodNetwork). The forwarder
  gets no key at start: the trainer's backend (AgentSandboxBackend with the plan's env, rollout keys on) claims, mints
  the rollout's key at the verifier (rollout_keys.py with the plan's command, python/tests/rollout_path_up.ts renders
  it) and PUTs it to the pod's forwarder. The first model call is then made as the agent makes it: a command in the
  sandbox (`curl`, through the runtime) calls the forwarder on the pod's loopback (SANDBOX_UPSTREAM_URL,
  127.0.0.1:7100), which calls the real nginx ingress (the plan's settings, the verifier asked on every request) in
  front of stub_model.StubModel, the STAND-IN for vLLM. Timed until that call's answer is back.
- bare: the same template without the forwarder (its init container) and with no keys: what an agent-sandbox pool alone
  gives, the project's runtime as its container. Timed until the first command (`true`) has run.

Each container's processes run in a cgroup (v1 cpu controller) whose CPU quota is the container's rendered limit
(`resources.limits.cpu`), when this machine lets us make one. kwok's nodes are sized for the recipe's rendered CPU and
memory (python/tests/cluster_up.ts benchNodes).

Per level C: both pools filled; then, `runs` times, a sized run: about `per_run` claims of the bare pool in bursts of C
released at once (each burst starts with both pools full and nothing terminating), the claims released, then the same
for the full pool (the order alternates between runs); then both pools scaled to 0 and the same runs drained (every
claim takes the controller's cold path: a pod start). Per claim: the claim POST, the wait for the claim's Ready, the
pod IP and runtime health, the mint, the delivery, and the first command or model call (with the call's own time inside
the pod, curl's time_total). Prints one line `BENCH_JSON {...}`. Bounded by counts and a deadline (BUDGET_SECONDS;
SIGTERM stops it through `finally`, which stops everything it started).

usage (repo root, root): python bench/rollout_start.py LEVELS RUNS PER_RUN BUDGET_SECONDS
  e.g. python bench/rollout_start.py 1,8,32 3 8 1800
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib.util
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "python"), str(REPO / "python/tests")]

_spec = importlib.util.spec_from_file_location("claim_latency", REPO / "bench" / "claim-latency.py")
cl = importlib.util.module_from_spec(_spec)
sys.modules["claim_latency"] = cl
_spec.loader.exec_module(cl)  # the claim-latency bench's cluster, phases and per-claim record

import conftest  # noqa: E402
import pod_netns  # noqa: E402
import sandbox_root  # noqa: E402
import test_controller as tc  # noqa: E402
import test_rollout_keys as trk  # noqa: E402
from agent_rl_sandbox.agent_sandbox import AgentSandboxBackend  # noqa: E402
from stub_model import StubModel  # noqa: E402
from waits import wait_for  # noqa: E402

TEMPLATES = ("extensions.agents.x-k8s.io", "v1beta1", "sandboxtemplates")
#: The bare pool's names: the plan's with this suffix.
BARE_SUFFIX = "-bare"
#: How long a pod namespace's tag is not handed out again after it was (its namespace may not exist yet).
TAG_QUARANTINE_S = 30.0


# --- the pods ----------------------------------------------------------------------------------------------------------
class FreeTags:
    """pod_netns.ForwardedPodNetwork names each pod's namespace by the next of 249 tags and never takes one back; this
    bench starts more pods than that. Hands out a tag whose namespace is gone and that was not handed out lately."""

    def __init__(self) -> None:
        self.handed: dict[int, float] = {}

    def __iter__(self) -> "FreeTags":
        return self

    def __next__(self) -> int:
        now = time.monotonic()
        live = {int(n.rsplit("-", 1)[1]) - pod_netns.TAG_BASE for n in pod_netns.namespaces()}
        # The subnet (10.214.<tag>.0/30) of a pod of another process on this machine (its namespaces are not ours to
        # list): a second route to the same addresses would send our pod's traffic to theirs.
        addrs = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=30).stdout
        live |= {int(m) for m in re.findall(rf"inet {re.escape(pod_netns.SUBNET)}\.(\d+)\.1/", addrs)}
        # From the top: the other users of pod_netns on this machine count up from 1.
        for tag in range(249, 0, -1):
            if tag not in live and now - self.handed.get(tag, -TAG_QUARANTINE_S) >= TAG_QUARANTINE_S:
                self.handed[tag] = now
                return tag
        raise StopIteration("every pod namespace tag is in use")


class BenchPodNetwork(pod_netns.ForwardedPodNetwork):
    """The full pool's pods as ForwardedPodNetwork starts them (runtime + forwarder in a namespace of their own); the
    bare pool's (no forwarder in their spec) as test_controller.PodNetwork does (the runtime alone, at a loopback IP)."""

    @property
    def _tags(self) -> FreeTags:
        return self._free_tags

    @_tags.setter
    def _tags(self, _ignored: Any) -> None:
        self._free_tags = FreeTags()

    def _start(self, name: str, pod) -> None:
        if os.environ.get("AGENT_RL_BENCH_DEBUG"):
            print(f"pod start {name}", file=sys.stderr, flush=True)
        if not pod.spec.init_containers:
            # PodNetwork's own start (tc.PodNetwork is this class's factory while the cluster runs).
            return super(pod_netns.ForwardedPodNetwork, self)._start(name, pod)
        return super()._start(name, pod)


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def forwarder_started(host: str, port: int, _key: Any) -> None:
    """In place of pod_netns's stand-in key delivery at pod start (the backend delivers the real one at claim): waits
    until the forwarder's key port accepts, standing in for its startupProbe (a native sidecar is started before the
    pod's container runs)."""
    wait_for(f"the forwarder's key port {host}:{port}", lambda: _accepts(host, port), timeout=30, interval=0.05)


def millicores(q: str | None) -> int | None:
    """A CPU quantity ("2", "500m", "0.5") in millicores; None for none."""
    if not q:
        return None
    return int(q[:-1]) if q.endswith("m") else round(float(q) * 1000)


class CpuLimits:
    """Each container's processes in a cgroup of the v1 cpu controller whose quota is the container's CPU limit."""

    ROOT = Path("/sys/fs/cgroup/cpu")
    PERIOD_US = 100_000

    def __init__(self) -> None:
        self.base = self.ROOT / f"agentrl-bench-{os.getpid()}"
        self.count = itertools.count()
        self.made: list[Path] = []
        self.why_not: str | None = None
        try:
            self.base.mkdir()
        except OSError as e:
            self.why_not = f"cannot make a cgroup under {self.ROOT} ({e.strerror})"

    def wrap(self, argv: list[str], limit_m: int | None) -> list[str]:
        if self.why_not is not None or limit_m is None:
            return argv
        d = self.base / f"c{next(self.count)}"
        d.mkdir()
        self.made.append(d)
        (d / "cpu.cfs_period_us").write_text(str(self.PERIOD_US))
        (d / "cpu.cfs_quota_us").write_text(str(limit_m * self.PERIOD_US // 1000))
        # Through this process's root: `ip netns exec` mounts a sysfs of its own over /sys, hiding the cgroup mounts.
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', f"/proc/{os.getpid()}/root{d}", *argv]

    def close(self) -> None:
        for d in [*self.made, self.base]:
            with contextlib.suppress(OSError):
                d.rmdir()


@contextlib.contextmanager
def limited_pods(limits: CpuLimits):
    """sandbox_root.rendered also reads the container's CPU limit, and sandbox_root.command runs under it."""
    rendered, command = sandbox_root.rendered, sandbox_root.command

    def rendered_with_cpu(pod_spec, container):
        out = rendered(pod_spec, container)
        c = container
        if not isinstance(c, dict):
            from kubernetes.client import ApiClient

            c = ApiClient().sanitize_for_serialization(c)
        return {**out, "cpu_limit_m": millicores(((c.get("resources") or {}).get("limits") or {}).get("cpu"))}

    def command_under_limit(image_root, argv, *, cpu_limit_m: int | None = None, **kw):
        return limits.wrap(command(image_root, argv, **kw), cpu_limit_m)

    sandbox_root.rendered, sandbox_root.command = rendered_with_cpu, command_under_limit
    try:
        yield
    finally:
        sandbox_root.rendered, sandbox_root.command = rendered, command


# --- the trainer's side ------------------------------------------------------------------------------------------------
class TimedBackend(AgentSandboxBackend):
    """The backend, with its mint and its whole key hand-over (mint + PUT) timed into the claiming thread's record."""

    def _rollout_keys(self):
        keys = super()._rollout_keys()
        mint = keys.mint

        def timed_mint(*a, **kw):
            t = time.perf_counter()
            try:
                return mint(*a, **kw)
            finally:
                cl._phase.mint_ms = (time.perf_counter() - t) * 1000

        keys.mint = timed_mint
        return keys

    def _deliver_rollout_key(self, claim: str, host: str, lifetime: int) -> None:
        t = time.perf_counter()
        try:
            super()._deliver_rollout_key(claim, host, lifetime)
        finally:
            cl._phase.keys_ms = (time.perf_counter() - t) * 1000


def model_call(upstream_url: str, model: str) -> Callable[[Any], tuple[bool, str | None, dict]]:
    """The agent's first model call: a command in the sandbox calls the pod's forwarder, as opencode calls its base URL."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Write solution.py that adds two numbers."}]})
    cmd = (f"curl -sS -o /dev/null -w '%{{http_code}} %{{time_total}}' --max-time 60 -H 'Content-Type: application/json' "
           f"--data {shlex.quote(body)} {shlex.quote(upstream_url.rstrip('/') + '/v1/chat/completions')}")

    def first(handle) -> tuple[bool, str | None, dict]:
        r = handle.exec(cmd, timeout=90)
        parts = r.stdout.split()
        if r.exit_code != 0 or len(parts) != 2 or parts[0] != "200":
            return False, f"first model call: exit {r.exit_code}, {r.stdout.strip()[:80]!r} {r.stderr.strip()[:200]!r}", {}
        return True, None, {"call_ms": float(parts[1]) * 1000}

    return first


@dataclass
class Case:
    pool: str
    backend: AgentSandboxBackend
    first: Callable[[Any], tuple[bool, str | None, dict]]


# --- the bench ---------------------------------------------------------------------------------------------------------
def add_bare_pool(c: dict) -> str:
    """A second warm pool beside the plan's: its template without the forwarder, at 0 replicas. Returns its name."""
    custom, ns = c["custom"], c["sandboxesNamespace"]
    pool = custom.get_namespaced_custom_object(*cl.WARM_POOLS[:2], ns, cl.WARM_POOLS[2], c["warmPool"])
    template = pool["spec"]["sandboxTemplateRef"]["name"]
    spec = copy.deepcopy(custom.get_namespaced_custom_object(*TEMPLATES[:2], ns, TEMPLATES[2], template)["spec"])
    if not spec["podTemplate"]["spec"].pop("initContainers", None):
        raise RuntimeError(f"the plan's template {template} has no forwarder (initContainers): nothing to compare")
    api = f"{TEMPLATES[0]}/{TEMPLATES[1]}"
    custom.create_namespaced_custom_object(*TEMPLATES[:2], ns, TEMPLATES[2],
                                           {"apiVersion": api, "kind": "SandboxTemplate", "metadata": {"name": template + BARE_SUFFIX}, "spec": spec})
    bare = c["warmPool"] + BARE_SUFFIX
    pool_spec = {**copy.deepcopy(pool["spec"]), "sandboxTemplateRef": {"name": template + BARE_SUFFIX}, "replicas": 0}
    custom.create_namespaced_custom_object(*cl.WARM_POOLS[:2], ns, cl.WARM_POOLS[2],
                                           {"apiVersion": f"{cl.WARM_POOLS[0]}/{cl.WARM_POOLS[1]}", "kind": "SandboxWarmPool", "metadata": {"name": bare}, "spec": pool_spec})
    return bare


class PairedBench(cl.Bench):
    def settled(self, size: int, cases: dict[str, Case]) -> float:
        """Waits until every pool has `size` warm sandboxes Ready and no other pod is left (none starting or ending)."""
        t = time.monotonic()
        self.wait(f"every pool at {size} Ready, nothing else", lambda: all(self.warm(k.pool) >= size for k in cases.values()) and self.pods() <= size * len(cases))
        return time.monotonic() - t

    def level(self, p: dict, runs: int, per_run: int, cases: dict[str, Case], out: dict) -> None:
        """Fills `out` as it goes (what was measured before a timeout is kept)."""
        c, size = p["concurrency"], p["replicas"]
        bursts = max(1, -(-per_run // c))
        out.update({k: p[k] for k in ("concurrency", "poolSize", "replicas", "burst", "headroom")})
        out.update(bursts_per_run=bursts, runs=[], phases_done=[])
        self.set_quota(p["quotaTwoPools"])
        for k in cases.values():
            self.set_replicas(size, k.pool)
        out["fill_s"] = self.settled(size, cases)
        with ThreadPoolExecutor(max_workers=c, thread_name_prefix=f"claims-{c}") as ex:
            for k in cases.values():
                self.warm_clients(ex, k.backend, c)
            for phase in ("sized", "drained"):
                if phase == "drained":
                    for k in cases.values():
                        self.set_replicas(0, k.pool)
                    self.wait("the pools drained (no sandbox pod left)", lambda: self.pods() == 0)
                for r in range(runs):
                    order = list(cases) if r % 2 == 0 else list(reversed(cases))
                    run: dict = {"phase": phase, "order": order, **{name: [] for name in cases}}
                    out["runs"].append(run)
                    for name in order:
                        for _ in range(bursts):
                            if phase == "sized":
                                self.settled(size, cases)
                            results, handles, _started = self.burst(ex, cases[name].backend, c, cases[name].first)
                            run[name].extend(results)
                            self.release(ex, handles)
                            if phase == "drained":
                                self.wait("the drained burst's pods gone", lambda: self.pods() == 0)
                out["phases_done"].append(phase)


def run_levels(c: dict, rendered_env: dict, admin_url: str, levels: list[dict], runs: int, per_run: int, deadline: float, out: dict) -> None:
    tc.TRAINER_KUBECONFIG = c["trainerKubeconfig"]
    if "SANDBOX_ROLLOUT_KEYS_URL" not in rendered_env:
        raise RuntimeError("the plan's trainer env has no SANDBOX_ROLLOUT_KEYS_URL: it renders no per-rollout keys")
    bare_pool = add_bare_pool(c)
    # The plan's trainer env with only what loopback changes: the verifier's admin address, the admin key as its Secret gives it.
    full_env = {**rendered_env, "SANDBOX_ROLLOUT_KEYS_URL": admin_url, "SANDBOX_ROLLOUT_ADMIN_KEY": trk.ADMIN_KEY}
    bare_env = {**conftest.without_rollout_keys(rendered_env), "SANDBOX_WARM_POOL": bare_pool, "SANDBOX_TRACE_PORT": "0"}
    full = TimedBackend.from_env(full_env, client_factory=cl.timed_client, handle_sigterm=False)
    bare = AgentSandboxBackend.from_env(bare_env, client_factory=cl.timed_client, handle_sigterm=False)
    cases = {"bare": Case(bare_pool, bare, cl.first_command), "full": Case(c["warmPool"], full, model_call(full_env["SANDBOX_UPSTREAM_URL"], out["model"]))}
    bench = PairedBench(c, deadline, local_pods=True)
    bench.served = ("127.", f"{pod_netns.SUBNET}.")
    try:
        for p in levels:
            if bench.left() < 60:
                out["not_run"].append(p["concurrency"])
                continue
            print(f"rollout-start: {p['concurrency']} at once, pools of {p['replicas']} ({bench.left():.0f}s left)", file=sys.stderr, flush=True)
            level: dict = {}
            out["levels"].append(level)
            try:
                bench.level(p, runs, per_run, cases, level)
            except cl.BenchTimeout as e:
                out["errors"].append(f"{p['concurrency']} at once: {e}")
                break
    finally:
        full.close()
        bare.close()


def main(levels: list[int], runs: int, per_run: int, budget_s: float) -> int:
    import faulthandler

    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: every thread's stack on stderr
    deadline = time.monotonic() + budget_s
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ[cl.LEVELS_ENV] = ",".join(str(n) for n in levels)
    tmp = Path(tempfile.mkdtemp(prefix="rollout-start-"))
    limits = CpuLimits()
    out: dict = {"levels": [], "runs": runs, "per_run": per_run, "pod_starters": tc.POD_STARTERS, "errors": [], "not_run": [],
                 "cpu_limits": limits.why_not or "each container's processes under its rendered CPU limit (cgroup v1 cpu quota)"}
    rendered_env: dict = {}

    def keep_rendered(env: dict) -> dict:
        rendered_env.update(env)
        return conftest.without_rollout_keys(env)

    t0 = time.monotonic()
    try:
        with contextlib.ExitStack() as stack:
            model = StubModel()
            stack.callback(model.stop)
            out["model"] = model.model
            # The verifier (the plan's command) and nginx (the plan's ingress settings, its defaults) in front of the stub model.
            r = stack.enter_context(trk.rendered_path_up(tmp, model.url, None, None))
            ingress_port = urlsplit(r["facts"]["url"]).port
            # rendered_path_up gives the verifier a stderr pipe nobody reads: drained here into a file, or its log (a line
            # per mint and revocation) fills the pipe and the verifier blocks on it (the first run's mints timed out at 32).
            verifier = r["procs"][0]
            log = open(tmp / "verifier.log", "wb")  # noqa: SIM115 - closed with the stack
            stack.callback(log.close)
            threading.Thread(target=shutil.copyfileobj, args=(verifier.stderr, log), name="verifier-log", daemon=True).start()
            stack.enter_context(limited_pods(limits))
            mp = stack.enter_context(contextlib.ExitStack())
            for obj, name, value in [
                (tc, "PodNetwork", functools.partial(BenchPodNetwork, ingress_port=ingress_port, key=None)),
                (tc, "without_rollout_keys", keep_rendered),
                (pod_netns, "deliver_rollout_key", forwarder_started),
            ]:
                old = getattr(obj, name)
                setattr(obj, name, value)
                mp.callback(setattr, obj, name, old)
            fixture = tc.cluster.__wrapped__(cl._TmpFactory())
            c = next(fixture)

            def stop_cluster() -> None:
                out["net_errors"] = c["net"].errors[:20]
                try:
                    fixture.close()
                except Exception as e:  # noqa: BLE001 - the figures still print
                    out["errors"].append(f"stopping the cluster: {e}")

            stack.callback(stop_cluster)
            out.update(cluster_up_s=time.monotonic() - t0, controller_args=c.get("controllerArgs", []), cpu_nodes=c.get("cpuNodes"))
            run_levels(c, rendered_env, f"http://127.0.0.1:{r['admin']}", c["levels"], runs, per_run, deadline, out)
    except Exception as e:  # noqa: BLE001 - reported with what was measured
        out["errors"].append(f"{type(e).__name__}: {str(e)[:2000]}")
    finally:
        limits.close()
        out["seconds"] = time.monotonic() - t0
        print("BENCH_JSON " + json.dumps(out), flush=True)
    return 0 if out["levels"] else 1


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__.split("usage")[1])
    sys.exit(main([int(x) for x in sys.argv[1].split(",")], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])))
