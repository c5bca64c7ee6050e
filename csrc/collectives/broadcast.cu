// broadcast from rank 0: out[e] = in_0[e]. Count is the whole buffer.
#include "../kernels.cuh"
#include "collective.hpp"

namespace fb {
namespace {

struct Expect {
  uint64_t seed;
  __device__ double operator()(size_t e) const { return check_value(seed, 0, e); }
};

ncclResult_t launch(const CollArgs& a) {
  return a.nccl.Broadcast(a.send, a.recv, a.count, a.dt.nccl, /*root=*/0, a.comm, a.stream);
}

void verify(const VerifyArgs& v) { launch_verify(v.out, v.dt, v.count, Expect{v.seed}, v.wrong, v.stream); }

}  // namespace

extern const CollectiveDef kBroadcast = {"broadcast", elems_count, elems_count, true,
                                         offset_zero, offset_zero, launch, verify};
}  // namespace fb
