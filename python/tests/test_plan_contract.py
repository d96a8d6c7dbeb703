"""The contract between the stack and this package, read from the real plan (node + tsx):
the trainer's env parses into the backend's settings, TRL's script's --sandbox-vllm-url is the
pod's forwarder, and the sandbox template's exact command, env and user start the runtime on the
image layout the Dockerfile builds (HOME=/root, /home/user leading there, with or without the
proxy baked into the base)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

from agent_rl_sandbox import AgentSandboxSettings, RuntimeHandle, SandboxError, opencode_config_kwargs
from agent_rl_sandbox.agent_sandbox import AgentSandboxBackend
from agent_rl_sandbox.settings import API_KEY_ENV, PLACEHOLDER_API_KEY, SettingsError

import sandbox_root
from conftest import REPO, free_port, stop_process, wait_http
from waits import scaled


@lru_cache(maxsize=None)
def plan_facts(max_lifetime: int = 3600) -> dict:
    if shutil.which("node") is None or not (REPO / "node_modules/tsx").exists():
        pytest.skip("node and the repo's node_modules (npm ci) are needed to render the plan")
    out = subprocess.run(["node", "--import", "tsx", "python/tests/plan_facts.ts", str(max_lifetime)], cwd=REPO, capture_output=True, text=True, timeout=scaled(120))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def container(facts: dict) -> dict:
    (c,) = facts["template"]["podTemplate"]["spec"]["containers"]
    return c


def plain_env(c: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c["env"] if "value" in e}


def forwarder(facts: dict) -> dict:
    (f,) = facts["template"]["podTemplate"]["spec"]["initContainers"]
    return f


def pod_env(facts: dict) -> dict[str, str]:
    """The env a trainer pod sees: the plain env and each secret env var from its Secret (a test value here)."""
    return {**facts["trainerEnv"], **{name: f"test-value-of-{secret}-0123456789" for name, secret in facts["trainerSecretEnv"].items()}}


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_the_trainer_env_is_exactly_what_the_backend_reads():
    facts = plan_facts()
    env = facts["trainerEnv"]
    s = AgentSandboxSettings.from_env(pod_env(facts))
    c = container(facts)
    assert (s.namespace, s.warm_pool, s.run_label, s.run_id) == ("arl-dev-sandboxes", env["SANDBOX_WARM_POOL"], "agentrl.dev/run", "r1")
    assert s.port == c["ports"][0]["containerPort"] == c["readinessProbe"]["httpGet"]["port"]
    assert s.home == plain_env(c)["HOME"] == "/root", "TRL's opencode example's SANDBOX_HOME"
    assert s.max_lifetime_seconds == 3600 and s.claim_lifetime_seconds == 3540
    assert (s.image, s.cpu, s.memory) == (facts["sandboxImage"], c["resources"]["limits"]["cpu"], c["resources"]["limits"]["memory"])
    # The trainer holds no key on the pool: each pod's forwarder does.
    assert API_KEY_ENV not in facts["trainerSecretEnv"] and API_KEY_ENV not in env
    # Per-rollout keys: the verifier's admin URL, the forwarder's delivery port, the admin key from the trainer's Secret.
    assert s.rollout_keys_url == env["SANDBOX_ROLLOUT_KEYS_URL"] and s.rollout_keys_url.endswith(":7201")
    assert s.forwarder_key_port == int(flag(forwarder(facts)["command"], "--key-port")) == 7102
    assert facts["trainerSecretEnv"]["SANDBOX_ROLLOUT_ADMIN_KEY"] == "rolloutAdminKey" and "SANDBOX_ROLLOUT_ADMIN_KEY" not in env
    kwargs = opencode_config_kwargs(env)
    assert kwargs == {"base_url": env["SANDBOX_UPSTREAM_URL"] + "/v1", "api_key": PLACEHOLDER_API_KEY, "sandbox_home": s.home}


def test_trls_script_calls_the_pods_forwarder_and_runs_unchanged_on_the_pool():
    facts = plan_facts()
    argv, env = facts["trainerArgv"], facts["trainerEnv"]
    f = forwarder(facts)
    # --sandbox-vllm-url is where the forwarder listens (pod loopback); the forwarder's upstream is the ingress.
    url = flag(argv, "--sandbox-vllm-url")
    assert url == env["SANDBOX_UPSTREAM_URL"] == f"http://{flag(f['command'], '--host')}:{flag(f['command'], '--port')}"
    assert flag(f["command"], "--upstream").startswith("http") and "127.0.0.1" not in flag(f["command"], "--upstream")
    # The one changed line: AgentSandboxBackend(image=image, flavor=flavor) with the script's own values.
    image, flavor = flag(argv, "--sandbox-image"), "cpu-basic"  # the script's --sandbox-flavor default; the stack passes none
    assert "--sandbox-flavor" not in argv
    backend = AgentSandboxBackend(image=image, flavor=flavor, handle_sigterm=False, settings=AgentSandboxSettings.from_env(pod_env(facts)))
    assert backend.image == facts["sandboxImage"]


def test_the_forwarder_forces_the_run_sampling_the_trainer_runs_and_its_parser_takes_the_rendered_argv():
    """The template's forwarder command parses with forwarder.py's own parser, and carries the trainer's sampling: its
    --temperature is the trainer's (TRL's opencode_hf_sandbox.py --temperature, default 1.0 in components/config/programs.ts),
    its --max-tokens the trainer's --max-completion-length, and the rollout's bounds are the schema's defaults, which are
    forwarder.py's (one set of numbers, two homes held equal here)."""
    from agent_rl_sandbox import forwarder as fwd

    facts = plan_facts()
    argv, command = facts["trainerArgv"], forwarder(facts)["command"]
    assert command[:3] == ["python3", "-I", "/opt/agent-rl/forwarder.py"], command
    args = fwd.parse_args(command[3:])
    temperature = float(flag(argv, "--temperature")) if "--temperature" in argv else 1.0
    assert (args.temperature, args.max_tokens) == (temperature, int(flag(argv, "--max-completion-length"))), command
    assert (args.max_calls, args.max_rollout_tokens) == (fwd.DEFAULT_MAX_CALLS, fwd.DEFAULT_MAX_ROLLOUT_TOKENS), command
    assert args.key_port == 7102 and args.upstream == flag(command, "--upstream")


