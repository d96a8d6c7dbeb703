"""The stack's agent-sandbox warm pool as a Harbor environment (harbor 0.25 and 0.26
``harbor.environments.base.BaseEnvironment``), over the project's own backend: a trial's sandbox is
a claim of ``AgentSandboxBackend.create()`` (the run label, a bounded lifetime, deletion on every
error, on SIGTERM and at exit, and the claim's shutdownTime after a SIGKILL), its commands and files
go through the runtime's HTTP API (``RuntimeHandle``), ``stop()`` deletes the claim.

Loaded by import path from Harbor's own CLI and config, no Harbor change::

    HARBOR_TELEMETRY=0 harbor run --env agent_rl_sandbox.harbor_env:AgentSandboxEnvironment ...
    EnvironmentConfig(import_path="agent_rl_sandbox.harbor_env:AgentSandboxEnvironment")

Where the pool is comes from the trainer's env (``AgentSandboxSettings.from_env()``, what the
TrainingNode sets). Per-task images: the task's ``[environment].docker_image`` picks its warm pool
from ``SANDBOX_TASK_POOLS`` (JSON {image: warm pool}) and the settings' own pool; a task whose image
no pool serves, or that builds its image, is refused before anything is claimed.

Refused up front, each with its fix (``harbor_checks``): a network policy the pool cannot enforce
exactly (public, no-network, an allowlist naming hosts outside the model path), GPUs (Harbor's own
check, ``capabilities.gpus`` is false), ``force_build``, Windows. Commands run as the sandbox's one
user (uid 65532 on the stack's pools); Harbor's ``user=`` cannot switch it and is logged, not honoured.

Needs harbor (Python >= 3.12). The package imports this module only on demand (``__init__``'s
``__getattr__``), so the trainer side (Python 3.11, no harbor) imports the package as before.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import re
import shlex
import tarfile
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import quote

try:
    from harbor.environments.base import BaseEnvironment, ExecResult, transfer_tar_filter
    from harbor.environments.capabilities import EnvironmentCapabilities
    from harbor.models.task.config import NetworkPolicy, TaskOS
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(f"agent_rl_sandbox.harbor_env needs harbor (pip install harbor==0.25.0 or harbor==0.26.0; Python >= 3.12): {e}") from e

from .agent_sandbox import AgentSandboxBackend, ClientFactory
from .handle import RuntimeHandle, SandboxError
from .harbor_checks import network_policy_problems, task_image_problems, task_pools
from .settings import AgentSandboxSettings, SettingsError

log = logging.getLogger("agent_rl_sandbox.harbor")

#: What Harbor's type() names this environment (an import-path environment, not an EnvironmentType member).
ENVIRONMENT_TYPE = "agent-sandbox"
#: Where tar archives of directory transfers are staged in the sandbox (writable on the pool's pods).
TRANSFER_DIR = "/tmp"
_LABEL_VALUE = re.compile(r"[^A-Za-z0-9_.-]")


class HarborTaskRefused(ValueError):
    """What of a Harbor task or trial the pool cannot honour; names every problem and its fix."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("agent-sandbox environment:\n  " + "\n  ".join(problems))
        self.problems = problems


