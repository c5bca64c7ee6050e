#!/usr/bin/env bash
# The own-job lab on the GPU machine, in one command: the one-GPU lab (3 gloo ranks with CUDA tensors on GPU 0)
# and, where the time allows, the CPU lab (gloo ranks on the machine's CPUs), each under its own time limit,
# packed into OUT/own_job.tgz. Shaped fabrics need iproute2, carried in .carry/iproute2 (benchmarks/device/carry_iproute2.sh).
#   [REPEATS=2] [STEPS=15] bash benchmarks/own_job/device_lab.sh [gpu|cpu|both] [GPU_LIMIT_S] [CPU_LIMIT_S]
set -u
WHICH=${1:-both}
GPU_S=${2:-300}
CPU_S=${3:-0}  # 0: what is left of 520 s after the GPU lab
OUT=${OUT:-/tmp/own_job_out}
mkdir -p "$OUT"
source benchmarks/device/env.sh
use_carried_wheels
use_carried_iproute2
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
R=/tmp/own_job
mkdir -p $R
{
  date -u; nproc; python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count(),
    torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")'
  ip -V; command -v tc; uptime
} > $R/machine.txt 2>&1
cat $R/machine.txt
if [ "$WHICH" != cpu ]; then
  CUDA_VISIBLE_DEVICES=0 timeout "$GPU_S" python3 benchmarks/own_job/lab.py --device cuda --ranks 3 \
    --rates 4gbit,2gbit --repeats "${REPEATS:-2}" --steps "${STEPS:-15}" --warmup 3 --out $R/gpu-3ranks 2>&1 | tee $R/gpu-lab.log
  python3 benchmarks/own_job/lab.py --summarize $R/gpu-3ranks  # what finished, where the limit cut the lab
  python3 benchmarks/own_job/lab.py --whole-bucket $R/gpu-3ranks > /dev/null
fi
if [ "$CPU_S" = 0 ]; then CPU_S=$((520 - SECONDS)); fi
if [ "$WHICH" != gpu ]; then
  echo "CPU lab: $CPU_S s left"
  CUDA_VISIBLE_DEVICES= timeout "$CPU_S" python3 benchmarks/own_job/lab.py --device cpu --ranks 2 \
    --rates 2gbit,1gbit --repeats "${REPEATS:-2}" --steps "${STEPS:-15}" --warmup 3 --out $R/cpu-2ranks 2>&1 | tee $R/cpu-lab.log
  python3 benchmarks/own_job/lab.py --summarize $R/cpu-2ranks
  # the same points with a whole bucket per gap: what measuring the link credit changed, paired
  python3 benchmarks/own_job/lab.py --whole-bucket $R/cpu-2ranks > /dev/null
fi
tar czf "$OUT/own_job.tgz" --exclude=prof -C $R . 2>/dev/null
tar czf "$OUT/prof.tgz" -C $R $(cd $R && ls -d */prof) 2>/dev/null
ls -la "$OUT"
