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

Buffers buffers_by_name(const std::string& name) {
  if (name == "rotate") return Buffers::rotate;
  if (name == "reuse") return Buffers::reuse;
  throw std::invalid_argument("buffers '" + name + "': choose rotate or reuse");
}

Alloc alloc_by_name(const std::string& name) {
  if (name == "cuda") return Alloc::cuda;
  if (name == "nccl") return Alloc::nccl;
  throw std::invalid_argument("alloc '" + name + "': choose cuda or nccl");
}

TimingMode timing_by_name(const std::string& name) {
  if (name == "events") return TimingMode::events;
  if (name == "loop") return TimingMode::loop;
  throw std::invalid_argument("timing '" + name + "': choose events or loop");
}

// One run's resolved arguments: the collective, its buffer sizes and the phrase errors name it by.
struct Communicator::RunPlan {
  const RunArgs& a;
  const CollectiveDef& coll;
  const DType& dt;
  size_t send_e, recv_e, set_bytes;
  std::string what;
};

// One ncclMemAlloc allocation, freed with ncclMemFree (never throws).
class NcclMem {
 public:
  NcclMem(const NcclLib& lib, int device, size_t bytes) : lib_(&lib), device_(device) {
    FB_CUDA_CHECK(cudaSetDevice(device));
    FB_NCCL_CHECK(lib, lib.MemAlloc((void**)&ptr_, std::max<size_t>(bytes, 256)));
  }
  NcclMem(NcclMem&& o) noexcept : lib_(o.lib_), device_(o.device_), ptr_(o.ptr_) { o.ptr_ = nullptr; }
  NcclMem& operator=(NcclMem&&) = delete;
  ~NcclMem() {
    if (ptr_) {
      cudaSetDevice(device_);
      FB_NCCL_WARN(*lib_, lib_->MemFree(ptr_));
    }
  }
  char* get() const { return ptr_; }

 private:
  const NcclLib* lib_;
  int device_;
  char* ptr_ = nullptr;
};

// The buffer sets of one run: views[g][s] is GPU g's set s; the check poisons poison_* (set 0's output).
struct Communicator::RunBuffers {
  struct View {
    const void* send;
    void* recv;
  };
  int k = 1;
  std::vector<DeviceBuffer> storage;
  std::vector<NcclMem> nccl_storage;
  std::vector<std::vector<View>> views;
  std::vector<char*> poison_base;
  std::vector<size_t> poison_bytes;
};

std::vector<Lane> Communicator::lanes() const {
  std::vector<Lane> out;
  for (size_t g = 0; g < devices_.size(); ++g) out.push_back({devices_[g], streams_[g]});
  return out;
}

Communicator::RunBuffers Communicator::make_buffers(const RunPlan& p) const {
  const size_t G = devices_.size(), es = p.dt.size;
  RunBuffers b;
  if (p.a.buffers == Buffers::rotate) {
    // Enough buffer sets that one pass over them is about twice the L2, so small sizes are not timed out
    // of a warm cache; one set from ~2x L2 up.
    int l2 = 0;
    for (int d : devices_) {
      int v = 0;
      FB_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, d));
      l2 = std::max(l2, v);
    }
    const size_t set = std::max<size_t>(p.set_bytes, 1);
    b.k = (int)std::clamp<size_t>((2 * (size_t)l2 + set - 1) / set, 1, 16);
  }
  if (p.a.alloc == Alloc::nccl && !nccl_.MemAlloc)
    throw std::invalid_argument("alloc 'nccl' needs ncclMemAlloc (NCCL 2.19 or newer); " + nccl_.path + " is NCCL " +
                                nccl_.version_str + "; use alloc 'cuda'");
  auto take = [&](int device, size_t bytes) -> char* {
    if (p.a.alloc == Alloc::nccl) return b.nccl_storage.emplace_back(nccl_, device, bytes).get();
    return b.storage.emplace_back(device, bytes).get();
  };
  b.views.resize(G);
  b.poison_base.resize(G);
  b.poison_bytes.resize(G);
  for (size_t g = 0; g < G; ++g) {
    for (int s = 0; s < b.k; ++s) {
      if (p.a.inplace) {
        char* base = take(devices_[g], p.set_bytes);
        b.views[g].push_back({base + p.coll.inplace_send_offset(p.a.count, ranks_[g]) * es,
                              base + p.coll.inplace_recv_offset(p.a.count, ranks_[g]) * es});
        if (s == 0) b.poison_base[g] = base, b.poison_bytes[g] = p.set_bytes;
      } else {
        char* send = take(devices_[g], p.send_e * es);
        char* recv = take(devices_[g], p.recv_e * es);
        b.views[g].push_back({send, recv});
        if (s == 0) b.poison_base[g] = recv, b.poison_bytes[g] = p.recv_e * es;
      }
    }
  }
  return b;
}

