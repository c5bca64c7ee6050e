#include "errors.hpp"

#include <cstdio>

namespace fb {

std::string where(const char* file, int line) {
  std::string f(file);
  auto slash = f.rfind("csrc/");
  if (slash != std::string::npos) f = f.substr(slash);
  return f + ":" + std::to_string(line);
}

void throw_cuda(cudaError_t err, const char* expr, const char* file, int line) {
  cudaGetLastError();  // clear a sticky-free error so the next call starts clean
  throw CudaError(std::string(expr) + " failed at " + where(file, line) + ": " + cudaGetErrorName(err) +
                  " (" + cudaGetErrorString(err) + ")");
}

void warn_cuda(cudaError_t err, const char* expr, const char* file, int line) noexcept {
  std::fprintf(stderr, "fabricbench._engine: %s failed at %s: %s (%s) [ignored during clean-up]\n", expr,
               where(file, line).c_str(), cudaGetErrorName(err), cudaGetErrorString(err));
}

}  // namespace fb
