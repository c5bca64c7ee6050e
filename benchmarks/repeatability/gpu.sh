#!/usr/bin/env bash
# Do identical studies agree? Repeatability on one GPU, in under 9 minutes (each stage has its own time
# limit; what finished comes back):
#   1. three identical `fabricbench study` runs of dinov2-base on GPU 0 (DDP, default fabric), the batch
#      picked by the study (no --batch-size), 3 runs in fresh processes each (steps until the median's CI
#      is within 3%); each study's `report --json` summary beside it. They must agree within
#      their intervals, with the headline throughputs within 2% of each other (check.py says).
#   2. the host-bound flag: `train` of DDP at batch 32 (fires) against the study's picked batch (does not).
#   3. the one-GPU multi-rank lab: all five strategies with 2 gloo ranks on GPU 0 (tiny-mistral), then
#      DDP and FSDP under shaped:2gbit (iproute2 carried in .carry/iproute2; skipped when absent), and a
#      gloo sweep on the same GPU at both fabrics for relate.
#   bash benchmarks/repeatability/gpu.sh "$OUT"     (DeepSpeed's wheels in .whl/, iproute2 in .carry/iproute2)
# Writes OUT/summary.txt (one line per stage), OUT/study-{1,2,3}/, OUT/hostbound*.jsonl, OUT/lab/, and
# OUT/repeatability_check.txt (the comparison of the three studies).
set -uo pipefail
R=${1:?usage: repeatability/gpu.sh OUTDIR}
mkdir -p "$R/lab"
export PYTHONUNBUFFERED=1
here=$(dirname "$0")
# shellcheck source=benchmarks/device/env.sh
. "$here/../device/env.sh"
use_carried_wheels
use_carried_iproute2
# every stage's limit is cut to what is left of BUDGET_S (default 530 s), so the whole stays under 9 minutes
budget_start "${BUDGET_S:-530}"
stage() { echo "== $1: exit $2, $(( $(date +%s) - t0 )) s (at $(budget_elapsed) s)" | tee -a "$R/summary.txt"; }
fb() { python3 -m fabricbench "$@"; }
(nvidia-smi; python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())';
 env | grep -E '^NCCL_'; command -v ip tc; ip -V; tc -V) > "$R/machine.txt" 2>&1

# 1. three identical studies (about 150 s each on the H200: the batch probe, then 3 runs in fresh processes).
# STUDIES=0 and HOSTBOUND=0 skip stages 1 and 2 (for a lease that has time only for the lab).
for i in $(seq 1 "${STUDIES:-3}"); do
  t0=$(date +%s)
  timeout "$(budget_limit 190)" python3 -m fabricbench study --gpus 0 --model dinov2-base --fabrics default --strategies ddp \
    --steps 10 --warmup-steps 4 --max-steps 40 --max-repeats 3 --train-timeout 100 --quiet \
    --out "$R/study-$i" > "$R/study-$i.log" 2>&1
  stage "study $i" $?
  fb report "$R/study-$i" --json > "$R/study-$i-summary.json" 2>>"$R/study-$i.log"
done
if [ "${STUDIES:-3}" -gt 0 ]; then
  # PYTHONPATH: the checker lives in benchmarks/ and imports this checkout's fabricbench
  PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} python3 "$here/check.py" "$R"/study-* \
    > "$R/repeatability_check.txt" 2>&1
  echo "== check: $(tail -1 "$R/repeatability_check.txt")" | tee -a "$R/summary.txt"
fi

# 2. the host-bound flag: batch 32 (one run) against the batch the first study picked (its records)
if [ "${HOSTBOUND:-1}" = 1 ]; then
t0=$(date +%s)
timeout "$(budget_limit 60)" python3 -m fabricbench train --gpus 0 --model dinov2-base --strategy ddp --batch-size 32 \
  --steps 10 --warmup-steps 4 --max-steps 30 --repeats 1 --timeout 50 --out "$R/hostbound-32.jsonl" \
  > "$R/hostbound-32.txt" 2>&1
stage "train batch 32 (host-bound expected)" $?
python3 - "$R" >> "$R/summary.txt" 2>&1 <<'PY'
import json, sys
from pathlib import Path
R = Path(sys.argv[1])
for p in [R / "hostbound-32.jsonl", *sorted(R.glob("study-*/units/train_ddp*.jsonl"))]:
    for line in p.read_text().splitlines() if p.exists() else []:
        r = json.loads(line)
        if r.get("kind") == "train":
            print(f"host-bound check: {p.relative_to(R)}: batch {r.get('batch_size')}, "
                  f"{(r.get('throughput') or {}).get('samples_per_s')} samples/s, GPU busy "
                  f"{r.get('gpu_busy_fraction')}, {r.get('host_bound') or 'not host-bound'}")
PY
fi

# 3. the one-GPU lab: 2 gloo ranks on GPU 0, every strategy, then shaped
lab=(--model tiny-mistral --device cuda --backend gloo --nprocs 2 --gpus 0 --steps 6 --warmup-steps 2
     --batch-size 4 --seq-len 128 --repeats 1 --target-ci 0 --trace-steps 1 --timeout 60)
# LAB_DEFAULT=0 skips the unshaped lab stages (their records already in OUT/lab from an earlier lease)
if [ "${LAB_DEFAULT:-1}" = 1 ]; then
t0=$(date +%s)
timeout "$(budget_limit 150)" python3 -m fabricbench train --strategy ddp,zero1,zero2,zero3,fsdp "${lab[@]}" \
  --out "$R/lab/train-default.jsonl" > "$R/lab/train-default.txt" 2>&1
stage "lab: five strategies, 2 ranks on GPU 0 (gloo)" $?
t0=$(date +%s)
timeout "$(budget_limit 40)" python3 -m fabricbench sweep --engine torch --backend gloo --nprocs 2 --gpus 0 --ops all_reduce,all_gather,reduce_scatter \
  --sizes 64K-64M:x4 --iters 5 --warmup 2 --out "$R/lab/sweep-default.jsonl" --quiet > "$R/lab/sweep-default.txt" 2>&1
stage "lab: gloo sweep on GPU 0, default" $?
fi
if command -v ip >/dev/null && command -v tc >/dev/null && ip -V >/dev/null 2>&1; then
  t0=$(date +%s)
  timeout "$(budget_limit 80)" python3 -m fabricbench train --strategy ddp,fsdp "${lab[@]}" --fabric shaped:2gbit \
    --out "$R/lab/train-shaped.jsonl" > "$R/lab/train-shaped.txt" 2>&1
  stage "lab: ddp,fsdp under shaped:2gbit" $?
  t0=$(date +%s)
  timeout "$(budget_limit 50)" python3 -m fabricbench sweep --engine torch --backend gloo --nprocs 2 --gpus 0 --ops all_reduce,all_gather,reduce_scatter \
    --sizes 64K-64M:x4 --iters 4 --warmup 1 --fabric shaped:2gbit --out "$R/lab/sweep-shaped.jsonl" --quiet \
    > "$R/lab/sweep-shaped.txt" 2>&1
  stage "lab: gloo sweep on GPU 0, shaped:2gbit" $?
  fb relate "$R"/lab/*.jsonl --reference default > "$R/lab/relate.txt" 2>&1
  stage "lab: relate default -> shaped:2gbit" $?
else
  echo "== lab: shaped skipped (no working ip/tc: carry iproute2 in .carry/iproute2)" | tee -a "$R/summary.txt"
fi
echo "repeatability/gpu.sh: $(budget_elapsed) s in all" | tee -a "$R/summary.txt"
