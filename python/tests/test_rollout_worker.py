"""TRL's real rollout worker on the stack's sandbox path.

TRL 1.16's `HarnessRolloutWorker` (trl/experimental/async_grpo/openenv_harness.py) in
loop-owning mode (`harness_adapter=None`), built and driven by the test as AsyncGRPOTrainer
drives it (`start()`, samples from `rollout_buffer`, `stop()`), no GPU:

    HarnessRolloutWorker (its spawned rollout child)
      -> harness_standin.build_factory(sampling=...)   STAND-IN for OpenEnv's git-only opencode_env
      -> AgentSandboxBackend.from_env() (the env the TrainingNode sets, the trainer's ServiceAccount)
      -> the REAL agent-sandbox v1.0.1 controller on the simulated cluster (test_controller.py's
         fixture: API server, kwok pods, each pod's runtime started with the pod's own command)
      -> in the claimed sandbox: OpenEnv 0.10's capture proxy and the REAL opencode CLI from npm
         (opencode-ai@1.18.33, opencode_cli.py), offline switches on, no route but the proxy's
      -> the project's ingress (nginx, npm run ingress:local)
      -> stub_model.StubModel: STAND-IN for vLLM (token ids and logprobs the way vLLM returns
         them with --return-tokens-as-token-ids), scripted to make opencode run one bash call.

Stand-ins, named: the session factory (`harness_standin.py`: OpenEnv's `opencode_env` installs
from git only, and no readable version has `sampling=` / `fetch_training_trace()`), the model
(`stub_model.py`: no GPU, no weights) and the tokenizer (`grpo_support.build_tokenizer()`: never
used to tokenize in loop-owning mode). Everything else is the real program.

The capture proxy asks the model for non-streamed completions and replays them to opencode as
SSE (openenv capture/server.py `normalise_for_capture`, capture/sse.py); the stub's own SSE is
checked against the real opencode directly (`test_the_stub_model_streams_opencode_...`).

Skipped like test_controller.py when the fixtures are not built (AGENT_RL_BUILD_FIXTURES=1 builds
them, AGENT_RL_REQUIRE_E2E=1 makes a skip a failure).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

import harness_standin
from agent_rl_sandbox.settings import AgentSandboxSettings
import opencode_cli
import sandbox_root
import test_controller
from conftest import PYTHON_DIR, REPO, alive
from stub_model import BASH_COMMAND, FINAL_ANSWER, SOLUTION, StubModel
from test_controller import claims, wait_for, warm_pool_full
from test_opencode_e2e import KEY, _require, sandbox_path, start_ingress, stop_group
from waits import scaled

TESTS_DIR = Path(__file__).resolve().parent
MODEL = "stub/model-1"
#: Seconds from SIGTERM to the trainer until none of its claims is left (measured here: 0.15 s). The
#: behaviour under test: not scaled (waits.py).
SIGTERM_BOUND_S = 20.0
#: Seconds after that until every process of the trainer's group has exited (the rollout child, multiprocessing's resource tracker); not scaled.
EXIT_BOUND_S = 15.0
#: Seconds from the trainer's start until both rollouts hold a claim and opencode waits on the model
#: (a claim, the capture proxy's start, opencode's first call), before the machine's factor (waits.py).
SETUP_S = 180
#: The claim lifetime the SIGKILL case asks for (sandbox_timeout_s): it must outlive that setup, which
#: runs inside it (a fixed 45 s lifetime on a busy machine expired while the capture proxy was still
#: starting: SandboxGone), and 20 s more to kill the trainer and see the claims stay; at most the
#: stack's claim lifetime, which the backend caps every claim at (short_lifetime_s).
SHORT_LIFETIME_S = round(scaled(SETUP_S)) + 20
#: The slack allowed around the claims' shutdownTime.
EXPIRY_SLACK_S = 20.0


def build_image_with_opencode(tmp: Path) -> Path:
    """The Dockerfile's layout on a stock HOME holding the real opencode binary from npm."""
    binary = opencode_cli.install()
    stock = tmp / "stock-root"
    (stock / ".opencode/bin").mkdir(parents=True)
    shutil.copy2(binary, stock / ".opencode/bin/opencode")
    (stock / "proxy").mkdir()
    # install-layout.sh requires the stock image's proxy file; these sessions run OpenEnv's capture proxy instead.
    (stock / "proxy/interception.py").write_text("raise SystemExit('not used: the capture proxy runs instead')\n")
    image_root = tmp / "image"
    sandbox_root.install_layout(stock, image_root)
    return image_root


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """test_controller.py's simulated cluster and pod network, the pods' image holding the real opencode."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(test_controller, "build_image", build_image_with_opencode)
        yield from test_controller.cluster.__wrapped__(tmp_path_factory)


@pytest.fixture
def stack(cluster, tmp_path, monkeypatch):
    """Stub model + ingress, a full warm pool, and the trainer's env (also set on this process, so
    the worker's spawned child inherits it as a trainer pod's processes do)."""
    c = cluster
    wait_for("the warm pool Ready", lambda: warm_pool_full(c), timeout=180)
    model = StubModel(MODEL)
    ingress, ingress_url, ingress_log = start_ingress(tmp_path, model.url)
    traces = tmp_path / "traces"
    traces.mkdir()
    env = {
        **c["trainerEnv"],
        # Straight to the ingress with its key: the pod network here starts each pod's runtime only, not a
        # key-holding forwarder beside it (the plan's SANDBOX_UPSTREAM_URL names that forwarder).
        "SANDBOX_UPSTREAM_URL": ingress_url,
        "SANDBOX_API_KEY": KEY,
        # Nor a forwarder's trace port: the stand-in factory trains on the capture proxy's record only
        # on such a pool (test_trusted_trace.py covers the forwarder's record winning over the proxy's).
        "SANDBOX_TRACE_PORT": "0",
        # In a pod the official client reads the mounted ServiceAccount token; here, its kubeconfig.
        "KUBECONFIG": c["trainerKubeconfig"],
        harness_standin.TRACE_DIR_ENV: str(traces),
        "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), str(TESTS_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "PATH": sandbox_path(),
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    try:
        yield dict(c=c, model=model, env=env, traces=traces, ingress_log=ingress_log, tmp=tmp_path)
    finally:
        model.stop()
        stop_group(ingress)


def run_claims(c) -> list[dict]:
    return [cl for cl in claims(c) if cl["metadata"].get("labels", {}).get(c["runLabel"]) == c["runId"]]


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def start_trainer(s, *extra: str) -> tuple[subprocess.Popen, Path]:
    """The trainer process (harness_standin.run_trainer) in its own process group, as a trainer container."""
    ready = s["tmp"] / "trainer.ready"
    log = s["tmp"] / "trainer.log"
    proc = subprocess.Popen(
        [sys.executable, str(TESTS_DIR / "harness_standin.py"), "trainer", "--model", MODEL, "--ready-file", str(ready), *extra],
        cwd=REPO, env={**os.environ, **s["env"]}, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    return proc, log


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)


def group_members(pgid: int) -> list[int]:
    from conftest import process_group_members

    return process_group_members(pgid)


# --- tests -------------------------------------------------------------------------------------
def test_opencode_binary_has_the_offline_switches_it_is_started_with():
    """opencode_cli.OFFLINE_ENV names switches this opencode version reads (its binary's strings)."""
    binary = opencode_cli.install()
    data = binary.read_bytes()
    missing = [name for name in opencode_cli.OFFLINE_ENV if name.encode() not in data]
    assert missing == []
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=scaled(60))
    assert out.stdout.strip() == opencode_cli.VERSION


