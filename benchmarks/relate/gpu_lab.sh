#!/usr/bin/env bash
# The one-GPU relate lab in one command of at most 9 minutes on one GPU: N gloo ranks with
# CUDA tensors on GPU 0, a model trained under default and shaped fabrics (tc in a network namespace;
# iproute2 carried in .carry/iproute2, DeepSpeed's wheels in .whl/: benchmarks/device/carry_iproute2.sh and
# benchmarks/device/carry_wheels.sh build them here, benchmarks/device/env.sh uses them there), the sweeps
# relate needs in the training's own terms (each traced dtype, sizes bracketing every traced size, the
# run's rank count and GPU), then relate and the figures: median |error|, largest, coverage of the 95%
# intervals (benchmarks/relate/gpu_lab.py check).
#   bash benchmarks/relate/gpu_lab.sh [--model M] [--rates 4gbit,2gbit,3gbit,6gbit] [--ranks 3]
#        [--strategies zero2,fsdp,ddp] [--budget 525] [OUTDIR]
# The defaults (lab-mistral, batch 8 x 256; the choice and its arithmetic: gpu_lab.py) ask for 12
# held-out points: 3 strategies x 4 rates on 3 ranks. Why one rank count: each costs a reference run and
# its sweeps (~100 s on the H200) that hold no point themselves, each rate ~100 s for 3 points; 9 minutes
# hold a reference and 4 rates, not two references and 2 rates each.
# --ranks 3,2 adds the 2-rank points where the budget allows.
# Order: first a short warm-up train on default, discarded (OUTDIR/warmup/: a machine just started ran the
# first train 1.2-1.7x slow); then per rank count (in the order given: the 3-rank points first):
#   train default (every strategy, 4 profiled steps: the reference's trace, calls and e; the run's own
#     calls calibrate a price only where their ratio to the sweep holds over its repeats, every profiled
#     step of every reference run)
#   the sweeps that trace needs on default, one per traced dtype (gpu_lab.py plan)
#   per rate, in the order given: its sweeps, the same again with `sweep --gap` (each call after the token
#     bucket refilled: the link credit a call realises, credit.py), then train on it (2 profiled steps:
#     never used by a prediction; check.txt's last lines set those runs' own calls against their fabric's sweep)
#   after half the rates, a second reference run where the budget holds it and the rest
# then, where the budget holds them and what follows, a second train run of every rate, in the reverse order
# (relate combines a fabric's runs: one run's held-out point is as noisy as the host was while it ran);
# then, for every rank count, a last reference run (fresh processes: the reference's run-to-run interval; relate
# takes the median of its runs) and a second set of the reference's sweeps.
# The budget (seconds from this script's start, wheels' install included; relate and check take ~5 s
# after it) is spent stage by stage: a stage starts only when what is left holds its expected length (the
# longest of its kind so far, +10%: per strategy of a train command, per sweep) and the reserve, so a sweep
# is never cut. A rate whose sweeps and every strategy do not fit runs the strategies that fit, in the
# order given (zero2 and fsdp first: the points the lab is for), and summary.txt names what was skipped.
# A stage still running at the budget's end is ended and marked CUT there (not expected: it was expected
# to fit). On the H200 (the first one-GPU lab: ~24 s per strategy, ~9 s per sweep on default, ~15-18 s shaped)
# the defaults need ~10 s of wheels, ~95 s of reference and ~100 s per rate: ~510 s in all. On an H100
# without the warm-up, the middle reference and the second runs they took 319 s; with the first two,
# ~380 s; with all three, 314-329 s on an H100 machine whose steps ran ~35% shorter
# (results/h100-2026-12-06/three-strategies-*), ~480 s expected on the slower one.
# Writes OUTDIR/summary.txt (one line per stage), OUTDIR/lab/*.jsonl (records), OUTDIR/lab/*.txt (consoles),
# OUTDIR/relate.txt (relate's table), OUTDIR/relate.json and OUTDIR/check.txt (the figures and the bar).
set -uo pipefail
begin=$(date +%s)
MODEL=${MODEL:-lab-mistral} RATES=4gbit,2gbit,3gbit,6gbit RANKS=3 STRATEGIES=zero2,fsdp,ddp BUDGET_S=${BUDGET_S:-525}
R=""
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --strategies) STRATEGIES=$2; shift 2 ;;
    --budget) BUDGET_S=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    -*) echo "relate/gpu_lab.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) R=$1; shift ;;
  esac
