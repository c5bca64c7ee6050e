#pragma once

#include <string>
#include <vector>

#include "timing.hpp"

namespace fb {

struct CopyResult {
  std::vector<double> times_us;  // per iteration, the slower direction when both run at once
  bool peer_access = false;      // direct peer access was enabled (false for src == dst: a local copy)
};

CopyResult copy_peer(int src, int dst, size_t nbytes, int warmup, int iters, bool bidirectional, const Hooks& hooks);
CopyResult copy_host(int device, size_t nbytes, int warmup, int iters, const std::string& direction, const Hooks& hooks);

}  // namespace fb
