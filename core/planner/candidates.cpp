#include "core/planner/candidates.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/capability/vocabulary.hpp"
#include "core/planner/memory.hpp"
#include "switchyard/envelope_check.h"

namespace sy {
namespace {

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
  std::string natural = dev.info.memory_is_host ? kHostLocation : dev.id;
  if (r == SY_RESIDENCY_HOST) return kHostLocation;
  if (r == SY_RESIDENCY_ANY && placed) return home->second;
  return natural;
}

bool only_sinks_refused(const CheckResult& r) {
  if (r.refusals.empty()) return false;
  for (const auto& x : r.refusals)
    if (!(x.constraint == "feature" && x.required == "sinks")) return false;
  return true;
}

sy_memory_kind memory_of(const std::string& location) {
  return location == kHostLocation ? SY_MEMORY_HOST : SY_MEMORY_DEVICE;
}

std::string joined_texts(const std::vector<Refusal>& rs) {
  std::string out;
  for (const auto& r : rs) out += (out.empty() ? "" : "; ") + r.text;
  return out;
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
      if (p.kernels()[k].op != n.op) continue;
      for (const auto& dev : inv_.devices) out.push_back(one(phase, n, where, p, k, dev));
    }
  }
  return out;
}

std::vector<WeightLayoutChoice> Candidates::weight_layouts(const Phase& phase, const Node& n,
                                                           const Candidate& c,
                                                           std::string& note) const {
  std::vector<WeightLayoutChoice> out;
  if (!c.plugin) return out;
  const int first = sy_weight_input(n.op), count = sy_weight_input_count(n.op);
  for (int i = first; first >= 0 && i < first + count && i < int(n.inputs.size()); ++i) {
    const Value* v = phase.value(n.inputs[size_t(i)]);
    if (!v || v->kind != ValueKind::weight) continue;  // only what a model loads once
    Expected<Plugin::WeightLayout> l = c.plugin->weight_layout(c.kernel, c.device_index, c.op, i);
    if (!l) {
      note = "its plugin could not name a layout for " + v->name + " (" + l.error().message +
             "): as stored";
      continue;
    }
    if (l->id == 0) continue;
    OpDesc packed = c.op;
    packed.inputs[size_t(i)].layout = l->id;
    const InventoryDevice* dev = inv_.find(c.report.device);
    if (!dev || !c.plugin->check(c.kernel, dev->info, packed).accepted) {
      note = "its kernel refused its own layout '" + l->name + "' for " + v->name + ": as stored";
      continue;
    }
    out.resize(n.inputs.size());
    out[size_t(i)] = {l->id, l->name, l->bytes};
  }
  return out;
}

Candidate Candidates::one(const Phase& phase, const Node& n, const Placement& where,
                          const Plugin& p, size_t kernel, const InventoryDevice& dev) const {
  const Envelope& env = p.kernels()[kernel];
  Candidate c;
  c.report = {p.name(), env.kernel, env.family, dev.id, dev.info.type, false, {}};
  c.numerics = declared_numerics(env.features);
  auto rank = std::find(pol_.prefer.begin(), pol_.prefer.end(), dev.info.type);
  c.pref_rank = int(rank - pol_.prefer.begin());
  if (auto refusal = usable(p, env, dev)) {
    c.report.reasons.push_back(*refusal);
    return c;
  }
  if (auto refusal = kept_off(phase, n, dev)) {
    c.report.reasons.push_back(*refusal);
    return c;
  }
  OpDesc op = op_desc(phase, n);
  bool missing_device = false;
  double copy_bytes = locate(phase, n, where, env, dev, op, c, missing_device);
  if (missing_device) {
    c.report.reasons.push_back(
        {"device_available", "a " + device_type_name(*pol_.kv_cache_device) + " device",
         "none in the inventory", "--kv-cache-device names a device type this inventory lacks"});
    return c;
  }
  CheckResult r = judge(phase, n, where, p, kernel, dev, op, c);
  // After the plugin's own answer, so the reasons show whether numerics alone stood in the way.
  if (c.numerics && !numerics_allowed(pol_.numerics, *c.numerics)) {
    r.accepted = false;
    const std::string policy = numerics_name(pol_.numerics);
    r.refusals.push_back(
        {"numerics", policy + " (--numerics " + policy + ")", c.numerics->feature,
         std::string("kernel computes with its ") + c.numerics->what + " (" + c.numerics->feature +
             "); " +
             (pol_.numerics == Numerics::exact
                  ? "--numerics exact keeps products on the weights as stored"
                  : "--numerics auto takes 16-bit activation blocks only; fast allows these")});
  }
  c.report.accepted = r.accepted;
  c.report.reasons = r.refusals;
  c.workspace = int64_t(r.workspace_bytes);
  // Kept only where weight_layouts may ask: an op with weights, a plugin with the extension.
  if (r.accepted && c.adaptations.empty() && p.weight_layouts() && sy_weight_input(n.op) >= 0)
    if (auto index = p.device_index(dev.info)) {
      c.plugin = &p;
      c.kernel = kernel;
      c.device_index = *index;
      c.op = op;
    }
  c.cost = env.cost_hint * work(op) + kCostPerByte * copy_bytes;
  return c;
}

