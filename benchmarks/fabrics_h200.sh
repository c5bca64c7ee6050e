#!/usr/bin/env bash
# Fabrics on one GPU machine: every named fabric is applied (sweep delegates to a child under it), the
# shaped:RATE namespace works with CUDA inside it, and the CPU fabric lab's busbw against the tc rate at
# a larger scale than CI (DOMAIN.md: all-reduce busbw = rate/2 from 1 MiB up). Writes under OUTDIR.
#   bash benchmarks/fabrics_h200.sh OUTDIR
# Needs root and iproute2 for the shaped parts; without them those parts are reported waived.
set -uo pipefail
OUT=${1:-${OUT:-.}}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
fb() { python3 -m fabricbench "$@"; }

fb fabrics --json > "$OUT/fabrics.json" 2>&1

# 1. The native engine on GPU 0 under p2p-off and under a shaped namespace (CUDA and NCCL inside `ip netns
#    exec`, which remounts /sys). One rank: the transport is "none (single rank)", the run must still work.
for f in default p2p-off shaped:10gbit; do
  tag=${f//:/-}
  fb sweep --gpus 0 --ops all_reduce --sizes 1M-256M:x16 --iters 10 --warmup 3 --fabric "$f" \
     --out "$OUT/native-$tag.jsonl" > "$OUT/native-$tag.txt" 2>&1
  echo "native $f: exit $?" | tee -a "$OUT/summary.txt"
done

# 2. The CPU lab: 2 gloo ranks, shaped at three rates, all-reduce and all-gather, 1 MiB - 64 MiB.
fb compare --fabrics default,shaped:200mbit,shaped:1gbit,shaped:5gbit --engine torch --backend gloo \
   --nprocs 2 --ops all_reduce,all_gather --sizes 1M-64M:x4 --iters 5 --warmup 1 \
   --out "$OUT/lab.jsonl" --plot "$OUT/lab.png" > "$OUT/lab.txt" 2>&1
echo "lab compare: exit $?" | tee -a "$OUT/summary.txt"
python3 - "$OUT/lab.jsonl" <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import json, sys
from fabricbench.results import read_results
rows = [r for r in read_results(sys.argv[1], kind="collective") if r.get("shaped_rate_bps")]
print(f"{'fabric':16s} {'op':11s} {'size':>9s} {'busbw GB/s':>11s} {'busbw/rate':>10s}   (rate in GB/s = bit/s / 8e9)")
for r in rows:
    rate = r["shaped_rate_bps"] / 8e9
    print(f"{r['fabric']:16s} {r['op']:11s} {r['bytes']:>9d} {r['busbw_gbps']:>11.4f} {r['busbw_gbps'] / rate:>10.3f}")
PY

# 3. The fabric and shaped tests (CPU tier) on this machine.
python3 -m pytest -q -m "not lab" -p no:xdist tests/test_fabrics.py tests/test_fabric_apply.py tests/test_shaped.py tests/test_compare.py \
  2>&1 | tee "$OUT/pytest.log" | tail -15
ip netns list 2>/dev/null | grep '^fb-' > "$OUT/left_namespaces.txt"
echo "namespaces left: $(wc -l < "$OUT/left_namespaces.txt")" | tee -a "$OUT/summary.txt"
