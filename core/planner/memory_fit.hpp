// The binding split: a plan that does not fit its devices' memory either moves whole units
// (memory_unit(): the input ops, layers, the output ops) off the device that overflows, to the
// next device in the preference order — llama.cpp's -ngl, chosen by the planner and explained —
// or fails with SY011 naming each location's need and capacity and the largest context that
// would fit. --strict never moves anything.
#pragma once

#include <functional>

#include "core/planner/planner.hpp"

namespace sy {

// Places every op under a policy and computes the plan's memory (plan_graph's first step).
using PlaceFn = std::function<Plan(const Policy&)>;

// `plan` (placed under `policy`) made to fit: unchanged when it does, split when it can be,
// else carrying the SY011 error.
Plan fit_memory(Plan plan, const Graph& graph, const PlaceFn& place, const Policy& policy);

}  // namespace sy
