#!/usr/bin/env bash
# The one-GPU relate lab (issues 29, 35) in one command of at most 9 minutes on one H200: N gloo ranks with
# CUDA tensors on GPU 0, a model trained under default and shaped fabrics (tc in a network namespace;
# iproute2 carried in .carry/iproute2, DeepSpeed's wheels in .whl/: benchmarks/device_env.sh), the sweeps
# relate needs in the training's own terms (each traced dtype, sizes bracketing every traced size, the
# run's rank count and GPU), then relate and the figures: median |error|, largest, coverage of the 95%
# intervals (benchmarks/relate_gpu_lab.py check).
#   bash benchmarks/relate_gpu_lab_h200.sh [--model M] [--rates 4gbit,2gbit,3gbit,6gbit] [--ranks 3]
#        [--strategies ddp,zero2,fsdp] [--budget 525] [OUTDIR]       (OUTDIR: benchmarks/results/h200-1gpu/relate-lab)
# The defaults (lab-mistral, batch 8 x 256; the choice and its arithmetic: relate_gpu_lab.py) ask for 12
# held-out points: 3 strategies x 4 rates on 3 ranks. Why one rank count: each costs a reference run and
# its sweeps (~100 s on the H200) that hold no point themselves, each rate ~100 s for 3 points; 9 minutes
# hold a reference and 4 rates, not two references and 2 rates each (inferred from issue 35's run,
# whose 500 s held six train commands of 3 strategies and five sweeps: ~70 s and ~15 s each).
# --ranks 3,2 adds the 2-rank points where the budget allows.
# Order, per rank count (in the order given: the 3-rank points first):
#   train default (3 strategies, 2 profiled steps: the reference's trace, calls and e)
#   the sweeps that trace needs on default, one per traced dtype (relate_gpu_lab.py plan)
#   per rate: its sweeps, then train on it
# then, for every rank count, a second reference run (fresh processes: the reference's run-to-run interval).
# The budget (seconds from this script's start, wheels' install included; relate and check take ~10 s
# after it) is spent stage by stage: a stage starts only when what is left holds its expected length (the
# longest of its kind so far in this run; 90 s for the first train, 30 s for the first sweep) and the
# reserve, so a sweep is never cut; what was skipped, and why, is in summary.txt. A stage still running
# at the budget's end is ended and marked CUT there (never expected: its length was expected to fit).
# Writes OUTDIR/summary.txt (one line per stage), OUTDIR/lab/*.jsonl (records), OUTDIR/lab/*.txt (consoles),
# OUTDIR/relate.txt (relate's table), OUTDIR/relate.json and OUTDIR/check.txt (the figures and the bar).
set -uo pipefail
begin=$(date +%s)
MODEL=${MODEL:-lab-mistral} RATES=4gbit,2gbit,3gbit,6gbit RANKS=3 STRATEGIES=ddp,zero2,fsdp BUDGET_S=${BUDGET_S:-525}
R=""
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --strategies) STRATEGIES=$2; shift 2 ;;
    --budget) BUDGET_S=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    -*) echo "relate_gpu_lab_h200.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) R=$1; shift ;;
  esac
done
R=${R:-benchmarks/results/h200-1gpu/relate-lab}
case "$BUDGET_S" in ''|*[!0-9]*) echo "relate_gpu_lab_h200.sh: --budget takes whole seconds, not $BUDGET_S" >&2; exit 2 ;; esac
for n in ${RANKS//,/ }; do
  case "$n" in ''|*[!0-9]*|0|1) echo "relate_gpu_lab_h200.sh: --ranks takes counts of 2 or more, not $n" >&2; exit 2 ;; esac
done
mkdir -p "$R/lab"
: > "$R/summary.txt"
export PYTHONUNBUFFERED=1
here=$(dirname "$0")
# shellcheck source=benchmarks/device_env.sh
. "$here/device_env.sh"
(nvidia-smi 2>&1; python3 -c 'import torch; print("torch", torch.__version__)' 2>&1) > "$R/machine.txt" &
use_carried_wheels
use_carried_iproute2
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # the helper imports this checkout's fabricbench
wait
(command -v ip tc; ip -V; tc -V) >> "$R/machine.txt" 2>&1
echo "== lab: model $MODEL, ranks ${RANKS//,/ }, rates ${RATES//,/ }, strategies $STRATEGIES, budget $BUDGET_S s" \
  | tee -a "$R/summary.txt"
[ "$MODEL" = lab-mistral ] && python3 "$here/relate_gpu_lab.py" arithmetic > "$R/arithmetic.txt" 2>&1

# DEVICE=cpu STEPS=4 exist for a smoke test of this script on a CPU machine; the H200 run takes the defaults
if [ "${DEVICE:-cuda}" = cuda ]; then dev=(--device cuda --backend gloo --gpus 0); on=(--gpus 0); else dev=(--device cpu); on=(); fi
lab=(--strategy "$STRATEGIES" --model "$MODEL" "${dev[@]}" --batch-size 8 --seq-len 256
     --steps "${STEPS:-12}" --warmup-steps 3 --target-ci 0 --repeats 1 --timeout 90)
