// The default timing method (nvbandwidth's and nvbench's): a blocking kernel holds every stream while the
// host enqueues a chunk of iterations with a CUDA event before each and one after the last; the host
// then releases all streams at once, so every GPU starts together and host launch cost stays out of
// the device time. Per iteration, the slowest stream (GPU) of this process counts.
// The other method, host_timed_loop, is nccl-tests': a host clock around a loop of launches.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

namespace fb {

struct Lane {  // one stream that takes part in a timed loop
  int device;
  cudaStream_t stream;
};

struct Hooks {
  std::function<void()> barrier;        // called (GIL held) after enqueueing, before release; may be empty
  std::function<void()> check_signals;  // throws on Ctrl-C (the binding calls PyErr_CheckSignals)
};

// At most this many iterations are enqueued behind one blocking kernel: CUDA's launch queue is about a
// thousand entries deep, and a full queue while the blocking kernel holds the GPU would deadlock.
constexpr int kMaxChunk = 200;

// Polls every event until done (short sleeps, or only a yield with `spin`, where the moment of
// completion is being timed; Ctrl-C checked every 100 ms); `poll_error` may throw an asynchronous
// error; at the deadline calls `abort` and throws Timeout("<what> did not finish within T s; <aborted>").
void wait_events(const std::vector<cudaEvent_t>& events, double timeout_s, const std::string& what,
                 const std::string& aborted, const Hooks& hooks, const std::function<void()>& poll_error,
                 const std::function<void()>& abort, bool spin = false);

// Runs `iters` iterations (enqueue(i) enqueues iteration i on every lane) in chunks behind the
// blocking kernel; returns per-iteration time in microseconds (slowest lane), divided by `divide`.
std::vector<double> timed_loop(const std::vector<Lane>& lanes, int iters, const std::function<void(int)>& enqueue,
                               double timeout_s, const std::string& what, const std::string& aborted,
                               const Hooks& hooks, const std::function<void()>& poll_error,
                               const std::function<void()>& abort, double divide = 1.0);

// nccl-tests' method: barrier() (per-rank mode) first, then the host clock from before the first of
// `iters` launches (enqueue(i), no blocking kernel) to the moment every lane has finished (polled
// without sleeping); returns that time in microseconds divided by iters * divide. Where the host
// launches slower than the GPU runs, launch cost is part of the figure, as it is in nccl-tests'.
double host_timed_loop(const std::vector<Lane>& lanes, int iters, const std::function<void(int)>& enqueue,
                       double timeout_s, const std::string& what, const std::string& aborted, const Hooks& hooks,
                       const std::function<void()>& poll_error, const std::function<void()>& abort,
                       double divide = 1.0);

// Records an event on every lane and waits for them all (untimed warm-up, check phase).
void drain(const std::vector<Lane>& lanes, double timeout_s, const std::string& what, const std::string& aborted,
           const Hooks& hooks, const std::function<void()>& poll_error, const std::function<void()>& abort);

// RAII device allocation; freeing never throws.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), device_(o.device_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  DeviceBuffer(const DeviceBuffer&) = delete;
  char* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  char* ptr_ = nullptr;
  int device_ = 0;
  size_t bytes_ = 0;
};

}  // namespace fb
