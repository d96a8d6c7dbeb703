"""Trains a Harbor agent under TRL's async GRPO on the stack's warm pools (recipe ``harbor-blackbox``).

No upstream script trains a Harbor agent under AsyncGRPO, so this is the project's own, with the
black-box ``TrlParser`` contract of a ``custom`` program (docs/reference/training-node.md, "The trainer
program"): ``AsyncGRPOConfig`` and this script's dataclass, whose fields are the contract's own flags
(``--model_name_or_path``, ``--model_revision``, ``--dataset-size``, ``--sandbox-vllm-url``) and the Harbor ones.

What it trains on: each prompt of the dataset names a Harbor task (a directory holding ``task.toml``
under ``--tasks_dir``; the tasks in turn, ``--dataset-size`` prompts), and each of a group's
``--num_generations`` rollouts is one Harbor trial of ``HARBOR_AGENT`` (or ``--agents``) on that task,
run by ``agent_rl_sandbox.harbor_sessions`` in the Harbor venv (``AGENT_RL_HARBOR_PYTHON``: Harbor 0.25
needs Python >= 3.12) on the task image's warm pool (``SANDBOX_TASK_POOLS``). TRL 1.16's
``HarnessRolloutWorker`` drives them in loop-owning mode: the agent owns its loop, the reward is the
task's verifier's, and the tokens trained on are the pod forwarder's record (docs/guides/harbor.md).

    accelerate launch --config_file /app/fsdp2.yaml /app/harbor_async_grpo.py --model_name_or_path ... \
        --vllm_server_base_url http://localhost:8000 --tasks_dir /app/harbor-tasks
"""

from __future__ import annotations

import itertools
import os
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

#: Where the trainer image's Harbor tasks are looked for unless --tasks_dir or HARBOR_TASKS_DIR says otherwise.
DEFAULT_TASKS_DIR = "/app/harbor-tasks"


@dataclass
class ScriptArguments:
    model_name_or_path: str = field(metadata={"help": "The policy: a Hub id or a local directory; vLLM serves it under this name."})
    model_revision: str | None = field(default=None, metadata={"help": "The model's revision on the Hub (ignored for a local directory)."})
    dataset_size: int = field(default=32, metadata={"help": "Prompts in the dataset: the tasks under --tasks_dir in turn."})
    sandbox_vllm_url: str | None = field(
        default=None,
        metadata={"help": "Where the sandbox side reaches the model. Unused here: each pod's forwarder holds its upstream (SANDBOX_UPSTREAM_URL)."},
    )
    tasks_dir: str = field(
        default_factory=lambda: os.environ.get("HARBOR_TASKS_DIR") or DEFAULT_TASKS_DIR,
        metadata={"help": "A Harbor task (a directory with task.toml) or a directory of them. Default: HARBOR_TASKS_DIR, else /app/harbor-tasks."},
    )
    agents: str = field(
        default_factory=lambda: os.environ.get("HARBOR_AGENT", ""),
        metadata={"help": "Harbor agent names, comma-separated; rollout i runs agents[i % n]. Default: HARBOR_AGENT (the stack's harbor.agent)."},
    )
    agent_timeout_s: float = field(default=600.0, metadata={"help": "Seconds one agent run may take inside its trial."})
    step_limit: int | None = field(default=None, metadata={"help": "The agent's step limit, for agents that take one (mini-swe-agent)."})


class ScriptError(ValueError):
    """A bad argument or a missing piece, reported before the model loads."""


def parse_args(argv: list[str] | None = None) -> tuple[ScriptArguments, Any]:
    """The contract's parser: TrlParser over this dataclass and AsyncGRPOConfig (no ModelConfig: both define --dtype)."""
    from trl import TrlParser
    from trl.experimental.async_grpo import AsyncGRPOConfig

    script_args, training_args = TrlParser((ScriptArguments, AsyncGRPOConfig)).parse_args_and_config(args=argv)
    if script_args.model_revision:
        # The trainer loads the model with model_init_kwargs (async_grpo_trainer.py); the revision goes there too.
        kwargs = training_args.model_init_kwargs if isinstance(training_args.model_init_kwargs, dict) else {}
        training_args.model_init_kwargs = {**kwargs, "revision": script_args.model_revision}
    return script_args, training_args


