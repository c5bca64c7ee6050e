#include "timing.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "errors.hpp"
#include "kernels.hpp"

namespace fb {

namespace {

using Clock = std::chrono::steady_clock;

// A host-mapped pair of ints: [0] releases the blocking kernels, [1] says one of them timed out.
class HostFlag {
 public:
  HostFlag() {
    FB_CUDA_CHECK(cudaHostAlloc((void**)&host_, 2 * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
    host_[0] = host_[1] = 0;
  }
  ~HostFlag() { FB_CUDA_WARN(cudaFreeHost((void*)host_)); }
  volatile int* release() const { return host_; }  // UVA: the host pointer is valid on every device
  volatile int* timed_out() const { return host_ + 1; }
  void set_release(int v) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    host_[0] = v;
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

 private:
  volatile int* host_ = nullptr;
};

// Releases the blocking kernels however the enqueue phase ends (an exception in barrier() included),
// so a stream is never left held.
struct ReleaseGuard {
  HostFlag& flag;
  ~ReleaseGuard() { flag.set_release(1); }
};

class EventPool {
 public:
  EventPool(const std::vector<Lane>& lanes, int per_lane) : per_lane_(per_lane) {
    events_.reserve(lanes.size() * per_lane);
    for (const Lane& l : lanes) {
      FB_CUDA_CHECK(cudaSetDevice(l.device));
      for (int i = 0; i < per_lane; ++i) {
        cudaEvent_t e;
        FB_CUDA_CHECK(cudaEventCreate(&e));
        events_.push_back(e);
      }
    }
  }
  ~EventPool() {
    for (cudaEvent_t e : events_) FB_CUDA_WARN(cudaEventDestroy(e));
  }
  cudaEvent_t at(size_t lane, int i) const { return events_[lane * per_lane_ + i]; }

 private:
  int per_lane_;
  std::vector<cudaEvent_t> events_;
};

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

}  // namespace

namespace {

// The one waiting loop behind wait_events and host_timed_loop: `ready` is polled until true.
void wait_until(const std::function<bool()>& ready, double timeout_s, const std::string& what,
                const std::string& aborted, const Hooks& hooks, const std::function<void()>& poll_error,
                const std::function<void()>& abort, bool spin) {
  auto start = Clock::now();
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  auto next_signal_check = start + std::chrono::milliseconds(100);
  for (;;) {
    if (ready()) return;
    if (poll_error) poll_error();
    auto now = Clock::now();
    if (now > deadline) {
      if (abort) abort();
      throw Timeout(what + " did not finish within " + seconds(timeout_s) + " s; " + aborted);
    }
    if (now > next_signal_check && hooks.check_signals) {
      next_signal_check = now + std::chrono::milliseconds(100);
      try {
        hooks.check_signals();
      } catch (...) {
        if (abort) abort();
        throw;
      }
    }
    if (spin)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace

void wait_events(const std::vector<cudaEvent_t>& events, double timeout_s, const std::string& what,
                 const std::string& aborted, const Hooks& hooks, const std::function<void()>& poll_error,
                 const std::function<void()>& abort, bool spin) {
  auto ready = [&events] {
    for (cudaEvent_t e : events) {
      cudaError_t r = cudaEventQuery(e);
      if (r == cudaErrorNotReady) return false;
      FB_CUDA_CHECK(r);
    }
    return true;
  };
  wait_until(ready, timeout_s, what, aborted, hooks, poll_error, abort, spin);
}

void drain(const std::vector<Lane>& lanes, double timeout_s, const std::string& what, const std::string& aborted,
           const Hooks& hooks, const std::function<void()>& poll_error, const std::function<void()>& abort) {
  EventPool pool(lanes, 1);
  std::vector<cudaEvent_t> evs;
  for (size_t l = 0; l < lanes.size(); ++l) {
    FB_CUDA_CHECK(cudaSetDevice(lanes[l].device));
    FB_CUDA_CHECK(cudaEventRecord(pool.at(l, 0), lanes[l].stream));
    evs.push_back(pool.at(l, 0));
  }
  wait_events(evs, timeout_s, what, aborted, hooks, poll_error, abort);
}

std::vector<double> timed_loop(const std::vector<Lane>& lanes, int iters, const std::function<void(int)>& enqueue,
                               double timeout_s, const std::string& what, const std::string& aborted,
                               const Hooks& hooks, const std::function<void()>& poll_error,
                               const std::function<void()>& abort, double divide) {
  std::vector<double> times(iters, 0.0);
  HostFlag flag;
  EventPool pool(lanes, kMaxChunk + 1);
  auto block_ns = (unsigned long long)(timeout_s * 1e9);
  for (int first = 0; first < iters; first += kMaxChunk) {
    int n = std::min(kMaxChunk, iters - first);
    flag.set_release(0);
    *flag.timed_out() = 0;
    {
      ReleaseGuard guard{flag};
      for (size_t l = 0; l < lanes.size(); ++l) {
        FB_CUDA_CHECK(cudaSetDevice(lanes[l].device));
        launch_block(flag.release(), flag.timed_out(), block_ns, lanes[l].stream);
        FB_CUDA_CHECK(cudaEventRecord(pool.at(l, 0), lanes[l].stream));
      }
      for (int i = 0; i < n; ++i) {
        enqueue(first + i);
        for (size_t l = 0; l < lanes.size(); ++l) {
          FB_CUDA_CHECK(cudaSetDevice(lanes[l].device));
          FB_CUDA_CHECK(cudaEventRecord(pool.at(l, i + 1), lanes[l].stream));
        }
      }
      if (hooks.barrier) hooks.barrier();
    }  // released: every GPU starts now
    std::vector<cudaEvent_t> last;
    for (size_t l = 0; l < lanes.size(); ++l) last.push_back(pool.at(l, n));
    wait_events(last, timeout_s, what, aborted, hooks, poll_error, abort);
    if (*flag.timed_out())
      throw EngineError(what + ": the blocking kernel gave up before the host released it (enqueueing " +
                        std::to_string(n) + " iterations took longer than " + seconds(timeout_s) +
                        " s); the times would include launch cost, so none are reported");
    for (int i = 0; i < n; ++i) {
      double worst = 0;
      for (size_t l = 0; l < lanes.size(); ++l) {
        float ms = 0;
        FB_CUDA_CHECK(cudaEventElapsedTime(&ms, pool.at(l, i), pool.at(l, i + 1)));
        worst = std::max(worst, (double)ms * 1000.0);
      }
      times[first + i] = worst / divide;
    }
  }
  return times;
}

double host_timed_loop(const std::vector<Lane>& lanes, int iters, const std::function<void(int)>& enqueue,
                       double timeout_s, const std::string& what, const std::string& aborted, const Hooks& hooks,
                       const std::function<void()>& poll_error, const std::function<void()>& abort,
                       double divide) {
  if (hooks.barrier) hooks.barrier();  // every rank starts its clock together (nccl-tests' Barrier)
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) enqueue(i);
  // Completion is polled on the streams without sleeping, as nccl-tests does: a 20 us sleep would add
  // up to 20 us to a loop that may itself last only tens of microseconds.
  auto idle = [&lanes] {
    for (const Lane& l : lanes) {
      cudaError_t r = cudaStreamQuery(l.stream);
      if (r == cudaErrorNotReady) return false;
      FB_CUDA_CHECK(r);
    }
    return true;
  };
  wait_until(idle, timeout_s, what, aborted, hooks, poll_error, abort, /*spin=*/true);
  double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  return us / ((double)iters * divide);
}

DeviceBuffer::DeviceBuffer(int device, size_t bytes) : device_(device), bytes_(bytes) {
  FB_CUDA_CHECK(cudaSetDevice(device));
  cudaError_t r = cudaMalloc((void**)&ptr_, std::max<size_t>(bytes, 256));
  if (r != cudaSuccess) {
    ptr_ = nullptr;
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw CudaError("cudaMalloc of " + std::to_string(bytes) + " B on GPU " + std::to_string(device) +
                    " failed: " + cudaGetErrorName(r) + " (" + cudaGetErrorString(r) + "); " +
                    std::to_string(free_b) + " B free of " + std::to_string(total_b));
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) {
    cudaSetDevice(device_);
    FB_CUDA_WARN(cudaFree(ptr_));
  }
}

}  // namespace fb
