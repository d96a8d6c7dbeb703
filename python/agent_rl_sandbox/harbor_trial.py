"""One Harbor trial of a black-box agent on the stack's pool, for training (harbor 0.25, Python >= 3.12).

The trainer side (TRL 1.16 + vLLM 0.29) is Python 3.11 and Harbor needs 3.12, so a rollout of a
Harbor agent runs as a process of the Harbor venv (``python -m agent_rl_sandbox.harbor_trial``,
started per rollout by ``agent_rl_sandbox.harbor_sessions`` on the trainer side) and hands back
one JSON file: the verifier's reward and the trace entries (token ids, logprobs) to train on.

The trial is Harbor's own ``Trial`` on openenv 0.10's trial config for the agent
(``openenv.harbor.rollout.build_trial_config``: its seam table wires each validated agent's base URL,
key and training settings), with three changes of the project's, each named:

- the environment is the stack's pool (``on_the_pool``), as ``CapturedPoolEnvironment`` below;
- the agent's install step is replaced by a check (``PreinstalledOpenCode``,
  ``PreinstalledMiniSweAgent``): the pool's sandboxes have no egress, so Harbor's installers (nvm +
  npm, curl | sh + uv) cannot run; the image must carry the agent, and a sandbox without it fails
  the trial at setup, naming the agent. The upstream change that would remove these: Harbor's
  installed agents skipping the download when their CLI answers ``--version`` already (as
  ``ensure_system_dependencies`` already does for system packages);
- the agent's model path. openenv.harbor runs its capture proxy on the trainer side, the agent's
  API key naming the session. On the stack the agent's one route to the model is the pod's
  forwarder (the only holder of the ingress key, which drops whatever key the agent sends), so the
  capture proxy runs inside the sandbox, as the opencode recipe's (``harness_standin``,
  OpenEnv's ``opencode_env``) does: agent -> capture proxy (the pod's loopback: it asks the model
  for token ids and logprobs and applies the trainer's sampling policy) -> forwarder -> ingress ->
  vLLM. What is trained on is the FORWARDER's record (``trusted_trace.trusted_entries``, another
  uid's memory, read by the trainer on the pod IP), the proxy's only a cross-check, exactly as for
  opencode; on a pool without a trace port (``SANDBOX_TRACE_PORT=0``) the proxy's record is all there
  is, and the result says so (``source``).

The trace is read in ``stop()``, before the claim is deleted (Harbor stops the environment after
the verifier), and written to the file the caller named.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import secrets
import shlex
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from harbor.agents.installed.mini_swe_agent import MiniSweAgent
from harbor.agents.installed.opencode import OpenCode
from harbor.environments.base import BaseEnvironment

from .harbor_checks import HARBOR_AGENTS
from .harbor_env import AgentSandboxEnvironment, on_the_pool
from .settings import opencode_config_kwargs
from .trusted_trace import trusted_entries

log = logging.getLogger("agent_rl_sandbox.harbor_trial")

#: OpenEnv's capture proxy, run in the sandbox by the sandbox's own python (the image carries openenv).
PROXY_MODULE = "openenv.core.harness.capture.server"
#: Its port on the pod's loopback (OpenEnv's harness uses 7000 too).
CAPTURE_PORT = 7000
#: Seconds the proxy gets to answer /health (its imports take seconds on a busy machine).
PROXY_START_S = 120.0
#: A closed port every other HTTP(S) request of the agent goes to: the capture proxy is its only route.
NO_ROUTE = "http://127.0.0.1:9"

#: opencode 1.18's switches for a sandbox with no egress (names read from its binary; python/tests/opencode_cli.py checks them).
OPENCODE_OFFLINE_ENV = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
}
#: mini-swe-agent 2.4's: no first-run setup prompt, no cost lookup for a model litellm does not list,
#: litellm's bundled model map instead of a download.
MINI_SWE_AGENT_OFFLINE_ENV = {
    "MSWEA_CONFIGURED": "true",
    "MSWEA_COST_TRACKING": "ignore_errors",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
}


class AgentNotInImage(RuntimeError):
    """The sandbox image does not carry the agent (the pool has no egress to install it)."""


class PreinstalledOpenCode(OpenCode):
    """Harbor's opencode agent whose install step checks the image's opencode instead of fetching it."""

    async def install(self, environment: BaseEnvironment) -> None:
        r = await environment.exec("command -v opencode && opencode --version", timeout_sec=60)
        if r.return_code != 0:
            raise AgentNotInImage(f"opencode is not in the sandbox image (exit {r.return_code}: {(r.stderr or r.stdout or '').strip()[-300:]}): "
                                  "the pool's sandboxes have no egress, so Harbor's installer (nvm, npm i -g opencode-ai) cannot run; bake it into the task image")


class PreinstalledMiniSweAgent(MiniSweAgent):
    """Harbor's mini-swe-agent whose install step checks the image's mini-swe-agent instead of fetching it."""

    async def install(self, environment: BaseEnvironment) -> None:
        r = await environment.exec("command -v mini-swe-agent", timeout_sec=60)
        if r.return_code != 0:
            raise AgentNotInImage(f"mini-swe-agent is not in the sandbox image (exit {r.return_code}: {(r.stderr or r.stdout or '').strip()[-300:]}): "
                                  "the pool's sandboxes have no egress, so Harbor's installer (curl | sh for uv, uv tool install) cannot run; bake it into the task image")


#: The agents this path runs: Harbor's name -> (the pre-installed subclass, the env its CLI gets).
AGENTS: dict[str, tuple[str, dict[str, str]]] = {
    "opencode": (f"{__name__}:PreinstalledOpenCode", OPENCODE_OFFLINE_ENV),
    "mini-swe-agent": (f"{__name__}:PreinstalledMiniSweAgent", MINI_SWE_AGENT_OFFLINE_ENV),
}
if set(AGENTS) != set(HARBOR_AGENTS):  # the list the stack's harbor.agent accepts (harbor-facts.ts HARBOR_AGENTS)
    raise ImportError(f"harbor_trial.AGENTS wires {sorted(AGENTS)} but harbor_checks.HARBOR_AGENTS lists {sorted(HARBOR_AGENTS)}: change both")


class CapturedPoolEnvironment(AgentSandboxEnvironment):
    """The pool's environment with OpenEnv's capture proxy started in the sandbox after the claim, and
    the rollout's trace read before the claim is deleted.

    Extra keyword arguments: ``capture`` (``session_id``: the capture session the agent's API key
    names; ``port``; ``model``; ``sampling``: the trainer's policy, enforced by the proxy on every
    call; ``max_output_tokens``), ``trace_out`` (the file ``stop()`` writes the trace to)."""

    def __init__(self, *args: Any, capture: dict[str, Any] | None = None, trace_out: str | None = None, **kwargs: Any) -> None:
        if not capture or not capture.get("session_id") or not capture.get("model"):
            raise ValueError("CapturedPoolEnvironment: capture={'session_id': ..., 'model': ...} is required")
        if not trace_out:
            raise ValueError("CapturedPoolEnvironment: trace_out (the file the trace is written to) is required")
        self._capture = dict(capture)
        self._trace_out = Path(trace_out)
        self._proxy_job: Any = None
        self._admin_header = f"/tmp/.capture-admin-{uuid.uuid4().hex}"
        self._upstream_env = kwargs.get("environ") if kwargs.get("environ") is not None else os.environ
        super().__init__(*args, **kwargs)

    @property
    def _proxy_url(self) -> str:
        return f"http://127.0.0.1:{int(self._capture.get('port') or CAPTURE_PORT)}"

    async def start(self, force_build: bool) -> None:
        await super().start(force_build)
        await asyncio.to_thread(self._start_proxy)

    def _start_proxy(self) -> None:
        h = self.handle
        upstream = opencode_config_kwargs(self._upstream_env)
        c = self._capture
        port = int(c.get("port") or CAPTURE_PORT)
        args = ["python", "-m", PROXY_MODULE, "--llm-url", upstream["base_url"], "--model", str(c["model"]), "--capture-level", "tokens",
                "--host", "127.0.0.1", "--port", str(port)]
        if c.get("max_output_tokens"):
            args += ["--max-output-tokens", str(int(c["max_output_tokens"]))]
        admin = secrets.token_hex(16)
        h.write_text(self._admin_header, f"Authorization: Bearer {admin}\n")
        proxy_log = "/logs/agent/capture-proxy.log"
        # Both keys reach the proxy through its env only, never a command line.
        self._proxy_job = h.start_bg(f"{' '.join(shlex.quote(a) for a in args)} > {proxy_log} 2>&1",
                                     envs={"OPENENV_LLM_API_KEY": upstream["api_key"], "OPENENV_CAPTURE_ADMIN_KEY": admin})
        bound = float(c.get("start_s") or PROXY_START_S)
        deadline = time.monotonic() + bound
        while h.exec(f"curl -sf {self._proxy_url}/health", timeout=10).exit_code != 0:
            exited = _exit_code(self._proxy_job)
            if exited is not None or time.monotonic() > deadline:
                seen = h.exec(f"tail -c 2000 {proxy_log}", timeout=10)
                why = f"exited {exited}" if exited is not None else f"did not answer within {bound:g}s"
                raise RuntimeError(f"{h.sandbox_id}: the capture proxy on {self._proxy_url} {why}:\n{seen.stdout}{seen.stderr}")
            time.sleep(0.3)
        body = json.dumps({"session_id": c["session_id"], **({"sampling": c["sampling"]} if c.get("sampling") else {})})
        r = h.exec(f"curl -sf -X POST -H @{self._admin_header} -H 'Content-Type: application/json' --data {shlex.quote(body)} {self._proxy_url}/sessions", timeout=60)
        if r.exit_code != 0:
            raise RuntimeError(f"{h.sandbox_id}: minting the capture session failed ({r.exit_code}): {r.stdout} {r.stderr}")
        minted = json.loads(r.stdout)
        if minted.get("session_id") != c["session_id"] or minted.get("capture_level") != "tokens":
            raise RuntimeError(f"{h.sandbox_id}: the capture session would not record tokens as {c['session_id']}: {minted}")
        self.logger.info(f"{h.sandbox_id}: capture proxy on {self._proxy_url}, session {c['session_id']}")

    def _proxy_entries(self) -> Any:
        h = self.handle
        r = h.exec(f"curl -s -H @{self._admin_header} {self._proxy_url}/sessions/{self._capture['session_id']}/trace_entries", timeout=60)
        if r.exit_code != 0:
            return f"GET trace_entries failed ({r.exit_code}): {r.stderr.strip()[-300:]}"
        try:
            out = json.loads(r.stdout)
        except ValueError as e:
            return f"trace_entries is not JSON: {e}"
        return out.get("entries") if isinstance(out, dict) and isinstance(out.get("entries"), list) else f"no entries: {str(out)[:300]}"

    def _collect(self) -> dict[str, Any]:
        """The rollout's trace: the forwarder's record cross-checked by the proxy's, or the proxy's alone on a pool without a trace port."""
        h = self.handle
        proxy = self._proxy_entries()
        out: dict[str, Any] = {"claim": h.sandbox_id, "session_id": self._capture["session_id"]}
        if getattr(h, "has_trace", False):
            try:
                entries, check = trusted_entries(h.fetch_trace(), proxy, rollout=h.sandbox_id)
                out.update(source="forwarder", entries=entries, check=check.__dict__)
            except Exception as e:  # noqa: BLE001 - no whole forwarder record: nothing trustworthy to train on (UntrustedTrace, or the read failed)
                out.update(source="forwarder", entries=None, error=f"{type(e).__name__}: {e}")
        elif isinstance(proxy, list):
            self.logger.warning(f"{h.sandbox_id}: the pool has no forwarder trace port (SANDBOX_TRACE_PORT=0): the trace is the in-sandbox proxy's, which the agent can rewrite")
            out.update(source="capture-proxy", entries=proxy)
        else:
            out.update(source="capture-proxy", entries=None, error=str(proxy))
        return out

    async def stop(self, delete: bool) -> None:
        if self._handle is not None:
            try:
                result = await asyncio.to_thread(self._collect)
            except Exception as e:  # noqa: BLE001 - the claim is deleted below whatever happened here
                result = {"claim": self._handle.sandbox_id, "entries": None, "error": f"{type(e).__name__}: {e}"}
            self._trace_out.write_text(json.dumps(result))
            if self._proxy_job is not None:
                try:
                    await asyncio.to_thread(self._proxy_job.kill)
                except Exception:  # noqa: BLE001 - the claim's deletion ends it anyway
                    pass
                self._proxy_job = None
        await super().stop(delete)


def _exit_code(job: Any) -> int | None:
    """The background job's exit code, or None while it runs."""
    try:
        return job.wait(timeout=0.05)
    except TimeoutError:
        return None


