#!/usr/bin/env python3
"""Runs one role of the shared training container (vllm or trainer) under the supervisor
(components/training/supervisor.ts), and the trainer elsewhere with observability on; README
"Observability" ("Logs").

- Every line the role writes to stdout or stderr comes out on the same stream prefixed with
  "[<role>] ", so the interleaved output of one container says who wrote it (a log shipper splits
  on the prefix). A carriage return (tqdm's progress bar) starts a new prefixed segment too.
- With --metrics-listen (the trainer), it serves GET /metrics there:
    agentrl_trainer_up                               1 while the role's process runs
    agentrl_trainer_step                             the last optimizer step seen
    agentrl_trainer_last_progress_timestamp_seconds  unix time that step was seen (the start time before any)
    agentrl_trainer_vllm_healthy                     1 while --vllm-health-url answers 200 (when given)
  The step comes from the training progress bar transformers' Trainer writes (trainer_callback.py
  ProgressCallback: tqdm(total=max_steps), updated once per optimizer step, TRL's GRPOTrainer keeps
  it): a bar without a description, "  5%|▌    | 10/200 [...". The first such bar fixes max_steps;
  bars of another total (an evaluation's) are ignored. Not visible: anything when the script sets
  disable_tqdm (the step then stays 0 and the stall alert fires), rewards or loss (trackio/wandb
  carry them), and where in a step a stalled trainer hangs.

Signals: SIGTERM/SIGINT are passed to the role, which is waited for; the role gets SIGKILL if this
process dies (PR_SET_PDEATHSIG), so a KILL from the supervisor never leaves it behind.
Bounded: a segment is parsed within its first MAX_SEGMENT bytes, at most 8 scrapes at once.

Usage: role_runner.py --role trainer [--metrics-listen 0.0.0.0:9401] [--vllm-health-url URL] -- CMD [ARG...]
Exit codes: the role's own exit code (128 + N when signal N ended it); 2 on a bad command line,
127 when CMD cannot be started, 1 when --metrics-listen cannot be bound.
"""

import argparse
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

# The shared /metrics server, mounted beside this script (in the source tree: components/shared).
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, os.pardir, "shared")]
import metrics_http  # noqa: E402

MAX_SEGMENT = 4096
ROLES = ("vllm", "trainer")
# The Trainer's bar: no description, so the segment starts with the percentage (tqdm's l_bar).
PROGRESS_BAR = re.compile(r"^\s*\d{1,3}%\|[^|]*\|\s*(\d+)/(\d+)\s*\[")
PR_SET_PDEATHSIG = 1


def log(msg):
    sys.stderr.write("agentrl-role-runner: %s\n" % msg)
    sys.stderr.flush()


class Progress:
    """Step progress read from the training bar, and the role's liveness."""

    def __init__(self):
        self.lock = threading.Lock()
        self.total = None
        self.step = 0
        self.last_progress = time.time()
        self.running = True
        self.vllm_healthy = None

    def segment(self, text):
        m = PROGRESS_BAR.match(text)
        if m is None:
            return
        n, total = int(m.group(1)), int(m.group(2))
        with self.lock:
            if self.total is None:
                self.total = total
            if total != self.total:
                return
            if n > self.step:
                self.step = n
                self.last_progress = time.time()

    def render(self):
        with self.lock:
            lines = [
                "# HELP agentrl_trainer_up 1 while the supervised trainer process runs.",
                "# TYPE agentrl_trainer_up gauge",
                "agentrl_trainer_up %d" % (1 if self.running else 0),
                "# HELP agentrl_trainer_step The last optimizer step the trainer's progress bar showed.",
                "# TYPE agentrl_trainer_step gauge",
                "agentrl_trainer_step %d" % self.step,
                "# HELP agentrl_trainer_last_progress_timestamp_seconds Unix time the last step was seen (the trainer's start before any).",
                "# TYPE agentrl_trainer_last_progress_timestamp_seconds gauge",
                "agentrl_trainer_last_progress_timestamp_seconds %.3f" % self.last_progress,
            ]
            if self.vllm_healthy is not None:
                lines += [
                    "# HELP agentrl_trainer_vllm_healthy 1 while vLLM's /health answers 200.",
                    "# TYPE agentrl_trainer_vllm_healthy gauge",
                    "agentrl_trainer_vllm_healthy %d" % (1 if self.vllm_healthy else 0),
                ]
        return "\n".join(lines) + "\n"


