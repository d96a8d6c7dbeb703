"""Apply the multi-rank weight-sync fix to TRL 1.16.0's AsyncGRPO, as installed, and to nothing else.

    python3 fix_trl_weight_sync.py --lock requirements.txt  # the installed trl, when the lock pins trl
    python3 fix_trl_weight_sync.py <trl dir>                 # a trl package directory (the tests' copies)

TRL 1.16.0 `trl/experimental/async_grpo/async_grpo_trainer.py` `_sync_weight_merged` lets rank 0 call
`send_weights(self._streaming_iter())`, which drains the iterator on the sender's thread between NCCL
broadcasts to vLLM, while every other rank runs the same iterator's FSDP2 `full_tensor()` all-gathers on
its main thread: rank 0's all-gathers interleave with a second NCCL group and HTTP calls, and with FSDP
over more than one trainer rank the first sync hangs (huggingface/trl#7103; #6797/#6798 for more than two
ranks): vLLM 0.29.0's `packed_nccl_broadcast_producer` (`vllm/distributed/weight_transfer/packed_tensor.py`)
pulls the iterator inside its own CUDA side streams on TRL's sender thread, so rank 0's FSDP all-gathers
run there, between broadcasts on the other group. Of the fix proposed upstream (huggingface/trl#7131) two
changes are applied here:

1. `_sync_weight_merged`: every rank runs the all-gathers first, on its main thread (`_streaming_iter`
   to the end); only then does rank 0 send, from the whole tensors it gathered. Rank 0 holds one full
   copy of the sent weights for the length of the send (FSDP2: the model unsharded, in the parameters'
   dtype, on its device); a single-rank layout holds references to its own parameters, no copy.
2. `_TrainBeginCallback.on_train_begin`: a barrier after the rank-0-only `init_weight_transfer`, so no rank
   enters the first sync's collectives while rank 0 is still setting up the NCCL group with vLLM.

Not applied: #7131's `is_checkpoint_format: False` in `vllm_client.py` `start_weight_update`. The pinned
vLLM 0.29.0 reads no body on that route (`vllm/entrypoints/serve/dev/rlhf/api_router.py`
`start_weight_update` calls `engine_client.start_weight_update()` with no argument), and its NCCL engine
always loads the stream as checkpoint weights (`vllm/distributed/weight_transfer/nccl_engine.py`:
`initialize_layerwise_reload`, then `model.load_weights`), which is what TRL sends (`_iter_vllm_named_params`:
"under its base-checkpoint name"). The flag would change nothing there and say the opposite of what happens.

Refuses, naming the file, the digest it found and the one it was written for, and changes nothing, unless
the installed trl's version (its dist-info) is 1.16.0 and its files are byte for byte the published 1.16.0 ones (sha256 below, as the wheel's RECORD
lists them): a TRL that changed must be read again, not patched blindly. A lock that pins no trl (the
image tests' stand-in lock) has nothing to fix and passes. Remove this script when a TRL
release carries the fix (bump the lock, and the build fails here until then). Standard library only: it
runs in the image build.
"""

from __future__ import annotations

import ast
import hashlib
import sys
from pathlib import Path

#: The TRL release this was written for (trainer/requirements.txt pins it).
TRL_VERSION = "1.16.0"
TRAINER = "experimental/async_grpo/async_grpo_trainer.py"
#: sha256 of the file as published in trl-1.16.0-py3-none-any.whl (its RECORD: W72_PercQO8R...).
PUBLISHED_SHA256 = {
    TRAINER: "5bbdbf3deadc40ef114a7551ab27bad13b5d72ef037acc53712fbb205bd7c7a8",
}
MARK = "(agent-rl-infra: huggingface/trl#7103, fix #7131)"

#: (file, the published text, its replacement): each published text occurs exactly once in its file.
EDITS: list[tuple[str, str, str]] = [
    (
        TRAINER,
        """        try:
            if self.accelerator.is_main_process and self.weight_transfer:
                self.weight_transfer.send_weights(self._streaming_iter())
            else:
                # Non-rank-0 processes must still participate in full_tensor() collectives for FSDP2.
                for _ in self._streaming_iter():
                    pass
        finally:
""",
        f"""        try:
            # Every rank runs every full_tensor() all-gather first, on this thread; then rank 0 sends the whole
            # tensors. Sending while gathering interleaves the FSDP2 collectives with the NCCL group to vLLM. {MARK}
            gathered = [(name, tensor) for name, tensor in self._streaming_iter() if self.accelerator.is_main_process]
            if self.accelerator.is_main_process and self.weight_transfer:
                self.weight_transfer.send_weights(iter(gathered))
            del gathered
        finally:
""",
    ),
    (
        TRAINER,
        """        if self._trainer.accelerator.is_main_process and self._trainer.weight_transfer is not None:
            self._trainer.weight_transfer.init_weight_transfer()
        self._trainer._sync_weight()
""",
        f"""        if self._trainer.accelerator.is_main_process and self._trainer.weight_transfer is not None:
            self._trainer.weight_transfer.init_weight_transfer()
        # No rank enters the first sync's collectives while rank 0 still sets up the group with vLLM. {MARK}
        self._trainer.accelerator.wait_for_everyone()
        self._trainer._sync_weight()
""",
    ),
]


