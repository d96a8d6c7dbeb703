"""The backend against the REAL agent-sandbox v1.0.1 controller, authenticated as the trainer's
ServiceAccount, on a simulated cluster with the project's rendered sandbox objects applied
(python/tests/cluster_up.ts: API server, controller-manager, scheduler, kwok as the kubelets).

kwok makes pods Running and Ready but runs nothing and gives them IPs nobody listens on. This
test plays the rest of the kubelet (the "small test step that sets pod status"): for each pod
the controller creates, it starts the runtime with the pod's own command and env on the image
layout (a private mount namespace, as the container would run) at a loopback address, and
writes that address into the pod's status, from where the controller copies it to the Sandbox.

The whole black-box session runs twice: through `capture_session.CaptureSessionDriver` with
OpenEnv's capture proxy from PyPI (everywhere, CI included), and through OpenEnv's real
OpenCodeSessionFactory and interception.py (marked `openenv_source`: needs OPENENV_SRC).

Skipped when the fixtures are not built (test/engine/build.sh, test/sandbox-controller/build.sh),
unless AGENT_RL_BUILD_FIXTURES=1 (builds them; large) or AGENT_RL_REQUIRE_E2E=1 (fails instead).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import pytest

from agent_rl_sandbox import AgentSandboxSettings, SandboxGone, shutdown
from agent_rl_sandbox.agent_sandbox import AgentSandboxBackend

import sandbox_root
from waits import scaled, wait_for  # noqa: F401 - test_rollout_worker.py imports wait_for from here
from conftest import REPO, processes, stop_process, wait_http, without_rollout_keys
from test_opencode_e2e import (
    KEY,
    StubModel,
    _require,
    build_image,
    check_captured_turn,
    driver_for,
    factory_for,
    opencode_env,
    require_proxy_port,
    sandbox_path,
    start_ingress,
    stop_group,
)

#: The engine tests' lock: another run's TypeScript engine file may hold it (minutes each).
LOCK_WAIT_SECONDS = 3600

CLAIMS = ("extensions.agents.x-k8s.io", "v1beta1", "sandboxclaims")
SANDBOXES = ("agents.x-k8s.io", "v1beta1", "sandboxes")


#: Pods whose container the pod network starts at once (a kubelet starts its pods' containers in
#: parallel; more than a few here only queue on this machine's cores).
POD_STARTERS = 6


class PodNetwork:
    """The part of the kubelet kwok does not play: each sandbox pod's container (the runtime, with
    the pod's command and env, on the image layout) at a loopback IP written into the pod's status,
    and the pod's Ready condition once that runtime answers, as its readiness probe would (kwok
    leaves the sandboxes namespace's pods Running and not Ready: cluster_up.ts). Up to
    POD_STARTERS containers start at once."""

    def __init__(self, core, namespace: str, image_root: Path, logs: Path, starters: int = POD_STARTERS) -> None:
        self.core = core
        self.namespace = namespace
        self.image_root = image_root
        self.logs = logs
        self.runtimes: dict[str, tuple[str, subprocess.Popen]] = {}
        #: Every container ever started: stop() ends whichever still runs (a stop queued for a deleted
        #: pod may not have run yet).
        self.started: list[subprocess.Popen] = []
        #: Each container's PID namespace (`ns/pid` link): left_running() finds what outlived stop().
        self.namespaces: set[str] = set()
        self.errors: list[str] = []
        self._next = 2
        self._lock = threading.Lock()
        self._starting: set[str] = set()
        self._failed: set[str] = set()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=starters, thread_name_prefix="pod-start")
        self._thread = threading.Thread(target=self._loop, name="pod-network", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.3):
            try:
                self._sync()
            except Exception as e:  # noqa: BLE001 - reported by the tests
                self.errors.append(f"{type(e).__name__}: {e}")

    def _sync(self) -> None:
        pods = {p.metadata.name: p for p in self.core.list_namespaced_pod(self.namespace).items}
        with self._lock:
            gone = [(name, proc) for name, (_ip, proc) in self.runtimes.items() if name not in pods]
            for name, _proc in gone:  # the pod is gone: so is its container
                del self.runtimes[name]
        for _name, proc in gone:
            self._pool.submit(stop_container, proc)
        for name, pod in pods.items():
            if pod.metadata.deletion_timestamp or not pod.status.pod_ip:
                continue
            with self._lock:
                if name in self._starting or name in self._failed:
                    continue
                known = self.runtimes.get(name)
                if known is None:
                    self._starting.add(name)
            if known is None:
                self._pool.submit(self._start, name, pod)
            elif not self._ready_at(pod, known[0]):
                self._publish(name, known[0])

    def _start(self, name: str, pod) -> None:
        """Starts one pod's container, then publishes its address and readiness."""
        proc = None
        try:
            (c,) = pod.spec.containers
            with self._lock:
                ip = f"127.0.{self._next // 250}.{self._next % 250 + 2}"
                self._next += 1
            env = {e.name: e.value for e in c.env or [] if e.value is not None}
            env.update(PATH=sandbox_path(), POD_NAME=name)
            argv = [*c.command, "--host", ip]
            with open(self.logs / f"{name}.log", "wb") as log:
                proc = subprocess.Popen(sandbox_root.command(self.image_root, argv, own_pids=True, **sandbox_root.rendered(pod.spec, c)), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            with self._lock:
                self.started.append(proc)
                self.runtimes[name] = (ip, proc)
            self.namespaces.add(wait_for(f"pod {name}'s PID namespace", lambda: pid_namespace_of_child(proc), timeout=15, interval=0.05))
            wait_http(f"http://{ip}:{c.ports[0].container_port}/healthz", proc=proc)
            self._publish(name, ip)
        except Exception as e:  # noqa: BLE001 - reported by the tests; not retried
            with self._lock:
                # The pod was deleted while its container started (_sync stopped it): not an error.
                deleted = proc is not None and self.runtimes.get(name, ("", None))[1] is not proc
                if not deleted:
                    self.runtimes.pop(name, None)
                    self._failed.add(name)
            if proc is not None and not deleted:
                stop_container(proc)
            if not deleted and not self._stop.is_set():
                self.errors.append(f"pod {name}: {type(e).__name__}: {e}")
        finally:
            with self._lock:
                self._starting.discard(name)

    @staticmethod
    def _ready_at(pod, ip: str) -> bool:
        ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
        return pod.status.pod_ip == ip and ready

    def _publish(self, name: str, ip: str) -> None:
        """The pod's address and its Ready condition (what the kubelet writes once the readiness probe passes)."""
        from kubernetes.client import ApiException

        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions = [{"type": t, "status": "True", "lastTransitionTime": now} for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]
        # A JSON merge patch: a strategic one would merge podIPs by ip and keep kwok's address too.
        body = {"status": {"podIP": ip, "podIPs": [{"ip": ip}], "conditions": conditions}}
        try:
            self.core.patch_namespaced_pod_status(name, self.namespace, body, _content_type="application/merge-patch+json")
        except ApiException as e:
            if e.status != 404:  # deleted meanwhile: nothing to publish
                raise

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            procs = list(self.started)
        for proc in procs:
            stop_container(proc)

    def left_running(self) -> list[str]:
        """Command lines of processes still running in a container's PID namespace (a stopped
        container's namespace holds none: every process in it is killed with its pid 1)."""
        left = []
        for pid, _ppid, state, cmdline in processes():
            try:
                ns = os.readlink(f"/proc/{pid}/ns/pid")
            except OSError:
                continue
            if ns in self.namespaces and state != "Z":
                left.append(f"{pid}: " + cmdline.replace(b"\0", b" ").decode(errors="replace"))
        return left


def container_init(proc: subprocess.Popen) -> int | None:
    """The pid of unshare's forked child (the container's pid 1), once it exists."""
    try:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def pid_namespace_of_child(proc: subprocess.Popen) -> str | None:
    """The PID namespace of the container's pid 1, once it exists. A child still in this process's own
    namespace is not it (a wrapper's setup step, such as test_harbor_trial.py's mounts before it execs
    unshare): keep waiting, or the host's namespace would count as the container's."""
    pid = container_init(proc)
    try:
        ns = os.readlink(f"/proc/{pid}/ns/pid") if pid is not None else None
    except OSError:
        return None
    return None if ns == os.readlink("/proc/self/ns/pid") else ns


def stop_container(proc: subprocess.Popen) -> None:
    """What a kubelet does to a container: SIGTERM to its pid 1 (unshare does not pass signals on; the
    runtime handles SIGTERM, which a namespace's pid 1 only gets when it has a handler), then SIGKILL
    past the grace period. When pid 1 ends, the kernel kills every other process in the namespace."""
    if proc.poll() is None and (pid := container_init(proc)) is not None:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        proc.wait(scaled(10))
    except subprocess.TimeoutExpired:
        proc.kill()  # --kill-child: SIGKILL to pid 1, forced even from outside the namespace
        proc.wait(5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if (why := sandbox_root.available()) is not None:
        _require(f"sandbox root: {why}")
    tmp = tmp_path_factory.mktemp("controller")
    log_path = tmp / "cluster_up.log"
    proc = subprocess.Popen(
        ["node", "--import", "tsx", "python/tests/cluster_up.ts"], cwd=REPO,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log_path, "wb"), text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    # The plan prints its own notes on stdout first: wait for the READY (or SKIP) line. First the
    # engine tests' lock (LOCKED; another run's engine test file may hold it for minutes), at most
    # LOCK_WAIT_SECONDS; then the cluster, at most 600 s; both scaled (test/helpers/waits.ts's rule).
    lock_wait, cluster_wait = scaled(LOCK_WAIT_SECONDS), scaled(600)
    deadline = time.monotonic() + lock_wait
    line = ""
    locked = False
    while not line.startswith(("READY ", "SKIP")):
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            stop_process(proc)
            what = f"cluster did not come up in {cluster_wait:g}s" if locked else f"the engine tests' lock not free within {lock_wait:g}s"
            pytest.fail(f"{what}:\n{log_path.read_text()[-4000:]}")
        if line.strip() == "LOCKED" and not locked:
            locked = True
            deadline = time.monotonic() + cluster_wait
        if proc.poll() is not None and lines.empty() and not line.startswith(("READY ", "SKIP")):
            pytest.fail(f"cluster_up exited with {proc.returncode}:\n{log_path.read_text()[-4000:]}")
    if line.startswith("SKIP"):
        proc.wait(30)
        _require(line.strip())
    facts = json.loads(line[len("READY "):])
    # The pod network here starts each pod's runtime only: no forwarder takes a rollout key (conftest.without_rollout_keys).
    facts["trainerEnv"] = without_rollout_keys(facts["trainerEnv"])

    from kubernetes import client, config

    admin = config.new_client_from_config(config_file=facts["adminKubeconfig"])
    core, custom = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
    image_root = build_image(tmp)
    (tmp / "pods").mkdir()
    net = PodNetwork(core, facts["sandboxesNamespace"], image_root, tmp / "pods")
    facts.update(core=core, custom=custom, net=net, tmp=tmp)
    try:
        yield facts
    finally:
        net.stop()
        # A pod's container leaves nothing behind: not its runtime, not what its execs started in the
        # background (OpenEnv's capture server, a `cmd &`), as a kubelet stopping the container ensures.
        try:
            wait_for("the pod network's containers to end", lambda: not net.left_running(), timeout=30)
            left = []
        except TimeoutError:
            left = net.left_running()
        proc.stdin.close()
        try:
            proc.wait(180)
        except subprocess.TimeoutExpired:
            stop_process(proc)
        assert left == [], f"processes outlived their pod's container: {left}"


#: The trainer ServiceAccount's kubeconfig (set by the cluster fixture). In a pod the official client
#: loads the mounted token; here it gets this file (kubernetes' KUBECONFIG default is read at import).
TRAINER_KUBECONFIG = ""


def trainer_client(settings: AgentSandboxSettings):
    """The official client as default_client makes it, authenticated as the trainer's ServiceAccount."""
    from k8s_agent_sandbox import SandboxClient
    from k8s_agent_sandbox.models import SandboxInClusterConnectionConfig
    from kubernetes import config

    api = config.new_client_from_config(config_file=TRAINER_KUBECONFIG)
    return SandboxClient(connection_config=SandboxInClusterConnectionConfig(server_port=settings.port), api_client=api)


@pytest.fixture
def trainer(cluster):
    """The trainer's view: its ServiceAccount's token, the plan's env untouched."""
    global TRAINER_KUBECONFIG
    TRAINER_KUBECONFIG = cluster["trainerKubeconfig"]
    backend = AgentSandboxBackend.from_env(cluster["trainerEnv"], client_factory=trainer_client, handle_sigterm=False)
    yield backend
    backend.close()
    assert shutdown.live() == []


def ready_warm_sandboxes(c) -> list[str]:
    """Warm (unclaimed) Sandboxes that are Ready at an address this machine serves."""
    items = c["custom"].list_namespaced_custom_object(*SANDBOXES[:2], c["sandboxesNamespace"], SANDBOXES[2])["items"]
    claimed = {cl["status"].get("sandbox", {}).get("name") for cl in claims(c) if cl.get("status")}
    out = []
    for s in items:
        st = s.get("status") or {}
        ready = any(x["type"] == "Ready" and x["status"] == "True" for x in st.get("conditions", []))
        ips = [p if isinstance(p, str) else p.get("ip") for p in st.get("podIPs", [])]
        if ready and ips and all(ip.startswith("127.") for ip in ips) and s["metadata"]["name"] not in claimed and not s["metadata"].get("deletionTimestamp"):
            out.append(s["metadata"]["name"])
    return out


def claims(c) -> list[dict]:
    return c["custom"].list_namespaced_custom_object(*CLAIMS[:2], c["sandboxesNamespace"], CLAIMS[2])["items"]


def warm_pool_full(c) -> list[str] | None:
    names = ready_warm_sandboxes(c)
    return names if len(names) >= c["poolSize"] else None


def test_the_trainer_claims_a_warm_sandbox_runs_in_it_and_deletes_the_claim(cluster, trainer):
    c = cluster
    before = wait_for("the warm pool Ready at loopback IPs", lambda: warm_pool_full(c), timeout=120)
    assert c["net"].errors == []
    s = AgentSandboxSettings.from_env(c["trainerEnv"])
    assert s.port == 8888 and s.warm_pool == c["warmPool"]

    h = trainer.create(timeout_s=300, metadata={"episode_id": "e1"})
    (claim,) = claims(c)
    assert claim["metadata"]["name"] == h.sandbox_id
    assert claim["metadata"]["labels"][c["runLabel"]] == c["runId"]
    assert claim["metadata"]["labels"]["agentrl.dev/episode_id"] == "e1"
    created = datetime.fromisoformat(claim["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    shutdown_at = datetime.fromisoformat(claim["spec"]["lifecycle"]["shutdownTime"].replace("Z", "+00:00"))
    assert 280 <= (shutdown_at - created).total_seconds() <= 300
    assert claim["spec"]["lifecycle"]["shutdownPolicy"] == "Delete"
    sandbox = claim["status"]["sandbox"]["name"]
    assert sandbox in before, "a warm sandbox was adopted, none was cold-started"

    # The handle reaches the runtime of exactly the claimed sandbox's pod (its IP in the Sandbox's status).
    status = c["custom"].get_namespaced_custom_object(*SANDBOXES[:2], c["sandboxesNamespace"], SANDBOXES[2], sandbox)["status"]
    ip = status["podIPs"][0] if isinstance(status["podIPs"][0], str) else status["podIPs"][0]["ip"]
    assert h.base_url == f"http://{ip}:8888"
    pod_name, home = h.exec('echo "$POD_NAME $HOME"').stdout.split()
    # The template's HOME is TRL's SANDBOX_HOME, /root (/home/user links to it in the image).
    assert c["net"].runtimes[pod_name][0] == ip and home == "/root"
    h.write_text("/root/task/x.txt", "round trip")
    assert h.read_text("/root/task/x.txt") == "round trip"

    h.kill()
    with pytest.raises(SandboxGone):
        h.exec("true")
    wait_for("the claim deleted", lambda: not claims(c) or None, timeout=30)
    wait_for("the claimed pod deleted", lambda: pod_name not in {p.metadata.name for p in c["core"].list_namespaced_pod(c["sandboxesNamespace"]).items} or None, timeout=60)
    refilled = wait_for("the warm pool refilled", lambda: warm_pool_full(c), timeout=120)
    assert sandbox not in refilled
    assert c["net"].errors == []


WARM_POOLS = ("extensions.agents.x-k8s.io", "v1beta1", "sandboxwarmpools")


def test_a_claim_on_a_drained_pool_waits_for_a_cold_sandbox_instead_of_failing(cluster, trainer):
    """A drained pool is slower, never a failure: with no warm sandbox left (the pool scaled to 0 and
    empty), the claim takes the controller's cold path (a new Sandbox and pod) and create() waits for
    it within the backend's claim wait (ready_timeout_seconds) instead of failing."""
    c = cluster
    ns = c["sandboxesNamespace"]
    pods = lambda: {p.metadata.name for p in c["core"].list_namespaced_pod(ns).items}  # noqa: E731
    warm_before = set(wait_for("the warm pool Ready at loopback IPs", lambda: warm_pool_full(c), timeout=120))
    c["custom"].patch_namespaced_custom_object(*WARM_POOLS[:2], ns, WARM_POOLS[2], c["warmPool"], {"spec": {"replicas": 0}})
    try:
        wait_for("the pool drained (no sandbox pod left)", lambda: not pods() or None, timeout=120)
        assert ready_warm_sandboxes(c) == []
        started = time.monotonic()
        h = trainer.create(timeout_s=300, metadata={"episode_id": "cold"})
        try:
            assert time.monotonic() - started < AgentSandboxSettings.from_env(c["trainerEnv"]).ready_timeout_seconds
            (claim,) = claims(c)
            sandbox = claim["status"]["sandbox"]["name"]
            assert sandbox not in warm_before
            sb = c["custom"].get_namespaced_custom_object(*SANDBOXES[:2], ns, SANDBOXES[2], sandbox)
            assert sb["metadata"]["labels"]["agents.x-k8s.io/launch-type"] == "cold"
            pod_name = h.exec('echo "$POD_NAME"').stdout.strip()
            assert c["net"].runtimes[pod_name][0] in h.base_url, "the handle reaches the cold pod's runtime"
        finally:
            h.kill()
        wait_for("the claim deleted", lambda: not claims(c) or None, timeout=30)
    finally:
        c["custom"].patch_namespaced_custom_object(*WARM_POOLS[:2], ns, WARM_POOLS[2], c["warmPool"], {"spec": {"replicas": c["poolSize"]}})
    wait_for("the warm pool refilled", lambda: warm_pool_full(c), timeout=120)
    assert c["net"].errors == []


def test_the_admission_policy_refuses_claims_without_lifetime_or_run_label(cluster, trainer):
    from kubernetes.client import ApiException

    c = cluster
    client = trainer_client(AgentSandboxSettings.from_env(c["trainerEnv"]))  # the trainer's ServiceAccount
    with pytest.raises(ApiException) as e:
        client.create_sandbox(c["warmPool"], namespace=c["sandboxesNamespace"], labels={c["runLabel"]: c["runId"]})
    assert "spec.lifecycle.shutdownTime is required" in str(e.value.body)
    with pytest.raises(ApiException) as e:
        client.create_sandbox(c["warmPool"], namespace=c["sandboxesNamespace"], shutdown_after_seconds=60)
    assert c["runLabel"] in str(e.value.body)
    with pytest.raises(ApiException) as e:
        client.create_sandbox(c["warmPool"], namespace=c["sandboxesNamespace"], labels={c["runLabel"]: c["runId"]}, shutdown_after_seconds=c["maxLifetimeSeconds"] + 600)
    assert "is more than" in str(e.value.body)
    assert claims(c) == []


def test_the_trainer_may_claim_but_not_exec_or_read_secrets(cluster, trainer):
    from kubernetes import client, config

    api = client.AuthorizationV1Api(config.new_client_from_config(config_file=cluster["trainerKubeconfig"]))
    ns = cluster["sandboxesNamespace"]

    def can(verb, resource, group="", sub=None):
        attrs = client.V1ResourceAttributes(namespace=ns, verb=verb, resource=resource, group=group, subresource=sub)
        return api.create_self_subject_access_review(client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attrs))).status.allowed

    assert can("create", "sandboxclaims", "extensions.agents.x-k8s.io") and can("delete", "sandboxclaims", "extensions.agents.x-k8s.io")
    assert can("get", "sandboxes", "agents.x-k8s.io")
    assert not can("create", "pods", sub="exec")
    assert not can("get", "secrets")
    assert not can("create", "sandboxes", "agents.x-k8s.io")


def test_a_black_box_session_end_to_end_through_the_real_controller(cluster, trainer, tmp_path):
    """backend -> real controller -> (simulated) pod -> runtime -> OpenEnv's capture proxy -> real ingress -> stub model."""
    c = cluster
    wait_for("the warm pool Ready", lambda: warm_pool_full(c), timeout=120)
    require_proxy_port()
    model = StubModel()
    ingress, ingress_url, ingress_log = start_ingress(tmp_path, model.url)
    try:
        env = {**c["trainerEnv"], "SANDBOX_UPSTREAM_URL": ingress_url, "SANDBOX_API_KEY": KEY}
        session = driver_for(env, KEY, backend=trainer).create("Write solution.py that adds two numbers from stdin.", episode_id="e2e")
        claim_name = session.sandbox.sandbox_id
        try:
            (claim,) = claims(c)
            assert claim["metadata"]["name"] == claim_name and claim["metadata"]["labels"]["agentrl.dev/episode_id"] == "e2e"
            pod_name = session.sandbox.exec('echo "$POD_NAME"').stdout.strip()
            assert c["net"].runtimes[pod_name][0] in session.sandbox.base_url, "the session runs in the claimed pod's runtime"
            assert session.wait_for_completion(timeout_s=scaled(60)) == 0
            (turn,) = session.fetch_proxy_trace()
            check_captured_turn(turn, model)
            assert session.verify() == 1.0
            assert KEY not in session.proxy_log()
        finally:
            session.close()
        wait_for("the session's claim deleted", lambda: not claims(c) or None, timeout=30)
        wait_for("the session's pod deleted", lambda: pod_name not in {p.metadata.name for p in c["core"].list_namespaced_pod(c["sandboxesNamespace"]).items} or None, timeout=60)
    finally:
        stop_group(ingress)
        model.stop()
    assert KEY not in ingress_log.read_text(errors="replace")
    for log in (c["tmp"] / "pods").iterdir():
        assert KEY not in log.read_text(errors="replace"), log
    assert c["net"].errors == []


@pytest.mark.openenv_source
def test_openenvs_factory_runs_a_black_box_session_end_to_end_through_the_real_controller(cluster, trainer, tmp_path):
    """backend -> real controller -> (simulated) pod -> runtime -> OpenEnv's proxy -> real ingress -> stub model."""
    opencode_env()  # OpenEnv's harness and the real proxy in the pods' image layout
    c = cluster
    wait_for("the warm pool Ready", lambda: warm_pool_full(c), timeout=120)
    require_proxy_port()
    model = StubModel()
    ingress, ingress_url, ingress_log = start_ingress(tmp_path, model.url)
    try:
        env = {**c["trainerEnv"], "SANDBOX_UPSTREAM_URL": ingress_url, "SANDBOX_API_KEY": KEY}
        factory = factory_for({"env": env}, KEY, backend=trainer)
        session = factory.create("Write solution.py that adds two numbers from stdin.", episode_id="e2e")
        claim_name = session.sandbox.sandbox_id
        try:
            assert [cl["metadata"]["name"] for cl in claims(c)] == [claim_name]
            assert session.wait_for_completion(timeout_s=scaled(60)) == 0
            (turn,) = session.fetch_proxy_trace()
            assert turn["per_token_logps"][0] == pytest.approx(-0.1)
            (req,) = model.requests
            assert "authorization" not in {k.lower() for k in req["headers"]} and req["headers"].get("X-Request-Id")
            assert session.verify([]).env_reward == 1.0
        finally:
            session.close()
        wait_for("the session's claim deleted", lambda: not claims(c) or None, timeout=30)
    finally:
        stop_group(ingress)
        model.stop()
    assert KEY not in ingress_log.read_text(errors="replace")
    for log in (c["tmp"] / "pods").iterdir():
        assert KEY not in log.read_text(errors="replace"), log
