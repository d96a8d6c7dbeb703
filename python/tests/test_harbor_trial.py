"""Harbor trials of two agents on the stack's pool, through the ingress, feeding TRL's async GRPO worker.

    TRL 1.16's HarnessRolloutWorker (loop-owning; this venv, Python 3.11)
      -> agent_rl_sandbox.harbor_sessions (the project's adapter: one process of the Harbor venv per rollout)
      -> python -m agent_rl_sandbox.harbor_trial (Python 3.13, harbor 0.25.0 + openenv 0.10.0: test/harbor/build.sh)
         Harbor's own Trial on openenv's trial config for the agent, its environment the pool
         (CapturedPoolEnvironment over AgentSandboxEnvironment), claimed through the REAL agent-sandbox
         v1.0.1 controller on the simulated cluster (test_controller.py's fixture, the trainer's ServiceAccount)
      -> in the claimed sandbox: OpenEnv 0.10's capture proxy, then the agent, each as Harbor installs
         and runs it (its install step replaced by a check: PreinstalledOpenCode, PreinstalledMiniSweAgent):
           opencode 1.18.33 (the real binary from npm, opencode_cli.py)
           mini-swe-agent 2.4.6 (PyPI, with litellm: the Harbor fixture's agents/mini-swe-agent venv)
      -> the pod's key-holding forwarder (the template's command, pod_netns.py), whose record of the
         model's answers is what is trained on (the proxy's only a cross-check: trusted_trace.py)
      -> the project's ingress (nginx, npm run ingress:local, the pool's key)
      -> stub_model.StubModel: STAND-IN for vLLM (token ids and logprobs as vLLM returns them).

A minimal Harbor task of the test (`add-two`, named here): the agent writes solution.py adding two
numbers from stdin, Harbor's verifier runs it and writes the reward.

Stand-ins, named: the model (stub_model.py), the sandbox image (the pods' runtime runs on this
machine in a private mount namespace over a writable overlay of `/`, standing in for a task image
with Harbor's writable dirs; its PATH holds the pre-installed agents: the opencode fixture's binary
and the Harbor fixture's mini-swe-agent venv, standing in for an image that carries them), the
kubelet (test_controller.PodNetwork, with pod_netns.ForwardedPodNetwork's namespaces: the forwarder
runs as root there and holds the pool's key, not a per-rollout one) and the tokenizer (grpo_support,
unused in loop-owning mode). With POD_FORWARDERS = False the pods share this machine's loopback and
run the runtime only (as test_rollout_worker.py's): the capture proxy then holds the pool's key and
the trace is the proxy's (`source == "capture-proxy"`).

Skipped like test_controller.py when the fixtures are not built (AGENT_RL_BUILD_FIXTURES=1 builds
them, AGENT_RL_REQUIRE_E2E=1 makes a skip a failure).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

import harness_standin
import netns
import opencode_cli
import pod_netns
import sandbox_root
import test_controller
from conftest import PYTHON_DIR, REPO, free_port, processes
from stub_model import BASH_COMMAND, SOLUTION, SUBMIT_COMMAND, StubModel
from test_controller import SANDBOXES, claims, wait_for
from test_opencode_e2e import KEY, STANDIN_ROLLOUT_KEY, _require, sandbox_path, start_ingress, stop_group
from test_pod_uploads import harbor_writable_dirs
from test_rollout_worker import build_image_with_opencode
from waits import scaled

MODEL = "stub/model-1"
AGENTS = ["opencode", "mini-swe-agent"]
#: Seconds a trial's agent gets (opencode and mini-swe-agent each make 2-3 model calls), before the machine's factor.
AGENT_TIMEOUT_S = 240
#: mini-swe-agent's steps: the solution, the submit (and room for one format retry).
STEP_LIMIT = 4
#: Each simulated pod in a network namespace with its runtime and the template's forwarder
#: (pod_netns.py): the model path and the trace are the pod's forwarder's. False: the pods share this
#: machine's loopback and run the runtime only (as test_rollout_worker.py's), the capture proxy holds
#: the pool's key and the trace is the proxy's.
POD_FORWARDERS = True

#: A pod's view of / for the runtime on this machine: a private mount namespace where / is an overlay of the host's
#: (writes land in a tmpfs and vanish with the namespace) only so that the Harbor pool template's emptyDirs (/logs,
#: /tests, /solution, /installed-agent: python/harbor_tests/harbor_plan_facts.ts, $1) get mount points the host lacks;
#: each is a fresh tmpfs made as the kubelet makes a pod's emptyDir with an fsGroup ($2): root-owned, that group,
#: mode 2777. Then sandbox_root's own namespace inside it (HOME, /tmp, the image layout, and / read-only, as the
#: template's readOnlyRootFilesystem: only those emptyDirs, HOME, /tmp and the working dir are writable).
POD_ROOT = r"""set -e
dirs=$1; fsgroup=$2; shift 2
mount -t tmpfs -o mode=0755 tmpfs /opt
mkdir /opt/upper /opt/work /opt/root
mount -t overlay overlay -o lowerdir=/,upperdir=/opt/upper,workdir=/opt/work /opt/root
for d in proc sys dev; do mount --rbind /$d /opt/root/$d; done
IFS=:
for d in $dirs; do
  mkdir -p "/opt/root$d"
  mount -t tmpfs -o "uid=0,gid=$fsgroup,mode=2777" tmpfs "/opt/root$d"
