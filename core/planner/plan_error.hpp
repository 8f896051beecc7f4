// The documented error of an op that no candidate may legally serve. The code is chosen by the
// refusals the candidates gave (their constraint, required and offered fields) and the op's
// kind, never by family names or device ids: each rule of plan_error.cpp is one refusal pattern,
// tried in order, the first match wins, SY001 when none does.
#pragma once

#include <string>
#include <vector>

#include "core/planner/planner.hpp"

namespace sy {

struct FailedOp {
  const Phase& phase;
  const Node& node;
  const std::vector<CandidateReport>& all;         // every candidate, for the message
  const std::vector<CandidateReport>& considered;  // those the policy allowed: they pick the code
  std::string pinned;                              // the attention family pin, if it applied
  std::string missing_device;                      // a pinned device type no device has
  bool transfers = true;
};

// The Error (code, message with every candidate and reason, the catalog's fix) and the
// PlanFailure record of the op.
Error plan_error(const FailedOp& f, PlanFailure& failure);

}  // namespace sy
