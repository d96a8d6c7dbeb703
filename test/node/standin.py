"""Reachability stand-in (issue #29): one program, two modes, for the node tests (test/node-suites/sandbox-reachability.ts).

  listen TCP_PORTS UDP_PORTS   serve "ok\n" on every listed TCP port (each accepted connection)
                               and answer every datagram on every listed UDP port with "ok\n";
                               on port 53 (TCP and UDP) a DNS query gets a DNS answer instead
                               (RFC 1035: the query's id and question; for QUERY_NAME's A question one
                               A record, ANSWER_IP, for its other types none, for any other name
                               REFUSED; over TCP with the two-byte length prefix), so a DNS probe measures
                               a resolver's answer, not a port;
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
                               handshake is "open" (a real server of another protocol); "dns":
                               a DNS query (A, QUERY_NAME) over UDP or TCP, "open" only when a
                               DNS answer to it (same id, RCODE 0, an answer record) came back.

It runs as the stand-in pods' program (on the fixture's sandbox-runtime image, which has python3)
and on the "internet" host of the node fixture (test/node/up.sh): the same listener everywhere,
so a refusal is the NetworkPolicy's, never a port without a listener.
"""

import json
import os
import random
import selectors
import socket
import struct
import sys
import threading

TIMEOUT = 2.0
DNS_PORT = 53
QUERY_NAME = "reachability.agentrl.test"
#: The address every stand-in answers with (TEST-NET-1, RFC 5737: documentation, routed nowhere).
ANSWER_IP = "192.0.2.53"


def dns_query(qid, name):
    """A standard query (RD set) for the A record of `name`."""
    qname = b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + qname + struct.pack(">HH", 1, 1)


def dns_answer(query):
    """The answer to a one-question query: its id and question, one A record (ANSWER_IP); None when `query` is not one."""
    if len(query) < 17:
        return None
    qid, flags, qdcount = struct.unpack(">HHH", query[:6])
    if flags & 0x8000 or qdcount != 1:
        return None
    end = 12
    while end < len(query) and query[end] != 0:
        end += 1 + query[end]
    end += 5  # the root label, QTYPE, QCLASS
    if end > len(query):
        return None
    qtype = struct.unpack(">H", query[end - 4 : end - 2])[0]
    labels, i = [], 12
    while query[i] != 0:
        labels.append(query[i + 1 : i + 1 + query[i]].decode("ascii", "replace").lower())
        i += 1 + query[i]
    if ".".join(labels) != QUERY_NAME:
        # REFUSED (RCODE 5): a stand-in labelled as cluster DNS sits behind the kube-dns Service during
        # a case; a pod's real lookup that lands on it must not get a made-up address.
        return struct.pack(">HHHHHH", qid, 0x8185, 1, 0, 0, 0) + query[12:end]
    # The probe's A question gets ANSWER_IP; another type an empty answer (NOERROR, no record).
    record = struct.pack(">HHHIH", 0xC00C, 1, 1, 5, 4) + socket.inet_aton(ANSWER_IP) if qtype == 1 else b""
    return struct.pack(">HHHHHH", qid, 0x8180, 1, 1 if record else 0, 0, 0) + query[12:end] + record


def is_answer_to(reply, qid):
    if len(reply) < 12:
        return False
    rid, flags, _, ancount = struct.unpack(">HHHH", reply[:8])
    return rid == qid and flags & 0x8000 and flags & 0x000F == 0 and ancount >= 1


def recv_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def ports(arg):
    return [] if arg == "-" else [int(p) for p in arg.split(",")]


def listen(tcp_ports, udp_ports):
    sel = selectors.DefaultSelector()
    for port in tcp_ports:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        s.listen(64)
        sel.register(s, selectors.EVENT_READ, ("tcp", port))
    udp_addresses = [a for a in os.environ.get("STANDIN_UDP_ADDRESSES", "").split(",") if a] or ["0.0.0.0"]
    for port in udp_ports:
        for address in udp_addresses:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((address, port))
            sel.register(s, selectors.EVENT_READ, ("udp", port))
    print(f"listening tcp={tcp_ports} udp={udp_ports}", flush=True)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            proto, port = key.data
            try:
                if proto == "tcp" and port == DNS_PORT:
                    conn, _ = s.accept()
                    threading.Thread(target=serve_dns_tcp, args=(conn,), daemon=True).start()
                elif proto == "tcp":
                    conn, _ = s.accept()
                    with conn:
                        conn.sendall(b"ok\n")
                else:
                    data, peer = s.recvfrom(512)
                    answer = dns_answer(data) if port == DNS_PORT else None
                    s.sendto(answer if answer is not None else b"ok\n", peer)
            except OSError:
                pass


def serve_dns_tcp(conn):
    """One length-prefixed DNS query on a TCP connection, answered; anything else gets "ok"."""
    with conn:
        conn.settimeout(TIMEOUT)
        try:
            head = recv_exact(conn, 2)
            answer = dns_answer(recv_exact(conn, struct.unpack(">H", head)[0])) if len(head) == 2 else None
            conn.sendall(struct.pack(">H", len(answer)) + answer if answer is not None else b"ok\n")
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
        if mode == "dns":
            qid = random.randrange(1, 0xFFFF)
            query = dns_query(qid, QUERY_NAME)
            if proto == "UDP":
                s.send(query)
                reply = s.recv(512)
            else:
                s.sendall(struct.pack(">H", len(query)) + query)
                head = recv_exact(s, 2)
                reply = recv_exact(s, struct.unpack(">H", head)[0]) if len(head) == 2 else b""
            return "open" if is_answer_to(reply, qid) else "error: not a DNS answer"
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
