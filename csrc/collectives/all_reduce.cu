// all_reduce (sum): out[e] = sum over ranks r of in_r[e]. Count is the whole buffer.
#include "../kernels.cuh"
#include "collective.hpp"

namespace fb {
namespace {

struct Expect {
  uint64_t seed;
  int nranks;
  __device__ double operator()(size_t e) const {
    double s = 0;
    for (int r = 0; r < nranks; ++r) s += check_value(seed, r, e);
    return s;
  }
};

ncclResult_t launch(const CollArgs& a) {
  return a.nccl.AllReduce(a.send, a.recv, a.count, a.dt.nccl, ncclSum, a.comm, a.stream);
}

void verify(const VerifyArgs& v) {
  launch_verify(v.out, v.dt, v.count, Expect{v.seed, v.nranks}, v.wrong, v.stream);
}

}  // namespace

extern const CollectiveDef kAllReduce = {"all_reduce", elems_count, elems_count, true,
                                         offset_zero, offset_zero, launch, verify};
}  // namespace fb
