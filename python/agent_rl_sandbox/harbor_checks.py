"""What a Harbor task or trial asks of the stack's pool, checked before any claim: pure functions,
standard library only (importable on the trainer side's Python 3.11, where harbor cannot install).
``harbor_env.AgentSandboxEnvironment`` raises their messages; each names the value and the fix.

The pool's egress is the stack's, not Harbor's to change: a sandbox pod reaches its own loopback
(the key-holding forwarder, the agent's one path to the model, ``SANDBOX_UPSTREAM_URL``) and, by
the pool's NetworkPolicy, the model ingress, which refuses any call without the key the forwarder
holds (docs/design/network-paths.md). So of Harbor's network modes (harbor 0.25
``harbor.models.task.config.NetworkMode``) only ``allowlist`` with hosts the pod reaches anyway can
be enforced exactly: ``public`` cannot (no route out), ``no-network`` cannot (the model path stays),
an allowlist naming any other host cannot (it would not be reachable).
"""

from __future__ import annotations

import ipaddress
import json
from typing import Mapping
from urllib.parse import urlsplit

#: Harbor's ``[environment].network_mode`` values (harbor.models.task.config.NetworkMode).
PUBLIC, NO_NETWORK, ALLOWLIST = "public", "no-network", "allowlist"
#: The Harbor agents the trial code runs (``harbor_trial.AGENTS`` wires each, pre-installed in the pool's
#: image). The stack's ``harbor.agent`` takes these only: components/config/harbor-facts.ts HARBOR_AGENTS
#: is this list, which test/sandbox/harbor-recipe.test.ts holds equal.
HARBOR_AGENTS = ("opencode", "mini-swe-agent")
#: The env var naming one warm pool per task image: a JSON object {image: warm pool name}.
TASK_POOLS_ENV = "SANDBOX_TASK_POOLS"
LOOPBACK_NAMES = frozenset({"localhost"})


def _is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_network(host, strict=False).subnet_of(ipaddress.ip_network("127.0.0.0/8")) or ipaddress.ip_network(host, strict=False) == ipaddress.ip_network("::1/128")
    except (ValueError, TypeError):
        return False


def pool_egress_hosts(upstream_url: str) -> list[str]:
    """The hosts a sandbox of the pool reaches, as Harbor's allowlist would name them: loopback
    and the host of the forwarder's URL (loopback itself on the stack's pools)."""
    hosts = ["127.0.0.1", "::1", "localhost"]
    host = urlsplit(upstream_url).hostname if upstream_url else None
    if host and host not in hosts:
        hosts.append(host)
    return hosts


def network_policy_problems(mode: str, allowed_hosts: list[str], upstream_url: str) -> list[str]:
    """Why the pool cannot enforce Harbor's policy `mode` (+ `allowed_hosts`) exactly; [] when it can."""
    reach = pool_egress_hosts(upstream_url)
    fix = f'declare network_mode = "allowlist" with allowed_hosts among {reach} (the pod\'s forwarder, the agent\'s one path to the model)'
    if mode == PUBLIC:
        return [f"network_mode 'public': the pool's sandboxes have no route out (their NetworkPolicy lets them reach the model ingress only): {fix}"]
    if mode == NO_NETWORK:
        return [f"network_mode 'no-network': the pool's sandboxes keep their path to the model (loopback forwarder -> ingress): {fix}"]
    if mode != ALLOWLIST:
        return [f"network_mode {mode!r}: unknown (Harbor 0.25 has public, no-network, allowlist)"]
    outside = [h for h in allowed_hosts if not _is_loopback(h) and h not in reach]
    if outside:
        return [f"allowed_hosts {outside}: the pool's sandboxes cannot reach them (their egress is the model path only): {fix}"]
    return []


def task_pools(environ: Mapping[str, str], pool_image: str, warm_pool: str) -> dict[str, str]:
    """{image: warm pool}: the pool of the settings (its image, when known) and SANDBOX_TASK_POOLS."""
    pools: dict[str, str] = {pool_image: warm_pool} if pool_image else {}
    raw = environ.get(TASK_POOLS_ENV, "")
    if raw:
        try:
            extra = json.loads(raw)
        except ValueError as e:
            raise ValueError(f"{TASK_POOLS_ENV}: not JSON ({e}); expected {{\"<image>\": \"<warm pool>\", ...}}") from None
        if not isinstance(extra, dict) or not all(isinstance(k, str) and isinstance(v, str) and k and v for k, v in extra.items()):
            raise ValueError(f"{TASK_POOLS_ENV}: expected a JSON object of image -> warm pool name (non-empty strings)")
        pools.update(extra)
    return pools


def task_image_problems(docker_image: str | None, has_build_files: bool, pools: Mapping[str, str]) -> list[str]:
    """Why no warm pool serves the task's image; [] when one does (or the pool's image is unknown
    and the task names none: the pool's template decides)."""
    served = sorted(pools)
    if docker_image:
        if pools and docker_image not in pools:
            return [f"task image {docker_image!r}: no warm pool serves it (pools serve {served}): add it to the stack's harbor.taskImages and redeploy"]
        return []
    if has_build_files:
        return [
            "the task builds its image (environment/Dockerfile or docker-compose.yaml): the pool's sandboxes are claimed warm, never built; "
            f"build and push the image, name it in the task's [environment].docker_image and in the stack's harbor.taskImages (pools serve {served})"
        ]
    return []
