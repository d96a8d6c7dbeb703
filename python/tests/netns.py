"""A network namespace joined to this one by a veth pair, for a client whose packets the test can
drop (`iptables -j DROP` inside the namespace): the client neither closes nor dies, it just goes
silent, as a trainer pod does when its node vanishes. Needs root (ip, iptables).

Run as a script inside the namespace it is the client that vanishes:
    ip netns exec <ns> python netns.py hold <env url>
opens one OpenEnv session (openenv's GenericEnvClient, client pings off as the seed script sets
them), prints `OPEN`, then holds it until its stdin closes (never closing the socket itself).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from waits import scaled


def missing_prerequisite() -> str | None:
    """Why a namespace cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root to make a network namespace (ip netns add) and drop its packets (iptables); CI runs the tests as root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} not found (apt-get install -y iproute2 iptables)"
    return None


def _run(*argv: str) -> None:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(30))
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")


@dataclass
class Namespace:
    name: str
    host_if: str
    ns_if: str
    host_ip: str
    ns_ip: str

    def exec_argv(self, *argv: str) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]

    def drop_all(self) -> None:
        """Drops every packet in and out of the namespace: its sockets go silent, nothing closes."""
        _run(*self.exec_argv("iptables", "-A", "OUTPUT", "-j", "DROP"))
        _run(*self.exec_argv("iptables", "-A", "INPUT", "-j", "DROP"))

    def delete(self) -> None:
        # Deleting the namespace deletes its veth end, and with it the host's.
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=scaled(30))
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True, timeout=scaled(30))


def create(tag: int, subnet: str | None = None) -> Namespace:
    """A namespace with a /30 to this one: host side .1, namespace side .2 (tag picks the subnet unless
    `subnet`, three octets, is given; tag names the namespace and its veth ends)."""
    subnet = subnet or f"10.213.{tag % 250}"
    ns = Namespace(name=f"agentrl-{tag}", host_if=f"vh{tag % 100000}", ns_if=f"vc{tag % 100000}", host_ip=f"{subnet}.1", ns_ip=f"{subnet}.2")
    try:
        _run("ip", "netns", "add", ns.name)
        _run("ip", "link", "add", ns.host_if, "type", "veth", "peer", "name", ns.ns_if)
        _run("ip", "link", "set", ns.ns_if, "netns", ns.name)
        _run("ip", "addr", "add", f"{ns.host_ip}/30", "dev", ns.host_if)
        _run("ip", "link", "set", ns.host_if, "up")
        _run("ip", "-n", ns.name, "addr", "add", f"{ns.ns_ip}/30", "dev", ns.ns_if)
        _run("ip", "-n", ns.name, "link", "set", ns.ns_if, "up")
        _run("ip", "-n", ns.name, "link", "set", "lo", "up")
    except BaseException:
        ns.delete()
        raise
    return ns


def _hold(url: str) -> int:
    from openenv.core.generic_client import GenericEnvClient

    client = GenericEnvClient(base_url=url, connect_timeout_s=10.0, message_timeout_s=10.0, websocket_ping_interval_s=None).sync()
    client.reset(target=0)
    print("OPEN", flush=True)
    sys.stdin.read()  # until the test closes our stdin; the socket is never closed by us
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "hold":
        sys.exit(_hold(sys.argv[2]))
    sys.exit("usage: netns.py hold <env url>")
