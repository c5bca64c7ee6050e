#!/usr/bin/env bash
# NCCL Inspector on the GPU machine, in under 4 minutes: build the plugin, load it into NCCL jobs, import what it
# wrote, and set the job against a sweep of the same GPUs (fabricbench jobfit). Every visible GPU (GPUS=0,1
# picks): on one GPU the plugin loads and records nothing (measured 2026-12-05:
# results/h200-1gpu/inspector/README.md, beside this script, says why).
#   bash benchmarks/device/carry_nccl_inspector.sh /work/.mirror/NVIDIA+nccl/repo     (here, once: fills .carry/)
#   bash benchmarks/jobfit/inspector_gpu.sh "$OUT"                                    (on the GPU machine; carry .carry)
# The plugin's build was checked on a CPU machine against CUDA 12.9's headers from PyPI (nvidia-cuda-runtime-cu12,
# nvidia-cuda-nvcc-cu12): 26 s, exports ncclProfiler_v5. The nvidia-nccl-cu13 2.32.6 wheel ships no plugin.
# Stages (each with its own time limit, cut to what is left of BUDGET_S, default 230 s):
#   1. build .carry/nccl-inspector/plugins/profiler/inspector -> libnccl-profiler-inspector.so (g++, CUDA_HOME
#      from the machine's nvcc);
#   2. a torch NCCL job on $GPUS with the plugin loaded: `fabricbench sweep --engine torch --backend nccl` over
#      all_reduce/all_gather/reduce_scatter 1M-256M (NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING=0 keeps calls timed
#      by the CPU, since a 1-rank collective is a copy without a kernel); Inspector files in OUT/inspector-job/;
#   3. a real `fabricbench train` (DDP, tiny-mistral, $GPUS, NCCL) with the plugin loaded: OUT/inspector-train/;
#   4. the sweep to compare with, without the plugin: `fabricbench sweep --engine native` at the same sizes;
#   5. `fabricbench import` of every Inspector file, `fabricbench jobfit` of the job (and of the train run)
#      against the sweep, and benchmarks/jobfit/inspector_check.py's summary: OUT/inspector_check.txt.
# Why not the one-GPU multi-rank lab: its ranks talk gloo (NCCL refuses two ranks on one GPU, "Duplicate GPU
# detected"), and gloo has no profiler plugin interface: the Inspector would record nothing there.
set -uo pipefail
R=${1:?usage: jobfit/inspector_gpu.sh OUTDIR}
mkdir -p "$R"
export PYTHONUNBUFFERED=1
here=$(dirname "$0")
# shellcheck source=benchmarks/device/env.sh
. "$here/../device/env.sh"
budget_start "${BUDGET_S:-230}"
stage() { echo "== $1: exit $2, $(( $(date +%s) - t0 )) s (at $(budget_elapsed) s)" | tee -a "$R/summary.txt"; }
fb() { python3 -m fabricbench "$@"; }
(nvidia-smi; python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())';
 command -v nvcc g++; nvcc --version) > "$R/machine.txt" 2>&1

# 1. build the plugin
t0=$(date +%s)
src=.carry/nccl-inspector/plugins/profiler/inspector
nvcc_path=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
cuda_home=$(dirname "$(dirname "${nvcc_path:-/usr/local/cuda/bin/nvcc}")")
timeout "$(budget_limit 90)" make -C "$src" -j8 CUDA_HOME="$cuda_home" > "$R/build.txt" 2>&1
stage "build libnccl-profiler-inspector.so (CUDA_HOME $cuda_home)" $?
plugin=$PWD/$src/libnccl-profiler-inspector.so
if [ ! -f "$plugin" ]; then echo "no plugin built: see build.txt" | tee -a "$R/summary.txt"; exit 1; fi
ins_vars() {  # the plugin's variables for one job (for `env`), dumps into $1 (a path without spaces)
  mkdir -p "$1"
  echo NCCL_PROFILER_PLUGIN="$plugin" NCCL_INSPECTOR_ENABLE=1 NCCL_INSPECTOR_DUMP_DIR="$1" \
    NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=500 NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING=0 \
    NCCL_INSPECTOR_DUMP_VERBOSE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,PROFILE \
    LD_LIBRARY_PATH="$cuda_home/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # the plugin links libcudart
}
# every visible GPU unless GPUS says otherwise: one GPU records nothing (a 1-rank communicator's collectives
# are local copies without profiler events: benchmarks/jobfit/results/h200-1gpu/inspector/README.md), two or
# more give the Inspector records this script is for
GPUS=${GPUS:-$(python3 -c 'import torch; print(",".join(map(str, range(max(1, torch.cuda.device_count())))))')}
sizes=1M-256M:x4
ops=all_reduce,all_gather,reduce_scatter

# 2. a torch NCCL job with the plugin
t0=$(date +%s)
timeout "$(budget_limit 60)" env $(ins_vars "$R/inspector-job") python3 -m fabricbench sweep --engine torch --backend nccl \
  --gpus "$GPUS" --ops $ops --sizes $sizes --iters 20 --warmup 5 --out "$R/job-sweep.jsonl" > "$R/job.txt" 2>&1
stage "torch NCCL job with the Inspector ($(ls "$R/inspector-job" 2>/dev/null | wc -l) file(s))" $?

# 3. a real train run with the plugin
t0=$(date +%s)
timeout "$(budget_limit 70)" env $(ins_vars "$R/inspector-train") python3 -m fabricbench train --gpus "$GPUS" --model tiny-mistral \
  --strategy ddp --steps 8 --warmup-steps 2 --batch-size 4 --seq-len 128 --repeats 1 --timeout 60 \
  --out "$R/train.jsonl" > "$R/train.txt" 2>&1
stage "train ddp with the Inspector ($(ls "$R/inspector-train" 2>/dev/null | wc -l) file(s))" $?

# 4. the sweep to compare with (no plugin)
t0=$(date +%s)
timeout "$(budget_limit 50)" python3 -m fabricbench sweep --engine native --gpus "$GPUS" --ops $ops --sizes $sizes --iters 20 \
  --warmup 5 --out "$R/sweep.jsonl" > "$R/sweep.txt" 2>&1
stage "native sweep, same sizes" $?

# 5. import, jobfit, check
t0=$(date +%s)
for d in inspector-job inspector-train; do
  files=$(find "$R/$d" -type f \( -name '*.log' -o -name '*.jsonl' -o -name '*.gz' \) 2>/dev/null)
  [ -n "$files" ] && fb import $files --out "$R/$d.jsonl" > "$R/$d-import.txt" 2>&1
  [ -n "$files" ] && fb jobfit --job "$R/$d" --sweep "$R/sweep.jsonl" > "$R/$d-jobfit.txt" 2>&1
  [ -n "$files" ] && fb jobfit --job "$R/$d" --sweep "$R/sweep.jsonl" --json > "$R/$d-jobfit.json" 2>>"$R/$d-jobfit.txt"
done
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} python3 "$here/inspector_check.py" "$R" > "$R/inspector_check.txt" 2>&1
stage "import + jobfit + check" $?
cat "$R/inspector_check.txt"
