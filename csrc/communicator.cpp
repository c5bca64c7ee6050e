#include "communicator.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "collectives/collective.hpp"
#include "dtypes.hpp"
#include "kernels.hpp"

namespace fb {

namespace {

const char* kAborted = "communicator aborted";

std::string size_text(size_t bytes) { return std::to_string(bytes) + " B"; }

}  // namespace

std::string unique_id(const std::string& nccl_path) {
  const NcclLib& nccl = load_nccl(nccl_path);
  ncclUniqueId id;
  FB_NCCL_CHECK(nccl, nccl.GetUniqueId(&id));
  return std::string(id.internal, sizeof id.internal);
}

Communicator::Communicator(const NcclLib& lib, std::vector<int> devices, std::vector<int> ranks, int nranks)
    : nccl_(lib), devices_(std::move(devices)), ranks_(std::move(ranks)), nranks_(nranks) {}

Communicator* Communicator::single_process(const std::string& nccl_path, const std::vector<int>& devices,
                                           double timeout_s, const Hooks& hooks) {
  const NcclLib& nccl = load_nccl(nccl_path);
  int visible = 0;
  FB_CUDA_CHECK(cudaGetDeviceCount(&visible));
  if (devices.empty()) throw std::invalid_argument("single_process needs at least one device");
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] < 0 || devices[i] >= visible)
      throw std::invalid_argument("device " + std::to_string(devices[i]) + " is not visible (" +
                                  std::to_string(visible) + " visible: 0-" + std::to_string(visible - 1) + ")");
    if (std::count(devices.begin(), devices.end(), devices[i]) > 1)
      throw std::invalid_argument("device " + std::to_string(devices[i]) + " is listed twice");
  }
  std::vector<int> ranks(devices.size());
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = (int)i;
  std::unique_ptr<Communicator> c(new Communicator(nccl, devices, ranks, (int)devices.size()));
  ncclUniqueId id;
  FB_NCCL_CHECK(nccl, nccl.GetUniqueId(&id));
  c->init(id, timeout_s, hooks, "communicator set-up over " + std::to_string(devices.size()) + " GPU(s)");
  return c.release();
}

Communicator* Communicator::per_rank(const std::string& nccl_path, int device, int rank, int nranks,
                                     const std::string& uid, double timeout_s, const Hooks& hooks) {
  const NcclLib& nccl = load_nccl(nccl_path);
  if (uid.size() != sizeof(ncclUniqueId))
    throw std::invalid_argument("unique_id must be " + std::to_string(sizeof(ncclUniqueId)) + " bytes, got " +
                                std::to_string(uid.size()));
  if (nranks < 1 || rank < 0 || rank >= nranks)
    throw std::invalid_argument("rank " + std::to_string(rank) + " is outside 0.." + std::to_string(nranks - 1));
  std::unique_ptr<Communicator> c(new Communicator(nccl, {device}, {rank}, nranks));
  ncclUniqueId id;
  std::copy(uid.begin(), uid.end(), id.internal);
  c->init(id, timeout_s, hooks,
          "communicator set-up of rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
              " (waiting for every rank to join)");
  return c.release();
}

void Communicator::init(const ncclUniqueId& id, double timeout_s, const Hooks& hooks, const std::string& what) {
  comms_.assign(devices_.size(), nullptr);
  ncclConfigV2_14 config;  // blocking = 0
  FB_NCCL_CHECK(nccl_, nccl_.GroupStart());
  for (size_t i = 0; i < devices_.size(); ++i) {
    FB_CUDA_CHECK(cudaSetDevice(devices_[i]));
    FB_NCCL_CHECK(nccl_, nccl_.CommInitRankConfig(&comms_[i], nranks_, id, ranks_[i], &config));
  }
  FB_NCCL_CHECK(nccl_, nccl_.GroupEnd());
  for (int d : devices_) {
    FB_CUDA_CHECK(cudaSetDevice(d));
    cudaStream_t s;
    FB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    streams_.push_back(s);
  }
  settle(timeout_s, what, hooks);
}

Communicator::~Communicator() {
  if (!aborted_ && !closed_) {
    for (ncclComm_t c : comms_)
      if (c) FB_NCCL_WARN(nccl_, nccl_.CommDestroy(c));
  }
  for (size_t i = 0; i < streams_.size(); ++i) {
    cudaSetDevice(devices_[i]);
    FB_CUDA_WARN(cudaStreamDestroy(streams_[i]));
  }
}

void Communicator::close() {
  if (aborted_ || closed_) return;
  closed_ = true;
  for (ncclComm_t& c : comms_) {
    if (c) FB_NCCL_CHECK_COMM(nccl_, c, nccl_.CommDestroy(c));
    c = nullptr;
  }
}

void Communicator::abort() noexcept {
  if (aborted_ || closed_) return;
  aborted_ = true;
  for (ncclComm_t& c : comms_) {
    if (c) FB_NCCL_WARN(nccl_, nccl_.CommAbort(c));
    c = nullptr;
  }
}

