// Every (plugin, kernel, device) that could serve one op, each asked through its plugin's
// `check` with the operands where this candidate would need them; and the documented error
// that fits when none is legal.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/planner/planner.hpp"

namespace sy {

// Where values are now (`available`, `home`) and where some must be (`fixed`: KV caches, and
// the operands of a fused kernel); `transfers` false forbids copies.
struct Placement {
  const std::map<std::string, std::set<std::string>>& available;
  const std::map<std::string, std::string>& home;
  const std::map<std::string, std::string>& fixed;
  bool transfers = true;
  const std::map<std::string, std::string>* pinned = nullptr;  // consulted before `fixed`

  const std::string* fixed_location(const std::string& value) const;
};

struct Candidate {
  CandidateReport report;
  DLDeviceType device_type = kDLCPU;
  int pref_rank = 0;                           // index of the device type in the policy's order
  double cost = 0;                             // cost hint × work + bytes copied
  std::vector<std::string> in_locs, out_locs;  // memory location of each operand
  std::string rule_extra;                      // e.g. sinks served through LSE
};

class Candidates {
 public:
  Candidates(const Registry& reg, const Inventory& inv, const Policy& pol)
      : reg_(reg), inv_(inv), pol_(pol) {}
  std::vector<Candidate> evaluate(const Phase& phase, const Node& n, const Placement& where) const;

 private:
  const Registry& reg_;
  const Inventory& inv_;
  const Policy& pol_;
};

PlanError select_error(const Phase& phase, const Node& n,
                       const std::vector<CandidateReport>& candidates, const std::string& pinned,
                       const std::string& missing_device, bool transfers);

std::string plan_hash(const Plan& plan);

}  // namespace sy
