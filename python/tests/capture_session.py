"""One black-box opencode session driven through a sandbox backend the way OpenEnv's
`OpenCodeSessionFactory` drives it (huggingface/OpenEnv envs/opencode_env/harness.py,
mode="transparent_proxy"), with the in-sandbox intercepting proxy taken from PyPI's openenv
0.10.0: `openenv.core.harness.capture.server`, OpenEnv's capture proxy. opencode_env and its
`interception.py` are not on PyPI; this driver is what lets CI run the whole session from the
package registries alone. The tests marked `openenv_source` run OpenEnv's real factory instead.

Calls on the backend, in the factory's order (written here from reading it; none of its code):

    create(timeout_s=agent_timeout_s + 300, metadata={"episode_id": ...})
    exec("echo ok", timeout=5) until it answers ok                  (sandbox ready)
    exec("$HOME/.opencode/bin/opencode --version", timeout=10)     (opencode preinstalled?)
    write_text(opencode.json -> the ingress), write_text(task/instruction.md)
    exists(<the proxy's source>)                                     (proxy preinstalled?)
    start_bg(<proxy> > logs/agent/proxy.log, envs={upstream key})   (key in env, not argv)
    exec("curl -sf 127.0.0.1:7000/<health>", timeout=5) until up, every 0.5 s, 120 tries
    write_text(opencode.json -> the proxy)
    start_bg("opencode run --format json ... | tee logs/agent/opencode.jsonl", envs=...)
    job.wait(timeout); read_text(agent log); the proxy's trace; the verifier (exists/read_text)
    close: the agent's job killed, the proxy's job killed, sandbox.kill()

A bootstrap failure kills the sandbox and re-raises, as the factory does (the driver does the
same when the proxy does not come up, where the factory leaves the sandbox to its lifetime). Where the capture
proxy differs from interception.py, the driver follows the capture proxy:
- the agent's API key is a capture session minted in the proxy (`POST /sessions`, through exec
  curl in the sandbox), not the ingress key: unknown keys get 401 from the proxy. The ingress key
  reaches only the proxy, in its env (`OPENENV_LLM_API_KEY`), and goes upstream as
  `Authorization: Bearer <key>`;
- its health route is `/health`; the trace is read from the proxy (`GET
  /sessions/<id>/trace_entries`, the token-level records) instead of a JSON-lines file;
- it asks the upstream for vLLM's `return_token_ids` and takes the token ids from
  `prompt_token_ids` / `choices[].token_ids`, with `logprobs` and `top_logprobs=0`.
No install path: the pool has no egress, so a sandbox without opencode or the proxy is an error.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import time
from dataclasses import dataclass, field
from typing import Any, Callable

PROXY_PORT = 7000
PROXY_MODULE = "openenv.core.harness.capture.server"


@dataclass
class CaptureSessionConfig:
    """What the driver needs of OpenEnv's `OpenCodeConfig` (same names, same defaults)."""

    base_url: str
    api_key: str
    model: str
    sandbox_home: str = "/home/user"
    agent_timeout_s: float = 900.0
    request_timeout_ms: int = 600_000
    disabled_tools: list[str] = field(default_factory=lambda: ["webfetch", "question"])
    proxy_max_tokens_cap: int | None = 16384

    def path(self, rel: str) -> str:
        return f"{self.sandbox_home}/{rel}"


def opencode_json(cfg: CaptureSessionConfig, *, base_url: str, api_key: str) -> str:
    """opencode's config: one OpenAI-compatible provider `intercepted` serving the model."""
    name = cfg.model.split("/", 1)[-1]
    return json.dumps({
        "$schema": "https://opencode.ai/config.json",
        "model": f"intercepted/{name}",
        "provider": {"intercepted": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Intercepted",
            "options": {"baseURL": base_url, "apiKey": api_key, "timeout": cfg.request_timeout_ms},
            "models": {name: {"name": "Intercepted Model"}},
        }},
        "tools": {t: False for t in cfg.disabled_tools},
    }, indent=2)


class CaptureSession:
    """One live session: the sandbox, the proxy's job and capture session, the agent's job."""

    def __init__(self, sandbox: Any, cfg: CaptureSessionConfig, proxy_job: Any, capture_id: str, verifier: Callable[[Any], float] | None) -> None:
        self.sandbox = sandbox
        self.cfg = cfg
        self.proxy_job = proxy_job
        self.capture_id = capture_id
        self.agent_job: Any = None
        self._verifier = verifier

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{PROXY_PORT}"

    def start_agent(self) -> None:
        c = self.cfg
        cmd = (
            'export PATH="$HOME/.opencode/bin:$PATH" && '
            f"cd {c.path('workdir')} && "
            f'opencode run --format json "$(cat {c.path("task/instruction.md")})" '
            f"2>&1 | tee {c.path('logs/agent/opencode.jsonl')}"
        )
        envs = {
            "OPENAI_BASE_URL": f"{self.proxy_url}/v1",
            "OPENAI_API_KEY": self.capture_id,
            "OPENCODE_CONFIG": c.path(".config/opencode/opencode.json"),
        }
        self.agent_job = self.sandbox.start_bg(cmd, envs=envs)

    def wait_for_completion(self, timeout_s: float | None = None) -> int:
        return self.agent_job.wait(timeout=timeout_s if timeout_s is not None else self.cfg.agent_timeout_s)

    def fetch_trace(self) -> str:
        return self.sandbox.read_text(self.cfg.path("logs/agent/opencode.jsonl"))

    def _proxy_get(self, route: str) -> Any:
        r = self.sandbox.exec(f"curl -s {shlex.quote(self.proxy_url + route)}", timeout=30)
        if r.exit_code != 0:
            raise RuntimeError(f"GET {route} on the proxy failed ({r.exit_code}): {r.stderr}")
        return json.loads(r.stdout)

    def fetch_proxy_trace(self) -> list[dict[str, Any]]:
        """The proxy's token-level records of this session, one per model call."""
        out = self._proxy_get(f"/sessions/{self.capture_id}/trace_entries")
        if "entries" not in out:
            raise RuntimeError(f"the proxy has no trainable trace for this session: {out}")
        return out["entries"]

    def proxy_status(self) -> dict[str, Any]:
        return self._proxy_get(f"/sessions/{self.capture_id}")

    def proxy_log(self) -> str:
        return self.sandbox.read_text(self.cfg.path("logs/agent/proxy.log"))

    def verify(self) -> float | None:
        return None if self._verifier is None else self._verifier(self.sandbox)

    def close(self) -> None:
        for job in (self.agent_job, self.proxy_job):
            if job is not None:
                try:
                    job.kill()
                except Exception:  # noqa: BLE001 - as the factory: closing goes on
                    pass
        self.agent_job = self.proxy_job = None
        self.sandbox.kill()


