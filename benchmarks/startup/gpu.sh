#!/usr/bin/env bash
# One GPU (H100 or H200, GPU 0): a user's own 1B config against the built-in mistral-1b, command to exit, fresh
# and warm; a default study of that config (ddp,fsdp, one fabric); every record's phases against the wall.
#   bash benchmarks/startup/gpu.sh          (on the device machine; $OUT/startup.tar.gz comes back)
# No network, no DeepSpeed needed (ddp and fsdp only). About 4-5 minutes: the build, 2 fresh and 2x--runs warm
# DDP runs of a 1B model, a study of ~1.5-2 minutes.
set -uo pipefail
out=${OUT:?run on the device machine, where OUT is set}
work=/tmp/startup
rm -rf "$work" && mkdir -p "$work"
pack() { tar -C /tmp -czf "$out/startup.tar.gz" startup; cp "$work/gpu.txt" "$out/" 2>/dev/null; }
trap pack EXIT
# shellcheck source=benchmarks/device/env.sh
. benchmarks/device/env.sh
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc; uptime
  python3 -c "import torch, transformers, accelerate; print(torch.__version__, transformers.__version__, accelerate.__version__)"
} > "$work/machine.txt" 2>&1
start=$(date +%s)
build_fabricbench "$work/build.log" || { echo "gpu.sh: build failed (see build.log)"; exit 1; }
echo "gpu.sh: built in $(( $(date +%s) - start )) s" | tee -a "$work/machine.txt"
python3 benchmarks/startup/own_config.py --case gpu --runs "${RUNS:-2}" --results "$work" 2>&1 | tail -c 20000 > "$work/stdout.txt"
echo "gpu.sh: $(( $(date +%s) - start )) s in all" | tee -a "$work/machine.txt"
