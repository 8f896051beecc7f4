#include "core/planner/adaptation.hpp"

#include <array>

namespace sy {
namespace {

constexpr std::array kKinds = {AdaptationKind::sinks_via_lse};
constexpr size_t kSinksInput = 3;  // attention: q, k, v, sinks[, kv_len | paged metadata]

// The LSE [B, Hq, Sq] of an attention whose q is `q` [B, Sq, Hq, D]: it varies with q's tokens
// (axis 1 of q, axis 2 of the LSE) when q does.
TensorDesc lse_of(const TensorDesc& q, sy_memory_kind memory) {
  const uint32_t dynamic = (q.dynamic_dims & 2u) ? 4u : 0u;
  return TensorDesc{SY_DTYPE_F32, {q.shape[0], q.shape[2], q.shape[1]}, memory, dynamic};
}

}  // namespace

std::span<const AdaptationKind> all_adaptation_kinds() {
  return kKinds;
}

const char* adaptation_kind_name(AdaptationKind kind) {
  switch (kind) {
    case AdaptationKind::sinks_via_lse: return "sinks_via_lse";
  }
  return "?";
}

std::string added_lse_name(const Node& node) {
  return node.id + ".lse";
}

OpDesc adapted_op(AdaptationKind kind, const OpDesc& op) {
  switch (kind) {
    case AdaptationKind::sinks_via_lse: {
      OpDesc v = op;
      v.inputs.erase(v.inputs.begin() + kSinksInput);
      if (v.outputs.size() < 2) v.outputs.push_back(lse_of(op.inputs[0], op.outputs[0].memory));
      return v;
    }
  }
  return op;
}

OpDesc completing_op(AdaptationKind kind, const OpDesc& op) {
  switch (kind) {
    case AdaptationKind::sinks_via_lse: {
      OpDesc c;
      c.op = SY_OP_SINKS_FROM_LSE;
      TensorDesc lse =
          op.outputs.size() > 1 ? op.outputs[1] : lse_of(op.inputs[0], op.outputs[0].memory);
      c.inputs = {lse, op.inputs[kSinksInput]};
      c.outputs = {op.outputs[0]};
      return c;
    }
  }
  return op;
}

std::vector<Value> adaptation_values(const Adaptation& a, const Phase& phase, const Node& node) {
  switch (a.kind) {
    case AdaptationKind::sinks_via_lse: {
      if (!a.lse_added) return {};
      const Value& q = *phase.value(node.inputs[0]);
      Value lse;
      lse.name = a.lse;
      lse.shape = {q.shape[0], q.shape[2], q.shape[1]};
      if (q.dynamic.axis == 1) lse.dynamic = {2, q.dynamic.extent};
      return {lse};
    }
  }
  return {};
}

AdaptedOperands adapted_operands(const Adaptation& a, const Node& node,
                                 const std::vector<std::string>& in_locs,
                                 const std::vector<std::string>& out_locs) {
  AdaptedOperands out{node.inputs, node.outputs, in_locs, out_locs,
                      std::vector<std::string>(node.inputs.size())};
  switch (a.kind) {
    case AdaptationKind::sinks_via_lse:
      out.inputs.erase(out.inputs.begin() + kSinksInput);
      out.input_locations.erase(out.input_locations.begin() + kSinksInput);
      out.input_layouts.erase(out.input_layouts.begin() + kSinksInput);
      if (a.lse_added) {
        out.outputs.push_back(a.lse);
        out.output_locations.push_back(out_locs.at(0));
      }
      break;
  }
  return out;
}

AdaptedOperands completing_operands(const Adaptation& a, const Node& node) {
  switch (a.kind) {
    case AdaptationKind::sinks_via_lse:
      return {{a.lse, node.inputs[kSinksInput]},
              {node.outputs[0]},
              a.input_locations,
              a.output_locations,
              {"", ""}};
  }
  return {};
}

std::vector<AdaptedOperands> call_operands(const std::vector<Adaptation>& adaptations,
                                           const Node& node,
                                           const std::vector<std::string>& in_locs,
                                           const std::vector<std::string>& out_locs,
                                           const std::vector<std::string>& in_layouts) {
  // A kernel that takes a packed weight is never adapted (Candidates keeps layouts for
  // candidates without adaptations), so the layouts belong to the own kernel's operands as is.
  std::vector<AdaptedOperands> calls{
      {node.inputs, node.outputs, in_locs, out_locs,
       in_layouts.empty() ? std::vector<std::string>(node.inputs.size()) : in_layouts}};
  for (const auto& a : adaptations) {
    calls.front() = adapted_operands(a, node, in_locs, out_locs);
    calls.push_back(completing_operands(a, node));
  }
  return calls;
}

}  // namespace sy
