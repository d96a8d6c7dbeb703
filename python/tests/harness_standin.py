"""Stand-in for OpenEnv's `opencode_env` session factory, on `openenv.core.harness`.

TRL's black-box recipe (examples/async_grpo_opencode/opencode_hf_sandbox.py) hands
`HarnessRolloutWorker` a `functools.partial` that builds OpenEnv's `OpenCodeSessionFactory`
(huggingface/OpenEnv envs/opencode_env/harness.py, at the commit that example pins) with
`sampling=`. That package is installable from git only, and no stored version of it has
`sampling=` or `fetch_training_trace()` (the versions that do are not readable here). This module
is the stand-in, written from OpenEnv 0.10.0's own protocols (`openenv.core.harness.rollout`:
`ResourceSessionFactory`, `ResourceSession`, `TrainableSession`; `training.TrainingTrace`), not
from that factory's code:

- `build_factory(*, sampling, ...)`: what the worker calls (module level: TRL pickles it into its
  spawned rollout child). It makes the backend with `AgentSandboxBackend.from_env()` (the env the
  TrainingNode sets on the trainer) unless one is passed in, and wraps the factory in
  `agent_rl_sandbox.trusted_trace.ForwarderTracedFactory`: the trainer trains on the forwarder's
  record of the rollout, the proxy's being the agent's to rewrite.
- `create(task, seed=, episode_id=)`: claims a sandbox, checks the real opencode CLI is in it,
  starts OpenEnv's capture proxy (`openenv.core.harness.capture.server`, PyPI's openenv 0.10.0) in
  the sandbox with the ingress key in its env, mints a capture session carrying the training
  `sampling` policy (the proxy enforces it on every upstream call), and starts `opencode run
  --format json <instruction>` with the proxy as its only provider and opencode's offline switches.
- `wait_for_completion()`, `fetch_training_trace()` (the proxy's trace entries as a validated
  `TrainingTrace`), `verify()` (runs solution.py in the sandbox), `close()` (agent, proxy, claim).

`run_trainer()` (``python harness_standin.py trainer ...``) is the trainer process the SIGTERM and
SIGKILL tests signal: it builds the same worker and waits for groups.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import secrets
import shlex
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from openenv.core.harness import ResourceSession, ResourceSessionFactory, TrainingTrace, VerifyResult

sys.path.insert(0, str(Path(__file__).resolve().parent))
from capture_session import CaptureSessionConfig, opencode_json  # noqa: E402
from opencode_cli import OFFLINE_ENV, VERSION as OPENCODE_VERSION  # noqa: E402
from waits import scaled  # noqa: E402

#: The capture proxy's port in the sandbox (OpenEnv's harness uses 7000 too).
PROXY_PORT = 7000
PROXY_MODULE = "openenv.core.harness.capture.server"
#: Seconds the proxy gets to answer /health (its imports take seconds on a busy 2-core machine), before the machine's factor (waits.py).
PROXY_START_S = 120.0
#: Env var naming a dir where each session writes the TrainingTrace it returned (for the tests).
TRACE_DIR_ENV = "STANDIN_TRACE_DIR"
#: A closed port every non-loopback HTTP(S) request of opencode is sent to: the proxy is its only route.
NO_ROUTE = "http://127.0.0.1:9"


def admin_header_path(cfg: CaptureSessionConfig) -> str:
    """The file holding the proxy's admin header (curl -H @file: the key on no command line)."""
    return cfg.path("logs/agent/.capture-admin")


def instruction_of(task: Any) -> str:
    """The dataset row's prompt (a message list) as the agent's instruction, as TRL's example's adapter does."""
    if isinstance(task, list) and task:
        last = task[-1]
        return str(last.get("content", "")) if isinstance(last, dict) else str(last)
    return str(task)


