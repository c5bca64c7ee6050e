// Copy bandwidth for `fabricbench p2p`: GPU to GPU and GPU to/from pinned host memory.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "copy.hpp"

namespace py = pybind11;

namespace fb {

void register_copy(py::module_& m) {
  m.def(
      "copy_peer",
      [](int src, int dst, size_t nbytes, int warmup, int iters, bool bidirectional) {
        Hooks h = python_hooks(py::none());
        CopyResult r;
        {
          py::gil_scoped_release nogil;
          r = copy_peer(src, dst, nbytes, warmup, iters, bidirectional, h);
        }
        py::dict d;
        d["times_us"] = r.times_us;
        d["peer_access"] = r.peer_access;
        return d;
      },
      py::arg("src"), py::arg("dst"), py::arg("nbytes"), py::arg("warmup") = 5, py::arg("iters") = 20,
      py::arg("bidirectional") = false,
      "cudaMemcpyPeerAsync of nbytes from GPU src to dst (bidirectional: dst->src at the same time on a second "
      "stream; the slower counts) -> {'times_us': [...], 'peer_access': bool (enabled; False for src == dst)}.");
  m.def(
      "copy_host",
      [](int device, size_t nbytes, int warmup, int iters, const std::string& direction) {
        Hooks h = python_hooks(py::none());
        CopyResult r;
        {
          py::gil_scoped_release nogil;
          r = copy_host(device, nbytes, warmup, iters, direction, h);
        }
        py::dict d;
        d["times_us"] = r.times_us;
        return d;
      },
      py::arg("device"), py::arg("nbytes"), py::arg("warmup") = 5, py::arg("iters") = 20,
      py::arg("direction") = "h2d",
      "Pinned host <-> GPU copies: direction 'h2d', 'd2h' or 'bidir' (both at once; the slower counts) -> "
      "{'times_us': [...]}.");
}

}  // namespace fb
