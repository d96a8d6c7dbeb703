"""AgentSandboxBackend's claim handling with a recording stand-in for the official client
(the real client against the real controller is test_controller.py): what a claim carries,
that it is deleted on every path, one client per thread, pickling, and SIGTERM."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field

import pytest

from agent_rl_sandbox import AgentSandboxSettings, SandboxError, SandboxGone, shutdown
from agent_rl_sandbox import agent_sandbox
from agent_rl_sandbox.agent_sandbox import AgentSandboxBackend, metadata_labels

from conftest import PYTHON_DIR, alive, free_port
from waits import scaled


@dataclass
class Recorder:
    pod_ip: str = "127.0.0.1"
    fail_create: Exception | None = None
    #: With fail_create: fail only this many times (0: every time).
    fail_times: int = 0
    claims: list[dict] = field(default_factory=list)
    deleted: list[tuple[str, str, int]] = field(default_factory=list)  # (claim, namespace, thread)
    clients: list[tuple[int, int]] = field(default_factory=list)  # (client id, thread)
    lock: threading.Lock = field(default_factory=threading.Lock)


REC = Recorder()


class FakeSandbox:
    def __init__(self, claim: str) -> None:
        self.sandbox_id = f"{claim}-sbx"
        self.closed = False

    def get_pod_ip(self) -> str:
        return REC.pod_ip

    def get_service_fqdn(self) -> None:
        return None

    def close_connection(self) -> None:
        self.closed = True


class FakeHelper:
    def delete_sandbox_claim(self, name: str, namespace: str, _request_timeout: float | None = None) -> None:
        with REC.lock:
            REC.deleted.append((name, namespace, threading.get_ident()))


class FakeClient:
    def __init__(self) -> None:
        self.k8s_helper = FakeHelper()
        with REC.lock:
            REC.clients.append((id(self), threading.get_ident()))

    def create_sandbox(self, warmpool, namespace="default", sandbox_ready_timeout=180, labels=None, *, claim_name=None, shutdown_after_seconds=None, **rest):
        with REC.lock:
            REC.claims.append(dict(warmpool=warmpool, namespace=namespace, ready_timeout=sandbox_ready_timeout, labels=labels, claim_name=claim_name, lifetime=shutdown_after_seconds, rest=rest, thread=threading.get_ident()))
        if REC.fail_create is not None and (REC.fail_times == 0 or len(REC.claims) <= REC.fail_times):
            raise REC.fail_create
        return FakeSandbox(claim_name)

    def list_active_sandboxes(self) -> list:
        return []


def fake_client(_settings: AgentSandboxSettings) -> FakeClient:
    return FakeClient()


@pytest.fixture
def rec(monkeypatch):
    global REC
    REC = Recorder()
    monkeypatch.setattr(agent_sandbox, "RUNTIME_HEALTH_SECONDS", 1.0)
    yield REC
    assert shutdown.live() == [], "no claim left registered after a test"


def settings(port: int, **kw) -> AgentSandboxSettings:
    return AgentSandboxSettings(namespace="arl-dev-sandboxes", warm_pool="sandbox-pool-r1", run_label="agentrl.dev/run", run_id="r1", max_lifetime_seconds=3600, port=port, **kw)


def backend(port: int) -> AgentSandboxBackend:
    return AgentSandboxBackend(settings(port), client_factory=fake_client, handle_sigterm=False)


def test_a_claim_carries_the_run_label_and_a_bounded_lifetime_and_is_deleted_by_kill(rec, runtime):
    b = backend(runtime.port)
    h = b.create(timeout_s=1200, metadata={"episode_id": "0f3a9c"})
    (claim,) = rec.claims
    assert claim["warmpool"] == "sandbox-pool-r1" and claim["namespace"] == "arl-dev-sandboxes"
    assert claim["labels"] == {"agentrl.dev/run": "r1", "agentrl.dev/episode_id": "0f3a9c"}
    assert claim["lifetime"] == 1200, "the harness's timeout when it is under the maximum"
    assert claim["claim_name"].startswith("r1-") and claim["claim_name"] == h.sandbox_id
    assert claim["rest"] == {}, "no env, volumes or pod metadata on the claim (the template refuses them)"
    assert h.base_url == f"http://127.0.0.1:{runtime.port}"
    assert shutdown.live() == [f"arl-dev-sandboxes/{h.sandbox_id}"]
    assert h.exec("echo hi").stdout == "hi\n"
    h.kill()
    h.kill()
    assert [(n, ns) for n, ns, _ in rec.deleted] == [(h.sandbox_id, "arl-dev-sandboxes")]
    with pytest.raises(SandboxGone):
        h.exec("true")


def test_lifetime_is_capped_a_little_under_the_admitted_maximum(rec, runtime):
    b = backend(runtime.port)
    for timeout_s in (99_999, 0):
        b.create(timeout_s=timeout_s).kill()
    assert [c["lifetime"] for c in rec.claims] == [3540, 3540]


def test_create_envs_apply_to_every_command(rec, runtime):
    h = backend(runtime.port).create(envs={"A": "1", "B": "2"})
    try:
        assert h.exec('echo "$A$B"').stdout.strip() == "12"
        assert h.exec('echo "$A$B"', envs={"B": "x"}).stdout.strip() == "1x"
    finally:
        h.kill()


def test_a_failed_claim_is_deleted_and_the_error_kept(rec, runtime):
    rec.fail_create = TimeoutError("claim not Ready within 300s")
    with pytest.raises(TimeoutError, match="not Ready"):
        backend(runtime.port).create()
    assert [n for n, _, _ in rec.deleted] == [rec.claims[0]["claim_name"]]


class QuotaRefusal(Exception):
    """What the kubernetes client raises for the API server's 403 (ApiException: status, body)."""

    status = 403
    body = '{"kind":"Status","message":"sandboxclaims.extensions.agents.x-k8s.io \\"r1-x\\" is forbidden: status unknown for quota: q, resources: count/sandboxclaims.extensions.agents.x-k8s.io","code":403}'


