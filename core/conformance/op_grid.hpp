// The operators conformance runs for one kernel envelope: inside it (every dtype it lists, the
// features its op kind can use and it declares, edge sizes) and just outside it. Internal to
// conformance/.
#pragma once

#include <string>
#include <vector>

#include "core/capability/envelope.hpp"
#include "core/capability/op.hpp"

namespace sy::conformance {

struct GridCase {
  OpDesc op;
  bool inside = true;
  std::string label;  // "f32 [3,17]", "outside: dtype bf16", ...
  // A varlen case (ABI 1.5): the shapes each execute carries, within the op's bounds (its
  // dynamic dims); empty: the op's own shapes.
  std::vector<std::vector<int64_t>> actual_inputs, actual_outputs;
};

std::vector<GridCase> op_grid(const Envelope& env, bool quick);

}  // namespace sy::conformance
