// fabricbench._engine: the compiled measurement core (NCCL loaded at run time, CUDA runtime linked
// statically, so it imports on a machine with no driver). Private; fabricbench/measuring/engines/native.py
// is its one user, and fabricbench/_engine.pyi documents it.
#include <pybind11/pybind11.h>

#include "bindings.hpp"

PYBIND11_MODULE(_engine, m) {
  m.doc() = "fabricbench's compiled measurement core (private; see fabricbench/_engine.pyi)";
  fb::register_errors(m);
  fb::register_runtime(m);
  fb::register_nccl(m);
  fb::register_comm(m);
  fb::register_copy(m);
}