def test_the_stub_model_streams_opencode_through_one_bash_call_and_a_final_answer(tmp_path):
    """The stub's SSE (the path the capture proxy does not use) is what the real opencode consumes."""
    binary = opencode_cli.install()
    model = StubModel(MODEL)
    try:
        home, work = tmp_path / "home", tmp_path / "home/workdir"
        work.mkdir(parents=True)
        cfg = tmp_path / "opencode.json"
        cfg.write_text(json.dumps({
            "$schema": "https://opencode.ai/config.json", "model": "stub/model-1",
            "provider": {"stub": {"npm": "@ai-sdk/openai-compatible", "name": "Stub", "options": {"baseURL": f"{model.url}/v1", "apiKey": "unused"}, "models": {"model-1": {"name": "m"}}}},
        }))
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "OPENCODE_CONFIG": str(cfg), **opencode_cli.OFFLINE_ENV,
               "HTTP_PROXY": harness_standin.NO_ROUTE, "HTTPS_PROXY": harness_standin.NO_ROUTE, "NO_PROXY": "127.0.0.1"}
        out = subprocess.run([str(binary), "run", "--format", "json", "Write solution.py adding two numbers."], cwd=work, env=env, capture_output=True, text=True, timeout=scaled(180))
        assert out.returncode == 0, out.stderr[-2000:]
        events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        tools = [e["part"] for e in events if e["type"] == "tool_use"]
        assert [(t["tool"], t["state"]["status"], t["state"]["input"]["command"], t["state"]["output"].strip()) for t in tools] == [("bash", "completed", BASH_COMMAND, "5")]
        assert [e["part"]["text"] for e in events if e["type"] == "text"] == [FINAL_ANSWER]
        assert (work / "solution.py").read_text().strip() == SOLUTION
        chats = model.chat_requests()
        assert chats and all(r["body"].get("stream") is True for r in chats), "opencode streamed every call"
    finally:
        model.stop()