class StandInSession(ResourceSession):
    """One rollout: a claimed sandbox running the capture proxy and opencode."""

    def __init__(self, sandbox: Any, cfg: CaptureSessionConfig, proxy_url: str, proxy_job: Any, capture_id: str, episode_id: str | None) -> None:
        self.sandbox = sandbox
        self.admin_header = admin_header_path(cfg)
        self.cfg = cfg
        self.proxy_url = proxy_url
        self.proxy_job = proxy_job
        self.capture_id = capture_id
        self.episode_id = episode_id
        self.agent_job: Any = None

    # --- ResourceSession: the agent owns the loop, so there is no tool surface of our own --
    def initial_messages(self) -> list[dict[str, Any]]:
        return []

    def list_tools(self) -> list[Any]:
        return []

    def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        raise NotImplementedError("loop-owning session: opencode calls its own tools")

    # --- TrainableSession ---------------------------------------------------------------------
    def start_agent(self, instruction_path: str) -> None:
        c = self.cfg
        host = urlsplit(self.proxy_url).hostname
        cmd = (
            f"cd {c.path('workdir')} && "
            f'{c.path(".opencode/bin/opencode")} run --format json "$(cat {instruction_path})" '
            f"> {c.path('logs/agent/opencode.jsonl')} 2> {c.path('logs/agent/opencode.stderr')}"
        )
        envs = {
            **OFFLINE_ENV,
            "OPENCODE_CONFIG": c.path(".config/opencode/opencode.json"),
            # No route but the proxy's: every other HTTP(S) request goes to a closed port.
            "HTTP_PROXY": NO_ROUTE, "HTTPS_PROXY": NO_ROUTE, "http_proxy": NO_ROUTE, "https_proxy": NO_ROUTE,
            "NO_PROXY": host or "127.0.0.1", "no_proxy": host or "127.0.0.1",
        }
        self.agent_job = self.sandbox.start_bg(cmd, envs=envs)

    def wait_for_completion(self, timeout_s: float | None = None) -> int:
        return self.agent_job.wait(timeout=timeout_s if timeout_s is not None else self.cfg.agent_timeout_s)

    def _proxy_get(self, route: str) -> Any:
        r = self.sandbox.exec(f"curl -s -H @{shlex.quote(self.admin_header)} {shlex.quote(self.proxy_url + route)}", timeout=30)
        if r.exit_code != 0:
            raise RuntimeError(f"GET {route} on the capture proxy failed ({r.exit_code}): {r.stderr}")
        return json.loads(r.stdout)

    def fetch_training_trace(self) -> TrainingTrace:
        out = self._proxy_get(f"/sessions/{self.capture_id}/trace_entries")
        if "entries" not in out:
            raise ValueError(f"the capture proxy has no trainable trace for this session: {out}")
        trace = TrainingTrace.from_entries(out["entries"])
        if (d := os.environ.get(TRACE_DIR_ENV)):
            Path(d, f"{self.episode_id or self.capture_id}.json").write_text(json.dumps({
                "claim": self.sandbox.sandbox_id, "trace": trace.model_dump(mode="json"),
                "opencode": self.agent_log(),
            }))
        return trace

    def agent_log(self) -> str:
        try:
            return self.sandbox.read_text(self.cfg.path("logs/agent/opencode.jsonl"))
        except Exception:  # noqa: BLE001 - a log for the report, not a result
            return ""

    def verify(self, transcript: list[dict[str, Any]], final_state: Any | None = None) -> VerifyResult:
        """1.0 when the solution.py opencode wrote prints 5 for `2 3`."""
        workdir = self.cfg.path("workdir")
        if not self.sandbox.exists(f"{workdir}/solution.py"):
            return VerifyResult(env_reward=0.0, done=True)
        r = self.sandbox.exec("echo '2 3' | python3 solution.py", cwd=workdir, timeout=30)
        return VerifyResult(env_reward=1.0 if r.exit_code == 0 and r.stdout.strip() == "5" else 0.0, done=True)

    def close(self) -> None:
        for job in (self.agent_job, self.proxy_job):
            if job is not None:
                try:
                    job.kill()
                except Exception:  # noqa: BLE001 - closing goes on; the claim goes below
                    pass
        self.agent_job = self.proxy_job = None
        self.sandbox.kill()


