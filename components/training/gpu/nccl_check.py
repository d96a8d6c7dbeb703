#!/usr/bin/env python3
"""NCCL weight-sync check for a training node: torch only, no TRL or vLLM.

Runs the same broadcast the weight update does (trainer = rank 0, the NCCL master, as in
trl `trl/experimental/async_grpo/weight_transfer.py` and `trl/generation/vllm_client.py`;
vLLM = rank 1) between the two roles' GPU sets, with the NCCL settings of the environment it
is started in (the ones the TrainingNode renders), prints the transport NCCL chose and the
bandwidth, and exits non-zero on any failure, so a broken setup fails in seconds, before a
model loads.

Two ways to run it:

  Both ranks from one process tree (one container that sees every GPU of the node, or a
  Docker container given the node's devices): each rank is a child process whose
  CUDA_VISIBLE_DEVICES is its role's set, exactly as vLLM and the trainer are started.

      nccl_check.py --spawn --vllm-devices 0 --trainer-devices 1

  One rank per process (two containers, each seeing only its own GPUs): run rank 0 in the
  trainer's container and rank 1 in vLLM's; both use their first visible GPU.

      nccl_check.py --rank 0      # and, beside it:  nccl_check.py --rank 1

Output: human lines, then one JSON line starting with `NCCL_CHECK ` (ok, transport,
seconds, GiB/s). Exit codes: 0 ok, 1 the broadcast failed or returned wrong data,
2 timed out, 3 bad arguments or no GPU.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

RESULT_PREFIX = "NCCL_CHECK "
FILL_VALUE = 1.5  # exact in bf16


def parse_devices(text: str) -> list[int]:
    try:
        devices = [int(x) for x in text.split(",") if x.strip() != ""]
    except ValueError:
        raise SystemExit(f"nccl_check: bad device list {text!r}: expected comma-separated GPU indices like 0,1")
    if not devices or any(d < 0 for d in devices):
        raise SystemExit(f"nccl_check: bad device list {text!r}: expected comma-separated GPU indices like 0,1")
    return devices


def transports_from_log(log_dir: str) -> list[str]:
    """The transports NCCL reports per channel ("... via P2P/CUMEM/read", "via SHM/direct/direct")."""
    found: list[str] = []
    for path in sorted(glob.glob(os.path.join(log_dir, "nccl.*"))):
        with open(path, errors="replace") as f:
            for line in f:
                m = re.search(r"\bvia (\S+)", line)
                if m and m.group(1) not in found:
                    found.append(m.group(1))
    return found


def run_rank(rank: int, args: argparse.Namespace) -> dict:
    """One rank: init the NCCL group over TCP, broadcast `size` bytes of bf16 from rank 0."""
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        print(f"nccl_check: rank {rank}: no GPU visible (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')})", file=sys.stderr)
        sys.exit(3)
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    dist.init_process_group(
        backend="nccl",
        init_method=f"tcp://{args.host}:{args.port}",
        rank=rank,
        world_size=2,
        device_id=device,
    )
    elements = int(args.size_gib * (1 << 30)) // 2
    buf = torch.empty(elements, dtype=torch.bfloat16, device=device)
    if rank == 0:
        buf.fill_(FILL_VALUE)
    else:
        buf.zero_()
    # Warm-up: connects the channels, so the timed broadcast measures transfer alone.
    warm = torch.ones(1 << 20, dtype=torch.bfloat16, device=device)
    dist.broadcast(warm, src=0)
    torch.cuda.synchronize()
    times: list[float] = []
    for _ in range(args.iterations):
        dist.barrier(device_ids=[0])
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        dist.broadcast(buf, src=0)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    ok = True
    if rank == 1:
        # Every element must have arrived: min == max == the value rank 0 sent.
        ok = bool(buf.min().item() == FILL_VALUE and buf.max().item() == FILL_VALUE)
    dist.barrier(device_ids=[0])
    dist.destroy_process_group()
    best = min(times)
    return {
        "rank": rank,
        "ok": ok,
        "bytes": elements * 2,
        "seconds": best,
        "gib_per_s": (elements * 2) / best / (1 << 30),
        "device": torch.cuda.get_device_name(device),
    }


def with_watchdog(seconds: float, what: str) -> None:
    def fire() -> None:
        print(f"nccl_check: {what} did not finish within {seconds:.0f} s (NCCL hang? check NCCL_* settings)", file=sys.stderr, flush=True)
        os._exit(2)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def report(result: dict, transports: list[str]) -> None:
    result = {**result, "transport": ",".join(transports) if transports else "unknown"}
    if result["ok"]:
        print(f"nccl_check: ok: {result['bytes'] / (1 << 30):.2f} GiB broadcast in {result['seconds']:.4f} s "
              f"({result['gib_per_s']:.1f} GiB/s) via {result['transport']}")
    else:
        print("nccl_check: FAILED: the broadcast finished but rank 1 received wrong data", file=sys.stderr)
    print(RESULT_PREFIX + json.dumps(result, sort_keys=True), flush=True)


def ensure_nccl_log(env: dict[str, str]) -> str | None:
    """Routes NCCL's INFO log to files we can read the transport from (unless the user set NCCL_DEBUG_FILE)."""
    if "NCCL_DEBUG_FILE" in env:
        return None
    log_dir = tempfile.mkdtemp(prefix="nccl-check-")
    env.setdefault("NCCL_DEBUG", "INFO")
    env["NCCL_DEBUG_FILE"] = os.path.join(log_dir, "nccl.%h.%p")
    return log_dir