def test_trls_worker_completes_a_group_through_the_controller_with_the_real_opencode(stack):
    s, c = stack, stack["c"]
    factory = functools.partial(harness_standin.build_factory, model=MODEL)
    worker = harness_standin.make_worker(model=MODEL, num_generations=2, prompts=["Write solution.py that adds two numbers from stdin."], factory=factory)
    started = time.monotonic()
    worker.start()
    try:
        samples = harness_standin.take_groups(worker, 1, timeout_s=300)
    finally:
        worker.stop()
    elapsed = time.monotonic() - started
    print(f"one group of 2 rollouts: {elapsed:.1f}s")

    # The group: both rollouts scored by verify() (solution.py ran in the sandbox and printed 5).
    assert {x.group_id for x in samples} == {0}
    assert [x.metrics["reward"] for x in samples] == [1.0] * len(samples) and len(samples) >= 2
    # fetch_training_trace(): per rollout, opencode's two model calls with engine token ids and logprobs.
    traces = [json.loads(p.read_text()) for p in sorted(s["traces"].iterdir())]
    assert len(traces) == 2 and len({t["claim"] for t in traces}) == 2, "one sandbox per rollout"
    for t in traces:
        turns = t["trace"]["turns"]
        assert len(turns) == 2, [len(x["completion_token_ids"]) for x in turns]
        first, last = turns
        assert first["response"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "bash"
        assert last["response"]["choices"][0]["message"]["content"] == FINAL_ANSWER
        assert last["prompt_token_ids"][: len(first["prompt_token_ids"]) + len(first["completion_token_ids"])] == first["prompt_token_ids"] + first["completion_token_ids"], "turn 2 extends turn 1"
        for turn in turns:
            n, m = len(turn["prompt_token_ids"]), len(turn["completion_token_ids"])
            assert m > 0 and len(turn["per_token_logps"]) == m
            assert turn["per_token_logps"][:3] == pytest.approx([-0.1, -0.2, -0.3]), "the stub's logprobs at temperature 1"
            assert turn["loss_mask"] == [0] * n + [1] * m
        assert '"tool":"bash"' in t["opencode"]
    # TRL's rows are those turns: every sampled token trained with its logprob.
    completion_ids = [tid for t in traces for turn in t["trace"]["turns"] for tid in turn["completion_token_ids"]]
    trained = [int(tok) for x in samples for tok, m in zip(x.input_ids, x.completion_mask) if m]
    assert sorted(trained) == sorted(completion_ids)
    # What reached the model: through the ingress (key checked, dropped), with capture and the training policy.
    chats = s["model"].chat_requests()
    assert chats
    for r in chats:
        headers = {k.lower(): v for k, v in r["headers"].items()}
        assert "authorization" not in headers and headers.get("x-request-id")
        assert r["body"]["logprobs"] is True and r["body"]["return_token_ids"] is True
        assert r["body"]["temperature"] == 1.0 and r["body"]["top_p"] == 1.0, "training_sampling's policy from TRL"
        assert r["body"]["stream"] is False, "the capture proxy asks for whole completions"
    # Every claim deleted after, and their pods with them.
    wait_for("every claim deleted", lambda: not run_claims(c) or None, timeout=30)
    assert KEY not in s["ingress_log"].read_text(errors="replace")
    assert c["net"].errors == []


@pytest.mark.parametrize("where", ["backend-in-trainer", "backend-in-child-only"])
def test_sigterm_to_the_trainer_mid_rollout_deletes_its_claims(stack, where):
    """SIGTERM to the trainer process while opencode waits on the model: its claims are gone within
    SIGTERM_BOUND_S. With the backend built in the trainer (passed in the partial), the backend's
    handler there exits it cleanly, which makes multiprocessing terminate the daemonic rollout
    child (SIGTERM), whose handler deletes the claims. With the backend built only inside the
    session factory, in the child (as TRL's script builds HFSandboxBackend), SIGTERM's default
    action ends the trainer past multiprocessing's exit hook: the child's parent watch
    (shutdown.py) deletes the claims and stops the child."""
    s, c = stack, stack["c"]
    s["model"].hold.clear()  # the first tool-call turn of each rollout waits: mid-rollout
    proc, log = start_trainer(s, *(["--backend-in-trainer"] if where == "backend-in-trainer" else []))
    try:
        wait_for("two claims, opencode waiting on the model", lambda: len(run_claims(c)) == 2 and s["model"].holding.is_set() or None, timeout=SETUP_S)
        members = group_members(proc.pid)
        assert len(members) >= 2, "the trainer and its rollout child"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        wait_for("the trainer's claims deleted", lambda: not run_claims(c) or None, timeout=SIGTERM_BOUND_S, interval=0.1, scale=False)
        took = time.monotonic() - t0
        print(f"{where}: claims deleted {took:.2f}s after SIGTERM")
        proc.wait(scaled(30))
        wait_for("trainer and rollout child exited", lambda: not [p for p in members if alive(p)] or None, timeout=EXIT_BOUND_S, interval=0.1, scale=False)
    except BaseException:
        print(log.read_text(errors="replace")[-4000:])
        raise
    finally:
        s["model"].hold.set()
        kill_group(proc)
    assert c["net"].errors == []


def short_lifetime_s(env: dict[str, str]) -> int:
    """SHORT_LIFETIME_S within the stack's claim lifetime (AgentSandboxBackend caps sandbox_timeout_s
    there: a busy machine's factor once asked for 686 s and got the stack's 540)."""
    return min(SHORT_LIFETIME_S, AgentSandboxSettings.from_env(env).claim_lifetime_seconds)


def test_claims_of_a_sigkilled_trainer_expire_at_their_shutdown_time(stack):
    """SIGKILL of the trainer's whole process group (the container dies): nothing deletes the claims,
    the controller does at their shutdownTime (short_lifetime_s after creation here)."""
    s, c = stack, stack["c"]
    s["model"].hold.clear()
    lifetime = short_lifetime_s(s["env"])
    proc, log = start_trainer(s, "--sandbox-timeout", str(lifetime))
    try:
        live = wait_for("two claims, opencode waiting on the model", lambda: (lambda cl: cl if len(cl) == 2 and s["model"].holding.is_set() else None)(run_claims(c)), timeout=SETUP_S)
        kill_group(proc)
        killed_at = datetime.now(timezone.utc)
        ends = {cl["metadata"]["name"]: ts(cl["spec"]["lifecycle"]["shutdownTime"]) for cl in live}
        for cl in live:
            assert (ts(cl["spec"]["lifecycle"]["shutdownTime"]) - ts(cl["metadata"]["creationTimestamp"])).total_seconds() == pytest.approx(lifetime, abs=2)
        assert min(ends.values()) > killed_at, "the claims outlive the trainer"
        time.sleep(3)
        assert {cl["metadata"]["name"] for cl in run_claims(c)} == set(ends), "no one deleted them"
        wait_for("the claims expired", lambda: not run_claims(c) or None, timeout=lifetime + EXPIRY_SLACK_S, interval=0.5)
        gone_at = datetime.now(timezone.utc)
        print(f"claims gone {(gone_at - max(ends.values())).total_seconds():+.1f}s from their shutdownTime")
        assert gone_at >= min(ends.values()), "deleted at their shutdownTime, not before"
        assert (gone_at - max(ends.values())).total_seconds() <= EXPIRY_SLACK_S
    except BaseException:
        print(log.read_text(errors="replace")[-4000:])
        raise
    finally:
        s["model"].hold.set()
        kill_group(proc)
    assert c["net"].errors == []
