"""The stack's Harbor pools as the Harbor environment sees them (issue 46 point 2), under harbor 0.25.0 itself
(test/harbor/run-tests.sh): the harbor-blackbox recipe's real plan (node + tsx: harbor_plan_facts.ts) renders one
warm pool per task image and the trainer env that maps each image to its pool (SANDBOX_TASK_POOLS); loaded from that
env alone, AgentSandboxEnvironment picks each task image's own pool, and refuses a task whose image no pool serves
before any claim, naming the image and the images the pools serve. The pools' writable dirs hold Harbor's own
EnvironmentPaths. Nothing is claimed: the recording STAND-IN of the official client (python/tests/test_backend.py)
records that no claim was made.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))

from harbor.environments.factory import EnvironmentFactory  # noqa: E402
from harbor.models.task.config import EnvironmentConfig as TaskEnvironmentConfig  # noqa: E402
from harbor.models.task.config import NetworkMode, NetworkPolicy  # noqa: E402
from harbor.models.trial.config import EnvironmentConfig  # noqa: E402
from harbor.models.trial.paths import EnvironmentPaths, TrialPaths  # noqa: E402

import test_backend as tb  # noqa: E402 - the recording stand-in of the official client
from agent_rl_sandbox.harbor_env import IMPORT_PATH, HarborTaskRefused  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
UNSERVED = "registry.example.com/agent-rl/harbor-task-not-in-the-stack:plan"


@lru_cache(maxsize=None)
def facts() -> dict:
    if shutil.which("node") is None or not (REPO / "node_modules/tsx").exists():
        pytest.skip("node and the repo's node_modules (npm ci) are needed to render the plan")
    out = subprocess.run(["node", "--import", "tsx", "python/harbor_tests/harbor_plan_facts.ts"], cwd=REPO, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def trainer_env() -> dict[str, str]:
    """What a trainer pod's env holds: the plain env and each secret env var (a test value here)."""
    f = facts()
    return {**f["trainerEnv"], **{name: f"test-value-of-{secret}" for name, secret in f["trainerSecretEnv"].items()}}


def environment(tmp: Path, image: str):
    """Harbor's factory loading the environment by import path, its pool settings from the trainer's env only."""
    env_dir = tmp / "environment"
    env_dir.mkdir(parents=True, exist_ok=True)
    trial = TrialPaths(trial_dir=tmp / "trial")
    trial.mkdir()
    return EnvironmentFactory.create_environment_from_config(
        config=EnvironmentConfig(import_path=IMPORT_PATH, kwargs={"environ": trainer_env(), "client_factory": tb.fake_client, "handle_sigterm": False}),
        environment_dir=env_dir, environment_name="task", session_id="task__abc123__env", trial_paths=trial,
        task_env_config=TaskEnvironmentConfig(docker_image=image),
        logger=logging.getLogger("test"), network_policy=NetworkPolicy(network_mode=NetworkMode.ALLOWLIST, allowed_hosts=["127.0.0.1"]),
    )


def test_the_plan_has_one_pool_per_task_image_and_the_trainer_env_maps_each():
    f = facts()
    assert len(f["pools"]) == 2 and len({p["warmPool"] for p in f["pools"]}) == 2
    assert json.loads(f["trainerEnv"]["SANDBOX_TASK_POOLS"]) == {p["image"]: p["warmPool"] for p in f["pools"]}
    assert f["trainerEnv"]["HARBOR_AGENT"] == "opencode"


def test_each_task_image_claims_from_its_own_pool(tmp_path):
    for i, pool in enumerate(facts()["pools"]):
        env = environment(tmp_path / str(i), pool["image"])
        assert (env.settings.image, env.settings.warm_pool) == (pool["image"], pool["warmPool"])


def test_a_task_whose_image_no_pool_serves_is_refused_before_any_claim_naming_it_and_the_served_images(tmp_path):
    tb.REC = tb.Recorder()
    with pytest.raises(HarborTaskRefused) as e:
        environment(tmp_path, UNSERVED)
    served = sorted(p["image"] for p in facts()["pools"])
    assert e.value.problems == [
        f"task image {UNSERVED!r}: no warm pool serves it (pools serve {served}): add it to the stack's harbor.taskImages and redeploy"
    ]
    assert tb.REC.claims == []


def test_every_pool_offers_harbors_own_dirs_writable():
    """harbor 0.25's EnvironmentPaths (and BaseInstalledAgent.setup's /installed-agent): what a trial writes."""
    paths = EnvironmentPaths()
    needed = {str(paths.logs_dir), str(paths.tests_dir), str(paths.solution_dir), "/installed-agent"}
    for pool in facts()["pools"]:
        assert needed <= set(pool["writable"]), (pool["warmPool"], needed - set(pool["writable"]))
        for sub in (paths.agent_dir, paths.verifier_dir, paths.artifacts_dir):
            assert str(sub).startswith(str(paths.logs_dir) + "/")
