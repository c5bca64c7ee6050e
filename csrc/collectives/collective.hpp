// What the harness needs to know about a collective, filled in by one small file per collective
// (nccl-tests' layout) and listed in table.cpp. The harness never switches on the op name.
#pragma once

#include <cstdint>
#include <string>

#include "../dtypes.hpp"
#include "../nccl_api.hpp"

namespace fb {

struct CollArgs {
  const NcclLib& nccl;
  const void* send;
  void* recv;
  size_t count;  // the NCCL call's count argument
  const DType& dt;
  int rank, nranks;
  ncclComm_t comm;
  cudaStream_t stream;
};

struct VerifyArgs {
  const void* out;  // this rank's receive buffer
  Dt dt;
  size_t count;
  int rank, nranks;
  uint64_t seed;                // inputs were check_value(seed, r, e) on every rank r
  unsigned long long* wrong;    // device counter
  cudaStream_t stream;
};

struct CollectiveDef {
  const char* name;
  size_t (*send_elems)(size_t count, int nranks);
  size_t (*recv_elems)(size_t count, int nranks);
  bool supports_inplace;
  // In place: one buffer of max(send, recv) elements; where the send and receive views start in it.
  size_t (*inplace_send_offset)(size_t count, int rank);
  size_t (*inplace_recv_offset)(size_t count, int rank);
  ncclResult_t (*launch)(const CollArgs&);  // enqueue one call (inside the caller's group)
  void (*verify)(const VerifyArgs&);        // count wrong output elements on the device
};

// Throws std::invalid_argument naming the choices.
const CollectiveDef& collective_by_name(const std::string& name);

inline size_t elems_count(size_t count, int) { return count; }
inline size_t elems_parts(size_t count, int nranks) { return count * (size_t)nranks; }
inline size_t offset_zero(size_t, int) { return 0; }
inline size_t offset_rank_part(size_t count, int rank) { return count * (size_t)rank; }

}  // namespace fb
