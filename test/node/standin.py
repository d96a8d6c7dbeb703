"""Reachability stand-in (issue #29): one program, two modes, for the node tests (test/node-suites/sandbox-reachability.ts).

  listen TCP_PORTS UDP_PORTS   serve "ok\n" on every listed TCP port (each accepted connection)
                               and answer every datagram on every listed UDP port with "ok\n";
                               ports comma-separated, "-" for none. TCP binds 0.0.0.0; UDP binds
                               each address in STANDIN_UDP_ADDRESSES (comma-separated) when set,
                               else 0.0.0.0: a host with several addresses must answer a datagram
                               from the address it was sent to (a client's connected socket drops
                               a reply from any other).
  probe JSON                   JSON: [[ip, port, "TCP"|"UDP", "ok"|"connect"], ...]; tries each at
                               once (one thread each, 2 s timeout) and prints a JSON list of
                               "open", "refused", "timeout" or "error: ..." in the same order.
                               "ok": "open" only when the listener's "ok" came back (a connection
                               let through to nothing does not count); "connect": a completed TCP
                               handshake is "open" (a real server of another protocol).

It runs as the stand-in pods' program (on the fixture's sandbox-runtime image, which has python3)
and on the "internet" host of the node fixture (test/node/up.sh): the same listener everywhere,
so a refusal is the NetworkPolicy's, never a port without a listener.
"""

import json
import os
import selectors
import socket
import sys
import threading

TIMEOUT = 2.0


def ports(arg):
    return [] if arg == "-" else [int(p) for p in arg.split(",")]


def listen(tcp_ports, udp_ports):
    sel = selectors.DefaultSelector()
    for port in tcp_ports:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        s.listen(64)
        sel.register(s, selectors.EVENT_READ, "tcp")
    udp_addresses = [a for a in os.environ.get("STANDIN_UDP_ADDRESSES", "").split(",") if a] or ["0.0.0.0"]
    for port in udp_ports:
        for address in udp_addresses:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((address, port))
            sel.register(s, selectors.EVENT_READ, "udp")
    print(f"listening tcp={tcp_ports} udp={udp_ports}", flush=True)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            try:
                if key.data == "tcp":
                    conn, _ = s.accept()
                    with conn:
                        conn.sendall(b"ok\n")
                else:
                    _, peer = s.recvfrom(512)
                    s.sendto(b"ok\n", peer)
            except OSError:
                pass


def probe_one(ip, port, proto, mode):
    kind = socket.SOCK_STREAM if proto == "TCP" else socket.SOCK_DGRAM
    s = socket.socket(socket.AF_INET, kind)
    s.settimeout(TIMEOUT)
    try:
        s.connect((ip, port))
        if mode == "connect" and proto == "TCP":
            return "open"
        if proto == "UDP":
            s.send(b"probe\n")
        return "open" if s.recv(16).startswith(b"ok") else "error: no ok"
    except ConnectionRefusedError:
        return "refused"
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return f"error: {e}"
    finally:
        s.close()


def probe(targets):
    results = [None] * len(targets)

    def run(i, t):
        results[i] = probe_one(t[0], int(t[1]), t[2], t[3] if len(t) > 3 else "ok")

    threads = [threading.Thread(target=run, args=(i, t)) for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(results))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "listen":
        listen(ports(sys.argv[2]), ports(sys.argv[3]))
    elif len(sys.argv) == 3 and sys.argv[1] == "probe":
        probe(json.loads(sys.argv[2]))
    else:
        sys.exit("usage: standin.py listen TCP_PORTS UDP_PORTS | probe JSON")
