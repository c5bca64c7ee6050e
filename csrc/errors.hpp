// Typed exceptions of the engine and the check macros that throw them.
//
// Every failing CUDA or NCCL call becomes an exception carrying the expression, file:line, the error
// name and string (and NCCL's last error); module import maps each class onto fabricbench.errors.
// Library code never exits. The *_WARN variants are for destructors: they log and never throw.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace fb {

struct EngineError : std::runtime_error {  // -> fabricbench.errors.FabricbenchError
  using std::runtime_error::runtime_error;
};
struct CudaError : EngineError {  // -> CudaError
  using EngineError::EngineError;
};
struct NcclError : EngineError {  // -> NcclError
  using EngineError::EngineError;
};
struct Timeout : EngineError {  // -> CollectiveTimeout
  using EngineError::EngineError;
};

[[noreturn]] void throw_cuda(cudaError_t err, const char* expr, const char* file, int line);
void warn_cuda(cudaError_t err, const char* expr, const char* file, int line) noexcept;
std::string where(const char* file, int line);

}  // namespace fb

#define FB_CUDA_CHECK(expr)                                              \
  do {                                                                   \
    cudaError_t fb_err_ = (expr);                                        \
    if (fb_err_ != cudaSuccess) ::fb::throw_cuda(fb_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define FB_CUDA_WARN(expr)                                               \
  do {                                                                   \
    cudaError_t fb_err_ = (expr);                                        \
    if (fb_err_ != cudaSuccess) ::fb::warn_cuda(fb_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: the launch error, if any.
#define FB_CUDA_CHECK_LAUNCH() FB_CUDA_CHECK(cudaGetLastError())
