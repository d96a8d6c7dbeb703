"""The training trace of a black-box rollout, taken from the forwarder's record, not the agent's.

OpenEnv's capture proxy runs inside the sandbox as the agent's uid: its trace entries (token ids,
logprobs) are the agent's to rewrite, and the proxy itself the agent's to replace. The forwarder
(``forwarder.py``, another uid) records every completion it relays and serves it to the trainer
(``RuntimeHandle.fetch_trace()``). ``trusted_entries`` turns that record into the entries
``openenv.core.harness.TrainingTrace.from_entries`` takes (OpenEnv 0.10.0,
``openenv/core/harness/training.py``), using the proxy's entries only as a cross-check:

- every token id and logprob trained on is the forwarder's;
- a forwarder record that is missing, restarted (``restarts`` > 0), short (``dropped`` > 0) or not
  ``complete`` raises ``UntrustedTrace``: the rollout is discarded, never trained on the proxy's;
- the forwarder's record decides what is trained: every call it recorded. The proxy's entries only
  label those calls (its request and response travel along as diagnostics). A proxy record that
  leaves a forwarder call out (issue 56: one naming only the agent's own injected call made that call
  the trained one, silently), or that disagrees with one (a rewritten, invented or unreadable
  record), is counted and logged as a warning, never followed.

``ForwarderTracedFactory`` applies this to any OpenEnv session factory whose ``create()`` claims its
sandbox through ``AgentSandboxBackend`` (the backend notes the handle it returns): its sessions'
``fetch_training_trace()`` (what TRL's ``HarnessRolloutWorker`` trains on in loop-owning mode) is
rebuilt from the forwarder's record. ``UntrustedTrace`` is a RuntimeError on purpose: TRL 1.16
(trl/experimental/async_grpo/openenv_harness.py ``_run_session``) scores a rollout that raises one
as unscorable and goes on, while a ValueError there is a capture-contract error that stops the worker.

Standard library only (OpenEnv's ``TrainingTrace`` is imported when a trace is built).
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


class UntrustedTrace(RuntimeError):
    """The forwarder's record cannot be trained on: the rollout is to be discarded."""


@dataclass
class TraceCheck:
    """What the cross-check found. ``disagreements`` names each proxy entry that the forwarder contradicts."""

    forwarder_calls: int = 0
    proxy_entries: int = 0
    disagreements: list[str] = field(default_factory=list)
    #: Forwarder calls the proxy's record does not name (auxiliary calls, or the agent's own direct calls): trained all
    #: the same, and logged.
    unclaimed: int = 0
    #: "proxy" when the proxy's record names exactly the forwarder's calls and agrees with each (the two selections are
    #: one), else "forwarder". Either way every forwarder call is what is trained.
    selected_by: str = "proxy"


def forwarder_calls(trace: Any) -> list[dict[str, Any]]:
    """The forwarder's trainable calls (status 200, one choice with as many logprobs as token ids), in
    order; raises UntrustedTrace when the record cannot be trusted whole."""
    if not isinstance(trace, dict) or not isinstance(trace.get("entries"), list):
        raise UntrustedTrace(f"no forwarder trace: {str(trace)[:200]}")
    if trace.get("restarts", 0) != 0:
        raise UntrustedTrace(f"the forwarder restarted {trace.get('restarts')} time(s) during the rollout: calls before it are lost and its port was open to the agent")
    if trace.get("dropped", 0) != 0:
        raise UntrustedTrace(f"the forwarder dropped {trace.get('dropped')} answer(s) (over its trace caps): the record is partial")
    if trace.get("broken", 0) != 0:
        raise UntrustedTrace(f"the caller hung up on {trace.get('broken')} call(s) mid-answer: the model sampled them and the record has no whole answer")
    if trace.get("in_flight", 0) != 0:
        raise UntrustedTrace(f"{trace.get('in_flight')} call(s) were still being answered when the trainer read the record: their answers are not in it")
    if trace.get("complete") is not True:
        raise UntrustedTrace(f"the forwarder's trace is not complete: {dict((k, v) for k, v in trace.items() if k != 'entries')}")
    calls = []
    for e in trace["entries"]:
        choices = e.get("choices") or []
        if e.get("status") != 200 or len(choices) != 1:
            continue
        c = choices[0]
        ids, lps = c.get("token_ids") or [], c.get("logprobs") or []
        if not ids or len(ids) != len(lps):
            continue
        calls.append({"seq": e["seq"], "model": e.get("model"), "prompt_token_ids": list(e.get("prompt_token_ids") or []),
                      "completion_token_ids": list(ids), "per_token_logps": [float(x) for x in lps], "finish_reason": c.get("finish_reason")})
    if not calls:
        raise UntrustedTrace(f"the forwarder recorded no trainable call ({trace.get('calls')} call(s) in all)")
    return calls


