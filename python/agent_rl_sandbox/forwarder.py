"""The key-holding forwarder of every sandbox pod: the one process that knows the ingress key.

It runs in a container of its own beside the agent's (a native sidecar on Kubernetes, a
container in the agent's network namespace on Docker), as a uid of its own, on a read-only
root, with the key in that container's env only. It listens on loopback, which the pod's
containers share, and forwards exactly two routes to the ingress with
``Authorization: Bearer <key>``:

- ``POST /v1/chat/completions``  (streamed through: SSE chunks reach the caller as they come)
- ``GET  /v1/models``

Everything else is a 404 that names nothing. Why a separate container and uid: the agent
(opencode's bash tool, i.e. the model being trained) runs arbitrary commands as the sandbox
uid, and a process can read ``/proc/<pid>/environ`` and ``cmdline`` of every process of its own
uid in its PID namespace. OpenEnv's in-sandbox capture proxy runs as that uid
(huggingface/OpenEnv ``envs/opencode_env/harness.py`` starts it through the sandbox backend),
so whatever key it holds, the agent can print. Here the capture proxy's upstream is this
forwarder and its key is the harness's placeholder (``OpenCodeConfig.api_key`` defaults to
``"intercepted"``), which the forwarder drops: the real key is in another container (another
mount and PID namespace: the agent sees neither its env nor its files), of another uid.

What the caller sends is not trusted: only ``Content-Type`` and ``Accept`` of its headers go
upstream (never its ``Authorization``, ``Cookie`` or ``Host``); only ``Content-Type``,
``Cache-Control`` and ``X-Request-Id`` of the upstream's come back; and the key is cut out of
every byte that comes back (body and headers), so an upstream that echoes its request cannot
hand it over either. Logs carry method, route, status and duration only.

The training trace. The forwarder is also where the trainer's record of a rollout is taken: every
``POST /v1/chat/completions`` answer it relays is recorded (vLLM's ``prompt_token_ids``, each
choice's ``token_ids``, ``logprobs`` and ``finish_reason``; JSON or server-sent events) in this
process's memory, and served to the trainer on a second port (``--trace-port``, the pod IP) as
``GET /trace``. The in-sandbox capture proxy of the harness runs as the agent's uid: the agent can
rewrite its trace, kill it and answer on its port. Here the record is in another uid's memory,
of a process the agent can neither signal nor ptrace, and only what the upstream answered is
recorded (what the agent sends is never trusted). The trace port refuses a caller on any
of the pod's own addresses as it accepts it, before reading a byte: the agent shares the pod's
network namespace, the trainer comes from another pod.

Ports the agent cannot take: a supervisor binds both ports before anything else runs (on the
pool the forwarder is a native sidecar whose startup probe passes before the agent's container
starts) and never closes them; it serves from a forked child that inherits them, and if that
child dies (its out-of-memory score is raised to the maximum, so the kernel picks it over the
supervisor) it starts another on the same sockets. A fork that fails (the pod's PIDs exhausted by the
agent: EAGAIN) is retried with a bounded backoff for as long as it fails; the supervisor never exits
over it, so the ports are never free (issue 56: it used to, and the agent bound both ports and served
its own trace). A listening socket of another uid cannot be bound over, SO_REUSEADDR or SO_REUSEPORT
included. The trace of a child that died is lost, and ``/trace`` says so (``restarts``).

Bounded: request bodies are streamed upstream (never held whole) up to ``MAX_BODY_BYTES``; at most
``MAX_CONNECTIONS`` requests are served at once, the rest wait in a listen backlog of
``LISTEN_BACKLOG`` (not reset); an idle connection is closed after ``IDLE_SECONDS``; a recorded
answer is held up to ``MAX_RECORD_BYTES`` and the whole trace up to ``MAX_TRACE_BYTES`` (past
either, the entry is counted in ``dropped`` instead).

A record the agent cannot truncate: a call whose caller hangs up (or goes silent) while its answer is relayed is
counted in ``broken`` and the trace is not ``complete``, so the trainer refuses the rollout (issue 56: such a call
used to vanish from a record that still said complete); a call still being answered when the trace is read is counted in
``in_flight``, and the trace is not ``complete`` either. A rollout's calls and completion tokens are bounded
(``--max-calls``, ``--max-rollout-tokens``, the stack's sandboxes.maxCallsPerRollout / maxTokensPerRollout): each
call's ``max_tokens`` is cut to what is left, and past either bound a call gets 429 naming it, counted in ``limited``.

Per-rollout keys (docs/design/rollout-keys.md): with ``--key-port`` the forwarder also accepts, once,
``PUT /rollout-key`` on the pod's address: the trainer delivers the key it minted for this claim
right after the claim is Ready, before the agent runs anything, and the listener then closes. With
``--key-port`` the forwarder holds no other key: a key in the env is refused at start (no shared key
falls back), and model calls get 503 saying why until the delivery. The delivered key is held,
attached and redacted exactly as an env key is without ``--key-port``. The supervisor takes the delivery (it outlives the
serving child) and hands the key to the serving child through a pipe; a child started later
inherits it.

Standard library only, like ``runtime.py``: it runs on the sandbox image's own Python.
"""

from __future__ import annotations

import argparse
import array
import errno
import http.client
import ipaddress
import json
import logging
import os
import re
import signal
import socket
import ssl
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from urllib.parse import urlsplit

#: The forwarder's port on the pod's loopback (components/sandbox/model.ts SANDBOX_FORWARDER_PORT).
DEFAULT_PORT = 7100
#: The trace port, on the pod IP, for the trainer only (components/sandbox/model.ts SANDBOX_TRACE_PORT).
DEFAULT_TRACE_PORT = 7101
#: Env var holding the ingress key, in the forwarder's container only.
DEFAULT_KEY_ENV = "AGENT_RL_UPSTREAM_KEY"
#: Where the trainer delivers the rollout's own key at claim time (``--key-port``; docs/design/rollout-keys.md).
KEY_DELIVERY_PATH = "/rollout-key"
#: The shape of a rollout key (rollout_keys.py KEY_RE); nothing else is accepted there.
ROLLOUT_KEY_RE = re.compile(r"^rk1\.[A-Za-z0-9_-]{43}$")
#: The routes the sandboxes may call (the ingress's allow-list for sandbox keys).
ROUTES = frozenset({("POST", "/v1/chat/completions"), ("GET", "/v1/models")})
#: The route whose answers are the training trace.
TRACED = ("POST", "/v1/chat/completions")
#: Request headers passed upstream; every other header of the caller is dropped.
REQUEST_HEADERS = ("Content-Type", "Accept")
#: Response headers passed back; the rest (Set-Cookie, Server, anything echoed) is dropped.
RESPONSE_HEADERS = ("Content-Type", "Cache-Control", "X-Request-Id")
#: Largest request body (a long agent transcript is a few MiB of JSON). Streamed upstream in
#: STREAM_BYTES pieces, never held whole: the cap bounds what one call can send, not memory.
MAX_BODY_BYTES = 16 * 1024 * 1024
#: Requests served at once; more connections wait, unaccepted, in the listen backlog. The harness's
#: capture proxy and opencode make one model call at a time.
MAX_CONNECTIONS = 4
#: The listen backlog of both ports (the kernel caps it at net.core.somaxconn, 4096 on Linux >= 5.4).
LISTEN_BACKLOG = 512
#: Seconds a connection may stay silent (request line, headers, body) before it is closed.
IDLE_SECONDS = 60.0
#: Bytes of one upstream answer kept for the trace (16k tokens with logprobs is ~2 MiB of JSON): a JSON answer held
#: until its end, one server-sent event held until its end, and one answer's token ids and logprobs (8 bytes each).
#: Streamed answers are parsed event by event, so their length is not bounded by it, only what they leave in the record.
MAX_RECORD_BYTES = 4 * 1024 * 1024
#: Bytes of the whole trace, stored compactly (8 bytes a token id or logprob): 2 M numbers, whose
#: JSON (at most ~22 bytes each) stays under the trainer's 64 MiB read cap (handle.py).
MAX_TRACE_BYTES = 16 * 1024 * 1024
#: Piece size of every streamed copy.
STREAM_BYTES = 64 * 1024
#: Seconds one upstream read may take (a long generation; OpenCodeConfig.request_timeout_ms is 600 s).
UPSTREAM_READ_SECONDS = 900.0
#: What replaces the key wherever it would come back.
REDACTED = b"[redacted]"
#: Seconds between a serving child's death and the next (the sockets stay bound meanwhile).
RESTART_DELAY_SECONDS = 0.5
#: A fork that fails (EAGAIN when the pod's PIDs are exhausted, ENOMEM) is retried after this many seconds, doubling up
#: to FORK_RETRY_MAX_SECONDS, for as long as it takes: the supervisor never exits over it, so the ports are never free.
FORK_RETRY_FIRST_SECONDS = 0.05
FORK_RETRY_MAX_SECONDS = 2.0
#: Calls one rollout may make (``--max-calls``; the stack's sandboxes.maxCallsPerRollout, same default): an
#: opencode rollout makes tens, each a turn of the agent.
DEFAULT_MAX_CALLS = 256
#: Completion tokens one rollout may sample (``--max-rollout-tokens``; sandboxes.maxTokensPerRollout, same default):
#: 256 calls of 4096 tokens, the recipes' longest completion.
DEFAULT_MAX_ROLLOUT_TOKENS = 1048576

