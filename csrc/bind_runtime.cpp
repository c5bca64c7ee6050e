// What CUDA sees here: driver/runtime versions and the visible devices. Never throws for "no driver".
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <optional>
#include <stdexcept>
#include <vector>

#include "bindings.hpp"
#include "errors.hpp"

namespace py = pybind11;

namespace fb {

namespace {

int device_count_or_zero() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string uuid_text(const cudaUUID_t& u) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char s[64];
  std::snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return s;
}

}  // namespace

void register_runtime(py::module_& m) {
  m.def(
      "runtime_info",
      [] {
        int driver = 0, runtime = 0;
        if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
        cudaRuntimeGetVersion(&runtime);
        cudaGetLastError();
        py::dict d;
        d["driver_version"] = driver;  // e.g. 13000 for 13.0; 0 when no driver is installed
        d["runtime_version"] = runtime;
        d["device_count"] = driver ? device_count_or_zero() : 0;
        return d;
      },
      "{'driver_version': int, 'runtime_version': int, 'device_count': int}; zeros, not an error, "
      "where there is no driver or no GPU.");

  m.def(
      "devices",
      [](const std::optional<std::vector<int>>& indices) {
        py::list out;
        int n = device_count_or_zero();
        std::vector<int> which;
        if (indices) which = *indices;
        else
          for (int i = 0; i < n; ++i) which.push_back(i);
        for (int i : which) {
          if (i < 0 || i >= n)
            throw std::invalid_argument("device " + std::to_string(i) + " is not visible (" + std::to_string(n) +
                                        " visible)");
          cudaDeviceProp p;
          FB_CUDA_CHECK(cudaGetDeviceProperties(&p, i));
          char bus[32] = {0};
          FB_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, i));
          size_t free_b = 0, total_b = 0;
          FB_CUDA_CHECK(cudaSetDevice(i));
          FB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
          py::dict d;
          d["index"] = i;
          d["name"] = std::string(p.name);
          d["uuid"] = uuid_text(p.uuid);
          d["pci_bus_id"] = std::string(bus);
          d["total_bytes"] = (size_t)p.totalGlobalMem;
          d["free_bytes"] = free_b;
          d["multiprocessors"] = p.multiProcessorCount;
          d["l2_bytes"] = p.l2CacheSize;
          d["cc"] = std::to_string(p.major) + "." + std::to_string(p.minor);
          out.append(d);
        }
        return out;
      },
      py::arg("indices") = py::none(),
      "One dict per visible device (or per device in `indices`; only those get a CUDA context): index, name, uuid, pci_bus_id, total_bytes, free_bytes, "
      "multiprocessors, l2_bytes, cc ('9.0'). Empty where there is no GPU.");
}

}  // namespace fb
