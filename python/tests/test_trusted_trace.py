"""What the trainer trains on when the agent forges the capture proxy's trace, as the agent would.

The pod is test_sandbox_trust's: a network namespace the test makes with the template's forwarder and runtime as it
runs them (each its uid on a read-only root), the agent's commands in the runtime's container as the sandbox uid, the
trainer on the host's end of the veth pair, and stub_model.StubModel as a STAND-IN for vLLM. The capture proxy is a
STAND-IN too (OpenEnv's serves `/sessions/<id>/trace_entries`; here a process of the agent's uid serves
whatever JSON file the agent writes: the proxy runs as the agent's uid, so its record is the agent's
to rewrite, and its port the agent's to serve). The session is the stand-in factory's
(harness_standin.StandInSession), whose `fetch_training_trace()` is what TRL's HarnessRolloutWorker
trains on; its sandbox is the pod's runtime (RuntimeHandle): it reads the forwarder's trace through fetch_trace() and
runs the trainer's `exec` (the curl to the proxy) in the pod.

On main's code (the stand-in trained on the proxy's entries; checked by running these three pod
tests with ForwarderTracedSession.fetch_training_trace returning the inner session's): the forged
token ids and logprobs reach the trainer, and a restarted or stopped forwarder goes unnoticed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

import sandbox_root
from agent_rl_sandbox import RuntimeHandle
from capture_session import CaptureSessionConfig
from conftest import free_port, stop_process
from agent_rl_sandbox.trusted_trace import ForwarderTracedFactory, ForwarderTracedSession, UntrustedTrace, note_claimed, trusted_entries
from harness_standin import StandInSession, admin_header_path
from test_forwarder import PYTHON3, SYSTEM_PATH
from test_sandbox_trust import AGENT_CALLS, Pod, needs_root
from waits import scaled, wait_for

#: The capture proxy STAND-IN, as the agent's uid: GET anything answers {"entries": <the file's JSON>}.
AGENT_PROXY = r'''
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"entries": json.load(open(sys.argv[2]))}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''

#: The agent rewrites the proxy's record: every token id and logprob, and one turn it never had.
AGENT_FORGES = r'''
import json, sys
entries = json.load(open(sys.argv[1]))
for e in entries:
    e["completion_token_ids"] = [7] * len(e["completion_token_ids"])
    e["per_token_logps"] = [0.0] * len(e["per_token_logps"])
entries.append({**entries[0], "prompt_token_ids": [1, 2, 3], "loss_mask": [0, 0, 0] + [1] * len(entries[0]["completion_token_ids"]),
                "metadata": {"node_id": "invented"}})
json.dump(entries, open(sys.argv[1], "w"))
'''


#: The agent's solution, as a process it left behind writes it once the model answered (the stand-in verifier runs it).
SOLUTION = "print(sum(map(int, input().split())))\n"
AGENT_WRITES = "import os, sys; os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True); open(sys.argv[1], 'w').write(sys.argv[2])"


def honest_entries(calls: list[dict]) -> list[dict]:
    """What OpenEnv's proxy records for the agent's calls (contract.py to_trace_entries' fields)."""
    return [{"prompt_token_ids": c["prompt"], "completion_token_ids": c["ids"], "per_token_logps": c["lps"],
             "loss_mask": [0] * len(c["prompt"]) + [1] * len(c["ids"]), "request": {}, "response": {},
             "metadata": {"node_id": f"n{i}"}} for i, c in enumerate(calls)]


@pytest.fixture
def rollout(tmp_path):
    """The pod, the agent's two model calls through the forwarder, the agent's proxy serving its honest
    record from a file the agent owns, and the trainer's session."""
    pod = Pod(tmp_path)
    proxy = None
    try:
        calls = pod.agent_json(AGENT_CALLS, str(pod.port))
        # The record in the agent's container, written through its runtime: the agent's uid owns it.
        record = f"{sandbox_root.WORKDIR}/trace_entries.json"
        sandbox = pod.sandbox
        sandbox.write_text(record, json.dumps(honest_entries(calls)))
        port = free_port()
        proxy = subprocess.Popen(pod.agent_argv(PYTHON3, "-I", "-c", AGENT_PROXY, str(port), record),
                                 env={"PATH": SYSTEM_PATH}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("the agent's proxy listens", lambda: pod.listening(port), 15)
        cfg = CaptureSessionConfig(base_url="unused", api_key="unused", model="stub/model-1", sandbox_home=sandbox_root.HOME)
        sandbox.write_text(admin_header_path(cfg), "Authorization: Bearer unused\n")
        # What ForwarderTracedFactory.create returns for the stand-in factory's session on this sandbox (the pod's runtime).
        session = ForwarderTracedSession(StandInSession(sandbox, cfg, f"http://127.0.0.1:{port}", None, "s1", "e1"), sandbox)
        yield dict(pod=pod, calls=calls, record=record, session=session, proxy=proxy)
    finally:
        if proxy is not None:
            stop_process(proxy)
        pod.close()


def trained(session: ForwarderTracedSession) -> list[tuple[list[int], list[int], list[float]]]:
    return [(t.prompt_token_ids, t.completion_token_ids, t.per_token_logps) for t in session.fetch_training_trace().turns]


def truth(calls: list[dict]) -> list[tuple[list[int], list[int], list[float]]]:
    return [(c["prompt"], c["ids"], c["lps"]) for c in calls]


@needs_root
def test_a_rewritten_proxy_trace_reaches_the_trainer_as_the_forwarders(rollout, caplog):
    s, calls = rollout["session"], rollout["calls"]
    # Honest: the proxy's record and the forwarder's agree; the trainer gets the model's tokens.
    assert trained(s) == truth(calls)
    # The agent rewrites the proxy's record (its uid owns it, as it owns OpenEnv's proxy's memory).
    r = rollout["pod"].agent(AGENT_FORGES, str(rollout["record"]))
    assert r.returncode == 0, r.stderr
    forged = json.loads(rollout["pod"].sandbox.read_text(rollout["record"]))
    assert forged[0]["completion_token_ids"] != calls[0]["ids"] and len(forged) == 3, "the forgery took"
    with caplog.at_level("WARNING"):
        got = trained(s)
    assert got == truth(calls), "the trainer trains on the forwarder's token ids and logprobs, not the forged ones"
    assert "disagrees with the forwarder's (3)" in caplog.text, caplog.text
    check = s.trace_check
    assert (check.selected_by, len(check.disagreements), check.forwarder_calls, check.proxy_entries) == ("forwarder", 3, 2, 3), check


@needs_root
def test_a_replaced_proxy_does_not_decide_what_is_trained(rollout):
    """Also (issue 56 red team, folded here to share the pod): a model call after the record was read fails the
    rollout. A caller that reads the training trace and then verifies leaves a gap; a process the agent left behind
    calls the model in it and writes what the verifier grades. On the code before, verify() returned 1.0 and the
    trained record had 2 of the forwarder's 4 calls (pytest.raises: DID NOT RAISE)."""
    s, pod = rollout["session"], rollout["pod"]
    # The agent kills the proxy (its own uid) and nothing answers on its port any more.
    rollout["proxy"].send_signal(signal.SIGKILL)
    rollout["proxy"].wait(timeout=scaled(10))
    assert trained(s) == truth(rollout["calls"])
    # CONTROL: no call after the read; the verifier grades the agent's file.
    solution = f"{s.cfg.path('workdir')}/solution.py"
    assert pod.agent(AGENT_WRITES, solution, SOLUTION).returncode == 0
    assert s.verify([]).env_reward == 1.0
    pod.agent_json(AGENT_CALLS, str(pod.port))  # the leftover process's calls, after the trainer read the record
    with pytest.raises(UntrustedTrace, match=r"2 model call\(s\) after the trainer read the record \(2 then, 4 at the reward\)"):
        s.verify([])


@needs_root
def test_a_restarted_or_missing_forwarder_record_fails_the_rollout(rollout):
    pod = rollout["pod"]
    os.kill(pod.forwarder_pids()[-1], signal.SIGKILL)  # the serving child, as the OOM killer would
    def restarted() -> bool:
        try:
            return pod.trace()["restarts"] == 1
        except Exception:  # noqa: BLE001 - the new child is not serving yet
            return False

    wait_for("the forwarder serves again", restarted, 15)
    with pytest.raises(UntrustedTrace, match="restarted 1 time"):
        rollout["session"].fetch_training_trace()
    stop_process(pod.proc)  # no forwarder at all: no record
    wait_for("the trace port closed", lambda: not pod.listening(pod.trace_port), 15)
    with pytest.raises(UntrustedTrace, match="could not be read"):
        rollout["session"].fetch_training_trace()


# --- the cross-check itself (pure) -------------------------------------------------------------
def forwarder_trace(*calls: tuple[list[int], list[int], list[float]], **header) -> dict:
    entries = [{"seq": i + 1, "status": 200, "model": "m", "prompt_token_ids": p,
                "choices": [{"index": 0, "token_ids": ids, "logprobs": lps, "finish_reason": "stop"}]} for i, (p, ids, lps) in enumerate(calls)]
    return {"calls": len(entries), "recorded": len(entries), "dropped": 0, "restarts": 0, "complete": True, "entries": entries, **header}


def proxy_entry(p: list[int], ids: list[int], lps: list[float], node: str) -> dict:
    return {"prompt_token_ids": p, "completion_token_ids": ids, "per_token_logps": lps, "loss_mask": [0] * len(p) + [1] * len(ids),
            "metadata": {"node_id": node}}


A = ([1, 2], [3, 4], [-0.1, -0.2])
AUX = ([9], [8], [-0.5])
B = ([1, 2, 3, 4, 5], [6], [-0.3])


def test_an_agreeing_proxy_labels_the_turns_and_the_forwarder_supplies_them():
    entries, check = trusted_entries(forwarder_trace(A, B), [proxy_entry(*A, "a"), proxy_entry(*B, "b")])
    assert [(e["prompt_token_ids"], e["completion_token_ids"], e["per_token_logps"]) for e in entries] == [A, B]
    assert (check.selected_by, check.disagreements, check.unclaimed) == ("proxy", [], 0)
    assert [e["metadata"]["proxy_node_id"] for e in entries] == ["a", "b"]
    assert entries[1]["loss_mask"] == [0] * 5 + [1]


def test_a_proxy_naming_only_the_agents_injected_call_does_not_choose_what_is_trained(caplog):
    """Issue 56: the agent calls the forwarder itself (INJECTED, a genuine sample for a context it wrote) and rewrites
    the proxy's record to name only that call. On the code before, that record agreed with the forwarder on everything
    it named, so INJECTED alone was trained, with no warning; the harness's turns A and B were left out. Now the
    forwarder's record decides: every call it recorded is trained, and the left-out calls are logged."""
    injected = ([7, 7, 7], [5], [-0.9])
    with caplog.at_level("WARNING", logger="agent_rl_sandbox.trusted_trace"):
        entries, check = trusted_entries(forwarder_trace(A, injected, B), [proxy_entry(*injected, "mine")], rollout="r1-x")
    assert [(e["prompt_token_ids"], e["completion_token_ids"]) for e in entries] == [A[:2], injected[:2], B[:2]]
    assert (check.selected_by, check.disagreements, check.unclaimed) == ("forwarder", [], 2)
    assert [e["metadata"]["proxy_node_id"] for e in entries] == [None, "mine", None]
    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "rollout r1-x: the capture proxy's trace leaves out 2 of the forwarder's 3 call(s) (seq 1, 3" in warning, warning
    assert "training on every call the forwarder recorded" in warning
    # Auxiliary calls the harness's proxy leaves out (a title call) are trained too, and logged the same way.
    entries, check = trusted_entries(forwarder_trace(A, AUX, B), [proxy_entry(*A, "a"), proxy_entry(*B, "b")])
    assert [e["prompt_token_ids"] for e in entries] == [A[0], AUX[0], B[0]] and check.unclaimed == 1 and check.selected_by == "forwarder"


def test_a_disagreeing_proxy_loses_its_selection_and_every_forwarder_call_is_trained():
    entries, check = trusted_entries(forwarder_trace(A, AUX, B), [proxy_entry(A[0], A[1], [0.0, 0.0], "a"), proxy_entry(*B, "b")])
    assert [(e["prompt_token_ids"], e["completion_token_ids"], e["per_token_logps"]) for e in entries] == [A, AUX, B]
    assert check.selected_by == "forwarder" and check.disagreements == ["proxy entry 0 (forwarder call 1): logprobs differ"]
    _, check = trusted_entries(forwarder_trace(A), "ConnectionRefused")
    assert check.disagreements == ["the capture proxy's record is unreadable: ConnectionRefused"]


@pytest.mark.parametrize(("header", "message"), [
    ({"restarts": 2}, "restarted 2 time"),
    ({"dropped": 1, "complete": False}, "dropped 1 answer"),
    ({"complete": False}, "not complete"),
    ({"broken": 1, "complete": False}, "hung up on 1 call"),
    ({"in_flight": 1, "complete": False}, "1 call\\(s\\) were still being answered"),
])
def test_a_forwarder_record_that_is_not_whole_is_refused(header, message):
    with pytest.raises(UntrustedTrace, match=message):
        trusted_entries(forwarder_trace(A, **header), [proxy_entry(*A, "a")])
    with pytest.raises(UntrustedTrace, match="no forwarder trace"):
        trusted_entries(None, [])
    with pytest.raises(UntrustedTrace, match="no trainable call"):
        trusted_entries(forwarder_trace(), [])


class FakeFactory:
    """A factory that claims `n` sandboxes the way AgentSandboxBackend.create reports them."""

    def __init__(self, handles: list) -> None:
        self.handles = handles
        self.closed = 0

    def create(self, task, seed=None, episode_id=None):
        for h in self.handles:
            note_claimed(h)
        outer = self

        class Session:
            def close(self):
                outer.closed += 1

        return Session()


def test_the_factory_wraps_the_session_of_the_one_sandbox_it_claimed():
    traced = RuntimeHandle("http://127.0.0.1:1", sandbox_id="a", trace_url="http://127.0.0.1:2")
    untraced = RuntimeHandle("http://127.0.0.1:1", sandbox_id="b")
    s = ForwarderTracedFactory(FakeFactory([traced])).create("task")
    assert isinstance(s, ForwarderTracedSession) and s._sandbox is traced
    assert not isinstance(ForwarderTracedFactory(FakeFactory([untraced])).create("task"), ForwarderTracedSession)
    for handles in ([], [traced, traced]):
        f = FakeFactory(handles)
        with pytest.raises(UntrustedTrace, match=f"claimed {len(handles)} sandbox"):
            ForwarderTracedFactory(f).create("task")
        assert f.closed == 1
    note_claimed(traced)  # outside a create(): nothing noted, nothing kept
