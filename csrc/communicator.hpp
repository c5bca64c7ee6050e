// A clique of NCCL communicators driven by this process (one per local GPU) and the timed run of one
// collective over it. Non-blocking communicators throughout, so set-up and every wait honour a deadline
// and can be aborted (see nccl_api.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nccl_api.hpp"
#include "timing.hpp"

namespace fb {

// How iterations use memory: "rotate" cycles through k buffer sets that together span about twice the
// L2, so no iteration reads what the last one left in the cache (fabricbench's default); "reuse" runs
// every iteration on one set, as nccl-tests does when its sizes leave no room to shift (warm L2 below
// ~L2 / 2).
enum class Buffers { rotate, reuse };
// How time is read: "events" = a CUDA event per iteration behind a blocking kernel (device time, no
// launch cost; one sample per iteration); "loop" = a host clock around a whole loop of launches up to
// the last completion, divided by the count (nccl-tests' method: launch cost included wherever the
// host is slower than the GPU; one sample per loop).
enum class TimingMode { events, loop };

// Where buffers come from: cudaMalloc (what PyTorch's caching allocator hands NCCL) or ncclMemAlloc
// (NCCL's cuMem allocator, NCCL >= 2.19; nccl-tests allocates with it).
enum class Alloc { cuda, nccl };

Buffers buffers_by_name(const std::string& name);     // std::invalid_argument naming the choices
TimingMode timing_by_name(const std::string& name);
Alloc alloc_by_name(const std::string& name);

struct RunArgs {
  std::string op, dtype;
  size_t count = 0;  // the NCCL call's count argument
  bool inplace = false;
  int warmup = 5, iters = 20;
  bool graph = false;
  int graph_iters = 100;
  bool check = false;
  uint64_t seed = 0;
  double timeout_s = 300;
  Buffers buffers = Buffers::rotate;
  TimingMode timing = TimingMode::events;
  Alloc alloc = Alloc::cuda;
  int loops = 1;  // timing "loop": timed loops of `iters` in this run (one allocation), one sample each
};

struct RunResult {
  std::vector<double> times_us;  // events: per timed iteration, the slowest local GPU; loop: one mean
  std::optional<long long> wrong;
  int rotate = 1;  // buffer sets cycled through
};

class Communicator {
 public:
  static Communicator* single_process(const std::string& nccl_path, const std::vector<int>& devices, double timeout_s,
                                      const Hooks& hooks);
  static Communicator* per_rank(const std::string& nccl_path, int device, int rank, int nranks,
                                const std::string& unique_id, double timeout_s, const Hooks& hooks);
  ~Communicator();

  RunResult run(const RunArgs& a, const Hooks& hooks);
  void close();
  void abort() noexcept;

  int nranks() const { return nranks_; }
  const std::vector<int>& devices() const { return devices_; }
  const std::vector<int>& ranks() const { return ranks_; }

 private:
  Communicator(const NcclLib& lib, std::vector<int> devices, std::vector<int> ranks, int nranks);
  void init(const ncclUniqueId& id, double timeout_s, const Hooks& hooks, const std::string& what);
  void ensure_usable() const;
  void poll_async();  // throws NcclError for an asynchronous failure
  void settle(double timeout_s, const std::string& what, const Hooks& hooks);  // wait out ncclInProgress

  // The pieces of run(), in order (RunPlan and RunBuffers live in communicator.cpp).
  struct RunPlan;
  struct RunBuffers;
  RunBuffers make_buffers(const RunPlan& p) const;
  void fill_inputs(const RunPlan& p, const RunBuffers& b, bool first_only);
  void enqueue(const RunPlan& p, const RunBuffers& b, int i, const Hooks& hooks);
  std::vector<double> time_eager(const RunPlan& p, const RunBuffers& b, const Hooks& hooks);
  std::vector<double> time_graph(const RunPlan& p, const RunBuffers& b, const Hooks& hooks);
  long long check(const RunPlan& p, const RunBuffers& b, const Hooks& hooks);
  std::vector<Lane> lanes() const;

  const NcclLib& nccl_;
  std::vector<int> devices_, ranks_;
  int nranks_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  bool aborted_ = false, closed_ = false;
};

std::string unique_id(const std::string& nccl_path);

}  // namespace fb