done
unset IFS
exec /usr/sbin/chroot /opt/root "$@"
"""


def harbor_fixture() -> Path:
    """The Harbor fixture's dir (test/harbor/build.sh: idempotent; builds when missing, a few minutes)."""
    try:
        out = subprocess.run(["bash", "test/harbor/build.sh"], cwd=REPO, capture_output=True, text=True, timeout=scaled(1800))
    except subprocess.TimeoutExpired:
        _require("the Harbor fixture did not build in time")
    if out.returncode != 0:
        _require(f"the Harbor fixture cannot be built here: {out.stderr.strip()[-500:]}")
    python = Path(out.stdout.strip().splitlines()[-1])
    return python.parents[2]


@pytest.fixture(scope="module")
def harbor():
    d = harbor_fixture()
    agents_bin = d / "agents/mini-swe-agent/bin"
    assert (agents_bin / "mini-swe-agent").exists(), f"no mini-swe-agent in {agents_bin}"
    return {"dir": d, "python": d / "venv/bin/python", "agents_bin": agents_bin, "opencode": opencode_cli.install()}


def pod_path(h) -> str:
    """PATH in the stand-in image: its python (this venv's: the capture proxy's deps), the agents it carries."""
    return f"{h['opencode'].parent}:{sandbox_path()}:{h['agents_bin']}"


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    """The stub model (the vLLM stand-in) and the ingress in front of it, for the whole module: the pods'
    forwarders are started with the ingress's address."""
    tmp = tmp_path_factory.mktemp("model-path")
    model = StubModel(MODEL)
    ingress, url, log = start_ingress(tmp, model.url)
    try:
        yield {"model": model, "url": url, "port": int(url.rsplit(":", 1)[1]), "log": log}
    finally:
        model.stop()
        stop_group(ingress)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, harbor, model_path):
    """test_controller.py's simulated cluster; the pods' runtime in an overlay root holding the agents,
    each pod in a network namespace with its forwarder (POD_FORWARDERS)."""
    if POD_FORWARDERS and (why := netns.missing_prerequisite()) is not None:
        _require(why)
    original_command = sandbox_root.command
    original_keep = sandbox_root.host_root_paths

    # The Harbor pool template's further emptyDirs and its fsGroup, as the plan renders them.
    harbor_dirs = ":".join(d for d in harbor_writable_dirs() if d not in sandbox_root.BUILT_IN_DIRS)

    def command(image_root, argv, **kw):
        fs_group = kw.get("fs_group") if kw.get("fs_group") is not None else kw["uid"]
        return ["unshare", "-m", "--propagation", "private", "sh", "-c", POD_ROOT, "sh", harbor_dirs, str(fs_group),
                *original_command(image_root, argv, **kw)]

    def keep() -> list[str]:
        # The fixtures under the host's /root the pods read (read-only): the Harbor fixture (mini-swe-agent's venv and its python) and opencode's.
        return sorted({*original_keep(), str(harbor["dir"]), str(opencode_cli.cache_dir())})

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(test_controller, "build_image", build_image_with_opencode)
        mp.setattr(sandbox_root, "command", command)
        mp.setattr(sandbox_root, "host_root_paths", keep)
        mp.setattr(test_controller, "sandbox_path", lambda: pod_path(harbor))
        if POD_FORWARDERS:
            mp.setattr(test_controller, "PodNetwork", functools.partial(pod_netns.ForwardedPodNetwork, ingress_port=model_path["port"], key=STANDIN_ROLLOUT_KEY))
        yield from test_controller.cluster.__wrapped__(tmp_path_factory)
    if POD_FORWARDERS:
        assert pod_netns.namespaces() == [], "every pod's namespace is gone with the cluster"