log = logging.getLogger("agent_rl_sandbox.forwarder")


class Redactor:
    """Cuts `secret` out of a byte stream fed in pieces: holds back len(secret) - 1 bytes, so an
    occurrence split across two pieces is still found."""

    def __init__(self, secret: bytes) -> None:
        self.secret = secret
        self.held = b""

    def feed(self, chunk: bytes) -> bytes:
        data = (self.held + chunk).replace(self.secret, REDACTED)
        keep = len(self.secret) - 1
        if keep <= 0 or len(data) <= keep:
            self.held, out = (data, b"") if keep > 0 else (b"", data)
            return out
        self.held = data[-keep:]
        return data[:-keep]

    def flush(self) -> bytes:
        out, self.held = self.held, b""
        return out


#: How long a call waits for the rollout key before "no key yet" (503). The supervisor answers the trainer's delivery
#: (204) once the key is in the serving child's pipe; the child reads it within milliseconds, and a call the agent makes
#: in between (seen: 3.6 ms after the 204, bench/results.md 6c) would otherwise fail its rollout. Bounded: without a
#: delivery the call still gets 503, this much later.
KEY_HANDOVER_SECONDS = 2.0


class Upstream:
    """Where the forwarder sends (the ingress) and with which key."""

    def __init__(self, url: str, key: str, *, read_seconds: float = UPSTREAM_READ_SECONDS, policy: "SamplingPolicy | None" = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream must be an http(s) URL, got {url!r}")
        # "" only while a rollout key is awaited (--key-port): requests get 503 until it is delivered.
        if any(c in key for c in "\r\n\0"):
            raise ValueError("the upstream key must be without CR, LF or NUL")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.key = key
        #: Set once a key is held: a call that arrives between the supervisor's 204 for the delivery and this serving
        #: child reading the key from its pipe waits for it (KEY_HANDOVER_SECONDS) instead of getting 503.
        self.key_held = threading.Event()
        if key:
            self.key_held.set()
        self.read_seconds = read_seconds
        #: What the agent may ask of the sampler (SAMPLING_TABLE with the run's values).
        self.policy = policy if policy is not None else SamplingPolicy()
        # The image's trust store (and SSL_CERT_FILE), as for the in-sandbox proxy it replaces as key holder.
        self._tls = ssl.create_default_context() if parts.scheme == "https" else None

    def hold_key(self, key: str) -> None:
        self.key = key
        self.key_held.set()

    def connect(self) -> http.client.HTTPConnection:
        if self._tls is not None:
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.read_seconds, context=self._tls)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.read_seconds)


# --- the training trace ---------------------------------------------------------------------------
def _ids(value: Any) -> array.array:
    out = array.array("q")
    if isinstance(value, list):
        out.extend(int(v) for v in value if isinstance(v, int) and not isinstance(v, bool))
    return out


def _logprobs(logprobs: Any) -> array.array:
    out = array.array("d")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    for entry in content if isinstance(content, list) else []:
        lp = entry.get("logprob") if isinstance(entry, dict) else None
        out.append(float(lp) if isinstance(lp, (int, float)) and not isinstance(lp, bool) else float("nan"))
    return out


#: Keys of an answer's objects the record never needs, dropped while it is parsed (the alternatives of
#: ``top_logprobs`` are most of a streamed answer's bytes, and each would be a dict of its own).
UNRECORDED_KEYS = frozenset({"top_logprobs", "bytes", "token"})
#: One parse at a time in the whole process: a parse's peak (a few times its input) counts once, not once per slot.
_PARSE_LOCK = threading.Lock()


