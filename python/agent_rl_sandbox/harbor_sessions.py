"""Harbor trials as OpenEnv sessions for TRL's async GRPO rollout worker (the trainer side, Python 3.11).

TRL 1.16's ``HarnessRolloutWorker`` in loop-owning mode takes an OpenEnv ``ResourceSessionFactory``
whose sessions are ``TrainableSession``s (``wait_for_completion()``, ``fetch_training_trace()``) and
``verify()``. Harbor 0.25 needs Python >= 3.12 and the trainer's lock is 3.11 (vLLM 0.29), so this is
the project's adapter between them: each session is one Harbor trial run by the Harbor venv's
python (``python -m agent_rl_sandbox.harbor_trial``, its own process group), whose result file
carries the verifier's reward and the trace entries (the forwarder's record on a pool with a trace
port). The trial claims its own sandbox (Harbor's environment does), so the claim, its deletion and
its lifetime are the Harbor process's; ``close()`` ends that process group (SIGTERM: the backend
deletes the claim; the claim's ``shutdownTime`` covers a SIGKILL).

One factory may rotate over several agents (``agents``): rollout ``i`` runs ``agents[i % n]``, so one
GRPO group can hold trials of different harnesses of the same task.

Standard library only, plus openenv.core.harness (the trainer side has it).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

from openenv.core.harness import ResourceSession, ResourceSessionFactory, TrainingTrace, VerifyResult

from .trusted_trace import UntrustedTrace

#: The env var naming the Harbor venv's python (Python >= 3.12, harbor 0.25 + openenv 0.10 + this package).
HARBOR_PYTHON_ENV = "AGENT_RL_HARBOR_PYTHON"
#: Seconds a trial may take beyond its agent timeout (claim, setup, the verifier, stop).
TRIAL_OVERHEAD_S = 300.0


def task_directories(root: str | Path) -> list[str]:
    """The tasks under ``root``: ``[""]`` when ``root`` is one Harbor task (it holds ``task.toml``), else the
    names of its subdirectories that hold one, sorted. A root with neither is refused, naming it."""
    base = Path(root)
    if not base.is_dir():
        raise ValueError(f"task_dir {base}: not a directory")
    if (base / "task.toml").is_file():
        return [""]
    names = sorted(d.name for d in base.iterdir() if d.is_dir() and (d / "task.toml").is_file())
    if not names:
        raise ValueError(f"task_dir {base}: neither a Harbor task (no task.toml) nor a directory of tasks (no subdirectory holds one)")
    return names


def task_dir_for(root: str | Path, tasks: list[str], task: Any) -> Path:
    """The task directory a rollout's prompt names: the root itself when it is one task, else the subdirectory
    the prompt names (a string, or a chat prompt whose last user message is the name), refused when unknown."""
    base = Path(root)
    if tasks == [""]:
        return base
    name = task
    if isinstance(task, list):
        users = [m.get("content") for m in task if isinstance(m, dict) and m.get("role") == "user"]
        name = users[-1] if users else None
    if not isinstance(name, str) or name not in tasks:
        shown = name if isinstance(name, str) else type(task).__name__
        raise ValueError(f"the prompt names no task under {base}: {shown[:80]!r} (tasks: {', '.join(tasks[:10])}{' ...' if len(tasks) > 10 else ''})")
    return base / name


class HarborTrialSession(ResourceSession):
    """One rollout: one Harbor trial in a process of the Harbor venv."""

    def __init__(self, proc: subprocess.Popen, out: Path, log: Path, agent: str, timeout_s: float) -> None:
        self.proc = proc
        self.out = out
        self.log = log
        self.agent = agent
        self.timeout_s = timeout_s
        self._result: dict[str, Any] | None = None

    # --- ResourceSession: the agent owns the loop ---------------------------------------------
    def initial_messages(self) -> list[dict[str, Any]]:
        return []

    def list_tools(self) -> list[Any]:
        return []

    def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        raise NotImplementedError("loop-owning session: the Harbor agent calls its own tools")

    # --- TrainableSession ---------------------------------------------------------------------
    def wait_for_completion(self, timeout_s: float | None = None) -> int:
        try:
            return self.proc.wait(timeout=timeout_s if timeout_s is not None else self.timeout_s)
        except subprocess.TimeoutExpired:
            self.close()
            raise TimeoutError(f"the Harbor trial ({self.agent}) ran past {timeout_s or self.timeout_s:g}s") from None

    def result(self) -> dict[str, Any]:
        """The trial's result file (reward, entries, source, claim, exception)."""
        if self._result is None:
            if self.proc.poll() is None:
                raise RuntimeError("the Harbor trial is still running")
            if not self.out.exists():
                tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
                raise UntrustedTrace(f"the Harbor trial ({self.agent}) exited {self.proc.returncode} without a result:\n{tail}")
            self._result = json.loads(self.out.read_text())
        return self._result

    def fetch_training_trace(self) -> TrainingTrace:
        r = self.result()
        if not r.get("entries"):
            # UntrustedTrace: TRL scores the rollout as unscorable and goes on (trusted_trace.py says why a RuntimeError).
            raise UntrustedTrace(f"the Harbor trial ({self.agent}, claim {r.get('claim')}) has no trace to train on: {r.get('error') or r.get('exception') or 'no model call'}")
        return TrainingTrace.from_entries(r["entries"])

    def verify(self, transcript: list[dict[str, Any]] | None = None, final_state: Any | None = None) -> VerifyResult:
        """The task's verifier's reward, as Harbor graded it in the sandbox."""
        reward = self.result().get("reward")
        return VerifyResult(env_reward=None if reward is None else float(reward), done=True)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(10)