class NotThePublishedTrl(Exception):
    pass


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def patched(files: dict[str, str], version: str) -> dict[str, str]:
    """The files with the fix; raises NotThePublishedTrl naming every mismatch (then nothing is written)."""
    problems = []
    if version != TRL_VERSION:
        problems.append(f"trl {version} is installed, this fix is for trl {TRL_VERSION} only")
    for rel, digest in PUBLISHED_SHA256.items():
        got = sha256(files[rel])
        if got != digest:
            already = " (it already carries this fix)" if MARK in files[rel] else ""
            problems.append(f"trl/{rel}: sha256 {got}, the published {TRL_VERSION} file is {digest}{already}")
    if problems:
        raise NotThePublishedTrl(
            "not the TRL this fix was written for: " + "; ".join(problems) + ". Read the new TRL's "
            "_sync_weight_merged and its _TrainBeginCallback again (is "
            "huggingface/trl#7131 in it?) and update or remove trainer/fix_trl_weight_sync.py"
        )
    out = dict(files)
    for rel, old, new in EDITS:
        count = out[rel].count(old)
        assert count == 1, f"trl/{rel}: {count} occurrences of an edit's text in the published file"
        out[rel] = out[rel].replace(old, new)
    for rel in PUBLISHED_SHA256:
        ast.parse(out[rel], filename=rel)
    return out


def installed_trl() -> tuple[Path, str]:
    """The installed trl's package directory and version, from its distribution's metadata (no import: it loads torch)."""
    from importlib.metadata import distribution

    dist = distribution("trl")
    return Path(dist.locate_file("trl")), dist.version


def version_of(trl_dir: Path) -> str:
    """The version of the trl package at trl_dir, from the trl-*.dist-info beside it (as installed or unpacked)."""
    for meta in sorted(trl_dir.parent.glob("trl-*.dist-info/METADATA")):
        for line in meta.read_text().splitlines():
            if line.startswith("Version: "):
                return line.removeprefix("Version: ").strip()
    return "(no trl-*.dist-info beside it)"


def lock_pins_trl(lock: Path) -> bool:
    """Whether the lock the image installed pins trl (the real one does, trainer/requirements.txt)."""
    return any(line.split("==")[0].strip().lower() == "trl" for line in lock.read_text().splitlines() if not line.lstrip().startswith("#"))


def main(argv: list[str]) -> int:
    """fix_trl_weight_sync.py --lock <the requirements the image installed> | <trl package directory>"""
    if len(argv) == 2 and argv[0] == "--lock":
        if not lock_pins_trl(Path(argv[1])):  # the image tests' stand-in lock: no trl, no AsyncGRPO to fix
            print(f"fix_trl_weight_sync: {argv[1]} pins no trl: nothing to fix")
            return 0
        trl_dir, version = installed_trl()
    elif len(argv) == 1 and not argv[0].startswith("-"):
        trl_dir = Path(argv[0])
        version = version_of(trl_dir)
    else:
        print("usage: fix_trl_weight_sync.py --lock <requirements.txt> | <trl package directory>", file=sys.stderr)
        return 2
    files = {rel: (trl_dir / rel).read_text() for rel in PUBLISHED_SHA256}
    try:
        out = patched(files, version)
    except NotThePublishedTrl as e:
        print(f"fix_trl_weight_sync: {trl_dir}: {e}", file=sys.stderr)
        return 1
    for rel, text in out.items():
        (trl_dir / rel).write_text(text)
        # A stale .pyc would keep the published code running where the source's mtime resolution hides the change.
        for pyc in (trl_dir / rel).parent.glob(f"__pycache__/{Path(rel).stem}.*.pyc"):
            pyc.unlink()
    print(f"fix_trl_weight_sync: {trl_dir}: trl {version}: the weight sync gathers on every rank before rank 0 sends {MARK}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
