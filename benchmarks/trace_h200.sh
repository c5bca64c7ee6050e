#!/usr/bin/env bash
# One H200: the communication trace of every strategy at world size 1 on dinov2-base (bf16 and fp32), and
# the GPU timeline (NCCL kernel time, the part that overlaps no compute kernel, compute) with the
# profiling overhead.
#   bash benchmarks/trace_h200.sh OUTDIR      (DeepSpeed and its missing dependencies as wheels in .whl/)
# Records (kind "train", each with "comm") go to OUTDIR/trace.jsonl, the console to OUTDIR/trace.log, the
# comm table to OUTDIR/trace.md, each rank's chrome trace (open in Perfetto) to OUTDIR/profiles/*.json.gz.
# Expected at world size 1: comm.source "none" and the note "world size 1: no collective ran between ranks"
# for every strategy (with DeepSpeed's and FSDP's calls on a group of one counted in the note), the
# timeline's source "cuda kernels", and a step time within a few % of train_h200.sh's.
set -uo pipefail
out=${1:?usage: trace_h200.sh OUTDIR}
mkdir -p "$out/profiles"
# shellcheck source=benchmarks/device_env.sh
. "$(dirname "$0")/device_env.sh"
use_carried_wheels
export PYTHONUNBUFFERED=1 FABRICBENCH_KEEP_PROFILE="$out/profiles"
common=(--gpus 0 --model dinov2-base --batch-size 32 --steps 8 --warmup-steps 3 --trace-steps 2 --timeout 300
        --out "$out/trace.jsonl")
python3 -m fabricbench train --strategy all --precision bf16 "${common[@]}" 2>&1 | tee -a "$out/trace.log"
python3 -m fabricbench train --strategy ddp,zero3,fsdp --precision fp32 "${common[@]}" 2>&1 | tee -a "$out/trace.log"
python3 benchmarks/trace_table.py "$out/trace.jsonl" | tee "$out/trace.md"
gzip -f "$out"/profiles/*.json 2>/dev/null
python3 - "$out/trace.jsonl" <<'PY' | tee -a "$out/trace.md"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"\n{r['strategy']} {r.get('precision')}: " + json.dumps(r.get("comm"), indent=None))
PY
