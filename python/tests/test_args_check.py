"""The pod-start args check (components/training/args/args_check.py): the script's own parser
decides, and nothing after the parse runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from waits import scaled

REPO = Path(__file__).resolve().parents[2]
ARGS_CHECK = REPO / "components/training/args/args_check.py"

# A seed-like script: dashed flags, a store_true flag, and real work after the parse (the
# marker file stands for loading the model).
SEED_LIKE = """
import argparse, pathlib, sys
MARKER = pathlib.Path(__file__).with_name("ran-past-parse")

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dataset-size", type=int, default=170)
    p.add_argument("--model", default="Qwen/Qwen3-1.7B")
    p.add_argument("--push-to-hub", action="store_true")
    args = p.parse_args()
    MARKER.write_text(f"trained {args.model}")

if __name__ == "__main__":
    main()
"""

# Catches Exception around its parse, as some scripts do: the stop must get through.
CATCHES_EXCEPTIONS = """
import argparse, pathlib
try:
    args = argparse.ArgumentParser().parse_args()
except Exception:
    pass
pathlib.Path(__file__).with_name("ran-past-parse").write_text("x")
"""

# A subclass parser that parses twice inside one method, as TRL's TrlParser.parse_args_and_config
# wraps HfArgumentParser.parse_args_into_dataclasses, which calls parse_known_args and then
# raises ValueError for leftover strings (transformers hf_argparser.py).
SUBCLASS_PARSER = """
import argparse, pathlib

class DataclassParser(argparse.ArgumentParser):
    def parse_into(self, args=None):
        pre = argparse.ArgumentParser(add_help=False)
        pre.add_argument("--config")
        _, args = pre.parse_known_args(args)
        ns, rest = self.parse_known_args(args)
        if rest:
            raise ValueError(f"Some specified arguments are not used by the HfArgumentParser: {rest}")
        return ns

class Trl(DataclassParser):
    def parse_args_and_config(self, args=None):
        return self.parse_into(args)

