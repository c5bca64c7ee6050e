#include "dtypes.hpp"

#include <stdexcept>

namespace fb {

static const DType kDTypes[] = {
    {"float32", Dt::f32, ncclFloat32, 4}, {"bfloat16", Dt::bf16, ncclBfloat16, 2},
    {"float16", Dt::f16, ncclFloat16, 2}, {"float64", Dt::f64, ncclFloat64, 8},
    {"int32", Dt::i32, ncclInt32, 4},     {"int8", Dt::i8, ncclInt8, 1},
    {"uint8", Dt::u8, ncclUint8, 1},
};

const DType& dtype_by_name(const std::string& name) {
  std::string names;
  for (const auto& d : kDTypes) {
    if (name == d.name) return d;
    names += names.empty() ? d.name : std::string(", ") + d.name;
  }
  throw std::invalid_argument("unknown dtype '" + name + "'; choose from " + names);
}

}  // namespace fb
