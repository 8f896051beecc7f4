#include "core/planner/candidates.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/capability/vocabulary.hpp"
#include "core/errors/errors.hpp"

namespace sy {
namespace {

constexpr const char* kHost = "host";
constexpr double kCostPerByte = 4.0;  // a copied byte weighs like a few flops of work

double elements(const std::vector<int64_t>& s) {
  double n = 1;
  for (int64_t d : s) n *= double(d);
  return n;
}

// Work of an op, in flops, for comparing candidates of one op (never across ops).
double work(const OpDesc& op) {
  switch (op.op) {
    case SY_OP_MATMUL: {
      const auto& b = op.inputs.at(1).shape;
      double k = op.int_attr(SY_ATTR_TRANSPOSE_B).value_or(0) ? double(b[1]) : double(b[0]);
      return 2.0 * elements(op.inputs[0].shape) * elements(b) / k;
    }
    case SY_OP_ATTENTION:
    case SY_OP_FUSED_DECODE_ATTENTION:
      return 4.0 * elements(op.inputs[0].shape) *
             (op.inputs.size() > 1 ? double(op.inputs[1].shape.at(1)) : 1.0);
    default: {
      double n = 0;
      for (const auto& t : op.inputs) n = std::max(n, elements(t.shape));
      return n;
    }
  }
}

bool owns(const InventoryDevice& d, const std::string& plugin) {
  return std::find(d.plugins.begin(), d.plugins.end(), plugin) != d.plugins.end();
}

// The memory location an operand takes for this candidate.
std::string operand_location(const Value& v, sy_residency r, const InventoryDevice& dev,
                             const Placement& where) {
  if (const std::string* loc = where.fixed_location(v.name)) return *loc;
  auto home = where.home.find(v.name);
  bool placed = home != where.home.end();
  bool movable = v.kind == ValueKind::activation || v.kind == ValueKind::input;
  if (placed && movable && !where.transfers) return home->second;
  std::string natural = dev.info.memory_is_host ? kHost : dev.id;
  if (r == SY_RESIDENCY_HOST) return kHost;
  if (r == SY_RESIDENCY_ANY && placed) return home->second;
  return natural;
}

bool has_refusal(const CandidateReport& c, const std::string& constraint,
                 const std::string& required = "") {
  for (const auto& r : c.reasons)
    if (r.constraint == constraint && (required.empty() || r.required == required)) return true;
  return false;
}

bool only_sinks_refused(const CheckResult& r) {
  if (r.refusals.empty()) return false;
  for (const auto& x : r.refusals)
    if (!(x.constraint == "feature" && x.required == "sinks")) return false;
  return true;
}

// The same attention without the sinks operand and with an LSE output, from which the
// sinks are applied: o' = o · exp(lse − logaddexp(lse, s)).
OpDesc without_sinks_with_lse(const OpDesc& op) {
  OpDesc v = op;
  v.inputs.erase(v.inputs.begin() + 3);
  if (v.outputs.size() < 2) {
    const auto& q = op.inputs[0].shape;
    v.outputs.push_back({SY_DTYPE_F32, {q[0], q[2], q[1]}, op.outputs[0].memory});
  }
  return v;
}

}  // namespace

const std::string* Placement::fixed_location(const std::string& value) const {
  if (pinned)
    if (auto it = pinned->find(value); it != pinned->end()) return &it->second;
  auto it = fixed.find(value);
  return it == fixed.end() ? nullptr : &it->second;
}

std::vector<Candidate> Candidates::evaluate(const Phase& phase, const Node& n,
                                            const Placement& where) const {
  std::vector<Candidate> out;
  for (const auto& rec : reg_.records()) {
    if (!rec.loaded()) continue;
    const Plugin& p = *rec.plugin;
    for (size_t k = 0; k < p.kernels().size(); ++k) {
      const Envelope& env = p.kernels()[k];
      if (env.op != n.op) continue;
      for (const auto& dev : inv_.devices) {
        Candidate c;
        c.report = {p.name(), env.kernel, env.family, dev.id, false, {}};
        c.device_type = dev.info.type;
        auto rank = std::find(pol_.prefer.begin(), pol_.prefer.end(), dev.info.type);
        c.pref_rank = int(rank - pol_.prefer.begin());
        if (env.device_type != dev.info.type) {
          c.report.reasons.push_back({"device_type", device_type_name(dev.info.type),
                                      device_type_name(env.device_type),
                                      "kernel runs on " + device_type_name(env.device_type) +
                                          " devices only, not " + device_type_name(dev.info.type)});
          out.push_back(std::move(c));
          continue;
        }
        if (!inv_.described && !owns(dev, p.name())) {
          std::string why = p.devices().empty() ? p.no_devices_reason() : "not one of its devices";
          c.report.reasons.push_back(
              {"device", dev.id, "plugin devices: " + std::to_string(p.devices().size()),
               "plugin '" + p.name() + "' cannot use " + dev.id + ": " + why});
          out.push_back(std::move(c));
          continue;
        }
        OpDesc op = op_desc(phase, n);
        double copy_bytes = 0;
        bool missing_device = false;
        auto locate = [&](const std::string& name, TensorDesc& t, size_t operand, bool input) {
          const Value& v = *phase.value(name);
          std::string loc = operand_location(v, env.residency_of(operand), dev, where);
          if (loc.rfind("missing:", 0) == 0) missing_device = true;
          t.memory = loc == kHost ? SY_MEMORY_HOST : SY_MEMORY_DEVICE;
          if (input && where.available.count(name) && !where.available.at(name).empty() &&
              !where.available.at(name).count(loc))
            copy_bytes += double(v.bytes());
          return loc;
        };
        for (size_t i = 0; i < n.inputs.size(); ++i)
          c.in_locs.push_back(locate(n.inputs[i], op.inputs[i], i, true));
        for (size_t i = 0; i < n.outputs.size(); ++i)
          c.out_locs.push_back(locate(n.outputs[i], op.outputs[i], n.inputs.size() + i, false));
        if (missing_device) {
          c.report.reasons.push_back(
              {"device_available", "a " + device_type_name(*pol_.kv_cache_device) + " device",
               "none in the inventory",
               "--kv-cache-device names a device type this inventory lacks"});
          out.push_back(std::move(c));
          continue;
        }
        CheckResult r = p.check(k, dev.info, op);
        if (!r.error.empty()) r.refusals.push_back({"check", "", "", "check failed: " + r.error});
        if (r.accepted && !envelope_refusals(env, op, dev.info).empty()) {
          r.accepted = false;  // a check that accepts outside its own envelope is not believed
          r.refusals.push_back({"capability_lie", "", "", "check accepted outside the envelope"});
        }
        if (!r.accepted && n.op == SY_OP_ATTENTION &&
            (op.required_features() & SY_FEATURE_BIT(SY_FEATURE_SINKS)) &&
            (env.features & SY_FEATURE_BIT(SY_FEATURE_LSE)) && only_sinks_refused(r)) {
          CheckResult via = p.check(k, dev.info, without_sinks_with_lse(op));
          if (via.accepted) {
            r = via;
            c.rule_extra = "sinks applied from the kernel's LSE: o·exp(lse − logaddexp(lse, s))";
          }
        }
        c.report.accepted = r.accepted;
        c.report.reasons = r.refusals;
        c.cost = env.cost_hint * work(op) + kCostPerByte * copy_bytes;
        out.push_back(std::move(c));
      }
    }
  }
  return out;
}

namespace {

bool on_cpu(const CandidateReport& c) {
  return c.device.rfind("cpu", 0) == 0;
}

std::string upper(std::string s) {
  for (auto& ch : s) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

std::string pick_code(const Phase& phase, const Node& n, const std::vector<CandidateReport>& cands,
                      const std::string& pinned, bool transfers, std::string& dtype_seen) {
  OpDesc op = op_desc(phase, n);
  bool sinks = op.required_features() & SY_FEATURE_BIT(SY_FEATURE_SINKS);
  bool flash_only = !cands.empty() && std::all_of(cands.begin(), cands.end(), [](const auto& c) {
    return c.family == "flash";
  });
  if (n.op == SY_OP_ATTENTION && (pinned == "flash" || flash_only)) {
    for (const auto& c : cands)
      if (c.family == "flash" && !on_cpu(c) && has_refusal(c, "dtype")) {
        for (const auto& r : c.reasons)
          if (r.constraint == "dtype") dtype_seen = upper(r.required);
        return "SY003";
      }
    for (const auto& c : cands)
      if (c.family == "flash" && has_refusal(c, "device_type", "cpu")) return "SY002";
  }
  if (n.op == SY_OP_ATTENTION && sinks)
    for (const auto& c : cands)
      if (c.family == "flex" && on_cpu(c) && has_refusal(c, "feature", "sinks")) return "SY004";
  for (const auto& c : cands)
    if (c.family == "fused_decode" && has_refusal(c, "residency")) return "SY005";
  if (n.op == SY_OP_KV_CACHE_APPEND)
    for (const auto& c : cands)
      if (has_refusal(c, "residency")) return "SY006";
  for (const auto& c : cands) {
    bool gqa_only =
        !c.reasons.empty() && std::all_of(c.reasons.begin(), c.reasons.end(), [](const Refusal& r) {
          return (r.constraint == "feature" && r.required == "gqa") || r.constraint == "gqa_ratio";
        });
    if (gqa_only) return "SY007";
  }
  for (const auto& c : cands)
    if (has_refusal(c, "device_available")) return "SY008";
  // Without transfers, a candidate that only failed on where its operands are would have
  // been legal with a copy.
  if (!transfers)
    for (const auto& c : cands)
      if (!c.reasons.empty() &&
          std::all_of(c.reasons.begin(), c.reasons.end(),
                      [](const Refusal& r) { return r.constraint == "residency"; }))
        return "SY009";
  return "SY001";
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

}  // namespace

PlanError select_error(const Phase& phase, const Node& n,
                       const std::vector<CandidateReport>& candidates, const std::string& pinned,
                       const std::string& missing_device, bool transfers) {
  std::string dtype_seen = "F32";
  std::string code = missing_device.empty()
                         ? pick_code(phase, n, candidates, pinned, transfers, dtype_seen)
                         : "SY008";
  const ErrorInfo* e = find_error(code);
  PlanError err;
  err.code = code;
  err.name = e ? e->name : "";
  std::string message = e ? e->message : code;
  replace_all(message, "{op}", n.id + " (" + sy_op_kind_name(n.op) + ")");
  replace_all(message, "{device}", missing_device);
  if (code == "SY009")
    for (const auto& c : candidates)
      for (const auto& r : c.reasons)
        if (r.constraint == "residency") {
          replace_all(message, "{value}", "an operand of " + n.id);
          replace_all(message, "{from}", r.required);
          replace_all(message, "{to}", r.offered);
        }
  if (code == "SY003") replace_all(message, "(F32)", "(" + dtype_seen + ")");
  std::string detail =
      "\n  while planning op '" + n.id + "' (" + sy_op_kind_name(n.op) + ") of phase " +
      phase.name + (pinned.empty() ? "" : ", attention pinned to " + pinned) + "\n  candidates:";
  if (candidates.empty()) detail += "\n    none: no loaded plugin declares a kernel for this op";
  for (const auto& c : candidates) {
    detail += "\n    " + c.plugin + "/" + c.kernel + " [" + c.family + "] on " + c.device + ": ";
    std::string reasons;
    for (const auto& r : c.reasons) reasons += (reasons.empty() ? "" : "; ") + r.text;
    detail += c.accepted ? "accepted (not allowed by the policy)" : reasons;
  }
  if (e) detail += "\n  fix: " + std::string(e->fix);
  err.message = message + detail;
  err.phase = phase.name;
  err.op = n.id;
  err.candidates = candidates;
  return err;
}

std::string plan_hash(const Plan& plan) {
  // FNV-1a over the decisions only (not the rejected lists or texts): stable across runs.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const std::string& s) {
    for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  };
  mix(plan.model);
  mix(plan.target);
  for (const auto& p : plan.phases) {
    mix(p.name);
    for (const auto& o : p.ops) mix(o.id + "|" + o.plugin + "|" + o.kernel + "|" + o.device);
    for (const auto& c : p.copies) mix(c.value + "|" + c.from + "|" + c.to + "|" + c.before_op);
    for (const auto& [v, d] : p.kv_caches) mix(v + "|" + d);
  }
  if (plan.error) mix(plan.error->code + "|" + plan.error->op);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace sy