#: Policy-neutral values of the knobs a training run leaves off (forwarder.py SAMPLING_TABLE forces them; OpenEnv's
#: capture/upstream.py NON_POLICY_SAMPLING). top_k: -1 and 0 both mean off.
NEUTRAL_SAMPLING = {"top_p": 1.0, "top_k": -1, "min_p": 0.0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0}


def check_sampling(trace: Any, run: dict[str, Any]) -> None:
    """Raises UntrustedTrace unless every recorded call of the forwarder's ``trace`` was sampled as the run says:
    ``run`` is the sampling the trainer passes to the session factory (TRL's ``HarnessRolloutWorker``: temperature,
    top_p, top_k, min_p, repetition_penalty, max_tokens; any may be absent). Each entry's ``sampling`` (what the
    forwarder sent) must carry the run's temperature, the neutral value of every knob the run leaves off or sets
    neutral, logprobs and token ids on, one choice, no seed, and max_tokens no larger than the run's."""
    problems = []
    want = {**NEUTRAL_SAMPLING, **{k: v for k, v in run.items() if k in NEUTRAL_SAMPLING and v is not None}}
    for e in trace.get("entries") or [] if isinstance(trace, dict) else []:
        seq, got = e.get("seq"), e.get("sampling")
        if not isinstance(got, dict):
            problems.append(f"call {seq}: no sampling record (a forwarder before issue 56?)")
            continue
        if run.get("temperature") is not None and got.get("temperature") != float(run["temperature"]):
            problems.append(f"call {seq}: temperature {got.get('temperature')!r}, the run's is {run['temperature']!r}")
        for key, value in want.items():
            have = got.get(key)
            if key == "top_k" and have in (-1, 0) and value in (-1, 0):
                continue
            if have != value:
                problems.append(f"call {seq}: {key} {have!r}, the run's is {value!r}")
        limit = run.get("max_tokens")
        if limit is not None and (not isinstance(got.get("max_tokens"), int) or got["max_tokens"] > limit):
            problems.append(f"call {seq}: max_tokens {got.get('max_tokens')!r}, over the run's {limit!r}")
        if got.get("n") != 1 or got.get("seed") is not None or got.get("logprobs") is not True or got.get("return_token_ids") is not True:
            problems.append(f"call {seq}: n {got.get('n')!r}, seed {got.get('seed')!r}, logprobs {got.get('logprobs')!r}, return_token_ids {got.get('return_token_ids')!r}")
    if problems:
        raise UntrustedTrace(f"the forwarder's record was not sampled as the run's policy ({len(problems)}): " + "; ".join(problems[:5]))


def _same_logps(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9) for x, y in zip(a, b))


