#include "kernels.cuh"

namespace fb {

__device__ inline unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void block_kernel(volatile int* flag, volatile int* timed_out, unsigned long long timeout_ns) {
  unsigned long long start = global_ns();
  while (*flag == 0) {
    if (global_ns() - start > timeout_ns) {
      *timed_out = 1;
      break;
    }
  }
}

void launch_block(volatile int* flag, volatile int* timed_out, unsigned long long timeout_ns, cudaStream_t s) {
  block_kernel<<<1, 1, 0, s>>>(flag, timed_out, timeout_ns);
  FB_CUDA_CHECK_LAUNCH();
}

template <typename T>
__global__ void fill_kernel(T* buf, size_t n, uint64_t seed, int rank) {
  for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x)
    buf[e] = (T)(float)check_value(seed, rank, e);
}

void launch_fill(void* buf, Dt dt, size_t n, uint64_t seed, int rank, cudaStream_t s) {
  if (n == 0) return;
  unsigned blocks = (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
  switch (dt) {
    case Dt::f32: fill_kernel<<<blocks, 256, 0, s>>>((float*)buf, n, seed, rank); break;
    case Dt::bf16: fill_kernel<<<blocks, 256, 0, s>>>((__nv_bfloat16*)buf, n, seed, rank); break;
    case Dt::f16: fill_kernel<<<blocks, 256, 0, s>>>((__half*)buf, n, seed, rank); break;
    case Dt::f64: fill_kernel<<<blocks, 256, 0, s>>>((double*)buf, n, seed, rank); break;
    case Dt::i32: fill_kernel<<<blocks, 256, 0, s>>>((int32_t*)buf, n, seed, rank); break;
    case Dt::i8: fill_kernel<<<blocks, 256, 0, s>>>((int8_t*)buf, n, seed, rank); break;
    case Dt::u8: fill_kernel<<<blocks, 256, 0, s>>>((uint8_t*)buf, n, seed, rank); break;
  }
  FB_CUDA_CHECK_LAUNCH();
}

}  // namespace fb
