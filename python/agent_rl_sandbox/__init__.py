"""agent-rl-infra's sandbox side: an OpenEnv sandbox backend on the agent-sandbox warm pool
(``AgentSandboxBackend``, a drop-in for OpenEnv's ``HFSandboxBackend``), the runtime that serves
it inside every sandbox (``runtime.py``), the key-holding forwarder beside it (``forwarder.py``),
the per-rollout key verifier and its client (``rollout_keys.py``; all three standard library only),
and the trainer's env contract (``settings.py``).

Only the backend needs the Kubernetes client, and only the Harbor environment (``harbor_env.py``,
``AgentSandboxEnvironment``) needs harbor (Python >= 3.12); importing this package loads neither.
"""

from .handle import ExecResult, RuntimeBgJob, RuntimeHandle, SandboxError, SandboxGone
from .settings import AgentSandboxSettings, SettingsError, opencode_config_kwargs

__all__ = [
    "AgentSandboxBackend",
    "AgentSandboxEnvironment",
    "AgentSandboxSettings",
    "ExecResult",
    "RuntimeBgJob",
    "RuntimeHandle",
    "SandboxError",
    "SandboxGone",
    "SettingsError",
    "opencode_config_kwargs",
]


def __getattr__(name: str):  # PEP 562: the backend (and k8s-agent-sandbox) load on first use
    if name == "AgentSandboxBackend":
        from .agent_sandbox import AgentSandboxBackend

        return AgentSandboxBackend
    if name == "AgentSandboxEnvironment":  # Harbor's environment: needs harbor (Python >= 3.12)
        from .harbor_env import AgentSandboxEnvironment

        return AgentSandboxEnvironment
    raise AttributeError(name)