class CaptureSessionDriver:
    """`OpenCodeSessionFactory(sandbox_backend=backend, mode="transparent_proxy").create(...)`,
    with OpenEnv's capture proxy in the sandbox."""

    def __init__(self, cfg: CaptureSessionConfig, backend: Any, verifier: Callable[[Any], float] | None = None) -> None:
        self.cfg = cfg
        self.backend = backend
        self.verifier = verifier

    def create(self, instruction: str, episode_id: str | None = None) -> CaptureSession:
        sandbox = self.backend.create(timeout_s=int(self.cfg.agent_timeout_s) + 300, metadata={"episode_id": episode_id} if episode_id else None)
        try:
            self._bootstrap(sandbox, instruction)
            proxy_job, capture_id = self._start_proxy(sandbox)
        except Exception:
            sandbox.kill()
            raise
        session = CaptureSession(sandbox, self.cfg, proxy_job, capture_id, self.verifier)
        try:
            sandbox.write_text(self.cfg.path(".config/opencode/opencode.json"), opencode_json(self.cfg, base_url=f"{session.proxy_url}/v1", api_key=capture_id))
            session.start_agent()
        except Exception:
            session.close()
            raise
        return session

    def _bootstrap(self, sandbox: Any, instruction: str) -> None:
        last = ""
        for _ in range(15):
            try:
                r = sandbox.exec("echo ok", timeout=5)
                if r.exit_code == 0 and "ok" in r.stdout:
                    break
                last = r.stderr or r.stdout or f"exit={r.exit_code}"
            except Exception as e:  # noqa: BLE001
                last = f"{type(e).__name__}: {e}"
            time.sleep(1.0)
        else:
            raise RuntimeError(f"sandbox did not become ready: {last}")
        r = sandbox.exec(f"{self.cfg.path('.opencode/bin/opencode')} --version", timeout=10)
        if r.exit_code != 0:
            raise RuntimeError(f"opencode is not in the sandbox image (no egress to install it): {r.stderr or r.stdout}")
        sandbox.write_text(self.cfg.path(".config/opencode/opencode.json"), opencode_json(self.cfg, base_url=self.cfg.base_url, api_key=self.cfg.api_key))
        sandbox.write_text(self.cfg.path("task/instruction.md"), instruction)

    def _start_proxy(self, sandbox: Any) -> tuple[Any, str]:
        spec = importlib.util.find_spec(PROXY_MODULE)
        # The sandbox's python is this venv's (see sandbox_path() in the tests): same file there.
        if spec is None or not sandbox.exists(spec.origin):
            raise RuntimeError(f"{PROXY_MODULE} is not in the sandbox (no egress to install it)")
        args = ["python", "-m", PROXY_MODULE, "--llm-url", self.cfg.base_url, "--model", self.cfg.model,
                "--capture-level", "tokens", "--host", "127.0.0.1", "--port", str(PROXY_PORT)]
        if self.cfg.proxy_max_tokens_cap is not None:
            args += ["--max-output-tokens", str(self.cfg.proxy_max_tokens_cap)]
        log = self.cfg.path("logs/agent/proxy.log")
        cmd = f"cd {self.cfg.path('proxy')} && {' '.join(shlex.quote(a) for a in args)} > {shlex.quote(log)} 2>&1"
        job = sandbox.start_bg(cmd, envs={"OPENENV_LLM_API_KEY": self.cfg.api_key})
        for _ in range(120):
            if sandbox.exec(f"curl -sf http://127.0.0.1:{PROXY_PORT}/health", timeout=5).exit_code == 0:
                break
            time.sleep(0.5)
        else:
            try:
                tail = sandbox.read_text(log)[-2000:]
            except Exception:  # noqa: BLE001
                tail = ""
            job.kill()
            raise RuntimeError(f"the capture proxy did not start within 60s. log:\n{tail}")
        r = sandbox.exec(f"curl -sf -X POST -H 'Content-Type: application/json' --data '{{}}' http://127.0.0.1:{PROXY_PORT}/sessions", timeout=30)
        if r.exit_code != 0:
            job.kill()
            raise RuntimeError(f"minting a capture session failed ({r.exit_code}): {r.stderr}")
        minted = json.loads(r.stdout)
        if minted.get("capture_level") != "tokens":
            job.kill()
            raise RuntimeError(f"the capture session would not record tokens: {minted}")
        return job, minted["session_id"]