// Inputs are the --check values (never zeros, never uninitialised NaNs).
void Communicator::fill_inputs(const RunPlan& p, const RunBuffers& b, bool first_only) {
  for (size_t g = 0; g < devices_.size(); ++g) {
    FB_CUDA_CHECK(cudaSetDevice(devices_[g]));
    for (int s = 0; s < (first_only ? 1 : b.k); ++s)
      launch_fill(const_cast<void*>(b.views[g][s].send), p.dt.id, p.send_e, p.a.seed, ranks_[g], streams_[g]);
  }
}

// Iteration i on every local GPU, on buffer set i mod k. One GPU needs no NCCL group and no device
// switch (fill_inputs made it current on this thread): nccl-tests makes neither call there, and in the
// loop timing their host cost would count.
void Communicator::enqueue(const RunPlan& p, const RunBuffers& b, int i, const Hooks& hooks) {
  const int s = i % b.k;
  const size_t G = devices_.size();
  if (G > 1) FB_NCCL_CHECK(nccl_, nccl_.GroupStart());
  ncclResult_t last = ncclSuccess;
  for (size_t g = 0; g < G; ++g) {
    if (G > 1) FB_CUDA_CHECK(cudaSetDevice(devices_[g]));
    CollArgs args{nccl_, b.views[g][s].send, b.views[g][s].recv, p.a.count, p.dt, ranks_[g], nranks_, comms_[g],
                  streams_[g]};
    last = FB_NCCL_CHECK_COMM(nccl_, comms_[g], p.coll.launch(args));
  }
  if (G > 1) last = FB_NCCL_CHECK(nccl_, nccl_.GroupEnd());
  if (last == ncclInProgress) settle(p.a.timeout_s, p.what, hooks);
}

std::vector<double> Communicator::time_eager(const RunPlan& p, const RunBuffers& b, const Hooks& hooks) {
  auto poll = [this] { poll_async(); };
  auto do_abort = [this] { abort(); };
  auto step = [&](int i) { enqueue(p, b, i, hooks); };
  if (p.a.timing == TimingMode::loop) {
    std::vector<double> out;
    for (int r = 0; r < p.a.loops; ++r)
      out.push_back(host_timed_loop(lanes(), p.a.iters, step, p.a.timeout_s, p.what, kAborted, hooks, poll, do_abort));
    return out;
  }
  return timed_loop(lanes(), p.a.iters, step, p.a.timeout_s, p.what, kAborted, hooks, poll, do_abort);
}

// Captures graph_iters iterations into one CUDA graph per GPU; a timed iteration is one replay, and
// its time is divided by graph_iters.
std::vector<double> Communicator::time_graph(const RunPlan& p, const RunBuffers& b, const Hooks& hooks) {
  const size_t G = devices_.size();
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
    for (int j = 0; j < p.a.graph_iters; ++j) enqueue(p, b, j, hooks);
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
      if (G > 1) FB_CUDA_CHECK(cudaSetDevice(devices_[g]));  // one GPU: already current (instantiate)
      FB_CUDA_CHECK(cudaGraphLaunch(execs[g], streams_[g]));
    }
  };
  auto poll = [this] { poll_async(); };
  auto do_abort = [this] { abort(); };
  const std::string what = p.what + " (graph of " + std::to_string(p.a.graph_iters) + ")";
  // The loop timing launches straight after instantiation, graph upload included, as nccl-tests does.
  if (p.a.timing == TimingMode::loop) {
    std::vector<double> out;
    for (int r = 0; r < p.a.loops; ++r)
      out.push_back(host_timed_loop(lanes(), p.a.iters, replay, p.a.timeout_s, what, kAborted, hooks, poll, do_abort,
                                    (double)p.a.graph_iters));
    return out;
  }
  replay(0);  // the first replay uploads the graph
  drain(lanes(), p.a.timeout_s, p.what + " (graph warm-up)", kAborted, hooks, poll, do_abort);
  return timed_loop(lanes(), p.a.iters, replay, p.a.timeout_s, what, kAborted, hooks, poll, do_abort,
                    (double)p.a.graph_iters);
}

