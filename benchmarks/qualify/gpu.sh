#!/usr/bin/env bash
# Qualification on one GPU: the built-in 8x H200 SXM spec (pair checks waived with the reason; the GPU
# count fails honestly, 1 is not 8), then `--init` a spec from that run and qualify against it (every
# check passes), then a regression check against the first run (--baseline), then the GPU tier of the
# qualify tests. Copies report.html and junit.xml of each run to OUTDIR. Writes everything under OUTDIR.
#   bash benchmarks/qualify/gpu.sh OUTDIR
set -uo pipefail
OUT=${1:-${OUT:-.}}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PYTHONUNBUFFERED=1
# shellcheck source=benchmarks/device/env.sh
. "$(dirname "$0")/../device/env.sh"
use_carried_wheels  # orjson and other dependencies the machine lacks, from .whl/
fb() { python3 -m fabricbench "$@"; }
S="$OUT/summary.txt"
: > "$S"

nvidia-smi -L > "$OUT/gpus.txt" 2>&1
nvidia-smi topo -m > "$OUT/topo-m.txt" 2>&1
fb qualify --list-specs > "$OUT/list-specs.txt" 2>&1

# 1. The built-in spec at its standard level (2). Expected exit 1: wiring is critical (gpu_count 1 != 8);
#    the pair checks (transports, nvlink_carries_default, peer_copies) are waived with the reason (info).
start=$(date +%s)
fb qualify --spec builtin:h200-sxm-8 --level 2 --out "$OUT/builtin" > "$OUT/builtin.txt" 2>&1
rc=$?
echo "builtin:h200-sxm-8 on one H200: exit $rc (1 expected: the GPU count), $(( $(date +%s) - start )) s" | tee -a "$S"
cp "$OUT/builtin/report.html" "$OUT/qualify_builtin_report.html" 2>/dev/null
cp "$OUT/builtin/junit.xml" "$OUT/qualify_builtin_junit.xml" 2>/dev/null
python3 - "$OUT/builtin/verdicts.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
d = json.load(open(sys.argv[1]))
for v in d["verdicts"]:
    print(f"  {v['check']:24s} {v['status']:7s} {v['severity']:8s} {v['code']:20s} {v['message']}")
PY

# 2. A spec from this known-good run (x 0.8: small-message latency ceilings are measured / margin and an
#    8 B time varies by 10-20% between runs), then qualify against it: expected exit 0.
fb qualify --init "$OUT/h200-known-good.toml" --from "$OUT/builtin/results.jsonl" --factor 0.8 >> "$S" 2>&1
echo "init: exit $?" | tee -a "$S"
start=$(date +%s)
fb qualify --spec "$OUT/h200-known-good.toml" --out "$OUT/init" > "$OUT/init.txt" 2>&1
echo "qualify against the init spec: exit $? (0 expected; 4 if a check passed only on a retry), $(( $(date +%s) - start )) s" | tee -a "$S"
cp "$OUT/init/report.html" "$OUT/qualify_init_report.html" 2>/dev/null
cp "$OUT/init/junit.xml" "$OUT/qualify_init_junit.xml" 2>/dev/null
python3 - "$OUT/init/verdicts.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
d = json.load(open(sys.argv[1]))
for v in d["verdicts"]:
    print(f"  {v['check']:24s} {v['status']:7s} {v['severity']:8s} {v['code']:20s} {v['message']}")
PY

# 3. The same init spec again with the init run as the baseline, at the spec's baseline_tolerance (set by
#    --init from the measured spread, widened per figure to the two runs' own spread): the same machine
#    passes (exit 0); a regression beyond the noise would be a warning (exit 4).
fb qualify --spec "$OUT/h200-known-good.toml" --out "$OUT/baseline" --baseline "$OUT/init/results.jsonl" \
   > "$OUT/baseline.txt" 2>&1
echo "baseline (the spec's tolerance): exit $? (0 expected)" | tee -a "$S"
grep -E "baseline" "$OUT/baseline.txt" | tee -a "$S"

# 4. The qualify tests, GPU tier included.
python3 -m pytest -q -m "not lab" -p no:xdist tests/unit/test_qualify_spec.py tests/unit/test_qualify_gpu.py > "$OUT/pytest.txt" 2>&1
echo "pytest qualify (spec + gpu): exit $? ($(tail -1 "$OUT/pytest.txt"))" | tee -a "$S"
