// all_gather: out[r*count + j] = in_r[j]. Count is the per-rank part; in place, the send view is
// part `rank` of the output (NCCL's convention: sendbuf = recvbuf + rank*count).
#include "../kernels.cuh"
#include "collective.hpp"

namespace fb {
namespace {

struct Expect {
  uint64_t seed;
  size_t count;
  __device__ double operator()(size_t e) const { return check_value(seed, (int)(e / count), e % count); }
};

ncclResult_t launch(const CollArgs& a) {
  return a.nccl.AllGather(a.send, a.recv, a.count, a.dt.nccl, a.comm, a.stream);
}

void verify(const VerifyArgs& v) {
  if (v.count == 0) return;
  launch_verify(v.out, v.dt, v.count * v.nranks, Expect{v.seed, v.count}, v.wrong, v.stream);
}

}  // namespace

extern const CollectiveDef kAllGather = {"all_gather", elems_count, elems_parts, true,
                                         offset_rank_part, offset_zero, launch, verify};
}  // namespace fb
