// The collectives the engine can run: one file each, one row each. Adding one is a file and a row.
#include <stdexcept>

#include "collective.hpp"

namespace fb {

extern const CollectiveDef kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll;

static const CollectiveDef* const kTable[] = {&kAllReduce, &kAllGather, &kReduceScatter, &kBroadcast, &kAllToAll};

const CollectiveDef& collective_by_name(const std::string& name) {
  std::string names;
  for (const CollectiveDef* c : kTable) {
    if (name == c->name) return *c;
    names += names.empty() ? c->name : std::string(", ") + c->name;
  }
  throw std::invalid_argument("unknown op '" + name + "'; choose from " + names);
}

}  // namespace fb
