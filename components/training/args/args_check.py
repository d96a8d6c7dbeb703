"""Args check, run at pod start before the model loads: does the training script accept the
command line the platform rendered for it?

    python args_check.py <script.py> <argv...>
    python args_check.py --then-exec <launcher...> <script.py> <argv...>

The second form is what the platform renders at pod start: the check runs on the first `.py`
word and the words after it, and when the command line is accepted the whole command (for
example `accelerate launch --num_processes 2 /app/train.py ...`) replaces this process (exec),
so the check leaves nothing behind and the program gets the pod's signals. The trainer images
put this file at /usr/local/lib/agentrl/args_check.py (trainer/*/Dockerfile).

The script runs as `__main__` (runpy) with `sys.argv = [script, *argv]`, so its own
imports and its own argument parser run for real. The first parse that completes stops
the script there: nothing after the parse (dataset, model, trainer) runs.

- accepted: prints "args-check: <script> accepts the command line", exit 0.
- refused by argparse ("unrecognized arguments", a bad value): the parser's own usage and
  message on stderr, exit 2 (argparse's `error()` exit status, Python `argparse` docs).
- refused by a parser that raises instead of exiting (transformers' `HfArgumentParser`
  raises ValueError for strings it did not use, transformers `hf_argparser.py`): the
  message on stderr, exit 2.
- the script ended without parsing anything: exit 2, "the script parsed no arguments".
- the script failed before its parse (an import that is missing from the image): its own
  traceback, exit 1. That is an image problem, not an argument problem.

How the stop works: `ArgumentParser.parse_args`, `parse_known_args` and the intermixed
variants are wrapped on the base class, so subclasses inherit the wrappers; subclasses
defined later (`HfArgumentParser`, TRL's `TrlParser`, imported by the script after this
module installed its hook) get their own public `parse*` methods wrapped through
`__init_subclass__`, so TRL's `parse_args_and_config`, which parses more than once
inside (trl `trl/scripts/utils.py`), counts as one parse. Only the outermost parse call
that returns stops the script; the parses it makes inside run to their end, so
`parse_args`'s own check for leftover strings (which calls `parse_known_args`) still runs.

Limits: code the script runs before its first parse (module level) does run; a script that
parses twice at the top level (a pre-parse with `parse_known_args`, then the real one) is
checked by the first only. Standard library only: the image's Python runs it as is.
"""

from __future__ import annotations

import argparse
import functools
import os
import runpy
import sys
import traceback

#: Exit status for a command line the script refuses (argparse's own, from `error()`).
EXIT_REFUSED = 2


class _ArgsAccepted(BaseException):
    """Raised out of the script's first completed parse. A BaseException, so the script's
    own `except Exception:` handlers do not catch it."""


class _ParseRefused(BaseException):
    """A parser raised (rather than exited) while parsing: carries the original error."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


class _ParseWatch:
    """Counts how deep the program is in parser calls; the outermost one that returns stops it."""

    def __init__(self) -> None:
        self.depth = 0
        self.parsed = False
        self.exited_in_parse = False

    def wrap(self, method):
        if getattr(method, "_agentrl_args_check", False):
            return method

        @functools.wraps(method)
        def parse(*args, **kwargs):
            self.depth += 1
            try:
                result = method(*args, **kwargs)
            except SystemExit:
                self.exited_in_parse = True  # argparse's error() (status 2) or --help (0)
                raise
            except (_ArgsAccepted, _ParseRefused):
                raise
            except Exception as error:  # noqa: BLE001 - a parser's refusal, reported as one
                if self.depth == 1:
                    raise _ParseRefused(error) from error
                raise
            finally:
                self.depth -= 1
            if self.depth == 0:
                self.parsed = True
                raise _ArgsAccepted()
            return result

        parse._agentrl_args_check = True  # type: ignore[attr-defined]
        return parse

    def install(self) -> None:
        base = argparse.ArgumentParser
        for name in ("parse_args", "parse_known_args", "parse_intermixed_args", "parse_known_intermixed_args"):
            if name in vars(base):
                setattr(base, name, self.wrap(vars(base)[name]))
        watch = self
        previous = base.__dict__.get("__init_subclass__")

        def init_subclass(cls, **kwargs):
            if previous is not None:
                previous.__get__(None, cls)(**kwargs)
            else:
                super(base, cls).__init_subclass__(**kwargs)
            for attr, value in list(vars(cls).items()):
                if attr.startswith("parse") and callable(value) and not isinstance(value, (staticmethod, classmethod)):
                    setattr(cls, attr, watch.wrap(value))

        base.__init_subclass__ = classmethod(init_subclass)  # type: ignore[method-assign,assignment]


def check(script: str, argv: list[str]) -> int:
    """Run `script` with `argv` up to its first completed parse; the exit status of the check."""
    if not os.path.isfile(script):
        print(f"args-check: {script}: no such file", file=sys.stderr)
        return EXIT_REFUSED
    watch = _ParseWatch()
    watch.install()
    sys.argv = [script, *argv]
    # `python script.py` puts the script's folder first on sys.path; runpy.run_path does not.
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except _ArgsAccepted:
        print(f"args-check: {script} accepts the command line")
        return 0
    except _ParseRefused as refused:
        message = "".join(traceback.format_exception_only(type(refused.error), refused.error)).strip()
        print(f"args-check: {script} refuses the command line: {message}", file=sys.stderr)
        return EXIT_REFUSED
    except SystemExit as exited:
        if isinstance(exited.code, str):
            print(exited.code, file=sys.stderr)  # what the interpreter would print for sys.exit("...")
            return 1
        if watch.exited_in_parse or exited.code not in (0, None):
            # argparse printed its usage and message already: keep its status.
            return exited.code
        # A clean exit before any parse: fall through to "parsed no arguments".
    if not watch.parsed:
        print(
            f"args-check: {script}: the script parsed no arguments (it ended without calling an argparse parser), "
            "so its command line cannot be checked",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    return 0


USAGE = "usage: python args_check.py <script.py> [argv...] | --then-exec <launcher...> <script.py> [argv...]"


def then_exec(command: list[str]) -> int:
    """Check the command's script, then exec the whole command; the check's status if refused."""
    script_at = next((i for i, word in enumerate(command) if word.endswith(".py")), None)
    if script_at is None:
        print(f"args-check: no script (a word ending in .py) in the command: {' '.join(command)}", file=sys.stderr)
        return EXIT_REFUSED
    status = check(command[script_at], command[script_at + 1 :])
    if status != 0:
        return status
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(command[0], command)
    except OSError as error:
        print(f"args-check: cannot start {command[0]}: {error}", file=sys.stderr)
        return 127
    return 0  # not reached: exec replaced the process


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return EXIT_REFUSED if not argv else 0
    if argv[0] == "--then-exec":
        if len(argv) == 1:
            print(USAGE, file=sys.stderr)
            return EXIT_REFUSED
        return then_exec(argv[1:])
    return check(argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
