"""The black-box image's fix of TRL 1.16.0's AsyncGRPO weight sync (trainer/fix_trl_weight_sync.py;
huggingface/trl#7103, fix #7131), run as the image runs it: the script applied to a copy of the
installed trl 1.16.0, then two trainer ranks (python/tests/trl_weight_sync_worker.py, one process each,
torch.distributed over gloo on CPU) run TRL's own `_TrainBeginCallback.on_train_begin` ->
`_sync_weight_merged` -> `_streaming_iter` over a small model sharded by FSDP2's `fully_shard`.
accelerate's own `Accelerator` joins the ranks (MULTI_CPU over gloo). The weight-transfer client
and the trainer's state around TRL's methods are STAND-INS (the real client needs vLLM and its server,
the real trainer a hub model; named so in the worker); the sender drains the iterator on its own
thread, as the real one's NCCL producer does.

What the test holds: every rank runs every parameter's all-gather on its main thread, and rank 0
sends only after its last gather; what rank 0 sends are whole tensors equal to the model's; a
barrier follows rank 0's `init_weight_transfer` before any rank syncs. As published, TRL 1.16.0 gathers
rank 0's parameters on the sender's thread between sends and has no such barrier, and the test fails on
it (the commit shows the run).

Needs trl 1.16.0 and torch (the trainer lock's venv, python/run-tests.sh); skips where trl is not
installed. Not run here: the NCCL group to a real vLLM 0.29.0 (the multi-GPU run), FSDP2 on GPUs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHON_DIR, REPO, free_port
from waits import scaled

FIX = REPO / "trainer" / "fix_trl_weight_sync.py"
WORKER = Path(__file__).with_name("trl_weight_sync_worker.py")
RANKS = 2


def installed_trl() -> Path:
    pytest.importorskip("torch", reason="torch is not installed here (the trainer lock venv has it)")
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("trl")
    except PackageNotFoundError:
        pytest.skip("trl is not installed here (the trainer lock venv has it)")
    if dist.version != "1.16.0":
        pytest.fail(f"trl {dist.version} is installed; the trainer lock pins 1.16.0, which this fix is for")
    return Path(dist.locate_file("trl"))


def fixed_copy(tmp: Path) -> Path:
    """A site directory holding a copy of the installed trl and its dist-info, the image's fix applied."""
    trl = installed_trl()
    site = tmp / "site"
    shutil.copytree(trl, site / "trl", ignore=shutil.ignore_patterns("__pycache__"))
    for info in trl.parent.glob("trl-*.dist-info"):
        shutil.copytree(info, site / info.name)
    r = subprocess.run([sys.executable, str(FIX), str(site / "trl")], capture_output=True, text=True, timeout=scaled(60))
    assert r.returncode == 0, r.stderr
    return site


