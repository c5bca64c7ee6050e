#!/usr/bin/env bash
# Build the native engine, run its one-GPU tests and print the headline figures (all_reduce float32:
# 8 B eager and graph latency, 8 GiB out-of-place algbw = S / t, decimal GB/s). Writes under ${OUT:-.}.
#   bash benchmarks/gpu_native_smoke.sh
set -uo pipefail
OUT=${OUT:-.}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | tail -3 | tee "$OUT/build.log"
python3 - <<'PY' 2>&1 | tee "$OUT/smoke.json"
import json, os, statistics
import fabricbench._engine as e
from fabricbench.measuring.nccl_lib import resolve_nccl_library
path = resolve_nccl_library(None)
lib = e.load_nccl(path)
c = e.Communicator.single_process(path, [0], 120.0)
med = lambda r: statistics.median(r["times_us"])
eager = med(c.run("all_reduce", "float32", 2, warmup=50, iters=1000))
graph = med(c.run("all_reduce", "float32", 2, warmup=10, iters=50, graph=True, graph_iters=100))
big = c.run("all_reduce", "float32", (8 << 30) // 4, warmup=3, iters=20)
t = med(big)
print(json.dumps({"gpu": e.devices([0])[0]["name"], "nccl": lib["version_str"], "nccl_library": lib["path"],
                  "runtime": e.runtime_info(), "all_reduce_f32_8B_eager_us": eager,
                  "all_reduce_f32_8B_graph_us": graph, "all_reduce_f32_8GiB_us": t,
                  "all_reduce_f32_8GiB_algbw_GBps": (8 << 30) / (t * 1e-6) / 1e9,
                  "timing": "median of per-iteration CUDA-event times, slowest GPU"}, indent=1))
c.close()
PY
python3 -m pytest -m "not lab" -p no:xdist tests/gpu tests/test_engine_ext.py -x -q 2>&1 | tee "$OUT/pytest.log" | tail -25
