"""OpenEnv's ``SandboxBackend`` on the agent-sandbox warm pool the stack deploys.

``create()`` claims a warm sandbox with the official client (k8s-agent-sandbox 1.0.8:
``SandboxClient.create_sandbox``), with the run label the admission policy requires and a
lifetime a little under the maximum it admits, waits for the claim to be Ready, and returns a
``RuntimeHandle`` on the pod's runtime (``http://<pod IP>:8888``). ``kill()`` on the handle
deletes the claim (the controller then deletes the Sandbox and its pod).

Threads and processes: TRL's async GRPO harness creates sessions from ``max_inflight_tasks``
threads and pickles the factory (with this backend) into a spawned child. The official client
is not thread-safe (its README), so each thread gets its own, made on first use; the backend
pickles as its settings alone.

Claims are always deleted: on any error inside ``create()``, by ``kill()``, and for whatever is
still live when the process exits or gets SIGTERM (``shutdown.py``). If all of that is skipped
(SIGKILL), the claim's ``shutdownTime`` with policy Delete ends it.
"""

from __future__ import annotations

import http.client
import logging
import re
import threading
import time
import uuid
from typing import Any, Callable, Mapping

from . import shutdown, trusted_trace
from .handle import RuntimeHandle, SandboxError, SandboxGone
from .rollout_keys import MAX_TTL_SECONDS, RolloutKeyError, RolloutKeysClient
from .settings import AgentSandboxSettings

log = logging.getLogger("agent_rl_sandbox")

#: Seconds create() gives the runtime to answer /healthz once the claim is Ready (the readiness
#: probe already passed, so this only covers the trainer's own path to the pod).
RUNTIME_HEALTH_SECONDS = 30.0
#: Attempts and per-request timeout of a claim deletion.
DELETE_ATTEMPTS = 3
#: How long a claim the API server refuses with 403 "status unknown for quota" is retried, once a
#: second. The pool's ResourceQuota counts claims (count/sandboxclaims...), and until the quota
#: controller has computed that count the API server refuses every claim in the namespace: right
#: after the stack is applied (measured on a real node: the first claim 1.7 s after the pool was Ready
#: was refused, test/node-suites/sandbox-claim.ts). Nothing was created, so the same claim is retried.
QUOTA_NOT_COUNTED_RETRY_SECONDS = 60.0
DELETE_REQUEST_SECONDS = 10.0
#: Where a sandbox pod's forwarder takes its rollout's key (forwarder.py KEY_DELIVERY_PATH).
FORWARDER_KEY_PATH = "/rollout-key"
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$")

ClientFactory = Callable[[AgentSandboxSettings], Any]


def default_client(settings: AgentSandboxSettings) -> Any:
    """The official client, connecting in-cluster to the pod IP on the runtime's port (not the
    default port-forward to a router Service the stack does not deploy)."""
    from k8s_agent_sandbox import SandboxClient
    from k8s_agent_sandbox.models import SandboxInClusterConnectionConfig

    return SandboxClient(connection_config=SandboxInClusterConnectionConfig(server_port=settings.port))


def quota_not_counted_yet(e: BaseException) -> bool:
    """The API server's refusal of an object its namespace's ResourceQuota has not counted yet
    (kubernetes/kubernetes plugin/pkg/admission/resourcequota: "status unknown for quota")."""
    return getattr(e, "status", None) == 403 and "status unknown for quota" in f"{getattr(e, 'body', '') or ''} {e}"


