// Communicator: set-up (one process for a device list, or one rank per process) and timed runs.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "communicator.hpp"

namespace py = pybind11;

namespace fb {

Hooks python_hooks(const py::object& barrier) {
  Hooks h;
  h.check_signals = [] {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  };
  if (!barrier.is_none()) {
    h.barrier = [&barrier] {
      py::gil_scoped_acquire gil;
      barrier();
    };
  }
  return h;
}

void register_comm(py::module_& m) {
  py::class_<Communicator>(m, "Communicator",
                           "NCCL communicators of this process (one per local GPU). Unusable after abort().")
      .def_static(
          "single_process",
          [](const std::string& nccl_path, const std::vector<int>& devices, double timeout_s) {
            Hooks h = python_hooks(py::none());
            py::gil_scoped_release nogil;
            return Communicator::single_process(nccl_path, devices, timeout_s, h);
          },
          py::arg("nccl_path"), py::arg("devices"), py::arg("timeout_s") = 300.0,
          "One process drives every device in `devices` (ranks in list order) through one clique. "
          "CollectiveTimeout if set-up exceeds timeout_s.")
      .def_static(
          "per_rank",
          [](const std::string& nccl_path, int device, int rank, int nranks, const py::bytes& uid, double timeout_s) {
            std::string id = uid;
            Hooks h = python_hooks(py::none());
            py::gil_scoped_release nogil;
            return Communicator::per_rank(nccl_path, device, rank, nranks, id, timeout_s, h);
          },
          py::arg("nccl_path"), py::arg("device"), py::arg("rank"), py::arg("nranks"), py::arg("unique_id"),
          py::arg("timeout_s") = 300.0,
          "One rank of `nranks` on `device`; every rank passes the same unique_id. If a peer never comes, "
          "the communicator is aborted and CollectiveTimeout raised after timeout_s.")
      .def_property_readonly("nranks", &Communicator::nranks, "ranks in the communicator (all processes)")
      .def_property_readonly("devices", &Communicator::devices, "this process's CUDA devices, in rank order")
      .def_property_readonly("ranks", &Communicator::ranks, "the rank of each local device")
      .def(
          "run",
          [](Communicator& c, const std::string& op, const std::string& dtype, size_t count, bool inplace, int warmup,
             int iters, bool graph, int graph_iters, bool check, uint64_t seed, double timeout_s,
             const py::object& barrier, const std::string& buffers, const std::string& timing,
             const std::string& alloc, int loops) {
            RunArgs a{op,    dtype, count,     inplace, warmup, iters, graph, graph_iters, check, seed, timeout_s,
                      buffers_by_name(buffers), timing_by_name(timing), alloc_by_name(alloc), loops};
            Hooks h = python_hooks(barrier);
            RunResult r;
            {
              py::gil_scoped_release nogil;
              r = c.run(a, h);
            }
            py::dict d;
            d["times_us"] = r.times_us;
            d["wrong"] = r.wrong ? py::object(py::int_(*r.wrong)) : py::object(py::none());
            d["rotate"] = r.rotate;
            return d;
          },
          py::arg("op"), py::arg("dtype"), py::arg("count"), py::arg("inplace") = false, py::arg("warmup") = 5,
          py::arg("iters") = 20, py::arg("graph") = false, py::arg("graph_iters") = 100, py::arg("check") = false,
          py::arg("seed") = 0, py::arg("timeout_s") = 300.0, py::arg("barrier") = py::none(),
          py::arg("buffers") = "rotate", py::arg("timing") = "events", py::arg("alloc") = "cuda", py::arg("loops") = 1,
          "Time `iters` iterations of `op` -> {'times_us': [...], 'wrong': int or None, 'rotate': buffer "
          "sets}. count is the NCCL call's count argument. graph: replay a CUDA graph of graph_iters "
          "iterations, time per iteration = replay / graph_iters. buffers: 'rotate' (sets spanning ~2x L2) "
          "or 'reuse' (one set). timing: 'events' (one time per iteration, slowest local GPU, behind a "
          "blocking kernel; barrier() is called after enqueueing and before release) or 'loop' (one time: "
          "host clock around all iters launches to the last completion / iters, nccl-tests' method; "
          "barrier() is called before the clock starts; `loops` such loops give one time each). alloc: 'cuda' (cudaMalloc) or 'nccl' (ncclMemAlloc, "
          "NCCL >= 2.19, as nccl-tests). CollectiveTimeout after timeout_s (the "
          "communicator is then aborted).")
      .def("close", &Communicator::close, "ncclCommDestroy every communicator (idempotent)")
      .def("abort", &Communicator::abort, "ncclCommAbort every communicator; the object is unusable after");
}

}  // namespace fb
