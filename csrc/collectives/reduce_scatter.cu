// reduce_scatter (sum): rank q gets out[j] = sum over r of in_r[q*count + j]. Count is the per-rank
// part; in place, the receive view is part `rank` of the input (recvbuf = sendbuf + rank*count).
#include "../kernels.cuh"
#include "collective.hpp"

namespace fb {
namespace {

struct Expect {
  uint64_t seed;
  int nranks;
  size_t base;  // rank * count
  __device__ double operator()(size_t j) const {
    double s = 0;
    for (int r = 0; r < nranks; ++r) s += check_value(seed, r, base + j);
    return s;
  }
};

ncclResult_t launch(const CollArgs& a) {
  return a.nccl.ReduceScatter(a.send, a.recv, a.count, a.dt.nccl, ncclSum, a.comm, a.stream);
}

void verify(const VerifyArgs& v) {
  launch_verify(v.out, v.dt, v.count, Expect{v.seed, v.nranks, v.count * v.rank}, v.wrong, v.stream);
}

}  // namespace

extern const CollectiveDef kReduceScatter = {"reduce_scatter", elems_parts, elems_count, true,
                                             offset_zero, offset_rank_part, launch, verify};
}  // namespace fb