shaped_ok=0
if command -v ip >/dev/null && command -v tc >/dev/null && ip -V >/dev/null 2>&1; then shaped_ok=1; fi
[ "$shaped_ok" = 1 ] || echo "== shaped fabrics skipped (no working ip/tc: carry iproute2 in .carry/iproute2)" \
  | tee -a "$R/summary.txt"

RESERVE=15        # relate and check, after the budget
train_s=90        # expected seconds of a train command (3 strategies) until one is measured
sweep_s=30        # and of one sweep
now() { echo $(( $(date +%s) - begin )); }
left() { echo $(( BUDGET_S - $(now) )); }
fits() { [ "$(left)" -ge $(( $1 + RESERVE )) ]; }   # SECONDS: does a stage of that length fit?
stage() {  # WHAT RC SECONDS
  local cut=""; { [ "$2" = 124 ] || [ "$2" = 137 ]; } && [ "$(left)" -le 1 ] && cut=" CUT by the budget"
  echo "== $1: exit $2, $3 s (at $(now) s)$cut" | tee -a "$R/summary.txt"
}
skip() { echo "== $1: skipped, $(left) s of the budget left, $2 s expected" | tee -a "$R/summary.txt"; }
limit() { local l; l=$(( $(left) > 1 ? $(left) : 1 )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }

train() {  # N FABRIC TAG TRACE_STEPS
  local t0 rc d; t0=$(date +%s)
  timeout "$(limit 240)" python3 -m fabricbench train "${lab[@]}" --nprocs "$1" --fabric "$2" --trace-steps "$4" \
    --out "$R/lab/train-$3-n$1.jsonl" >> "$R/lab/train-$3-n$1.txt" 2>&1
  rc=$?; d=$(( $(date +%s) - t0 ))
  [ "$d" -gt "$train_s" ] || [ "$ntrains" = 0 ] && train_s=$(( d * 115 / 100 ))
  ntrains=$(( ntrains + 1 ))
  stage "train $2, $1 ranks" "$rc" "$d"
}
ntrains=0 nsweeps=0
sweeps() {  # N FABRIC TAG: one sweep per line of the N-rank plan ("DTYPE OPS SIZES")
  local t0 rc d dtype ops sizes
  while read -r dtype ops sizes; do
    t0=$(date +%s)
    timeout "$(limit 120)" python3 -m fabricbench sweep --engine torch --backend gloo --nprocs "$1" "${on[@]}" \
      --ops "$ops" --sizes "$sizes" --dtype "$dtype" --iters 4 --warmup 1 --fabric "$2" --quiet \
      --out "$R/lab/sweep-$3-n$1.jsonl" >> "$R/lab/sweep-$3-n$1.txt" 2>&1
    rc=$?; d=$(( $(date +%s) - t0 ))
    [ "$d" -gt "$sweep_s" ] || [ "$nsweeps" = 0 ] && sweep_s=$(( d * 130 / 100 ))
    nsweeps=$(( nsweeps + 1 ))
    stage "sweep $2, $1 ranks, $dtype ($ops)" "$rc" "$d"
  done < <(grep -E '^[a-z0-9]+ [a-z_,]+ [0-9,]+$' "$R/lab/plan-n$1.txt")
}
cell() {  # N FABRIC: the fabric's sweeps, then its train run, if both fit
  local tag=${2//:/-} need
  need=$(( train_s + $(plan_lines "$1") * sweep_s ))
  if ! fits "$need"; then skip "sweeps + train $2, $1 ranks" "$need"; return; fi
  sweeps "$1" "$2" "$tag"
  train "$1" "$2" "$tag" 0
}
plan_lines() { local c; c=$(grep -cE '^[a-z0-9]+ [a-z_,]+ [0-9,]+$' "$R/lab/plan-n$1.txt" 2>/dev/null); echo "${c:-0}"; }

first=1
for n in ${RANKS//,/ }; do
  if [ "$first" = 0 ] && ! fits $(( 2 * train_s + 4 * sweep_s )); then
    skip "every stage at $n ranks" $(( 2 * train_s + 4 * sweep_s )); continue
  fi
  first=0
  train "$n" default default 2
  python3 "$here/relate_gpu_lab.py" plan "$R/lab/train-default-n$n.jsonl" > "$R/lab/plan-n$n.txt" 2>&1
  sweeps "$n" default default
  if [ "$shaped_ok" = 1 ]; then
    for rate in ${RATES//,/ }; do cell "$n" "shaped:$rate"; done
  fi
done
for n in ${RANKS//,/ }; do  # the reference's second run per N (relate combines runs by the median)
  [ -s "$R/lab/train-default-n$n.jsonl" ] || continue
  if fits "$train_s"; then train "$n" default default 0; else skip "second train default, $n ranks" "$train_s"; fi
done

t0=$(date +%s)
python3 "$here/relate_gpu_lab.py" check "$R" --strategies "$STRATEGIES" --ranks "$RANKS" --rates "$RATES" \
  > "$R/check.txt" 2>&1
rc=$?
stage "relate and check" "$rc" $(( $(date +%s) - t0 ))
grep -E '^(figures|bar|outside)' "$R/check.txt" | tee -a "$R/summary.txt"
echo "relate_gpu_lab_h200: $(now) s in all" | tee -a "$R/summary.txt"
exit "$rc"