class HarborTrialSessionFactory(ResourceSessionFactory[HarborTrialSession]):
    """Starts one Harbor trial per ``create()`` (see the module docstring)."""

    def __init__(self, *, task_dir: str | Path, agents: list[str], model: str, sampling: dict[str, Any] | None = None, harbor_python: str | None = None,
                 workdir: str | Path | None = None, agent_timeout_s: float = 600.0, step_limit: int | None = None, capture_ports: list[int] | None = None) -> None:
        python = harbor_python or os.environ.get(HARBOR_PYTHON_ENV, "")
        if not python or not Path(python).exists():
            raise ValueError(f"{HARBOR_PYTHON_ENV}: the Harbor venv's python (harbor 0.25, Python >= 3.12) is required; got {python!r}")
        if not agents:
            raise ValueError("agents: at least one Harbor agent name")
        self.task_dir = Path(task_dir)
        self.tasks = task_directories(self.task_dir)
        self.agents = list(agents)
        self.model = model
        self.sampling = dict(sampling) if sampling else None
        self.python = python
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="harbor-rollouts-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.agent_timeout_s = agent_timeout_s
        self.step_limit = step_limit
        self.capture_ports = list(capture_ports or [])
        self._count = itertools.count()
        self._lock = threading.Lock()

    def create(self, task: Any, seed: int | None = None, episode_id: str | None = None) -> HarborTrialSession:
        task_dir = task_dir_for(self.task_dir, self.tasks, task)
        with self._lock:
            i = next(self._count)
        agent = self.agents[i % len(self.agents)]
        name = f"{i:04d}-{agent}-{uuid.uuid4().hex[:8]}"  # unique: factories may share a workdir (TRL rebuilds one per rollout child)
        out = self.workdir / f"{name}.json"
        log = self.workdir / f"{name}.log"
        argv = [self.python, "-m", "agent_rl_sandbox.harbor_trial", "--task", str(task_dir), "--agent", agent, "--model", self.model,
                "--trials-dir", str(self.workdir / "trials"), "--out", str(out), "--agent-timeout", str(self.agent_timeout_s)]
        if self.sampling:
            argv += ["--sampling", json.dumps(self.sampling)]
        if self.step_limit:
            argv += ["--step-limit", str(self.step_limit)]
        if self.capture_ports:
            # Pods here may share one loopback (the simulated pool): each rollout's proxy its own port.
            argv += ["--capture-port", str(self.capture_ports[i % len(self.capture_ports)])]
        if episode_id:
            argv += ["--session-id", f"hb{episode_id}"[:64]]
        # Harbor imports litellm, which fetches its model cost map at import unless told to keep its bundled one.
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        with open(log, "wb") as f:
            proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        return HarborTrialSession(proc, out, log, agent, self.agent_timeout_s + TRIAL_OVERHEAD_S)


def build_factory(*, sampling: dict[str, Any], **kwargs: Any) -> HarborTrialSessionFactory:
    """What ``HarnessRolloutWorker(harness_session_factory=functools.partial(build_factory, ...))`` calls with ``sampling=``."""
    return HarborTrialSessionFactory(sampling=sampling, **kwargs)

