// Loading NCCL at run time and making a unique id for per-rank communicators.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "communicator.hpp"
#include "nccl_api.hpp"

namespace py = pybind11;

namespace fb {

void register_nccl(py::module_& m) {
  m.def(
      "load_nccl",
      [](const std::string& path) {
        const NcclLib& lib = load_nccl(path);
        py::dict d;
        d["path"] = lib.path;
        d["version"] = lib.version;
        d["version_str"] = lib.version_str;
        return d;
      },
      py::arg("path"),
      "dlopen libnccl.so.2 at `path` (cached per path) -> {'path': realpath, 'version': 22809, "
      "'version_str': '2.28.9'}. NcclError if the file is missing or is not NCCL >= 2.14.");

  m.def(
      "unique_id", [](const std::string& path) { return py::bytes(unique_id(path)); }, py::arg("nccl_path"),
      "ncclGetUniqueId: 128 bytes for Communicator.per_rank (rank 0 makes it, the store shares it).");
}

}  // namespace fb