def agent_names(value: str) -> list[str]:
    agents = [a.strip() for a in value.split(",") if a.strip()]
    if not agents:
        raise ScriptError("no Harbor agent: set HARBOR_AGENT (the stack's harbor.agent) or pass --agents")
    return agents


def task_prompts(tasks: list[str], size: int) -> list[dict[str, Any]]:
    """`size` dataset rows, the tasks in turn; the prompt's one user message names the task (harbor_sessions.task_dir_for)."""
    if size < 1:
        raise ScriptError(f"--dataset-size {size}: at least 1")
    return [{"prompt": [{"role": "user", "content": t}]} for t in itertools.islice(itertools.cycle(tasks), size)]


def build_worker(script_args: ScriptArguments, training_args: Any, tokenizer: Any, dataset: Any) -> Any:
    """TRL 1.16's HarnessRolloutWorker in loop-owning mode over Harbor trials, with the trainer's own settings."""
    from trl.experimental.async_grpo.openenv_harness import HarnessRolloutWorker

    from agent_rl_sandbox.harbor_sessions import build_factory

    factory = partial(
        build_factory,
        task_dir=script_args.tasks_dir,
        agents=agent_names(script_args.agents),
        model=script_args.model_name_or_path,
        workdir=Path(training_args.output_dir) / "harbor-rollouts",
        agent_timeout_s=script_args.agent_timeout_s,
        step_limit=script_args.step_limit,
    )
    # The factory's checks (the Harbor venv, the agents, the tasks) run here, before the model loads: it
    # is built once by the worker's constructor.
    return HarnessRolloutWorker(
        harness_session_factory=factory,
        harness_adapter=None,
        model_name=script_args.model_name_or_path,
        dataset=dataset,
        reward_funcs=[],
        processing_class=tokenizer,
        eos_token_ids=[tokenizer.eos_token_id],
        num_generations=training_args.num_generations,
        max_inflight_tasks=training_args.max_inflight_tasks,
        queue_maxsize=training_args.queue_maxsize,
        vllm_server_url=training_args.vllm_server_base_url,
        max_tokens=training_args.max_completion_length,
        temperature=training_args.temperature,
        top_p=training_args.top_p,
        top_k=training_args.top_k,
        min_p=training_args.min_p,
        repetition_penalty=training_args.repetition_penalty,
        request_timeout=training_args.request_timeout,
        log_completions=training_args.log_completions,
        num_completions_to_print=training_args.num_completions_to_print,
    )


def prepare_data(script_args: ScriptArguments) -> Any:
    """The dataset of task prompts, with every Harbor check that needs no model (the agents, the tasks, the Harbor venv)."""
    from datasets import Dataset

    from agent_rl_sandbox.harbor_sessions import HARBOR_PYTHON_ENV, task_directories

    try:
        agent_names(script_args.agents)
        tasks = task_directories(script_args.tasks_dir)
        python = os.environ.get(HARBOR_PYTHON_ENV, "")
        if not python or not Path(python).exists():
            raise ScriptError(f"{HARBOR_PYTHON_ENV}: the Harbor venv's python (harbor 0.25, Python >= 3.12) is required; got {python!r}")
        return Dataset.from_list(task_prompts(tasks, script_args.dataset_size))
    except ValueError as e:
        raise ScriptError(str(e)) from None


def main(argv: list[str] | None = None) -> None:
    from accelerate.state import PartialState
    from transformers import AutoTokenizer
    from trl.experimental.async_grpo import AsyncGRPOTrainer

    script_args, training_args = parse_args(argv)
    dataset = prepare_data(script_args)
    tokenizer = AutoTokenizer.from_pretrained(script_args.model_name_or_path, revision=script_args.model_revision, padding_side="left")
    # Only the main process runs rollouts (AsyncGRPOTrainer ignores a worker elsewhere): trials start once per group.
    worker = build_worker(script_args, training_args, tokenizer, dataset) if PartialState().is_main_process else None
    trainer = AsyncGRPOTrainer(
        model=script_args.model_name_or_path,
        args=training_args,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_worker=worker,
    )
    trainer.train()
    trainer.save_model(training_args.output_dir)


if __name__ == "__main__":
    try:
        main()
    except ScriptError as e:
        sys.exit(f"harbor_async_grpo.py: {e}")
