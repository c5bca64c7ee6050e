// The subset of the NCCL C API the engine uses, declared here (no nccl.h at build time) and resolved
// at run time with dlsym, so the module links neither NCCL nor libcuda and imports on any machine.
//
// ABI facts relied on (stable since NCCL 2.14): ncclUniqueId is 128 bytes passed by value; ncclResult_t,
// ncclDataType_t and ncclRedOp_t are C enums (int); ncclConfig_t is a versioned, append-only struct
// whose first field is its size: NCCL copies `size` bytes and gives every later field its default.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "errors.hpp"

namespace fb {

typedef struct ncclComm* ncclComm_t;
struct ncclUniqueId {
  char internal[128];
};

enum ncclResult_t : int {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};

enum ncclDataType_t : int {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
};

enum ncclRedOp_t : int { ncclSum = 0 };

// The 2.14 prefix of ncclConfig_t, declared with version 2.14.0. Why a config at all: only a
// non-blocking communicator (blocking = 0) returns from init while peers are missing, which is what
// lets set-up honour the deadline and be aborted; a watchdog cannot abort a blocking init because the
// comm handle does not exist until init returns. Why this prefix: NCCL reads `size` bytes and fills
// newer fields with defaults, so the same declaration works with every NCCL from 2.14 on.
struct ncclConfigV2_14 {
  size_t size = sizeof(ncclConfigV2_14);
  unsigned int magic = 0xcafebeef;
  unsigned int version = 21400;
  int blocking = 0;
  int cgaClusterSize = -2147483647 - 1;  // INT_MIN = "undefined": NCCL picks
  int minCTAs = -2147483647 - 1;
  int maxCTAs = -2147483647 - 1;
  const char* netName = nullptr;
};

struct NcclLib {
  std::string path;  // realpath of the loaded file
  int version = 0;   // ncclGetVersion code, e.g. 22809
  std::string version_str;

  ncclResult_t (*GetVersion)(int*);
  ncclResult_t (*GetUniqueId)(ncclUniqueId*);
  ncclResult_t (*CommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfigV2_14*);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*CommAbort)(ncclComm_t);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*);
  const char* (*GetErrorString)(ncclResult_t);
  const char* (*GetLastError)(ncclComm_t);
  ncclResult_t (*GroupStart)();
  ncclResult_t (*GroupEnd)();
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  // NCCL's own allocator (cuMem, NCCL >= 2.19; what nccl-tests allocates with); nullptr where absent.
  ncclResult_t (*MemAlloc)(void**, size_t) = nullptr;
  ncclResult_t (*MemFree)(void*) = nullptr;

  // Throws NcclError for anything but ncclSuccess and ncclInProgress (a non-blocking comm's "started").
  ncclResult_t check(ncclResult_t r, const char* expr, const char* file, int line, ncclComm_t comm = nullptr) const;
  // The no-throw variant for destructors: logs and carries on.
  void warn(ncclResult_t r, const char* expr, const char* file, int line) const noexcept;
};

// dlopen (cached per path) + dlsym + ncclGetVersion; NcclError when the file is missing or not NCCL.
const NcclLib& load_nccl(const std::string& path);

}  // namespace fb

#define FB_NCCL_CHECK(lib, expr) (lib).check((expr), #expr, __FILE__, __LINE__)
#define FB_NCCL_CHECK_COMM(lib, comm, expr) (lib).check((expr), #expr, __FILE__, __LINE__, (comm))
#define FB_NCCL_WARN(lib, expr) (lib).warn((expr), #expr, __FILE__, __LINE__)
