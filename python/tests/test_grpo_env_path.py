"""A real GRPO step through the stack's env path, on CPU.

What is real: TRL 1.16's GRPOTrainer with `environment_factory` (no vLLM), openenv 0.10's client
(`GenericEnvClient(...).sync()`, one per environment instance, opened at reset() and closed after
get_reward(), client pings off: the seed script train_coding_whitebox_eval.py's pattern), openenv
0.10's server framework (`create_app`, session cap from MAX_CONCURRENT_ENVS) run with the uvicorn CLI
as the catalog images run it, with the env vars the stack renders for the replicas
(components/env/replica-description.ts: MAX_CONCURRENT_ENVS, ENABLE_WEB_INTERFACE, UVICORN_WS_PING_*), and the
env router: real nginx with the config the stack renders (python/tests/router_up.ts).

Stand-ins, each named: the environment class `CodingStandIn` (grpo_support.py) stands in for the
catalog images' environments (no openenv-* env package with a server is on PyPI); the tiny
`Qwen3ForCausalLM` (hidden 32, 2 layers, weights set by hand so it calls the tool) stands in for
Qwen3-1.7B, and a WordLevel tokenizer with Qwen's special tokens and TRL's own qwen3.jinja for its
tokenizer; the stack is mbpp-whitebox's generation batch scaled down at the same ratio (recipe:
8 x 2 = 16 sessions, 4 generations; here 2 x 2 = 4 sessions, 2 generations) on 2 replicas x 2
sessions with no spare replica.

Cases:
1. 2 optimizer steps complete; the policy called the tool, rewards differ, the gradient is not
   zero; each step opened exactly the generation batch's 4 sessions, every one closed, no replica
   held more than its cap, nothing was refused.
2. One replica fewer than the config check asks for (rendered by bypassing the check in the test):
   the trainer fails at reset with the router's capacity error; the check itself refuses that stack.
3. A client that vanishes (its packets dropped in a network namespace, no close, no kill) frees
   its slot within the server's keepalive bound (UVICORN_WS_PING_INTERVAL + _TIMEOUT, rendered from
   the stack's envs.coding.wsPing); with the keepalive off (the fix reverted) the slot stays taken.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import REPO, alive, free_port, stop_process, wait_http
from waits import scaled

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
import grpo_support as gs  # noqa: E402
import netns  # noqa: E402

#: The scaled-down recipe: 2 per device x 2 accumulation = 4 sessions, 2 generations, 2 steps.
PER_DEVICE, ACCUMULATION, GENERATIONS, STEPS = 2, 2, 2, 2
GENERATION_BATCH = PER_DEVICE * ACCUMULATION
#: The vanishing-client case's keepalive (envs.coding.wsPing): a ping after 1 s idle, 2 s for the pong.
PING = {"intervalSeconds": 1, "timeoutSeconds": 2}
#: Slack on top of interval + timeout for polling and a loaded machine.
SLACK_S = 3.0
READY_TIMEOUT_S = 90.0


def _prerequisites() -> str | None:
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        return "nginx not found (apt-get install -y nginx-light)"
    if not (REPO / "node_modules/tsx").exists():
        return "node_modules/tsx missing (npm ci)"
    return None


pytestmark = pytest.mark.skipif(_prerequisites() is not None, reason=_prerequisites() or "")


# ---- processes --------------------------------------------------------------------------------


def _read_ready(proc: subprocess.Popen, what: str, timeout: float = READY_TIMEOUT_S) -> dict:
    """The JSON after `READY ` on the helper's stdout, bounded by timeout (scaled, waits.py)."""
    timeout = scaled(timeout)
    out: dict = {}

    def read() -> None:
        for line in proc.stdout:
            if line.startswith("READY "):
                out["facts"] = json.loads(line[len("READY ") :])
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(timeout)
    if "facts" not in out:
        stop_process(proc)
        raise RuntimeError(f"{what} did not get ready within {timeout:g}s (exit {proc.poll()}):\n{proc.stderr.read() if proc.poll() is not None else ''}")
    return out["facts"]