std::optional<Refusal> Candidates::usable(const Plugin& p, const Envelope& env,
                                          const InventoryDevice& dev) const {
  if (env.device_type != dev.info.type)
    return Refusal{"device_type", device_type_name(dev.info.type),
                   device_type_name(env.device_type),
                   "kernel runs on " + device_type_name(env.device_type) + " devices only, not " +
                       device_type_name(dev.info.type)};
  const KernelVerification v = p.verification().of(env.kernel);
  if (v.state == Verification::failed)
    return Refusal{"conformance", "a kernel that passed conformance", "failed",
                   "kernel failed conformance: " + v.why};
  if (pol_.require_verified && v.state != Verification::verified)
    return Refusal{"verified", "verified (--require-verified)", verification_name(v.state),
                   "kernel is unverified: " + v.why};
  if (inv_.described || owns(dev, p.name())) return std::nullopt;
  std::string why = p.devices().empty() ? p.no_devices_reason() : "not one of its devices";
  return Refusal{"device", dev.id, "plugin devices: " + std::to_string(p.devices().size()),
                 "plugin '" + p.name() + "' cannot use " + dev.id + ": " + why};
}

std::optional<Refusal> Candidates::kept_off(const Phase& phase, const Node& n,
                                            const InventoryDevice& dev) const {
  auto it = pol_.memory_excluded.find(dev.id);
  if (it == pol_.memory_excluded.end()) return std::nullopt;
  const std::string unit = memory_unit(phase, n);
  if (!it->second.count(unit) && !it->second.count(enclosing_unit(unit))) return std::nullopt;
  return Refusal{"memory", unit + " on " + dev.id, "no room",
                 unit + " does not fit in the memory of " + dev.id +
                     " (binding split: experts, then whole layers, go to the next device in "
                     "--prefer order)"};
}

double Candidates::locate(const Phase& phase, const Node& n, const Placement& where,
                          const Envelope& env, const InventoryDevice& dev, OpDesc& op, Candidate& c,
                          bool& missing) const {
  double copy_bytes = 0;
  auto place = [&](const std::string& name, TensorDesc& t, size_t operand, bool input) {
    const Value& v = *phase.value(name);
    std::string loc = operand_location(v, env.residency_of(operand), dev, where);
    if (loc.rfind("missing:", 0) == 0) missing = true;
    t.memory = memory_of(loc);
    auto have = where.available.find(name);
    if (input && have != where.available.end() && !have->second.empty() && !have->second.count(loc))
      copy_bytes += double(v.bytes());
    return loc;
  };
  for (size_t i = 0; i < n.inputs.size(); ++i)
    c.in_locs.push_back(place(n.inputs[i], op.inputs[i], i, true));
  for (size_t i = 0; i < n.outputs.size(); ++i)
    c.out_locs.push_back(place(n.outputs[i], op.outputs[i], n.inputs.size() + i, false));
  return copy_bytes;
}

