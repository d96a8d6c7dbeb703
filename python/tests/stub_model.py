"""Stand-in for vLLM: a scripted OpenAI-compatible chat endpoint that makes an agent run one bash
tool call and then finish. No model exists here (no GPU, no weights), so this is a stand-in,
named as such in the tests that use it.

It speaks what TRL's black-box recipe asks of vLLM (`vllm serve --return-tokens-as-token-ids
--logprobs-mode processed_logprobs`, TRL examples/async_grpo_opencode/opencode_hf_sandbox.py):
- `logprobs: true` fills `choices[].logprobs.content[]`, one entry per sampled token, each
  `token` in vLLM's `token_id:<id>` form (what --return-tokens-as-token-ids makes of it);
  `top_logprobs: k` adds k alternatives whose gaps scale with 1/temperature (processed logprobs);
- `return_token_ids: true` adds vLLM's `prompt_token_ids` (top level) and `choices[].token_ids`;
- `stream: true` answers as server-sent events (`chat.completion.chunk` deltas, tool-call
  arguments in pieces, logprobs per chunk, `data: [DONE]`), as vLLM streams.

The token ids come from a byte-level "tokenizer" over a canonical rendering of the messages, so
turn k+1's prompt ids start with turn k's prompt + completion ids when the agent sends its own
reply back unchanged (the prefix property OpenEnv's capture graph links turns by).

The script, by the request's messages:
- tools offered, no tool result yet: a `bash` tool call writing and running solution.py;
- a tool result present: a short final answer, finish_reason `stop`; for mini-swe-agent (its prompt
  names SUBMIT, the command whose output submits), a `bash` call `echo SUBMIT` instead, once;
- no tools offered (e.g. opencode's title request): a short title.
`hold` (a threading.Event) makes every scripted tool-call turn wait until it is set: a rollout
that is mid-flight for as long as a test needs.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: The file the scripted bash call writes, and its content (a + b from stdin).
SOLUTION = "print(sum(map(int, input().split())))"
BASH_COMMAND = f"printf '%s\\n' '{SOLUTION}' > solution.py && echo '2 3' | python3 solution.py"
FINAL_ANSWER = "solution.py prints the sum of the two numbers; it printed 5 for 2 3."
TITLE = "Sum two numbers"
#: mini-swe-agent 2.x's submit protocol: a command whose output's first line is this ends its run
#: (minisweagent/environments/local.py); its prompt templates name it.
SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
SUBMIT_COMMAND = f"echo {SUBMIT}"
#: Offset of byte tokens (ids below it are specials: 1 = end of message, 2 = assistant start).
BYTE_OFFSET = 3
EOS_ID = 1
ASSISTANT_ID = 2


def render(message: dict[str, Any]) -> str:
    """A canonical text of one message's body: content, tool calls with arguments re-serialised."""
    parts = []
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    parts.append(content or "")
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        args = fn.get("arguments") or "{}"
        try:
            args = json.dumps(json.loads(args), sort_keys=True)
        except (TypeError, ValueError):
            pass
        parts.append(f"\n<call {fn.get('name')}>{args}</call>")
    return "".join(parts)


def encode(text: str) -> list[int]:
    return [b + BYTE_OFFSET for b in text.encode("utf-8")]


def prompt_ids(messages: list[dict[str, Any]]) -> list[int]:
    """An assistant message is ASSISTANT_ID + its body + EOS, exactly what was sampled after the
    generation prompt (ASSISTANT_ID): prefix-preserving, as a training chat template must be."""
    ids: list[int] = []
    for m in messages:
        if m.get("role") == "assistant":
            ids += [ASSISTANT_ID] + encode(render(m)) + [EOS_ID]
        else:
            ids += encode(f"{m.get('role', '')}\n{render(m)}") + [EOS_ID]
    return ids + [ASSISTANT_ID]  # the generation prompt


