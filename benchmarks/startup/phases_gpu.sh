#!/usr/bin/env bash
# One GPU (GPU 0): where a train run's wall goes, phase by phase, after the start-up work (native model, bytecode cache).
#   bash benchmarks/startup/phases_gpu.sh OUTDIR      (no network, no DeepSpeed needed: ddp and fsdp only)
# Writes OUTDIR/lab-mistral-first.txt (the first run, bytecode cache empty), OUTDIR/mistral-1b.txt (DDP
# of the 1B model, target 10 s), OUTDIR/lab-mistral.txt (2 gloo ranks on GPU 0, target 6 s),
# OUTDIR/study-1b.txt (a default study, ddp,fsdp, one fabric: target 2 min; its units and its train runs'
# phases), each as its case ends, and OUTDIR/startup.log. About 4-6 minutes in all;
# the issue's "before" on this machine: 27-40 s a 1B run, 3 min 51 s - 4 min 15 s the study.
set -uo pipefail
out=${1:?usage: startup/phases_gpu.sh OUTDIR}
mkdir -p "$out"
# shellcheck source=benchmarks/device/env.sh
. "$(dirname "$0")/../device/env.sh"
use_carried_wheels
export PYTHONUNBUFFERED=1
start=$(date +%s)
build_fabricbench "$out/build.log" || { echo "startup_h200: build failed (see $out/build.log)"; exit 1; }
echo "startup_h200: built in $(( $(date +%s) - start )) s" | tee -a "$out/startup.log"
# The first run on a fresh machine: its ranks compile torch & co into fabricbench's bytecode cache
# (jobs/bytecode.py; this machine forbids writing bytecode beside the sources and ships none), every later
# run reads it. Timed alone, once, on an empty cache; the cases below are what every later run costs.
rm -rf "${XDG_CACHE_HOME:-$HOME/.cache}/fabricbench/pycache"
python3 benchmarks/startup/phases.py --case lab-mistral --runs 1 --out "$out/lab-mistral-first.txt" 2>&1 \
  | tee -a "$out/startup.log"
python3 benchmarks/startup/phases.py --case h200 --runs 2 --results "$out" 2>&1 | tee -a "$out/startup.log"
echo "startup_h200: $(( $(date +%s) - start )) s in all" | tee -a "$out/startup.log"
