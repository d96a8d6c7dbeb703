"""Per-rollout keys (docs/design/rollout-keys.md): the verifier's table and its two listeners, the
forwarder taking its rollout's key once at claim time, and the backend minting it at claim and
revoking it when the claim ends. Everything on loopback: the verifier and the forwarder run as the plan's pods run
them (sandbox_root: the rendered command from the image layout, the container's uid on a read-only root, its Secret
and emptyDir as the kubelet mounts them), the ingress is a recording stand-in (the real nginx path is
test/ingress/rollout-keys.test.ts, and rendered_path below), the agent-sandbox client the recording stand-in of
test_backend.py."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from agent_rl_sandbox.agent_sandbox import AgentSandboxBackend
from agent_rl_sandbox.rollout_keys import KEY_RE, KeyTable, MintRefused, RolloutKeyError, RolloutKeysClient
from agent_rl_sandbox.settings import AgentSandboxSettings, SettingsError

import sandbox_root
from conftest import PYTHON_DIR, free_port, stop_process
from test_backend import fake_client, rec  # noqa: F401 (fixture)
from test_forwarder import SYSTEM_PATH
from test_plan_contract import fake_stock_home, plan_facts
from waits import scaled, wait_for

ADMIN_KEY = "admin-key-for-the-test-0123456789"

needs_sandbox_root = pytest.mark.skipif(sandbox_root.available() is not None, reason=str(sandbox_root.available()))


def call(port: int, method: str, path: str, headers: dict | None = None, body: bytes | None = None) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=scaled(10))
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def verify(port: int, key: str, uri: str = "/v1/chat/completions", method: str = "POST") -> tuple[int, dict]:
    status, headers, _ = call(port, "GET", "/verify", {"Authorization": f"Bearer {key}", "X-Original-URI": uri, "X-Original-Method": method})
    return status, headers


def wait_port(port: int, proc: subprocess.Popen) -> None:
    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    wait_for(f"127.0.0.1:{port} accepts connections", up, timeout=15)


def sandbox_image(tmp_path: Path) -> Path:
    """The image layout the verifier and the forwarder run from (install-layout.sh and the Dockerfile's verifier on a
    stand-in stock HOME: test_plan_contract's)."""
    image_root = tmp_path / "image"
    if not image_root.exists():
        sandbox_root.install_layout(fake_stock_home(tmp_path), image_root)
    return image_root


def rendered_verifier(pod: dict, image_root: Path, tmp: Path, vport: int, aport: int, *, admin_key: str = ADMIN_KEY,
                      volumes: Path | None = None, drop: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> list[str]:
    """The argv that runs the verifier Deployment's container as its pod spec says (plan_facts.ts verifierPod,
    rollout_path_up.ts verifierPodSpec): the plan's command from the image layout, its uid on a read-only root
    (sandbox_root.rendered), its Secret holding `admin_key` as the kubelet mounts it (root, group fsGroup, the volume's
    defaultMode, read-only), its state emptyDir (with `volumes`, a host dir that outlives the container, as the pod's
    emptyDir outlives a container restart). Only what loopback changes: 127.0.0.1 for 0.0.0.0, the ports `vport` and
    `aport`, and the volumes' paths under sandbox_root.EMPTYDIR_ROOT. `drop` leaves a flag and its value out."""
    (c,) = pod["containers"]
    by_name = {v["name"]: v for v in pod["volumes"]}
    mounts, secrets = [m["mountPath"] for m in c["volumeMounts"]], []
    for m in c["volumeMounts"]:
        secret = by_name[m["name"]].get("secret")
        if secret is not None:
            folder = Path(tempfile.mkdtemp(prefix=f"secret-{m['name']}-", dir=tmp))  # one per container: its own key
            for item in secret["items"]:
                (folder / item["path"]).write_text(admin_key)
            secrets.append((m["mountPath"], folder, secret["defaultMode"]))
    cmd = list(c["command"])
    for name in drop:
        del cmd[cmd.index(name) : cmd.index(name) + 2]
    cmd = localized(cmd, {"0.0.0.0": "127.0.0.1", cmd[cmd.index("--verify-port") + 1]: str(vport), cmd[cmd.index("--admin-port") + 1]: str(aport)})
    cmd = [sandbox_root.EMPTYDIR_ROOT + a if any(a.startswith(m + "/") for m in mounts) else a for a in cmd]
    return sandbox_root.command(image_root, [*cmd, *extra], **sandbox_root.rendered(pod, c), volumes=volumes, secrets=secrets)


@pytest.fixture
def verifier(tmp_path):
    """The verifier as its Deployment runs it (rendered_verifier), on loopback."""
    if (why := sandbox_root.available()) is not None:
        pytest.skip(f"the verifier runs as its pod runs it, in a sandbox root: {why}")
    vport, aport = free_port(), free_port()
    argv = rendered_verifier(plan_facts()["verifierPod"], sandbox_image(tmp_path), tmp_path, vport, aport)
    proc = subprocess.Popen(argv, env={"PATH": SYSTEM_PATH}, stderr=subprocess.PIPE)
    wait_port(vport, proc)
    wait_port(aport, proc)
    yield {"verify": vport, "admin": aport, "proc": proc, "client": RolloutKeysClient(f"http://127.0.0.1:{aport}", ADMIN_KEY)}
    stop_process(proc)


@needs_sandbox_root
def test_the_verifier_reads_its_admin_key_from_a_file_and_names_the_file_when_it_cannot(tmp_path):
    """The rendered Deployment mounts the admin key as a file (no env var: checkov CKV_K8S_35): its Secret, root's, read
    by the verifier's uid through the pod's fsGroup."""
    pod, image_root = plan_facts()["verifierPod"], sandbox_image(tmp_path)
    (c,) = pod["containers"]
    key_file = sandbox_root.EMPTYDIR_ROOT + c["command"][c["command"].index("--admin-key-file") + 1]
    vport, aport = free_port(), free_port()
    env = {"PATH": SYSTEM_PATH}
    # A Secret written by hand often ends in a newline.
    proc = subprocess.Popen(rendered_verifier(pod, image_root, tmp_path, vport, aport, admin_key=ADMIN_KEY + "\n"), env=env, stderr=subprocess.PIPE)
    try:
        wait_port(aport, proc)
        key = RolloutKeysClient(f"http://127.0.0.1:{aport}", ADMIN_KEY).mint("from-file", 60)
        assert KEY_RE.match(key)
        with pytest.raises(RolloutKeyError):
            RolloutKeysClient(f"http://127.0.0.1:{aport}", ADMIN_KEY + "x").mint("other", 60)
    finally:
        stop_process(proc)
    missing = key_file + ".missing"
    for argv, said in [
        (rendered_verifier(pod, image_root, tmp_path, vport, aport, drop=("--admin-key-file",), extra=("--admin-key-file", missing)),
         f"the file {missing} (No such file or directory)"),
        (rendered_verifier(pod, image_root, tmp_path, vport, aport, admin_key="too-short"), f"the file {key_file}"),
        (rendered_verifier(pod, image_root, tmp_path, vport, aport, extra=("--admin-key-env", "X")), "not allowed with argument"),
    ]:
        done = subprocess.run(argv, env={**env, "X": ADMIN_KEY}, capture_output=True, text=True, timeout=scaled(30))
        assert done.returncode == 2 and said in done.stderr, done.stderr


def test_a_verifier_restart_keeps_the_live_rollouts_with_its_state_file_and_ends_them_without(tmp_path):
    """Issue 56 item 4: a verifier restart ended every live rollout (401: its table was memory only, and a forwarder
    takes its key once, so no re-mint can reach it). With --state-file (the rendered emptyDir) the process killed with
    SIGKILL comes back with the same table: a live rollout's key still verifies, a revoked one stays revoked, an expired
    one is gone, and the file holds digests, never a key. The control, the same restart without the file, answers 401.
    The state emptyDir is a host dir here (sandbox_root's `volumes`): it outlives the container, as the pod's does."""
    if (why := sandbox_root.available()) is not None:
        pytest.skip(f"the verifier runs as its pod runs it, in a sandbox root: {why}")
    pod, image_root = plan_facts()["verifierPod"], sandbox_image(tmp_path)
    (c,) = pod["containers"]
    volumes = tmp_path / "pod-volumes"
    state = Path(str(volumes) + c["command"][c["command"].index("--state-file") + 1])

    def start(kept: bool) -> tuple[subprocess.Popen, int, RolloutKeysClient]:
        vport, aport = free_port(), free_port()
        argv = rendered_verifier(pod, image_root, tmp_path, vport, aport, volumes=volumes, drop=() if kept else ("--state-file",))
        proc = subprocess.Popen(argv, env={"PATH": SYSTEM_PATH}, stderr=subprocess.PIPE)
        wait_port(vport, proc)
        wait_port(aport, proc)
        return proc, vport, RolloutKeysClient(f"http://127.0.0.1:{aport}", ADMIN_KEY)

    def crash(proc: subprocess.Popen) -> None:
        proc.kill()  # as the OOM killer or a failed liveness probe ends it: no clean-up runs
        proc.wait(scaled(10))
        if proc.stderr is not None:
            proc.stderr.close()

    for kept in (True, False):
        proc, vport, client = start(kept)
        try:
            live, revoked, short = client.mint("live-1", 600), client.mint("revoked-1", 600), client.mint("short-1", 1)
            client.revoke("revoked-1")
            assert verify(vport, live)[0] == 204 and verify(vport, revoked)[0] == 401
        finally:
            crash(proc)
        if kept:
            text = state.read_text()
            assert all(k not in text and k[4:] not in text for k in (live, revoked, short)), "digests only, never a key"
            assert oct(state.stat().st_mode & 0o777) == "0o600" and state.stat().st_uid == c["securityContext"]["runAsUser"]
            wait_for("the 1 s key expires", lambda: time.time() > json.loads(text)["keys"][-1]["expires"], 5)
        proc, vport, client = start(kept)
        try:
            status, headers = verify(vport, live)
            if kept:
                assert (status, headers.get("X-Rollout-Id")) == (204, "live-1"), "the live rollout survives the restart"
                assert verify(vport, revoked)[0] == 401 and verify(vport, short)[0] == 401, "revoked and expired stay refused"
                assert call(vport, "GET", "/verify", {"Authorization": f"Bearer {live}", "X-Original-URI": "/pause", "X-Original-Method": "POST"})[0] == 403
                client.revoke("live-1")
                assert verify(vport, live)[0] == 401, "and can still be revoked"
            else:
                assert status == 401, "control: without the state file a restart ends every live rollout"
        finally:
            stop_process(proc)
        state.unlink(missing_ok=True)
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1, "keys": [{"digest": "zz", "rollout": "x", "expires": 1e12}, {"digest": "%s", "rollout": "a b", "expires": 1e12}]}' % ("0" * 64))
    assert KeyTable(state_file=str(bad)).live() == 0, "malformed rows are left out"
    bad.write_text("not json")
    assert KeyTable(state_file=str(bad)).live() == 0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_table_mints_verifies_revokes_and_expires():
    clock = Clock()
    t = KeyTable(clock=clock)
    a = t.mint("r-a", 60)
    assert KEY_RE.match(a) and t.rollout_of(a) == "r-a"
    a2 = t.mint("r-a", 60)
    assert t.rollout_of(a) is None and t.rollout_of(a2) == "r-a", "minting again for a rollout revokes its earlier key"
    assert t.revoke("r-a") and not t.revoke("r-a")
    assert t.rollout_of(a2) is None
    b = t.mint("r-b", 5)
    clock.now += 4.9
    assert t.rollout_of(b) == "r-b"
    clock.now += 0.1
    assert t.rollout_of(b) is None and t.live() == 0, "expired at its ttl, and dropped"
    assert t.rollout_of("rk1." + "A" * 43) is None
    assert t.rollout_of("") is None and t.rollout_of("Bearer x") is None


def test_the_table_refuses_bad_ids_ttls_and_a_full_table_with_the_reason():
    t = KeyTable(max_live=2, clock=Clock())
    for rollout, ttl, message in [
        ("", 60, "rollout: must match"),
        ("a/b", 60, "rollout: must match"),
        ("x" * 129, 60, "rollout: must match"),
        ("ok", 0, "ttl_seconds: must be an integer in 1..86400"),
        ("ok", 86401, "ttl_seconds"),
        ("ok", True, "ttl_seconds"),
        ("ok", "60", "ttl_seconds"),
    ]:
        with pytest.raises(MintRefused, match=message):
            t.mint(rollout, ttl)
    t.mint("one", 60)
    t.mint("two", 60)
    with pytest.raises(MintRefused, match="2 rollout keys are live") as e:
        t.mint("three", 60)
    assert e.value.status == 429
    t.revoke("one")
    t.mint("three", 60)


def test_the_verifier_answers_per_key_and_route_and_its_admin_api_needs_the_admin_key(verifier):
    vport, aport, client = verifier["verify"], verifier["admin"], verifier["client"]
    assert call(aport, "POST", "/rollouts", {"Content-Type": "application/json"}, b'{"rollout":"x"}')[0] == 401
    assert call(aport, "POST", "/rollouts", {"Authorization": "Bearer wrong-admin-key-000000"}, b'{"rollout":"x"}')[0] == 401
    assert call(vport, "POST", "/rollouts", {"Authorization": f"Bearer {ADMIN_KEY}"}, b'{"rollout":"x"}')[0] == 501, "no admin API on the verify port"
    status, _, body = call(aport, "POST", "/rollouts", {"Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "application/json"}, b'{"rollout":"a b"}')
    assert status == 400 and b"rollout: must match" in body
    key = client.mint("rollout-1", 600)
    assert verify(vport, key)[0] == 204 and verify(vport, key)[1]["X-Rollout-Id"] == "rollout-1"
    assert verify(vport, key, "/v1/models", "GET")[0] == 204
    for uri, method in [("/pause", "POST"), ("/metrics", "GET"), ("/v1/chat/completions", "GET"), ("/update_weights", "POST")]:
        assert verify(vport, key, uri, method)[0] == 403, (uri, method)
    status, _, body = call(aport, "GET", "/rollouts", {"Authorization": f"Bearer {ADMIN_KEY}"})
    assert status == 200 and json.loads(body) == {"live": 1} and key.encode() not in body
    client.revoke("rollout-1")
    client.revoke("rollout-1")  # idempotent
    assert verify(vport, key)[0] == 401
    out = verifier["proc"]
    stop_process(out)
    log = out.stderr.read().decode()
    assert "rollout-1" in log and key[4:] not in log and ADMIN_KEY not in log, "the log names rollouts, never a key"


class RecordingIngress:
    """The ingress stand-in: records the Authorization of each call and answers 200."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        seen = self.seen

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a) -> None:
                pass

            def _ok(self) -> None:
                seen.append(self.headers.get("Authorization", ""))
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = _ok

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def ingress():
    ing = RecordingIngress()
    yield ing
    ing.stop()


def start_forwarder(upstream_port: int, tmp_path: Path) -> tuple[subprocess.Popen, int, int]:
    """The sandbox template's forwarder (plan_facts.ts) as the template runs it (start_rendered_forwarder), in front of
    the recording ingress on loopback: (process, model port, key port)."""
    facts = plan_facts()
    spec = facts["template"]["podTemplate"]["spec"]
    (f,) = spec["initContainers"]
    rendered = {"sandboxPodSpec": spec, "forwarderCommand": f["command"]}
    return start_rendered_forwarder(rendered, f"http://127.0.0.1:{upstream_port}", sandbox_image(tmp_path))


@needs_sandbox_root
def test_the_forwarder_takes_its_rollouts_key_once_and_then_closes_the_port(ingress, tmp_path):
    proc, port, key_port = start_forwarder(ingress.port, tmp_path)
    try:
        status, _, body = call(port, "GET", "/v1/models")
        assert status == 503 and b"no key yet" in body and ingress.seen == [], "nothing goes upstream without a key"
        assert b"no shared key falls back" in body, body
        assert call(key_port, "GET", "/rollout-key")[0] == 404
        assert call(key_port, "PUT", "/rollout-key", {}, b"not-a-rollout-key-0123456789")[0] == 400
        assert call(key_port, "PUT", "/other", {}, b"x")[0] == 404
        key = "rk1." + "k" * 43
        assert call(key_port, "PUT", "/rollout-key", {}, key.encode())[0] == 204
        # The port closes behind the delivery: a second key cannot replace it.
        def closed() -> bool:
            try:
                return call(key_port, "PUT", "/rollout-key", {}, ("rk1." + "z" * 43).encode())[0] == 409
            except OSError:
                return True

        wait_for("the delivery port refuses a second key", closed, timeout=10)
        assert call(port, "GET", "/v1/models", {"Authorization": "Bearer intercepted"})[0] == 200
        assert ingress.seen == [f"Bearer {key}"]
    finally:
        stop_process(proc)


def test_rollout_keys_need_their_port_and_admin_key():
    base = dict(namespace="ns", warm_pool="p", run_label="agentrl.dev/run", run_id="r1", max_lifetime_seconds=3600)
    with pytest.raises(SettingsError) as e:
        AgentSandboxSettings(**base, rollout_keys_url="http://127.0.0.1:7201")
    assert [p.split(":")[0] for p in e.value.problems] == ["SANDBOX_FORWARDER_KEY_PORT", "SANDBOX_ROLLOUT_ADMIN_KEY"]
    s = AgentSandboxSettings(**base, rollout_keys_url="http://127.0.0.1:7201", forwarder_key_port=7101, rollout_admin_key=ADMIN_KEY)
    assert ADMIN_KEY not in repr(s)


def test_the_backend_mints_a_key_per_claim_delivers_it_to_the_forwarder_and_revokes_it_when_the_claim_ends(rec, runtime, verifier, ingress, tmp_path):
    forwarders = [start_forwarder(ingress.port, tmp_path) for _ in range(2)]
    key_ports = [key_port for _proc, _port, key_port in forwarders]
    try:
        handles = []
        for p in key_ports:
            s = AgentSandboxSettings(
                namespace="arl-dev-sandboxes", warm_pool="sandbox-pool-r1", run_label="agentrl.dev/run", run_id="r1",
                max_lifetime_seconds=3600, port=runtime.port,
                rollout_keys_url=f"http://127.0.0.1:{verifier['admin']}", forwarder_key_port=p, rollout_admin_key=ADMIN_KEY,
            )
            handles.append(AgentSandboxBackend(s, client_factory=fake_client, handle_sigterm=False).create(timeout_s=600))
        for _proc, port, _key_port in forwarders:
            assert call(port, "POST", "/v1/chat/completions", {"Content-Type": "application/json"}, b"{}")[0] == 200
        keys = [a.removeprefix("Bearer ") for a in ingress.seen]
        assert len(set(keys)) == 2 and all(KEY_RE.match(k) for k in keys), "one key per claim"
        assert [verify(verifier["verify"], k)[1].get("X-Rollout-Id") for k in keys] == [h.sandbox_id for h in handles]
        handles[0].kill()
        assert verify(verifier["verify"], keys[0])[0] == 401, "the ended claim's key is refused"
        assert verify(verifier["verify"], keys[1])[0] == 204, "the other claim's key still works"
        handles[1].kill()
        assert verify(verifier["verify"], keys[1])[0] == 401
        assert [n for n, _ns, _t in rec.deleted] == [h.sandbox_id for h in handles]
    finally:
        for proc, _port, _key_port in forwarders:
            stop_process(proc)


# --- the rendered path: the plan's commands and env, the real nginx -------------------------------------------------

#: The stack's ingress.rateLimitPerSecond / rateLimitBurst for this run: small, so a bounded loop drives one
#: rollout past it (the rendered limit_req, not a test setting of nginx).
RATE_PER_SECOND, RATE_BURST = 1, 3


class PodAddressRelay:
    """A stand-in for a pod's own IP on loopback: relays each connection to `target` from the source address
    `source` (lo holds all of 127.0.0.0/8), so nginx's per-source bucket sees one address per simulated pod, as
    each sandbox pod has its own IP in a cluster. Connections end with the relay (daemon threads)."""

    def __init__(self, target: tuple[str, int], source: str) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target, self.source = target, source
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=scaled(30), source_address=(self.source, 0))
            except OSError:
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def stop(self) -> None:
        self.listener.close()


def localized(argv: list[str], subst: dict[str, str]) -> list[str]:
    """A rendered command with only what loopback cannot have replaced (addresses, ports, the file's path)."""
    return [subst.get(a, a) for a in argv]


@needs_sandbox_root
def test_a_forwarder_taking_rollout_keys_refuses_a_shared_key_in_its_env(tmp_path):
    """No fallback: with --key-port, a pool key in the env is refused at start, naming the variable and the fix. The
    template's forwarder as the template runs it, with the pool key put into its env (which the template never does)."""
    spec = plan_facts()["template"]["podTemplate"]["spec"]
    (f,) = spec["initContainers"]
    cmd = f["command"]
    subst = {"0.0.0.0": "127.0.0.1", cmd[cmd.index("--port") + 1]: str(free_port()), cmd[cmd.index("--trace-port") + 1]: "0",
             cmd[cmd.index("--key-port") + 1]: str(free_port()), cmd[cmd.index("--upstream") + 1]: "http://127.0.0.1:9"}
    env = {"PATH": SYSTEM_PATH, "AGENT_RL_UPSTREAM_KEY": "pool-key-shared-by-every-sandbox"}
    done = subprocess.run(
        sandbox_root.command(sandbox_image(tmp_path), localized(cmd, subst), **sandbox_root.rendered(spec, f)),
        env=env, capture_output=True, text=True, timeout=scaled(30),
    )
    assert done.returncode == 2, done.stderr
    assert "$AGENT_RL_UPSTREAM_KEY holds a key too: unset it" in done.stderr
    assert "pool-key-shared" not in done.stderr


@contextlib.contextmanager
def rendered_path_up(tmp_path, upstream_url: str, rate_per_second: int, rate_burst: int):
    """The opencode black-box stack on Kubernetes as rendered: the verifier (the plan's command and admin-key env) and
    nginx (the plan's settings with this ingress.rateLimitPerSecond / rateLimitBurst, python/tests/rollout_path_up.ts)
    in front of `upstream_url`, and the plan's trainer env and forwarder command for the test to run."""
    vport, aport = free_port(), free_port()
    log = tmp_path / "rollout_path_up.log"
    up = subprocess.Popen(
        ["node", "--import", "tsx", "python/tests/rollout_path_up.ts",
         json.dumps({"upstream": upstream_url, "verifyPort": vport, "rateLimitPerSecond": rate_per_second, "rateLimitBurst": rate_burst})],
        cwd=PYTHON_DIR.parent, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log, "wb"), text=True,
    )
    procs: list[subprocess.Popen] = []
    try:
        line = ""
        # The plan prints its own notes first: read up to the READY line (bounded by the process's end).
        while not line.startswith("READY "):
            line = up.stdout.readline()
            if not line and up.poll() is not None:
                pytest.fail(f"rollout_path_up exited with {up.returncode}:\n{log.read_text()[-4000:]}")
        facts = json.loads(line[len("READY "):])
        pod = facts["verifierPodSpec"]
        (container,) = pod["containers"]
        assert container["command"] == facts["verifierCommand"] and facts["verifierAdminKeyFile"] in facts["verifierCommand"]
        # The verifier as its Deployment runs it: its uid on a read-only root, the admin key from its Secret's file.
        verifier_proc = subprocess.Popen(rendered_verifier(pod, sandbox_image(tmp_path), tmp_path, vport, aport), env={"PATH": SYSTEM_PATH}, stderr=subprocess.PIPE)
        procs.append(verifier_proc)
        wait_port(vport, verifier_proc)
        wait_port(aport, verifier_proc)
        yield dict(facts=facts, verify=vport, admin=aport, procs=procs)
    finally:
        for p in procs:
            stop_process(p)
        up.stdin.close()
        try:
            up.wait(scaled(30))
        except subprocess.TimeoutExpired:
            stop_process(up)


def rendered_trainer_env(r: dict, key_port: int, runtime_port: int) -> dict[str, str]:
    """The plan's trainer env with only what loopback changes: the verifier's admin port, this pod's key port, the
    runtime's port, no trace port (the trusted trace is test_trusted_trace.py's); the admin key as its Secret gives it."""
    return {
        **r["facts"]["trainerEnv"],
        "SANDBOX_ROLLOUT_KEYS_URL": f"http://127.0.0.1:{r['admin']}",
        "SANDBOX_FORWARDER_KEY_PORT": str(key_port),
        "SANDBOX_PORT": str(runtime_port),
        "SANDBOX_TRACE_PORT": "0",
        "SANDBOX_ROLLOUT_ADMIN_KEY": ADMIN_KEY,
    }


@pytest.fixture
def rendered_path(tmp_path):
    upstream = RecordingIngress()
    try:
        with rendered_path_up(tmp_path, f"http://127.0.0.1:{upstream.port}", RATE_PER_SECOND, RATE_BURST) as r:
            yield {**r, "upstream": upstream}
    finally:
        upstream.stop()


def start_rendered_forwarder(facts: dict, ingress_url: str, image_root: Path) -> tuple[subprocess.Popen, int, int]:
    """The sandbox template's forwarder command on loopback (its ports free ones, the ingress the local nginx), as
    the template runs it: the image layout's forwarder.py (`image_root`), its own uid, a read-only root."""
    spec = facts["sandboxPodSpec"]
    (container,) = spec["initContainers"]
    cmd = container["command"]
    assert cmd == facts["forwarderCommand"]
    port, key_port = free_port(), free_port()
    subst = {
        "0.0.0.0": "127.0.0.1",
        cmd[cmd.index("--port") + 1]: str(port),
        cmd[cmd.index("--trace-port") + 1]: "0",
        cmd[cmd.index("--key-port") + 1]: str(key_port),
        cmd[cmd.index("--upstream") + 1]: ingress_url,
    }
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    proc = subprocess.Popen(sandbox_root.command(image_root, localized(cmd, subst), **sandbox_root.rendered(spec, container)), env=env, stderr=subprocess.PIPE)
    wait_port(port, proc)
    wait_port(key_port, proc)
    return proc, port, key_port


def test_through_the_rendered_path_an_ended_rollouts_key_is_refused_and_one_rollout_at_its_limit_leaves_another_unthrottled(rec, runtime, rendered_path, tmp_path):
    r = rendered_path
    facts = r["facts"]
    env, secret_env = facts["trainerEnv"], facts["trainerSecretEnv"]
    # What the plan gives the trainer: the verifier's admin URL, the forwarders' key port, the admin key as a secret.
    assert env["SANDBOX_ROLLOUT_KEYS_URL"].endswith(":7201") and env["SANDBOX_FORWARDER_KEY_PORT"] == "7102"
    assert secret_env.get("SANDBOX_ROLLOUT_ADMIN_KEY") == "rolloutAdminKey" and "SANDBOX_ROLLOUT_ADMIN_KEY" not in env
    cmd = facts["forwarderCommand"]
    assert cmd[cmd.index("--key-port") + 1] == env["SANDBOX_FORWARDER_KEY_PORT"] and cmd[cmd.index("--key-host") + 1] == "0.0.0.0"
    assert "--key-env" not in cmd, "the forwarder reads no shared key from its env: its rollout's key is the only one"

    # Each sandbox pod reaches the ingress from an address of its own (nginx limits rollout keys per source too).
    ingress = urlsplit(facts["url"])
    relays = [PodAddressRelay((ingress.hostname, ingress.port), f"127.0.0.{n}") for n in (21, 22)]
    image_root = sandbox_image(tmp_path)
    forwarders = [start_rendered_forwarder(facts, f"http://127.0.0.1:{relay.port}", image_root) for relay in relays]
    r["procs"].extend(p for p, _port, _kp in forwarders)
    handles = []
    for _proc, _port, key_port in forwarders:
        trainer_env = rendered_trainer_env(r, key_port, runtime.port)
        backend = AgentSandboxBackend(AgentSandboxSettings.from_env(trainer_env), client_factory=fake_client, handle_sigterm=False)
        handles.append(backend.create(timeout_s=600))
    (_pa, noisy, _ka), (_pb, quiet, _kb) = forwarders

    def chat(port: int) -> int:
        return call(port, "POST", "/v1/chat/completions", {"Content-Type": "application/json"}, b'{"model":"m","messages":[]}')[0]

    assert chat(noisy) == 200 and chat(quiet) == 200, "each claim's forwarder calls the ingress with its rollout's key"
    assert r["upstream"].seen[-2:] == ["", ""], "nginx strips the key: it never reaches vLLM"

    # One sandbox drives its rollout past the rendered limit (1 r/s, burst 3): a bounded burst of 12 calls.
    time.sleep(RATE_BURST / RATE_PER_SECOND + 0.5)  # both buckets refilled
    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(lambda _i: chat(noisy), range(12)))
    assert statuses.count(429) >= 6, statuses
    # ... while the other sandbox's normal calls (within its own burst) all pass.
    assert [chat(quiet) for _ in range(RATE_BURST)] == [200] * RATE_BURST

    # The noisy rollout ends: its key is refused at the ingress from the next call on, the other still works.
    handles[0].kill()
    time.sleep(RATE_BURST / RATE_PER_SECOND + 0.5)
    before = len(r["upstream"].seen)
    assert chat(noisy) == 401, "the ended rollout's key is refused by the ingress"
    assert len(r["upstream"].seen) == before, "nothing reached vLLM with it"
    assert chat(quiet) == 200
    handles[1].kill()
    assert chat(quiet) == 401
    assert [n for n, _ns, _t in rec.deleted] == [h.sandbox_id for h in handles]
    for relay in relays:
        relay.stop()
