"""STAND-IN for the black-box trainer (TRL's examples/async_grpo_opencode/opencode_hf_sandbox.py) in
the node fixture's trainer image (test/node/images.sh, localhost/arl-node/trainer-standin), at the
path the platform renders, /app/opencode_hf_sandbox.py. No model is trained here: no GPU, no TRL.

Its argument parser is built from the program's recorded facts (components/config/programs.ts,
baked into the image as /opt/agentrl-standin/program-facts.json by test/node/trainer-standin/facts.ts):
the same flags, actions, types, choices and required flags, unknown flags refused (argparse's
defaults otherwise). So the platform's args check (components/training/args/args_check.py, the real file, at pod start) runs
against a parser that refuses what the recorded program refuses.

After the parse it does, from inside the training pod, what the platform has to make possible for
the real trainer, and records each result:
- `vllm`: a chat completion from --vllm-url (vLLM in the same pod, the vllm stand-in, which names
  the requested model in its reply: the round trip, not which model is served);
- `claim`: a sandbox claimed from the stack's pool with the project's own backend
  (agent_rl_sandbox.AgentSandboxBackend.from_env: the pod's env and ServiceAccount token);
- `sandbox_id`, `sandbox_root`: `id -u` and a write to / in the sandbox, through its runtime;
- `sandbox_model`: the agent side's call from inside the sandbox to --sandbox-vllm-url (the pool's
  key-holding forwarder, then the vLLM ingress, then this pod's vLLM);
- `released`: the claim released (backend.close() failures).
The results go to <--output-dir>/standin-result.json (the checkpoints volume) and to stdout as
`standin-result: <json>`. Then it waits for <--output-dir>/release (the test writes it once it has
seen the pod Ready), at most RELEASE_WAIT_SECONDS, and exits 0 when every step passed, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import urllib.request

FACTS = "/opt/agentrl-standin/program-facts.json"
RELEASE_WAIT_SECONDS = 300
TYPES = {"str": str, "int": int, "float": float}


def parser_from_facts(facts: dict) -> argparse.ArgumentParser:
    # argparse's defaults otherwise (abbreviations allowed), as a plain ArgumentParser has them.
    p = argparse.ArgumentParser(prog=facts["file"], description=f"STAND-IN for {facts['source']['path']}")
    for flag, f in facts["flags"].items():
        kwargs: dict = {"dest": flag.lstrip("-").replace("-", "_")}
        if f["action"] == "store_true":
            kwargs["action"] = "store_true"
        else:
            kwargs["type"] = TYPES[f.get("type", "str")]
            if "choices" in f:
                kwargs["choices"] = f["choices"]
            if f.get("default") is not None:
                kwargs["default"] = f["default"]
        if f.get("required"):
            kwargs["required"] = True
        p.add_argument(flag, **kwargs)
    return p


CHAT_PY = """
import json, sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "/v1/chat/completions", method="POST",
    data=json.dumps({"model": sys.argv[2], "messages": [{"role": "user", "content": "Name this."}]}).encode(),
    headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=20) as r:
    print(json.loads(r.read())["model"])
"""


def chat_model(base_url: str, model: str) -> str:
    req = urllib.request.Request(
        base_url.rstrip("/") + "/v1/chat/completions",
        method="POST",
        data=json.dumps({"model": model, "messages": [{"role": "user", "content": "Name this."}]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=20) as r:
        return json.loads(r.read())["model"]


def step(result: dict, name: str, fn) -> object:
    try:
        value = fn()
        result[name] = value
        return value
    except Exception as e:  # recorded: the test names the step that failed
        result[name] = {"error": f"{type(e).__name__}: {e}"}
        return None


#: Tries of the agent side's call (SANDBOX_MODEL_PAUSE_S apart): see sandbox_chat.
SANDBOX_MODEL_TRIES = 30
SANDBOX_MODEL_PAUSE_S = 2


def sandbox_chat(handle, chat: str) -> str:
    """The agent side's call, through the forwarder and the ingress to this pod's vLLM. The ingress
    reaches vLLM through this pod's Service, which lists the pod only once it is Ready (its readiness
    probe, every 5 s, after vLLM's health), and a busy node may take longer to program that endpoint
    than this stand-in takes to claim a sandbox: until then the call fails, so it is tried again. The
    last failure's output is kept in the error, so the test names it."""
    last = None
    for _ in range(SANDBOX_MODEL_TRIES):
        last = handle.exec(chat, timeout=60)
        if last.exit_code == 0 and last.stdout.strip():
            return last.stdout.strip()
        time.sleep(SANDBOX_MODEL_PAUSE_S)
    raise RuntimeError(f"no answer in {SANDBOX_MODEL_TRIES} tries: exit {last.exit_code}, stdout {last.stdout.strip()!r}, stderr {last.stderr.strip()[-500:]!r}")


def main() -> int:
    with open(FACTS) as f:
        facts = json.load(f)
    args = parser_from_facts(facts).parse_args()
    print(f"trainer STAND-IN (node fixture) for {facts['source']['path']}: arguments accepted", flush=True)
    result: dict = {"argv": sys.argv[1:]}
    step(result, "vllm", lambda: chat_model(args.vllm_url, args.model))

    def backend_from_env():
        from agent_rl_sandbox.agent_sandbox import AgentSandboxBackend

        return AgentSandboxBackend.from_env()

    backend = step(result, "backend", backend_from_env)
    handle = step(result, "claim", lambda: backend.create(timeout_s=300)) if backend is not None else None
    if handle is not None:
        result["claim"] = handle.sandbox_id
        step(result, "sandbox_id", lambda: handle.exec("id -u").stdout.strip())
        step(result, "sandbox_root", lambda: handle.exec("touch /probe-root 2>&1; echo exit=$?").stdout.strip())
        chat = f"python3 -c {shlex.quote(CHAT_PY)} {shlex.quote(args.sandbox_vllm_url)} {shlex.quote(args.model)}"
        step(result, "sandbox_model", lambda: sandbox_chat(handle, chat))
        step(result, "killed", lambda: handle.kill() is None)
    if backend is not None:
        step(result, "released", backend.close)
        result["backend"] = "ok"
    ok = (
        result.get("vllm") == args.model
        and isinstance(result.get("claim"), str)
        and result.get("sandbox_model") == args.model
        and result.get("released") == 0
    )
    result["ok"] = ok
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, "standin-result.json"), "w") as f:
        json.dump(result, f)
    print(f"standin-result: {json.dumps(result)}", flush=True)
    release = os.path.join(args.output_dir, "release")
    deadline = time.monotonic() + RELEASE_WAIT_SECONDS
    while not os.path.exists(release):
        if time.monotonic() > deadline:
            print(f"trainer STAND-IN: {release} not written within {RELEASE_WAIT_SECONDS} s", flush=True)
            return 1
        time.sleep(1)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
