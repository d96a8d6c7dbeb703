"""The training trial's config (agent_rl_sandbox.harbor_trial) under harbor 0.25.0 and openenv 0.10.0
themselves: openenv's trial config for each agent, moved onto the pool with the capture proxy, its
agent the pre-installed check Harbor's own AgentFactory resolves; an image without the agent fails
the setup naming it. The whole trial on the simulated cluster: python/tests/test_harbor_trial.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from harbor.agents.factory import AgentFactory
from harbor.environments.base import ExecResult

from harbor_versions import needs_openenv

from agent_rl_sandbox.harbor_trial import (
    CAPTURED_IMPORT_PATH,
    NO_ROUTE,
    AgentNotInImage,
    PreinstalledMiniSweAgent,
    PreinstalledOpenCode,
    trial_config,
)

pytestmark = needs_openenv  # openenv's trial config: the training path's venv (harbor 0.25)
SAMPLING = {"temperature": 1.0, "top_p": 1.0}


def task(tmp: Path) -> Path:
    t = tmp / "t1"
    (t / "environment").mkdir(parents=True)
    (t / "instruction.md").write_text("Write solution.py.\n")
    (t / "task.toml").write_text('version = "1.0"\n')
    return t


def config(tmp: Path, agent: str):
    return trial_config(task_dir=task(tmp), agent=agent, model="stub/model-1", session_id="hbsession1", trials_dir=tmp / "trials",
                        trace_out=tmp / "trace.json", sampling=SAMPLING, capture_port=7123, step_limit=4)


def test_opencodes_trial_runs_the_preinstalled_agent_on_the_pool_through_the_capture_proxy(tmp_path):
    cfg = config(tmp_path, "opencode")
    assert cfg.environment.type is None and cfg.environment.import_path == CAPTURED_IMPORT_PATH
    assert cfg.environment.kwargs == {"capture": {"session_id": "hbsession1", "port": 7123, "model": "stub/model-1", "sampling": SAMPLING},
                                      "trace_out": str(tmp_path / "trace.json")}
    assert AgentFactory.get_agent_class_from_config(cfg.agent) is PreinstalledOpenCode
    # openenv's seam: the provider block names the capture proxy and the session as the key.
    (provider,) = cfg.agent.kwargs["opencode_config"]["provider"].values()
    assert provider["options"]["baseURL"] == "http://127.0.0.1:7123/v1" and provider["options"]["apiKey"] == "hbsession1"
    assert cfg.agent.kwargs["opencode_config"]["tools"] == {"task": False, "question": False, "webfetch": False}, "openenv's training settings"
    assert cfg.agent.env["OPENCODE_DISABLE_MODELS_FETCH"] == "1" and cfg.agent.env["HTTPS_PROXY"] == NO_ROUTE
    assert cfg.agent.env["NO_PROXY"] == "127.0.0.1"


def test_mini_swe_agents_trial_runs_the_preinstalled_agent_with_its_step_limit(tmp_path):
    cfg = config(tmp_path, "mini-swe-agent")
    assert AgentFactory.get_agent_class_from_config(cfg.agent) is PreinstalledMiniSweAgent
    assert cfg.agent.env["OPENAI_API_BASE"] == "http://127.0.0.1:7123/v1" and cfg.agent.env["MSWEA_API_KEY"] == "hbsession1"
    assert cfg.agent.kwargs["config"]["agent"]["step_limit"] == 4
    assert cfg.agent.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True" and cfg.agent.env["HTTP_PROXY"] == NO_ROUTE


def test_an_agent_not_wired_for_the_pool_is_refused_naming_the_ones_that_are(tmp_path):
    with pytest.raises(ValueError, match=r"agent 'claude-code': this path runs \['mini-swe-agent', 'opencode'\]"):
        config(tmp_path, "claude-code")


class NoAgentImage:
    """An environment whose image lacks every command (exit 127, as bash says)."""

    def __init__(self) -> None:
        self.commands: list[str] = []

    async def exec(self, command: str, **kw) -> ExecResult:
        self.commands.append(command)
        return ExecResult(stdout="", stderr="bash: opencode: command not found", return_code=127)


@pytest.mark.parametrize(("cls", "name"), [(PreinstalledOpenCode, "opencode"), (PreinstalledMiniSweAgent, "mini-swe-agent")])
def test_an_image_without_the_agent_fails_the_setup_naming_it_and_nothing_is_downloaded(cls, name):
    env = NoAgentImage()
    with pytest.raises(AgentNotInImage, match=f"{name} is not in the sandbox image .*the pool's sandboxes have no egress"):
        asyncio.run(cls.install(object(), env))
    assert env.commands == [f"command -v {name}" + (" && opencode --version" if name == "opencode" else "")]