p = Trl()
p.add_argument("--output_dir")
p.add_argument("--per_device_train_batch_size", type=int)
p.parse_args_and_config()
pathlib.Path(__file__).with_name("ran-past-parse").write_text("x")
"""

NO_PARSER = """
print("hello, no arguments here")
"""

FAILS_BEFORE_PARSE = """
import a_module_the_image_lacks
"""

SUBPARSERS = """
import argparse, pathlib
p = argparse.ArgumentParser()
sub = p.add_subparsers(dest="cmd", required=True)
train = sub.add_parser("train")
train.add_argument("--steps", type=int)
p.parse_args()
pathlib.Path(__file__).with_name("ran-past-parse").write_text("x")
"""


def write_script(tmp_path: Path, body: str, name: str = "train.py") -> Path:
    script = tmp_path / name
    script.write_text(textwrap.dedent(body))
    return script


def run_check(script: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ARGS_CHECK), str(script), *argv], capture_output=True, text=True, timeout=scaled(60), cwd=script.parent
    )


def test_accepted_command_line_exits_0_and_nothing_after_the_parse_runs(tmp_path: Path) -> None:
    script = write_script(tmp_path, SEED_LIKE)
    r = run_check(script, "--dataset-size", "42", "--push-to-hub", "--model", "m")
    assert r.returncode == 0, r.stderr
    assert f"args-check: {script} accepts the command line" in r.stdout
    assert not (tmp_path / "ran-past-parse").exists(), "the script ran past its parse"


def test_the_same_script_run_directly_does_the_work(tmp_path: Path) -> None:
    # The control for the test above: without the check the marker is written.
    script = write_script(tmp_path, SEED_LIKE)
    subprocess.run([sys.executable, str(script), "--dataset-size", "42"], check=True, timeout=scaled(60))
    assert (tmp_path / "ran-past-parse").read_text() == "trained Qwen/Qwen3-1.7B"


def test_unknown_flag_exits_2_with_the_parsers_message(tmp_path: Path) -> None:
    script = write_script(tmp_path, SEED_LIKE)
    r = run_check(script, "--dataset_size", "42")
    assert r.returncode == 2
    assert "unrecognized arguments: --dataset_size 42" in r.stderr
    assert "usage:" in r.stderr
    assert "accepts" not in r.stdout
    assert not (tmp_path / "ran-past-parse").exists()


def test_value_after_a_store_true_flag_is_refused(tmp_path: Path) -> None:
    # TRL's boolean fields take `--push_to_hub true`; a plain store_true flag does not.
    script = write_script(tmp_path, SEED_LIKE)
    r = run_check(script, "--push-to-hub", "true")
    assert r.returncode == 2
    assert "unrecognized arguments: true" in r.stderr


def test_bad_value_type_is_refused(tmp_path: Path) -> None:
    script = write_script(tmp_path, SEED_LIKE)
    r = run_check(script, "--dataset-size", "lots")
    assert r.returncode == 2
    assert "argument --dataset-size: invalid int value: 'lots'" in r.stderr


def test_a_script_that_parses_nothing_exits_2(tmp_path: Path) -> None:
    script = write_script(tmp_path, NO_PARSER)
    r = run_check(script, "--anything")
    assert r.returncode == 2
    assert "the script parsed no arguments" in r.stderr
    assert "hello, no arguments here" in r.stdout  # it did run to its end


def test_except_exception_around_the_parse_does_not_swallow_the_stop(tmp_path: Path) -> None:
    script = write_script(tmp_path, CATCHES_EXCEPTIONS)
    r = run_check(script)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "ran-past-parse").exists()


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--output_dir", "/out", "--per_device_train_batch_size", "8"], 0, "accepts the command line"),
        (["--config", "c.yaml", "--output_dir", "/out"], 0, "accepts the command line"),
        (["--output_dir", "/out", "--vllm_mode", "colocate"], 2, "Some specified arguments are not used by the HfArgumentParser: ['--vllm_mode', 'colocate']"),
    ],
)
def test_subclass_parser_method_counts_as_one_parse(tmp_path: Path, argv: list[str], code: int, message: str) -> None:
    # The inner parse_known_args calls (the --config pre-parse among them) must not stop the
    # script early: the leftover check in the subclass method still has to run.
    script = write_script(tmp_path, SUBCLASS_PARSER)
    r = run_check(script, *argv)
    assert r.returncode == code, r.stdout + r.stderr
    assert message in (r.stdout if code == 0 else r.stderr)
    assert not (tmp_path / "ran-past-parse").exists()


def test_subparsers_parse_inside_the_outer_parse(tmp_path: Path) -> None:
    script = write_script(tmp_path, SUBPARSERS)
    assert run_check(script, "train", "--steps", "3").returncode == 0
    r = run_check(script, "train", "--step", "3", "--nope")
    assert r.returncode == 2
    assert "unrecognized arguments: --nope" in r.stderr


def test_script_failing_before_its_parse_keeps_its_traceback_and_exits_1(tmp_path: Path) -> None:
    script = write_script(tmp_path, FAILS_BEFORE_PARSE)
    r = run_check(script)
    assert r.returncode == 1
    assert "ModuleNotFoundError: No module named 'a_module_the_image_lacks'" in r.stderr


def test_script_imports_resolve_from_its_own_folder(tmp_path: Path) -> None:
    # `python script.py` puts the script's folder first on sys.path; the check does the same.
    (tmp_path / "helper_args.py").write_text("import argparse\ndef parser():\n    p = argparse.ArgumentParser()\n    p.add_argument('--x')\n    return p\n")
    script = write_script(tmp_path, "import helper_args\nhelper_args.parser().parse_args()\n")
    r = subprocess.run([sys.executable, str(ARGS_CHECK), str(script), "--x", "1"], capture_output=True, text=True, timeout=scaled(60), cwd=REPO)
    assert r.returncode == 0, r.stderr


def test_missing_script_and_missing_arguments(tmp_path: Path) -> None:
    r = run_check(tmp_path / "absent.py")
    assert r.returncode == 2
    assert "absent.py: no such file" in r.stderr
    r = subprocess.run([sys.executable, str(ARGS_CHECK)], capture_output=True, text=True, timeout=scaled(60))
    assert r.returncode == 2
    assert "usage: python args_check.py <script.py>" in r.stderr


# TRL's own parser over GRPOConfig and ModelConfig, as the white-box contract describes
# (components/training/trl-args.ts); runs where trl is installed (the trainer lock venv).
TRL_SCRIPT = """
import pathlib
from trl import GRPOConfig, ModelConfig, TrlParser
parser = TrlParser((GRPOConfig, ModelConfig))
training_args, model_args = parser.parse_args_and_config()
pathlib.Path(__file__).with_name("ran-past-parse").write_text("x")
"""


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--per_device_train_batch_size", "8", "--use_vllm", "true", "--vllm_mode", "colocate", "--model_name_or_path", "Qwen/Qwen3-1.7B"], 0, "accepts the command line"),
        (["--dataset-size", "170"], 2, "Some specified arguments are not used by the HfArgumentParser: ['--dataset-size', '170']"),
        (["--per_device_train_batch_size", "eight"], 2, "train.py: error: argument --per_device_train_batch_size/--per-device-train-batch-size: invalid int value: 'eight'"),
    ],
)
def test_real_trl_parser(tmp_path: Path, argv: list[str], code: int, message: str) -> None:
    pytest.importorskip("trl", reason="trl is not installed here (the trainer lock venv has it)")
    script = write_script(tmp_path, TRL_SCRIPT)
    # GRPOConfig's __post_init__ runs inside the parse and refuses bf16 (its default) without a GPU.
    argv = ["--output_dir", str(tmp_path / "out"), "--bf16", "false", *argv]
    r = subprocess.run([sys.executable, str(ARGS_CHECK), str(script), *argv], capture_output=True, text=True, timeout=scaled(300), cwd=tmp_path)
    assert r.returncode == code, r.stdout + r.stderr[-3000:]
    assert message in (r.stdout if code == 0 else r.stderr)
    assert not (tmp_path / "ran-past-parse").exists()


def test_then_exec_runs_the_whole_command_once_the_script_accepts_it(tmp_path: Path) -> None:
    """The form the platform renders: check the .py word's command line, then exec the command."""
    script = write_script(tmp_path, SEED_LIKE)
    # `python -X utf8 <script>` stands for a launcher with its own words before the script.
    command = [sys.executable, "-X", "utf8", str(script), "--dataset-size", "42", "--model", "m"]
    r = subprocess.run([sys.executable, str(ARGS_CHECK), "--then-exec", *command], capture_output=True, text=True, timeout=scaled(60), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "ran-past-parse").read_text() == "trained m", "the exec'd command did the work"


def test_then_exec_refused_command_never_starts(tmp_path: Path) -> None:
    script = write_script(tmp_path, SEED_LIKE)
    command = [sys.executable, str(script), "--max_steps", "42"]
    r = subprocess.run([sys.executable, str(ARGS_CHECK), "--then-exec", *command], capture_output=True, text=True, timeout=scaled(60), cwd=tmp_path)
    assert r.returncode == 2
    assert "unrecognized arguments: --max_steps 42" in r.stderr
    assert not (tmp_path / "ran-past-parse").exists(), "a refused command line never starts the program"


def test_then_exec_without_a_script_is_refused(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(ARGS_CHECK), "--then-exec", "accelerate", "launch"], capture_output=True, text=True, timeout=scaled(60))
    assert r.returncode == 2
    assert "no script (a word ending in .py) in the command: accelerate launch" in r.stderr