class StubModel:
    """The server, on 127.0.0.1 at a free port (or `host`:`port`); `requests` records every body it was sent."""

    def __init__(self, model: str = "stub/model-1", delay_s: float = 0.0, host: str = "127.0.0.1", port: int = 0) -> None:
        self.model = model
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self.hold = threading.Event()
        self.hold.set()
        self.holding = threading.Event()  # set while a request waits on `hold`
        self._lock = threading.Lock()
        self._ids = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                if self.path == "/health":  # vLLM's health route: 200, empty body
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                if self.path.rstrip("/").endswith("/models"):
                    return self._json(200, {"object": "list", "data": [{"id": stub.model, "object": "model", "owned_by": "stub"}]})
                return self._json(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with stub._lock:
                    stub.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._json(404, {"error": {"message": f"no route {self.path}"}})
                reply = stub.reply(body)
                if body.get("stream") is True:
                    return self._stream(body, reply)
                return self._json(200, stub.completion(body, reply))

            def _json(self, status: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], reply: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in stub.chunks(body, reply):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, name="stub-model", daemon=True).start()

    # --- the script -------------------------------------------------------------------------
    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """The assistant message this request gets."""
        messages = body.get("messages") or []
        if not body.get("tools"):
            return {"role": "assistant", "content": TITLE}
        if any(m.get("role") == "tool" for m in messages):
            asks_submit = any(SUBMIT in render(m) for m in messages if m.get("role") in ("system", "user"))
            submitted = any(SUBMIT_COMMAND in render(m) for m in messages if m.get("role") == "assistant")
            if asks_submit and not submitted:
                return self._bash_call(SUBMIT_COMMAND, "Submit")
            return {"role": "assistant", "content": FINAL_ANSWER}
        self.holding.set()
        self.hold.wait()
        return self._bash_call(BASH_COMMAND, "Write and run solution.py")

    def _bash_call(self, command: str, description: str) -> dict[str, Any]:
        with self._lock:
            self._ids += 1
            call_id = f"call_{self._ids}"
        args = json.dumps({"command": command, "description": description})
        return {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "bash", "arguments": args}}]}

    def _sampled(self, reply: dict[str, Any]) -> list[int]:
        return encode(render(reply)) + [EOS_ID]

    def _logprobs(self, body: dict[str, Any], ids: list[int]) -> list[dict[str, Any]]:
        temperature = float(body.get("temperature") or 1.0)
        k = int(body.get("top_logprobs") or 0)
        out = []
        for i, tid in enumerate(ids):
            lp = -0.1 * (1 + i % 7) / temperature
            alts = [{"token": f"token_id:{tid + j}", "logprob": lp - 2.0 * j / temperature, "bytes": None} for j in range(k)]
            out.append({"token": f"token_id:{tid}", "logprob": lp, "bytes": None, "top_logprobs": alts})
        return out

    def completion(self, body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        if self.delay_s:
            time.sleep(self.delay_s)
        ids = self._sampled(reply)
        finish = "tool_calls" if reply.get("tool_calls") else "stop"
        choice: dict[str, Any] = {"index": 0, "message": reply, "finish_reason": finish, "logprobs": None}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": self._logprobs(body, ids)}
        out: dict[str, Any] = {
            "id": f"chatcmpl-stub-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or self.model, "choices": [choice],
            "usage": {"prompt_tokens": len(prompt_ids(body.get("messages") or [])), "completion_tokens": len(ids), "total_tokens": 0},
        }
        out["usage"]["total_tokens"] = out["usage"]["prompt_tokens"] + len(ids)
        if body.get("return_token_ids"):
            out["prompt_token_ids"] = prompt_ids(body.get("messages") or [])
            choice["token_ids"] = ids
        return out

    def chunks(self, body: dict[str, Any], reply: dict[str, Any]) -> list[dict[str, Any]]:
        """The same completion as SSE deltas: role, then content or tool-call pieces, then finish."""
        full = self.completion(body, reply)
        choice = full["choices"][0]
        ids = self._sampled(reply)
        lps = (choice.get("logprobs") or {}).get("content") or []
        base = {"id": full["id"], "object": "chat.completion.chunk", "created": full["created"], "model": full["model"]}
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        if reply.get("tool_calls"):
            (call,) = reply["tool_calls"]
            args = call["function"]["arguments"]
            deltas.append({"tool_calls": [{"index": 0, "id": call["id"], "type": "function", "function": {"name": "bash", "arguments": ""}}]})
            deltas += [{"tool_calls": [{"index": 0, "function": {"arguments": args[i : i + 16]}}]} for i in range(0, len(args), 16)]
        else:
            text = reply["content"]
            deltas += [{"content": text[i : i + 8]} for i in range(0, len(text), 8)]
        # Spread the sampled ids and logprobs over the content-bearing chunks, the rest on the last.
        n = len(deltas) - 1
        per = max(1, len(ids) // max(1, n))
        out = []
        for i, delta in enumerate(deltas):
            c: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
            if i > 0:
                lo, hi = (i - 1) * per, (len(ids) if i == n else i * per)
                if body.get("return_token_ids"):
                    c["token_ids"] = ids[lo:hi]
                if body.get("logprobs"):
                    c["logprobs"] = {"content": lps[lo:hi]}
            out.append({**base, "choices": [c]})
        if body.get("return_token_ids"):
            out[0]["prompt_token_ids"] = full["prompt_token_ids"]
        out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}], "usage": full["usage"]})
        return out

    def chat_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if r["path"].rstrip("/").endswith("/chat/completions")]

    def stop(self) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()


def main(argv: list[str] | None = None) -> int:
    """`python3 stub_model.py --host 0.0.0.0 --port 8000 --model NAME`: serve until killed (a vLLM stand-in in a pod)."""
    import argparse
    import signal
    import sys

    parser = argparse.ArgumentParser(description="Stand-in for vLLM's OpenAI server (no model): the scripted replies above.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default="stub/model-1", help="the model id /v1/models lists and replies name")
    args = parser.parse_args(argv)
    stub = StubModel(args.model, host=args.host, port=args.port)
    print(f"stand-in vLLM (stub_model.py) serving {args.model} on {stub.url}", flush=True)
    # As a container's PID 1 Python would ignore SIGTERM (no default action for PID 1): end on it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
