# Sourced by every GPU script under benchmarks/: what each GPU-machine run sets up first, in one place.
# The GPU machine has no network and no DeepSpeed: its wheels (and missing dependencies) travel in .whl/
# (benchmarks/device/carry_wheels.sh builds it; benchmarks/device/carry_iproute2.sh builds .carry/iproute2).

# DeepSpeed and friends from .whl/ into /tmp/site, on PYTHONPATH (nothing when .whl/ is absent).
use_carried_wheels() {
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
}

# fabricbench built in place with the machine's nvcc, for this machine's GPUs only (their compute capability,
# from nvidia-smi; sm_90 for H100 and H200 when it cannot say): ~18 s instead of every architecture.
gpu_archs() {
  local a
  a=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | sort -u | paste -sd';')
  echo "${a:-90}"
}
build_fabricbench() {
  CMAKE_ARGS=-DCMAKE_CUDA_ARCHITECTURES="$(gpu_archs)" python3 -m pip install -q --no-build-isolation --no-deps -e . \
    > "$1" 2>&1
}

# A run's time budget, so that what finished comes back within the lease: budget_start [SECONDS] (default
# $BUDGET_S, else 540) starts the clock; budget_left says the seconds left; `timeout "$(budget_limit 90)" CMD`
# gives a stage at most 90 s and never more than is left (at least 1 s, so that a late stage still says so).
budget_start() { FB_BEGIN=$(date +%s); FB_BUDGET_S=${1:-${BUDGET_S:-540}}; }
budget_elapsed() { echo $(( $(date +%s) - FB_BEGIN )); }
budget_left() { echo $(( FB_BUDGET_S - $(budget_elapsed) )); }
budget_limit() { local l; l=$(budget_left); [ "$l" -lt 1 ] && l=1; [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }

# iproute2 carried in .carry/iproute2 (benchmarks/device/carry_iproute2.sh) first on PATH: the GPU machine has no
# `ip` or `tc`, which shaped fabrics need.
use_carried_iproute2() {
  local d
  for d in .carry/iproute2/usr/bin .carry/iproute2/usr/sbin .carry/iproute2/bin .carry/iproute2/sbin; do
    [ -d "$d" ] && PATH="$PWD/$d:$PATH"
  done
  export PATH
}