def warm_pool_ready(c) -> list[str] | None:
    """The warm pool's Sandboxes Ready at an address, unclaimed, as many as the pool's size (test_controller's check, any address)."""
    items = c["custom"].list_namespaced_custom_object(*SANDBOXES[:2], c["sandboxesNamespace"], SANDBOXES[2])["items"]
    claimed = {cl["status"].get("sandbox", {}).get("name") for cl in claims(c) if cl.get("status")}
    ready = [s["metadata"]["name"] for s in items
             if any(x["type"] == "Ready" and x["status"] == "True" for x in (s.get("status") or {}).get("conditions", []))
             and (s.get("status") or {}).get("podIPs") and s["metadata"]["name"] not in claimed and not s["metadata"].get("deletionTimestamp")]
    return ready if len(ready) >= c["poolSize"] else None


def write_task(root: Path, image: str) -> Path:
    """`add-two`: a minimal Harbor task (instruction, the pool's image, the forwarder-only network, a verifier)."""
    task = root / "add-two"
    for d in ("environment", "solution", "tests"):
        (task / d).mkdir(parents=True)
    (task / "instruction.md").write_text("Write solution.py that adds two numbers from stdin.\n")
    (task / "task.toml").write_text(
        f'version = "1.0"\n[agent]\ntimeout_sec = {round(scaled(AGENT_TIMEOUT_S))}\n[verifier]\ntimeout_sec = 120\n'
        f'[environment]\ndocker_image = "{image}"\nnetwork_mode = "allowlist"\nallowed_hosts = ["127.0.0.1"]\n'
    )
    (task / "solution/solve.sh").write_text(f"#!/bin/bash\nprintf '%s\\n' '{SOLUTION}' > solution.py\n")
    (task / "tests/test.sh").write_text(
        "#!/bin/bash\n"
        'if [ "$(echo \'2 3\' | python3 solution.py)" = 5 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n'
    )
    return task


