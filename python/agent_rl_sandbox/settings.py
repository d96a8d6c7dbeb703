"""The trainer's env contract, read in one place.

The TrainingNode sets these env vars on the trainer container from the SandboxPool's
description (``components/sandbox/trainer-env.ts``, ``trainerEnv``); hosted sandboxes only also get
the sandbox key from a Secret (``components/training/model.ts``, ``SECRET_ENV.sandboxKey``). A test renders the
real plan and reads it back through this module, so the two sides cannot drift.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

#: The ingress key, for hosted sandboxes only (secret env of the trainer there, never in trainerEnv). On the
#: stack's pools the trainer has none: each sandbox pod's forwarder holds it (forwarder.py).
API_KEY_ENV = "SANDBOX_API_KEY"
#: OpenCodeConfig.api_key's default (huggingface/OpenEnv envs/opencode_env/config.py), the key TRL's
#: opencode example leaves in place: harmless towards the pod's forwarder, which drops it.
PLACEHOLDER_API_KEY = "intercepted"
#: The rollout key verifier's admin key (secret env of the trainer; docs/design/rollout-keys.md).
ROLLOUT_ADMIN_KEY_ENV = "SANDBOX_ROLLOUT_ADMIN_KEY"
#: HOME in the pool's sandboxes: TRL's opencode example's SANDBOX_HOME (components/sandbox/model.ts).
DEFAULT_HOME = "/root"
#: The API group/version and shutdown policy the official client (k8s-agent-sandbox 1.0.8) hardcodes.
CLIENT_API_GROUP = "extensions.agents.x-k8s.io"
CLIENT_API_VERSION = "v1beta1"
CLIENT_SHUTDOWN_POLICY = "Delete"
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class SettingsError(ValueError):
    """Every problem with the env, each naming the variable and the fix."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("sandbox settings:\n  " + "\n  ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class AgentSandboxSettings:
    """Where and how the trainer claims sandboxes from the agent-sandbox warm pool."""

    namespace: str
    warm_pool: str
    run_label: str
    run_id: str
    #: The longest claim lifetime the admission policy admits (shutdownTime - creationTimestamp).
    max_lifetime_seconds: int
    #: The runtime's port in every sandbox pod.
    port: int = 8888
    #: The forwarder's trace port on the same pod IP (0: the pool has none, fetch_trace refuses).
    trace_port: int = 7101
    #: Largest answer read from a sandbox (a file, a command's output, the trace): enforced while
    #: streaming, so a sparse or endless file costs the trainer at most this much memory.
    max_read_bytes: int = 64 * 1024 * 1024
    #: HOME inside the sandbox (OpenCodeConfig.sandbox_home); /home/user leads there too.
    home: str = DEFAULT_HOME
    #: Where the agent's side of a sandbox reaches vLLM: its pod's forwarder (http://127.0.0.1:7100);
    #: OpenCodeConfig.base_url is this + "/v1" (TRL's --sandbox-vllm-url).
    upstream_url: str = ""
    #: The pool template's image ("" when unknown): the only image a sandbox of this pool runs.
    image: str = ""
    #: What every sandbox of the pool gets (sandboxes.cpu / sandboxes.memory); "" when unknown.
    cpu: str = ""
    memory: str = ""
    #: Seconds a claim may take to become Ready (warm: about a second; cold: image pull + start).
    ready_timeout_seconds: int = 300
    #: Claims ask for this much less than the maximum: the client's clock against the API server's.
    lifetime_margin_seconds: int = 60
    #: Extra claim labels (every claim also carries run_label=run_id).
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    #: Per-rollout keys: the verifier's admin URL ("" = off: the pods' forwarders hold the pool's key).
    rollout_keys_url: str = ""
    #: The port each sandbox pod's forwarder takes its rollout's key on, once (forwarder.py --key-port).
    forwarder_key_port: int = 0
    #: The verifier's admin key (secret: never in a repr or a log).
    rollout_admin_key: str = field(default="", repr=False)

    @property
    def claim_lifetime_seconds(self) -> int:
        """The longest lifetime this trainer asks for: a little under the admitted maximum."""
        return self.max_lifetime_seconds - self.lifetime_margin_seconds

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> "AgentSandboxSettings":
        env = os.environ if environ is None else environ
        problems: list[str] = []

        def need(name: str) -> str:
            value = env.get(name, "")
            if not value:
                problems.append(f"{name}: not set (the TrainingNode sets it from the SandboxPool; outside the stack, set it by hand)")
            return value

        def number(name: str, default: int | None = None) -> int:
            raw = env.get(name, "")
            if not raw and default is not None:
                return default
            try:
                value = int(raw)
                if value <= 0:
                    raise ValueError
                return value
            except ValueError:
                problems.append(f"{name}: {raw!r} is not a positive integer")
                return 0

        provider = env.get("SANDBOX_PROVIDER", "")
        if provider != "agent-sandbox":
            problems.append(f"SANDBOX_PROVIDER: {provider!r}: this backend serves the agent-sandbox pool (sandboxes.provider: agent-sandbox)")
        for name, expected in (("SANDBOX_API_GROUP", CLIENT_API_GROUP), ("SANDBOX_API_VERSION", CLIENT_API_VERSION), ("SANDBOX_SHUTDOWN_POLICY", CLIENT_SHUTDOWN_POLICY)):
            got = env.get(name)
            if got is not None and got != expected:
                problems.append(f"{name}: {got!r}, but k8s-agent-sandbox 1.0.8 only speaks {expected!r}")
        namespace = need("SANDBOX_NAMESPACE")
        warm_pool = need("SANDBOX_WARM_POOL")
        run_label = need("SANDBOX_RUN_LABEL")
        run_id = need("SANDBOX_RUN_ID")
        max_lifetime = number("SANDBOX_MAX_LIFETIME_SECONDS")
        port = number("SANDBOX_PORT", 8888)
        # "0": the pool has no forwarder trace port (the field's documented value; number() takes positives only).
        trace_port = 0 if env.get("SANDBOX_TRACE_PORT") == "0" else number("SANDBOX_TRACE_PORT", 7101)
        max_read = number("SANDBOX_MAX_READ_BYTES", 64 * 1024 * 1024)
        home = env.get("SANDBOX_HOME", "") or DEFAULT_HOME
        upstream = env.get("SANDBOX_UPSTREAM_URL", "")
        values: dict[str, Any] = dict(
            namespace=namespace, warm_pool=warm_pool, run_label=run_label, run_id=run_id,
            max_lifetime_seconds=max_lifetime, port=port, trace_port=trace_port, max_read_bytes=max_read, home=home, upstream_url=upstream,
            image=env.get("SANDBOX_IMAGE", ""), cpu=env.get("SANDBOX_CPU", ""), memory=env.get("SANDBOX_MEMORY", ""),
            rollout_keys_url=env.get("SANDBOX_ROLLOUT_KEYS_URL", ""),
            forwarder_key_port=number("SANDBOX_FORWARDER_KEY_PORT", 0) if env.get("SANDBOX_FORWARDER_KEY_PORT") else 0,
            rollout_admin_key=env.get(ROLLOUT_ADMIN_KEY_ENV, ""),
        )
        values.update(overrides)
        if problems:
            raise SettingsError(problems)
        return cls(**values)

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not _DNS_LABEL.match(self.namespace):
            problems.append(f"namespace {self.namespace!r} is not a DNS label")
        if not _LABEL_VALUE.match(self.run_id) or len(self.run_id) > 63:
            problems.append(f"run id {self.run_id!r} is not a label value")
        if self.claim_lifetime_seconds < 60:
            problems.append(
                f"max lifetime {self.max_lifetime_seconds}s leaves {self.claim_lifetime_seconds}s after the {self.lifetime_margin_seconds}s clock margin: raise sandboxes.maxLifetimeSeconds"
            )
        if not 0 < self.port < 65536:
            problems.append(f"port {self.port} out of range")
        if not 0 <= self.trace_port < 65536:
            problems.append(f"trace port {self.trace_port} out of range")
        if self.max_read_bytes < 1024 * 1024:
            problems.append(f"max read bytes {self.max_read_bytes} is under 1 MiB (SANDBOX_MAX_READ_BYTES)")
        if not self.home.startswith("/"):
            problems.append(f"home {self.home!r} is not absolute")
        if self.rollout_keys_url:
            if not 0 < self.forwarder_key_port < 65536:
                problems.append("SANDBOX_FORWARDER_KEY_PORT: per-rollout keys (SANDBOX_ROLLOUT_KEYS_URL) need the port the forwarders take the key on")
            if len(self.rollout_admin_key) < 16:
                problems.append(f"{ROLLOUT_ADMIN_KEY_ENV}: per-rollout keys (SANDBOX_ROLLOUT_KEYS_URL) need the verifier's admin key (16+ characters)")
        if problems:
            raise SettingsError(problems)


def opencode_config_kwargs(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``OpenCodeConfig`` fields the stack decides: ``base_url`` (what the agent's side calls + /v1:
    on the stack's pools the pod's forwarder), ``api_key`` and ``sandbox_home`` (HOME in the sandbox).

    ``api_key`` is OpenEnv's placeholder unless ``SANDBOX_API_KEY`` is set. The stack never sets it (its pools'
    forwarders hold each rollout's key); a caller outside the stack whose sandboxes call an ingress themselves may.
    Whatever key this returns lands in the env of the in-sandbox proxy, where the agent can read it: never set it
    towards a pool with a forwarder."""
    env = os.environ if environ is None else environ
    if not env.get("SANDBOX_UPSTREAM_URL"):
        raise SettingsError(["SANDBOX_UPSTREAM_URL: not set (the TrainingNode sets it from the SandboxPool)"])
    return {
        "base_url": env["SANDBOX_UPSTREAM_URL"].rstrip("/") + "/v1",
        "api_key": env.get(API_KEY_ENV) or PLACEHOLDER_API_KEY,
        "sandbox_home": env.get("SANDBOX_HOME", "") or DEFAULT_HOME,
    }