@contextmanager
def stack_env(**args):
    """router_up.ts for this env sizing: yields its facts; the router (if any) stops on exit."""
    proc = subprocess.Popen(
        ["node", "--import", "tsx", str(TESTS / "router_up.ts"), json.dumps(args)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    facts: dict = {}
    try:
        facts = _read_ready(proc, "router_up.ts")
        yield facts
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            stop_process(proc)
    if "pid" in facts:
        assert not alive(facts["pid"]), f"nginx {facts['pid']} outlived router_up.ts"


class Replica:
    """One env replica: `uvicorn grpo_support:app` with the stack's replica env vars."""

    def __init__(self, tmp: Path, env: dict[str, str], host: str = "127.0.0.1", name: str = "replica") -> None:
        self.port = free_port()
        self.host = host
        self.url = f"http://{host}:{self.port}"
        self.events = tmp / f"{name}-{self.port}.events.jsonl"
        self.log_path = tmp / f"{name}-{self.port}.log"
        uvicorn = Path(sys.executable).parent / "uvicorn"
        run_env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "LANG": "C.UTF-8", "HF_HUB_OFFLINE": "1", **env}
        run_env.update({gs.EVENTS_ENV_VAR: str(self.events), "STANDIN_PORT": str(self.port)})
        log = open(self.log_path, "wb")
        # As the images start their servers: the uvicorn CLI, the app module in the working dir.
        self.proc = subprocess.Popen([str(uvicorn), "grpo_support:app", "--host", host, "--port", str(self.port)], cwd=TESTS, env=run_env, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def wait(self) -> None:
        try:
            wait_http(f"{self.url}/health", timeout=READY_TIMEOUT_S, proc=self.proc)
        except Exception as e:
            raise RuntimeError(f"replica {self.url} did not start: {e}\n{self.log()}") from e

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        stop_process(self.proc)


# ---- the trainer ------------------------------------------------------------------------------


class Recorder:
    """TRL callback: the logged metrics and the wall time each optimizer step ended."""

    def __init__(self) -> None:
        from transformers import TrainerCallback

        rec = self

        class _Cb(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                rec.step_ends.append(time.time())

            def on_log(self, args, state, control, logs=None, **kw):
                rec.logs.append(dict(logs or {}))

        self.logs: list[dict] = []
        self.step_ends: list[float] = []
        self.callback = _Cb()


@pytest.fixture(scope="module")
def policy():
    tok = gs.build_tokenizer()
    return tok, gs.build_policy(tok)


def make_trainer(policy, env_url: str, out: Path, recorder: Recorder):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    tok, model = policy
    gs.RunPythonEnv.base_url = env_url
    gs.RunPythonEnv.errors = []
    targets = [3, 7, 5, 1, 4, 6, 2, 8]
    data = Dataset.from_dict({"prompt": [gs.user_prompt(t) for t in targets], "target": targets})
    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=PER_DEVICE,
        gradient_accumulation_steps=ACCUMULATION,
        num_generations=GENERATIONS,
        max_steps=STEPS,
        max_completion_length=48,
        max_tool_calling_iterations=2,
        learning_rate=1e-3,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        use_vllm=False,
        bf16=False,
        gradient_checkpointing=False,
        save_strategy="no",
        chat_template_kwargs={"enable_thinking": False},
        dataloader_num_workers=0,
        seed=0,
        disable_tqdm=True,
    )
    return GRPOTrainer(model=model, processing_class=tok, args=args, train_dataset=data, environment_factory=gs.RunPythonEnv, callbacks=[recorder.callback])


def close_pool(trainer) -> None:
    """Closes every session the trainer's environment instances still hold (after a failed run)."""
    for pool in getattr(trainer, "_environment_pool", {}).values():
        for env in pool:
            env._close()


# ---- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    """The two replicas of case 1 (MAX_CONCURRENT_ENVS etc. from the stack's description)."""
    tmp = tmp_path_factory.mktemp("replicas")
    ports = [free_port(), free_port()]
    with stack_env(replicas=2, sessionsPerReplica=2, replicaPorts=ports, startRouter=False) as facts:
        pass
    started: list[Replica] = []
    try:
        for _ in ports:
            started.append(Replica(tmp, facts["replicaEnv"]))
        for r in started:
            r.wait()
        yield started, facts["replicaEnv"]
    finally:
        for r in started:
            r.stop()


def _sessions_between(events: list[dict], start: float, end: float) -> tuple[int, int]:
    opened = sum(1 for e in events if e["event"] == "open" and start < e["t"] <= end)
    closed = sum(1 for e in events if e["event"] == "close" and start < e["t"] <= end)
    return opened, closed


# ---- case 1 -----------------------------------------------------------------------------------


def test_grpo_steps_through_router_at_the_recipes_ratio(policy, replicas, tmp_path):
    reps, _env = replicas
    with stack_env(replicas=2, sessionsPerReplica=2, replicaPorts=[r.port for r in reps]) as router:
        assert router["configProblems"] == [], router["configProblems"]
        assert router["capacity"]["sessions"] == GENERATION_BATCH == router["capacity"]["demand"]
        rec = Recorder()
        trainer = make_trainer(policy, router["url"], tmp_path / "out", rec)
        started = time.time()
        try:
            trainer.train()
        finally:
            close_pool(trainer)
        access_log = (Path(router["runDir"]) / "access.log").read_text()

    assert gs.RunPythonEnv.errors == []
    steps = [log for log in rec.logs if "loss" in log]
    assert len(steps) == STEPS, rec.logs
    for log in steps:
        # The policy called run_python once per rollout, through a session on a replica.
        assert log["tools/call_frequency"] > 0, log
        assert log["tools/failure_frequency"] == 0, log
        assert log["reward_std"] > 0, log
        assert log["grad_norm"] > 0, log

    # What the replicas saw: each step opened exactly the generation batch's sessions and closed
    # them all (get_reward closes), never more than k on one replica.
    per_replica = {r.port: gs.read_events(r.events) for r in reps}
    bounds = [started, *rec.step_ends]
    assert len(rec.step_ends) == STEPS
    for i in range(STEPS):
        opened = closed = 0
        for events in per_replica.values():
            o, c = _sessions_between(events, bounds[i], bounds[i + 1])
            opened, closed = opened + o, closed + c
        assert (opened, closed) == (GENERATION_BATCH, GENERATION_BATCH), f"step {i + 1}: {opened} opened, {closed} closed"
    for port, events in per_replica.items():
        assert 0 < gs.peak_open(events) <= 2, f"replica {port} held {gs.peak_open(events)} sessions at once (cap 2)"
    assert sum(gs.peak_open(e) for e in per_replica.values()) == GENERATION_BATCH
    # Nothing refused: every session upgrade succeeded (101), no CAPACITY_REACHED anywhere.
    ws_lines = [line for line in access_log.splitlines() if '"GET /ws ' in line]
    assert len(ws_lines) == STEPS * GENERATION_BATCH, access_log
    assert all(" 101 " in line for line in ws_lines), access_log
    for r in reps:
        assert "CAPACITY_REACHED" not in r.log()


# ---- case 2 -----------------------------------------------------------------------------------


def test_one_replica_short_fails_with_the_capacity_error(policy, replicas, tmp_path):
    reps, env = replicas
    # 1 replica x 2 sessions for a generation batch of 4: the config check refuses it; the test
    # bypasses the check (router_up.ts bypassCheck) to run what the check prevents.
    with stack_env(replicas=1, sessionsPerReplica=2, replicaPorts=[reps[0].port], bypassCheck=True) as router:
        assert router["replicaEnv"] == env  # the same replica settings as case 1's replicas
        assert router["configProblems"] == [
            "envs.coding.replicas: 1 replicas x 2 sessions = 2, but training opens 4 sessions at once (the generation batch (4)) "
            "plus 0 spare replica(s) of headroom = 4: raise replicas to 2 or sessionsPerReplica to 4"
        ]
        rec = Recorder()
        trainer = make_trainer(policy, router["url"], tmp_path / "out", rec)
        started = time.time()
        try:
            with pytest.raises(Exception):
                trainer.train()
        finally:
            close_pool(trainer)

    assert len(gs.RunPythonEnv.errors) == 1, gs.RunPythonEnv.errors
    err = gs.RunPythonEnv.errors[0]
    # The router answers at capacity with OpenEnv's own error frame (components/env/capacity_responder.py):
    # the client raises RuntimeError("Server error: <message> (code: CAPACITY_REACHED)"), and the message
    # names the env, its capacity, the demand the plan sized it for and the fix, as plan.md's check does.
    assert isinstance(err, RuntimeError), repr(err)
    text = str(err)
    assert text.startswith("Server error: ") and text.endswith("(code: CAPACITY_REACHED)"), text
    for part in ("'coding'", "2 sessions", "1 replica", "4", "replicas", "sessionsPerReplica"):
        assert part in text, (part, text)
    # The replica itself never went past its cap (the router refused, not the replica).
    events = [e for e in gs.read_events(reps[0].events) if e["t"] > started]
    assert gs.peak_open(events) == 2
    assert "CAPACITY_REACHED" not in reps[0].log()


# ---- case 3 -----------------------------------------------------------------------------------


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    out: list[str] = []
    t = threading.Thread(target=lambda: out.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(scaled(timeout))
    return out[0].strip() if out else ""


def _try_session(url: str) -> str:
    """'open' when a session opens (then closed), 'full' on CAPACITY_REACHED."""
    from openenv.core.generic_client import GenericEnvClient

    client = GenericEnvClient(base_url=url, connect_timeout_s=5.0, message_timeout_s=5.0, websocket_ping_interval_s=None).sync()
    try:
        client.reset(target=0)
        return "open"
    except RuntimeError as e:
        if "CAPACITY_REACHED" in str(e):
            return "full"
        raise
    finally:
        client.close()


def test_vanished_client_frees_its_slot_within_the_keepalive_bound(tmp_path):
    why = netns.missing_prerequisite()
    if why is not None:
        pytest.skip(why)
    with stack_env(replicas=1, sessionsPerReplica=1, replicaPorts=[0], bypassCheck=True, wsPing=PING, startRouter=False) as facts:
        pass
    env = facts["replicaEnv"]
    assert env["MAX_CONCURRENT_ENVS"] == "1"
    assert (env["UVICORN_WS_PING_INTERVAL"], env["UVICORN_WS_PING_TIMEOUT"]) == ("1", "2")
    bound = PING["intervalSeconds"] + PING["timeoutSeconds"]
    # The control: the same replica with the keepalive off (uvicorn: interval 0 sends no pings).
    control_env = {**env, "UVICORN_WS_PING_INTERVAL": "0"}

    ns = netns.create(os.getpid())
    servers: list[Replica] = []
    holders: list[subprocess.Popen] = []
    try:
        keepalive = Replica(tmp_path, env, host=ns.host_ip, name="keepalive")
        servers.append(keepalive)
        control = Replica(tmp_path, control_env, host=ns.host_ip, name="control")
        servers.append(control)
        for s in servers:
            s.wait()
        for s in servers:
            holder = subprocess.Popen(ns.exec_argv(sys.executable, str(TESTS / "netns.py"), "hold", s.url), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            holders.append(holder)
        for holder in holders:
            line = _readline(holder, READY_TIMEOUT_S)
            assert line == "OPEN", f"client in the namespace did not open its session: {line!r} {holder.stderr.read() if holder.poll() is not None else ''}"
        for s in servers:
            assert _try_session(s.url) == "full", "the held session should take the only slot"

        ns.drop_all()
        dropped = time.monotonic()
        freed_after: float | None = None
        while time.monotonic() - dropped < bound + SLACK_S:
            if freed_after is None and _try_session(keepalive.url) == "open":
                freed_after = time.monotonic() - dropped
            time.sleep(0.25)
        # Past the same bound, the control's slot is still taken.
        control_state = _try_session(control.url)

        assert freed_after is not None, f"slot not freed within {bound + SLACK_S}s with pings {PING}:\n{keepalive.log()}"
        assert freed_after <= bound + SLACK_S
        assert control_state == "full", "with pings off the vanished client's slot should stay taken"
        for h in holders:
            assert h.poll() is None, "the vanished clients were neither killed nor closed"
    finally:
        for h in holders:
            if h.stdin:
                h.stdin.close()
            stop_process(h, timeout=5)
        for s in servers:
            s.stop()
        ns.delete()
