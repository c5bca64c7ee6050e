#!/usr/bin/env bash
# fabricbench against nccl-tests on one GPU, same NCCL, same run: builds nccl-tests (2.19.6, from the
# tarball carried in .carry/peers/, an ignored folder) against the system NCCL, builds fabricbench, and
# writes the parity tables (eager and graph, all_reduce / all_gather / reduce_scatter, 8 B-8 GiB, both
# buffer modes; see benchmarks/parity/compare_engines.py) under OUTDIR. GPU_TESTS=1 also runs the one-GPU tests
# of the native engine.
#
#   mkdir -p .carry/peers && cp ../shared/peers/nccl-tests-*.tar.gz .carry/peers/     (here, once)
#   bash benchmarks/parity/gpu.sh OUTDIR                                              (on the GPU machine)
#
# SPREAD="ARGS" then runs benchmarks/parity/spread.py ARGS (fresh processes of each tool per size, into
# OUTDIR/spread/), and PARITY=0 skips the parity tables.
#
# Files: OUTDIR/parity_eager.txt, parity_graph.txt, parity.json (every figure), parity.log (progress),
# nccl-tests.log (every nccl-tests command and its output), build.log, pytest.log (with GPU_TESTS=1).
set -uo pipefail
OUTDIR=${1:?usage: bash benchmarks/parity/gpu.sh OUTDIR}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
# shellcheck source=benchmarks/device/env.sh
. "$(dirname "$0")/../device/env.sh"
NCCL_LIB=${NCCL_LIB:-/usr/lib/x86_64-linux-gnu/libnccl.so.2}
NT=${NT_DIR:-/tmp/nccl-tests}
TARBALL=$(ls .carry/peers/nccl-tests-*.tar.gz ../shared/peers/nccl-tests-*.tar.gz 2>/dev/null | head -1)
[ -n "$TARBALL" ] || { echo "Error: no nccl-tests tarball in .carry/peers/ (copy ../shared/peers/*.tar.gz there)" >&2; exit 2; }
[ -e "$NCCL_LIB" ] || { echo "Error: $NCCL_LIB not found (set NCCL_LIB to the libnccl.so.2 to compare)" >&2; exit 2; }
JOBS=$(nproc)
echo "start at $(date -u +%T)"

# nccl-tests (three binaries) and fabricbench build side by side; nccl-tests links -lnccl, found in the
# system folders (/usr/include, /usr/lib/x86_64-linux-gnu) where the system NCCL lives.
(
  rm -rf "$NT" && mkdir -p "$NT" && tar xzf "$TARBALL" -C "$NT" --strip-components=1 &&
  make -C "$NT/src" -j"$JOBS" MPI=0 CUDA_HOME=/usr/local/cuda NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
      BUILDDIR="$NT/build" os.build &&
  make -C "$NT/src" -j"$JOBS" MPI=0 CUDA_HOME=/usr/local/cuda NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
      BUILDDIR="$NT/build" "$NT/build/all_reduce_perf" "$NT/build/all_gather_perf" "$NT/build/reduce_scatter_perf"
) >"$OUTDIR/nt_build.tmp" 2>&1 &
NT_PID=$!
build_fabricbench "$OUTDIR/build.log"
FB_RC=$?
wait $NT_PID
NT_RC=$?
{ echo "== nccl-tests build (rc $NT_RC)"; tail -20 "$OUTDIR/nt_build.tmp"; } >>"$OUTDIR/build.log"
rm -f "$OUTDIR/nt_build.tmp"
echo "fabricbench build rc $FB_RC, nccl-tests build rc $NT_RC"
if [ $FB_RC -ne 0 ] || [ $NT_RC -ne 0 ]; then tail -40 "$OUTDIR/build.log"; exit 1; fi

echo "built at $(date -u +%T)" | tee -a "$OUTDIR/build.log"
if [ "${GPU_TESTS:-0}" = 1 ]; then
  python3 -m pytest -m "not lab" -p no:xdist tests/gpu/test_native_gpu.py -q 2>&1 | tee "$OUTDIR/pytest.log" | tail -5
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$OUTDIR/build.log"
if [ -n "${SPREAD:-}" ]; then
  # shellcheck disable=SC2086  # SPREAD is a list of arguments
  python3 benchmarks/parity/spread.py --nccl-tests "$NT/build" --nccl-lib "$NCCL_LIB" --out "$OUTDIR/spread" \
      $SPREAD 2>&1 | tail -60
  echo "spread done at $(date -u +%T)"
fi
[ "${PARITY:-1}" = 1 ] || exit 0
python3 benchmarks/parity/compare_engines.py --gpus 0 --nccl-tests "$NT/build" --nccl-lib "$NCCL_LIB" \
    --tables "$OUTDIR" ${PARITY_ARGS:-} 2>&1 | tee "$OUTDIR/parity.log" | tail -80
PARITY_RC=${PIPESTATUS[0]}
echo "parity done at $(date -u +%T)"


exit $PARITY_RC