def test_the_claim_lifetime_fits_the_admission_policy():
    # The policy's bound is the one number the trainer's lifetime must stay under.
    for max_lifetime in (600, 3600):
        facts = plan_facts(max_lifetime)
        s = AgentSandboxSettings.from_env(pod_env(facts))
        bound = [v for v in facts["claimPolicy"]["validations"] if "duration(" in v["expression"]]
        assert f"duration('{max_lifetime}s')" in bound[0]["expression"]
        assert 0 < s.claim_lifetime_seconds < max_lifetime


def test_settings_report_every_problem_at_once():
    with pytest.raises(SettingsError) as e:
        AgentSandboxSettings.from_env({"SANDBOX_PROVIDER": "docker", "SANDBOX_MAX_LIFETIME_SECONDS": "soon", "SANDBOX_API_VERSION": "v1alpha1"})
    text = str(e.value)
    for name in ("SANDBOX_PROVIDER", "SANDBOX_NAMESPACE", "SANDBOX_WARM_POOL", "SANDBOX_RUN_LABEL", "SANDBOX_RUN_ID", "SANDBOX_MAX_LIFETIME_SECONDS", "SANDBOX_API_VERSION"):
        assert name in text, name
    with pytest.raises(SettingsError, match="raise sandboxes.maxLifetimeSeconds"):
        AgentSandboxSettings(namespace="ns", warm_pool="p", run_label="l", run_id="r", max_lifetime_seconds=90)


def fake_stock_home(root: Path, *, proxy: bool = True) -> Path:
    """What the stock image has under /root: opencode and, up to the OpenEnv revision TRL pins, the proxy (stand-ins)."""
    home = root / "stock-root"
    (home / ".opencode/bin").mkdir(parents=True)
    (home / ".opencode/bin/opencode").write_text("#!/bin/sh\necho 1.0.0-stub\n")
    (home / ".opencode/bin/opencode").chmod(0o755)
    if proxy:
        (home / "proxy").mkdir()
        (home / "proxy/interception.py").write_text("# stand-in for OpenEnv's proxy\n")
    return home


def run_layout(stock: Path, prefix: Path) -> subprocess.CompletedProcess:
    pkg = REPO / "python/agent_rl_sandbox"
    script = REPO / "python/image/install-layout.sh"
    return subprocess.run(["sh", str(script), str(stock), str(pkg / "runtime.py"), str(pkg / "forwarder.py"), str(prefix)], capture_output=True, text=True)


def test_the_layout_works_with_and_without_a_baked_proxy(tmp_path):
    with_proxy = run_layout(fake_stock_home(tmp_path / "a"), tmp_path / "a/image")
    assert with_proxy.returncode == 0, with_proxy.stderr
    assert (tmp_path / "a/image/opt/agent-rl/home/proxy/interception.py").is_file()
    without = run_layout(fake_stock_home(tmp_path / "b", proxy=False), tmp_path / "b/image")
    assert without.returncode == 0, without.stderr
    assert "no proxy at" in without.stderr and "skipped" in without.stderr
    assert not (tmp_path / "b/image/opt/agent-rl/home/proxy").exists()
    for image in (tmp_path / "a/image", tmp_path / "b/image"):
        assert (image / "opt/agent-rl/forwarder.py").is_file() and (image / "opt/agent-rl/runtime.py").is_file()
        assert os.readlink(image / "home/user") == "/root", "OpenEnv's default sandbox_home leads to the HOME volume"
    # No opencode: not the opencode sandbox image at all, refused.
    (tmp_path / "c").mkdir()
    bad = run_layout(tmp_path / "c", tmp_path / "c/image")
    assert bad.returncode != 0 and "no opencode at" in bad.stderr