def test_a_claim_refused_until_the_quota_counts_claims_is_retried(rec, runtime, monkeypatch):
    monkeypatch.setattr(agent_sandbox.time, "sleep", lambda _s: None)
    rec.fail_create, rec.fail_times = QuotaRefusal(), 2
    handle = backend(runtime.port).create()
    names = [c["claim_name"] for c in rec.claims]
    assert len(names) == 3 and len(set(names)) == 1, "the same claim, tried three times"
    handle.kill()
    assert [n for n, _, _ in rec.deleted] == [names[0]]


def test_a_quota_refusal_past_the_bound_and_any_other_403_are_raised(rec, runtime, monkeypatch):
    monkeypatch.setattr(agent_sandbox, "QUOTA_NOT_COUNTED_RETRY_SECONDS", 0.0)
    rec.fail_create = QuotaRefusal()
    with pytest.raises(QuotaRefusal):
        backend(runtime.port).create()
    assert len(rec.claims) == 1

    other = QuotaRefusal()
    other.body = '{"message":"sandboxclaims is forbidden: User cannot create resource","code":403}'
    rec.claims.clear()
    rec.fail_create = other
    monkeypatch.setattr(agent_sandbox, "QUOTA_NOT_COUNTED_RETRY_SECONDS", 60.0)
    with pytest.raises(QuotaRefusal):
        backend(runtime.port).create()
    assert len(rec.claims) == 1, "a refusal for another reason is not retried"


def test_a_ready_claim_whose_runtime_does_not_answer_is_deleted(rec):
    with pytest.raises(SandboxError, match="runtime did not answer"):
        backend(free_port()).create()
    assert [n for n, _, _ in rec.deleted] == [rec.claims[0]["claim_name"]]


def test_one_client_per_thread_and_kill_from_any_thread(rec, runtime):
    b = backend(runtime.port)
    handles = []
    lock = threading.Lock()

    # All four alive at once: Python reuses a finished thread's ident, so a thread that ended before
    # another started would look like the same thread (seen on a loaded machine: 2 distinct of 4).
    together = threading.Barrier(4, timeout=scaled(30))

    def create() -> None:
        h = b.create()
        h2 = b.create()  # same thread: same client
        with lock:
            handles.extend([h, h2])
        together.wait()

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(handles) == 8
    threads_of_clients = [thread for _, thread in rec.clients]
    assert len(rec.clients) == 4 and len(set(threads_of_clients)) == 4
    assert {c["thread"] for c in rec.claims} == set(threads_of_clients)
    for h in handles:  # killed from this (main) thread: its own client deletes
        h.kill()
    assert len(rec.clients) == 5
    assert {thread for _, _, thread in rec.deleted} == {threading.get_ident()}
    assert sorted(n for n, _, _ in rec.deleted) == sorted(h.sandbox_id for h in handles)


