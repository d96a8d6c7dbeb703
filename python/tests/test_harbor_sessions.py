"""The trainer side's adapter to Harbor trials (agent_rl_sandbox.harbor_sessions) on its own: what it
starts, what it reads back, what it refuses. The "Harbor python" here is a STAND-IN script that
answers as `python -m agent_rl_sandbox.harbor_trial` does (a result file); the real trial, with the
real Harbor venv on the simulated cluster: test_harbor_trial.py."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from agent_rl_sandbox.harbor_sessions import HARBOR_PYTHON_ENV, HarborTrialSessionFactory, task_dir_for, task_directories
from agent_rl_sandbox.trusted_trace import UntrustedTrace
from conftest import alive
from waits import wait_for

#: The stand-in: writes its argv and what $HARBOR_STANDIN says into --out (or sleeps, or exits without one).
STANDIN = r'''#!/usr/bin/env python3
import json, os, sys, time
argv = sys.argv[1:]
out = argv[argv.index("--out") + 1]
mode = os.environ["HARBOR_STANDIN"]
if mode == "sleep":
    print("started", flush=True); time.sleep(600)
if mode == "crash":
    print("Traceback: the trial broke before writing its result", flush=True); sys.exit(3)
entries = [{"prompt_token_ids": [1, 2], "completion_token_ids": [3, 4], "per_token_logps": [-0.1, -0.2], "loss_mask": [0, 0, 1, 1],
            "request": {"messages": [{"role": "user", "content": "hi"}]},
            "response": {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]},
            "metadata": {"node_id": "n0"}}]
json.dump({"argv": argv, "agent": argv[argv.index("--agent") + 1], "reward": 1, "exception": None, "claim": "c1",
           "source": "forwarder", "entries": entries if mode == "ok" else None, "error": None if mode == "ok" else "no model call"}, open(out, "w"))
'''


@pytest.fixture
def harbor_python(tmp_path, monkeypatch):
    p = tmp_path / "harbor-python"
    p.write_text(STANDIN)
    p.chmod(0o755)
    monkeypatch.setenv(HARBOR_PYTHON_ENV, str(p))
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "task.toml").write_text("version = \"1.0\"\n")
    return p


def make(tmp_path, **kw) -> HarborTrialSessionFactory:
    return HarborTrialSessionFactory(task_dir=tmp_path / "task", agents=kw.pop("agents", ["opencode", "mini-swe-agent"]), model="stub/model-1",
                                     sampling={"temperature": 1.0}, workdir=tmp_path / "w", agent_timeout_s=30, **kw)


def test_each_rollout_runs_one_trial_of_the_next_agent_and_trains_on_its_entries(tmp_path, harbor_python, monkeypatch):
    monkeypatch.setenv("HARBOR_STANDIN", "ok")
    f = make(tmp_path, capture_ports=[7001, 7002], step_limit=3)
    sessions = [f.create("prompt", episode_id=f"e{i}") for i in range(3)]
    try:
        for s in sessions:
            assert s.wait_for_completion() == 0
        assert [s.result()["agent"] for s in sessions] == ["opencode", "mini-swe-agent", "opencode"]
        argv = sessions[1].result()["argv"]
        assert argv[:2] == ["-m", "agent_rl_sandbox.harbor_trial"]
        assert argv[argv.index("--capture-port") + 1] == "7002" and argv[argv.index("--session-id") + 1] == "hbe1"
        assert json.loads(argv[argv.index("--sampling") + 1]) == {"temperature": 1.0} and argv[argv.index("--step-limit") + 1] == "3"
        trace = sessions[0].fetch_training_trace()
        assert [(t.prompt_token_ids, t.completion_token_ids, t.per_token_logps) for t in trace.turns] == [([1, 2], [3, 4], [-0.1, -0.2])]
        assert sessions[0].verify([]).env_reward == 1.0
    finally:
        for s in sessions:
            s.close()


def test_a_trial_without_a_trace_or_a_result_is_unscorable_with_the_reason(tmp_path, harbor_python, monkeypatch):
    monkeypatch.setenv("HARBOR_STANDIN", "no-entries")
    s = make(tmp_path).create("prompt")
    assert s.wait_for_completion() == 0
    with pytest.raises(UntrustedTrace, match=r"the Harbor trial \(opencode, claim c1\) has no trace to train on: no model call"):
        s.fetch_training_trace()
    monkeypatch.setenv("HARBOR_STANDIN", "crash")
    s = make(tmp_path).create("prompt")
    assert s.wait_for_completion() == 3
    with pytest.raises(UntrustedTrace, match=r"exited 3 without a result:\nTraceback: the trial broke"):
        s.fetch_training_trace()


def test_close_ends_a_running_trial_and_a_timeout_names_the_agent(tmp_path, harbor_python, monkeypatch):
    monkeypatch.setenv("HARBOR_STANDIN", "sleep")
    s = make(tmp_path, agents=["mini-swe-agent"]).create("prompt")
    wait_for("the trial started", lambda: "started" in s.log.read_text(), timeout=30)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"the Harbor trial \(mini-swe-agent\) ran past 0.5s"):
        s.wait_for_completion(0.5)
    assert time.monotonic() - t0 < 30 and s.proc.poll() is not None, "the timeout ended the trial's process group"
    assert not alive(s.proc.pid)


def test_the_factory_refuses_what_it_cannot_run(tmp_path, monkeypatch):
    monkeypatch.delenv(HARBOR_PYTHON_ENV, raising=False)
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "task.toml").write_text("")
    with pytest.raises(ValueError, match=f"{HARBOR_PYTHON_ENV}: the Harbor venv's python"):
        make(tmp_path)
    py = os.environ.get("PYTHON", "/bin/sh")
    with pytest.raises(ValueError, match="agents: at least one"):
        make(tmp_path, agents=[], harbor_python=py)
    with pytest.raises(ValueError, match="task_dir .*: not a directory"):
        HarborTrialSessionFactory(task_dir=tmp_path / "nope", agents=["opencode"], model="m", harbor_python=py)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"task_dir .*empty: neither a Harbor task \(no task.toml\) nor a directory of tasks"):
        HarborTrialSessionFactory(task_dir=tmp_path / "empty", agents=["opencode"], model="m", harbor_python=py)


def test_a_directory_of_tasks_runs_the_task_each_prompt_names_and_refuses_an_unknown_one(tmp_path, harbor_python, monkeypatch):
    monkeypatch.setenv("HARBOR_STANDIN", "ok")
    tasks = tmp_path / "tasks"
    for name in ("fix-git", "add-two"):
        (tasks / name).mkdir(parents=True)
        (tasks / name / "task.toml").write_text("")
    (tasks / "notes").mkdir()  # no task.toml: not a task
    assert task_directories(tasks) == ["add-two", "fix-git"]
    assert task_directories(tmp_path / "task") == [""]
    assert task_dir_for(tmp_path / "task", [""], "anything") == tmp_path / "task"
    f = HarborTrialSessionFactory(task_dir=tasks, agents=["opencode"], model="m", workdir=tmp_path / "w", agent_timeout_s=30)
    s = f.create([{"role": "system", "content": "x"}, {"role": "user", "content": "fix-git"}])
    try:
        assert s.wait_for_completion() == 0
        argv = s.result()["argv"]
        assert argv[argv.index("--task") + 1] == str(tasks / "fix-git")
    finally:
        s.close()
    for bad, shown in (("notes", "'notes'"), ("../task", "'../task'"), ([{"role": "assistant", "content": "add-two"}], "'list'"), (None, "'NoneType'")):
        with pytest.raises(ValueError, match=rf"the prompt names no task under .*tasks: {re.escape(shown)} \(tasks: add-two, fix-git\)"):
            f.create(bad)
