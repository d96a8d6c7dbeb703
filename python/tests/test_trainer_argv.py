"""Every recipe's rendered trainer command line against its program's recorded parser.

The program facts (components/config/programs.ts: each flag's argparse action, type, choices,
required) become a real `argparse.ArgumentParser` here, and each command line the stack renders
(python/tests/trainer_argv.ts, from the real resolve step: every recipe, every layout its program
runs in, every target, pinned and unpinned model revisions) must parse with it, as the program's
own parser would. The args check at pod start (components/training/args/args_check.py) runs the
program's real parser in the real image; this test needs neither.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest
from waits import scaled

REPO = Path(__file__).resolve().parents[2]
ARGS_CHECK_PATH = "/usr/local/lib/agentrl/args_check.py"
TYPES = {"str": str, "int": int, "float": float}


@lru_cache(maxsize=1)
def cases() -> list[dict]:
    out = subprocess.run(
        ["node", "--import", "tsx", "python/tests/trainer_argv.ts"], cwd=REPO, capture_output=True, text=True, timeout=scaled(180)
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


class Refused(Exception):
    pass


class FactsParser(argparse.ArgumentParser):
    """argparse, raising instead of exiting, so a refusal is an assertion with the parser's message."""

    def error(self, message: str):  # type: ignore[override]
        raise Refused(message)


def parser_from(facts: dict) -> argparse.ArgumentParser:
    p = FactsParser(prog=facts["file"], add_help=False, allow_abbrev=False)
    for flag, f in facts["flags"].items():
        kwargs: dict = {}
        if f["action"] == "store_true":
            kwargs["action"] = "store_true"
        else:
            kwargs["type"] = TYPES[f.get("type", "str")]
            if "choices" in f:
                kwargs["choices"] = f["choices"]
        if f.get("required"):
            kwargs["required"] = True
        p.add_argument(flag, **kwargs)
    return p


def program_argv(case: dict) -> list[str]:
    """The words after the program's file in the rendered command."""
    command = case["command"]
    file = case["facts"]["file"]
    assert command.count(file) == 1, f"{file} appears once in {command}"
    return command[command.index(file) + 1 :]


def case_id(c: dict) -> str:
    return f"{c['recipe']}-{c['target']}-{c['layout']}-{'pinned' if c['revision'] != 'main' else 'main'}"


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        all_cases = cases()
        metafunc.parametrize("case", all_cases, ids=[case_id(c) for c in all_cases])


def test_every_recipe_is_rendered_in_every_layout_and_target() -> None:
    seen = {(c["recipe"], c["layout"]) for c in cases()}
    recipes = {c["recipe"] for c in cases()}
    assert {"mbpp-whitebox", "mbpp-whitebox-64", "wordle-whitebox", "opencode-blackbox", "opencode-blackbox-32b"} <= recipes
    assert ("mbpp-whitebox", "whitebox-server") in seen, "the eval script's server layout is rendered too"


def test_the_programs_parser_accepts_the_rendered_command(case: dict) -> None:
    parser = parser_from(case["facts"])
    try:
        args = parser.parse_args(program_argv(case))
    except Refused as refused:
        pytest.fail(f"{case['facts']['file']} refuses {program_argv(case)}: {refused}")
    values = vars(args)
    facts = case["facts"]
    dest = lambda flag: flag.lstrip("-").replace("-", "_")  # noqa: E731
    arg_map = facts["args"]
    if "envUrl" in arg_map:
        # The stack's router, never the script's default (the public Space).
        assert values[dest(arg_map["envUrl"])] == next(iter(case["envUrls"].values()))
    if "datasetSize" in arg_map:
        assert values[dest(arg_map["datasetSize"])] is not None, "--dataset-size is always explicit"
    if case["layout"] == "whitebox-server" and "vllmMode" in arg_map:
        assert values[dest(arg_map["vllmMode"])] == "server"
        assert values[dest(arg_map["vllmServerUrl"])] == case["vllmUrl"]
    if case["layout"] == "blackbox":
        assert values["sandbox_vllm_url"] == case["sandboxUrl"]
        assert values["sandbox_image"] == case["sandboxImage"], "TRL's script always passes an image: the pool's"
        assert values["vllm_url"] == case["vllmUrl"]
    if case["revision"] != "main":
        # No revision flag: the pinned revision arrives as the directory the pod start downloads it to.
        model = values[dest(arg_map["model"])]
        assert model.endswith(f"@{case['revision']}")
        assert f"--revision {case['revision']} --local-dir {model}" in " ".join(case["command"])
        # The pinned variant also pushes to the Hub and syncs to a trackio Space.
        assert values[dest(arg_map["pushToHub"])] is True
        assert values[dest(arg_map["hubModelId"])] == "org/model"
        assert values[dest(arg_map["trackioSpaceId"])] == "org/space"


def test_the_args_check_runs_first_on_the_same_command(case: dict) -> None:
    command = case["command"]
    at = command.index(ARGS_CHECK_PATH)
    assert command[at + 1] == "--then-exec"
    assert command[at + 2 :][-len(program_argv(case)) - 1] == case["facts"]["file"]


def test_a_flag_the_program_lacks_is_refused_by_the_same_parser() -> None:
    """The control: the parser built from the facts refuses what the old renderer sent."""
    case = next(c for c in cases() if c["recipe"] == "mbpp-whitebox")
    parser = parser_from(case["facts"])
    for extra in (["--max_steps", "42"], ["--model_name_or_path", "x"], ["--push-to-hub", "true"], ["--vllm-mode", "remote"]):
        with pytest.raises(Refused):
            parser.parse_args(program_argv(case) + extra)