def test_the_backend_pickles_as_its_settings(rec, runtime):
    b = backend(runtime.port)
    b.create().kill()  # a thread-local client now exists
    clone = pickle.loads(pickle.dumps(b))
    assert clone.settings == b.settings
    assert getattr(clone._local, "client", None) is None
    clone.create().kill()
    assert len(rec.clients) == 2


def test_metadata_labels_keep_only_valid_pairs():
    assert metadata_labels({"episode_id": "ab12", "bad key": "x", "k": "no spaces allowed", "n": 3}) == {"agentrl.dev/episode_id": "ab12"}
    assert metadata_labels(None) == {}


SIGTERM_SCRIPT = textwrap.dedent(
    """
    import json, sys, threading, time
    sys.path[:0] = [sys.argv[1], sys.argv[2]]
    import test_backend as tb
    from agent_rl_sandbox import AgentSandboxBackend
    deleted = []
    class Helper:
        def delete_sandbox_claim(self, name, namespace, _request_timeout=None):
            deleted.append(name)
            open(sys.argv[4], "a").write(name + "\\n")
    class Client(tb.FakeClient):
        def __init__(self):
            super().__init__()
            self.k8s_helper = Helper()
    def factory(_s):
        return Client()
    b = AgentSandboxBackend(tb.settings(int(sys.argv[3])), client_factory=factory)  # SIGTERM handled
    h = b.create()
    job = h.start_bg("sleep 300")
    waiter = threading.Thread(target=lambda: job.wait(300))  # not a daemon: it must not hold the exit up
    waiter.start()
    print(json.dumps({"claim": h.sandbox_id}), flush=True)
    time.sleep(300)
    """
)


