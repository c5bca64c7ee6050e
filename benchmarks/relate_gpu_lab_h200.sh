#!/usr/bin/env bash
# Issue 29's GPU lab on one H200, in one call of under 9.5 minutes (500 s of stages after the wheels
# install): DDP, ZeRO-2 and FSDP with N = 2 and 3 gloo ranks with CUDA tensors on GPU 0, lab-mistral at
# batch 8 x 256 (the choice and its arithmetic: benchmarks/relate_gpu_lab.py), under default, shaped:4gbit
# and shaped:2gbit (tc in a network namespace; iproute2 carried in .carry/iproute2), the gloo sweeps relate
# needs, then relate --json and the checker of the bar (median |error| <= 5%, max <= 10%, coverage >= 80%,
# a measured e everywhere).
#   bash benchmarks/relate_gpu_lab_h200.sh OUTDIR     (DeepSpeed's wheels in .whl/, iproute2 in .carry/iproute2)
# Stages per rank count N (expected seconds on the H200, from issue 19's lab: ~15-25 s per train run, most of
# it start-up, ~10 s per sweep):
#   train default, the 3 strategies, 1 run each, 2 profiled steps (the reference's trace and e)   ~60 s
#   sweep default, the ops/dtypes/sizes those traces show                                         ~10-20 s
#   train + sweep shaped:4gbit, then shaped:2gbit (no profiled steps)                             ~2 x 75 s
# so ~220 s for N = 2 and ~240 s for N = 3; then, while BUDGET_S (default 500 s) lasts, a second default run
# per N (fresh processes, after the shaped ones: the reference's run-to-run interval) ~60 s each. Each stage's
# limit is cut to what is left of the budget; what finished is kept and related.
# Writes OUT/summary.txt (one line per stage), OUT/lab/*.jsonl (records), OUT/lab/*.txt (consoles),
# OUT/relate.txt, OUT/relate.json and OUT/check.txt (the bar, one line per figure, "ok" or "MISSED").
set -uo pipefail
R=${1:?usage: relate_gpu_lab_h200.sh OUTDIR}
mkdir -p "$R/lab"
export PYTHONUNBUFFERED=1
here=$(dirname "$0")
# shellcheck source=benchmarks/device_env.sh
. "$here/device_env.sh"
use_carried_wheels
use_carried_iproute2
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # the helper imports this checkout's fabricbench
begin=$(date +%s)
left() { local l=$(( ${BUDGET_S:-500} - ($(date +%s) - begin) )); [ "$l" -lt 1 ] && l=1; [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
stage() { echo "== $1: exit $2, $(( $(date +%s) - t0 )) s (at $(( $(date +%s) - begin )) s)" | tee -a "$R/summary.txt"; }
(nvidia-smi 2>&1; python3 -c 'import torch; print("torch", torch.__version__)'; command -v ip tc; ip -V; tc -V) \
  > "$R/machine.txt" 2>&1
python3 "$here/relate_gpu_lab.py" arithmetic > "$R/arithmetic.txt" 2>&1

# the lab's choice; the overrides exist for a smoke test of this script on CPU (DEVICE=cpu MODEL=tiny-mistral
# STEPS=4 NRANKS=2 STRATEGIES=ddp FABRICS=shaped:2gbit): the H200 run takes the defaults
STRATEGIES=${STRATEGIES:-ddp,zero2,fsdp}
FABRICS=${FABRICS:-shaped:4gbit shaped:2gbit}
NRANKS=${NRANKS:-2 3}
if [ "${DEVICE:-cuda}" = cuda ]; then dev=(--device cuda --backend gloo --gpus 0); on=(--gpus 0); else dev=(--device cpu); on=(); fi
lab=(--strategy "$STRATEGIES" --model "${MODEL:-lab-mistral}" "${dev[@]}" --batch-size 8 --seq-len 256
     --steps "${STEPS:-12}" --warmup-steps 3 --target-ci 0 --repeats 1 --timeout 90)
shaped_ok=0
if command -v ip >/dev/null && command -v tc >/dev/null && ip -V >/dev/null 2>&1; then shaped_ok=1; fi
[ "$shaped_ok" = 1 ] || echo "== shaped fabrics skipped (no working ip/tc: carry iproute2 in .carry/iproute2)" \
  | tee -a "$R/summary.txt"

train() {  # N FABRIC TAG TRACE_STEPS LIMIT
  t0=$(date +%s)
  timeout "$(left "$5")" python3 -m fabricbench train "${lab[@]}" --nprocs "$1" --fabric "$2" --trace-steps "$4" \
    --out "$R/lab/train-$3-n$1.jsonl" >> "$R/lab/train-$3-n$1.txt" 2>&1
  stage "train $2, $1 ranks" $?
}
sweep() {  # N FABRIC TAG LIMIT: the plan of the N-rank reference traces, one sweep per dtype
  python3 "$here/relate_gpu_lab.py" plan "$R/lab/train-default-n$1.jsonl" > "$R/lab/plan-n$1.txt" 2>&1
  while read -r dtype ops sizes; do
    t0=$(date +%s)
    timeout "$(left "$4")" python3 -m fabricbench sweep --engine torch --backend gloo --nprocs "$1" "${on[@]}" \
      --ops "$ops" --sizes "$sizes" --dtype "$dtype" --iters 4 --warmup 1 --fabric "$2" --quiet \
      --out "$R/lab/sweep-$3-n$1.jsonl" >> "$R/lab/sweep-$3-n$1.txt" 2>&1
    stage "sweep $2, $1 ranks, $dtype ($ops)" $?
  done < <(grep -E '^[a-z0-9]+ [a-z_,]+ [0-9,]+$' "$R/lab/plan-n$1.txt")
}

for n in $NRANKS; do
  train "$n" default default 2 120
  sweep "$n" default default 40
  if [ "$shaped_ok" = 1 ]; then
    for f in $FABRICS; do
      tag=${f//:/-}
      train "$n" "$f" "$tag" 0 100
      sweep "$n" "$f" "$tag" 40
    done
  fi
done
# the reference's second run per N, while the budget lasts (relate combines repeats by the median)
for n in $NRANKS; do
  if [ "$(left 999)" -gt 75 ]; then train "$n" default default 0 90; fi
done

t0=$(date +%s)
python3 -m fabricbench relate "$R"/lab/*.jsonl --reference default > "$R/relate.txt" 2>&1
python3 -m fabricbench relate "$R"/lab/*.jsonl --reference default --json > "$R/relate.json" 2>/dev/null
stage "relate" $?
python3 "$here/relate_gpu_lab.py" check "$R" > "$R/check.txt" 2>&1
echo "== check: exit $?" | tee -a "$R/summary.txt"
tail -8 "$R/check.txt" | tee -a "$R/summary.txt"
echo "relate_gpu_lab_h200: $(( $(date +%s) - begin )) s in all" | tee -a "$R/summary.txt"
