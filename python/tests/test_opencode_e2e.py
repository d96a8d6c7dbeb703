"""A black-box session end to end on loopback, through the real pieces wherever they exist here:

    the session driver (below)
      -> AgentSandboxBackend (claims through a recording stand-in of the official client;
         test_controller.py uses the real client and controller)
      -> the runtime, started with the pool template's command on the image layout the
         Dockerfile builds, HOME=/home/user (a private mount namespace)
      -> an in-sandbox intercepting proxy holding the ingress key
      -> the project's ingress (npm run ingress:local: the deployed nginx config)
      -> a stub OpenAI-compatible model server (vLLM-style token ids and logprobs).

Two drivers, two proxies:
- everywhere (CI included): `capture_session.CaptureSessionDriver`, which calls the backend as
  OpenEnv's OpenCodeSessionFactory does, with OpenEnv's capture proxy from PyPI's openenv 0.10.0
  (`openenv.core.harness.capture.server`) in the sandbox;
- marked `openenv_source`: OpenEnv's real OpenCodeSessionFactory (transparent_proxy mode) and its
  real proxy (`interception.py`). OpenEnv's opencode env is not on PyPI: these import it from an
  OpenEnv source tree, OPENENV_SRC (the dir holding `opencode_env`, i.e. <OpenEnv>/envs; default
  ~/.cache/agent-rl-infra/openenv-src/envs). Without it python/run-tests.sh and npm test deselect
  them by name; run directly, they skip, or fail with AGENT_RL_REQUIRE_E2E=1.

Stand-in: `opencode` itself (a binary from opencode.ai, not reachable here) is a small script at
$HOME/.opencode/bin/opencode that does one chat completion through the proxy, as opencode would
with the opencode.json the harness writes, and writes the reply to solution.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agent_rl_sandbox import opencode_config_kwargs, shutdown
from agent_rl_sandbox.agent_sandbox import AgentSandboxBackend

import sandbox_root
import test_backend as tb
from capture_session import CaptureSessionConfig, CaptureSessionDriver
from conftest import OPENENV_SRC, REPO, free_port, openenv_source_missing, processes, stop_process, wait_http, without_rollout_keys
from waits import scaled, wait_for
from test_plan_contract import plan_facts

KEY = "sk-sandboxes-3f9d2c7a1b5e4d6f"
#: A STAND-IN for the key the trainer mints per claim: the rollout-key shape the forwarder takes on its key port, listed
#: in this test ingress's keys file as a plain key (ingress:local runs no verifier). pod_netns delivers it to each pod.
STANDIN_ROLLOUT_KEY = "rk1.StandInRolloutKeyForTheHarborTrialPods00000"
REPLY = "print(sum(map(int, input().split())))\n"


def _require(reason: str) -> None:
    if os.environ.get("AGENT_RL_REQUIRE_E2E") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def opencode_env():
    if (why := openenv_source_missing()) is not None:
        _require(why)
    if str(OPENENV_SRC) not in sys.path:
        sys.path.insert(0, str(OPENENV_SRC))
    import opencode_env.harness  # noqa: F401

    return sys.modules["opencode_env"]


FAKE_OPENCODE = r'''#!/usr/bin/env python3
# Stand-in for the opencode CLI: `--version`, and `run --format json <instruction>` doing one chat
# completion against the provider in $OPENCODE_CONFIG (the proxy), writing the reply to solution.py.
import json, os, sys, urllib.request, urllib.error
if sys.argv[1:] == ["--version"]:
    print("1.0.0-stand-in"); sys.exit(0)
assert sys.argv[1] == "run", sys.argv
instruction = sys.argv[-1]
cfg = json.load(open(os.environ["OPENCODE_CONFIG"]))
provider = cfg["provider"]["intercepted"]["options"]
body = {"model": cfg["model"].split("/", 1)[1], "messages": [{"role": "user", "content": instruction}], "max_tokens": 64}
req = urllib.request.Request(provider["baseURL"].rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                             headers={"Content-Type": "application/json", "Authorization": "Bearer " + provider["apiKey"]})
print(json.dumps({"type": "step_start"}), flush=True)
try:
    with urllib.request.urlopen(req, timeout=MODEL_TIMEOUT_S) as r:
        reply = json.load(r)["choices"][0]["message"]["content"]
except urllib.error.HTTPError as e:
    print(json.dumps({"type": "error", "status": e.code, "body": e.read().decode()[:300]}), flush=True)
    sys.exit(1)
open("solution.py", "w").write(reply)
print(json.dumps({"type": "text", "text": reply}), flush=True)
print(json.dumps({"type": "step_finish"}), flush=True)
'''


class StubModel:
    """An OpenAI-compatible chat endpoint with vLLM-style logprobs (token ids included), and
    vLLM's `prompt_token_ids` / `choices[].token_ids` when asked with `return_token_ids`."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                tokens = [REPLY[i : i + 8] for i in range(0, len(REPLY), 8)]
                out = {
                    "id": "cmpl-1", "object": "chat.completion", "model": body.get("model"),
                    "choices": [{
                        "index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": REPLY},
                        "logprobs": {"content": [{"token": t, "token_id": 100 + i, "logprob": -0.1 * (i + 1), "top_logprobs": []} for i, t in enumerate(tokens)]},
                    }],
                    "usage": {"prompt_tokens": 10, "completion_tokens": len(tokens), "total_tokens": 10 + len(tokens)},
                }
                if body.get("return_token_ids"):
                    out["prompt_token_ids"] = list(range(1, 11))
                    out["choices"][0]["token_ids"] = [100 + i for i in range(len(tokens))]
                data = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_ingress(tmp: Path, upstream: str) -> tuple[subprocess.Popen, str, Path]:
    keys = tmp / "keys"
    keys.write_text(f"sandboxes {KEY}\nrollouts {STANDIN_ROLLOUT_KEY}\n")
    keys.chmod(0o600)
    port = free_port()
    log = tmp / "ingress.log"
    proc = subprocess.Popen(
        ["npm", "run", "--silent", "ingress:local", "--", "--listen", f"127.0.0.1:{port}", "--upstream", upstream, "--keys-file", str(keys)],
        cwd=REPO, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + scaled(60)
    while "ingress:local ready" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_group(proc)
            raise RuntimeError(f"ingress did not start:\n{log.read_text(errors='replace')}")
        time.sleep(0.1)
    return proc, f"http://127.0.0.1:{port}", log


def stop_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


#: The in-sandbox proxy's port (OpenEnv harness.py _PROXY_PORT). Pods have their own network; the
#: sandboxes here share this machine's loopback, so the port must be free for the session's proxy.
PROXY_PORT = 7000


def require_proxy_port() -> None:
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no conflict
        try:
            s.bind(("127.0.0.1", PROXY_PORT))
        except OSError as e:
            pytest.fail(f"127.0.0.1:{PROXY_PORT} is taken ({e}): the harness's in-sandbox proxy needs it (a leftover proxy? ss -ltnp)")


def build_image(tmp: Path) -> Path:
    """The Dockerfile's layout on a stock HOME holding the opencode stand-in and OpenEnv's real proxy (when OPENENV_SRC has it)."""
    stock = tmp / "stock-root"
    (stock / ".opencode/bin").mkdir(parents=True)
    # The stand-in runs in the sandbox, without this module: its model timeout is written in, scaled here.
    (stock / ".opencode/bin/opencode").write_text(FAKE_OPENCODE.replace("MODEL_TIMEOUT_S", repr(scaled(30))))
    (stock / ".opencode/bin/opencode").chmod(0o755)
    (stock / "proxy").mkdir()
    proxy = OPENENV_SRC / "opencode_env/sandbox/interception.py"
    # Without OpenEnv's source the layout still holds a proxy file (tests that run it need the real one).
    (stock / "proxy/interception.py").write_text(proxy.read_text() if proxy.exists() else "raise SystemExit('stand-in: OpenEnv source not available')\n")
    image_root = tmp / "image"
    sandbox_root.install_layout(stock, image_root)
    return image_root


def sandbox_path() -> str:
    """PATH in the sandbox: the image's python carries the proxy's deps (fastapi, uvicorn, httpx); here, this venv's."""
    return f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"


@contextlib.contextmanager
def planned_runtime(tmp: Path, pod_spec: dict, container: dict, image_root: Path):
    """The sandbox runtime started with the pool template's command and env on the image layout, as its uid on a
    read-only root (sandbox_root.rendered), on a free loopback port; yields (process, port, log) once it answers /healthz, and stops its whole group after."""
    port = free_port()
    argv = list(container["command"])
    argv[argv.index("--port") + 1] = str(port)
    argv += ["--host", "127.0.0.1"]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    env["PATH"] = sandbox_path()
    log = tmp / "runtime.log"
    runtime = subprocess.Popen(sandbox_root.command(image_root, argv, **sandbox_root.rendered(pod_spec, container)), env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc=runtime)
        yield runtime, port, log
    finally:
        stop_process(runtime)
        try:
            os.killpg(runtime.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def stack(request, tmp_path, monkeypatch):
    """Stub model, ingress, and a sandbox runtime on the image layout; yields what the trainer sees."""
    if request.node.get_closest_marker("openenv_source") is not None:
        opencode_env()
    if (why := sandbox_root.available()) is not None:
        _require(f"sandbox root: {why}")
    require_proxy_port()
    tb.REC = tb.Recorder()
    facts = plan_facts()
    pod_spec = facts["template"]["podTemplate"]["spec"]
    (container,) = pod_spec["containers"]
    image_root = build_image(tmp_path)

    model = StubModel()
    ingress, ingress_url, ingress_log = start_ingress(tmp_path, model.url)
    try:
        with planned_runtime(tmp_path, pod_spec, container, image_root) as (runtime, port, runtime_log):
            # Straight to the ingress with the pool's key (no forwarder, no verifier here: `forwarded` runs the production path).
            trainer_env = {**without_rollout_keys(facts["trainerEnv"]), "SANDBOX_PORT": str(port), "SANDBOX_UPSTREAM_URL": ingress_url, "SANDBOX_API_KEY": KEY}
            yield dict(env=trainer_env, model=model, ingress_log=ingress_log, runtime_log=runtime_log, runtime=runtime)
    finally:
        stop_group(ingress)
        model.stop()


@pytest.fixture
def forwarded(tmp_path):
    """The production path of an agent-sandbox pool on Kubernetes, as rendered: the sandbox pod's runtime and its
    key-holding forwarder (the template's commands), the trainer's env (no key of its own: the backend mints the
    claim's rollout key at the verifier and hands it to the forwarder), the verifier and nginx as the plan renders them
    (test_rollout_keys.rendered_path_up), the stub model behind. Only ports and addresses are this machine's."""
    from test_rollout_keys import rendered_path_up, rendered_trainer_env, start_rendered_forwarder

    if (why := sandbox_root.available()) is not None:
        _require(f"sandbox root: {why}")
    require_proxy_port()
    tb.REC = tb.Recorder()
    facts = plan_facts()
    pod_spec = facts["template"]["podTemplate"]["spec"]
    (container,) = pod_spec["containers"]
    image_root = build_image(tmp_path)
    model = StubModel()
    try:
        with rendered_path_up(tmp_path, model.url, 50, 100) as r:
            forwarder, forwarder_port, key_port = start_rendered_forwarder(r["facts"], r["facts"]["url"], image_root)
            r["procs"].append(forwarder)
            with planned_runtime(tmp_path, pod_spec, container, image_root) as (_runtime, port, runtime_log):
                trainer_env = rendered_trainer_env(r, key_port, port)
                # The plan's upstream for the agent's side is the pod's forwarder on loopback; here its port is a free one.
                planned = trainer_env["SANDBOX_UPSTREAM_URL"]
                assert planned == "http://127.0.0.1:7100", planned
                trainer_env["SANDBOX_UPSTREAM_URL"] = f"http://127.0.0.1:{forwarder_port}"
                assert "SANDBOX_API_KEY" not in trainer_env, "the trainer holds no key on the pool"
                yield dict(env=trainer_env, model=model, access_log=Path(r["facts"]["accessLog"]), forwarder_port=forwarder_port, runtime_log=runtime_log)
    finally:
        model.stop()


def test_a_session_runs_through_the_pods_forwarder_with_the_rollout_key_the_backend_minted_and_it_is_refused_after(forwarded):
    """The black-box rollout as a production sandbox runs it: the capture proxy calls the pod's forwarder with
    OpenEnv's placeholder key, the forwarder attaches the claim's rollout key, the ingress asks the verifier."""
    import http.client

    s = forwarded
    driver = driver_for(s["env"], "")  # no SANDBOX_API_KEY: the harness's placeholder, as the plan has it
    session = driver.create("Write solution.py that adds two numbers from stdin.", episode_id="ep1")
    claim = session.sandbox.sandbox_id
    try:
        assert session.wait_for_completion(timeout_s=scaled(60)) == 0
        (turn,) = session.fetch_proxy_trace()
        check_captured_turn(turn, s["model"])
        assert session.verify() == 1.0
        # The ingress let the call through as the claim's rollout (the verifier's X-Rollout-Id), not as an operator key.
        wait_for("the access log names the claim's rollout", lambda: f'"rollout":"{claim}"' in s["access_log"].read_text(errors="replace"), timeout=10)
        # No process shows a rollout key on its command line (the forwarder got it over its delivery port).
        assert [pid for pid, _pp, _st, cmdline in processes() if b"rk1." in cmdline] == []
    finally:
        session.close()
    assert [n for n, _, _ in tb.REC.deleted] == [claim], "closing the session deleted the claim"
    # The rollout ended: the forwarder's key is revoked, and the ingress refuses it from the next call on.
    conn = http.client.HTTPConnection("127.0.0.1", s["forwarder_port"], timeout=scaled(10))
    try:
        conn.request("POST", "/v1/chat/completions", body=b'{"model":"stub/model-1","messages":[]}', headers={"Content-Type": "application/json"})
        assert conn.getresponse().status == 401
    finally:
        conn.close()
    assert len(s["model"].requests) == 1, "nothing more reached the model"


def factory_for(stack, api_key: str, backend=None):
    opencode_env()
    from opencode_env.config import OpenCodeConfig
    from opencode_env.harness import OpenCodeSessionFactory
    from openenv.core.harness import VerifyResult

    def verifier(sandbox, task):
        ok = sandbox.exists("/home/user/workdir/solution.py") and sandbox.read_text("/home/user/workdir/solution.py") == REPLY
        return VerifyResult(env_reward=1.0 if ok else 0.0, done=True)

    kwargs = opencode_config_kwargs({**stack["env"], "SANDBOX_API_KEY": api_key})
    config = OpenCodeConfig(**kwargs, model="stub/model-1", agent_timeout_s=scaled(60), disabled_tools=["webfetch", "question"])
    backend = backend or AgentSandboxBackend.from_env(stack["env"], client_factory=tb.fake_client, handle_sigterm=False)
    return OpenCodeSessionFactory(config=config, sandbox_backend=backend, mode="transparent_proxy", verifier=verifier)


def verify_solution(sandbox) -> float:
    ok = sandbox.exists("/home/user/workdir/solution.py") and sandbox.read_text("/home/user/workdir/solution.py") == REPLY
    return 1.0 if ok else 0.0


def driver_for(env: dict[str, str], api_key: str, backend=None) -> CaptureSessionDriver:
    """The session driver with the trainer's config (the same kwargs the factory's config takes)."""
    kwargs = opencode_config_kwargs({**env, "SANDBOX_API_KEY": api_key})
    cfg = CaptureSessionConfig(**kwargs, model="stub/model-1", agent_timeout_s=scaled(60))
    backend = backend or AgentSandboxBackend.from_env(env, client_factory=tb.fake_client, handle_sigterm=False)
    return CaptureSessionDriver(cfg, backend, verifier=verify_solution)


def check_captured_turn(turn: dict, model: StubModel) -> None:
    """One model call, recorded by the proxy with the engine's token ids and logprobs, sent through the ingress."""
    assert turn["prompt_token_ids"] == list(range(1, 11))
    assert turn["completion_token_ids"] == [100 + i for i in range(len(turn["completion_token_ids"]))] != []
    assert turn["per_token_logps"][0] == pytest.approx(-0.1)
    assert turn["loss_mask"] == [0] * 10 + [1] * len(turn["completion_token_ids"])
    assert turn["response"]["choices"][0]["message"]["content"] == REPLY
    (req,) = model.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["body"]["model"] == "stub/model-1", "the proxy's --model"
    assert req["body"]["logprobs"] is True and req["body"]["return_token_ids"] is True, "the proxy asked for token ids and logprobs"
    headers = {k.lower(): v for k, v in req["headers"].items()}
    assert "authorization" not in headers, "the ingress checked the key and dropped it"
    assert headers.get("x-request-id"), "the request came through the ingress"


def test_a_session_runs_through_openenvs_capture_proxy_and_the_ingress_with_the_sandbox_key(stack):
    driver = driver_for(stack["env"], KEY)
    session = driver.create("Write solution.py that adds two numbers from stdin.", episode_id="ep1")
    claim = session.sandbox.sandbox_id
    try:
        assert session.wait_for_completion(timeout_s=scaled(60)) == 0
        # While the proxy runs with the key in its env: no process shows it on its command line.
        assert [pid for pid, _pp, _st, cmdline in processes() if KEY.encode() in cmdline] == []
        (turn,) = session.fetch_proxy_trace()
        check_captured_turn(turn, stack["model"])
        assert session.proxy_status()["upstream_errors"] == 0
        assert session.verify() == 1.0
        proxy_log = session.proxy_log()
        assert "POST /v1/chat/completions" in proxy_log and KEY not in proxy_log
    finally:
        session.close()
    assert [n for n, _, _ in tb.REC.deleted] == [claim], "closing the session deleted the claim"
    assert tb.REC.claims[0]["labels"]["agentrl.dev/episode_id"] == "ep1"
    assert shutdown.live() == []
    # The proxy and the agent died with the session; the key was logged nowhere.
    assert not [c for _p, _pp, st, c in processes() if b"openenv.core.harness.capture" in c and st != "Z"]
    assert KEY not in stack["runtime_log"].read_text(errors="replace")
    assert KEY not in stack["ingress_log"].read_text(errors="replace")


def test_a_wrong_key_is_refused_at_the_ingress_behind_openenvs_capture_proxy(stack):
    session = driver_for(stack["env"], "sk-not-a-valid-key-000000").create("Write solution.py.")
    try:
        session.wait_for_completion(timeout_s=scaled(60))  # the agent's exit status is tee's (the run command's pipe)
        assert stack["model"].requests == [], "nothing reached the model"
        events = [json.loads(line) for line in session.fetch_trace().splitlines() if line.startswith("{")]
        # The proxy answers an upstream auth failure as a gateway error (it never hands the agent a 401).
        assert any(e.get("type") == "error" and e.get("status") == 502 and "upstream returned 401" in e.get("body", "") for e in events), events
        assert session.proxy_status()["upstream_errors"] == 1
        assert session.verify() == 0.0
    finally:
        session.close()
    assert len(tb.REC.deleted) == 1


@pytest.mark.openenv_source
def test_openenvs_factory_runs_a_session_through_its_proxy_and_the_ingress_with_the_sandbox_key(stack):
    factory = factory_for(stack, KEY)
    session = factory.create("Write solution.py that adds two numbers from stdin.", episode_id="ep1")
    claim = session.sandbox.sandbox_id
    try:
        assert session.wait_for_completion(timeout_s=scaled(60)) == 0
        # While the proxy runs with the key in its env: no process shows it on its command line.
        assert [pid for pid, _pp, _st, cmdline in processes() if KEY.encode() in cmdline] == []
        trace = session.fetch_proxy_trace()
        assert len(trace) == 1, session.fetch_trace()
        turn = trace[0]
        assert turn["completion_token_ids"] == [100 + i for i in range(len(turn["completion_token_ids"]))]
        assert turn["per_token_logps"][0] == pytest.approx(-0.1)
        assert turn["request"]["logprobs"] is True, "the proxy asked for logprobs"
        (req,) = stack["model"].requests
        assert req["path"] == "/v1/chat/completions"
        assert req["body"]["model"] == "stub/model-1", "the proxy's --model-override"
        headers = {k.lower(): v for k, v in req["headers"].items()}
        assert "authorization" not in headers, "the ingress checked the key and dropped it"
        assert headers.get("x-request-id"), "the request came through the ingress"
        assert session.verify([]).env_reward == 1.0
    finally:
        session.close()
    assert [n for n, _, _ in tb.REC.deleted] == [claim], "closing the session deleted the claim"
    assert tb.REC.claims[0]["labels"]["agentrl.dev/episode_id"] == "ep1"
    assert shutdown.live() == []
    # The proxy and the agent died with the session; the key was logged nowhere.
    assert not [c for _p, _pp, st, c in processes() if b"interception.py" in c and st != "Z"]
    assert KEY not in stack["runtime_log"].read_text(errors="replace")
    assert KEY not in stack["ingress_log"].read_text(errors="replace")


@pytest.mark.openenv_source
def test_openenvs_factory_with_a_wrong_key_is_refused_at_the_ingress(stack):
    factory = factory_for(stack, "sk-not-a-valid-key-000000")
    session = factory.create("Write solution.py.")
    try:
        session.wait_for_completion(timeout_s=scaled(60))
        assert stack["model"].requests == [], "nothing reached the model"
        events = [json.loads(line) for line in session.fetch_trace().splitlines() if line.startswith("{")]
        assert any(e.get("type") == "error" and e.get("status") == 401 for e in events), events
        assert session.verify([]).env_reward == 0.0
    finally:
        session.close()
    assert len(tb.REC.deleted) == 1
