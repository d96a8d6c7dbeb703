"""One trainer rank of python/tests/test_trl_weight_sync.py: TRL's own `_TrainBeginCallback.on_train_begin`
and `AsyncGRPOTrainer._sync_weight_merged` / `_streaming_iter` (the trl on PYTHONPATH: a copy, fixed or as
published), with accelerate's real `Accelerator` on CPU (gloo), over a small model sharded by FSDP2's
`fully_shard`, recording on which thread each parameter's `full_tensor()` all-gather runs, what rank 0
sends, and the barriers.

    RANK=<r> LOCAL_RANK=<r> WORLD_SIZE=<n> MASTER_ADDR=127.0.0.1 MASTER_PORT=<port> python trl_weight_sync_worker.py <out.json>
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import torch
import torch.distributed as dist
from accelerate import Accelerator
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

from trl.experimental.async_grpo import async_grpo_trainer as agt
from trl.experimental.async_grpo import vllm_client

RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
events: list[list[str]] = []
sent: dict[str, list] = {}


class WeightTransfer:
    """STAND-IN for trl's WeightTransferClient (it needs vLLM and a server): `send_weights` drains the iterator
    on a thread of its own, as the real one's NCCL producer does, and records each tensor it sends."""

    def init_weight_transfer(self) -> None:
        events.append(["init"])
        time.sleep(1.0)  # rank 0 sets up the NCCL group with vLLM while the other ranks go on

    def pause(self) -> None:
        events.append(["pause"])

    def resume(self) -> None:
        events.append(["resume"])

    def send_weights(self, iterator) -> None:
        def producer() -> None:
            for name, tensor in iterator:
                assert not isinstance(tensor, DTensor), f"{name}: sent a shard, not the whole tensor"
                events.append(["send", name, threading.current_thread().name])
                sent[name] = tensor.detach().clone().tolist()

        thread = threading.Thread(target=producer, name="sender", daemon=True)
        thread.start()
        thread.join()


class Trainer:
    """STAND-IN for AsyncGRPOTrainer's state (its __init__ needs a model hub, a dataset and vLLM); its weight-sync
    methods are TRL's own, taken from the class."""

    _streaming_iter = agt.AsyncGRPOTrainer._streaming_iter
    _sync_weight_merged = agt.AsyncGRPOTrainer._sync_weight_merged

    def __init__(self, accelerator: Accelerator, model: torch.nn.Module) -> None:
        self.accelerator = accelerator
        self.model = model
        self.weight_transfer = WeightTransfer() if RANK == 0 else None  # TRL makes it on the main process only
        self.rollout_worker = None
        self.model_version = 0

    def _sync_weight(self) -> None:
        events.append(["sync"])
        self._sync_weight_merged(time.time())


def main(out: str) -> None:
    # accelerate's own Accelerator, as TRL's trainer holds it: on CPU it joins the ranks over gloo (MULTI_CPU).
    accelerator = Accelerator(cpu=True)
    assert accelerator.num_processes == WORLD and dist.get_backend() == "gloo"
    wait_for_everyone = accelerator.wait_for_everyone

    def recorded_wait_for_everyone() -> None:
        events.append(["barrier"])
        wait_for_everyone()

    accelerator.wait_for_everyone = recorded_wait_for_everyone
    torch.manual_seed(0)  # the same model on every rank, as from_pretrained gives
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    reference = {name: p.detach().clone().tolist() for name, p in model.named_parameters()}
    fully_shard(model, mesh=init_device_mesh("cpu", (WORLD,)))
    names = {id(p): name for name, p in model.named_parameters()}
    assert all(isinstance(p, DTensor) for p in model.parameters()), "fully_shard left a parameter unsharded"

    full_tensor = DTensor.full_tensor

    def recorded_full_tensor(self, *args, **kwargs):
        events.append(["gather", names.get(id(self), "?"), threading.current_thread().name])
        return full_tensor(self, *args, **kwargs)

    DTensor.full_tensor = recorded_full_tensor

    posted: list = []
    if RANK == 0:  # what start_weight_update tells vLLM, with requests.post recorded (no server here)
        class Response:
            status_code = 200

        vllm_client.requests.post = lambda url, json=None, timeout=None: (posted.append([url, json]), Response())[1]
        vllm_client.VLLMClient.start_weight_update(type("Client", (), {"server_url": "http://vllm:8000"})(), timeout=1)

    agt._TrainBeginCallback(Trainer(accelerator, model)).on_train_begin(None, None, None)
    dist.barrier()
    with open(out, "w") as f:
        json.dump({"rank": RANK, "trl": agt.__file__, "events": events, "sent": sent, "reference": reference, "posted": posted}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
