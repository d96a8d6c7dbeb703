"""Every `vllm serve` command line the stack renders, parsed by vLLM's own parser at the lock's pin.

Where vLLM runs as a server of its own (the whitebox-server and blackbox layouts), the platform
renders `vllm serve <model> <flags>` (components/training/vllm-args.ts). Here each rendered line
(python/tests/trainer_argv.ts: every recipe, layout, target, pinned and unpinned revisions) goes
through the parser `vllm serve` itself builds, in vLLM 0.29.0 from the lock: the top-level
`vllm` parser with the serve subcommand's own `subparser_init` (vllm/entrypoints/cli/serve.py,
ServeSubcommand; vllm/entrypoints/cli/main.py builds it the same way), then the subcommand's
`validate`. So a flag vLLM does not have, a value outside its choices or a JSON option it cannot
read fails here, not at pod start on a GPU node.

vLLM computes some argument defaults from the device (vllm/config/device.py, DeviceConfig);
this machine has no GPU, so the parse runs with VLLM_TARGET_DEVICE=cpu (vllm/platforms/__init__.py
cpu_platform_plugin), in a process of its own. Nothing is served and no model is loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache

import pytest

from test_trainer_argv import case_id, cases
from waits import scaled

PARSE_PY = r"""
import json, sys, traceback
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.entrypoints.cli.serve import ServeSubcommand

top = FlexibleArgumentParser(prog="vllm")
serve = ServeSubcommand()
serve.subparser_init(top.add_subparsers(dest="subparser", required=True))

class Refused(Exception):
    pass

def refuse(message):
    raise Refused(message)

# argparse's error() exits; here a refusal is a result with the parser's own message.
top.error = refuse
for action in top._subparsers._group_actions:
    for p in action.choices.values():
        p.error = refuse

out = []
for argv in json.load(sys.stdin):
    try:
        args = top.parse_args(argv)
        serve.validate(args)
        out.append({"ok": True, "model_tag": args.model_tag})
    except Refused as e:
        out.append({"ok": False, "error": str(e)})
    except Exception as e:
        out.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
print("RESULT " + json.dumps(out))
"""

#: A line vLLM must refuse: the check above would pass anything if the parser were not vLLM's.
UNKNOWN_FLAG = "--agentrl-no-such-flag"


def vllm_cases() -> list[dict]:
    return [c for c in cases() if c["vllmCommand"] is not None]


@lru_cache(maxsize=1)
def parsed() -> dict[str, dict]:
    """Each case's result, and the refusal control, from one process (vLLM's import is slow)."""
    lines = [c["vllmCommand"][1:] for c in vllm_cases()]
    control = lines[0] + [UNKNOWN_FLAG]
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "VLLM_LOGGING_LEVEL": "ERROR"}
    r = subprocess.run(
        [sys.executable, "-c", PARSE_PY], input=json.dumps([*lines, control]), env=env, capture_output=True, text=True, timeout=scaled(600)
    )
    results = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert r.returncode == 0 and results, f"the vLLM parse (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    got = json.loads(results[-1][len("RESULT ") :])
    assert len(got) == len(lines) + 1
    out = {case_id(c): g for c, g in zip(vllm_cases(), got)}
    out["control"] = got[-1]
    return out


def test_server_layouts_render_vllm_serve() -> None:
    ids = [case_id(c) for c in vllm_cases()]
    assert any("-blackbox-" in i for i in ids), ids
    assert any("-whitebox-server-" in i for i in ids), ids
    for c in vllm_cases():
        assert c["vllmCommand"][:2] == ["vllm", "serve"], c["vllmCommand"]
    for c in cases():
        if c["layout"] == "colocate":
            assert c["vllmCommand"] is None, f"{case_id(c)}: colocate runs vLLM inside the trainer"


def test_vllm_refuses_a_flag_it_does_not_have() -> None:
    control = parsed()["control"]
    assert control["ok"] is False, control
    assert UNKNOWN_FLAG in control["error"], control


def pytest_generate_tests(metafunc):
    if "vcase" in metafunc.fixturenames:
        all_cases = vllm_cases()
        metafunc.parametrize("vcase", all_cases, ids=[case_id(c) for c in all_cases])


def test_rendered_vllm_serve_is_accepted_by_vllm(vcase: dict) -> None:
    got = parsed()[case_id(vcase)]
    assert got["ok"], f"vllm serve refuses {' '.join(vcase['vllmCommand'])}: {got['error']}"
    assert got["model_tag"] == vcase["vllmCommand"][2], got


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