CheckResult Candidates::judge(const Phase& phase, const Node& n, const Placement& where,
                              const Plugin& p, size_t kernel, const InventoryDevice& dev,
                              const OpDesc& op, Candidate& c) const {
  const Envelope& env = p.kernels()[kernel];
  CheckResult r = p.check(kernel, dev.info, op);
  if (r.error) r.refusals.push_back({"check", "", "", "check failed: " + r.error->message});
  if (r.accepted && !envelope_refusals(env, op, dev.info).empty()) {
    r.accepted = false;  // a check that accepts outside its own envelope is not believed
    r.refusals.push_back({"capability_lie", "", "", "check accepted outside the envelope"});
  }
  const bool sinks = n.op == SY_OP_ATTENTION &&
                     (op.required_features() & SY_FEATURE_BIT(SY_FEATURE_SINKS)) &&
                     (env.features & SY_FEATURE_BIT(SY_FEATURE_LSE));
  if (r.accepted || !sinks || !only_sinks_refused(r)) return r;
  const OpDesc adapted = adapted_op(AdaptationKind::sinks_via_lse, op);
  CheckResult via = p.check(kernel, dev.info, adapted);
  if (!via.accepted || !envelope_refusals(env, adapted, dev.info).empty()) return r;
  std::string why_not;
  auto done = sinks_completion(phase, n, where, dev, op, c, why_not);
  if (!done) {
    r.refusals.push_back({"sinks_via_lse", "a sinks_from_lse kernel on " + dev.id, "none accepts",
                          "the kernel returns LSE, but no sinks_from_lse kernel on " + dev.id +
                              " can apply the sinks: " + why_not});
    return r;
  }
  c.in_locs[3] = done->input_locations[1];  // the sinks weight, where the completion reads it
  c.adaptations.push_back(*done);
  c.rule_extra = "sinks applied from the kernel's LSE by " + done->plugin + "/" + done->kernel +
                 ": o·exp(lse − logaddexp(lse, s))";
  return via;
}

std::optional<Adaptation> Candidates::sinks_completion(const Phase& phase, const Node& n,
                                                       const Placement& where,
                                                       const InventoryDevice& dev, const OpDesc& op,
                                                       const Candidate& c,
                                                       std::string& why_not) const {
  Adaptation a;
  a.kind = AdaptationKind::sinks_via_lse;
  a.lse_added = n.outputs.size() < 2;
  a.lse = a.lse_added ? added_lse_name(n) : n.outputs[1];
  const std::string& o_loc = c.out_locs[0];
  const std::string& lse_loc = a.lse_added ? o_loc : c.out_locs[1];
  const Value& sinks = *phase.value(n.inputs[3]);
  std::optional<Adaptation> best;
  double best_cost = 0;
  for (const auto& rec : reg_.records()) {
    if (!rec.loaded()) continue;
    const Plugin& p = *rec.plugin;
    for (size_t k = 0; k < p.kernels().size(); ++k) {
      const Envelope& env = p.kernels()[k];
      if (env.op != SY_OP_SINKS_FROM_LSE) continue;
      std::string label = p.name() + "/" + env.kernel;
      if (auto refusal = usable(p, env, dev)) {
        why_not += (why_not.empty() ? "" : " | ") + label + ": " + refusal->text;
        continue;
      }
      std::string sinks_loc = operand_location(sinks, env.residency_of(1), dev, where);
      OpDesc done = completing_op(AdaptationKind::sinks_via_lse, op);
      done.inputs[0].memory = memory_of(lse_loc);
      done.inputs[1].memory = memory_of(sinks_loc);
      done.outputs[0].memory = memory_of(o_loc);
      CheckResult r = p.check(k, dev.info, done);
      if (!r.accepted || !envelope_refusals(env, done, dev.info).empty()) {
        why_not += (why_not.empty() ? "" : " | ") + label + ": " + joined_texts(r.refusals);
        continue;
      }
      if (best && env.cost_hint >= best_cost) continue;
      best = a;
      best->plugin = p.name();
      best->kernel = env.kernel;
      best->device = dev.id;
      best->input_locations = {lse_loc, sinks_loc};
      best->output_locations = {o_loc};
      best->workspace_bytes = int64_t(r.workspace_bytes);
      best_cost = env.cost_hint;
    }
  }
  if (!best && why_not.empty()) why_not = "no loaded plugin declares one";
  return best;
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
    for (const auto& o : p.ops) {
      mix(o.id + "|" + o.plugin + "|" + o.kernel + "|" + o.device);
      for (size_t i = 0; i < o.input_layouts.size(); ++i)
        if (o.input_layouts[i].id) mix("layout|" + std::to_string(i) + "|" + layout_tag(o, i));
      for (const auto& a : o.adaptations)
        mix(std::string(adaptation_kind_name(a.kind)) + "|" + a.plugin + "|" + a.kernel + "|" +
            a.device);
    }
    for (const auto& c : p.copies) mix(c.value + "|" + c.from + "|" + c.to + "|" + c.before_op);
    for (const auto& [v, d] : p.kv_caches) mix(v + "|" + d);
  }
  if (plan.error) mix(code_text(plan.error->code) + "|" + plan.failure.op);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace sy
