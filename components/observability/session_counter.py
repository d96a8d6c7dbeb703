#!/usr/bin/env python3
"""Session counter of one env replica (components/observability/, README "Observability").

OpenEnv 0.10 serves no /metrics, and open-source nginx has no per-upstream connection count, so
this sidecar counts what a session is on the wire: an OpenEnv session is one WebSocket, so one
ESTABLISHED TCP connection to the replica's port (openenv core/env_server/http_server.py: one
environment per `WS /ws` connection). It runs in the replica's pod, whose network namespace it
shares, and reads the kernel's socket tables /proc/net/tcp and /proc/net/tcp6 on every scrape
(state 01 is ESTABLISHED, include/net/tcp_states.h). A plain HTTP request (a probe, /health)
counts too while its connection is open: a few at most, never held open by the router.

Serves on --listen, GET /metrics only:
  agentrl_env_sessions_in_use{env, replica}    connections established to --port now
  agentrl_env_sessions_capacity{env, replica}  --capacity (the replica's MAX_CONCURRENT_ENVS)
No per-session label: one series per replica.

Bounded: at most --max-connections scrapes at once (more are closed at once), each socket table
read up to MAX_TABLE_LINES lines, a request head read within 5 s.

Usage: session_counter.py --port 8000 --env wordle --replica "$POD_NAME" --capacity 8 --listen 0.0.0.0:9402
Exit codes: 0 on SIGTERM/SIGINT; 1 when --listen cannot be bound; 2 on a bad command line (message on stderr).
"""

import argparse
import os
import re
import signal
import sys
import threading

# The shared /metrics server, mounted beside this script (in the source tree: components/shared).
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, os.pardir, "shared")]
import metrics_http  # noqa: E402

ESTABLISHED = "01"
MAX_TABLE_LINES = 1_000_000
LABEL_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,252}$")


def log(msg):
    sys.stderr.write("session-counter: %s\n" % msg)
    sys.stderr.flush()


def count_established(port, tables):
    """ESTABLISHED connections whose local port is `port`, over the given /proc/net tables."""
    n = 0
    for table in tables:
        with open(table, encoding="ascii") as f:
            next(f, None)  # header line
            for i, line in enumerate(f):
                if i >= MAX_TABLE_LINES:
                    break
                fields = line.split()
                # sl local_address rem_address st ...; addresses are HEXIP:HEXPORT.
                if len(fields) < 4 or fields[3] != ESTABLISHED:
                    continue
                local = fields[1]
                if int(local[local.rindex(":") + 1 :], 16) == port:
                    n += 1
    return n


def render(args, in_use):
    labels = 'env="%s",replica="%s"' % (args.env, args.replica)
    return (
        "# HELP agentrl_env_sessions_in_use Established TCP connections to the env replica's port (one per open session).\n"
        "# TYPE agentrl_env_sessions_in_use gauge\n"
        "agentrl_env_sessions_in_use{%s} %d\n"
        "# HELP agentrl_env_sessions_capacity Sessions the env replica holds at most (MAX_CONCURRENT_ENVS).\n"
        "# TYPE agentrl_env_sessions_capacity gauge\n"
        "agentrl_env_sessions_capacity{%s} %d\n" % (labels, in_use, labels, args.capacity)
    )


def scrape(args):
    """The exposition text now; Unavailable (answered 500) when the socket tables cannot be read."""
    try:
        in_use = count_established(args.port, args.tables)
    except (OSError, ValueError) as e:
        log("cannot read the socket tables: %s" % e)
        raise metrics_http.Unavailable("cannot read the socket tables %s: %s\n" % (", ".join(args.tables), e))
    return render(args, in_use)


def parse_args(argv):
    p = argparse.ArgumentParser(description="Serves an env replica's sessions in use (established connections to its port) and its capacity.")
    p.add_argument("--port", type=int, required=True, help="the replica's port (8000 in the env images)")
    p.add_argument("--env", required=True, help="the env's name (label env)")
    p.add_argument("--replica", required=True, help="the replica's name, e.g. its pod name (label replica)")
    p.add_argument("--capacity", type=int, required=True, help="sessions the replica holds at most (MAX_CONCURRENT_ENVS)")
    p.add_argument("--listen", required=True, help="host:port to serve /metrics on, e.g. 0.0.0.0:9402")
    p.add_argument("--proc-net", default="/proc/net", help="directory holding tcp and tcp6 (default /proc/net)")
    p.add_argument("--max-connections", type=int, default=8, help="scrapes served at once (default 8)")
    args = p.parse_args(argv)
    if not 1 <= args.port <= 65535:
        p.error("--port %d must be 1..65535" % args.port)
    if args.capacity < 1:
        p.error("--capacity %d must be at least 1" % args.capacity)
    if args.max_connections < 1:
        p.error("--max-connections must be at least 1")
    for name in ("env", "replica"):
        if not LABEL_VALUE.match(getattr(args, name)):
            p.error("--%s %r must be 1-253 characters of [A-Za-z0-9_.:-], starting with a letter or digit" % (name, getattr(args, name)))
    args.address = metrics_http.host_port(args.listen)
    if args.address is None:
        p.error("--listen %r must be host:port, e.g. 0.0.0.0:9402" % args.listen)
    args.tables = [args.proc_net.rstrip("/") + "/tcp", args.proc_net.rstrip("/") + "/tcp6"]
    return args


def main(argv):
    args = parse_args(argv)
    try:
        server = metrics_http.MetricsServer(args.address, lambda: scrape(args), "agentrl-session-counter", max_connections=args.max_connections)
    except OSError as e:
        log("cannot listen on %s: %s" % (args.listen, e))
        return 1

    def stop(_signum, _frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log("serving /metrics on %s for env %s replica %s (port %d, capacity %d)" % (args.listen, args.env, args.replica, args.port, args.capacity))
    server.serve_forever(poll_interval=0.5)
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
