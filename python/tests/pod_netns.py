"""test_controller.PodNetwork with each sandbox pod in a network namespace of its own, its runtime AND its
key-holding forwarder in it (the template's init container, a native sidecar on Kubernetes), as a pod
has them: the agent's side reaches the model only through the forwarder on the pod's loopback
(127.0.0.1:7100), and the trainer reads the forwarder's trace on the pod's address (a caller the
forwarder does not take for the pod itself, which every pod sharing this machine's loopback would be).

Each pod: a veth pair to this namespace (netns.create, subnet 10.214.<n>.0/30: the pod at .2, this side
at .1), the runtime at the pod's address (the container's command, on the image layout), the forwarder
with the template's command (only the paths and the ingress's address replaced: the ingress is this
machine's nginx, reached from the pod through a relay on this side's address of the pair). The forwarder
runs as the template runs it (its own uid, a read-only root, the image layout's forwarder.py), the runtime as the pod's
uid on a read-only root with the rendered emptyDirs (sandbox_root.rendered); the forwarder takes only a delivered key,
and this network hands it a rollout-key-shaped stand-in its ingress accepts, on its key port (a stand-in for the trainer's delivery: the
per-rollout key path with the real verifier is test_rollout_keys.py's). The namespaces, relays and processes go with the pod.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
from typing import Any

import netns
import sandbox_root
import test_controller
from conftest import PYTHON_DIR, deliver_rollout_key, stop_process, wait_http
from waits import wait_for

SUBNET = "10.214"
#: This process's namespace tags: 50000 + (pid % 200) * 250 + 1..249 (netns.create names them agentrl-<tag>).
TAG_BASE = 50000 + (os.getpid() % 200) * 250


def namespaces() -> list[str]:
    """This process's pod namespaces that exist now."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    ours = {f"agentrl-{TAG_BASE + i}" for i in range(1, 250)}
    return [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0] in ours]


def subnets_in_use() -> set[int]:
    """The <n> of every 10.214.<n>.1 on this machine's interfaces: pod subnets held by any process."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=30).stdout
    return {int(m) for m in re.findall(rf"inet {re.escape(SUBNET)}\.(\d+)\.1/", out)}


class Relay:
    """TCP from (host, an ephemeral port) to 127.0.0.1:target: the pod's way to this machine's loopback ingress."""

    def __init__(self, host: str, target: int) -> None:
        self.target = target
        self.sock = socket.create_server((host, 0))
        self.port = self.sock.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, name=f"relay-{host}", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                a, _ = self.sock.accept()
            except OSError:
                return
            try:
                b = socket.create_connection(("127.0.0.1", self.target), timeout=10)
            except OSError:
                a.close()
                continue
            b.settimeout(None)
            for src, dst in ((a, b), (b, a)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closed.set()
        self.sock.close()


class PodProcesses:
    """A pod's runtime and forwarder as the one process PodNetwork tracks (poll, signals, wait, kill); its
    namespace and relay are removed once both have exited."""

    def __init__(self, runtime: subprocess.Popen, forwarder: subprocess.Popen, relay: Relay, ns: netns.Namespace) -> None:
        self.procs = [runtime, forwarder]
        self.relay = relay
        self.ns = ns
        self._cleaned = False

    @property
    def pid(self) -> int:
        return self.procs[0].pid

    @property
    def returncode(self) -> int | None:
        return self.procs[0].returncode

    def poll(self) -> int | None:
        """The runtime's exit code once it has exited (the pod's container is down; wait() ends the forwarder too)."""
        code = self.procs[0].poll()
        if code is not None and self.procs[1].poll() is not None:
            self._cleanup()
        return code

    def send_signal(self, sig: int) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(sig)

    def wait(self, timeout: float | None = None) -> int | None:
        """The runtime's end (test_controller.stop_container signals its pid 1), then the forwarder's: a
        pod's containers stop together."""
        runtime, forwarder = self.procs
        runtime.wait(timeout)
        if forwarder.poll() is None:
            forwarder.send_signal(signal.SIGTERM)
        forwarder.wait(timeout)
        self._cleanup()
        return self.returncode

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _cleanup(self) -> None:
        if not self._cleaned:
            self._cleaned = True
            self.relay.close()
            self.ns.delete()


