"""Stand-ins for test_grpo_env_path.py, each named as one:

- `CodingStandIn`: an OpenEnv `Environment` standing in for the catalog images' environments
  (coding_env's `run_python` step). It parses `print(<int>)` instead of running code, scores the
  printed number against the episode's target, and appends one JSON line per session opened and
  closed to $STANDIN_EVENTS (the test's view of what each replica saw). Served by OpenEnv 0.10's own
  `create_app` with the session cap read from MAX_CONCURRENT_ENVS, as the catalog servers read it
  (OpenEnv envs/echo_env/server/app.py); with $SESSION_IDLE_TIMEOUT_S set, with OpenEnv's idle reaper
  on (ConcurrencyConfig.session_timeout). `uvicorn grpo_support:app` imports it as the images run
  `uvicorn server.app:app`; the app is built on first access so importing the model helpers does
  not build a server.
- `build_tokenizer()`: a small WordLevel tokenizer with Qwen's special tokens and TRL's own
  qwen3.jinja chat template, standing in for Qwen3-1.7B's tokenizer.
- `build_policy()`: a tiny `Qwen3ForCausalLM` (hidden 32, 2 layers) standing in for Qwen3-1.7B,
  trained for a few hundred CPU steps to answer every prompt with one `run_python` tool call (the
  printed digit uniform over 0-9, so rewards differ inside a group) and, after the tool's answer,
  with `done`.
- `RunPythonEnv`: the trainer side, shaped as the seed script train_coding_whitebox_eval.py's
  environment class: one OpenEnv client per instance opened at `reset()` (`.sync()`, client pings
  off), one tool method, `get_reward()` closing the session.

Heavy imports (torch, transformers) stay inside the functions that need them.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

#: Env var naming the JSONL file the stand-in environment appends its session events to.
EVENTS_ENV_VAR = "STANDIN_EVENTS"
#: The one tool the policy calls; its name is what TRL matches the parsed tool call against.
TOOL_NAME = "run_python"
_PRINT_CALL = re.compile(r"^\s*print\((-?\d+)\)\s*$")


class RunPython(Action):
    code: str


class RunPythonObservation(Observation):
    stdout: str = ""
    exit_code: int = 0


def _record(event: str, episode: str) -> None:
    path = os.environ.get(EVENTS_ENV_VAR)
    if not path:
        return
    line = json.dumps({"event": event, "episode": episode, "pid": os.getpid(), "port": os.environ.get("STANDIN_PORT", ""), "t": time.time()})
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


class CodingStandIn(Environment):
    """Stand-in for coding_env: `print(N)` prints N; reward 1/(1+|N-target|)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._episode = uuid.uuid4().hex[:12]
        self._state = State(episode_id=self._episode, step_count=0)
        self._target = 0
        self._closed = False
        _record("open", self._episode)

    def reset(self, seed: int | None = None, episode_id: str | None = None, target: int = 0, **kwargs: Any) -> RunPythonObservation:
        self._target = int(target)
        self._state = State(episode_id=self._episode, step_count=0)
        return RunPythonObservation(stdout="", exit_code=0, reward=0.0)

    def step(self, action: RunPython, timeout_s: float | None = None, **kwargs: Any) -> RunPythonObservation:
        self._state.step_count += 1
        m = _PRINT_CALL.match(action.code)
        if m is None:
            return RunPythonObservation(stdout="", exit_code=1, reward=0.0)
        printed = int(m.group(1))
        return RunPythonObservation(stdout=str(printed), exit_code=0, reward=1.0 / (1.0 + abs(printed - self._target)))

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            _record("close", self._episode)


def make_app():
    from openenv.core.env_server.http_server import create_app

    sessions = int(os.getenv("MAX_CONCURRENT_ENVS", "1"))
    idle = os.getenv("SESSION_IDLE_TIMEOUT_S")
    if idle:
        # An app with OpenEnv's idle reaper, as tbench2's server/app.py sets it up (ConcurrencyConfig.session_timeout).
        from openenv.core.env_server.types import ConcurrencyConfig

        concurrency = ConcurrencyConfig(max_concurrent_envs=sessions, session_timeout=float(idle))
        return create_app(CodingStandIn, RunPython, RunPythonObservation, env_name="coding", concurrency_config=concurrency)
    return create_app(
        CodingStandIn,
        RunPython,
        RunPythonObservation,
        env_name="coding",
        max_concurrent_envs=sessions,
    )


_app = None


def __getattr__(name: str):
    # `uvicorn grpo_support:app` reads the attribute: build the server only then.
    global _app
    if name == "app":
        if _app is None:
            _app = make_app()
        return _app
    raise AttributeError(name)


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def peak_open(events: list[dict]) -> int:
    """Most sessions open at once in a sequence of open/close events."""
    open_now = peak = 0
    for e in sorted(events, key=lambda e: e["t"]):
        open_now += 1 if e["event"] == "open" else -1
        peak = max(peak, open_now)
    return peak


# ---- the trainer side -------------------------------------------------------------------------


