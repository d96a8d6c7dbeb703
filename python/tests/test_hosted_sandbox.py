"""Why hosted sandboxes (`sandboxes.provider: hf`) are refused for the black box, with no override
(components/config/sandbox-providers.ts HOSTED_BLACKBOX_REFUSED), run as the agent. Kept as that evidence: the
hosted layout below is a reference, not something a stack can deploy.

A hosted sandbox has one uid: OpenEnv's capture proxy runs as the agent's uid, with the upstream key in
its environment, and records the trace in files that uid owns. The test lays that out in a pod
(test_sandbox_trust.Pod: a network namespace the test makes, netns.py, with the template's forwarder and runtime as it
runs them, each its uid on a read-only root): the proxy in the runtime's container as the agent's uid, beside the
forwarder (its own uid, its rollout's key delivered), and runs the same four attacks as the agent's uid against both:
read the key, rewrite the trace, replace the proxy, take its port.

- Hosted layout: every attack succeeds. That is old code's behaviour for `hf` (main planned such a stack
  without a word), and why the config refuses it.
- Forwarder (agent-sandbox, the black box's one supported provider): every attack fails.

The capture proxy is a STAND-IN (the standard library's http.server, serving the trace file it records
from a directory of its uid), as test_sandbox_trust.py's control is; the model is stub_model.StubModel,
a STAND-IN for vLLM.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import sandbox_root
from conftest import free_port, stop_process
from test_forwarder import PYTHON3, SYSTEM_PATH
from test_sandbox_trust import AGENT_ATTACKS, KEY, Pod, needs_root, pod  # noqa: F401 (pod: the fixture)
from waits import wait_for

#: The issue's one-liner, as the agent's uid: every process's environment it can read, searched for the key.
AGENT_READS_KEYS = r"""
import json, os, sys
found, refused = [], 0
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    try:
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        refused += 1
        continue
    found += [int(pid) for e in env if e.startswith(sys.argv[1].encode() + b"=")]
print(json.dumps({"found": found, "refused": refused}))
"""

#: The agent rewrites the recorded trace: every token id and logprob, and a turn it invents.
AGENT_REWRITES_TRACE = r"""
import json, sys
path = sys.argv[1]
try:
    t = json.load(open(path))
    t["entries"] = [{"prompt_token_ids": [1], "choices": [{"token_ids": [42] * 8, "logprobs": [0.0] * 8}]}]
    open(path, "w").write(json.dumps(t))
    print(json.dumps("rewritten"))
except OSError as e:
    print(json.dumps(type(e).__name__))
"""


class HostedCaptureProxy:
    """STAND-IN for a hosted sandbox's capture proxy: the agent's uid, the key in its env, its trace in
    a directory of that uid, served on a loopback port of the pod."""

    KEY_ENV = "UPSTREAM_API_KEY"

    def __init__(self, p: Pod) -> None:
        self.port = free_port()
        # In the agent's container, written through its runtime: the agent's uid owns the trace.
        self.dir = f"{sandbox_root.WORKDIR}/hosted-trace"
        self.trace = f"{self.dir}/trace.json"
        p.sandbox.write_text(self.trace, json.dumps({"entries": [{"prompt_token_ids": [5, 6], "choices": [{"token_ids": [7], "logprobs": [-0.5]}]}]}))
        self.proc = subprocess.Popen(
            p.agent_argv(PYTHON3, "-I", "-m", "http.server", "--bind", "127.0.0.1", str(self.port), "--directory", self.dir),
            env={"PATH": SYSTEM_PATH, self.KEY_ENV: KEY},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for("the hosted capture proxy listens", lambda: p.listening(self.port), 15)


@needs_root
def test_a_hosted_sandbox_gives_the_agent_its_key_and_its_trace_and_the_forwarder_does_not(pod):
    hosted = HostedCaptureProxy(pod)
    try:
        # Read the key. Hosted: the proxy's environ is the agent's own; the forwarder's is another uid's.
        keys = pod.agent_json(AGENT_READS_KEYS, HostedCaptureProxy.KEY_ENV)
        assert hosted.proc.pid in keys["found"] or _child_of(hosted.proc.pid, keys["found"]), keys
        # The forwarder has no key env at all (its rollout's key is delivered into its memory), and its environ is
        # another uid's: unreadable.
        assert _forwarder_key_envs() == []
        seen = pod.agent_json(AGENT_READS_KEYS, "PATH")
        assert pod.proc.pid not in seen["found"] and seen["refused"] > 0, seen

        # Rewrite the trace. Hosted: the file is the agent's. Forwarder: its trace is in its memory, and the
        # trace port refuses the pod's side (test_sandbox_trust.py reads it from both of the pod's addresses).
        assert pod.agent_json(AGENT_REWRITES_TRACE, hosted.trace) == "rewritten"
        assert json.loads(pod.sandbox.read_text(hosted.trace))["entries"][0]["choices"][0]["token_ids"] == [42] * 8

        # Replace the proxy and take its port. Hosted: killed, port bound by the agent. Forwarder: EPERM, every
        # bind that loopback's callers would reach refused.
        attack = pod.agent_json(AGENT_ATTACKS, str(hosted.proc.pid), str(hosted.port), pod.ns.ns_ip)
        assert attack["kill"][str(hosted.proc.pid)] == "killed", attack
        assert attack["bind"]["127.0.0.1 -"] == "bound", attack
        pids = pod.forwarder_pids()
        attack = pod.agent_json(AGENT_ATTACKS, ",".join(map(str, pids)), str(pod.port), pod.ns.ns_ip)
        assert set(attack["kill"].values()) == {"EPERM"}, attack
        assert {k: v for k, v in attack["bind"].items() if v == "bound" and not k.startswith(pod.ns.ns_ip + " ")} == {}, attack
        assert pod.forwarder_pids() == pids
    finally:
        stop_process(hosted.proc)


def _forwarder_key_envs() -> list[str]:
    from test_plan_contract import forwarder, plan_facts

    return [e["name"] for e in forwarder(plan_facts()).get("env", [])]


def _child_of(pid: int, found: list[int]) -> bool:
    """ip netns exec / setpriv exec into the proxy, so its pid is the Popen's; a wrapper's child counts too."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return False
    return any(int(k) in found for k in kids)