class ForwardedPodNetwork(test_controller.PodNetwork):
    """PodNetwork whose pods are namespaces holding the runtime and the forwarder (module docstring).
    `ingress_port`: the loopback port of this machine's ingress; `key`: the key each pod's forwarder is handed (a
    rollout key's shape, which the forwarder's key port requires, listed in that ingress's keys file)."""

    def __init__(self, *args: Any, ingress_port: int, key: str, **kwargs: Any) -> None:
        self.ingress_port = ingress_port
        self.key = key
        self._tags = iter(range(1, 250))
        super().__init__(*args, **kwargs)

    def _start(self, name: str, pod) -> None:
        ns = relay = pod_procs = None
        procs: list[subprocess.Popen] = []
        try:
            (c,) = pod.spec.containers
            (f,) = pod.spec.init_containers
            with self._lock:
                # Not a subnet another process's pods hold (their namespaces are not ours to list, their host-side
                # addresses are): a second route to the same addresses would send this pod's traffic to theirs.
                taken = subnets_in_use()
                tag = next(t for t in self._tags if t not in taken)
            ns = netns.create(TAG_BASE + tag, subnet=f"{SUBNET}.{tag}")
            ip = ns.ns_ip
            relay = Relay(ns.host_ip, self.ingress_port)
            argv = list(f.command)
            argv[argv.index("--upstream") + 1] = f"http://{ns.host_ip}:{relay.port}"
            assert not any(e.value_from is not None for e in f.env or []), "the forwarder takes its key on its key port alone"
            fenv = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
            # The forwarder as the template runs it: /opt/agent-rl/forwarder.py of the image layout, its own uid, a read-only root.
            with open(self.logs / f"{name}.forwarder.log", "wb") as log:
                procs.append(subprocess.Popen(ns.exec_argv(*sandbox_root.command(self.image_root, argv, **sandbox_root.rendered(pod.spec, f))),
                                              env=fenv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
            env = {e.name: e.value for e in c.env or [] if e.value is not None}
            env.update(PATH=test_controller.sandbox_path(), POD_NAME=name)
            with open(self.logs / f"{name}.log", "wb") as log:
                procs.insert(0, subprocess.Popen(ns.exec_argv(*sandbox_root.command(self.image_root, [*c.command, "--host", ip], own_pids=True, **sandbox_root.rendered(pod.spec, c))),
                                                 env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
            pod_procs = PodProcesses(procs[0], procs[1], relay, ns)
            with self._lock:
                self.started.append(pod_procs)
                self.runtimes[name] = (ip, pod_procs)
            runtime = procs[0]
            self.namespaces.add(wait_for(f"pod {name}'s PID namespace", lambda: test_controller.pid_namespace_of_child(runtime), timeout=15, interval=0.05))
            wait_http(f"http://{ip}:{c.ports[0].container_port}/healthz", proc=pod_procs)
            if "--key-port" in argv:
                # The template's forwarder takes only a rollout key (no shared key in its env). This network runs no
                # verifier (conftest.without_rollout_keys), so it hands the forwarder `key` (a rollout-key-shaped
                # stand-in its ingress lists as a plain key) on its key port itself: a STAND-IN for the trainer's delivery (agent_sandbox.py _deliver_rollout_key), which the
                # rendered path tests with the real verifier (test_rollout_keys.py, test_opencode_e2e.py).
                deliver_rollout_key(ip, int(argv[argv.index("--key-port") + 1]), self.key)
            self._publish(name, ip)
        except Exception as e:  # noqa: BLE001 - reported by the tests; not retried
            with self._lock:
                ours = self.runtimes.get(name)
                # The pod was deleted while it started (_sync stops what it had): not an error.
                deleted = pod_procs is not None and (ours is None or ours[1] is not pod_procs)
                if not deleted:
                    self.runtimes.pop(name, None)
                    self._failed.add(name)
            if not deleted:
                if pod_procs is not None:
                    test_controller.stop_container(pod_procs)
                for p in procs:
                    stop_process(p)
                if relay is not None:
                    relay.close()
                if ns is not None:
                    ns.delete()
                if not self._stop.is_set():
                    self.errors.append(f"pod {name}: {type(e).__name__}: {e}")
        finally:
            with self._lock:
                self._starting.discard(name)
