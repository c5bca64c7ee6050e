#!/usr/bin/env bash
# Do identical studies give the same verdict? On one GPU: N identical `fabricbench study` runs of one pair of strategies, each with its
# `report --json`, then benchmarks/repeatability/verdicts_check.py: per study the two figures with their intervals, the
# paired ratio with its interval, the verdict, rounds, the batch and its margin, wall time; and whether
# all N agree (no contradiction: "a faster" against "b faster", or "faster" against "equivalent").
#
#   PAIR=differ bash benchmarks/repeatability/verdicts_gpu.sh OUT     (DDP against FSDP, mistral-1b: FSDP ~3% faster)
#   PAIR=equal  bash benchmarks/repeatability/verdicts_gpu.sh OUT     (ZeRO-1 against ZeRO-2 on one GPU: the same work)
#
# Env: PAIR (differ | equal), or MODEL and STRATEGIES directly; N studies (default 5); MAX_REPEATS
# (default 3: one look, at round 3; 4 adds a look at round 4 for studies still undecided, ~1 min more
# each); EXTRA (more study options, appended); BUDGET_S (default 550: the whole invocation, under 9.5
# minutes); STUDY_S (default 180: a study is not started with less than this left). A study already
# finished in OUT is skipped, so a second invocation with the same OUT continues: at ~2.3-3.3 min a study
# (6 runs of 20-30 s), 5 studies take two invocations; the two pairs ~22-33 minutes of GPU time in all.
# Why these settings (docs/comparisons.md, "The H200 check"): --batch-size 16 (the batch the picker chose in
# all five earlier studies; the picker's own fix is tested on CPU), 12 steps of which 4 warm-up and no
# stepping on (--target-ci 0: the precision floor off, so rounds stop on the question alone), 3 rounds (the
# fewest that can decide anything at 95%), a 4th round (MAX_REPEATS=4) only while undecided and within
# 200 s of study.
# Writes OUT/<pair>/study-<i>/ (the study), study-<i>.json (report --json), study-<i>.log, study-<i>.wall
# (seconds), OUT/<pair>/check.txt (the table) and OUT/summary.txt (a line per stage).
set -uo pipefail
R=${1:?usage: repeatability/verdicts_gpu.sh OUTDIR}
PAIR=${PAIR:-differ}
case "$PAIR" in
  differ) MODEL=${MODEL:-mistral-1b}; STRATEGIES=${STRATEGIES:-ddp,fsdp} ;;
  equal)  MODEL=${MODEL:-mistral-1b}; STRATEGIES=${STRATEGIES:-zero1,zero2} ;;
  *)      MODEL=${MODEL:?PAIR is neither differ nor equal: set MODEL}; STRATEGIES=${STRATEGIES:?set STRATEGIES} ;;
esac
N=${N:-5}
D="$R/$PAIR"
mkdir -p "$D"
export PYTHONUNBUFFERED=1
here=$(dirname "$0")
# shellcheck source=benchmarks/device/env.sh
. "$here/../device/env.sh"
use_carried_wheels
begin=$(date +%s)
left() { echo $(( ${BUDGET_S:-550} - ($(date +%s) - begin) )); }
(nvidia-smi; python3 -c 'import torch; print("torch", torch.__version__)') > "$R/machine.txt" 2>&1
# shellcheck disable=SC2206
extra=(${EXTRA:-})
for i in $(seq 1 "$N"); do
  out="$D/study-$i"
  if [ -s "$out.json" ] && grep -q '"comparisons"' "$out.json"; then continue; fi
  if [ "$(left)" -lt "${STUDY_S:-180}" ]; then
    echo "== $PAIR: $(left) s left, study $i not started: run this command again with the same OUT" \
      | tee -a "$R/summary.txt"
    break
  fi
  rm -rf "$out"  # a study cut by the budget of an earlier invocation starts again, whole
  t0=$(date +%s)
  timeout "$(( $(left) - 10 ))" python3 -m fabricbench study --gpus 0 --model "$MODEL" --fabrics default \
    --strategies "$STRATEGIES" --batch-size 16 --steps 12 --warmup-steps 4 --target-ci 0 \
    --max-repeats "${MAX_REPEATS:-3}" --repeat-budget 200 --train-timeout 150 "${extra[@]}" --out "$out" > "$out.log" 2>&1
  rc=$?
  echo $(( $(date +%s) - t0 )) > "$out.wall"
  echo "== $PAIR study $i: exit $rc, $(cat "$out.wall") s (at $(( $(date +%s) - begin )) s)" | tee -a "$R/summary.txt"
  python3 -m fabricbench report "$out" --json > "$out.json" 2>>"$out.log"
done
# PYTHONPATH: the checker lives in benchmarks/ and imports this checkout's fabricbench
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} python3 "$here/verdicts_check.py" "$D"/study-*.json > "$D/check.txt" 2>&1
cat "$D/check.txt"
echo "== $PAIR check: $(tail -1 "$D/check.txt")" | tee -a "$R/summary.txt"
echo "verdicts_h200 ($PAIR): $(( $(date +%s) - begin )) s in all" | tee -a "$R/summary.txt"