done
R=${R:-benchmarks/relate/results/gpu-lab}
case "$BUDGET_S" in ''|*[!0-9]*) echo "relate/gpu_lab.sh: --budget takes whole seconds, not $BUDGET_S" >&2; exit 2 ;; esac
for n in ${RANKS//,/ }; do
  case "$n" in ''|*[!0-9]*|0|1) echo "relate/gpu_lab.sh: --ranks takes counts of 2 or more, not $n" >&2; exit 2 ;; esac
done
mkdir -p "$R/lab"
: > "$R/summary.txt"
export PYTHONUNBUFFERED=1
here=$(dirname "$0")
# shellcheck source=benchmarks/device/env.sh
. "$here/../device/env.sh"
(nvidia-smi 2>&1; python3 -c 'import torch; print("torch", torch.__version__)' 2>&1) > "$R/machine.txt" &
use_carried_wheels
use_carried_iproute2
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # the helper imports this checkout's fabricbench
wait
(command -v ip tc; ip -V; tc -V) >> "$R/machine.txt" 2>&1
echo "== lab: model $MODEL, ranks ${RANKS//,/ }, rates ${RATES//,/ }, strategies $STRATEGIES, budget $BUDGET_S s" \
  | tee -a "$R/summary.txt"
[ "$MODEL" = lab-mistral ] && python3 "$here/gpu_lab.py" arithmetic > "$R/arithmetic.txt" 2>&1

# DEVICE=cpu STEPS=8 WARMUP=3 exist for a smoke test of this script on a CPU machine; the H200 run takes the defaults
if [ "${DEVICE:-cuda}" = cuda ]; then dev=(--device cuda --backend gloo --gpus 0); on=(--gpus 0); else dev=(--device cpu); on=(); fi
# 30 steps after 5 warm-ups: a run costs ~10 s of start-up and ~2 s of steps since the start-up work, and with 9 timed
# steps one observed FSDP step had a 95% interval of +-8% on the H100 lab, as wide as the bar
lab=(--model "$MODEL" "${dev[@]}" --batch-size 8 --seq-len 256 --steps "${STEPS:-30}" --warmup-steps "${WARMUP:-5}"
     --target-ci 0 --repeats 1 --timeout 90)
shaped_ok=0
if command -v ip >/dev/null && command -v tc >/dev/null && ip -V >/dev/null 2>&1; then shaped_ok=1; fi
[ "$shaped_ok" = 1 ] || echo "== shaped fabrics skipped (no working ip/tc: carry iproute2 in .carry/iproute2)" \
  | tee -a "$R/summary.txt"

