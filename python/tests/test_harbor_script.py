"""The Harbor recipe's training script (trainer/blackbox/harbor_async_grpo.py, /app/harbor_async_grpo.py in
the black-box image) with its real parts: its TrlParser over TRL 1.16's AsyncGRPOConfig parses the command
line the stack renders for recipe harbor-blackbox (python/tests/trainer_argv.ts --custom), its checks refuse
what it cannot run before the model loads, and the worker it builds (TRL's HarnessRolloutWorker over
agent_rl_sandbox.harbor_sessions) delivers a GRPO group. The Harbor trials there are a STAND-IN (the
"Harbor python" of test_harbor_sessions.py, answering with a result file); the real trials on the simulated
cluster: test_harbor_trial.py. The model is not loaded (no GPU): AsyncGRPOTrainer itself is not built."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from agent_rl_sandbox.harbor_sessions import HARBOR_PYTHON_ENV
from test_harbor_sessions import STANDIN
from waits import scaled

REPO = Path(__file__).resolve().parents[2]
#: No GPU here: TrainingArguments refuses its bf16 default without one unless told it runs on the CPU.
NO_GPU = ["--use_cpu", "true"]
SCRIPT = REPO / "trainer/blackbox/harbor_async_grpo.py"


def load_script():
    spec = importlib.util.spec_from_file_location("harbor_async_grpo", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the script's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@lru_cache(maxsize=1)
def cases() -> list[dict]:
    out = subprocess.run(["node", "--import", "tsx", "python/tests/trainer_argv.ts", "--custom"], cwd=REPO, capture_output=True, text=True, timeout=scaled(180))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_recipe_runs_this_script_and_the_black_box_image_holds_it() -> None:
    assert {c["recipe"] for c in cases()} == {"harbor-blackbox"}
    assert all(c["command"][:2] == ["python", "/app/harbor_async_grpo.py"] for c in cases())
    dockerfile = (REPO / "trainer/blackbox/Dockerfile").read_text()
    assert "COPY trainer/blackbox/harbor_async_grpo.py /app/harbor_async_grpo.py" in dockerfile


@pytest.mark.parametrize("revision", ["main", "pinned"])
def test_the_scripts_parser_takes_the_rendered_command(revision: str, monkeypatch) -> None:
    case = next(c for c in cases() if (c["revision"] == "main") == (revision == "main"))
    for k, v in case["env"].items():
        monkeypatch.setenv(k, v)
    script_args, training_args = load_script().parse_args(case["command"][2:] + NO_GPU)
    argv = case["command"]
    flag = lambda name: argv[argv.index(name) + 1]  # noqa: E731
    assert script_args.model_name_or_path == flag("--model_name_or_path") and script_args.dataset_size == int(flag("--dataset-size"))
    assert script_args.agents == case["env"]["HARBOR_AGENT"] == "opencode", "the stack's harbor.agent reaches the script through HARBOR_AGENT"
    assert training_args.num_generations == int(flag("--num_generations")) and training_args.max_inflight_tasks == int(flag("--max_inflight_tasks"))
    assert training_args.vllm_server_base_url == flag("--vllm_server_base_url") and training_args.max_steps == int(flag("--max_steps"))
    assert training_args.output_dir == flag("--output_dir") and training_args.gradient_checkpointing is True
    assert training_args.model_init_kwargs["revision"] == flag("--model_revision")
    if revision == "pinned":
        assert training_args.push_to_hub is True and training_args.hub_model_id == "org/model"


def test_a_flag_the_script_lacks_is_refused_by_its_parser() -> None:
    argv = cases()[0]["command"][2:] + NO_GPU + ["--no_such_flag", "1"]
    with pytest.raises(ValueError, match=r"not used by the HfArgumentParser: \['--no_such_flag', '1'\]"):
        load_script().parse_args(argv)


def tasks_at(root: Path, *names: str) -> Path:
    for n in names:
        (root / n).mkdir(parents=True)
        (root / n / "task.toml").write_text("")
    return root


def test_what_it_cannot_run_is_refused_before_the_model_loads(tmp_path, monkeypatch) -> None:
    script = load_script()
    monkeypatch.delenv(HARBOR_PYTHON_ENV, raising=False)
    one = str(tasks_at(tmp_path / "t", "add-two"))
    args = lambda **kw: script.ScriptArguments(**{"model_name_or_path": "m", "tasks_dir": one, "agents": "opencode", **kw})  # noqa: E731
    for kw, message in (
        ({"agents": " , "}, "no Harbor agent: set HARBOR_AGENT"),
        ({"tasks_dir": str(tmp_path / "none")}, "task_dir .*none: not a directory"),
        ({"tasks_dir": str(tmp_path)}, "neither a Harbor task"),
        ({}, f"{HARBOR_PYTHON_ENV}: the Harbor venv's python"),
    ):
        with pytest.raises(script.ScriptError, match=message):
            script.prepare_data(args(**kw))
    monkeypatch.setenv(HARBOR_PYTHON_ENV, "/bin/sh")
    with pytest.raises(script.ScriptError, match="--dataset-size 0: at least 1"):
        script.prepare_data(args(dataset_size=0))
    rows = script.prepare_data(args(tasks_dir=str(tasks_at(tmp_path / "many", "b", "a")), dataset_size=5))
    assert [r["prompt"][-1]["content"] for r in rows] == ["a", "b", "a", "b", "a"]


def test_the_worker_it_builds_runs_a_group_of_harbor_trials_of_the_task_the_prompt_names(tmp_path, monkeypatch) -> None:
    """The script's build_worker with the recipe's own parsed arguments, trials stood in (see the module docstring)."""
    from grpo_support import build_tokenizer

    script = load_script()
    harbor_python = tmp_path / "harbor-python"
    harbor_python.write_text(STANDIN)
    harbor_python.chmod(0o755)
    monkeypatch.setenv(HARBOR_PYTHON_ENV, str(harbor_python))
    monkeypatch.setenv("HARBOR_STANDIN", "ok")
    case = cases()[0]
    for k, v in case["env"].items():
        monkeypatch.setenv(k, v)
    tasks = tasks_at(tmp_path / "tasks", "add-two", "fix-git")
    argv = case["command"][2:] + ["--tasks_dir", str(tasks), "--agents", "opencode,mini-swe-agent", "--num_generations", "2", "--max_inflight_tasks", "2", *NO_GPU]
    argv[argv.index("--output_dir") + 1] = str(tmp_path / "out")
    script_args, training_args = script.parse_args(argv)
    from accelerate.state import PartialState
    from datasets import Dataset

    PartialState()
    worker = script.build_worker(script_args, training_args, build_tokenizer(), Dataset.from_list(script.prepare_data(script_args)))
    worker.start()
    try:
        group = first_group(worker, size=2, timeout_s=120)
    finally:
        worker.stop()
    trained = [[int(t) for t, m in zip(x.input_ids, x.completion_mask) if m] for x in group]
    assert trained == [[3, 4], [3, 4]], "the tokens trained on are the trials' trace entries' completion"
    assert [[round(float(lp), 3) for lp, m in zip(x.old_log_probs, x.completion_mask) if m] for x in group] == [[-0.1, -0.2]] * 2
    results = [json.loads(p.read_text()) for p in sorted((tmp_path / "out" / "harbor-rollouts").glob("0000-*.json")) + sorted((tmp_path / "out" / "harbor-rollouts").glob("0001-*.json"))]
    assert [r["agent"] for r in results] == ["opencode", "mini-swe-agent"], "rollout i runs agents[i % n]"
    assert {r["argv"][r["argv"].index("--task") + 1] for r in results} == {str(tasks / "add-two")}, "the first group's trials run the task its prompt names"
    assert {r["argv"][r["argv"].index("--model") + 1] for r in results} == {"Qwen/Qwen3-8B"}


def first_group(worker, size: int, timeout_s: float) -> list:
    """The samples of the first group to complete. The stood-in trials end at once, so the worker never idles:
    this stops at the first whole group, by its known size (harness_standin.take_groups knows no size), and is bounded
    by the samples it reads as well as by time (waits.py scales it)."""
    import queue
    import time

    by_group: dict[int, list] = {}
    deadline = time.monotonic() + scaled(timeout_s)
    for _ in range(1000):
        worker.check_health(stale_after_s=scaled(timeout_s))
        try:
            s = worker.rollout_buffer.get(timeout=1.0)
        except queue.Empty:
            assert time.monotonic() < deadline, f"no whole group of {size} within {scaled(timeout_s):g}s"
            continue
        by_group.setdefault(s.group_id, []).append(s)
        if len(by_group[s.group_id]) == size:
            return by_group[s.group_id]
    raise AssertionError(f"1000 samples and no whole group of {size}")