class RunPythonEnv:
    """TRL `environment_factory` class: one OpenEnv session per episode, opened at reset().

    `base_url` is set by the test before the trainer is built (the seed passes --env-url)."""

    base_url: str = ""
    #: Every client error seen at reset, for the test to read (TRL re-raises it anyway).
    errors: list[BaseException] = []

    def __init__(self) -> None:
        self._client = None
        self._reward = 0.0

    def reset(self, **kwargs: Any) -> None:
        from openenv.core.generic_client import GenericEnvClient

        if self._client is None:
            # The seed turns the client's keepalive pings off (a busy trainer starves its loop).
            self._client = GenericEnvClient(base_url=self.base_url, message_timeout_s=30.0, websocket_ping_interval_s=None).sync()
        self._reward = 0.0
        try:
            self._client.reset(target=int(kwargs.get("target", 0)))
        except BaseException as e:
            RunPythonEnv.errors.append(e)
            self._close()
            raise
        return None

    def run_python(self, code: str) -> str:
        """Run Python code in the environment and return what it printed.

        Args:
            code: The Python code to run.
        """
        result = self._client.step({"code": code})
        self._reward = float(result.reward or 0.0)
        obs = result.observation or {}
        return obs.get("stdout") or f"(no output, exit_code={obs.get('exit_code')})"

    def get_reward(self) -> float:
        try:
            return self._reward
        finally:
            self._close()

    def _close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None


# ---- tokenizer and policy ---------------------------------------------------------------------

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Added (not special) in Qwen3's tokenizer too: they decode back into the text TRL parses.
MARKUP_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
CALL_HEAD = '{"name": "run_python", "arguments": {"code": "'
CALL_TAIL = '"}}'
DIGITS = [f"print({d})" for d in range(10)]
WORDS = [CALL_HEAD, CALL_TAIL, *DIGITS, "done"]


def trl_qwen3_template() -> str:
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text(encoding="utf-8")


#: How text splits into pieces: the whole-call words first, then letter runs, one character otherwise.
_PIECES = "|".join(re.escape(w) for w in sorted(WORDS, key=len, reverse=True)) + r"|[A-Za-z_]+|[\s\S]"


def _corpus() -> str:
    """Every text the test renders: the chat template with the tool, the prompts, tool answers."""
    from jinja2 import Environment as Jinja

    messages = [
        *user_prompt(0),
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": TOOL_NAME, "arguments": {"code": "print(0)"}}}]},
        {"role": "tool", "name": TOOL_NAME, "content": "(no output, exit_code=1) error"},
    ]
    rendered = Jinja().from_string(trl_qwen3_template()).render(messages=messages, tools=[tool_schema()], add_generation_prompt=True, enable_thinking=False)
    return rendered + " dummy"


def build_tokenizer():
    """WordLevel over the words the test's conversations use (a piece outside them is [UNK])."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
    vocab: dict[str, int] = {}
    for piece in ["[UNK]", *SPECIAL_TOKENS, *MARKUP_TOKENS, *WORDS, *chars, *re.findall(_PIECES, _corpus())]:
        vocab.setdefault(piece, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(_PIECES), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    fast.add_tokens(MARKUP_TOKENS)
    fast.chat_template = trl_qwen3_template()
    fast.padding_side = "left"
    return fast


def tool_schema() -> dict:
    from transformers.utils import get_json_schema

    return get_json_schema(RunPythonEnv.run_python)


def user_prompt(target: int) -> list[dict]:
    return [{"role": "user", "content": f"Print the number {target} with run_python."}]


def build_policy(tokenizer, seed: int = 0):
    """The tiny Qwen3 policy, its weights set by hand (no download, no pre-training).

    Layer 0's attention has zero queries, so every position averages the values of all before it;
    only `<tool_response>` has a value, so the residual stream carries "a tool has answered". Every
    other sublayer is zeroed, so otherwise the next token depends on the current one alone:
    end of prompt -> `<tool_call>` -> call head -> one of print(0..9), uniformly -> `"}}` ->
    `</tool_call>` -> `<|im_end|>`; with a tool answer in the context, end of prompt -> `done`.
    """
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    hidden = 32
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(config)
    tid = tokenizer.convert_tokens_to_ids
    # One residual dimension per state of the chain; FLAG is where "a tool has answered" lands.
    chain = {"\n": 0, "<tool_call>": 1, CALL_HEAD: 2, CALL_TAIL: 4, "</tool_call>": 5, "done": 6, "<|im_end|>": 7}
    chain.update({d: 3 for d in DIGITS})
    answer_dim, flag = 8, 9
    follows = {0: ["<tool_call>"], 1: [CALL_HEAD], 2: DIGITS, 3: [CALL_TAIL], 4: ["</tool_call>"], 5: ["<|im_end|>"], 6: ["<|im_end|>"]}
    with torch.no_grad():
        emb = model.model.embed_tokens.weight
        emb.normal_(0.0, 0.02)
        emb[:, :10] = 0.0
        for token, dim in chain.items():
            emb[tid(token)] = 0.0
            emb[tid(token), dim] = 10.0
        emb[tid("<tool_response>")] = 0.0
        emb[tid("<tool_response>"), answer_dim] = 10.0
        for i, layer in enumerate(model.model.layers):
            attn = layer.self_attn
            attn.q_proj.weight.zero_()
            attn.v_proj.weight.zero_()
            attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
            if i == 0:
                attn.v_proj.weight[0, answer_dim] = 1.0
                attn.o_proj.weight[flag, 0] = 1000.0
        head = model.lm_head.weight
        head.zero_()
        for dim, nexts in follows.items():
            for token in nexts:
                head[tid(token), dim] = 5.0
        # A tool answer turns the end of the prompt into `done`, and only the end of the prompt.
        head[tid("done"), flag] = 8.0
        head[tid("<tool_call>"), flag] = -8.0
        for dim in range(1, 8):
            head[tid("done"), dim] = -20.0
    model.eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model