RESERVE=10        # seconds: relate and check, after the budget (one process, ~5 s)
strat_s=30        # expected seconds of one strategy in a train command (mostly start-up) until one is measured
sweep_s=30        # and of one sweep
nstrat=$(echo "${STRATEGIES//,/ }" | wc -w)
now() { echo $(( $(date +%s) - begin )); }
left() { echo $(( BUDGET_S - $(now) )); }
fits() { [ "$(left)" -ge $(( $1 + RESERVE )) ]; }   # SECONDS: does a stage of that length fit?
stage() {  # WHAT RC SECONDS
  local cut=""; { [ "$2" = 124 ] || [ "$2" = 137 ]; } && [ "$(left)" -le 1 ] && cut=" CUT by the budget"
  echo "== $1: exit $2, $3 s (at $(now) s)$cut" | tee -a "$R/summary.txt"
}
skip() { echo "== $1: skipped, $(left) s of the budget left, $2 s expected" | tee -a "$R/summary.txt"; }
limit() { local l; l=$(( $(left) > 1 ? $(left) : 1 )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
longest() {  # OLD MEASURED COUNT: the estimate after a measurement (the longest so far, +10%)
  # never under 1 s: a stage that failed at once (bad options) must not leave a zero to divide by
  local v=$(( $2 * 110 / 100 > 1 ? $2 * 110 / 100 : 1 )); [ "$3" = 0 ] || [ "$v" -gt "$1" ] && echo "$v" || echo "$1"
}

ntrains=0 nsweeps=0
train() {  # N FABRIC TAG TRACE_STEPS STRATEGIES
  local t0 rc d k; t0=$(date +%s); k=$(echo "${5//,/ }" | wc -w)
  timeout "$(limit 300)" python3 -m fabricbench train --strategies "$5" "${lab[@]}" --nprocs "$1" --fabric "$2" \
    --trace-steps "$4" --out "$R/lab/train-$3-n$1.jsonl" >> "$R/lab/train-$3-n$1.txt" 2>&1
  rc=$?; d=$(( $(date +%s) - t0 ))
  strat_s=$(longest "$strat_s" $(( d / k )) "$ntrains"); ntrains=$(( ntrains + 1 ))
  stage "train $2, $1 ranks, $5" "$rc" "$d"
}
sweeps() {  # N FABRIC TAG [GAP]: one sweep per line of the N-rank plan ("DTYPE OPS SIZES"), GAP: sweep --gap
  # 12 timed iterations after 3 warm-ups: with 4 after 1 (an H100 lab run) all_gather at 256 KiB kept
  # a warm-up tail of 10-70 ms in its median on every fabric (cv 1.2), which priced FSDP's
  # per-layer gathers at ~4x what the run's own calls took; 12 samples also give each size a median CI
  local t0 rc d dtype ops sizes gap=()
  [ -n "${4:-}" ] && gap=(--gap "$4")
  while read -r dtype ops sizes; do
    t0=$(date +%s)
    timeout "$(limit 120)" python3 -m fabricbench sweep --engine torch --backend gloo --nprocs "$1" "${on[@]}" \
      --ops "$ops" --sizes "$sizes" --dtype "$dtype" --iters 12 --warmup 3 --fabric "$2" --quiet "${gap[@]}" \
      --out "$R/lab/sweep-$3-n$1.jsonl" >> "$R/lab/sweep-$3-n$1.txt" 2>&1
    rc=$?; d=$(( $(date +%s) - t0 ))
    sweep_s=$(longest "$sweep_s" "$d" "$nsweeps"); nsweeps=$(( nsweeps + 1 ))
    stage "sweep $2, $1 ranks, $dtype ($ops)${4:+, gap $4 s}" "$rc" "$d"
  done < <(grep -E '^[a-z0-9]+ [a-z_,]+ [0-9,]+$' "$R/lab/plan-n$1.txt")
}
# The idle gap of a shaped fabric's gapped sweep: 3 x B/R (the token bucket refilled whole), at least 5 ms.
# What a call after it saves against the back-to-back sweep is the link credit relate takes (credit.py:
# priced as a whole bucket per gap, FSDP came out 5-10% fast on every rate of an H100 lab run)
gap_of() {
  python3 -c "from fabricbench.relating.credit import measuring_gap_s as g; print(f'{g(\"$1\") or 0.005:.4f}')"
}
plan_lines() { local c; c=$(grep -cE '^[a-z0-9]+ [a-z_,]+ [0-9,]+$' "$R/lab/plan-n$1.txt" 2>/dev/null); echo "${c:-0}"; }
cell() {  # N FABRIC: the fabric's sweeps (back to back, then after a gap), then its train run of as many
  # strategies as fit, in the order given
  local tag=${2//:/-} sw k
  sw=$(( 2 * $(plan_lines "$1") * sweep_s ))
  k=$(( ($(left) - RESERVE - sw) / strat_s )); [ "$k" -gt "$nstrat" ] && k=$nstrat
  if [ "$k" -lt 1 ]; then skip "sweeps + train $2, $1 ranks" $(( sw + strat_s )); return; fi
  [ "$k" -lt "$nstrat" ] && skip "$(echo "${STRATEGIES//,/ }" | cut -d' ' -f$(( k + 1 ))- | tr ' ' ,) on $2, $1 ranks" \
    $(( sw + nstrat * strat_s ))
  sweeps "$1" "$2" "$tag"
  sweeps "$1" "$2" "gap-$tag" "$(gap_of "$2")"
  train "$1" "$2" "$tag" 2 "$(echo "${STRATEGIES//,/ }" | cut -d' ' -f1-"$k" | tr ' ' ,)"
}

# A warm-up before anything is measured, discarded (warmup/, which relate never reads): on a machine just
# started, the first train command's steps ran 1.2-1.7x slower than the same command's 4 minutes later, every
# strategy (an H100 lab run: zero2 44.5 against 26.2 ms, fsdp 57.9 against 33.5, ddp 14.9 against
# 12.3), while the sweep right after it matched its later twin; that reference put every prediction 20-40%
# high. It also pays DeepSpeed's one-time op build (~8 s) outside the reference. Short: 8 steps, no trace.
warmup() {  # N
  local t0 rc; t0=$(date +%s); mkdir -p "$R/warmup"
  timeout "$(limit 150)" python3 -m fabricbench train --strategies "$STRATEGIES" "${lab[@]}" --nprocs "$1" \
    --fabric default --steps 8 --warmup-steps 3 --trace-steps 0 --out "$R/warmup/train-n$1.jsonl" \
    >> "$R/warmup/train-n$1.txt" 2>&1
  rc=$?; stage "warm-up train default, $1 ranks, $STRATEGIES (discarded)" "$rc" $(( $(date +%s) - t0 ))
}
nrates=$(echo "${RATES//,/ }" | wc -w)
first=1
for n in ${RANKS//,/ }; do
  need=$(( 2 * nstrat * strat_s + 4 * sweep_s ))
  if [ "$first" = 0 ] && ! fits "$need"; then skip "every stage at $n ranks" "$need"; continue; fi
  [ "$first" = 1 ] && warmup "$n"
  first=0
  train "$n" default default 4 "$STRATEGIES"
  python3 "$here/gpu_lab.py" plan "$R/lab/train-default-n$n.jsonl" > "$R/lab/plan-n$n.txt" 2>&1
  sweeps "$n" default default
  if [ "$shaped_ok" = 1 ]; then
    i=0
    for rate in ${RATES//,/ }; do
      cell "$n" "shaped:$rate"; i=$(( i + 1 ))
      # The reference's run in the middle of the rates, when what is left holds it, the rates still to come
      # and the last run: relate takes the median of a fabric's runs, so a reference run that drifted (a
      # machine slow at first, or later) moves no prediction by itself
      if [ "$i" = $(( (nrates + 1) / 2 )) ] && [ "$i" -lt "$nrates" ]; then
        need=$(( (2 + (nrates - i)) * nstrat * strat_s + (nrates - i) * 2 * $(plan_lines "$n") * sweep_s ))
        if fits "$need"; then train "$n" default default 4 "$STRATEGIES"
        else skip "middle train default, $n ranks" "$need"; fi
      fi
    done
  fi
done
# A second run of every rate's train, in the reverse order, where the budget holds it and what follows (the
# reference's last run and sweeps): a held-out point from one run is as noisy as the host was for those ~10
# s. On an H100 VM quiet by its own readings, one ZeRO-2 run at 6gbit stepped 36-50 ms throughout, 27%
# slower than the same lab's minutes before and slower than its own 4gbit point, and missed by -13.6%
# where the earlier lab missed by +8.4%. relate combines a fabric's runs (the median:
# their mean for two) with the interval run to run, and notes runs that disagree beyond their intervals.
after=0  # what follows: every rank count's last reference run and sweeps
for n in ${RANKS//,/ }; do
  [ -s "$R/lab/train-default-n$n.jsonl" ] && after=$(( after + nstrat * strat_s + $(plan_lines "$n") * sweep_s ))
done
for n in ${RANKS//,/ }; do
  for rate in $(echo "${RATES//,/ }" | tr ' ' '\n' | tac); do
    tag=shaped-$rate
    [ -s "$R/lab/train-$tag-n$n.jsonl" ] || continue
    need=$(( nstrat * strat_s + after ))
    if fits "$need"; then train "$n" "shaped:$rate" "$tag" 2 "$STRATEGIES"
    else skip "second train shaped:$rate, $n ranks" "$need"; fi
  done
done
for n in ${RANKS//,/ }; do  # the reference's last run per N (relate combines runs by the median)
  [ -s "$R/lab/train-default-n$n.jsonl" ] || continue
  need=$(( nstrat * strat_s ))
  if fits "$need"; then train "$n" default default 4 "$STRATEGIES"; else skip "last train default, $n ranks" "$need"; fi
  # and the reference's sweeps again: every prediction is the fabric's price less the reference's, so a
  # shift of the reference's sweep moves every point of a strategy (two H100 lab runs of the same code: one's
  # default sweep priced FSDP's calls 35% above the other's, its shaped sweeps and own calls alike: FSDP
  # -18..-21% against -5..-10%);
  # relate combines the two by the median per size
  need=$(( $(plan_lines "$n") * sweep_s ))
  if fits "$need"; then sweeps "$n" default default; else skip "second sweeps default, $n ranks" "$need"; fi
done

t0=$(date +%s)
python3 "$here/gpu_lab.py" check "$R" --strategies "$STRATEGIES" --ranks "$RANKS" --rates "$RATES" \
  > "$R/check.txt" 2>&1
rc=$?
stage "relate and check" "$rc" $(( $(date +%s) - t0 ))
grep -E '^(figures|bar|outside)' "$R/check.txt" | tee -a "$R/summary.txt"
echo "relate_gpu_lab_h200: $(now) s in all" | tee -a "$R/summary.txt"
exit "$rc"