class StandInSessionFactory(ResourceSessionFactory[StandInSession]):
    """`OpenCodeSessionFactory(config, sandbox_backend, mode="transparent_proxy", sampling=...)`, standing in."""

    def __init__(self, *, cfg: CaptureSessionConfig, backend: Any, sampling: dict[str, Any] | None, sandbox_timeout_s: int | None = None) -> None:
        self.cfg = cfg
        self.backend = backend
        self.sampling = dict(sampling or {})
        self.sandbox_timeout_s = sandbox_timeout_s if sandbox_timeout_s is not None else int(cfg.agent_timeout_s) + round(scaled(300))

    def create(self, task: Any, seed: int | None = None, episode_id: str | None = None) -> StandInSession:
        sandbox = self.backend.create(timeout_s=self.sandbox_timeout_s, metadata={"episode_id": episode_id} if episode_id else None)
        try:
            return self._start(sandbox, instruction_of(task), episode_id)
        except BaseException:
            sandbox.kill()
            raise

    def _start(self, sandbox: Any, instruction: str, episode_id: str | None) -> StandInSession:
        c = self.cfg
        r = sandbox.exec(f"{c.path('.opencode/bin/opencode')} --version", timeout=60)
        if r.exit_code != 0 or r.stdout.strip() != OPENCODE_VERSION:
            raise RuntimeError(f"opencode {OPENCODE_VERSION} is not in the sandbox image: {r.exit_code} {r.stdout!r} {r.stderr[-300:]!r}")
        instruction_path = c.path("task/instruction.md")
        sandbox.write_text(instruction_path, instruction)
        proxy_url, proxy_job = self._start_proxy(sandbox)
        try:
            capture_id = self._mint(sandbox, proxy_url)
            session = StandInSession(sandbox, c, proxy_url, proxy_job, capture_id, episode_id)
            # The agent's provider is the proxy, its API key the capture session (the proxy's multiplexing).
            sandbox.write_text(c.path(".config/opencode/opencode.json"), opencode_json(c, base_url=f"{proxy_url}/v1", api_key=capture_id))
            session.start_agent(instruction_path)
        except BaseException:
            proxy_job.kill()
            raise
        return session

    def _proxy_host(self, sandbox: Any) -> str:
        # A pod's loopback is its own; the simulated pods here share this machine's, each at its own
        # 127.x address, so the proxy binds there (two sessions at once would collide on 127.0.0.1:7000).
        host = urlsplit(sandbox.base_url).hostname or ""
        return host if host.startswith("127.") else "127.0.0.1"

    def _start_proxy(self, sandbox: Any) -> tuple[str, Any]:
        c = self.cfg
        host = self._proxy_host(sandbox)
        args = ["python", "-m", PROXY_MODULE, "--llm-url", c.base_url, "--model", c.model, "--capture-level", "tokens",
                "--host", host, "--port", str(PROXY_PORT)]
        if c.proxy_max_tokens_cap is not None:
            args += ["--max-output-tokens", str(c.proxy_max_tokens_cap)]
        log = c.path("logs/agent/proxy.log")
        cmd = f"{' '.join(shlex.quote(a) for a in args)} > {shlex.quote(log)} 2>&1"
        # The admin key gates the proxy's control plane (/sessions*: minting, traces); OpenEnv requires one
        # for a bind other than 127.0.0.1 (capture/server.py main). Both keys reach the proxy through its
        # env only, never a command line.
        admin = secrets.token_hex(16)
        sandbox.write_text(admin_header_path(c), f"Authorization: Bearer {admin}\n")
        job = sandbox.start_bg(cmd, envs={"OPENENV_LLM_API_KEY": c.api_key, "OPENENV_CAPTURE_ADMIN_KEY": admin})
        url = f"http://{host}:{PROXY_PORT}"
        bound = scaled(PROXY_START_S)
        deadline = time.monotonic() + bound
        while sandbox.exec(f"curl -sf {url}/health", timeout=5).exit_code != 0:
            if time.monotonic() > deadline:
                seen = sandbox.exec(f"tail -c 2000 {shlex.quote(log)}; ls -la {shlex.quote(c.path('logs/agent'))}", timeout=10)
                job.kill()
                raise RuntimeError(f"the capture proxy did not answer on {url} within {bound:g}s:\n{seen.stdout}{seen.stderr}")
            time.sleep(0.3)
        return url, job

    def _mint(self, sandbox: Any, proxy_url: str) -> str:
        body = json.dumps({"sampling": self.sampling} if self.sampling else {})
        header = shlex.quote(admin_header_path(self.cfg))
        r = sandbox.exec(f"curl -sf -X POST -H @{header} -H 'Content-Type: application/json' --data {shlex.quote(body)} {proxy_url}/sessions", timeout=60)
        if r.exit_code != 0:
            raise RuntimeError(f"minting a capture session failed ({r.exit_code}): {r.stdout} {r.stderr}")
        minted = json.loads(r.stdout)
        if minted.get("capture_level") != "tokens":
            raise RuntimeError(f"the capture session would not record tokens: {minted}")
        return minted["session_id"]


