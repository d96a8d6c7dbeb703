"""The stack's pool as a Harbor environment (agent_rl_sandbox.harbor_env), under harbor 0.25.0 itself
(Python 3.13: the Harbor fixture's venv, test/harbor/build.sh; test/harbor/run-tests.sh runs this file).

Loaded the way Harbor's CLI and trial config load a custom environment (EnvironmentFactory with
EnvironmentConfig(import_path=...)); what the pool cannot enforce is refused before any claim; a
started environment runs commands and moves files and directories through a real runtime
(agent_rl_sandbox.runtime on loopback, started as conftest.start_runtime starts it), its claim made
and deleted through the backend with the recording STAND-IN of the official client that
python/tests/test_backend.py uses (the real client against the real controller: test_controller.py).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))

from harbor.environments.factory import EnvironmentFactory  # noqa: E402
from harbor.models.task.config import EnvironmentConfig as TaskEnvironmentConfig  # noqa: E402
from harbor.models.task.config import NetworkMode, NetworkPolicy  # noqa: E402
from harbor.models.trial.config import EnvironmentConfig  # noqa: E402
from harbor.models.trial.paths import TrialPaths  # noqa: E402

import conftest as rt_conftest  # noqa: E402 - python/tests/conftest.py: start_runtime, stop_process
import test_backend as tb  # noqa: E402 - the recording stand-in of the official client
from agent_rl_sandbox import AgentSandboxSettings, shutdown  # noqa: E402
from agent_rl_sandbox.harbor_env import AgentSandboxEnvironment, HarborTaskRefused  # noqa: E402
from harbor_versions import needs_openenv  # noqa: E402

IMPORT_PATH = "agent_rl_sandbox.harbor_env:AgentSandboxEnvironment"
POOL_IMAGE = "registry.example/agent-rl/sandbox@sha256:" + "a" * 64
OTHER_IMAGE = "registry.example/tasks/swe-1@sha256:" + "b" * 64
ALLOW_FORWARDER = NetworkPolicy(network_mode=NetworkMode.ALLOWLIST, allowed_hosts=["127.0.0.1"])


def settings(port: int = 8888) -> AgentSandboxSettings:
    return AgentSandboxSettings(
        namespace="arl-dev-sandboxes", warm_pool="sandbox-pool-r1", run_label="agentrl.dev/run", run_id="r1",
        max_lifetime_seconds=3600, port=port, trace_port=0, image=POOL_IMAGE, upstream_url="http://127.0.0.1:7100",
    )


def make(tmp: Path, *, image: str | None = POOL_IMAGE, policy: NetworkPolicy | None = ALLOW_FORWARDER, port: int = 8888,
         environ: dict[str, str] | None = None, dockerfile: bool = False, gpus: int | None = None, **kw):
    env_dir = tmp / "environment"
    env_dir.mkdir(exist_ok=True)
    if dockerfile:
        (env_dir / "Dockerfile").write_text("FROM debian:trixie\n")
    trial = TrialPaths(trial_dir=tmp / "trial")
    trial.mkdir()
    return EnvironmentFactory.create_environment_from_config(
        config=EnvironmentConfig(import_path=IMPORT_PATH, kwargs={"settings": settings(port), "environ": environ or {}, "client_factory": tb.fake_client, "handle_sigterm": False, **kw}),
        environment_dir=env_dir, environment_name="hello", session_id="hello__abc123__env", trial_paths=trial,
        task_env_config=TaskEnvironmentConfig(docker_image=image, gpus=gpus),
        logger=logging.getLogger("test"), network_policy=policy,
    )


def test_harbors_factory_loads_it_by_import_path(tmp_path):
    env = make(tmp_path)
    assert type(env) is AgentSandboxEnvironment and env.type() == "agent-sandbox"
    assert env.capabilities.network_allowlist and not env.capabilities.disable_internet and not env.capabilities.gpus


#: The env the TrainingNode renders for the pool (the names AgentSandboxSettings.from_env reads).
POOL_ENV = {
    "SANDBOX_PROVIDER": "agent-sandbox", "SANDBOX_NAMESPACE": "arl-dev-sandboxes", "SANDBOX_WARM_POOL": "sandbox-pool-r1",
    "SANDBOX_RUN_LABEL": "agentrl.dev/run", "SANDBOX_RUN_ID": "r1", "SANDBOX_MAX_LIFETIME_SECONDS": "3600",
    "SANDBOX_UPSTREAM_URL": "http://127.0.0.1:7100",
}
#: harbor 0.26 passes the --ek options to preflight (EnvironmentFactory.run_preflight(..., kwargs)); 0.25 passes nothing.
PREFLIGHT_TAKES_KWARGS = "kwargs" in inspect.signature(EnvironmentFactory.run_preflight).parameters


@pytest.mark.parametrize("call", ["harbor 0.25: preflight()", "harbor 0.26: preflight(kwargs=...)"])
def test_preflight_takes_both_harbors_calls_and_refuses_an_env_without_a_pool(call, monkeypatch):
    for name in POOL_ENV:
        monkeypatch.delenv(name, raising=False)
    if call.startswith("harbor 0.25"):
        with pytest.raises(SystemExit, match=r"(?s)agent-sandbox environment: .*SANDBOX_WARM_POOL: not set"):
            AgentSandboxEnvironment.preflight()
        for name, value in POOL_ENV.items():
            monkeypatch.setenv(name, value)
        AgentSandboxEnvironment.preflight()
    else:  # the --ek environ is what __init__ reads, so preflight checks it, not the process env
        with pytest.raises(SystemExit, match=r"(?s)agent-sandbox environment: .*SANDBOX_WARM_POOL: not set"):
            AgentSandboxEnvironment.preflight(kwargs={"environ": {}})
        AgentSandboxEnvironment.preflight(kwargs={"environ": POOL_ENV, "handle_sigterm": False})
        AgentSandboxEnvironment.preflight(kwargs={"settings": settings()})
        with pytest.raises(SystemExit, match="SANDBOX_WARM_POOL: not set"):  # no --ek: Harbor passes None, the process env counts
            AgentSandboxEnvironment.preflight(kwargs=None)
        for name, value in POOL_ENV.items():
            monkeypatch.setenv(name, value)
        AgentSandboxEnvironment.preflight(kwargs=None)


def test_harbors_own_preflight_call_runs_it_by_import_path(monkeypatch):
    for name in POOL_ENV:
        monkeypatch.delenv(name, raising=False)
    extra = {"kwargs": {"environ": {}}} if PREFLIGHT_TAKES_KWARGS else {}
    with pytest.raises(SystemExit, match="SANDBOX_WARM_POOL: not set"):
        EnvironmentFactory.run_preflight(None, import_path=IMPORT_PATH, **extra)
    extra = {"kwargs": {"environ": POOL_ENV}} if PREFLIGHT_TAKES_KWARGS else {}
    for name, value in POOL_ENV.items():
        monkeypatch.setenv(name, value)
    EnvironmentFactory.run_preflight(None, import_path=IMPORT_PATH, **extra)


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (NetworkPolicy(), "network_mode 'public': the pool's sandboxes have no route out"),
        (NetworkPolicy(network_mode=NetworkMode.NO_NETWORK), "network_mode='no-network' is not supported by agent-sandbox"),
        (NetworkPolicy(network_mode=NetworkMode.ALLOWLIST, allowed_hosts=["pypi.org", "127.0.0.1"]), "allowed_hosts ['pypi.org']: the pool's sandboxes cannot reach them"),
        (NetworkPolicy(network_mode=NetworkMode.ALLOWLIST, allowed_hosts=["10.0.0.0/8"]), "with IPv4 CIDR ranges is not supported by agent-sandbox"),
    ],
)
def test_a_network_policy_the_pool_cannot_enforce_is_refused_before_any_claim(tmp_path, policy, message):
    tb.REC = tb.Recorder()
    with pytest.raises(ValueError) as e:
        make(tmp_path, policy=policy)
    assert message in str(e.value)
    assert tb.REC.claims == []


def test_a_task_image_no_pool_serves_is_refused_naming_it(tmp_path):
    with pytest.raises(HarborTaskRefused) as e:
        make(tmp_path, image=OTHER_IMAGE)
    assert f"task image {OTHER_IMAGE!r}: no warm pool serves it" in str(e.value)


def test_a_task_image_picks_its_own_warm_pool(tmp_path):
    env = make(tmp_path, image=OTHER_IMAGE, environ={"SANDBOX_TASK_POOLS": f'{{"{OTHER_IMAGE}": "sandbox-pool-swe-1"}}'})
    assert env.settings.warm_pool == "sandbox-pool-swe-1" and env.settings.image == OTHER_IMAGE


def test_a_task_that_builds_its_image_and_a_gpu_task_are_refused(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(HarborTaskRefused) as e:
        make(tmp_path / "a", image=None, dockerfile=True)
    assert "the task builds its image" in str(e.value)
    with pytest.raises(RuntimeError) as e:
        make(tmp_path / "b", gpus=1)
    assert "does not support GPU allocation" in str(e.value)


def test_force_build_is_refused(tmp_path):
    env = make(tmp_path)
    with pytest.raises(HarborTaskRefused, match="force_build"):
        asyncio.run(env.start(force_build=True))


def test_a_started_environment_runs_commands_moves_files_and_deletes_its_claim(tmp_path):
    tb.REC = tb.Recorder()
    (tmp_path / "rt").mkdir()
    runtime = rt_conftest.start_runtime(tmp_path / "rt")
    try:
        env = make(tmp_path, port=runtime.port)

        async def trial() -> None:
            await env.start(force_build=False)
            (claim,) = tb.REC.claims
            assert claim["warmpool"] == "sandbox-pool-r1" and claim["labels"]["agentrl.dev/run"] == "r1"
            assert claim["labels"]["agentrl.dev/harbor-session"] == "hello__abc123__env"
            r = await env.exec("echo out; echo err >&2; exit 3", env={"X": "1"})
            assert (r.return_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
            r = await env.exec('printf %s "$X"', env={"X": "from-harbor"}, cwd=str(runtime.home))
            assert r.stdout == "from-harbor"
            r = await env.exec("sleep 5", timeout_sec=1)
            assert r.return_code == 124
            src = tmp_path / "src"
            (src / "sub").mkdir(parents=True)
            (src / "sub" / "bin.dat").write_bytes(bytes(range(256)))
            (src / "a.txt").write_text("A")
            target = str(runtime.home / "task")
            await env.upload_dir(src, target)
            await env.upload_file(src / "a.txt", f"{target}/b.txt")
            assert (await env.exec(f"cat {target}/a.txt {target}/b.txt")).stdout == "AA"
            back = tmp_path / "back"
            await env.download_dir(target, back)
            assert (back / "sub" / "bin.dat").read_bytes() == bytes(range(256)) and (back / "b.txt").read_text() == "A"
            await env.download_file(f"{target}/sub/bin.dat", tmp_path / "one.dat")
            assert (tmp_path / "one.dat").read_bytes() == bytes(range(256))
            with pytest.raises(FileNotFoundError):
                await env.download_file(f"{target}/missing", tmp_path / "x")
            assert await env.is_dir(target) and await env.is_file(f"{target}/a.txt")
            await env.stop(delete=True)

        asyncio.run(trial())
        assert [d[0] for d in tb.REC.deleted] == [tb.REC.claims[0]["claim_name"]]
        assert shutdown.live() == []
    finally:
        rt_conftest.stop_process(runtime.proc)


def test_the_package_still_imports_without_harbor():
    import subprocess

    code = "import sys; sys.modules['harbor'] = None; import agent_rl_sandbox; print(sorted(agent_rl_sandbox.__all__)[:2])"
    out = subprocess.run([sys.executable, "-c", code], cwd=TESTS.parent, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    code = "import sys; sys.modules['harbor'] = None; from agent_rl_sandbox import AgentSandboxEnvironment"
    out = subprocess.run([sys.executable, "-c", code], cwd=TESTS.parent, capture_output=True, text=True, timeout=60)
    assert "agent_rl_sandbox.harbor_env needs harbor (pip install harbor==0.25.0 or harbor==0.26.0; Python >= 3.12)" in out.stderr


@needs_openenv
@pytest.mark.parametrize("harness", ["opencode", "mini-swe-agent"])
def test_openenvs_trial_config_moved_onto_the_pool_loads_this_environment(tmp_path, harness):
    """openenv 0.10's own build_trial_config (type= only) through the adapter, then Harbor's factory."""
    from harbor.environments.factory import EnvironmentFactory as Factory
    from openenv.harbor.rollout import build_trial_config

    from agent_rl_sandbox.harbor_env import IMPORT_PATH as PATH, on_the_pool

    task = tmp_path / "task"
    (task / "environment").mkdir(parents=True)
    config = build_trial_config(
        task_dir=task, harness=harness, sandbox="docker", intercept_url="http://127.0.0.1:7000/v1", session_id="oe-1",
        model="stub/model-1", trial_name="t1", trials_dir=tmp_path / "trials",
    )
    assert config.environment.type == "docker" and config.environment.import_path is None
    moved = on_the_pool(config)
    assert moved.environment.type is None and moved.environment.import_path == PATH == IMPORT_PATH
    assert moved.agent == config.agent and moved.environment.delete == config.environment.delete
    (tmp_path / "trial").mkdir()
    env = Factory.create_environment_from_config(
        config=moved.environment.model_copy(update={"kwargs": {"settings": settings(), "environ": {}, "client_factory": tb.fake_client, "handle_sigterm": False}}),
        environment_dir=task / "environment", environment_name="t", session_id="t1__env", trial_paths=TrialPaths(trial_dir=tmp_path / "trial"),
        task_env_config=TaskEnvironmentConfig(docker_image=POOL_IMAGE), network_policy=ALLOW_FORWARDER,
    )
    assert isinstance(env, AgentSandboxEnvironment)


#: A pod's view of / for a runtime on this machine: a private mount namespace where / is an overlay of the host's
#: (writes land in a tmpfs and vanish with the namespace), so Harbor's fixed paths (/logs, /tests, /solution) exist as
#: mount points, as in the task image, and nothing of the host changes. /opt carries the overlay's layers; inside,
#: sandbox_root remounts / read-only and puts the Harbor pool's emptyDirs on those paths (emptydir_root "").
POD_ROOT = r"""set -e
dirs=$1; chroot=$2; shift 2
mount -t tmpfs -o mode=0755 tmpfs /opt
mkdir /opt/upper /opt/work /opt/root
mount -t overlay overlay -o lowerdir=/,upperdir=/opt/upper,workdir=/opt/work /opt/root
for d in proc sys dev; do mount --rbind /$d /opt/root/$d; done
IFS=:
for d in $dirs; do mkdir -p "/opt/root$d"; done
unset IFS
exec "$chroot" /opt/root "$@"
"""


def start_runtime_in_pod_root(tmp: Path):
    """conftest.start_runtime's runtime as the Harbor pool's template runs it (harbor_plan_facts.ts: its uid, a
    read-only root, its emptyDirs at their paths), its argv run under POD_ROOT (needs root: unshare -m)."""
    from test_harbor_pools import facts
    import os
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.fail("this test needs root and unshare (a private mount namespace for the runtime's / overlay)")
    import sandbox_root

    spec = facts()["pools"][0]["podSpec"]
    (container,) = spec["containers"]
    dirs = ":".join(sandbox_root.rendered(spec, container)["empty_dirs"])  # the pool's writable dirs: /logs, /tests, ...
    # chroot by its path: the runtime's env has the image's PATH, without /usr/sbin.
    return rt_conftest.start_runtime(tmp, pod=(spec, container), emptydir_root="",
                                     wrap=["unshare", "-m", "--propagation", "private", "sh", "-c", POD_ROOT, "sh", dirs, shutil.which("chroot")])


def write_task(root: Path) -> Path:
    """A minimal Harbor task, named here: `add-two` (the oracle writes /root/answer.txt; the verifier
    checks it and writes Harbor's reward file). Its image is the pool's; its network, the forwarder only."""
    task = root / "add-two"
    for d in ("environment", "solution", "tests"):
        (task / d).mkdir(parents=True)
    (task / "instruction.md").write_text("Write the sum of 2 and 3 to /root/answer.txt.\n")
    (task / "task.toml").write_text(
        'version = "1.0"\n[agent]\ntimeout_sec = 120\n[verifier]\ntimeout_sec = 120\n'
        f'[environment]\ndocker_image = "{POOL_IMAGE}"\nnetwork_mode = "allowlist"\nallowed_hosts = ["127.0.0.1"]\n'
    )
    (task / "solution/solve.sh").write_text("#!/bin/bash\necho $((2 + 3)) > /root/answer.txt\n")
    (task / "tests/test.sh").write_text(
        '#!/bin/bash\nif [ "$(cat /root/answer.txt)" = 5 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n'
    )
    return task


def test_a_harbor_trial_of_the_oracle_agent_runs_on_the_pool_and_its_reward_comes_back(tmp_path):
    """Harbor's own Trial (start, the oracle agent, the verifier, stop) through this environment,
    loaded by import path; the claim through the recording stand-in, the commands in a real runtime."""
    from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig
    from harbor.trial.trial import Trial

    tb.REC = tb.Recorder()
    (tmp_path / "rt").mkdir()
    runtime = start_runtime_in_pod_root(tmp_path / "rt")
    try:
        s = settings(runtime.port)
        environ = {
            "SANDBOX_PROVIDER": "agent-sandbox", "SANDBOX_NAMESPACE": s.namespace, "SANDBOX_WARM_POOL": s.warm_pool,
            "SANDBOX_RUN_LABEL": s.run_label, "SANDBOX_RUN_ID": s.run_id, "SANDBOX_MAX_LIFETIME_SECONDS": "3600",
            "SANDBOX_PORT": str(runtime.port), "SANDBOX_TRACE_PORT": "0", "SANDBOX_IMAGE": POOL_IMAGE,
            "SANDBOX_UPSTREAM_URL": "http://127.0.0.1:7100",
        }
        config = TrialConfig(
            task=TaskConfig(path=write_task(tmp_path)),
            agent=AgentConfig(name="oracle"),
            environment=EnvironmentConfig(import_path=IMPORT_PATH, kwargs={"environ": environ, "client_factory": "test_backend:fake_client", "handle_sigterm": False}),
            trials_dir=tmp_path / "trials",
        )

        async def run():
            trial = await Trial.create(config)
            return await trial.run()

        result = asyncio.run(run())
        assert result.exception_info is None, result.exception_info
        assert result.verifier_result is not None and result.verifier_result.rewards == {"reward": 1}
        (claim,) = tb.REC.claims
        assert [d[0] for d in tb.REC.deleted] == [claim["claim_name"]], "the trial's claim was deleted"
        assert shutdown.live() == []
    finally:
        rt_conftest.stop_process(runtime.proc)
