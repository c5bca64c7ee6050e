#!/usr/bin/env bash
# One GPU: every strategy at world size 1 on dinov2-base and mistral-1b, and mistral-7b under DDP.
#   bash benchmarks/train/gpu.sh OUTDIR      (DeepSpeed and its missing dependencies as wheels in .whl/)
# Records (kind "train") go to OUTDIR/train.jsonl; the console lines to OUTDIR/train.log.
set -uo pipefail
out=${1:?usage: train/gpu.sh OUTDIR}
mkdir -p "$out"
# shellcheck source=benchmarks/device/env.sh
. "$(dirname "$0")/../device/env.sh"
use_carried_wheels
export PYTHONUNBUFFERED=1
common=(--gpus 0 --steps 8 --warmup-steps 3 --timeout 240 --out "$out/train.jsonl")
python3 -m fabricbench train --strategy all --model dinov2-base --batch-size 32 "${common[@]}" 2>&1 | tee -a "$out/train.log"
python3 -m fabricbench train --strategy all --model mistral-1b --batch-size 8 --seq-len 512 "${common[@]}" 2>&1 | tee -a "$out/train.log"
python3 -m fabricbench train --strategy ddp --model mistral-7b --batch-size 1 --seq-len 512 "${common[@]}" 2>&1 | tee -a "$out/train.log"
