"""Apply the two documented changes to TRL's opencode trainer: its sandbox backend becomes the
stack's pool (agent_rl_sandbox.AgentSandboxBackend) instead of Hugging Face's hosted sandboxes, and
its session factory trains on the pod forwarder's trace instead of the in-sandbox proxy's
(agent_rl_sandbox.trusted_trace.ForwarderTracedFactory; docs/design/sandbox-trust.md).

    python3 use_agent_sandbox.py /app/opencode_hf_sandbox.py

huggingface/trl examples/async_grpo_opencode/opencode_hf_sandbox.py (the revision the black-box
image fetches, components/config/programs.ts) builds its backend in one line of `build_factory`,
`sandbox_backend=HFSandboxBackend(image=image, flavor=flavor),`, and imports the class from
`opencode_env.sandbox`; `build_factory` ends `return OpencodeTaskFactory(inner)`. This rewrites that
call, wraps that return in ForwarderTracedFactory, and adds the two imports beside OpenEnv's; every
other line stays as published. AgentSandboxBackend takes HFSandboxBackend's arguments and checks
them against the pool (python/README.md).

Refuses, naming the file and what it found, and leaves the file unchanged, unless the call, the
return and the import line each occur exactly once: a script that changed upstream must be read again, not
patched blindly. Standard library only: it runs in the image build.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

#: The backend line of build_factory (a trailing comment allowed).
CALL = re.compile(r"^(?P<indent>\s*)sandbox_backend=HFSandboxBackend\((?P<args>[^()]*)\),(?P<comment>\s*#.*)?$")
#: OpenEnv's sandbox import, after which the stack's is added.
OPENENV_IMPORT = re.compile(r"^from opencode_env\.sandbox import .*\bHFSandboxBackend\b.*$")
#: build_factory's return: the factory TRL's worker gets (a trailing comment allowed).
RETURN = re.compile(r"^(?P<indent>\s*)return (?P<factory>OpencodeTaskFactory\(inner\))(?P<comment>\s*#.*)?$")
IMPORT_LINE = "from agent_rl_sandbox import AgentSandboxBackend"
TRACE_IMPORT_LINE = "from agent_rl_sandbox.trusted_trace import ForwarderTracedFactory"


class NotThePublishedScript(Exception):
    pass


def patched(text: str, name: str) -> str:
    """The script with the backend swapped; raises NotThePublishedScript listing every mismatch."""
    lines = text.splitlines(keepends=True)
    calls = [i for i, line in enumerate(lines) if CALL.match(line.rstrip("\n"))]
    imports = [i for i, line in enumerate(lines) if OPENENV_IMPORT.match(line.rstrip("\n"))]
    returns = [i for i, line in enumerate(lines) if RETURN.match(line.rstrip("\n"))]
    problems = []
    if len(calls) != 1:
        problems.append(f"expected exactly one 'sandbox_backend=HFSandboxBackend(...)' line, found {len(calls)}")
    if len(imports) != 1:
        problems.append(f"expected exactly one 'from opencode_env.sandbox import ... HFSandboxBackend ...' line, found {len(imports)}")
    if len(returns) != 1:
        problems.append(f"expected exactly one 'return OpencodeTaskFactory(inner)' line, found {len(returns)}")
    if any(IMPORT_LINE in line for line in lines):
        problems.append(f"it already imports AgentSandboxBackend ({IMPORT_LINE!r}): nothing to change")
    if problems:
        raise NotThePublishedScript(
            f"{name}: not the script this change was written for ({'; '.join(problems)}); read the fetched revision "
            "of huggingface/trl examples/async_grpo_opencode/opencode_hf_sandbox.py again and update trainer/use_agent_sandbox.py"
        )
    (call,), (imp,), (ret,) = calls, imports, returns
    m = CALL.match(lines[call].rstrip("\n"))
    assert m is not None
    lines[call] = f"{m['indent']}sandbox_backend=AgentSandboxBackend({m['args']}),  # the stack's sandbox pool (agent-rl-infra)\n"
    r = RETURN.match(lines[ret].rstrip("\n"))
    assert r is not None
    lines[ret] = f"{r['indent']}return ForwarderTracedFactory({r['factory']})  # train on the forwarder's trace (agent-rl-infra)\n"
    lines.insert(imp + 1, TRACE_IMPORT_LINE + "\n")
    lines.insert(imp + 1, IMPORT_LINE + "\n")
    out = "".join(lines)
    ast.parse(out, filename=name)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: use_agent_sandbox.py <path of opencode_hf_sandbox.py>", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        text = path.read_text()
        new = patched(text, str(path))
    except (OSError, NotThePublishedScript, SyntaxError) as e:
        print(f"use_agent_sandbox: {e}", file=sys.stderr)
        return 1
    path.write_text(new)
    print(f"use_agent_sandbox: {path}: HFSandboxBackend -> AgentSandboxBackend, its factory wrapped in ForwarderTracedFactory (2 lines, plus their imports)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
