#!/usr/bin/env bash
# Runs components/training/gpu/nccl_check.py (16 GiB, as a Qwen3-8B update) with the NCCL/CUDA
# env the TrainingNode renders (bench/gpu/render-env.ts writes bench/gpu/rendered/) for every
# server layout x target x gpuSharing, each role in its own mount namespace as in a container:
# own-device masks the other role's /dev/nvidiaN; shared-devices leaves both (Docker's device
# request of every training GPU); one-container runs both ranks from one process tree (--spawn),
# as the Kubernetes supervisor does. Needs 2 GPUs and root. Usage: bash bench/gpu/nccl-rendered.sh [GiB]
set -uo pipefail
size="${1:-16}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
check="$here/components/training/gpu/nccl_check.py"
dir="$here/bench/gpu/rendered"
work=/tmp/nccl-rendered; rm -rf "$work"; mkdir -p "$work"
results="$work/nccl-rendered.jsonl"; : >"$results"
envargs() { sed 's/^/ /' "$1" | tr -d '\n'; }
while read -r name shape; do
  [[ -z "$name" ]] && continue
  port=$((29600 + RANDOM % 300))
  venv=$(envargs "$dir/$name.vllm.env"); tenv=$(envargs "$dir/$name.trainer.env")
  t0=$(date +%s)
  case "$shape" in
    one-container)
      # The supervisor's container: trainer env for the container, the check splits the GPUs itself.
      env $tenv python3 "$check" --spawn --vllm-devices 0 --trainer-devices 1 --size-gib "$size" --timeout 90 --port $port >"$work/$name.log" 2>&1; c0=$?; c1=$c0; log1="$work/$name.log" ;;
    shared-devices)
      env $tenv unshare -m python3 "$check" --rank 0 --size-gib "$size" --timeout 90 --port $port >"$work/$name.rank0.log" 2>&1 & p0=$!
      env $venv unshare -m python3 "$check" --rank 1 --size-gib "$size" --timeout 90 --port $port >"$work/$name.rank1.log" 2>&1 & p1=$!
      wait $p0; c0=$?; wait $p1; c1=$?; log1="$work/$name.rank1.log" ;;
    own-device)
      env $tenv unshare -m sh -c "mount --bind /dev/null /dev/nvidia0 && exec python3 '$check' --rank 0 --size-gib $size --timeout 90 --port $port" >"$work/$name.rank0.log" 2>&1 & p0=$!
      env $venv unshare -m sh -c "mount --bind /dev/null /dev/nvidia1 && exec python3 '$check' --rank 1 --size-gib $size --timeout 90 --port $port" >"$work/$name.rank1.log" 2>&1 & p1=$!
      wait $p0; c0=$?; wait $p1; c1=$?; log1="$work/$name.rank1.log" ;;
  esac
  line=$(grep -h '^NCCL_CHECK ' "$log1" | tail -1 | cut -c12-)
  printf '{"case":"%s","shape":"%s","vllm_env":"%s","trainer_env":"%s","exit":[%d,%d],"wall_s":%d,"result":%s}\n' "$name" "$shape" "$venv" "$tenv" $c0 $c1 $(( $(date +%s) - t0 )) "${line:-null}" | tee -a "$results"
done <"$dir/cases.txt"
if [[ -n "${OUT:-}" ]]; then cp "$results" "$OUT/"; tar czf "$OUT/nccl-rendered-logs.tgz" -C "$work" .; fi