def run_ranks(site: Path, tmp: Path) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(PYTHON_DIR)]), "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(RANKS), "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(tmp / f"rank{r}.json")], env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(RANKS)]
    try:
        outs = [p.communicate(timeout=scaled(600))[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for r, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {r} exited {p.returncode}:\n{out[-4000:]}"
    return [json.loads((tmp / f"rank{r}.json").read_text()) for r in range(RANKS)]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    tmp = tmp_path_factory.mktemp("trl-weight-sync")
    site = fixed_copy(tmp)
    got = run_ranks(site, tmp)
    assert all(Path(g["trl"]).is_relative_to(site) for g in got), "the ranks did not import the fixed copy"
    return got


def kinds(events: list[list[str]], kind: str) -> list[int]:
    return [i for i, e in enumerate(events) if e[0] == kind]


def test_every_rank_gathers_every_parameter_on_its_main_thread_before_rank_0_sends(ranks):
    names = list(ranks[0]["reference"])
    for r in ranks:
        gathers = [e for e in r["events"] if e[0] == "gather"]
        assert [e[1] for e in gathers] == names, f"rank {r['rank']} gathered {[e[1] for e in gathers]}"
        assert {e[2] for e in gathers} == {"MainThread"}, f"rank {r['rank']} gathered on {sorted({e[2] for e in gathers})}, not only its main thread"
    events = ranks[0]["events"]
    assert max(kinds(events, "gather")) < min(kinds(events, "send")), f"rank 0 sent before its last gather: {events}"
    assert not kinds(ranks[1]["events"], "send")


def test_rank_0_sends_whole_tensors_equal_to_the_models(ranks):
    r0 = ranks[0]
    assert list(r0["sent"]) == list(r0["reference"])
    assert r0["sent"] == r0["reference"]


def test_no_rank_syncs_before_rank_0_has_set_up_the_transfer(ranks):
    init = kinds(ranks[0]["events"], "init")
    assert init == [0], ranks[0]["events"]
    for r in ranks:
        first_sync = kinds(r["events"], "sync")[0]
        assert kinds(r["events"], "barrier")[0] < first_sync, f"rank {r['rank']} synced before the barrier: {r['events']}"


def test_the_update_stays_in_checkpoint_format_which_vllm_0_29_always_loads(ranks):
    # vLLM 0.29.0 reads no body on /start_weight_update and its NCCL engine loads checkpoint weights
    # (model.load_weights): #7131's is_checkpoint_format False is not applied (trainer/fix_trl_weight_sync.py says why).
    assert ranks[0]["posted"] == [["http://vllm:8000/start_weight_update", {"is_checkpoint_format": True}]]


# -------------------------------------------------------------------------------------------------
# The script itself: what it applies to, what it refuses (standard library only: runs anywhere)


def fix(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(FIX), str(path)], capture_output=True, text=True, timeout=scaled(60))


def test_the_lock_pins_the_trl_the_fix_is_for():
    pins = [line.strip() for line in (REPO / "trainer" / "requirements.txt").read_text().splitlines() if line.startswith("trl==")]
    assert pins == ["trl==1.16.0"], "a new trl: read it again (is huggingface/trl#7131 in it?) and update or remove trainer/fix_trl_weight_sync.py"


def test_a_trl_that_is_not_the_published_1_16_0_is_refused_and_left_unchanged(tmp_path: Path):
    site = tmp_path / "site"
    (site / "trl" / "experimental" / "async_grpo").mkdir(parents=True)
    (site / "trl-1.17.0.dist-info").mkdir()
    (site / "trl-1.17.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.4\nName: trl\nVersion: 1.17.0\n")
    (site / "trl" / "experimental/async_grpo/async_grpo_trainer.py").write_text("# not TRL's file\n")
    r = fix(site / "trl")
    assert r.returncode == 1
    assert "trl 1.17.0 is installed, this fix is for trl 1.16.0 only" in r.stderr
    assert "trl/experimental/async_grpo/async_grpo_trainer.py: sha256 " in r.stderr and "the published 1.16.0 file is 5bbdbf3d" in r.stderr
    assert "update or remove trainer/fix_trl_weight_sync.py" in r.stderr
    assert (site / "trl" / "experimental/async_grpo/async_grpo_trainer.py").read_text() == "# not TRL's file\n"


def test_a_lock_without_trl_has_nothing_to_fix(tmp_path: Path):
    lock = tmp_path / "requirements.txt"
    lock.write_text("# STAND-IN lock (this test)\nk8s-agent-sandbox==1.0.8\n")
    r = subprocess.run([sys.executable, str(FIX), "--lock", str(lock)], capture_output=True, text=True, timeout=scaled(60))
    assert r.returncode == 0 and "pins no trl: nothing to fix" in r.stdout


def test_the_fix_applies_once_and_refuses_its_own_output(tmp_path: Path):
    site = fixed_copy(tmp_path)  # applied once (asserted inside)
    again = fix(site / "trl")
    assert again.returncode == 1 and "(it already carries this fix)" in again.stderr


def test_the_blackbox_image_applies_it_after_the_lock():
    text = (REPO / "trainer" / "blackbox" / "Dockerfile").read_text()
    lock_at = text.index("RUN bash /opt/agentrl/lock/install-lock.sh /opt/agentrl/lock/requirements.txt")
    fix_at = text.index("RUN python3 /opt/agentrl/fix_trl_weight_sync.py --lock /opt/agentrl/lock/requirements.txt")
    assert lock_at < fix_at
    assert "!trainer/fix_trl_weight_sync.py" in (REPO / "trainer" / "blackbox" / "Dockerfile.dockerignore").read_text().splitlines()


def test_the_pinned_vllm_starts_a_weight_update_without_reading_a_body():
    """Checked against the pinned vLLM's own route (vllm 0.29.0 vllm/entrypoints/serve/dev/rlhf/api_router.py
    start_weight_update): it reads no request body, so #7131's is_checkpoint_format=False could not reach the engine;
    the fix leaves TRL's post as it is. A request whose body cannot be read still starts the update on the engine."""
    pytest.importorskip("vllm")
    import asyncio

    from vllm.entrypoints.serve.dev.rlhf import api_router

    route = next(r for r in api_router.router.routes if getattr(r, "path", "") == "/start_weight_update")
    started: list[tuple] = []

    class Engine:
        async def start_weight_update(self, *args, **kwargs):
            started.append((args, kwargs))

    class App:
        class state:  # noqa: N801 - the attribute the route reads (request.app.state.engine_client)
            engine_client = Engine()

    class Request:
        app = App()

        async def json(self):
            raise AssertionError("the route read the request's JSON body")

        async def body(self):
            raise AssertionError("the route read the request's body")

    asyncio.run(route.endpoint(Request()))
    assert started == [((), {})], started