@pytest.fixture
def stack(cluster, harbor, model_path, tmp_path, monkeypatch):
    """A full warm pool, the task, and the trainer's env (set on this process too: TRL's spawned rollout
    child and the Harbor processes inherit it, as a trainer pod's processes do)."""
    c = cluster
    try:
        wait_for("the warm pool Ready", lambda: warm_pool_ready(c), timeout=180)
    except TimeoutError as e:
        raise TimeoutError(f"{e}; the pod network's errors: {c['net'].errors[-5:]}") from None
    model = model_path["model"]
    seen = len(model.chat_requests())
    env = {
        **c["trainerEnv"],
        "KUBECONFIG": c["trainerKubeconfig"],
        "AGENT_RL_HARBOR_PYTHON": str(harbor["python"]),
        "PYTHONPATH": os.pathsep.join([str(PYTHON_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    if POD_FORWARDERS:
        # The plan's own: the agent's side calls the pod's forwarder (SANDBOX_UPSTREAM_URL), the trainer reads its trace port, holds no key.
        assert env["SANDBOX_UPSTREAM_URL"] == "http://127.0.0.1:7100" and "SANDBOX_API_KEY" not in env, env
    else:
        # Straight to the ingress with the pool's key: the pods run no forwarder (module docstring).
        env.update(SANDBOX_UPSTREAM_URL=model_path["url"], SANDBOX_API_KEY=KEY, SANDBOX_TRACE_PORT="0")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if POD_FORWARDERS:
        monkeypatch.delenv("SANDBOX_API_KEY", raising=False)
    task = write_task(tmp_path, env["SANDBOX_IMAGE"])
    try:
        yield dict(c=c, model=model, seen=seen, env=env, task=task, ingress_log=model_path["log"], tmp=tmp_path)
    finally:
        leftovers(c)


def leftovers(c) -> None:
    """The agents and proxies the trials started are gone with their claims' pods (the runtime's jobs)."""
    names = (b"mini-swe-agent", b"--dangerously-skip-permissions", b"agent_rl_sandbox.harbor_trial")

    def alive() -> list[str]:
        return [cmd.decode(errors="replace")[:120] for _pid, _pp, st, cmd in processes() if st != "Z" and any(n in cmd for n in names)]

    wait_for("no agent, capture proxy or trial process left", lambda: not alive() or None, timeout=30)


def run_claims(c) -> list[dict]:
    return [cl for cl in claims(c) if cl["metadata"].get("labels", {}).get(c["runLabel"]) == c["runId"]]


def factory(s, agents: list[str]):
    from agent_rl_sandbox.harbor_sessions import build_factory

    # The simulated pods share this machine's loopback: each concurrent rollout's capture proxy its own port.
    ports = None if POD_FORWARDERS else [free_port(), free_port()]
    return functools.partial(build_factory, task_dir=str(s["task"]), agents=agents, model=MODEL, workdir=str(s["tmp"] / "rollouts"),
                             agent_timeout_s=scaled(AGENT_TIMEOUT_S), step_limit=STEP_LIMIT, capture_ports=ports)


def check_trace(entries: list[dict], agent: str) -> None:
    """The agent's model calls, each with the engine's token ids and per-token logprobs; its tool call was the script's."""
    assert entries, f"{agent}: no model call captured"
    messages = [e["response"]["choices"][0].get("message") or {} for e in entries]
    commands = [json.loads(tc["function"]["arguments"])["command"] for m in messages for tc in m.get("tool_calls") or []]
    assert commands[0] == BASH_COMMAND, commands
    if agent == "mini-swe-agent":
        assert commands[-1] == SUBMIT_COMMAND, commands
    for e in entries:
        n, m = len(e["prompt_token_ids"]), len(e["completion_token_ids"])
        assert n > 0 and m > 0 and len(e["per_token_logps"]) == m
        assert e["per_token_logps"][:3] == pytest.approx([-0.1, -0.2, -0.3]), "the stub's logprobs at temperature 1"
        assert e["loss_mask"] == [0] * n + [1] * m


def check_source(r: dict) -> None:
    """What the trace was taken from: the pod's forwarder, the proxy's record agreeing with it."""
    if not POD_FORWARDERS:
        assert r["source"] == "capture-proxy", "a pool without a trace port"
        return
    assert r["source"] == "forwarder", r
    assert r["check"]["disagreements"] == [], r["check"]
    # Every call the forwarder recorded is trained; the proxy's selection stands only where it names them all.
    assert r["check"]["forwarder_calls"] == len(r["entries"]) > 0, r["check"]
    assert r["check"]["selected_by"] == ("proxy" if r["check"]["unclaimed"] == 0 else "forwarder"), r["check"]


def check_model_requests(s) -> None:
    """What reached the model came through the ingress (key checked and dropped), asking for token ids and logprobs."""
    chats = s["model"].chat_requests()[s["seen"]:]
    assert chats
    for r in chats:
        headers = {k.lower(): v for k, v in r["headers"].items()}
        assert "authorization" not in headers and headers.get("x-request-id")
        assert r["body"]["logprobs"] is True and r["body"]["return_token_ids"] is True
        assert r["body"]["temperature"] == 1.0 and r["body"]["top_p"] == 1.0, "the trainer's sampling policy"
    log = s["ingress_log"].read_text(errors="replace")
    assert KEY not in log and STANDIN_ROLLOUT_KEY not in log


# --- tests -------------------------------------------------------------------------------------
@pytest.mark.parametrize("agent", AGENTS)
def test_a_harbor_trial_of_the_agent_runs_on_the_pool_through_the_ingress(stack, agent):
    """One trial, the adapter's session on its own: Harbor's reward, the trace, every claim deleted."""
    s, c = stack, stack["c"]
    f = factory(s, [agent])(sampling={"temperature": 1.0, "top_p": 1.0})
    started = time.monotonic()
    session = f.create("unused: the task is Harbor's", episode_id=f"t-{agent}")
    try:
        assert session.wait_for_completion() == 0, session.log.read_text(errors="replace")[-4000:]
        r = session.result()
        print(f"{agent}: trial in {time.monotonic() - started:.1f}s, claim {r.get('claim')}, reward {r.get('reward')}")
        assert r["exception"] is None, (r["exception"], session.log.read_text(errors="replace")[-3000:])
        assert r["reward"] == 1.0 and session.verify().env_reward == 1.0
        check_source(r)
        check_trace(r["entries"], agent)
        trace = session.fetch_training_trace()
        assert [t.completion_token_ids for t in trace.turns] == [e["completion_token_ids"] for e in r["entries"]]
    finally:
        session.close()
    check_model_requests(s)
    # Harbor's stop() deleted the trial's claim, and its pod with it.
    wait_for("every claim deleted", lambda: not run_claims(c) or None, timeout=30)
    assert c["net"].errors == []


def test_trls_worker_completes_a_group_of_two_agents_harbor_trials(stack):
    """One GRPO group of two rollouts of the task: an opencode trial and a mini-swe-agent trial, at once."""
    s, c = stack, stack["c"]
    worker = harness_standin.make_worker(model=MODEL, num_generations=2, prompts=["Write solution.py that adds two numbers from stdin."], factory=factory(s, AGENTS))
    started = time.monotonic()
    worker.start()
    try:
        samples = harness_standin.take_groups(worker, 1, timeout_s=2 * AGENT_TIMEOUT_S + 300)
    finally:
        worker.stop()
    print(f"one group of 2 Harbor trials (opencode, mini-swe-agent): {time.monotonic() - started:.1f}s")
    results = [json.loads(p.read_text()) for p in sorted((s["tmp"] / "rollouts").glob("*.json")) if not p.name.endswith(".trace.json")]
    assert sorted(r["agent"] for r in results) == sorted(AGENTS), results
    # A group's rows: one per chain of calls TRL's worker finds in a trial's trace (a call that does not extend the one
    # before starts a row), so at least one per trial; each row carries its trial's reward.
    assert {x.group_id for x in samples} == {0} and len(samples) >= 2, [len(r["entries"]) for r in results]
    assert [x.metrics["reward"] for x in samples] == [1.0] * len(samples)
    for r in results:
        assert r["reward"] == 1.0 and r["exception"] is None
        check_source(r)
        check_trace(r["entries"], r["agent"])
    assert len({r["claim"] for r in results}) == 2, "one sandbox per rollout"
    # TRL's rows are the trials' captured calls: every sampled token trained, with its logprob.
    completion_ids = [tid for r in results for e in r["entries"] for tid in e["completion_token_ids"]]
    trained = [int(tok) for x in samples for tok, m in zip(x.input_ids, x.completion_mask) if m]
    assert sorted(trained) == sorted(completion_ids)
    check_model_requests(s)
    wait_for("every claim deleted", lambda: not run_claims(c) or None, timeout=30)
    assert c["net"].errors == []
