// Copy bandwidth between two GPUs (cudaMemcpyPeerAsync) and between a GPU and pinned host memory,
// timed like the collectives: blocking kernel, an event per iteration, slowest stream counts.
#include "copy.hpp"

#include <memory>
#include <stdexcept>

#include "errors.hpp"

namespace fb {

namespace {

struct Stream {
  int device;
  cudaStream_t s = nullptr;
  explicit Stream(int d) : device(d) {
    FB_CUDA_CHECK(cudaSetDevice(d));
    FB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  ~Stream() {
    cudaSetDevice(device);
    FB_CUDA_WARN(cudaStreamDestroy(s));
  }
};

struct PinnedBuffer {
  char* p = nullptr;
  explicit PinnedBuffer(size_t n) { FB_CUDA_CHECK(cudaMallocHost((void**)&p, std::max<size_t>(n, 256))); }
  ~PinnedBuffer() { FB_CUDA_WARN(cudaFreeHost(p)); }
};

void check_args(size_t nbytes, int warmup, int iters) {
  if (nbytes == 0 || iters < 1 || warmup < 0)
    throw std::invalid_argument("need nbytes > 0, iters >= 1 and warmup >= 0");
}

void check_device(int d) {
  int n = 0;
  FB_CUDA_CHECK(cudaGetDeviceCount(&n));
  if (d < 0 || d >= n)
    throw std::invalid_argument("device " + std::to_string(d) + " is not visible (" + std::to_string(n) + " visible)");
}

std::vector<double> time_copies(const std::vector<Lane>& lanes, int warmup, int iters,
                                const std::function<void(int)>& enqueue, const std::string& what,
                                const Hooks& hooks) {
  const double timeout_s = 300;
  for (int i = 0; i < warmup; ++i) enqueue(i);
  drain(lanes, timeout_s, what + " (warm-up)", "copy abandoned", hooks, nullptr, nullptr);
  return timed_loop(lanes, iters, enqueue, timeout_s, what, "copy abandoned", hooks, nullptr, nullptr);
}

}  // namespace

CopyResult copy_peer(int src, int dst, size_t nbytes, int warmup, int iters, bool bidirectional, const Hooks& hooks) {
  check_args(nbytes, warmup, iters);
  check_device(src);
  check_device(dst);
  CopyResult r;
  if (src != dst) {
    int a = 0, b = 0;
    FB_CUDA_CHECK(cudaDeviceCanAccessPeer(&a, src, dst));
    FB_CUDA_CHECK(cudaDeviceCanAccessPeer(&b, dst, src));
    r.peer_access = a && b;
    if (r.peer_access) {
      for (auto [from, to] : {std::pair{src, dst}, std::pair{dst, src}}) {
        FB_CUDA_CHECK(cudaSetDevice(from));
        cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
        else FB_CUDA_CHECK(e);
      }
    }
  }
  DeviceBuffer a_src(src, nbytes), a_dst(dst, nbytes);
  std::unique_ptr<DeviceBuffer> b_src, b_dst;
  Stream s1(src);
  std::unique_ptr<Stream> s2;
  std::vector<Lane> lanes{{src, s1.s}};
  if (bidirectional) {
    b_src = std::make_unique<DeviceBuffer>(dst, nbytes);  // the reverse copy: dst -> src
    b_dst = std::make_unique<DeviceBuffer>(src, nbytes);
    s2 = std::make_unique<Stream>(dst);
    lanes.push_back({dst, s2->s});
  }
  auto enqueue = [&](int) {
    FB_CUDA_CHECK(cudaSetDevice(src));
    FB_CUDA_CHECK(cudaMemcpyPeerAsync(a_dst.get(), dst, a_src.get(), src, nbytes, s1.s));
    if (bidirectional) {
      FB_CUDA_CHECK(cudaSetDevice(dst));
      FB_CUDA_CHECK(cudaMemcpyPeerAsync(b_dst->get(), src, b_src->get(), dst, nbytes, s2->s));
    }
  };
  r.times_us = time_copies(lanes, warmup, iters, enqueue,
                           "copy of " + std::to_string(nbytes) + " B from GPU " + std::to_string(src) + " to " +
                               std::to_string(dst),
                           hooks);
  return r;
}

CopyResult copy_host(int device, size_t nbytes, int warmup, int iters, const std::string& direction, const Hooks& hooks) {
  check_args(nbytes, warmup, iters);
  check_device(device);
  bool h2d = direction == "h2d" || direction == "bidir";
  bool d2h = direction == "d2h" || direction == "bidir";
  if (!h2d && !d2h) throw std::invalid_argument("direction must be h2d, d2h or bidir, not '" + direction + "'");
  PinnedBuffer host_in(h2d ? nbytes : 1), host_out(d2h ? nbytes : 1);
  DeviceBuffer dev_in(device, h2d ? nbytes : 1), dev_out(device, d2h ? nbytes : 1);
  Stream s_h2d(device), s_d2h(device);
  std::vector<Lane> lanes;
  if (h2d) lanes.push_back({device, s_h2d.s});
  if (d2h) lanes.push_back({device, s_d2h.s});
  auto enqueue = [&](int) {
    FB_CUDA_CHECK(cudaSetDevice(device));
    if (h2d) FB_CUDA_CHECK(cudaMemcpyAsync(dev_in.get(), host_in.p, nbytes, cudaMemcpyHostToDevice, s_h2d.s));
    if (d2h) FB_CUDA_CHECK(cudaMemcpyAsync(host_out.p, dev_out.get(), nbytes, cudaMemcpyDeviceToHost, s_d2h.s));
  };
  CopyResult r;
  r.times_us = time_copies(lanes, warmup, iters, enqueue,
                           direction + " copy of " + std::to_string(nbytes) + " B on GPU " + std::to_string(device),
                           hooks);
  return r;
}

}  // namespace fb
