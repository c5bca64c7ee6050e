#!/usr/bin/env bash
# The built-in qualification specs at each --level on one GPU, timed: what `qualify --level 1|2|3` costs
# on real hardware against what `--dry-run` estimates. builtin:h200-sxm-8 runs at levels 1, 2 and 3; the
# other built-in specs (h100-sxm-8, h200-nvl-8, pcie-gen5-8) at level 1 while time is left. One GPU is not
# eight: the wiring check is critical (gpu_count 1 != 8, exit 1 expected) and the pair, transport and
# contrast checks are waived with the reason; every other check measures for real.
#
#   bash benchmarks/qualify/levels_gpu.sh OUTDIR          (on the GPU machine; ~8 minutes in all)
#
# Knobs: L3_SKIP="check,check" (--skip at level 3, to cut it down where it cannot fit; default none),
#        L1_S, L2_S, L3_S (each level's time limit, s: 90, 180, 240), OTHERS=0 (skip the other specs).
# Then, while time is left, --init from the level-2 run and that spec twice (the second with the first as
# --baseline): the same machine passes both. Files: OUTDIR/times.txt (one line per run: spec, level, exit, wall s, dry-run estimate), OUTDIR/<spec>-L<n>/
#        (results.jsonl, verdicts.json, junit.xml, report.md/html), <spec>-L<n>.prom (Prometheus textfile,
#        when prometheus_client is installed), <spec>-L<n>.txt (the terminal output), build.log.
set -uo pipefail
R=${1:?usage: bash benchmarks/qualify/levels_gpu.sh OUTDIR}
mkdir -p "$R"
R=$(cd "$R" && pwd)
export PYTHONUNBUFFERED=1
# shellcheck source=benchmarks/device/env.sh
. "$(dirname "$0")/../device/env.sh"
use_carried_wheels
T0=$(date +%s)
build_fabricbench "$R/build.log"
echo "build: exit $?, $(( $(date +%s) - T0 )) s" | tee "$R/times.txt"
(nvidia-smi -L; nvidia-smi topo -m; env | grep -E '^NCCL_') > "$R/machine.txt" 2>&1
PROM=1
python3 -c "import prometheus_client" 2>/dev/null || { PROM=0; echo "prometheus_client missing: no .prom files" | tee -a "$R/times.txt"; }

run_level() {  # spec level limit_s [extra qualify args...]
  local spec=$1 level=$2 limit=$3; shift 3
  local tag="$spec-L$level" est start rc
  est=$(python3 -m fabricbench qualify --spec "builtin:$spec" --level "$level" --dry-run "$@" 2>&1 | tail -1)
  local prom=()
  [ "$PROM" = 1 ] && prom=(--prometheus "$R/$tag.prom")
  start=$(date +%s%N)
  timeout "$limit" python3 -m fabricbench qualify --spec "builtin:$spec" --level "$level" --out "$R/$tag" \
    "${prom[@]}" "$@" > "$R/$tag.txt" 2>&1
  rc=$?
  local ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '%-12s level %s exit %-3s %4d.%01d s   (%s)\n' "$spec" "$level" "$rc" $(( ms / 1000 )) \
    $(( ms % 1000 / 100 )) "${est#estimate: }" | tee -a "$R/times.txt"
  python3 - "$R/$tag/verdicts.json" <<'PY' 2>/dev/null | tee -a "$R/times.txt"
import json, sys
d = json.load(open(sys.argv[1]))
for v in d["verdicts"]:
    print(f"    {v['check']:26s} {v['severity']:8s} {v['code']:22s} {v['duration_s']:6.1f} s  {v['message'][:90]}")
PY
}

run_level h200-sxm-8 1 "${L1_S:-90}"
run_level h200-sxm-8 2 "${L2_S:-180}"
skip=()
[ -n "${L3_SKIP:-}" ] && skip=(--skip "$L3_SKIP")
run_level h200-sxm-8 3 "${L3_S:-240}" "${skip[@]}"
# --init from the level-2 run, then that spec twice: the second run with the first as --baseline at the
# spec's own baseline_tolerance (from the measured spread). The same machine must pass both (exit 0).
if [ $(( $(date +%s) - T0 )) -lt 380 ] && [ -f "$R/h200-sxm-8-L2/results.jsonl" ]; then
  python3 -m fabricbench qualify --init "$R/known-good.toml" --from "$R/h200-sxm-8-L2/results.jsonl" \
    > "$R/init.txt" 2>&1
  echo "init: exit $?" | tee -a "$R/times.txt"
  for run in init baseline; do
    extra=()
    [ "$run" = baseline ] && extra=(--baseline "$R/init/results.jsonl")
    start=$(date +%s)
    timeout 90 python3 -m fabricbench qualify --spec "$R/known-good.toml" --out "$R/$run" "${extra[@]}" \
      > "$R/$run.txt" 2>&1
    echo "known-good spec, $run run: exit $? (0 expected), $(( $(date +%s) - start )) s" | tee -a "$R/times.txt"
  done
  grep -E "^ *baseline|FB_" "$R/baseline.txt" | head -5 | tee -a "$R/times.txt"
fi
if [ "${OTHERS:-1}" = 1 ]; then
  for spec in h100-sxm-8 h200-nvl-8 pcie-gen5-8; do
    [ $(( $(date +%s) - T0 )) -lt 440 ] || { echo "$spec level 1: skipped (time)" | tee -a "$R/times.txt"; continue; }
    run_level "$spec" 1 60
  done
fi
echo "total: $(( $(date +%s) - T0 )) s" | tee -a "$R/times.txt"