def pump(src, dst, prefix, progress):
    """Copies src to dst, starting every line (and every \\r segment) with prefix; feeds segments to progress."""
    at_start = True
    segment = b""
    while True:
        chunk = src.read(65536)
        if not chunk:
            break
        out = []
        start = 0
        for i, byte in enumerate(chunk):
            if byte in (0x0A, 0x0D):
                piece = chunk[start : i + 1]
                # A bare \r at a line's start (tqdm opens each update with one) gets no prefix of its own.
                if at_start and piece != b"\r":
                    out.append(prefix)
                out.append(piece)
                segment += piece[: max(0, MAX_SEGMENT - len(segment))]
                if progress is not None:
                    progress.segment(segment.decode("utf-8", "replace"))
                segment = b""
                at_start = True
                start = i + 1
        rest = chunk[start:]
        if rest:
            if at_start:
                out.append(prefix)
            out.append(rest)
            segment += rest[: max(0, MAX_SEGMENT - len(segment))]
            at_start = False
            # A bar update ends with the next update's \r: read it now, not one step late.
            if progress is not None:
                progress.segment(segment.decode("utf-8", "replace"))
        dst.write(b"".join(out))
        dst.flush()
    if not at_start:
        dst.write(b"\n")
        dst.flush()
    src.close()


def watch_vllm(url, progress, interval):
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                ok = r.status == 200
        except Exception:
            ok = False
        with progress.lock:
            progress.vllm_healthy = ok
        time.sleep(interval)


def die_with_parent():
    # Linux prctl(PR_SET_PDEATHSIG, SIGKILL): the role dies with this process (include/uapi/linux/prctl.h).
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Runs one role of the shared training container, prefixing its output; the trainer's also serves liveness and step progress.",
        usage="role_runner.py --role {vllm,trainer} [--metrics-listen HOST:PORT] [--vllm-health-url URL] -- CMD [ARG...]",
    )
    p.add_argument("--role", required=True, choices=ROLES, help="the role's name, the prefix of its lines")
    p.add_argument("--metrics-listen", help="host:port to serve GET /metrics on (the trainer's agentrl_trainer_* series)")
    p.add_argument("--vllm-health-url", help="vLLM's /health, polled for agentrl_trainer_vllm_healthy (needs --metrics-listen)")
    p.add_argument("--health-interval", type=float, default=5.0, help="seconds between /health polls (default 5)")
    if "--" not in argv:
        p.error("the role's command goes after --, e.g. role_runner.py --role trainer -- python3 train.py")
    split = argv.index("--")
    args = p.parse_args(argv[:split])
    args.command = argv[split + 1 :]
    if not args.command:
        p.error("no command after --")
    if args.vllm_health_url is not None and args.metrics_listen is None:
        p.error("--vllm-health-url needs --metrics-listen (the gauge is served there)")
    if args.vllm_health_url is not None and not re.match(r"^https?://", args.vllm_health_url):
        p.error("--vllm-health-url %r must be an http:// URL" % args.vllm_health_url)
    if not 0 < args.health_interval <= 3600:
        p.error("--health-interval must be in (0, 3600] seconds")
    args.address = None
    if args.metrics_listen is not None:
        args.address = metrics_http.host_port(args.metrics_listen)
        if args.address is None:
            p.error("--metrics-listen %r must be host:port, e.g. 0.0.0.0:9401" % args.metrics_listen)
    return args


def main(argv):
    args = parse_args(argv)
    progress = Progress() if args.address is not None else None
    server = None
    if args.address is not None:
        try:
            server = metrics_http.MetricsServer(args.address, progress.render, "agentrl-role-runner")
        except OSError as e:
            log("cannot listen on %s: %s" % (args.metrics_listen, e))
            return 1
    try:
        child = subprocess.Popen(args.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, preexec_fn=die_with_parent)
    except OSError as e:
        log("cannot start %s: %s" % (args.command[0], e))
        return 127

    def forward(signum, _frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    prefix = ("[%s] " % args.role).encode("ascii")
    pumps = [
        threading.Thread(target=pump, args=(child.stdout, sys.stdout.buffer, prefix, progress), daemon=True),
        threading.Thread(target=pump, args=(child.stderr, sys.stderr.buffer, prefix, progress), daemon=True),
    ]
    for t in pumps:
        t.start()
    if server is not None:
        server.serve_in_background()
        if args.vllm_health_url is not None:
            threading.Thread(target=watch_vllm, args=(args.vllm_health_url, progress, args.health_interval), daemon=True).start()
    code = child.wait()
    for t in pumps:
        t.join(5)
    if progress is not None:
        with progress.lock:
            progress.running = False
    if server is not None:
        server.shutdown()
        server.server_close()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
