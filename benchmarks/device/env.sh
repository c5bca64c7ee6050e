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

# fabricbench built in place with the machine's nvcc, for Hopper only (H100 and H200 are sm_90: ~18 s instead of every arch).
build_fabricbench() {
  CMAKE_ARGS=-DCMAKE_CUDA_ARCHITECTURES=90 python3 -m pip install -q --no-build-isolation --no-deps -e . > "$1" 2>&1
}

# iproute2 carried in .carry/iproute2 (benchmarks/device/carry_iproute2.sh) first on PATH: the GPU machine has no
# `ip` or `tc`, which shaped fabrics need.
use_carried_iproute2() {
  local d
  for d in .carry/iproute2/usr/bin .carry/iproute2/usr/sbin .carry/iproute2/bin .carry/iproute2/sbin; do
    [ -d "$d" ] && PATH="$PWD/$d:$PATH"
  done
  export PATH
}