def spawn(args: argparse.Namespace) -> int:
    vllm, trainer = parse_devices(args.vllm_devices), parse_devices(args.trainer_devices)
    if set(vllm) & set(trainer):
        print(f"nccl_check: --vllm-devices {args.vllm_devices} and --trainer-devices {args.trainer_devices} overlap: the roles need disjoint GPUs", file=sys.stderr)
        return 3
    env = dict(os.environ)
    log_dir = ensure_nccl_log(env)
    procs = []
    for rank, devices in ((0, trainer), (1, vllm)):
        child_env = {**env, "CUDA_VISIBLE_DEVICES": ",".join(map(str, devices)), "CUDA_DEVICE_ORDER": env.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID")}
        cmd = [sys.executable, os.path.abspath(__file__), "--rank", str(rank), "--host", args.host, "--port", str(args.port),
               "--size-gib", str(args.size_gib), "--iterations", str(args.iterations), "--timeout", str(args.timeout), "--quiet"]
        procs.append(subprocess.Popen(cmd, env=child_env, stdout=subprocess.PIPE, text=True))
    deadline = time.monotonic() + args.timeout + 10
    outputs: list[str] = []
    codes: list[int] = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            print(f"nccl_check: ranks did not finish within {args.timeout} s", file=sys.stderr)
            return 2
        outputs.append(out)
        codes.append(p.returncode)
    if any(c != 0 for c in codes):
        for q in procs:
            if q.poll() is None:
                q.kill()
        print(f"nccl_check: FAILED: rank exit codes {codes} (trainer rank 0, vLLM rank 1); NCCL's error is above", file=sys.stderr)
        return 2 if 2 in codes else 1
    results = [json.loads(line[len(RESULT_PREFIX):]) for out in outputs for line in out.splitlines() if line.startswith(RESULT_PREFIX)]
    receiver = next((r for r in results if r["rank"] == 1), None)
    if receiver is None:
        print("nccl_check: FAILED: rank 1 printed no result", file=sys.stderr)
        return 1
    report(receiver, transports_from_log(log_dir) if log_dir else [])
    return 0 if receiver["ok"] else 1


def single(args: argparse.Namespace) -> int:
    if args.quiet:
        log_dir = None
    else:
        # A lone rank re-executes itself so NCCL reads the log settings at start-up.
        env = dict(os.environ)
        log_dir = ensure_nccl_log(env)
        if log_dir is not None:
            cmd = [sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--quiet"]
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
            sys.stdout.write("".join(l + "\n" for l in p.stdout.splitlines() if not l.startswith(RESULT_PREFIX)))
            if p.returncode != 0:
                print(f"nccl_check: FAILED: rank {args.rank} exited {p.returncode}; NCCL's error is above", file=sys.stderr)
                return p.returncode
            lines = [l for l in p.stdout.splitlines() if l.startswith(RESULT_PREFIX)]
            if not lines:
                print(f"nccl_check: FAILED: rank {args.rank} printed no result", file=sys.stderr)
                return 1
            result = json.loads(lines[-1][len(RESULT_PREFIX):])
            report(result, transports_from_log(log_dir))
            return 0 if result["ok"] else 1
    with_watchdog(args.timeout, f"rank {args.rank}")
    try:
        result = run_rank(args.rank, args)
    except Exception as e:  # NCCL and CUDA errors surface as RuntimeError / DistBackendError
        print(f"nccl_check: rank {args.rank} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        os._exit(1)
    if args.quiet:
        print(RESULT_PREFIX + json.dumps(result, sort_keys=True), flush=True)
    else:
        report(result, [])
    return 0 if result["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Broadcast between the trainer's and vLLM's GPUs as the weight update does.")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--spawn", action="store_true", help="run both ranks as child processes split by CUDA_VISIBLE_DEVICES")
    mode.add_argument("--rank", type=int, choices=[0, 1], help="run one rank (0 = trainer, 1 = vLLM) in this process")
    p.add_argument("--vllm-devices", default=os.environ.get("AGENTRL_VLLM_DEVICES"), help="vLLM's GPU indices (--spawn)")
    p.add_argument("--trainer-devices", default=os.environ.get("AGENTRL_TRAINER_DEVICES"), help="the trainer's GPU indices (--spawn)")
    p.add_argument("--host", default="127.0.0.1", help="rendezvous address (rank 0 listens; default 127.0.0.1)")
    p.add_argument("--port", type=int, default=int(os.environ.get("AGENTRL_NCCL_CHECK_PORT", "29531")), help="rendezvous TCP port")
    p.add_argument("--size-gib", type=float, default=1.0, help="GiB broadcast (default 1; a Qwen3-8B update is 16)")
    p.add_argument("--iterations", type=int, default=3, help="timed broadcasts; the best is reported")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds before the check gives up (exit 2)")
    p.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.size_gib <= 0 or args.iterations < 1 or args.timeout <= 0:
        print("nccl_check: --size-gib and --timeout must be > 0 and --iterations >= 1", file=sys.stderr)
        return 3
    if args.spawn:
        if args.vllm_devices is None or args.trainer_devices is None:
            print("nccl_check: --spawn needs --vllm-devices and --trainer-devices (or AGENTRL_VLLM_DEVICES / AGENTRL_TRAINER_DEVICES)", file=sys.stderr)
            return 3
        return spawn(args)
    return single(args)


if __name__ == "__main__":
    sys.exit(main())
