// Every (plugin, kernel, device) that could serve one op, each asked through its plugin's
// `check` with the operands where this candidate would need them (plan_error.hpp turns the
// refusals into the documented error when none is legal).
#pragma once

#include <map>
#include <optional>
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
  int pref_rank = 0;                           // index of the device type in the policy's order
  double cost = 0;                             // cost hint × work + bytes copied
  std::vector<std::string> in_locs, out_locs;  // memory location of each operand
  std::vector<Adaptation> adaptations;         // what serving the op through it takes
  std::string rule_extra;                      // the adaptations, for a person
  int64_t workspace = 0;                       // bytes its check declared (ABI 1.4)
  std::optional<DeclaredNumerics> numerics;    // the kernel's, where not exact
  // Accepted without adaptations: what was checked, with which plugin, kernel and device
  // index (the weight layouts are asked of the chosen one with the same op).
  const Plugin* plugin = nullptr;
  size_t kernel = 0;
  uint32_t device_index = 0;
  OpDesc op;
};

class Candidates {
 public:
  Candidates(const Registry& reg, const Inventory& inv, const Policy& pol)
      : reg_(reg), inv_(inv), pol_(pol) {}
  // Every candidate for `n`, accepted or refused with all its reasons.
  std::vector<Candidate> evaluate(const Phase& phase, const Node& n, const Placement& where) const;
  // The layouts the chosen candidate's kernel wants for the op's weights (ABI 1.10): empty when
  // all stay as stored. Each is checked again with the layout set; a kernel that refuses its own
  // layout, or a plugin whose answer fails, keeps the stored one and says so in `note`.
  std::vector<WeightLayoutChoice> weight_layouts(const Phase& phase, const Node& n,
                                                 const Candidate& c, std::string& note) const;

 private:
  // One kernel on one device: which device it could use, where its operands would be, and its
  // plugin's answer.
  Candidate one(const Phase& phase, const Node& n, const Placement& where, const Plugin& p,
                size_t kernel, const InventoryDevice& dev) const;
  // Whether `p` may run on `dev` at all; the refusal when not.
  std::optional<Refusal> usable(const Plugin& p, const Envelope& env,
                                const InventoryDevice& dev) const;
  // The binding split's refusal when the op's unit was moved off `dev` for memory.
  std::optional<Refusal> kept_off(const Phase& phase, const Node& n,
                                  const InventoryDevice& dev) const;
  // Fills in_locs/out_locs and the operands' memory in `op`; the bytes that would be copied.
  double locate(const Phase& phase, const Node& n, const Placement& where, const Envelope& env,
                const InventoryDevice& dev, OpDesc& op, Candidate& c, bool& missing) const;
  // The plugin's check, believed only inside the envelope; an adaptation when the op's only
  // obstacle is one an adaptation removes.
  CheckResult judge(const Phase& phase, const Node& n, const Placement& where, const Plugin& p,
                    size_t kernel, const InventoryDevice& dev, const OpDesc& op,
                    Candidate& c) const;
  // sinks_via_lse: the sinks_from_lse kernel on `dev` that completes the op, if one accepts.
  std::optional<Adaptation> sinks_completion(const Phase& phase, const Node& n,
                                             const Placement& where, const InventoryDevice& dev,
                                             const OpDesc& op, const Candidate& c,
                                             std::string& why_not) const;

  const Registry& reg_;
  const Inventory& inv_;
  const Policy& pol_;
};

std::string plan_hash(const Plan& plan);

}  // namespace sy