class AgentSandboxEnvironment(BaseEnvironment):
    """A Harbor environment per trial, one claim of the stack's warm pool each.

    Extra keyword arguments (Harbor's ``--ek key=value`` / ``EnvironmentConfig.kwargs``):
    ``settings`` (an ``AgentSandboxSettings``; default from the env), ``environ`` (the env to read
    instead of ``os.environ``), ``client_factory`` (the official client's factory, or its
    ``"module:function"`` name; tests pass the trainer ServiceAccount's), ``handle_sigterm`` (default true: the backend deletes live claims on
    SIGTERM), ``lifetime_s`` (the claim's lifetime; default the task's agent + verifier timeouts,
    capped by the stack's maximum).
    """

    def __init__(
        self,
        *args: Any,
        settings: AgentSandboxSettings | None = None,
        environ: Mapping[str, str] | None = None,
        client_factory: ClientFactory | str | None = None,
        handle_sigterm: bool = True,
        lifetime_s: int | None = None,
        **kwargs: Any,
    ) -> None:
        env = os.environ if environ is None else environ
        if isinstance(client_factory, str):  # "module:function", as Harbor's --ek passes it
            import importlib

            module, _, attr = client_factory.partition(":")
            client_factory = getattr(importlib.import_module(module), attr)
        # Set before BaseEnvironment.__init__: it calls _validate_definition and the network checks.
        base = settings if settings is not None else AgentSandboxSettings.from_env(env)
        self._pools = task_pools(env, base.image, base.warm_pool)
        self._base_settings = base
        self._client_factory = client_factory
        self._handle_sigterm = handle_sigterm
        self._lifetime_s = lifetime_s
        self._handle: RuntimeHandle | None = None
        self._backend: AgentSandboxBackend | None = None
        self._user_noted = False
        super().__init__(*args, **kwargs)

    # --- what Harbor asks of a provider -------------------------------------------------------
    @staticmethod
    def type() -> str:
        return ENVIRONMENT_TYPE

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        # Allowlists of loopback and the forwarder's host only (network_policy_problems); hostnames
        # for "localhost". No GPUs (the pool's sandboxes are CPU-only), no mounts, no streaming, static.
        return EnvironmentCapabilities(
            network_allowlist=True,
            network_allowlist_hostnames=True,
            network_allowlist_ipv4_addresses=True,
            network_allowlist_ipv6_addresses=True,
        )

    @classmethod
    def preflight(cls, kwargs: Mapping[str, Any] | None = None) -> None:
        """Before any trial is queued: the env names a pool (Harbor calls this once).

        harbor 0.25 calls ``preflight()`` (``EnvironmentFactory.run_preflight``); harbor 0.26 calls
        ``preflight(kwargs=...)`` with the ``--ek`` options and asks overrides to call
        ``super().preflight(kwargs)`` (``harbor/environments/base.py``). Both are taken; given
        ``settings`` or ``environ`` in the kwargs, those are checked, as ``__init__`` would read them.
        """
        kwargs = dict(kwargs or {})
        base = super().preflight
        if "kwargs" in inspect.signature(base).parameters:  # harbor >= 0.26: its options check
            base(kwargs)
        else:
            base()
        if kwargs.get("settings") is not None:
            return
        try:
            AgentSandboxSettings.from_env(kwargs.get("environ"))
        except SettingsError as e:
            raise SystemExit(f"agent-sandbox environment: {e}") from None

    def validate_network_policy_support(self, network_policy: NetworkPolicy | None = None) -> None:
        super().validate_network_policy_support(network_policy)
        policy = network_policy or self._network_policy
        problems = network_policy_problems(policy.network_mode.value, list(policy.allowed_hosts), self._base_settings.upstream_url)
        if problems:
            raise HarborTaskRefused(problems)

    def _validate_definition(self) -> None:
        cfg = self.task_env_config
        problems: list[str] = []
        if cfg.os == TaskOS.WINDOWS:
            problems.append("[environment].os = 'windows': the pool's sandboxes are Linux pods")
        has_build = any((self.environment_dir / f).exists() for f in ("Dockerfile", "docker-compose.yaml", "docker-compose.yml"))
        problems += task_image_problems(cfg.docker_image, has_build, self._pools)
        if problems:
            raise HarborTaskRefused(problems)

    @property
    def settings(self) -> AgentSandboxSettings:
        """The settings of the pool serving this task's image."""
        image = self.task_env_config.docker_image
        if image and image in self._pools and self._pools[image] != self._base_settings.warm_pool:
            return replace(self._base_settings, warm_pool=self._pools[image], image=image)
        return self._base_settings

    # --- lifetime -------------------------------------------------------------------------------
    def _lifetime(self) -> int:
        if self._lifetime_s is not None:
            return int(self._lifetime_s)
        return self.settings.claim_lifetime_seconds

    async def start(self, force_build: bool) -> None:
        if force_build:
            raise HarborTaskRefused(["force_build: the pool's sandboxes are claimed warm from a pre-built image, never built (drop --force-build)"])
        if self._handle is not None:
            raise SandboxError(f"{self.session_id}: already started")
        self._backend = AgentSandboxBackend(self.settings, client_factory=self._client_factory, handle_sigterm=self._handle_sigterm)
        metadata = {"harbor-session": _LABEL_VALUE.sub("-", self.session_id)[:63].strip("-_.")}
        self._handle = await asyncio.to_thread(self._backend.create, timeout_s=self._lifetime(), metadata=metadata)
        self.logger.info(f"claimed {self._handle.sandbox_id} for {self.session_id}")
        # Harbor's output dirs (/logs/agent, /logs/verifier, /logs/artifacts), as other remote providers make them.
        targets = self._mount_targets(writable_only=True)
        made = await self.ensure_dirs(targets)
        if made is not None and made.return_code != 0:
            raise SandboxError(
                f"{self._handle.sandbox_id}: cannot make Harbor's dirs {targets} (exit {made.return_code}: {(made.stderr or '').strip()}): "
                "the pool's pods have a read-only root; the task image or the pool's template must provide them writable"
            )
        await self._upload_environment_dir_after_start()

    async def stop(self, delete: bool) -> None:
        """Deletes the claim: the pool's sandboxes are single-use (``delete=False`` cannot keep one)."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        if not delete:
            self.logger.info(f"{handle.sandbox_id}: delete=False, but a claimed sandbox is never kept; deleting its claim")
        await asyncio.to_thread(handle.kill)

    @property
    def handle(self) -> RuntimeHandle:
        if self._handle is None:
            raise SandboxError(f"{self.session_id}: not started")
        return self._handle

    def fetch_trace(self) -> dict[str, Any]:
        """The pod forwarder's record of the model calls (token ids, logprobs): RuntimeHandle.fetch_trace."""
        return self.handle.fetch_trace()

    # --- commands ---------------------------------------------------------------------------------
    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        user = self._resolve_user(user)
        if user is not None and not self._user_noted:
            self._user_noted = True
            self.logger.debug(f"user={user!r}: commands run as the sandbox's one user (the pool's pods cannot switch users)")
        merged = self._merge_env(env)
        result = await asyncio.to_thread(self.handle.exec, command, envs=merged, cwd=cwd, timeout=timeout_sec)
        return ExecResult(stdout=result.stdout, stderr=result.stderr, return_code=result.exit_code)

    # --- files -----------------------------------------------------------------------------------
    def _put(self, data: bytes, target_path: str) -> None:
        h = self.handle
        h.check_alive()
        h.client.call("PUT", f"/files?path={quote(target_path, safe='')}", body=data, timeout=60)

    def _get(self, source_path: str) -> bytes:
        h = self.handle
        h.check_alive()
        try:
            return h.client.call("GET", f"/files?path={quote(source_path, safe='')}", timeout=60)
        except SandboxError as e:
            if e.status == 404:
                raise FileNotFoundError(source_path) from None
            raise

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        await asyncio.to_thread(self._put, Path(source_path).read_bytes(), str(target_path))

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        data = await asyncio.to_thread(self._get, str(source_path))
        target = Path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        # The folder's contents, not the folder: /tests and /solution are mount points the sandbox's uid does not own (RuntimeHandle.upload_dir).
        await asyncio.to_thread(self.handle.upload_dir, source_dir, target_dir, staging_dir=TRANSFER_DIR)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        staged = f"{TRANSFER_DIR}/.hb-download-{uuid.uuid4().hex}.tar.gz"
        q = shlex.quote
        result = await self.exec(f"tar czf {q(staged)} -C {q(source_dir)} .", timeout_sec=600)
        try:
            if result.return_code != 0:
                raise SandboxError(f"download_dir {source_dir}: tar exited {result.return_code}: {result.stderr or result.stdout}")
            data = await asyncio.to_thread(self._get, staged)
        finally:
            await self.exec(f"rm -f {q(staged)}", timeout_sec=60)
        target = Path(target_dir)
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(tmp) / "dir.tar.gz"
            archive.write_bytes(data)
            with tarfile.open(archive, "r:gz") as tf:
                tf.extractall(path=target, filter=transfer_tar_filter)


#: How Harbor's CLI and config name this environment (``--env``, ``EnvironmentConfig.import_path``).
IMPORT_PATH = "agent_rl_sandbox.harbor_env:AgentSandboxEnvironment"


def on_the_pool(trial_config: Any) -> Any:
    """A Harbor ``TrialConfig`` (as openenv 0.10's ``openenv.harbor.rollout.build_trial_config``
    makes it) with its environment moved onto the stack's pool: ``import_path`` set to this class,
    ``type`` cleared, everything else kept.

    The smallest adapter for upstreams that name a sandbox by ``type=`` only (Harbor's
    ``EnvironmentConfig.type`` is an ``EnvironmentType`` enum, so a custom name fails validation):
    openenv.harbor's ``build_trial_config`` and TRL's ``trl.experimental.harbor`` (``HarborEnv``,
    ``EnvironmentConfig(type=environment_type)``). docs/guides/harbor.md names the one-line upstream
    change that would make it unneeded."""
    env = trial_config.environment
    return trial_config.model_copy(update={"environment": env.model_copy(update={"type": None, "import_path": IMPORT_PATH})})
