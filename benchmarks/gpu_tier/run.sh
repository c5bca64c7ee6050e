#!/usr/bin/env bash
# The GPU tier on the device machine: build with its nvcc, the carried wheels and iproute2, then every test
# marked gpu, under a time limit; pytest's output and the machine's description land in $OUT/gpu_tier/.
#   bash benchmarks/gpu_tier/run.sh [LIMIT_S]        (default 300)
set -uo pipefail
out=${OUT:?run on the device machine, where OUT is set}/gpu_tier
mkdir -p "$out"
# shellcheck source=benchmarks/device/env.sh
. benchmarks/device/env.sh
use_carried_wheels
use_carried_iproute2
# (no commit is named here: the device gets the working tree, and its .git may be an older copy)
{ date; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc; uptime
} > "$out/machine.txt" 2>&1
start=$(date +%s)
build_fabricbench "$out/build.log" || { echo "build failed (build.log)" | tee -a "$out/machine.txt"; exit 1; }
echo "built $(( $(date +%s) - start )) s" >> "$out/machine.txt"
t=$(date +%s)
timeout "${1:-300}" python3 -m pytest -q -m gpu -p no:xdist -p no:cacheprovider tests --durations=10 \
  > "$out/gpu_tier.log" 2>&1
echo "pytest rc=$? $(( $(date +%s) - t )) s" >> "$out/machine.txt"
tail -3 "$out/gpu_tier.log"