def test_sigterm_deletes_live_claims_and_unblocks_waits(rec, runtime, tmp_path):
    out = tmp_path / "deleted.txt"
    proc = subprocess.Popen(
        [sys.executable, "-c", SIGTERM_SCRIPT, str(PYTHON_DIR), str(PYTHON_DIR / "tests"), str(runtime.port), str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        claim = json.loads(proc.stdout.readline())["claim"]
        time.sleep(0.5)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 128 + signal.SIGTERM, proc.stderr.read()
    assert time.monotonic() - started < 10, "the waiting thread noticed the shutdown"
    assert out.read_text().split() == [claim]



PARENT_DEATH_SCRIPT = textwrap.dedent(
    """
    import json, multiprocessing, os, sys, time
    sys.path[:0] = [sys.argv[1], sys.argv[2]]

    def child(out):
        # As in TRL's rollout child: the backend (here its shutdown registry) exists only in the child.
        from agent_rl_sandbox import shutdown
        shutdown.install()
        shutdown.register("ns/claim-1", lambda: open(out, "a").write("released ns/claim-1\\n"))
        open(out, "a").write(f"child {os.getpid()}\\n")
        time.sleep(300)

    if __name__ == "__main__":
        multiprocessing.set_start_method(sys.argv[4])
        p = multiprocessing.Process(target=child, args=(sys.argv[3],), daemon=True)
        p.start()
        print(json.dumps({"child": p.pid}), flush=True)
        time.sleep(300)  # no handler of its own: SIGTERM's default action ends it, past multiprocessing's exit hook
    """
)


@pytest.mark.parametrize("method,sig", [("spawn", signal.SIGTERM), ("spawn", signal.SIGKILL), ("fork", signal.SIGTERM)])
def test_a_rollout_child_releases_its_sandboxes_when_its_parent_dies(tmp_path, method, sig):
    """The trainer dies by a signal it does not handle (it never built a backend): the child
    releases what it holds and exits, instead of living on with its claims."""
    out = tmp_path / "child.txt"
    script = tmp_path / "trainer.py"  # a file: spawn re-imports the parent's main module in the child
    script.write_text(PARENT_DEATH_SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(PYTHON_DIR), str(PYTHON_DIR / "tests"), str(out), method],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    child = json.loads(proc.stdout.readline())["child"]
    try:
        deadline = time.monotonic() + scaled(60)
        while not (out.exists() and "child" in out.read_text()):
            assert time.monotonic() < deadline, proc.stderr.read() if proc.poll() is not None else "child did not start"
            time.sleep(0.1)
        time.sleep(2.0)
        assert alive(child) and "released" not in out.read_text(), "the child keeps its sandboxes while its parent lives"
        proc.send_signal(sig)
        proc.wait(10)
        started = time.monotonic()
        while alive(child) and time.monotonic() - started < 10:
            time.sleep(0.05)
        assert not alive(child), "the orphaned child still runs"
        assert "released ns/claim-1" in out.read_text()
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


# --- the drop-in constructor: HFSandboxBackend's arguments (OpenEnv envs/opencode_env/sandbox/hf.py) ----
POOL_IMAGE = "registry.test/agent-rl-sandbox@sha256:" + "a" * 64


def stack_env(**extra: str) -> dict[str, str]:
    """What the TrainingNode sets on the pool (components/sandbox/trainer-env.ts trainerEnv), trimmed."""
    return {
        "SANDBOX_PROVIDER": "agent-sandbox", "SANDBOX_NAMESPACE": "arl-dev-sandboxes", "SANDBOX_WARM_POOL": "sandbox-pool-r1",
        "SANDBOX_RUN_LABEL": "agentrl.dev/run", "SANDBOX_RUN_ID": "r1", "SANDBOX_MAX_LIFETIME_SECONDS": "3600",
        "SANDBOX_IMAGE": POOL_IMAGE, "SANDBOX_CPU": "2", "SANDBOX_MEMORY": "4Gi", "SANDBOX_UPSTREAM_URL": "http://127.0.0.1:7100",
        **extra,
    }


def test_trls_one_changed_line_builds_the_backend_from_the_stacks_env(monkeypatch, caplog):
    for k, v in stack_env().items():
        monkeypatch.setenv(k, v)
    caplog.set_level("INFO", logger="agent_rl_sandbox")
    # TRL's opencode_hf_sandbox.py: HFSandboxBackend(image=image, flavor=flavor) with --sandbox-image (the pool's) and its flavor default.
    b = AgentSandboxBackend(image=POOL_IMAGE, flavor="cpu-basic", handle_sigterm=False)
    assert (b.settings.warm_pool, b.settings.image, b.image, b.flavor) == ("sandbox-pool-r1", POOL_IMAGE, POOL_IMAGE, "cpu-basic")
    assert "flavor 'cpu-basic': the pool decides each sandbox's size (cpu 2, memory 4Gi)" in caplog.text
    # Every HFSandboxBackend keyword at its default is accepted, and from_env() keeps working.
    AgentSandboxBackend(image=POOL_IMAGE, flavor="cpu-upgrade", forward_hf_token=False, sandbox_kwargs=None, handle_sigterm=False)
    AgentSandboxBackend(image=POOL_IMAGE, sandbox_kwargs={}, handle_sigterm=False)
    assert AgentSandboxBackend.from_env(stack_env(), handle_sigterm=False).image == POOL_IMAGE
    assert pickle.loads(pickle.dumps(b)).image == POOL_IMAGE


def test_what_the_pool_cannot_honour_is_refused_all_at_once():
    s = AgentSandboxSettings.from_env(stack_env())
    with pytest.raises(agent_sandbox.BackendArgumentError) as e:
        AgentSandboxBackend(s, image="ghcr.io/huggingface/openenv-opencode-sandbox:latest", flavor="a10g-small", forward_hf_token=True, sandbox_kwargs={"secrets": ["X"]}, handle_sigterm=False)
    problems = e.value.problems
    assert len(problems) == 4, problems
    assert problems[0] == (
        f"image 'ghcr.io/huggingface/openenv-opencode-sandbox:latest' is not the pool's image {POOL_IMAGE!r}: every sandbox of the pool "
        "runs its template's image (sandboxes.image; TRL's script gets it as --sandbox-image): pass that, or set sandboxes.image and redeploy"
    )
    assert problems[1] == (
        "flavor 'a10g-small' is not a CPU flavor: the pool's sandboxes have no GPU and their size is the stack's "
        "(sandboxes.cpu=2, sandboxes.memory=4Gi): pass a cpu-* flavor or none"
    )
    assert problems[2].startswith("forward_hf_token=True: the pool's sandboxes get no HF token by design")
    assert problems[3] == (
        "sandbox_kwargs ['secrets']: these are huggingface_hub Sandbox.create options; the pool's template decides its sandboxes "
        "(sandboxes.* in the stack config): drop sandbox_kwargs"
    )
    assert str(e.value).startswith("AgentSandboxBackend:\n  image ")


def test_an_image_is_not_checked_where_the_env_names_none(caplog):
    s = AgentSandboxSettings.from_env({k: v for k, v in stack_env().items() if k != "SANDBOX_IMAGE"})
    b = AgentSandboxBackend(s, image="any/image:tag", handle_sigterm=False)
    assert b.image == "any/image:tag" and "not checked" in caplog.text
