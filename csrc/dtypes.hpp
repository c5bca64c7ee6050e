// Element types by the names of fabricbench/dtypes.py, with their NCCL enum and size.
#pragma once

#include <cstddef>
#include <string>

#include "nccl_api.hpp"

namespace fb {

enum class Dt { f32, bf16, f16, f64, i32, i8, u8 };

struct DType {
  const char* name;
  Dt id;
  ncclDataType_t nccl;
  size_t size;
};

// Throws std::invalid_argument (-> ValueError) naming the choices.
const DType& dtype_by_name(const std::string& name);

}  // namespace fb