#: How Harbor loads it (the trial config's environment import path).
CAPTURED_IMPORT_PATH = f"{__name__}:CapturedPoolEnvironment"


def trial_config(*, task_dir: Path, agent: str, model: str, session_id: str, trials_dir: Path, trace_out: Path, sampling: dict[str, Any] | None,
                 capture_port: int = CAPTURE_PORT, agent_timeout_s: float | None = None, step_limit: int | None = None, trial_name: str | None = None) -> Any:
    """openenv's trial config for ``agent``, on the pool, with the pre-installed agent and the in-sandbox capture proxy."""
    from openenv.harbor.rollout import build_trial_config

    if agent not in AGENTS:
        raise ValueError(f"agent {agent!r}: this path runs {sorted(AGENTS)} (pre-installed in the pool's image)")
    config = build_trial_config(
        task_dir=task_dir, harness=agent, sandbox="docker", intercept_url=f"http://127.0.0.1:{capture_port}", session_id=session_id, model=model,
        trial_name=trial_name or f"hb-{task_dir.name[:24]}-{session_id[-8:]}", trials_dir=trials_dir, agent_timeout_sec=agent_timeout_s,
        agent_step_limit=step_limit, training=sampling is not None,
    )
    config = on_the_pool(config)
    import_path, offline = AGENTS[agent]
    no_route = {"HTTP_PROXY": NO_ROUTE, "HTTPS_PROXY": NO_ROUTE, "http_proxy": NO_ROUTE, "https_proxy": NO_ROUTE, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    # The name too: Harbor's AgentFactory takes a registered name ("opencode") over import_path.
    agent_cfg = config.agent.model_copy(update={"name": import_path, "import_path": import_path, "env": {**config.agent.env, **offline, **no_route}})
    capture = {"session_id": session_id, "port": capture_port, "model": model, "sampling": sampling}
    env_cfg = config.environment.model_copy(update={"import_path": CAPTURED_IMPORT_PATH, "kwargs": {**config.environment.kwargs, "capture": capture, "trace_out": str(trace_out)}})
    return config.model_copy(update={"agent": agent_cfg, "environment": env_cfg})


async def run_trial(**kw: Any) -> dict[str, Any]:
    """Runs one trial; returns the reward, the trace entries and what went wrong (never raises for a failed trial)."""
    from harbor.trial.trial import Trial

    trace_out = Path(kw["trace_out"])
    trace_out.unlink(missing_ok=True)
    config = trial_config(**kw)
    started = time.monotonic()
    trial = await Trial.create(config)
    result = await trial.run()
    rewards = result.verifier_result.rewards if result.verifier_result is not None else None
    trace = json.loads(trace_out.read_text()) if trace_out.exists() else {"entries": None, "error": "the environment wrote no trace (it never started)"}
    return {
        "agent": kw["agent"], "reward": (rewards or {}).get("reward"), "rewards": rewards,
        "exception": None if result.exception_info is None else f"{result.exception_info.exception_type}: {result.exception_info.exception_message}",
        "seconds": round(time.monotonic() - started, 1), "trial_dir": str(Path(kw["trials_dir"]) / config.trial_name), **trace,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m agent_rl_sandbox.harbor_trial", description="One Harbor trial on the stack's pool; writes its reward and trace as JSON.")
    p.add_argument("--task", required=True, type=Path, help="the Harbor task directory")
    p.add_argument("--agent", required=True, choices=sorted(AGENTS))
    p.add_argument("--model", required=True, help="the served model id (vLLM's --served-model-name)")
    p.add_argument("--session-id", default=None, help="the capture session (default: a fresh one)")
    p.add_argument("--sampling", default=None, help="the trainer's sampling policy, JSON (e.g. {\"temperature\": 1.0, \"top_p\": 1.0})")
    p.add_argument("--capture-port", type=int, default=CAPTURE_PORT)
    p.add_argument("--agent-timeout", type=float, default=None)
    p.add_argument("--step-limit", type=int, default=None)
    p.add_argument("--trials-dir", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path, help="where the result JSON is written")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not a.task.is_dir():
        p.error(f"--task {a.task}: not a directory")
    sampling = json.loads(a.sampling) if a.sampling else None
    if sampling is not None and not isinstance(sampling, dict):
        p.error("--sampling: a JSON object")
    session_id = a.session_id or f"hb{secrets.token_hex(12)}"
    a.trials_dir.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(run_trial(task_dir=a.task.resolve(), agent=a.agent, model=a.model, session_id=session_id, trials_dir=a.trials_dir.resolve(),
                                   trace_out=a.out.with_suffix(".trace.json"), sampling=sampling, capture_port=a.capture_port,
                                   agent_timeout_s=a.agent_timeout, step_limit=a.step_limit))
    a.out.write_text(json.dumps(result))
    print(json.dumps({k: result[k] for k in ("agent", "reward", "exception", "claim", "source") if k in result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
