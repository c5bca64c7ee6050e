// all_to_all: part p of rank r's input goes to part r of rank p's output, as ncclSend/ncclRecv pairs
// in one group. Count is the per-peer part. NCCL has no in-place form: the parts would overwrite.
#include "../kernels.cuh"
#include "collective.hpp"

namespace fb {
namespace {

struct Expect {
  uint64_t seed;
  size_t count;
  int rank;
  __device__ double operator()(size_t e) const {
    // out_q[p*count + j] = in_p[q*count + j]
    return check_value(seed, (int)(e / count), (size_t)rank * count + e % count);
  }
};

ncclResult_t launch(const CollArgs& a) {
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  size_t part = a.count * a.dt.size;
  FB_NCCL_CHECK(a.nccl, a.nccl.GroupStart());
  for (int p = 0; p < a.nranks; ++p) {
    FB_NCCL_CHECK_COMM(a.nccl, a.comm, a.nccl.Send(send + p * part, a.count, a.dt.nccl, p, a.comm, a.stream));
    FB_NCCL_CHECK_COMM(a.nccl, a.comm, a.nccl.Recv(recv + p * part, a.count, a.dt.nccl, p, a.comm, a.stream));
  }
  return a.nccl.GroupEnd();
}

void verify(const VerifyArgs& v) {
  if (v.count == 0) return;
  launch_verify(v.out, v.dt, v.count * v.nranks, Expect{v.seed, v.count, v.rank}, v.wrong, v.stream);
}

}  // namespace

extern const CollectiveDef kAllToAll = {"all_to_all", elems_parts, elems_parts, false,
                                        nullptr, nullptr, launch, verify};
}  // namespace fb