void Communicator::ensure_usable() const {
  if (aborted_)
    throw EngineError("this communicator was aborted (after a time-out, an NCCL error or Ctrl-C); open a new one");
  if (closed_) throw EngineError("this communicator is closed; open a new one");
}

void Communicator::poll_async() {
  for (ncclComm_t c : comms_) {
    ncclResult_t state = ncclSuccess;
    FB_NCCL_CHECK_COMM(nccl_, c, nccl_.CommGetAsyncError(c, &state));
    if (state != ncclSuccess && state != ncclInProgress) {
      std::string msg = std::string("asynchronous NCCL error: ") + nccl_.GetErrorString(state) +
                        "; last error: " + nccl_.GetLastError(c) + "; " + kAborted;
      abort();
      throw NcclError(msg);
    }
  }
}

void Communicator::settle(double timeout_s, const std::string& what, const Hooks& hooks) {
  auto start = std::chrono::steady_clock::now();
  auto next_signal = start + std::chrono::milliseconds(100);
  for (;;) {
    bool ready = true;
    for (ncclComm_t c : comms_) {
      ncclResult_t state = ncclSuccess;
      FB_NCCL_CHECK_COMM(nccl_, c, nccl_.CommGetAsyncError(c, &state));
      if (state == ncclInProgress) {
        ready = false;
      } else if (state != ncclSuccess) {
        abort();
        throw NcclError(what + " failed: ncclResult " + std::to_string((int)state) + " (" +
                        nccl_.GetErrorString(state) + "); " + kAborted);
      }
    }
    if (ready) return;
    auto now = std::chrono::steady_clock::now();
    if (std::chrono::duration<double>(now - start).count() > timeout_s) {
      abort();
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", timeout_s);
      throw Timeout(what + " did not finish within " + buf + " s; " + kAborted);
    }
    if (now > next_signal && hooks.check_signals) {
      next_signal = now + std::chrono::milliseconds(100);
      try {
        hooks.check_signals();
      } catch (...) {
        abort();
        throw;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

RunResult Communicator::run(const RunArgs& a, const Hooks& hooks) {
  ensure_usable();
  const CollectiveDef& coll = collective_by_name(a.op);
  const DType& dt = dtype_by_name(a.dtype);
  if (a.inplace && !coll.supports_inplace)
    throw std::invalid_argument(a.op + " has no in-place form in NCCL (the parts would overwrite each other); "
                                "run it out-of-place");
  if (a.iters < 1 || a.warmup < 0 || a.graph_iters < 1 || a.timeout_s <= 0)
    throw std::invalid_argument("need iters >= 1, warmup >= 0, graph_iters >= 1 and timeout_s > 0");

  const size_t G = devices_.size();
  const size_t es = dt.size;
  const size_t send_e = coll.send_elems(a.count, nranks_), recv_e = coll.recv_elems(a.count, nranks_);
  const size_t set_bytes = a.inplace ? std::max(send_e, recv_e) * es : (send_e + recv_e) * es;
  const std::string what = a.op + " of " + size_text(std::max(send_e, recv_e) * es);

  // Enough buffer sets that one pass over them is about twice the L2, so small sizes are not timed out
  // of a warm cache; one set from ~2x L2 up.
  int l2 = 0;
  for (int d : devices_) {
    int v = 0;
    FB_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, d));
    l2 = std::max(l2, v);
  }
  size_t want = (2 * (size_t)l2 + std::max<size_t>(set_bytes, 1) - 1) / std::max<size_t>(set_bytes, 1);
  const int k = (int)std::clamp<size_t>(want, 1, 16);

  struct View {
    const void* send;
    void* recv;
  };
  std::vector<DeviceBuffer> storage;
  std::vector<std::vector<View>> views(G);
  std::vector<char*> poison_base(G);
  std::vector<size_t> poison_bytes(G);
  for (size_t g = 0; g < G; ++g) {
    for (int s = 0; s < k; ++s) {
      if (a.inplace) {
        storage.emplace_back(devices_[g], set_bytes);
        char* base = storage.back().get();
        views[g].push_back({base + coll.inplace_send_offset(a.count, ranks_[g]) * es,
                            base + coll.inplace_recv_offset(a.count, ranks_[g]) * es});
        if (s == 0) poison_base[g] = base, poison_bytes[g] = set_bytes;
      } else {
        storage.emplace_back(devices_[g], send_e * es);
        char* send = storage.back().get();
        storage.emplace_back(devices_[g], recv_e * es);
        char* recv = storage.back().get();
        views[g].push_back({send, recv});
        if (s == 0) poison_base[g] = recv, poison_bytes[g] = recv_e * es;
      }
    }
  }

  std::vector<Lane> lanes;
  for (size_t g = 0; g < G; ++g) lanes.push_back({devices_[g], streams_[g]});
  auto poll = [this] { poll_async(); };
  auto do_abort = [this] { abort(); };

  // Inputs are the --check values from the start (never zeros, never uninitialised NaNs).
  for (size_t g = 0; g < G; ++g) {
    FB_CUDA_CHECK(cudaSetDevice(devices_[g]));
    for (int s = 0; s < k; ++s)
      launch_fill(const_cast<void*>(views[g][s].send), dt.id, send_e, a.seed, ranks_[g], streams_[g]);
  }

  auto enqueue = [&](int i) {
    const int s = i % k;
    FB_NCCL_CHECK(nccl_, nccl_.GroupStart());
    for (size_t g = 0; g < G; ++g) {
      FB_CUDA_CHECK(cudaSetDevice(devices_[g]));
      CollArgs args{nccl_, views[g][s].send, views[g][s].recv, a.count, dt, ranks_[g], nranks_, comms_[g], streams_[g]};
      FB_NCCL_CHECK_COMM(nccl_, comms_[g], coll.launch(args));
    }
    if (FB_NCCL_CHECK(nccl_, nccl_.GroupEnd()) == ncclInProgress) settle(a.timeout_s, what, hooks);
  };

  // Warm-up (at least one: it also makes NCCL connect its transports before anything is timed/captured).
  for (int i = 0; i < std::max(a.warmup, 1); ++i) enqueue(i);
  drain(lanes, a.timeout_s, what + " (warm-up)", kAborted, hooks, poll, do_abort);

  RunResult result;
  result.rotate = k;
  if (!a.graph) {
    result.times_us = timed_loop(lanes, a.iters, enqueue, a.timeout_s, what, kAborted, hooks, poll, do_abort);
  } else {
    std::vector<cudaGraph_t> graphs(G, nullptr);
    std::vector<cudaGraphExec_t> execs(G, nullptr);
    struct GraphGuard {
      std::vector<cudaGraph_t>& g;
      std::vector<cudaGraphExec_t>& e;
      ~GraphGuard() {
        for (auto x : e)
          if (x) FB_CUDA_WARN(cudaGraphExecDestroy(x));
        for (auto x : g)
          if (x) FB_CUDA_WARN(cudaGraphDestroy(x));
      }
    } guard{graphs, execs};
    for (size_t g = 0; g < G; ++g) {
      FB_CUDA_CHECK(cudaSetDevice(devices_[g]));
      FB_CUDA_CHECK(cudaStreamBeginCapture(streams_[g], cudaStreamCaptureModeGlobal));
    }
    try {
      for (int j = 0; j < a.graph_iters; ++j) enqueue(j);
    } catch (...) {
      for (size_t g = 0; g < G; ++g) {
        cudaSetDevice(devices_[g]);
        cudaStreamEndCapture(streams_[g], &graphs[g]);
      }
      throw;
    }
    for (size_t g = 0; g < G; ++g) {
      FB_CUDA_CHECK(cudaSetDevice(devices_[g]));
      FB_CUDA_CHECK(cudaStreamEndCapture(streams_[g], &graphs[g]));
      FB_CUDA_CHECK(cudaGraphInstantiate(&execs[g], graphs[g], 0));
    }
    auto replay = [&](int) {
      for (size_t g = 0; g < G; ++g) {
        FB_CUDA_CHECK(cudaSetDevice(devices_[g]));
        FB_CUDA_CHECK(cudaGraphLaunch(execs[g], streams_[g]));
      }
    };
    replay(0);  // the first replay uploads the graph
    drain(lanes, a.timeout_s, what + " (graph warm-up)", kAborted, hooks, poll, do_abort);
    result.times_us = timed_loop(lanes, a.iters, replay, a.timeout_s, what + " (graph of " +
                                 std::to_string(a.graph_iters) + ")", kAborted, hooks, poll, do_abort,
                                 (double)a.graph_iters);
  }

  if (a.check) {
    // Poison the output, write the exact inputs, run once, count mismatches on the device.
    std::vector<DeviceBuffer> counters;
    for (size_t g = 0; g < G; ++g) {
      FB_CUDA_CHECK(cudaSetDevice(devices_[g]));
      counters.emplace_back(devices_[g], sizeof(unsigned long long));
      FB_CUDA_CHECK(cudaMemsetAsync(counters[g].get(), 0, sizeof(unsigned long long), streams_[g]));
      FB_CUDA_CHECK(cudaMemsetAsync(poison_base[g], 0xFF, poison_bytes[g], streams_[g]));
      launch_fill(const_cast<void*>(views[g][0].send), dt.id, send_e, a.seed, ranks_[g], streams_[g]);
    }
    enqueue(0);
    for (size_t g = 0; g < G; ++g) {
      FB_CUDA_CHECK(cudaSetDevice(devices_[g]));
      coll.verify({views[g][0].recv, dt.id, a.count, ranks_[g], nranks_, a.seed,
                   (unsigned long long*)counters[g].get(), streams_[g]});
    }
    drain(lanes, a.timeout_s, what + " (check)", kAborted, hooks, poll, do_abort);
    long long wrong = 0;
    for (size_t g = 0; g < G; ++g) {
      unsigned long long v = 0;
      FB_CUDA_CHECK(cudaMemcpy(&v, counters[g].get(), sizeof v, cudaMemcpyDeviceToHost));
      wrong += (long long)v;
    }
    result.wrong = wrong;
  }
  return result;
}

}  // namespace fb
