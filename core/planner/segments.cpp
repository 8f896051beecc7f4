// A placed phase cut into segments: maximal runs of consecutive ops whose every kernel call
// is one plugin's on one device, and whose copies inside the run are uploads from host memory
// to that device (what a segment takes as SY_SEGMENT_ENTRY_UPLOAD). Anything else between two
// ops — a copy off the device, a call of another plugin — ends the run.
#include <map>

#include "core/planner/memory.hpp"
#include "core/planner/planner.hpp"

namespace sy {
namespace {

// The one (plugin, device) every call of `op` uses, or false when its adaptations use others.
bool single_target(const PlannedOp& op) {
  for (const auto& a : op.adaptations)
    if (a.plugin != op.plugin || a.device != op.device) return false;
  return true;
}

// Whether every copy before `op` is an upload from host memory to `device`.
bool only_uploads(const std::multimap<std::string, const Copy*>& before, const std::string& op,
                  const std::string& device) {
  auto [lo, hi] = before.equal_range(op);
  for (auto it = lo; it != hi; ++it)
    if (it->second->from != kHostLocation || it->second->to != device) return false;
  return true;
}

std::string form_reason(const PlannedSegment& s, const Plugin* plugin, bool spans) {
  if (spans) return "its kernel calls span plugins or devices: op by op";
  if (!plugin) return s.plugin + " is not loaded: op by op";
  if (!plugin->takes_segments())
    return s.plugin + " does not take segments (no segments extension): op by op";
  return s.plugin + " takes segments: " + std::to_string(s.count) +
         (s.count == 1 ? " op" : " ops") + " handed over as one, prepared once, run once a step";
}

}  // namespace

void plan_segments(PhasePlan& phase, const Registry& registry) {
  phase.segments.clear();
  std::multimap<std::string, const Copy*> before;
  for (const auto& c : phase.copies) before.emplace(c.before_op, &c);
  for (size_t i = 0; i < phase.ops.size(); ++i) {
    const PlannedOp& op = phase.ops[i];
    const bool spans = !single_target(op);
    PlannedSegment* open = phase.segments.empty() ? nullptr : &phase.segments.back();
    const bool extend = open && !spans && open->plugin == op.plugin && open->device == op.device &&
                        open->reason.empty() && only_uploads(before, op.id, op.device);
    if (extend) {
      ++open->count;
      continue;
    }
    PlannedSegment s{op.plugin, op.device, i, 1, false, ""};
    if (spans) s.reason = form_reason(s, registry.find(op.plugin), true);  // closed at once
    phase.segments.push_back(std::move(s));
  }
  for (auto& s : phase.segments) {
    if (!s.reason.empty()) continue;
    const Plugin* plugin = registry.find(s.plugin);
    s.segment = plugin && plugin->takes_segments();
    s.reason = form_reason(s, plugin, false);
  }
}

}  // namespace sy
