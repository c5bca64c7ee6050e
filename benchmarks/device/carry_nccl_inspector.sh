#!/usr/bin/env bash
# Put NCCL Inspector's source (plugins/profiler/inspector of NVIDIA/nccl) in .carry/nccl-inspector, for the
# GPU machine, which has no network: benchmarks/jobfit/inspector_gpu.sh builds it there with the machine's nvcc/g++.
#   bash benchmarks/device/carry_nccl_inspector.sh GIT_DIR [COMMIT]
# GIT_DIR: a git directory of NVIDIA/nccl (this session's `fetch` tool gives /work/.mirror/NVIDIA+nccl/repo, or
# `git clone --bare https://github.com/NVIDIA/nccl`). COMMIT defaults to 5067397c2676d5aed50042fc39e5c8ee96eb0027
# (master, 2026; writes Inspector JSON v4.0 and exports profiler API v5, which NCCL 2.28 and later load).
# Why not the wheel: nvidia-nccl-cu13 2.32.6 and nvidia-nccl-cu12 ship libnccl.so.2 only (no profiler plugin).
set -euo pipefail
git_dir=${1:?usage: carry_nccl_inspector.sh GIT_DIR [COMMIT]}
commit=${2:-5067397c2676d5aed50042fc39e5c8ee96eb0027}
dest=.carry/nccl-inspector
rm -rf "$dest" && mkdir -p "$dest"
git --git-dir="$git_dir" archive "$commit" plugins/profiler/inspector LICENSE.txt | tar -x -C "$dest"
echo "$commit" > "$dest/COMMIT"
# the Makefile writes version.cc with `git describe`; there is no git tree on the GPU machine
printf '#ifdef __cplusplus\nextern "C" {\n#endif\nconst char* get_git_version_info() { return "%s"; }\n#ifdef __cplusplus\n}\n#endif\n' \
  "${commit:0:9}" > "$dest/plugins/profiler/inspector/version.cc"
du -sh "$dest" && ls "$dest/plugins/profiler/inspector"