def build_factory(
    *,
    sampling: dict[str, Any],
    model: str,
    agent_timeout_s: float = 120.0,
    sandbox_timeout_s: int | None = None,
    backend: Any = None,
) -> Any:
    """What `HarnessRolloutWorker(harness_session_factory=partial(build_factory, ...))` calls with `sampling=`
    (the agent's and the default sandbox's budgets scaled, waits.py)."""
    from agent_rl_sandbox import opencode_config_kwargs
    from agent_rl_sandbox.agent_sandbox import AgentSandboxBackend
    from agent_rl_sandbox.trusted_trace import ForwarderTracedFactory

    cfg = CaptureSessionConfig(**opencode_config_kwargs(), model=model, agent_timeout_s=scaled(agent_timeout_s), disabled_tools=["webfetch", "question", "task"])
    inner = StandInSessionFactory(cfg=cfg, backend=backend if backend is not None else AgentSandboxBackend.from_env(), sampling=sampling, sandbox_timeout_s=sandbox_timeout_s)
    # The trainer trains on the forwarder's record, the proxy's only a cross-check (trusted_trace.py).
    return ForwarderTracedFactory(inner)


# --- the worker, as a trainer builds it -------------------------------------------------------
def make_worker(*, model: str, num_generations: int, prompts: list[str], factory: Any, temperature: float = 1.0):
    """TRL 1.16's HarnessRolloutWorker in loop-owning mode (harness_adapter=None), as the example
    builds it plus `eos_token_ids` (required by _AsyncRolloutLoop, async_rollout_worker.py:325;
    the example omits it). The tokenizer is grpo_support's tiny one: in loop-owning mode the worker
    reads token ids from the trace and never tokenizes."""
    from accelerate.state import PartialState
    from datasets import Dataset
    from trl.experimental.async_grpo.openenv_harness import HarnessRolloutWorker

    from grpo_support import build_tokenizer

    PartialState()  # AsyncGRPOTrainer's Accelerator does this; TRL's worker logs through accelerate

    tokenizer = build_tokenizer()
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": p}]} for p in prompts])
    return HarnessRolloutWorker(
        harness_session_factory=factory,
        harness_adapter=None,
        model_name=model,
        dataset=dataset,
        reward_funcs=[],
        processing_class=tokenizer,
        eos_token_ids=[tokenizer.eos_token_id],
        num_generations=num_generations,
        max_inflight_tasks=num_generations,
        vllm_server_url="http://127.0.0.1:9",  # unused in loop-owning mode: the agent talks to the model
        temperature=temperature,
        log_completions=False,
    )


def take_groups(worker: Any, groups: int, timeout_s: float) -> list[Any]:
    """RolloutSamples until `groups` distinct groups have arrived (a group's samples arrive together),
    within `timeout_s` scaled (waits.py)."""
    import queue

    samples: list[Any] = []
    seen: set[int] = set()
    timeout_s = scaled(timeout_s)
    deadline = time.monotonic() + timeout_s
    while len(seen) < groups:
        worker.check_health(stale_after_s=timeout_s)
        try:
            s = worker.rollout_buffer.get(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
        except queue.Empty:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(seen)} of {groups} groups within {timeout_s:g}s") from None
            continue
        samples.append(s)
        seen.add(s.group_id)
    # The score loop puts a group's rows one after another: take the rest of the last group too, and
    # stop at the first row of a later group (fast trials keep the buffer busy: a quiet spell may never come).
    while True:
        try:
            s = worker.rollout_buffer.get(timeout=2.0)
        except queue.Empty:
            return samples
        if s.group_id not in seen:
            return samples
        samples.append(s)


def run_trainer(argv: list[str] | None = None) -> int:
    """The trainer process: builds the worker and takes groups until stopped (or `--groups`)."""
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--num-generations", type=int, default=2)
    p.add_argument("--groups", type=int, default=0, help="0: run until signalled")
    p.add_argument("--sandbox-timeout", type=int, default=None)
    p.add_argument("--backend-in-trainer", action="store_true", help="build the backend here and pass it in the partial")
    p.add_argument("--ready-file", required=True)
    args = p.parse_args(argv)
    backend = None
    if args.backend_in_trainer:
        from agent_rl_sandbox.agent_sandbox import AgentSandboxBackend

        backend = AgentSandboxBackend.from_env()
    factory = functools.partial(build_factory, model=args.model, sandbox_timeout_s=args.sandbox_timeout, backend=backend)
    worker = make_worker(model=args.model, num_generations=args.num_generations, prompts=["Write solution.py that adds two numbers from stdin."], factory=factory)
    worker.start()
    Path(args.ready_file).write_text(str(os.getpid()))
    try:
        if args.groups:
            take_groups(worker, args.groups, timeout_s=600)
        else:
            while True:
                take_groups(worker, 1, timeout_s=3600)
    finally:
        worker.stop()
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["trainer"]:
        sys.exit(run_trainer(sys.argv[2:]))
    sys.exit("usage: harness_standin.py trainer ...")
