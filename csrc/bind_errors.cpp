// Maps the C++ exceptions onto fabricbench.errors, so Python sees one hierarchy whether or not the
// extension exists, and a private hook lets CPU tests check that mapping without a GPU.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "errors.hpp"
#include "nccl_api.hpp"

namespace py = pybind11;

namespace fb {

void register_errors(py::module_& m) {
  py::module_ errors = py::module_::import("fabricbench.errors");
  // Kept alive for the process: translators run long after this function returns.
  static py::object base = errors.attr("FabricbenchError");
  static py::object cuda = errors.attr("CudaError");
  static py::object nccl = errors.attr("NcclError");
  static py::object timeout = errors.attr("CollectiveTimeout");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Timeout& e) {
      PyErr_SetString(timeout.ptr(), e.what());
    } catch (const NcclError& e) {
      PyErr_SetString(nccl.ptr(), e.what());
    } catch (const CudaError& e) {
      PyErr_SetString(cuda.ptr(), e.what());
    } catch (const EngineError& e) {
      PyErr_SetString(base.ptr(), e.what());
    }
  });

  m.def(
      "_raise_for_test",
      [](const std::string& kind, const std::string& message) {
        if (kind == "cuda") throw CudaError(message);
        if (kind == "nccl") throw NcclError(message);
        if (kind == "timeout") throw Timeout(message);
        if (kind == "engine") throw EngineError(message);
        if (kind == "cuda_check") FB_CUDA_CHECK(cudaErrorInvalidValue);
        throw std::invalid_argument("unknown kind " + kind + "; use cuda, nccl, timeout, engine or cuda_check");
      },
      py::arg("kind"), py::arg("message"),
      "Private: throw the C++ exception `kind` (cuda, nccl, timeout, engine; cuda_check goes through the "
      "CUDA check macro) so CPU tests can check its translation into fabricbench.errors.");
}

}  // namespace fb