def test_the_dockerfile_base_does_not_float():
    text = (REPO / "python/Dockerfile").read_text()
    args = [line.split(None, 1)[1] for line in text.splitlines() if line.startswith("ARG ")]
    assert "BASE" in args, "BASE is a build ARG without a default"
    assert ":latest" not in "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    assert "docker buildx imagetools inspect" in text, "the command resolving the digest is written down"


def test_the_tests_run_each_sandbox_container_as_the_template_does_and_refuse_a_kinder_one():
    """sandbox_root.rendered, which every test that starts a sandbox pod's runtime or forwarder goes through."""
    spec = plan_facts()["template"]["podTemplate"]["spec"]
    (runtime,), (forwarder,) = spec["containers"], spec["initContainers"]
    assert sandbox_root.rendered(spec, runtime) == {"uid": 65532, "fs_group": 65532, "empty_dirs": [], "read_only_root": True}
    assert sandbox_root.rendered(spec, forwarder)["uid"] == forwarder["securityContext"]["runAsUser"] != 65532
    writable = {**runtime, "securityContext": {**runtime["securityContext"], "readOnlyRootFilesystem": False}}
    with pytest.raises(ValueError, match=r"readOnlyRootFilesystem False: not how the plan runs its sandboxes"):
        sandbox_root.rendered(spec, writable)
    as_root = {**runtime, "securityContext": {**runtime["securityContext"], "runAsUser": 0}}
    with pytest.raises(ValueError, match=r"runAsUser 0"):
        sandbox_root.rendered(spec, as_root)


@pytest.mark.skipif(sandbox_root.available() is not None, reason=str(sandbox_root.available()))
@pytest.mark.parametrize("baked_proxy", [True, False], ids=["proxy-baked", "proxy-uploaded"])
def test_the_template_command_serves_the_harness_layout_as_the_sandbox_uid(tmp_path, baked_proxy):
    facts = plan_facts()
    c = container(facts)
    pod_security = facts["template"]["podTemplate"]["spec"]["securityContext"]
    image_root = tmp_path / "image"
    sandbox_root.install_layout(fake_stock_home(tmp_path, proxy=baked_proxy), image_root)
    # The template's command, env and uid as they are; only the port is free-picked (this machine's loopback).
    port = free_port()
    argv = list(c["command"])
    argv[argv.index("--port") + 1] = str(port)
    argv += ["--host", "127.0.0.1"]
    env = {**plain_env(c), "PATH": "/usr/local/bin:/usr/bin:/bin"}
    log = open(tmp_path / "runtime.log", "wb")
    proc = subprocess.Popen(sandbox_root.command(image_root, argv, **sandbox_root.rendered(facts["template"]["podTemplate"]["spec"], c)), env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}{c['readinessProbe']['httpGet']['path']}", proc=proc)
        h = RuntimeHandle(f"http://127.0.0.1:{port}", sandbox_id="layout")
        home = env["HOME"]
        assert h.exec("id -u").stdout.strip() == str(pod_security["runAsUser"])
        assert h.exec('echo "$HOME"').stdout.strip() == home
        assert h.exec("pwd").stdout.strip() == sandbox_root.WORKDIR
        # Where OpenEnv's harness looks before downloading anything (opencode_runtime.py, harness.py).
        r = h.exec(f"{home}/.opencode/bin/opencode --version")
        assert (r.exit_code, r.stdout.strip()) == (0, "1.0.0-stub"), r.stderr
        assert h.exists(f"{home}/proxy/interception.py") == baked_proxy
        for d in (".config/opencode", "logs/agent", "logs/verifier", "task", "workdir"):
            h.write_text(f"{home}/{d}/probe", "w")  # the harness writes config, task and logs here
        # A newer harness uploads its proxy at rollout start: HOME takes it.
        h.write_text(f"{home}/proxy/interception.py" if not baked_proxy else f"{home}/proxy/__init__.py", "")
        # TRL's work dir, and OpenEnv's default HOME leading to the same files.
        assert h.exec("cd /root/workdir && echo x > solution.py && cat /home/user/workdir/solution.py").stdout == "x\n"
        assert h.read_text(f"{sandbox_root.HOME_ALIAS}/logs/agent/probe") == "w"
        with pytest.raises(SandboxError):
            h.write_text("/opt/agent-rl/home/proxy/interception.py", "tampered")
        assert h.exec("touch /opt/agent-rl/x").exit_code != 0, "the image layout is read-only"
    finally:
        stop_process(proc)
        log.close()
    assert proc.returncode == 0, (tmp_path / "runtime.log").read_text()