def _pruned(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {k: v for k, v in pairs if k not in UNRECORDED_KEYS}


def _loads(data: bytes) -> Any:
    with _PARSE_LOCK:
        return json.loads(data, object_pairs_hook=_pruned)


class AnswerRecord:
    """The trace entry of one chat completion, built while the answer streams through: a JSON answer is held up to
    `limit` bytes and parsed at its end; server-sent events are parsed one event at a time (an event held up to
    `limit` bytes), their ids and logprobs merged in order. Past a bound it keeps nothing more (`over`): the answer
    is still relayed whole, and the trace counts it as dropped."""

    def __init__(self, content_type: str, limit: int = MAX_RECORD_BYTES) -> None:
        self.sse = content_type.startswith("text/event-stream")
        self.limit = limit
        self.held = bytearray()
        self.over = False
        self.bad = False
        self.size = 256
        self.model: str | None = None
        self.prompt = array.array("q")
        self.choices: dict[int, dict[str, Any]] = {}

    def _give_up(self) -> None:
        self.over = True
        self.held = bytearray()
        self.choices = {}
        self.prompt = array.array("q")

    def feed(self, chunk: bytes) -> None:
        if self.over or self.bad:
            return
        self.held += chunk
        if self.sse:
            start = 0
            while (nl := self.held.find(b"\n", start)) >= 0:
                self._event(bytes(self.held[start:nl]))
                start = nl + 1
                if self.over or self.bad:
                    return
            del self.held[:start]
        if len(self.held) > self.limit:
            self._give_up()

    def _event(self, line: bytes) -> None:
        line = line.strip()
        if not line.startswith(b"data:") or line[5:].strip() in (b"", b"[DONE]"):
            return
        try:
            self._merge(_loads(line[5:]))
        except (ValueError, TypeError, AttributeError):
            self.bad = True

    def _merge(self, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            return
        model = chunk.get("model", self.model)
        self.model = model if isinstance(model, str) else self.model
        if chunk.get("prompt_token_ids") is not None:
            self.size -= 8 * len(self.prompt)
            self.prompt = _ids(chunk.get("prompt_token_ids"))
            self.size += 8 * len(self.prompt)
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or not isinstance(choice.get("index", 0), int):
                continue
            c = self.choices.setdefault(choice.get("index", 0), {"token_ids": array.array("q"), "logprobs": array.array("d"), "finish_reason": None})
            ids, lps = _ids(choice.get("token_ids")), _logprobs(choice.get("logprobs"))
            self.size += 8 * (len(ids) + len(lps))
            c["token_ids"].extend(ids)
            c["logprobs"].extend(lps)
            c["finish_reason"] = choice.get("finish_reason") or c["finish_reason"]
        if self.size > self.limit:
            self._give_up()

    def finish(self) -> dict[str, Any] | None:
        """The entry, or None when the answer carried no choice, was malformed or went past a bound."""
        if not (self.over or self.bad):
            rest, self.held = bytes(self.held), bytearray()
            if self.sse:
                self._event(rest)
            else:
                try:
                    self._merge(_loads(rest))
                except (ValueError, TypeError, AttributeError):
                    self.bad = True
        if self.over or self.bad or not self.choices:
            return None
        return {"model": self.model, "prompt_token_ids": self.prompt, "choices": [self.choices[i] | {"index": i} for i in sorted(self.choices)]}


def completion_record(answer: bytes, content_type: str) -> dict[str, Any] | None:
    """The trace entry of one whole answer (a JSON object, or server-sent events merged in order); None when it
    carries no choice or is malformed."""
    record = AnswerRecord(content_type, limit=max(MAX_RECORD_BYTES, len(answer) + 1))
    record.feed(answer)
    return record.finish()


def record_size(entry: dict[str, Any]) -> int:
    return 256 + 8 * (len(entry["prompt_token_ids"]) + sum(len(c["token_ids"]) + len(c["logprobs"]) for c in entry["choices"]))


def entry_json(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "seq": entry["seq"],
        "status": entry["status"],
        "model": entry["model"],
        "prompt_token_ids": entry["prompt_token_ids"].tolist(),
        "choices": [
            {"index": c["index"], "token_ids": c["token_ids"].tolist(), "logprobs": c["logprobs"].tolist(), "finish_reason": c["finish_reason"]}
            for c in entry["choices"]
        ],
        "sampling": entry.get("sampling"),
    }


class Limited(Exception):
    """A call past the rollout's bounds (--max-calls, --max-rollout-tokens): 429 with the message (it names the bound)."""


class Trace:
    """The completions this forwarder relayed, in order, within MAX_TRACE_BYTES, and the rollout's budget: at most
    `max_calls` calls and `max_tokens` completion tokens (each call's max_tokens is reserved when it starts, and it is
    charged what it sampled once its record is kept)."""

    def __init__(self, restarts: int = 0, limit: int = MAX_TRACE_BYTES, *, max_calls: int = DEFAULT_MAX_CALLS,
                 max_tokens: int = DEFAULT_MAX_ROLLOUT_TOKENS) -> None:
        self.restarts = restarts
        self.limit = limit
        self.size = 0
        self.calls = 0
        self.dropped = 0
        #: Calls refused by SAMPLING_TABLE (400, never relayed: nothing was sampled).
        self.refused = 0
        #: Calls refused at the rollout's bounds (429, never relayed).
        self.limited = 0
        #: Calls whose caller hung up (or went silent) mid-answer: the model sampled, the record has no whole answer.
        self.broken = 0
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        #: Completion tokens reserved by calls in flight and spent by calls done.
        self.tokens = 0
        #: Calls admitted and not yet settled: relayed now, their answers not yet recorded (issue 56 red team: a trace
        #: read while one was being answered said complete, without it).
        self.in_flight = 0
        self.entries: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def admit(self, want: int) -> tuple[int, int]:
        """A traced call begins within the rollout's bounds: its sequence number (the order of the calls, recorded or
        not) and the completion tokens it may ask for (at most `want`, reserved until `settle`); raises Limited naming
        the bound it is past."""
        with self._lock:
            left = self.max_tokens - self.tokens
            if self.calls >= self.max_calls:
                self.limited += 1
                raise Limited(f"this rollout made its {self.max_calls} calls (--max-calls, the run's sandboxes.maxCallsPerRollout): no more are relayed")
            if left <= 0:
                self.limited += 1
                raise Limited(f"this rollout sampled its {self.max_tokens} completion tokens (--max-rollout-tokens, the run's sandboxes.maxTokensPerRollout): no more are relayed")
            self.calls += 1
            self.in_flight += 1
            grant = min(want, left)
            self.tokens += grant
            return self.calls, grant

    def settle(self, granted: int, used: int) -> None:
        """Charges a call what it sampled (`used`: its recorded completion tokens; all it reserved when unrecorded) in
        place of what it reserved."""
        with self._lock:
            self.tokens += used - granted
            self.in_flight -= 1

    def add(self, seq: int, status: int, entry: dict[str, Any] | None) -> None:
        """The call's outcome: a 200 without a record (malformed, over a bound, broken off) counts as dropped."""
        with self._lock:
            if entry is None or self.size + record_size(entry) > self.limit:
                self.dropped += 1 if status == HTTPStatus.OK else 0
                return
            self.size += record_size(entry)
            self.entries.append({"seq": seq, "status": int(status), **entry})

    def refuse(self) -> None:
        with self._lock:
            self.refused += 1

    def break_off(self) -> None:
        """The caller hung up while the answer was relayed: the model sampled it, the record has none of it."""
        with self._lock:
            self.broken += 1

    def lines(self) -> Iterator[bytes]:
        """JSON lines: a header ({"calls", "recorded", "dropped", "refused", "limited", "broken", "in_flight", "tokens",
        "restarts", "complete"}), then one entry a line. Complete: nothing dropped, broken off or still being answered,
        and no restart."""
        with self._lock:
            entries = sorted(self.entries, key=lambda e: e["seq"])
            header = {"calls": self.calls, "recorded": len(entries), "dropped": self.dropped, "refused": self.refused,
                      "limited": self.limited, "broken": self.broken, "in_flight": self.in_flight, "tokens": self.tokens,
                      "restarts": self.restarts}
        header["complete"] = header["dropped"] == 0 and header["broken"] == 0 and header["in_flight"] == 0 and header["restarts"] == 0
        yield json.dumps(header).encode() + b"\n"
        for e in entries:
            yield json.dumps(entry_json(e)).encode() + b"\n"


# --- what the agent may ask of the sampler -------------------------------------------------------
#: Default bound of `max_tokens` (`--max-tokens`): OpenEnv's interception proxy caps at the same 16384
#: (huggingface/OpenEnv src/openenv/core/harness/sandbox/interception.py ProxyConfig.max_tokens_cap).
DEFAULT_MAX_TOKENS = 16384
#: Most alternatives a token may carry back: OpenEnv's interception proxy asks 5, its capture server 0 (upstream.py).
MAX_TOP_LOGPROBS = 5
#: Bytes of one top-level parameter other than `messages` and `tools` (held to be checked; those two stream through).
MAX_PARAM_BYTES = 64 * 1024
#: Bytes a normalised request may grow by: the forced members. The body keeps a Content-Length: the shorter normalised
#: body is padded with trailing spaces (JSON allows them) up to the declared length.
BODY_RESERVE_BYTES = 2048


class SamplingParam:
    """One row of the allow-list: what the forwarder does with a top-level request parameter, and why.

    actions: `stream` (passed as sent, never held), `pass` (passed as sent), `record` (passed, recorded),
    `force` (the forwarder's `value` is sent, whatever came; recorded), `clamp` (a number in [0, bound], absent: the
    default; recorded), `only` (refused unless `value(v)` holds), `drop` (removed; recorded as absent),
    `refuse` (400 naming it, unless its value is one of `value`, the harmless ones, then removed)."""

    def __init__(self, action: str, reason: str, value: Any = None) -> None:
        self.action, self.reason, self.value = action, reason, value


_NEUTRAL = "a policy-neutral value, sent whatever came: the logprobs are the full distribution's, as the trainer recomputes them (OpenEnv capture/upstream.py NON_POLICY_SAMPLING)"
_STEERS = "steers or constrains the sampler: the recorded logprobs would not be the policy's"
#: Arguments of the chat template call that vLLM sets itself and then updates with the request's `chat_template_kwargs`
#: (vllm-project/vllm vllm/entrypoints/openai/serving_engine.py `_preprocess_chat`: `_chat_template_kwargs.update(
#: chat_template_kwargs)`), and those of transformers' `apply_chat_template`: inside `chat_template_kwargs` each would
#: pass what the table refuses at the top level (issue 56 red team: `{"continue_final_message": true,
#: "add_generation_prompt": false}` reached the model).
TEMPLATE_ARGUMENTS = frozenset({
    "chat_template", "add_generation_prompt", "continue_final_message", "tools", "documents", "tokenize", "conversation",
    "messages", "padding", "truncation", "max_length", "return_tensors", "return_dict", "return_assistant_tokens_mask",
    "tokenizer_kwargs", "mm_processor_kwargs",
})
#: The allow-list of POST /v1/chat/completions (vLLM's ChatCompletionRequest): every top-level parameter the
#: forwarder lets through, normalises or refuses. Any parameter not named here is refused. docs/design/sandbox-trust.md shows it.
SAMPLING_TABLE: dict[str, SamplingParam] = {
    "messages": SamplingParam("stream", "the agent's context: what it chooses, recorded as vLLM's prompt_token_ids"),
    "tools": SamplingParam("stream", "part of the prompt (the chat template renders them), recorded in prompt_token_ids"),
    "model": SamplingParam("pass", "the ingress routes by it; the answer's model is recorded"),
    "stream": SamplingParam("only", "how the answer travels, true or false", lambda v: v is None or isinstance(v, bool)),
    "stream_options": SamplingParam("pass", "usage in the stream; does not touch sampling"),
    "parallel_tool_calls": SamplingParam("pass", "parsing of the answer, not sampling"),
    "user": SamplingParam("pass", "a label"),
    "chat_template_kwargs": SamplingParam("only", "prompt rendering (enable_thinking), the prompt's token ids recorded; never one of the "
                                          "chat template's own arguments (" + ", ".join(sorted(TEMPLATE_ARGUMENTS)) + "): vLLM "
                                          "merges these kwargs over the ones it sets, so each would undo a refusal of this table",
                                          lambda v: v is None or (isinstance(v, dict) and not TEMPLATE_ARGUMENTS & set(v))),
    "reasoning_effort": SamplingParam("pass", "prompt rendering; the prompt's token ids are recorded"),
    "skip_special_tokens": SamplingParam("pass", "detokenisation only"),
    "spaces_between_special_tokens": SamplingParam("pass", "detokenisation only"),
    "include_stop_str_in_output": SamplingParam("pass", "detokenisation only"),
    "stop": SamplingParam("record", "ends the completion early; every sampled token is still the policy's"),
    "stop_token_ids": SamplingParam("record", "ends the completion early; every sampled token is still the policy's"),
    "temperature": SamplingParam("record", "the run's (forced with --temperature); recorded, the trainer checks it against the run's"),
    "logprobs": SamplingParam("force", "the record needs each sampled token's logprob", True),
    "return_token_ids": SamplingParam("force", "the record needs vLLM's prompt and completion token ids", True),
    "top_p": SamplingParam("force", _NEUTRAL, 1.0),
    "top_k": SamplingParam("force", _NEUTRAL, -1),
    "min_p": SamplingParam("force", _NEUTRAL, 0.0),
    "frequency_penalty": SamplingParam("force", _NEUTRAL, 0.0),
    "presence_penalty": SamplingParam("force", _NEUTRAL, 0.0),
    "repetition_penalty": SamplingParam("force", _NEUTRAL, 1.0),
    "max_tokens": SamplingParam("clamp", "bounds the answer and the run's cost: at most --max-tokens (absent: that bound)"),
    "max_completion_tokens": SamplingParam("clamp", "the same as max_tokens (sent as max_tokens)"),
    "top_logprobs": SamplingParam("clamp", f"alternatives are most of an answer's bytes and never trained on: at most {MAX_TOP_LOGPROBS}"),
    "n": SamplingParam("only", "one choice a call: the record trains one completion per prompt", lambda v: type(v) is int and v == 1),
    "tool_choice": SamplingParam("only", "`required` or a named function forces the answer through structured outputs: " + _STEERS,
                                 lambda v: v is None or v in ("auto", "none")),
    "response_format": SamplingParam("only", "json_object or json_schema is guided decoding: " + _STEERS,
                                     lambda v: v is None or (isinstance(v, dict) and v.get("type") == "text")),
    "seed": SamplingParam("drop", "a seed lets the agent replay one draw; the run samples unseeded"),
    "logit_bias": SamplingParam("refuse", _STEERS, (None, {})),
    "allowed_token_ids": SamplingParam("refuse", _STEERS, (None,)),
    "bad_words": SamplingParam("refuse", _STEERS, (None, [])),
    "structured_outputs": SamplingParam("refuse", _STEERS, (None,)),
    "guided_json": SamplingParam("refuse", _STEERS, (None,)),
    "guided_regex": SamplingParam("refuse", _STEERS, (None,)),
    "guided_choice": SamplingParam("refuse", _STEERS, (None,)),
    "guided_grammar": SamplingParam("refuse", _STEERS, (None,)),
    "guided_decoding_backend": SamplingParam("refuse", _STEERS, (None,)),
    "guided_whitespace_pattern": SamplingParam("refuse", _STEERS, (None,)),
    "logits_processors": SamplingParam("refuse", _STEERS, (None,)),
    "min_tokens": SamplingParam("refuse", "masks the end of sequence: " + _STEERS, (None, 0)),
    "ignore_eos": SamplingParam("refuse", "masks the end of sequence: " + _STEERS, (None, False)),
    "use_beam_search": SamplingParam("refuse", "beam search is not sampling: " + _STEERS, (None, False)),
    "best_of": SamplingParam("refuse", "picks among draws: " + _STEERS, (None, 1)),
    "length_penalty": SamplingParam("refuse", "a beam-search knob", (None, 1.0)),
    "prompt_logprobs": SamplingParam("refuse", "a logprob per prompt token is a second unbounded answer", (None,)),
    "echo": SamplingParam("refuse", "returns the agent's own text as the answer", (None, False)),
    "continue_final_message": SamplingParam("refuse", "continues an assistant message the agent wrote, as if the model had", (None, False)),
    "add_generation_prompt": SamplingParam("refuse", "a prompt without the assistant turn is not the run's template", (None, True)),
    "chat_template": SamplingParam("refuse", "a template of the agent's: prompts the run never renders", (None,)),
    "truncate_prompt_tokens": SamplingParam("refuse", "cuts the prompt the agent sent", (None,)),
    "priority": SamplingParam("refuse", "the scheduler's order is the run's", (None, 0)),
    "return_tokens_as_token_ids": SamplingParam("refuse", "the server's setting (--return-tokens-as-token-ids)", (None,)),
    "kv_transfer_params": SamplingParam("refuse", "the engine's business", (None,)),
    "vllm_xargs": SamplingParam("refuse", "arbitrary engine arguments", (None,)),
    "mm_processor_kwargs": SamplingParam("refuse", "no multimodal input in this run", (None,)),
    "documents": SamplingParam("refuse", "a retrieval template's input", (None,)),
    "functions": SamplingParam("refuse", "the legacy form of tools; tools is the one way", (None,)),
    "function_call": SamplingParam("refuse", "forces a function: " + _STEERS, (None,)),
}
#: The sampling parameters each trace entry records (what was sent, after the table).
RECORDED_SAMPLING = ("temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty",
                     "max_tokens", "n", "seed", "logprobs", "top_logprobs", "return_token_ids")


class Refused(Exception):
    """A request the forwarder does not relay: 400 with the message (it names the parameter)."""


class SamplingPolicy:
    """The run's side of the table: a forced temperature (None: the caller's, recorded) and the max_tokens bound."""

    def __init__(self, temperature: float | None = None, max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        if temperature is not None and not (isinstance(temperature, (int, float)) and 0 < temperature < float("inf")):
            raise ValueError(f"--temperature must be a finite number > 0, got {temperature!r}")
        if not (isinstance(max_tokens, int) and max_tokens > 0):
            raise ValueError(f"--max-tokens must be a positive integer, got {max_tokens!r}")
        self.temperature = temperature
        self.max_tokens = max_tokens

    def normalise(self, held: dict[str, Any], max_tokens: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """The held parameters as sent upstream, and the sampling record; raises Refused naming the first bad one.
        `max_tokens`: this call's share of the rollout's budget (Trace.admit), at most the run's bound."""
        out: dict[str, Any] = {}
        cap = self.max_tokens if max_tokens is None else min(self.max_tokens, max_tokens)
        bounds = {"max_tokens": cap, "max_completion_tokens": cap, "top_logprobs": MAX_TOP_LOGPROBS}
        for name, value in held.items():
            row = SAMPLING_TABLE[name]
            if row.action in ("pass", "record"):
                out[name] = value
            elif row.action == "only":
                if not row.value(value):
                    raise Refused(f"parameter {name!r} = {json.dumps(value)[:80]} refused: {row.reason}")
                out[name] = value
            elif row.action == "refuse":
                if not any(value == ok and isinstance(value, bool) == isinstance(ok, bool) for ok in row.value):
                    raise Refused(f"parameter {name!r} refused: {row.reason}")
            elif row.action == "clamp" and value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise Refused(f"parameter {name!r} must be an integer >= 0, got {json.dumps(value)[:80]}")
                key = "max_tokens" if name == "max_completion_tokens" else name
                out[key] = min(value, bounds[name], out.get(key, bounds[name]))
        if "temperature" in out and out["temperature"] is not None:
            t = out["temperature"]
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < float("inf"):
                raise Refused(f"parameter 'temperature' must be a finite number >= 0, got {json.dumps(t)[:80]}")
        if self.temperature is not None:
            out["temperature"] = self.temperature
        out.setdefault("max_tokens", cap)
        out["max_tokens"] = max(1, out["max_tokens"])
        out.setdefault("top_logprobs", 0)
        for name, row in SAMPLING_TABLE.items():
            if row.action == "force":
                out[name] = row.value
        out.pop("max_completion_tokens", None)
        sampling = {k: out.get(k) for k in RECORDED_SAMPLING}
        sampling["n"] = 1
        return out, sampling


_OUTSIDE_STRING = re.compile(rb'[\[\]{}"]')
_INSIDE_STRING = re.compile(rb'["\\]')
_SCALAR_END = re.compile(rb"[,}\s]")
_WHITESPACE = b" \t\r\n"


class RequestFilter:
    """The chat request, checked against SAMPLING_TABLE while it streams upstream: a JSON object whose `messages` and
    `tools` pass through as they come (never held) and whose other members (each at most MAX_PARAM_BYTES) are held,
    normalised and sent at the end. `feed` returns the bytes to send on; `finish` the rest, padded to `declared`
    bytes. Raises Refused (malformed, duplicate, unknown or refused parameter); the caller then abandons the upstream
    request, which never receives a complete body."""

    def __init__(self, policy: SamplingPolicy, declared: int, max_tokens: int | None = None) -> None:
        self.policy = policy
        self.declared = declared
        #: This call's completion tokens (Trace.admit's grant), at most the policy's bound.
        self.max_tokens = max_tokens
        self.sent = 0
        self.state = "start"
        self.members = 0
        self.streamed = 0
        self.seen: set[str] = set()
        self.held: dict[str, Any] = {}
        self.sampling: dict[str, Any] = {}
        self.key = ""
        self.raw = bytearray()
        self.streaming = False
        self.depth = 0
        self.in_string = False
        self.escaped = False
        self.scalar = False

    def _out(self, data: bytes, out: list[bytes]) -> None:
        if data:
            out.append(data)

    def feed(self, data: bytes) -> bytes:
        out: list[bytes] = []
        i, n = 0, len(data)
        while i < n:
            c = data[i]
            st = self.state
            if st in ("start", "key_or_end", "key_next", "colon", "value_start", "after_value", "end") and c in _WHITESPACE:
                i += 1
                continue
            if st == "start":
                if c != 0x7B:
                    raise Refused("the body must be a JSON object")
                self.state, i = "key_or_end", i + 1
            elif st in ("key_or_end", "key_next"):
                if c == 0x7D and st == "key_or_end" and self.members == 0:
                    self.state, i = "end", i + 1
                elif c == 0x22:
                    self.state, self.raw, self.escaped, i = "key", bytearray(), False, i + 1
                else:
                    raise Refused("the body is not a well-formed JSON object (a parameter name was expected)")
            elif st == "key":
                i = self._key(data, i)
            elif st == "colon":
                if c != 0x3A:
                    raise Refused(f"the body is not a well-formed JSON object (':' expected after {self.key!r})")
                self.state, i = "value_start", i + 1
            elif st == "value_start":
                self.depth, self.in_string, self.escaped, self.scalar = 0, False, False, False
                if c == 0x22:
                    self.in_string = True
                elif c in (0x5B, 0x7B):
                    self.depth = 1
                else:
                    self.scalar = True
                self.raw = bytearray()
                if self.streaming:
                    self._out(b"%s%s:" % (b"," if self.streamed else b"", json.dumps(self.key).encode()), out)
                    self.streamed += 1
                self.state = "value"
                if not self.scalar:
                    self._value_bytes(data[i:i + 1], out)
                    i += 1
            elif st == "value":
                i = self._value(data, i, out)
            elif st == "after_value":
                if c == 0x2C:
                    self.state, i = "key_next", i + 1
                elif c == 0x7D:
                    self.state, i = "end", i + 1
                else:
                    raise Refused(f"the body is not a well-formed JSON object (',' or '}}' expected after {self.key!r})")
            else:  # end
                raise Refused("the body has data after its JSON object")
        return self._emit(out)

    def _emit(self, out: list[bytes]) -> bytes:
        if self.sent == 0 and out:
            out.insert(0, b"{")
        data = b"".join(out)
        self.sent += len(data)
        return data

    def _key(self, data: bytes, i: int) -> int:
        while i < len(data):
            if self.escaped:
                self.raw.append(data[i])
                self.escaped, i = False, i + 1
                continue
            m = _INSIDE_STRING.search(data, i)
            j = m.start() if m else len(data)
            self.raw += data[i:j]
            if len(self.raw) > 256:
                raise Refused("a parameter name longer than 256 bytes")
            if m is None:
                return len(data)
            if data[j] == 0x5C:
                self.raw.append(0x5C)
                self.escaped, i = True, j + 1
                continue
            try:
                key = json.loads(b'"' + bytes(self.raw) + b'"')
            except ValueError:
                raise Refused("a parameter name is not a valid JSON string") from None
            if key in self.seen:
                raise Refused(f"parameter {key!r} appears twice")
            if key not in SAMPLING_TABLE:
                raise Refused(f"parameter {key[:80]!r} is not in the forwarder's allow-list (docs/design/sandbox-trust.md)")
            self.seen.add(key)
            self.members += 1
            self.key, self.streaming = key, SAMPLING_TABLE[key].action == "stream"
            self.state = "colon"
            return j + 1
        return i

    def _value_bytes(self, piece: bytes, out: list[bytes]) -> None:
        if self.streaming:
            self._out(piece, out)
            return
        self.raw += piece
        if len(self.raw) > MAX_PARAM_BYTES:
            raise Refused(f"parameter {self.key!r} is over {MAX_PARAM_BYTES} bytes")

    def _value_end(self) -> None:
        self.state = "after_value"
        if self.streaming:
            return
        try:
            self.held[self.key] = json.loads(bytes(self.raw))
        except ValueError:
            raise Refused(f"parameter {self.key!r} is not valid JSON") from None
        self.raw = bytearray()

    def _value(self, data: bytes, i: int, out: list[bytes]) -> int:
        n = len(data)
        if self.scalar:
            m = _SCALAR_END.search(data, i)
            j = m.start() if m else n
            self._value_bytes(data[i:j], out)
            if m is not None:
                self._value_end()
            return j
        while i < n:
            if self.escaped:
                self._value_bytes(data[i:i + 1], out)
                self.escaped, i = False, i + 1
                continue
            m = (_INSIDE_STRING if self.in_string else _OUTSIDE_STRING).search(data, i)
            if m is None:
                self._value_bytes(data[i:], out)
                return n
            j = m.start()
            self._value_bytes(data[i:j + 1], out)
            i = j + 1
            c = data[j]
            if self.in_string:
                if c == 0x5C:
                    self.escaped = True
                    continue
                self.in_string = False
            elif c == 0x22:
                self.in_string = True
                continue
            elif c in (0x5B, 0x7B):
                self.depth += 1
                continue
            else:
                self.depth -= 1
            if self.depth == 0 and not self.in_string:
                self._value_end()
                return i
        return i

    def finish(self) -> bytes:
        if self.state == "value" and self.scalar:
            self._value_end()
        if self.state != "end":
            raise Refused("the body is not a complete JSON object")
        held, self.sampling = self.policy.normalise(self.held, self.max_tokens)
        tail = b",".join(b"%s:%s" % (json.dumps(k).encode(), json.dumps(v).encode()) for k, v in held.items())
        data = (b"{" if self.sent == 0 else b",") + tail + b"}"
        pad = self.declared - self.sent - len(data)
        if pad < 0:
            raise Refused(f"the normalised body is over its declared length (parameters over {BODY_RESERVE_BYTES} bytes of growth)")
        self.sent += len(data) + pad
        return data + b" " * pad


# --- the agent's side: the two routes ------------------------------------------------------------
class BodyReader:
    """Exactly `length` bytes of the caller's body, read as http.client sends them (never all at once)."""

    def __init__(self, rfile: Any, length: int) -> None:
        self.rfile = rfile
        self.left = length
        #: The caller's side broke (closed or went silent mid-body), as opposed to the upstream's.
        self.failed = False

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        n = self.left if size is None or size < 0 else min(size, self.left)
        try:
            data = self.rfile.read(min(n, STREAM_BYTES))
        except OSError:
            self.failed = True
            raise
        if not data:
            self.failed = True
            raise ConnectionResetError("the caller closed before its body ended")
        self.left -= len(data)
        return data


def filtered(body: BodyReader, request: RequestFilter) -> Iterator[bytes]:
    """The caller's body as RequestFilter lets it through, piece by piece (Refused ends it)."""
    while piece := body.read(STREAM_BYTES):
        if out := request.feed(piece):
            yield out
    yield request.finish()


class Handler(BaseHTTPRequestHandler):
    server: "ForwarderServer"
    protocol_version = "HTTP/1.1"
    # No "Server: BaseHTTP/x Python/y" banner.
    server_version = "forwarder"
    sys_version = ""
    # A silent connection gives its slot back (socketserver sets it on the connection).
    timeout = IDLE_SECONDS

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass  # one line per request in _handle, without the query

    def _reply(self, status: HTTPStatus, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self, method: str) -> None:
        started = time.monotonic()
        route = urlsplit(self.path).path
        status: int = HTTPStatus.NOT_FOUND
        try:
            if (method, route) not in ROUTES:
                # An unread body must not become the next request.
                self.close_connection = True
                self._reply(status, "not found")
                return
            status = self._forward(method, route)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            status = HTTPStatus.BAD_GATEWAY  # the caller went away (or went silent) mid-request
            self.close_connection = True
        finally:
            shown = route if (method, route) in ROUTES else "<other>"
            log.info("%s %s %d %.3fs", method, shown, int(status), time.monotonic() - started)

    def _body(self) -> tuple[BodyReader | None, int, HTTPStatus | None]:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return None, 0, HTTPStatus.LENGTH_REQUIRED
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY_BYTES:
            return None, 0, HTTPStatus.REQUEST_ENTITY_TOO_LARGE
        return BodyReader(self.rfile, length), length, None

    def _forward(self, method: str, route: str) -> int:
        up = self.server.upstream
        body: BodyReader | None = None
        request: RequestFilter | None = None
        if not up.key and not up.key_held.wait(KEY_HANDOVER_SECONDS):
            self.close_connection = True
            self._reply(
                HTTPStatus.SERVICE_UNAVAILABLE,
                "no key yet: this forwarder calls the model only with its rollout's key, which the trainer delivers when it claims the sandbox; no shared key falls back",
            )
            return HTTPStatus.SERVICE_UNAVAILABLE
        headers = {h: self.headers[h] for h in REQUEST_HEADERS if self.headers.get(h)}
        trace = self.server.trace
        seq: int | None = None
        granted = 0
        if method == "POST":
            body, length, refused = self._body()
            if refused is not None:
                self.close_connection = True
                limit = "Content-Length required" if refused == HTTPStatus.LENGTH_REQUIRED else f"body must be 0..{MAX_BODY_BYTES} bytes"
                self._reply(refused, limit)
                return refused
            if (method, route) == TRACED:
                try:
                    seq, granted = trace.admit(up.policy.max_tokens)
                except Limited as e:
                    self.close_connection = True  # the body is left unread
                    self._reply(HTTPStatus.TOO_MANY_REQUESTS, str(e))
                    return HTTPStatus.TOO_MANY_REQUESTS
            # The body as the table lets it through: streamed, normalised, padded to a length known now.
            request = RequestFilter(up.policy, length + BODY_RESERVE_BYTES, granted if seq is not None else None)
            headers["Content-Length"] = str(length + BODY_RESERVE_BYTES)
        # Set last, whatever the caller sent: the caller's Authorization was never copied.
        headers["Authorization"] = f"Bearer {up.key}"
        conn = up.connect()
        used = granted  # completion tokens this call is charged: all it reserved unless its record says fewer
        try:
            try:
                conn.request(method, up.prefix + route, body=filtered(body, request) if body is not None else None, headers=headers)
                resp = conn.getresponse()
            except Refused as e:
                # Abandoned upstream mid-body (never a complete request there); the caller learns which parameter.
                self.close_connection = True
                self._reply(HTTPStatus.BAD_REQUEST, str(e))
                if seq is not None:
                    trace.refuse()
                used = 0
                return HTTPStatus.BAD_REQUEST
            except (OSError, http.client.HTTPException) as e:
                used = 0
                if body is not None and body.failed:
                    raise ConnectionResetError from e  # the caller's body broke off, not the upstream
                self.close_connection = True
                # The error's class only: its text may carry the upstream's address details, never more is needed.
                self._reply(HTTPStatus.BAD_GATEWAY, f"upstream unreachable: {type(e).__name__}")
                if seq is not None:
                    trace.add(seq, HTTPStatus.BAD_GATEWAY, None)
                return HTTPStatus.BAD_GATEWAY
            try:
                entry = self._relay(resp, record=seq is not None)
            except BaseException:
                # The caller hung up (or went silent) mid-answer: sampled, never recorded whole. Counted, never silent
                # (issue 56: such a call used to vanish from a record that still said complete).
                if seq is not None:
                    trace.break_off()
                    log.warning("call %d: the caller went away mid-answer; the trace is incomplete", seq)
                raise
            if seq is not None:
                if entry is not None:
                    used = max((len(c["token_ids"]) for c in entry["choices"]), default=0)
                elif resp.status != HTTPStatus.OK:
                    used = 0
                trace.add(seq, resp.status, entry | {"sampling": request.sampling} if entry is not None else None)
            return resp.status
        finally:
            if seq is not None:
                trace.settle(granted, used)
            conn.close()

    def _relay(self, resp: http.client.HTTPResponse, *, record: bool) -> dict[str, Any] | None:
        """Streams the answer back (key cut out); returns its trace entry when asked (None: nothing to record, or it
        could not be kept within MAX_RECORD_BYTES: AnswerRecord)."""
        key = self.server.upstream.key.encode()
        self.send_response(resp.status)
        for name in RESPONSE_HEADERS:
            value = resp.getheader(name)
            if value:
                self.send_header(name, value.replace(self.server.upstream.key, REDACTED.decode()))
        # Chunked towards the caller: the length may change (redaction) and SSE has none.
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        redactor = Redactor(key)
        kept = AnswerRecord(resp.getheader("Content-Type") or "") if record and resp.status == HTTPStatus.OK else None
        complete = True
        try:
            while True:
                chunk = resp.read1(STREAM_BYTES)
                if not chunk:
                    break
                if kept is not None:
                    kept.feed(chunk)
                self._chunk(redactor.feed(chunk))
        except (OSError, http.client.HTTPException):
            # The upstream broke mid-stream: end the caller's stream, without detail.
            self.close_connection = True
            complete = False
        self._chunk(redactor.flush())
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        return kept.finish() if kept is not None and complete else None

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def do_GET(self) -> None:  # noqa: N802 (stdlib naming)
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")

    def do_PATCH(self) -> None:  # noqa: N802
        self._handle("PATCH")

    def do_HEAD(self) -> None:  # noqa: N802
        self._handle("HEAD")

    def do_OPTIONS(self) -> None:  # noqa: N802
        self._handle("OPTIONS")


# --- the trainer's side: the trace ---------------------------------------------------------------
def _address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    a = ipaddress.ip_address(value.split("%")[0])
    if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped is not None:
        return a.ipv4_mapped
    return a


def is_own_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """True when `address` belongs to this network namespace (a socket can be bound to it here): the pod's own, on any
    of its interfaces. A bind that fails otherwise than EADDRNOTAVAIL counts as the pod's (refused, never trusted)."""
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:  # no ephemeral port taken for the probe (Linux >= 4.2)
            s.setsockopt(socket.IPPROTO_IP, getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24), 1)
        except OSError:
            pass
        try:
            s.bind((str(address), 0))
        except OSError as e:
            return e.errno != errno.EADDRNOTAVAIL
    return True


def from_the_pod_itself(peer: str, local: str) -> bool:
    """A caller inside the pod's network namespace: from loopback, to loopback (only the pod reaches its loopback), from
    the very address it connected to, or from any other address of the pod. Issue 56: a socket bound to the pod IP and
    connected to 127.0.0.1 was neither loopback nor the address it arrived on, and read the trace."""
    p, lo = _address(peer), _address(local)
    return p.is_loopback or lo.is_loopback or p == lo or p.is_unspecified or is_own_address(p)


#: What a caller from the pod itself gets on the trace port, written as it is accepted (before a byte of its request is
#: read), and then the connection is closed: it holds none of the port's two slots.
_FORBIDDEN = json.dumps({"error": "the trace is for the trainer, not for the sandbox"}).encode()
FORBIDDEN_ANSWER = (b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                    % (len(_FORBIDDEN), _FORBIDDEN))


class TraceHandler(BaseHTTPRequestHandler):
    server: "TraceServer"
    protocol_version = "HTTP/1.1"
    server_version = "forwarder"
    sys_version = ""
    timeout = IDLE_SECONDS

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _reply(self, status: HTTPStatus, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        if from_the_pod_itself(self.client_address[0], self.connection.getsockname()[0]):
            return self._reply(HTTPStatus.FORBIDDEN, "the trace is for the trainer, not for the sandbox")
        if urlsplit(self.path).path != "/trace":
            return self._reply(HTTPStatus.NOT_FOUND, "not found")
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for line in self.server.trace.lines():
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_POST(self) -> None:  # noqa: N802
        self._reply(HTTPStatus.NOT_FOUND, "not found")


# --- servers on sockets bound once ---------------------------------------------------------------
def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket, bound once by the supervisor and never given up. No SO_REUSEADDR:
    nothing may bind beside it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


class BoundedServer(ThreadingHTTPServer):
    """A threading server on an already listening socket, serving at most `slots` requests at once:
    it accepts only when a slot is free, so the rest wait in the kernel's backlog."""

    daemon_threads = True

    def __init__(self, sock: socket.socket, handler: type[BaseHTTPRequestHandler], slots: int) -> None:
        super().__init__(sock.getsockname()[:2], handler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock
        self.server_address = sock.getsockname()
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])
        self._slots = threading.BoundedSemaphore(slots)

    def get_request(self) -> tuple[socket.socket, Any]:
        if not self._slots.acquire(timeout=0.5):
            raise OSError("every slot busy")  # _handle_request_noblock returns; serve_forever polls again
        try:
            return super().get_request()
        except BaseException:
            self._slots.release()
            raise

    def shutdown_request(self, request: Any) -> None:
        try:
            super().shutdown_request(request)
        finally:
            self._slots.release()

    def server_close(self) -> None:
        pass  # the supervisor's socket: never closed here


class ForwarderServer(BoundedServer):
    def __init__(self, sock: socket.socket, upstream: Upstream, trace: Trace, slots: int = MAX_CONNECTIONS) -> None:
        self.upstream = upstream
        self.trace = trace
        super().__init__(sock, Handler, slots)


class TraceServer(BoundedServer):
    def __init__(self, sock: socket.socket, trace: Trace) -> None:
        self.trace = trace
        super().__init__(sock, TraceHandler, 2)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        """A caller from the pod itself is answered 403 and closed as it is accepted, before any of its request is read:
        it can neither read the trace nor hold one of the two slots (issue 56: the agent's silent connections held both,
        and the trainer's read waited behind them for as long as the agent trickled bytes)."""
        try:
            local = request.getsockname()[0]
        except OSError:
            return False
        if not from_the_pod_itself(client_address[0], local):
            return True
        try:
            request.setblocking(False)
            request.send(FORBIDDEN_ANSWER)  # a fresh connection's send buffer is empty: never blocks
        except OSError:
            pass
        return False


class KeyDeliveryHandler(BaseHTTPRequestHandler):
    """``PUT /rollout-key`` with the rollout's key as the body, once: the key replaces the upstream's,
    and the listener closes. Never answers with a key; anything else is 404."""

    server: "KeyDeliveryServer"
    protocol_version = "HTTP/1.1"
    server_version = "forwarder"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass

    def _status(self, status: HTTPStatus) -> None:
        self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_PUT(self) -> None:  # noqa: N802
        raw = self.headers.get("Content-Length") or "0"
        length = int(raw) if raw.isdigit() else -1
        if urlsplit(self.path).path != KEY_DELIVERY_PATH or not 0 < length <= 256:
            self._status(HTTPStatus.NOT_FOUND)
            return
        key = self.rfile.read(length).decode("ascii", "replace").strip()
        if not ROLLOUT_KEY_RE.match(key):
            self._status(HTTPStatus.BAD_REQUEST)
            return
        if not self.server.deliver(key):
            self._status(HTTPStatus.CONFLICT)
            return
        log.info("rollout key delivered")
        self._status(HTTPStatus.NO_CONTENT)
        # One delivery per pod (a claim is one rollout): the port closes behind it.
        threading.Thread(target=self.server.close, daemon=True).start()

    def do_GET(self) -> None:  # noqa: N802
        self._status(HTTPStatus.NOT_FOUND)


class KeyHandOver:
    """The supervisor's side of a delivered rollout key: kept for every later child, written to the current one's pipe."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.lock = threading.Lock()
        self.pipe = -1
        self.listener: socket.socket | None = None  # the delivery port's socket (KeyDeliveryServer), the supervisor's alone

    def close_in_child(self) -> None:
        """In a new child: the delivery socket and the pipe's write end are the supervisor's (else the port would outlive its close)."""
        if self.listener is not None:
            self.listener.close()
        if self.pipe >= 0:
            os.close(self.pipe)

    def child_pipe(self) -> int:
        """A new pipe for the next child; returns its read end (the write end replaces the last child's)."""
        r, w = os.pipe()
        with self.lock:
            if self.pipe >= 0:
                os.close(self.pipe)
            self.pipe = w
        return r

    def deliver(self, key: str) -> None:
        with self.lock:
            self.upstream.hold_key(key)
            if self.pipe >= 0:
                try:
                    os.write(self.pipe, key.encode() + b"\n")
                except OSError:
                    pass  # the child is gone: the next one inherits upstream.key


class KeyDeliveryServer(ThreadingHTTPServer):
    """The one-time delivery, taken by the supervisor and handed to the serving child (KeyHandOver)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], hand_over: KeyHandOver) -> None:
        self.hand_over = hand_over
        self._lock = threading.Lock()
        self._delivered = False
        super().__init__(address, KeyDeliveryHandler)
        hand_over.listener = self.socket

    def close(self) -> None:
        """Stops serving and closes the listening socket (connections are refused from then on)."""
        self.shutdown()
        self.server_close()

    def deliver(self, key: str) -> bool:
        with self._lock:
            if self._delivered:
                return False
            self._delivered = True
        self.hand_over.deliver(key)
        return True


def probe(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when something accepts TCP on host:port (the sidecar's startup probe, run in its container)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="agent_rl_sandbox.forwarder", description="The sandbox pod's key-holding forwarder (see module docstring).")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on: loopback, shared with the agent's container and nothing else")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--trace-host", default="0.0.0.0", help="address of the trace port (the pod IP: the trainer reads it)")
    p.add_argument("--trace-port", type=int, default=DEFAULT_TRACE_PORT, help="0: no trace port")
    p.add_argument("--upstream", help="the ingress URL (its /v1/chat/completions and /v1/models are called)")
    p.add_argument("--key-env", default=DEFAULT_KEY_ENV, help="env var holding the ingress key (never a flag: argv is readable)")
    p.add_argument("--key-host", default="0.0.0.0", help="where the trainer delivers the rollout's key (the pod's address)")
    p.add_argument("--key-port", type=int, default=0, help="accept the rollout's key once on this port, the only key then held (0: none; the env key only)")
    p.add_argument("--temperature", type=float, default=None, help="the run's sampling temperature, sent on every call (default: the caller's, recorded)")
    p.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS, help="the most tokens one answer may ask for (larger asks are cut to it)")
    p.add_argument("--max-calls", type=int, default=DEFAULT_MAX_CALLS, help="the most model calls this rollout may make (past it: 429)")
    p.add_argument("--max-rollout-tokens", type=int, default=DEFAULT_MAX_ROLLOUT_TOKENS,
                   help="the most completion tokens this rollout may sample (each call's max_tokens is cut to what is left; none left: 429)")
    p.add_argument("--probe", action="store_true", help="exit 0 when the forwarder accepts connections, else 1")
    return p.parse_args(argv)


def read_keys(fd: int, upstream: Upstream) -> None:
    """The serving child's end of the supervisor's key pipe: each line is the rollout's key."""
    with os.fdopen(fd, "rb") as f:
        for line in f:
            key = line.rstrip(b"\n").decode("utf-8", "replace")
            if key and not any(c in key for c in "\r\n\0"):
                upstream.hold_key(key)


def serve(forward: socket.socket, traced: socket.socket | None, upstream: Upstream, restarts: int, keys: int | None = None,
          budget: tuple[int, int] = (DEFAULT_MAX_CALLS, DEFAULT_MAX_ROLLOUT_TOKENS)) -> int:
    """The serving child: both servers on the supervisor's sockets until SIGTERM."""
    if keys is not None:
        threading.Thread(target=read_keys, args=(keys, upstream), daemon=True).start()
    try:
        # The kernel's first pick under memory pressure: this child, never the supervisor holding the ports.
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    trace = Trace(restarts, max_calls=budget[0], max_tokens=budget[1])
    server = ForwarderServer(forward, upstream, trace)
    servers = [server] + ([TraceServer(traced, trace)] if traced is not None else [])

    def stop(_sig: int, _frame: Any) -> None:
        for s in servers:
            threading.Thread(target=s.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True) for s in servers[1:]]
    for t in threads:
        t.start()
    server.serve_forever(poll_interval=0.5)
    for t in threads:
        t.join(5)
    return 0


def start_child(run: Any, hand_over: KeyHandOver | None, stopping: Any, sleep: Any = time.sleep) -> int | None:
    """Forks the serving child (which runs ``run(keys)`` and exits); a failed fork or pipe is retried with a bounded
    backoff for as long as it fails, the sockets held meanwhile (connections wait in the backlog). None when `stopping()`."""
    delay, failures = FORK_RETRY_FIRST_SECONDS, 0
    while not stopping():
        keys: int | None = None
        try:
            keys = hand_over.child_pipe() if hand_over is not None else None
            child = os.fork()
        except OSError as e:  # BlockingIOError (EAGAIN: the pod's PID limit), ENOMEM, EMFILE
            if keys is not None:
                os.close(keys)
            failures += 1
            log.error("cannot start the serving process (%s, failure %d); the ports stay held, retrying in %.2fs",
                      type(e).__name__, failures, delay)
            sleep(delay)
            delay = min(delay * 2, FORK_RETRY_MAX_SECONDS)
            continue
        if child == 0:
            code = 1
            try:
                if hand_over is not None:
                    hand_over.close_in_child()
                code = run(keys)
            finally:
                os._exit(code)
        if keys is not None:
            os.close(keys)
        if failures:
            log.info("serving process started after %d failed fork(s)", failures)
        return child
    return None


def supervise(forward: socket.socket, traced: socket.socket | None, upstream: Upstream, hand_over: KeyHandOver | None = None,
              budget: tuple[int, int] = (DEFAULT_MAX_CALLS, DEFAULT_MAX_ROLLOUT_TOKENS)) -> int:
    """Holds the sockets for the forwarder's whole life and keeps one serving child on them."""
    stopping = False
    child = 0

    def stop(sig: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        if child:
            try:
                os.kill(child, sig)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    restarts = 0
    while True:
        started = start_child(lambda keys: serve(forward, traced, upstream, restarts, keys, budget), hand_over, lambda: stopping)
        if started is None:
            return 0  # stopped while no child could be started
        child = started
        while True:
            try:
                _pid, status = os.waitpid(child, 0)
                break
            except InterruptedError:
                continue
        if stopping:
            return 0
        restarts += 1
        log.error("the serving process ended (%s); serving again on the same sockets (restart %d)", status, restarts)
        time.sleep(RESTART_DELAY_SECONDS)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.probe:
        return 0 if probe(args.host, args.port) else 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s forwarder %(message)s", stream=sys.stderr)
    key = os.environ.pop(args.key_env, "")
    if not args.upstream or not (key or args.key_port):
        log.error("needs --upstream and the key in $%s (or --key-port to receive the rollout's)", args.key_env)
        return 2
    if key and args.key_port:
        # Per-rollout keys replace the pool's shared key: holding both would make the shared one a fallback.
        log.error("--key-port takes only the rollout's key, but $%s holds a key too: unset it (docs/design/rollout-keys.md)", args.key_env)
        return 2
    try:
        upstream = Upstream(args.upstream, key, policy=SamplingPolicy(args.temperature, args.max_tokens))
    except ValueError as e:
        log.error("%s", e)
        return 2
    for flag, value in (("--max-calls", args.max_calls), ("--max-rollout-tokens", args.max_rollout_tokens)):
        if value < 1:
            log.error("%s must be a positive integer, got %d: it bounds what one rollout may ask of the model", flag, value)
            return 2
    # Both ports first, before anything else: the startup probe passes only once they are held.
    try:
        forward = listen(args.host, args.port)
        traced = listen(args.trace_host, args.trace_port) if args.trace_port else None
    except OSError as e:
        log.error("cannot listen: %s", e)
        return 2
    log.info(
        "listening on %s:%d, forwarding %s to %s; trace on %s",
        args.host, forward.getsockname()[1], " ".join(sorted(r for _m, r in ROUTES)), args.upstream,
        f"{args.trace_host}:{traced.getsockname()[1]}" if traced is not None else "no port",
    )
    hand_over = None
    if args.key_port:
        hand_over = KeyHandOver(upstream)
        try:
            delivery = KeyDeliveryServer((args.key_host, args.key_port), hand_over)
        except OSError as e:
            log.error("cannot listen for the rollout key: %s", e)
            return 2
        threading.Thread(target=delivery.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True).start()
    return supervise(forward, traced, upstream, hand_over, (args.max_calls, args.max_rollout_tokens))


if __name__ == "__main__":
    sys.exit(main())