// Poisons the output, writes the exact inputs, runs once and counts mismatches on the device.
long long Communicator::check(const RunPlan& p, const RunBuffers& b, const Hooks& hooks) {
  const size_t G = devices_.size();
  std::vector<DeviceBuffer> counters;
  for (size_t g = 0; g < G; ++g) {
    FB_CUDA_CHECK(cudaSetDevice(devices_[g]));
    counters.emplace_back(devices_[g], sizeof(unsigned long long));
    FB_CUDA_CHECK(cudaMemsetAsync(counters[g].get(), 0, sizeof(unsigned long long), streams_[g]));
    FB_CUDA_CHECK(cudaMemsetAsync(b.poison_base[g], 0xFF, b.poison_bytes[g], streams_[g]));
  }
  fill_inputs(p, b, /*first_only=*/true);
  enqueue(p, b, 0, hooks);
  for (size_t g = 0; g < G; ++g) {
    FB_CUDA_CHECK(cudaSetDevice(devices_[g]));
    p.coll.verify({b.views[g][0].recv, p.dt.id, p.a.count, ranks_[g], nranks_, p.a.seed,
                   (unsigned long long*)counters[g].get(), streams_[g]});
  }
  drain(lanes(), p.a.timeout_s, p.what + " (check)", kAborted, hooks, [this] { poll_async(); },
        [this] { abort(); });
  long long wrong = 0;
  for (size_t g = 0; g < G; ++g) {
    unsigned long long v = 0;
    FB_CUDA_CHECK(cudaMemcpy(&v, counters[g].get(), sizeof v, cudaMemcpyDeviceToHost));
    wrong += (long long)v;
  }
  return wrong;
}

RunResult Communicator::run(const RunArgs& a, const Hooks& hooks) {
  ensure_usable();
  const CollectiveDef& coll = collective_by_name(a.op);
  const DType& dt = dtype_by_name(a.dtype);
  if (a.inplace && !coll.supports_inplace)
    throw std::invalid_argument(a.op + " has no in-place form in NCCL (the parts would overwrite each other); "
                                "run it out-of-place");
  if (a.iters < 1 || a.warmup < 0 || a.graph_iters < 1 || a.timeout_s <= 0 || a.loops < 1)
    throw std::invalid_argument("need iters >= 1, warmup >= 0, graph_iters >= 1, loops >= 1 and timeout_s > 0");
  const size_t send_e = coll.send_elems(a.count, nranks_), recv_e = coll.recv_elems(a.count, nranks_);
  const RunPlan p{a, coll, dt, send_e, recv_e,
                  a.inplace ? std::max(send_e, recv_e) * dt.size : (send_e + recv_e) * dt.size,
                  a.op + " of " + size_text(std::max(send_e, recv_e) * dt.size)};

  RunBuffers b = make_buffers(p);
  fill_inputs(p, b, /*first_only=*/false);
  // Warm-up (at least one: it also makes NCCL connect its transports before anything is timed/captured).
  for (int i = 0; i < std::max(a.warmup, 1); ++i) enqueue(p, b, i, hooks);
  drain(lanes(), a.timeout_s, p.what + " (warm-up)", kAborted, hooks, [this] { poll_async(); },
        [this] { abort(); });

  RunResult result;
  result.rotate = b.k;
  result.times_us = a.graph ? time_graph(p, b, hooks) : time_eager(p, b, hooks);
  if (a.check) result.wrong = check(p, b, hooks);
  return result;
}

}  // namespace fb
