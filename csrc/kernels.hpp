// Launchers callable from host code: the blocking kernel that holds every stream until the host
// releases it, and the exact-value fill behind --check (the verify template is in kernels.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "dtypes.hpp"

namespace fb {

// Spins until *flag != 0 or timeout_ns passes (then sets *timed_out): a stream can never hang on it.
void launch_block(volatile int* flag, volatile int* timed_out, unsigned long long timeout_ns, cudaStream_t s);

// The --check input of `rank`, element e: a small positive integer 1..4 from a hash, exact in every
// dtype, and sums over up to 64 ranks stay exact in bf16 (integers <= 256).
__host__ __device__ inline int check_value(uint64_t seed, int rank, uint64_t e) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + (uint64_t)rank * 0xBF58476D1CE4E5B9ull + e * 0x94D049BB133111EBull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return 1 + (int)(z & 3);
}

void launch_fill(void* buf, Dt dt, size_t n, uint64_t seed, int rank, cudaStream_t s);

}  // namespace fb