def metadata_labels(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """OpenEnv's create(metadata=...) (e.g. episode_id) as claim labels `agentrl.dev/<key>`,
    for the pairs that are valid label names and values; the others are dropped."""
    labels: dict[str, str] = {}
    for key, value in (metadata or {}).items():
        if isinstance(key, str) and isinstance(value, str) and _LABEL_NAME.match(key) and _LABEL_NAME.match(value):
            labels[f"agentrl.dev/{key}"] = value
    return labels


#: Hugging Face hardware flavors are named <kind>-<size>; the pool's sandboxes are CPU-only.
CPU_FLAVOR_PREFIX = "cpu-"


class BackendArgumentError(ValueError):
    """An HFSandboxBackend argument the stack's pool cannot honour; names every one and the fix."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("AgentSandboxBackend:\n  " + "\n  ".join(problems))
        self.problems = problems


def check_hf_arguments(
    settings: AgentSandboxSettings, *, image: str | None, flavor: str | None, forward_hf_token: bool, sandbox_kwargs: Mapping[str, Any] | None
) -> list[str]:
    """What of OpenEnv's ``HFSandboxBackend(image=, flavor=, forward_hf_token=, sandbox_kwargs=)``
    (envs/opencode_env/sandbox/hf.py) the pool cannot do, one message each. The pool's template
    decides image, size and env; these arguments can only agree with it."""
    problems: list[str] = []
    if image is not None and settings.image and image != settings.image:
        problems.append(
            f"image {image!r} is not the pool's image {settings.image!r}: every sandbox of the pool runs its template's image "
            f"(sandboxes.image; TRL's script gets it as --sandbox-image): pass that, or set sandboxes.image and redeploy"
        )
    if flavor is not None and not flavor.startswith(CPU_FLAVOR_PREFIX):
        problems.append(
            f"flavor {flavor!r} is not a CPU flavor: the pool's sandboxes have no GPU and their size is the stack's "
            f"(sandboxes.cpu={settings.cpu or '?'}, sandboxes.memory={settings.memory or '?'}): pass a cpu-* flavor or none"
        )
    if forward_hf_token:
        problems.append(
            "forward_hf_token=True: the pool's sandboxes get no HF token by design (the agent runs model-written commands "
            "and could print it; their egress reaches only the ingress): drop forward_hf_token"
        )
    if sandbox_kwargs:
        problems.append(
            f"sandbox_kwargs {sorted(sandbox_kwargs)}: these are huggingface_hub Sandbox.create options; the pool's template "
            f"decides its sandboxes (sandboxes.* in the stack config): drop sandbox_kwargs"
        )
    return problems


class AgentSandboxBackend:
    """OpenEnv ``SandboxBackend`` (``create(timeout_s, envs, metadata)``) over agent-sandbox claims.

    A drop-in for OpenEnv's ``HFSandboxBackend``: it takes the same keyword arguments, so TRL's
    opencode example changes in one line (``HFSandboxBackend(image=image, flavor=flavor)`` ->
    ``AgentSandboxBackend(image=image, flavor=flavor)``). Where the sandboxes are comes from the env
    the TrainingNode sets (``settings``, else ``AgentSandboxSettings.from_env()``); the arguments are
    checked against the pool (``check_hf_arguments``): ``image`` must be the pool's, ``flavor`` any
    ``cpu-*`` name (accepted and logged: the pool's cpu/memory decide), ``forward_hf_token`` and
    ``sandbox_kwargs`` refused. Every problem is reported at once.
    """

    def __init__(
        self,
        settings: AgentSandboxSettings | None = None,
        *,
        image: str | None = None,
        flavor: str | None = None,
        forward_hf_token: bool = False,
        sandbox_kwargs: dict[str, Any] | None = None,
        client_factory: ClientFactory | None = None,
        handle_sigterm: bool = True,
    ) -> None:
        self.settings = settings if settings is not None else AgentSandboxSettings.from_env()
        problems = check_hf_arguments(self.settings, image=image, flavor=flavor, forward_hf_token=forward_hf_token, sandbox_kwargs=sandbox_kwargs)
        if problems:
            raise BackendArgumentError(problems)
        if image is not None and not self.settings.image:
            log.warning("image %r not checked: the env names no pool image (SANDBOX_IMAGE); the pool runs its template's image", image)
        if flavor is not None:
            s = self.settings
            log.info("flavor %r: the pool decides each sandbox's size (cpu %s, memory %s)", flavor, s.cpu or "?", s.memory or "?")
        self.image = image or self.settings.image
        self.flavor = flavor
        # Picklable when it is a module-level function (it crosses into TRL's rollout child).
        self._client_factory = client_factory or default_client
        self._handle_sigterm = handle_sigterm
        self._local = threading.local()
        if handle_sigterm:
            shutdown.install()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kwargs: Any) -> "AgentSandboxBackend":
        return cls(AgentSandboxSettings.from_env(environ), **kwargs)

    # --- pickling: settings only; clients are per thread and per process ------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_local", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()
        if self._handle_sigterm:
            shutdown.install()

    def _client(self) -> Any:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._client_factory(self.settings)
            self._local.client = client
        return client

    # --- the protocol -----------------------------------------------------------------------
    def create(self, *, timeout_s: int = 900, envs: dict[str, str] | None = None, metadata: dict[str, str] | None = None) -> RuntimeHandle:
        """Claims a warm sandbox for at most `timeout_s` seconds (capped a little under the run's
        maximum lifetime); `envs` apply to every command run through the handle."""
        if shutdown.shutting_down():
            raise SandboxGone("the trainer is shutting down: no new sandboxes")
        s = self.settings
        lifetime = s.claim_lifetime_seconds if not timeout_s or timeout_s <= 0 else min(int(timeout_s), s.claim_lifetime_seconds)
        claim = f"{s.run_id}-{uuid.uuid4().hex[:12]}"
        labels = {**metadata_labels(metadata), **s.extra_labels, s.run_label: s.run_id}
        key = f"{s.namespace}/{claim}"
        released = threading.Event()

        def release() -> None:
            if released.is_set():
                return
            released.set()
            shutdown.unregister(key)
            try:
                # The rollout ended: its key is refused from now on (a no-op when none was minted).
                self._revoke_rollout_key(claim)
            finally:
                self._delete_claim(claim)

        # Registered before the API call: a SIGTERM during the Ready wait still deletes it.
        shutdown.register(key, release)
        started = time.monotonic()
        try:
            client = self._client()
            quota_deadline = time.monotonic() + QUOTA_NOT_COUNTED_RETRY_SECONDS
            while True:
                try:
                    sandbox = client.create_sandbox(
                        s.warm_pool,
                        namespace=s.namespace,
                        sandbox_ready_timeout=s.ready_timeout_seconds,
                        labels=labels,
                        claim_name=claim,
                        shutdown_after_seconds=lifetime,
                    )
                    break
                except Exception as e:
                    if not quota_not_counted_yet(e) or time.monotonic() >= quota_deadline or shutdown.shutting_down():
                        raise
                    log.info("claim %s refused until the namespace's ResourceQuota counts claims: retrying", claim)
                    time.sleep(1.0)
            try:
                host = self._pod_host(sandbox)
                url = f"http://{host}:{s.port}"
            finally:
                # This backend talks to the runtime itself; drop the client's own connection and
                # its registry entry (list_active_sandboxes prunes closed ones).
                sandbox.close_connection()
                client.list_active_sandboxes()
            handle = RuntimeHandle(
                url,
                sandbox_id=claim,
                on_kill=release,
                env=envs,
                lifetime_seconds=lifetime - (time.monotonic() - started),
                trace_url=self._trace_url(url),
                max_read_bytes=self.settings.max_read_bytes,
            )
            self._await_runtime(handle)
            if s.rollout_keys_url:
                self._deliver_rollout_key(claim, host, lifetime)
            log.info("claimed sandbox %s (%s) for %ds", claim, url, lifetime)
            trusted_trace.note_claimed(handle)
            return handle
        except BaseException:
            try:
                release()
            except Exception as e:  # noqa: BLE001 - keep the original error
                log.warning("deleting claim %s after a failed create: %s", claim, e)
            raise

    def _pod_host(self, sandbox: Any) -> str:
        ip = sandbox.get_pod_ip()
        if ip:
            return f"[{ip}]" if ":" in ip else ip
        # The template sets service: true, so each sandbox has a headless Service.
        return sandbox.get_service_fqdn() or f"{sandbox.sandbox_id}.{self.settings.namespace}.svc.cluster.local"

    def _rollout_keys(self) -> RolloutKeysClient:
        s = self.settings
        return RolloutKeysClient(s.rollout_keys_url, s.rollout_admin_key, timeout=DELETE_REQUEST_SECONDS)

    def _deliver_rollout_key(self, claim: str, host: str, lifetime: int) -> None:
        """Mints this claim's key (it expires with the claim) and hands it to the pod's forwarder, before
        the agent runs anything; the key never passes through the runtime (the agent's uid)."""
        rollout_key = self._rollout_keys().mint(claim, min(lifetime, MAX_TTL_SECONDS))
        conn = http.client.HTTPConnection(host.strip("[]"), self.settings.forwarder_key_port, timeout=DELETE_REQUEST_SECONDS)
        try:
            conn.request("PUT", FORWARDER_KEY_PATH, body=rollout_key.encode(), headers={"Content-Type": "text/plain"})
            status = conn.getresponse().status
        except (OSError, http.client.HTTPException) as e:
            raise SandboxError(f"sandbox {claim}: its forwarder did not take the rollout key: {type(e).__name__}") from None
        finally:
            conn.close()
        if status != 204:
            raise SandboxError(f"sandbox {claim}: its forwarder refused the rollout key ({status}): a forwarder takes one key per pod")

    def _revoke_rollout_key(self, claim: str) -> None:
        if not self.settings.rollout_keys_url:
            return
        try:
            self._rollout_keys().revoke(claim)
        except RolloutKeyError as e:
            # The claim is still deleted; the key then lives until its expiry (the claim's lifetime).
            log.warning("%s", e)

    def _trace_url(self, runtime_url: str) -> str | None:
        """The forwarder's trace port on the runtime's host (same pod IP); None when the pool has none."""
        if not self.settings.trace_port:
            return None
        return f"{runtime_url.rsplit(':', 1)[0]}:{self.settings.trace_port}"

    @staticmethod
    def _await_runtime(handle: RuntimeHandle) -> None:
        deadline = time.monotonic() + RUNTIME_HEALTH_SECONDS
        last = ""
        while time.monotonic() < deadline:
            try:
                handle.client.call("GET", "/healthz", timeout=5.0)
                return
            except SandboxError as e:
                last = str(e)
            time.sleep(0.5)
        raise SandboxError(f"sandbox {handle.sandbox_id} is Ready but its runtime did not answer within {RUNTIME_HEALTH_SECONDS:g}s: {last}")

    def _delete_claim(self, claim: str) -> None:
        last: Exception | None = None
        for attempt in range(DELETE_ATTEMPTS):
            try:
                # The calling thread's client (kill may come from another thread than create).
                self._client().k8s_helper.delete_sandbox_claim(claim, self.settings.namespace, _request_timeout=DELETE_REQUEST_SECONDS)
                log.info("deleted claim %s", claim)
                return
            except Exception as e:  # noqa: BLE001 - retried, then reported
                last = e
                time.sleep(0.5 * (attempt + 1))
        raise SandboxError(f"could not delete claim {claim} in {self.settings.namespace}: {last}")

    def close(self) -> int:
        """Deletes every sandbox of this process still live; returns how many deletions failed."""
        return shutdown.release_all()
