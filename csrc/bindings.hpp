// One register_<area> per binding file; module.cpp calls them in order.
#pragma once

#include <pybind11/pybind11.h>

#include "timing.hpp"

namespace fb {

void register_errors(pybind11::module_& m);
void register_runtime(pybind11::module_& m);
void register_nccl(pybind11::module_& m);
void register_comm(pybind11::module_& m);
void register_copy(pybind11::module_& m);

// Hooks for a call made with the GIL released: Ctrl-C checks (PyErr_CheckSignals under the GIL) and an
// optional Python barrier. `barrier` must outlive the hooks (it is the binding's argument).
Hooks python_hooks(const pybind11::object& barrier);

}  // namespace fb