def _match(proxy: list[dict[str, Any]], calls: list[dict[str, Any]], check: TraceCheck) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pairs each proxy entry with the next forwarder call of the same prompt ids; records every mismatch."""
    pairs, cursor = [], 0
    for i, p in enumerate(proxy):
        prompt = p.get("prompt_token_ids") if isinstance(p, dict) else None
        j = next((k for k in range(cursor, len(calls)) if calls[k]["prompt_token_ids"] == prompt), None)
        if j is None:
            check.disagreements.append(f"proxy entry {i}: no forwarder call has its prompt token ids")
            continue
        f = calls[j]
        cursor = j + 1
        if p.get("completion_token_ids") != f["completion_token_ids"]:
            check.disagreements.append(f"proxy entry {i} (forwarder call {f['seq']}): completion token ids differ")
        elif not _same_logps(list(p.get("per_token_logps") or []), f["per_token_logps"]):
            check.disagreements.append(f"proxy entry {i} (forwarder call {f['seq']}): logprobs differ")
        pairs.append((p, f))
    return pairs


def _entry(f: dict[str, Any], p: dict[str, Any] | None) -> dict[str, Any]:
    meta = dict(p.get("metadata") or {}) if p else {}
    proxy_node = meta.pop("node_id", None)
    return {
        "prompt_token_ids": f["prompt_token_ids"],
        "completion_token_ids": f["completion_token_ids"],
        "per_token_logps": f["per_token_logps"],
        "loss_mask": [0] * len(f["prompt_token_ids"]) + [1] * len(f["completion_token_ids"]),
        # request/response are diagnostics (messages for reward functions and viewers), never trained on.
        "request": dict(p.get("request") or {}) if p else {},
        "response": dict(p.get("response") or {}) if p else {"choices": [{"finish_reason": f["finish_reason"]}]},
        "metadata": {**meta, "node_id": f"forwarder-{f['seq']}", "forwarder_seq": f["seq"], "proxy_node_id": proxy_node,
                     "model": f["model"], "finish_reason": f["finish_reason"], "trace_source": "forwarder"},
    }


def trusted_entries(trace: Any, proxy_entries: Any, *, rollout: str = "", sampling: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], TraceCheck]:
    """TrainingTrace entries built from the forwarder's ``trace`` (``fetch_trace()``), cross-checked
    against the capture proxy's ``proxy_entries`` (a list, or None/anything else when the proxy could
    not be read). Raises UntrustedTrace when the forwarder's record is not whole, or (``sampling``: the
    run's) when a call was not sampled as the run's policy (check_sampling)."""
    calls = forwarder_calls(trace)
    if sampling is not None:
        check_sampling(trace, sampling)
    check = TraceCheck(forwarder_calls=len(calls))
    if not isinstance(proxy_entries, list):
        check.disagreements.append(f"the capture proxy's record is unreadable: {str(proxy_entries)[:200]}")
        pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    else:
        check.proxy_entries = len(proxy_entries)
        pairs = _match(proxy_entries, calls, check)
    claimed = {f["seq"] for _p, f in pairs}
    unclaimed = [f["seq"] for f in calls if f["seq"] not in claimed]
    check.unclaimed = len(unclaimed)
    by_seq = {f["seq"]: p for p, f in pairs}
    # The forwarder's record decides what is trained: every call, whatever the proxy's record names.
    entries = [_entry(f, by_seq.get(f["seq"])) for f in calls]
    if check.disagreements or unclaimed:
        check.selected_by = "forwarder"
    if check.disagreements:
        log.warning("rollout %s: the capture proxy's trace disagrees with the forwarder's (%d): training on the forwarder's %d call(s): %s",
                    rollout, len(check.disagreements), len(calls), "; ".join(check.disagreements[:5]))
    if unclaimed:
        log.warning("rollout %s: the capture proxy's trace leaves out %d of the forwarder's %d call(s) (seq %s: auxiliary calls, or the "
                    "agent's own): training on every call the forwarder recorded, not the proxy's selection",
                    rollout, len(unclaimed), len(calls), ", ".join(map(str, unclaimed[:10])))
    return entries, check


# --- the factory wrapper ---------------------------------------------------------------------------
_claims = threading.local()


def note_claimed(handle: Any) -> None:
    """Called by AgentSandboxBackend.create with the handle it returns: a ForwarderTracedFactory.create
    running in this thread learns which sandbox its session got."""
    seen = getattr(_claims, "handles", None)
    if seen is not None:
        seen.append(handle)


class ForwarderTracedSession:
    """A session whose ``fetch_training_trace()`` is the forwarder's record (everything else is the inner session's)."""

    def __init__(self, inner: Any, sandbox: Any, sampling: dict[str, Any] | None = None) -> None:
        self._inner = inner
        self._sandbox = sandbox
        self._sampling = sampling
        #: The last cross-check (TraceCheck), for metrics and tests.
        self.trace_check: TraceCheck | None = None
        #: The forwarder's call count when the trainer read the record (None: not read yet).
        self._calls_read: int | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def wait_for_completion(self, timeout_s: float | None = None) -> int:
        return self._inner.wait_for_completion(timeout_s)

    def fetch_training_trace(self) -> Any:
        from openenv.core.harness import TrainingTrace

        proxy: Any
        try:
            proxy = self._inner.fetch_training_trace().to_trace_entries()
        except Exception as e:  # noqa: BLE001 - the agent may have killed, replaced or garbled the proxy
            proxy = f"{type(e).__name__}: {e}"
        sandbox_id = getattr(self._sandbox, "sandbox_id", "?")
        try:
            forwarder = self._sandbox.fetch_trace()
        except Exception as e:  # noqa: BLE001 - no record: nothing trustworthy to train on
            raise UntrustedTrace(f"sandbox {sandbox_id}: the forwarder's trace could not be read: {e}") from e
        entries, self.trace_check = trusted_entries(forwarder, proxy, rollout=str(sandbox_id), sampling=self._sampling)
        self._calls_read = forwarder.get("calls") if isinstance(forwarder.get("calls"), int) else None
        return TrainingTrace.from_entries(entries)

    def verify(self, *args: Any, **kwargs: Any) -> Any:
        """The inner session's reward; when the record was read before it, raises UntrustedTrace if the forwarder relayed
        a call since. Issue 56 red team: callers that read the trace and then verify (both orders are in use) left a gap
        in which a process the agent left behind could call the model and write what the verifier grades: the reward
        counted calls the trained record lacked."""
        result = self._inner.verify(*args, **kwargs)
        if self._calls_read is not None:
            sandbox_id = getattr(self._sandbox, "sandbox_id", "?")
            try:
                calls = self._sandbox.fetch_trace().get("calls")
            except Exception as e:  # noqa: BLE001 - the count cannot be checked: nothing trustworthy to reward
                raise UntrustedTrace(f"sandbox {sandbox_id}: the forwarder's trace could not be read again after the verifier: {e}") from e
            if calls != self._calls_read:
                raise UntrustedTrace(f"sandbox {sandbox_id}: {calls - self._calls_read if isinstance(calls, int) else '?'} model call(s) after "
                                     f"the trainer read the record ({self._calls_read} then, {calls} at the reward): the reward may count "
                                     "answers that are not trained")
        return result

    def close(self) -> None:
        self._inner.close()


class ForwarderTracedFactory:
    """Wraps an OpenEnv ResourceSessionFactory: its sessions train on the forwarder's record. A pool
    without a trace port (``SANDBOX_TRACE_PORT=0``) gets the inner session unchanged, with a warning."""

    def __init__(self, inner: Any, sampling: dict[str, Any] | None = None) -> None:
        self.inner = inner
        #: The run's sampling, checked against each call's record (check_sampling): given, or the inner factory's
        #: ``sampling`` (OpenEnv's OpenCodeSessionFactory keeps what HarnessRolloutWorker passed it).
        self.sampling = sampling if sampling is not None else getattr(inner, "sampling", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def create(self, task: Any, seed: int | None = None, episode_id: str | None = None) -> Any:
        _claims.handles = []
        try:
            session = self.inner.create(task, seed=seed, episode_id=episode_id)
            handles = _claims.handles
        finally:
            _claims.handles = None
        if len(handles) != 1:
            session.close()
            raise UntrustedTrace(f"the session factory claimed {len(handles)} sandbox(es) through AgentSandboxBackend in create(), not 1: no forwarder record to train on")
        (handle,) = handles
        if not getattr(handle, "has_trace", False):
            log.warning("sandbox %s: the pool has no forwarder trace port (SANDBOX_TRACE_PORT=0): training on the in-sandbox proxy's trace, which the agent can rewrite",
                        getattr(handle, "sandbox_id", "?"))
            return session
        return ForwarderTracedSession(session, handle, self.sampling if isinstance(self.sampling, dict) and self.sampling else None)
