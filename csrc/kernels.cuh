// Device-side templates for the collectives' --check verification (included by .cu files only).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels.hpp"

namespace fb {

template <typename T>
__device__ inline double to_double(T v) { return (double)v; }
template <>
__device__ inline double to_double<__nv_bfloat16>(__nv_bfloat16 v) { return (double)__bfloat162float(v); }
template <>
__device__ inline double to_double<__half>(__half v) { return (double)__half2float(v); }

// Counts elements of out[0..n) that differ from expect(e) (a functor of the collective's file).
template <typename T, typename Expect>
__global__ void verify_kernel(const T* out, size_t n, Expect expect, unsigned long long* wrong) {
  unsigned long long bad = 0;
  for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x)
    bad += !(to_double(out[e]) == expect(e));  // NaN poison never equals
  if (bad) atomicAdd(wrong, bad);
}

template <typename Expect>
void launch_verify(const void* out, Dt dt, size_t n, Expect expect, unsigned long long* wrong, cudaStream_t s) {
  if (n == 0) return;
  unsigned blocks = (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
  switch (dt) {
    case Dt::f32: verify_kernel<<<blocks, 256, 0, s>>>((const float*)out, n, expect, wrong); break;
    case Dt::bf16: verify_kernel<<<blocks, 256, 0, s>>>((const __nv_bfloat16*)out, n, expect, wrong); break;
    case Dt::f16: verify_kernel<<<blocks, 256, 0, s>>>((const __half*)out, n, expect, wrong); break;
    case Dt::f64: verify_kernel<<<blocks, 256, 0, s>>>((const double*)out, n, expect, wrong); break;
    case Dt::i32: verify_kernel<<<blocks, 256, 0, s>>>((const int32_t*)out, n, expect, wrong); break;
    case Dt::i8: verify_kernel<<<blocks, 256, 0, s>>>((const int8_t*)out, n, expect, wrong); break;
    case Dt::u8: verify_kernel<<<blocks, 256, 0, s>>>((const uint8_t*)out, n, expect, wrong); break;
  }
  FB_CUDA_CHECK_LAUNCH();
}

}  // namespace fb
