#include "nccl_api.hpp"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

namespace fb {

namespace {

const char* result_name(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult?";
  }
}

template <typename F>
void resolve(void* handle, const std::string& path, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  if (!fn)
    throw NcclError(path + " is not an NCCL library (no symbol " + name +
                    "); point --nccl-lib or FABRICBENCH_NCCL_LIBRARY at libnccl.so.2 (NCCL >= 2.14)");
}

std::unique_ptr<NcclLib> open_lib(const std::string& path) {
  char real[PATH_MAX];
  if (!realpath(path.c_str(), real))
    throw NcclError("cannot load NCCL from " + path + ": no such file; point --nccl-lib at libnccl.so.2");
  void* handle = dlopen(real, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    throw NcclError("cannot load NCCL from " + path + ": " + (why ? why : "dlopen failed"));
  }
  auto lib = std::make_unique<NcclLib>();
  lib->path = real;
  try {
    resolve(handle, lib->path, "ncclGetVersion", lib->GetVersion);
    resolve(handle, lib->path, "ncclGetUniqueId", lib->GetUniqueId);
    resolve(handle, lib->path, "ncclCommInitRankConfig", lib->CommInitRankConfig);
    resolve(handle, lib->path, "ncclCommDestroy", lib->CommDestroy);
    resolve(handle, lib->path, "ncclCommAbort", lib->CommAbort);
    resolve(handle, lib->path, "ncclCommGetAsyncError", lib->CommGetAsyncError);
    resolve(handle, lib->path, "ncclGetErrorString", lib->GetErrorString);
    resolve(handle, lib->path, "ncclGetLastError", lib->GetLastError);
    resolve(handle, lib->path, "ncclGroupStart", lib->GroupStart);
    resolve(handle, lib->path, "ncclGroupEnd", lib->GroupEnd);
    resolve(handle, lib->path, "ncclAllReduce", lib->AllReduce);
    resolve(handle, lib->path, "ncclBroadcast", lib->Broadcast);
    resolve(handle, lib->path, "ncclAllGather", lib->AllGather);
    resolve(handle, lib->path, "ncclReduceScatter", lib->ReduceScatter);
    resolve(handle, lib->path, "ncclSend", lib->Send);
    resolve(handle, lib->path, "ncclRecv", lib->Recv);
    lib->MemAlloc = reinterpret_cast<decltype(lib->MemAlloc)>(dlsym(handle, "ncclMemAlloc"));
    lib->MemFree = reinterpret_cast<decltype(lib->MemFree)>(dlsym(handle, "ncclMemFree"));
    if (!lib->MemFree) lib->MemAlloc = nullptr;
  } catch (...) {
    dlclose(handle);
    throw;
  }
  FB_NCCL_CHECK(*lib, lib->GetVersion(&lib->version));
  int v = lib->version;  // 2.9+ encodes X*10000 + Y*100 + Z
  int major = v >= 10000 ? v / 10000 : v / 1000;
  int minor = v >= 10000 ? (v / 100) % 100 : (v / 100) % 10;
  int patch = v % 100;
  lib->version_str = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  if (v < 21400) {
    throw NcclError(lib->path + " is NCCL " + lib->version_str +
                    "; fabricbench needs NCCL >= 2.14 (non-blocking communicators)");
  }
  return lib;  // the handle stays open for the process: communicators may outlive any one caller
}

}  // namespace

ncclResult_t NcclLib::check(ncclResult_t r, const char* expr, const char* file, int line, ncclComm_t comm) const {
  if (r == ncclSuccess || r == ncclInProgress) return r;
  std::string last = GetLastError ? GetLastError(comm) : "";
  throw NcclError(std::string(expr) + " failed at " + where(file, line) + ": " + result_name(r) + " (" +
                  (GetErrorString ? GetErrorString(r) : "") + ")" + (last.empty() ? "" : "; last error: " + last));
}

void NcclLib::warn(ncclResult_t r, const char* expr, const char* file, int line) const noexcept {
  if (r == ncclSuccess || r == ncclInProgress) return;
  std::fprintf(stderr, "fabricbench._engine: %s failed at %s: %s [ignored during clean-up]\n", expr,
               where(file, line).c_str(), result_name(r));
}

const NcclLib& load_nccl(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<NcclLib>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(path);
  if (it != cache.end()) return *it->second;
  auto lib = open_lib(path);
  return *(cache[path] = std::move(lib));
}

}  // namespace fb
