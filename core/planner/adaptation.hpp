// What the planner may change about an op so that a kernel can serve it, as data the executor
// performs — never as prose. One list of kinds, shared by both: the planner emits only these,
// the executor performs every one (a test runs a plan with each).
//
//   sinks_via_lse  An attention with sinks, served by a kernel that has LSE but no native
//                  sinks: the kernel runs without the sinks input and writes the LSE (into the
//                  op's own lse output, or a value the plan adds), then a sinks_from_lse kernel
//                  rescales the output in place, once: o' = o · exp(lse − logaddexp(lse, s)).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/capability/op.hpp"
#include "core/graph/graph.hpp"

namespace sy {

enum class AdaptationKind { sinks_via_lse };

// Every kind, for tests that prove each one runs.
std::span<const AdaptationKind> all_adaptation_kinds();
const char* adaptation_kind_name(AdaptationKind kind);  // "sinks_via_lse"

struct Adaptation {
  AdaptationKind kind = AdaptationKind::sinks_via_lse;
  // The kernel that completes the op after the adapted kernel ran (sinks_via_lse: a
  // sinks_from_lse kernel), its device and where it reads and writes each operand.
  std::string plugin, kernel, device;
  std::vector<std::string> input_locations, output_locations;
  // sinks_via_lse: the value that carries the LSE, and whether the plan adds it (the op had no
  // lse output of its own).
  std::string lse;
  bool lse_added = false;
  // Memory the completing kernel holds from prepare to release (its check's workspace_bytes).
  int64_t workspace_bytes = 0;
};

// The operator the adapted kernel is prepared with (sinks_via_lse: the attention without its
// sinks input, with an lse output).
OpDesc adapted_op(AdaptationKind kind, const OpDesc& op);
// The operator of the completing kernel (sinks_via_lse: sinks_from_lse over lse, sinks and o).
OpDesc completing_op(AdaptationKind kind, const OpDesc& op);

// The values an adaptation adds to the phase (sinks_via_lse without an lse output: `lse`).
std::vector<Value> adaptation_values(const Adaptation& a, const Phase& phase, const Node& node);

// Operand names and memory locations of the adapted kernel and of the completing one, in ABI
// order. `in_locs` and `out_locs` are where the plan put the node's own operands.
struct AdaptedOperands {
  std::vector<std::string> inputs, outputs;
  std::vector<std::string> input_locations, output_locations;
  // Index-aligned with inputs: "" for a tensor as stored, else the packed layout it is read in
  // as "plugin:id" (layout_tag, planner.hpp), which names a buffer of its own.
  std::vector<std::string> input_layouts;
};
AdaptedOperands adapted_operands(const Adaptation& a, const Node& node,
                                 const std::vector<std::string>& in_locs,
                                 const std::vector<std::string>& out_locs);
AdaptedOperands completing_operands(const Adaptation& a, const Node& node);

// The operands of every kernel call that serves `node`, in order: its own kernel's (as the
// adaptations change them), then each adaptation's completing kernel's. The executor prepares
// exactly these calls and the memory plan counts their operands: one list for both.
// `in_layouts`: the own kernel's input layouts (empty: all as stored).
std::vector<AdaptedOperands> call_operands(const std::vector<Adaptation>& adaptations,
                                           const Node& node,
                                           const std::vector<std::string>& in_locs,
                                           const std::vector<std::string>& out_locs,
                                           const std::vector<std::string>& in_layouts = {});

// The name the plan gives an LSE it adds for `node`.
std::string added_lse_name(const Node& node);

}  // namespace sy
