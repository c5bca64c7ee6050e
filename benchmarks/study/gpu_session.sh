#!/usr/bin/env bash
# One GPU in one short lease (under 10 minutes): build, the one-GPU native/sweep/topo/qualify tests,
# qualify against the built-in 8x H200 spec, --init from that run and qualify against it with the first
# run as baseline, then `fabricbench study` of dinov2-base and mistral-1b with every strategy (its train
# units carry the communication trace and the CUDA timeline of each strategy).
# Each stage has its own time limit, so everything measured comes back even when one runs long.
#   bash benchmarks/study/gpu_session.sh OUTDIR     (DeepSpeed and its missing dependencies as wheels in .whl/)
# Knobs: GPU_TESTS (the pytest targets), QUALIFY=0 (skip the qualify stages), STUDY_MODELS, STUDY_S.
set -uo pipefail
R=${1:?usage: study/gpu_session.sh OUTDIR}
mkdir -p "$R/q" "$R/trace/profiles"
export PYTHONUNBUFFERED=1
# shellcheck source=benchmarks/device/env.sh
. "$(dirname "$0")/../device/env.sh"
use_carried_wheels
(nvidia-smi; nvidia-smi topo -m; env | grep -E '^NCCL_') > "$R/machine.txt" 2>&1
stage() { echo "== $1: exit $2, $(( $(date +%s) - t0 )) s" | tee -a "$R/summary.txt"; }
fb() { python3 -m fabricbench "$@"; }

t0=$(date +%s)
build_fabricbench "$R/build.log"
stage build $?

t0=$(date +%s)
# shellcheck disable=SC2086  # GPU_TESTS is a list of pytest targets
timeout "${GPU_TESTS_S:-90}" python3 -m pytest -q -m "not lab" -p no:xdist -p no:cacheprovider \
  ${GPU_TESTS:-tests/gpu/test_native_gpu.py tests/gpu/test_sweep_gpu.py tests/gpu/test_topo_gpu.py tests/unit/test_qualify_gpu.py} \
  > "$R/pytest_gpu.log" 2>&1
rc=$?  # before the $(tail) below, which would replace $?
stage "gpu tests ($(tail -1 "$R/pytest_gpu.log"))" $rc

if [ "${QUALIFY:-1}" = 1 ]; then
t0=$(date +%s)
timeout 75 python3 -m fabricbench qualify --spec builtin:h200-sxm-8 --level 1 --out "$R/q/builtin" > "$R/q/builtin.txt" 2>&1
stage "qualify builtin:h200-sxm-8 --level 1 (1 expected: 1 GPU is not 8)" $?
fb qualify --init "$R/q/known-good.toml" --from "$R/q/builtin/results.jsonl" --factor 0.8 > "$R/q/init.txt" 2>&1
t0=$(date +%s)
timeout 60 python3 -m fabricbench qualify --spec "$R/q/known-good.toml" --out "$R/q/init" \
  --baseline "$R/q/builtin/results.jsonl" --tolerance 0.05 > "$R/q/init_run.txt" 2>&1
stage "qualify --init spec, --baseline the first run" $?
fi

# The study: every strategy at world size 1 on the default fabric (p2p-off changes nothing for one rank),
# each train unit with its communication trace and CUDA timeline (the trace must say no collective ran).
common=(--gpus 0 --fabrics default --strategies ddp,zero1,zero2,zero3,fsdp --steps 6 --warmup-steps 2 --repeats 1 --target-ci 0
        --sizes 1K-1G:x4 --iters 10 --warmup 3 --train-timeout 150 --sweep-timeout 120)
for model in ${STUDY_MODELS:-dinov2-base mistral-1b}; do
  case $model in
    mistral-1b) shape=(--batch-size 8 --seq-len 512) ;;
    *) shape=(--batch-size 32) ;;
  esac
  t0=$(date +%s)
  timeout "${STUDY_S:-220}" python3 -m fabricbench study --model "$model" "${shape[@]}" "${common[@]}" \
    --out "$R/study-$model" > "$R/study-$model.log" 2>&1
  stage "study $model" $?
done
