#!/usr/bin/env bash
# One H200: `fabricbench study` with dinov2-base and mistral-1b, every strategy, world size 1.
#   bash benchmarks/study_h200.sh OUTDIR        (DeepSpeed and its missing dependencies as wheels in .whl/)
# Writes OUTDIR/dinov2-base/ and OUTDIR/mistral-1b/ (results.jsonl, units/, report.md, report.html) and
# OUTDIR/study.log. Fabrics: default only. On one GPU p2p-off changes nothing: NCCL_P2P_DISABLE governs
# GPU-to-GPU transport and a single rank has no peer, so its sweep and train units would repeat default's
# numbers and double the GPU time. No scaling unit either (one GPU, no islands). About 5-6 minutes in all.
set -uo pipefail
out=${1:?usage: study_h200.sh OUTDIR}
mkdir -p "$out"
# shellcheck source=benchmarks/device_env.sh
. "$(dirname "$0")/device_env.sh"
use_carried_wheels
export PYTHONUNBUFFERED=1
# 6 steps (2 untimed): the same per-strategy batch as benchmarks/train_h200.sh; one sweep grid covering
# DDP's 25 MB buckets to whole-model sizes, 10 timed iterations per size (n = 1: algbw only).
common=(--gpus 0 --fabrics default --strategies ddp,zero1,zero2,zero3,fsdp --steps 6 --warmup-steps 2 --repeats 1 --target-ci 0
        --sizes 1K-1G:x4 --iters 10 --warmup 3 --train-timeout 240 --sweep-timeout 240)
start=$(date +%s)
python3 -m fabricbench study --model dinov2-base --batch-size 32 "${common[@]}" --out "$out/dinov2-base" 2>&1 | tee -a "$out/study.log"
python3 -m fabricbench study --model mistral-1b --batch-size 8 --seq-len 512 "${common[@]}" --out "$out/mistral-1b" 2>&1 | tee -a "$out/study.log"
# a study cut short (timeout, Ctrl-C) continues where it stopped:
#   python3 -m fabricbench study --out "$out/mistral-1b" --resume
echo "study_h200: $(( $(date +%s) - start )) s in all" | tee -a "$out/study.log"
