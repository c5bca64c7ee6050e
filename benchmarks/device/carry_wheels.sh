#!/usr/bin/env bash
# Builds .whl/ (ignored by git) for the GPU machine, which has no network and no DeepSpeed: DeepSpeed's own
# wheel (built here from its sdist, no ops compiled: it JIT-builds the one it needs there) and the
# dependencies that machine's image lacks, as CPython 3.12 manylinux wheels (its python3). A DeepSpeed
# that imports but cannot load (pydantic missing) breaks FSDP through Accelerate too, so all travel together.
# benchmarks/device/env.sh (use_carried_wheels) installs them there into /tmp/site.
#   bash benchmarks/device/carry_wheels.sh            (here, with network); then run(..., carry=[".whl", ".carry"])
# Move .whl/ aside for a CPU smoke run of a GPU script here: its cp312 wheels do not load on 3.11.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .whl /tmp/fb-dssrc && mkdir -p .whl /tmp/fb-dssrc
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp --no-deps \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d .whl pydantic pydantic-core annotated-types typing-inspection typing-extensions hjson orjson
python3 -m pip download -q --no-deps --no-binary :all: -d /tmp/fb-dssrc deepspeed
DS_BUILD_OPS=0 python3 -m pip wheel -q --no-deps --no-build-isolation -w .whl /tmp/fb-dssrc/deepspeed-*.tar.gz
ls .whl
