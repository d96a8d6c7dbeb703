#!/usr/bin/env bash
# Runs components/training/gpu/nccl_check.py on a 2-GPU node under each GPU-sharing option
# the TrainingNode offers, with container GPU isolation emulated as container runtimes do it:
# each rank in its own mount and PID namespace, the other role's /dev/nvidiaN masked
# (bind-mounted /dev/null), loopback and /dev/shm shared as in one pod / Docker's shared netns+IPC.
# Usage (as root, 2 GPUs): bash bench/gpu/nccl-isolation.sh [GiB] [outdir]
# NS: the unshare flags per rank (default "-m", a mount namespace, as the issue prescribes;
# "-m -p -f --mount-proc" adds a PID namespace per rank, as two containers of one pod have).
NS="${NS:--m}"
set -uo pipefail
size="${1:-16}"
out="${2:-/tmp/nccl-isolation}"; mkdir -p "$out"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
check="$here/components/training/gpu/nccl_check.py"
results="$out/nccl-isolation.jsonl"
: >"$results"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$out/gpus.txt"
nvidia-smi topo -m | tee "$out/topo.txt"
python3 -c 'import torch; print("torch", torch.__version__, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' | tee "$out/versions.txt"

# isolated <rank> <visible gpu> <masked gpu> [VAR=value...]: one rank that sees only its own GPU.
isolated() {
  local rank=$1 own=$2 masked=$3; shift 3
  env "$@" unshare $NS sh -c "mount --bind /dev/null /dev/nvidia$masked && exec python3 '$check' --rank $rank --size-gib $size --timeout 90 --port $PORT"
}
# shared <rank> <CUDA_VISIBLE_DEVICES> [VAR=value...]: one rank that sees every GPU, split by CUDA_VISIBLE_DEVICES (Docker option).
shared() {
  local rank=$1 cvd=$2; shift 2
  env "$@" CUDA_VISIBLE_DEVICES=$cvd CUDA_DEVICE_ORDER=PCI_BUS_ID unshare $NS python3 "$check" --rank $rank --size-gib $size --timeout 90 --port $PORT
}
scenario() { # <name> <cmd for rank 0 (trainer, GPU 1)> <cmd for rank 1 (vLLM, GPU 0)>
  local name=$1 r0=$2 r1=$3 t0=$(date +%s)
  PORT=$((29500 + RANDOM % 400))
  echo "=== $name"
  ( eval "$r0" ) >"$out/$name.rank0.log" 2>&1 & local p0=$!
  ( eval "$r1" ) >"$out/$name.rank1.log" 2>&1 & local p1=$!
  wait $p0; local c0=$?; wait $p1; local c1=$?
  local line; line=$(grep -h '^NCCL_CHECK ' "$out/$name.rank1.log" | tail -1 | cut -c12-)
  local err; err=$(grep -hoE "(Cuda failure[^']*'[^']*'|invalid (device ordinal|argument)|[A-Za-z]*Error: [^(]{0,120})" "$out/$name.rank0.log" "$out/$name.rank1.log" | head -1)
  printf '{"ns":"%s","scenario":"%s","exit":[%d,%d],"wall_s":%d,"result":%s,"error":%s}\n' "$NS" "$name" $c0 $c1 $(( $(date +%s) - t0 )) "${line:-null}" "$(printf '%s' "$err" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')" | tee -a "$results"
}
NOSET=""
SHM="NCCL_P2P_DISABLE=1 NCCL_CUMEM_ENABLE=0 NCCL_SOCKET_IFNAME=lo"
SOCK="NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo"
# Two containers, each only its own GPU (Kubernetes device plugin / docker --gpus device=N):
scenario isolated-no-settings  "isolated 0 1 0 NCCL_SOCKET_IFNAME=lo" "isolated 1 0 1 NCCL_SOCKET_IFNAME=lo"
scenario isolated-shm          "isolated 0 1 0 $SHM" "isolated 1 0 1 $SHM"
scenario isolated-sockets      "isolated 0 1 0 $SOCK" "isolated 1 0 1 $SOCK"
# Two containers given every GPU, split by CUDA_VISIBLE_DEVICES (the Docker default):
scenario shared-devices-p2p    "shared 0 1 NCCL_SOCKET_IFNAME=lo" "shared 1 0 NCCL_SOCKET_IFNAME=lo"
# One container holding every GPU, a supervisor starting both roles (the Kubernetes default):
echo "=== one-container-p2p"
t0=$(date +%s)
NCCL_SOCKET_IFNAME=lo python3 "$check" --spawn --vllm-devices 0 --trainer-devices 1 --size-gib "$size" --timeout 90 >"$out/one-container-p2p.log" 2>&1; c=$?
line=$(grep -h '^NCCL_CHECK ' "$out/one-container-p2p.log" | tail -1 | cut -c12-)
printf '{"scenario":"one-container-p2p","exit":[%d],"wall_s":%d,"result":%s}\n' $c $(( $(date +%s) - t0 )) "${line:-null}" | tee -a "$results"

# Copy back: the results and every log in one archive.
if [[ -n "${OUT:-}" ]]; then cp "$results" "$OUT/$(basename "$out").jsonl"; tar czf "$OUT/$(basename "$out")-logs.tgz" -C "$out" .; fi
