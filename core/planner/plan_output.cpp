// The plan as JSON (schema switchyard.plan/1) and as text a person reads.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/capability/envelope.hpp"
#include "core/capability/vocabulary.hpp"
#include "core/errors/errors.hpp"
#include "core/planner/planner.hpp"

namespace sy {
namespace {

using nlohmann::json;

json reasons_json(const std::vector<Refusal>& rs) {
  json out = json::array();
  for (const auto& r : rs) out.push_back(to_json(r));
  return out;
}

json candidate_json(const CandidateReport& c) {
  return {{"plugin", c.plugin}, {"kernel", c.kernel},     {"family", c.family},
          {"device", c.device}, {"accepted", c.accepted}, {"reasons", reasons_json(c.reasons)}};
}

json adaptation_json(const Adaptation& a) {
  json j{{"kind", adaptation_kind_name(a.kind)},
         {"apply", {{"plugin", a.plugin}, {"kernel", a.kernel}, {"device", a.device}}},
         {"input_locations", a.input_locations},
         {"output_locations", a.output_locations}};
  if (a.kind == AdaptationKind::sinks_via_lse) {
    j["lse"] = a.lse;
    j["lse_added"] = a.lse_added;
  }
  return j;
}

json policy_json(const Policy& p) {
  json prefer = json::array();
  for (auto t : p.prefer) prefer.push_back(device_type_name(t));
  return {{"prefer", prefer},
          {"attention", p.attention},
          {"fallback", p.strict ? "strict" : "auto"},
          {"kv_cache_device", p.kv_cache_device ? device_type_name(*p.kv_cache_device) : "auto"},
          {"transfers", p.transfers},
          {"numerics", numerics_name(p.numerics)}};
}

// "l12.q_proj" -> "l*.q_proj": ops of every layer fold into one row per pattern.
std::string pattern_of(const PlannedOp& op) {
  if (op.layer < 0) return op.id;
  std::string prefix = "l" + std::to_string(op.layer) + ".";
  return op.id.rfind(prefix, 0) == 0 ? "l*." + op.id.substr(prefix.size()) : op.id;
}

std::string pad(const std::string& s, size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

std::string bytes_text(int64_t b) {
  return format_bytes(b);
}

json memory_json(const MemoryPlan& m) {
  json locations = json::array();
  for (const auto& l : m.locations) {
    json j{{"location", l.location},
           {"weights_bytes", l.weights},
           {"weights_mapped_bytes", l.weights_mapped},
           {"weights_packed_bytes", l.weights_packed},
           {"kv_bytes_per_block", l.kv_bytes_per_block},
           {"kv_cache_bytes", l.kv_cache},
           {"activations_bytes", l.activations},
           {"copies_bytes", l.copies},
           {"workspace_bytes", l.workspace},
           {"total_bytes", l.total()},
           {"kv_bytes_per_position", l.kv_bytes_per_position},
           {"capacity_rule", l.capacity_rule},
           {"fits", l.fits()}};
    j["capacity_bytes"] = l.capacity ? json(*l.capacity) : json(nullptr);
    locations.push_back(j);
  }
  json j{{"locations", locations},
         {"copies_per_token", m.copies_per_token},
         {"copy_bytes_per_token", m.copy_bytes_per_token},
         {"split", m.split}};
  if (m.max_context) j["max_context"] = *m.max_context;
  if (m.kv_blocks > 0)
    j["kv_pool"] = {{"blocks", m.kv_blocks},
                    {"block_tokens", m.kv_block_tokens},
                    {"tokens", m.kv_blocks * m.kv_block_tokens},
                    {"rule", m.kv_blocks_rule}};
  return j;
}

void render_memory(std::ostream& out, const MemoryPlan& m) {
  if (m.locations.empty()) return;
  out << "\nmemory (predicted; capacity = free memory - reserve, or --max-device-memory)\n  "
      << pad("LOCATION", 10) << pad("WEIGHTS", 12) << pad("KV CACHE", 12) << pad("ACTIVATIONS", 13)
      << pad("COPIES", 11) << pad("WORKSPACE", 11) << pad("TOTAL", 12) << pad("CAPACITY", 12)
      << "\n";
  for (const auto& l : m.locations) {
    out << "  " << pad(l.location, 10) << pad(bytes_text(l.weights), 12)
        << pad(bytes_text(l.kv_cache), 12) << pad(bytes_text(l.activations), 13)
        << pad(bytes_text(l.copies), 11) << pad(bytes_text(l.workspace), 11)
        << pad(bytes_text(l.total()), 12) << pad(l.capacity ? bytes_text(*l.capacity) : "?", 12)
        << (l.fits() ? "" : "DOES NOT FIT ") << "(" << l.capacity_rule << ")\n";
  }
  for (const auto& l : m.locations)
    if (l.weights_mapped > 0)
      out << "  " << l.location << ": " << bytes_text(l.weights_mapped) << " of the weights mapped "
          << "from the model's file, "
          << (l.weights_packed > 0 ? bytes_text(l.weights_packed) + " packed for kernels, " : "")
          << bytes_text(l.weights - l.weights_mapped - l.weights_packed) << " copied\n";
  if (m.kv_blocks > 0)
    out << "  KV pool: " << m.kv_blocks << " blocks of " << m.kv_block_tokens << " tokens ("
        << m.kv_blocks * m.kv_block_tokens << " tokens) per layer: " << m.kv_blocks_rule << "\n";
  out << "  decode: " << m.copies_per_token << " copies per token ("
      << bytes_text(m.copy_bytes_per_token) << ")\n";
  if (!m.split.empty()) out << "  binding split: " << m.split << "\n";
}

// Which arithmetic the phase's ops got: how many quantize their activations (per numerics
// feature), and how many exact ops could have under a looser policy (a kernel refused for
// numerics alone; the policy named is the one its feature needs).
std::string numerics_line(const Policy& policy, const PhasePlan& p) {
  std::map<std::string, size_t> quantized;  // feature -> ops
  std::map<Numerics, size_t> could;         // the least policy that would allow it -> ops
  for (const auto& o : p.ops) {
    if (o.numerics != "exact") {
      ++quantized[o.numerics];
      continue;
    }
    std::optional<Numerics> least;  // over the op's kernels refused for numerics alone
    for (const auto& r : o.rejected)
      if (r.reasons.size() == 1 && r.reasons[0].constraint == "numerics")
        for (const DeclaredNumerics& n : kDeclaredNumerics)
          if (r.reasons[0].offered == n.feature) {
            const Numerics needs =
                numerics_allowed(Numerics::automatic, n) ? Numerics::automatic : Numerics::fast;
            least = std::min(least.value_or(needs), needs);
          }
    if (least) ++could[*least];
  }
  std::ostringstream out;
  out << "numerics: " << numerics_name(policy.numerics)
      << (policy.numerics == kDefaultNumerics ? " (the default; --numerics): " : " (--numerics): ");
  for (const DeclaredNumerics& n : kDeclaredNumerics)
    if (auto it = quantized.find(n.feature); it != quantized.end())
      out << it->second << " ops compute with " << n.what << " (" << n.feature << "), ";
  out << (quantized.empty() ? "every op exact" : "every other op exact");
  for (const auto& [needs, ops] : could)
    out << "; " << ops << " could quantize their activations (--numerics " << numerics_name(needs)
        << ")";
  if (!quantized.empty()) out << "; --numerics exact keeps every product on the weights as stored";
  return out.str();
}

// "weights packed: 210 by cpu_onednn as q4_0, 8 rows interleaved (69.2 MiB)", or "" when every
// weight is read as stored. A weight two ops read in one layout is counted once.
std::string layouts_line(const PhasePlan& p) {
  std::map<std::string, std::pair<std::set<std::string>, int64_t>> by;  // plugin + name
  for (const auto& o : p.ops)
    for (size_t i = 0; i < o.input_layouts.size(); ++i) {
      const WeightLayoutChoice& l = o.input_layouts[i];
      if (l.id == 0) continue;
      auto& [weights, bytes] = by[o.plugin + " as " + l.name];
      if (weights.insert(o.id + "#" + std::to_string(i)).second) bytes += l.bytes;
    }
  if (by.empty()) return "";
  std::ostringstream out;
  out << "weights packed at load (the weight-layouts extension): ";
  bool first = true;
  for (const auto& [what, wb] : by) {
    out << (first ? "" : "; ") << wb.first.size() << " by " << what << " (" << bytes_text(wb.second)
        << ")";
    first = false;
  }
  return out.str();
}

// "segments: 1 on cuda:0 (cuda_flash, 514 ops as one segment), 2 op by op on cpu:0 (...)".
std::string segments_line(const PhasePlan& p) {
  std::ostringstream out;
  out << "segments: " << p.segments.size();
  size_t shown = 0;
  for (const auto& s : p.segments) {
    if (shown++ == 4) {
      out << "; ... (--json)";
      break;
    }
    out << (shown == 1 ? " — " : "; ") << s.plugin << " on " << s.device << ", " << s.count
        << (s.count == 1 ? " op " : " ops ") << (s.segment ? "as one segment" : "op by op");
  }
  return out.str();
}

json failures_json(const Plan& plan) {
  json out = json::array();
  for (const auto& f : plan.plugin_failures)
    out.push_back({{"path", f.path}, {"stage", f.stage}, {"reason", f.reason}});
  return out;
}

}  // namespace

json to_json(const Plan& plan) {
  json phases = json::array();
  for (const auto& p : plan.phases) {
    json ops = json::array(), copies = json::array(), caches = json::array(),
         fallbacks = json::array();
    for (const auto& o : p.ops) {
      json rejected = json::array();
      for (const auto& r : o.rejected) rejected.push_back(candidate_json(r));
      json j{{"id", o.id},         {"op", sy_op_kind_name(o.op)}, {"plugin", o.plugin},
             {"kernel", o.kernel}, {"family", o.family},          {"device", o.device},
             {"rule", o.rule},     {"rejected", rejected},        {"numerics", o.numerics}};
      j["input_locations"] = o.input_locations;
      if (!o.input_layouts.empty()) {
        json layouts = json::array();
        for (const auto& l : o.input_layouts)
          layouts.push_back(l.id == 0 ? json(nullptr)
                                      : json{{"id", l.id}, {"name", l.name}, {"bytes", l.bytes}});
        j["input_layouts"] = layouts;
      }
      j["output_locations"] = o.output_locations;
      if (o.layer >= 0) j["layer"] = o.layer;
      if (!o.fused_group.empty()) j["fused_group"] = o.fused_group;
      json adaptations = json::array();
      for (const auto& a : o.adaptations) adaptations.push_back(adaptation_json(a));
      j["adaptations"] = adaptations;
      ops.push_back(j);
    }
    for (const auto& c : p.copies)
      copies.push_back({{"value", c.value},
                        {"from", c.from},
                        {"to", c.to},
                        {"before_op", c.before_op},
                        {"bytes", c.bytes}});
    for (const auto& [v, d] : p.kv_caches) caches.push_back({{"value", v}, {"device", d}});
    for (const auto& f : p.fallbacks)
      fallbacks.push_back(
          {{"op", f.op}, {"wanted", f.wanted}, {"chosen", f.chosen}, {"reason", f.reason}});
    json segments = json::array();
    for (const auto& sg : p.segments)
      segments.push_back({{"plugin", sg.plugin},
                          {"device", sg.device},
                          {"first_op", p.ops[sg.first].id},
                          {"last_op", p.ops[sg.first + sg.count - 1].id},
                          {"ops", sg.count},
                          {"form", sg.segment ? "segment" : "per_op"},
                          {"reason", sg.reason}});
    phases.push_back({{"name", p.name},
                      {"ops", ops},
                      {"segments", segments},
                      {"copies", copies},
                      {"kv_caches", caches},
                      {"fallbacks", fallbacks},
                      {"fusions_used", p.fusions_used},
                      {"fusions_refused", p.fusions_refused}});
  }
  const StepBounds& b = plan.bounds;
  json j{{"schema", "switchyard.plan/1"},
         {"status", plan.ok() ? "ok" : "error"},
         {"model", plan.model},
         {"target", plan.target},
         {"policy", policy_json(plan.policy)},
         {"kv_layout", kv_layout_name(b.kv_layout)},
         {"layout_rule", plan.layout_rule},
         {"bounds",
          {{"max_batch_tokens", b.max_batch_tokens},
           {"max_sequences", b.max_sequences},
           {"max_outputs", b.max_outputs},
           {"context", b.context},
           {"kv_block_size", b.kv_block_size}}},
         {"phases", phases},
         {"plugin_sources", plan.plugin_sources},
         {"plugin_failures", failures_json(plan)},
         {"conventions", plan.conventions},
         {"memory", memory_json(plan.memory)},
         {"plan_hash", plan.hash}};
  if (plan.error) {
    json cands = json::array();
    for (const auto& c : plan.failure.candidates) cands.push_back(candidate_json(c));
    j["error"] = {{"code", code_text(plan.error->code)},
                  {"name", error_info(plan.error->code).name},
                  {"message", plan.error->message},
                  {"phase", plan.failure.phase},
                  {"op", plan.failure.op},
                  {"candidates", cands}};
  }
  return j;
}

std::string render_plan(const Plan& plan) {
  std::ostringstream out;
  out << "Plan for " << plan.model << " on " << plan.target << " (hash " << plan.hash << ")\n";
  const StepBounds& b = plan.bounds;
  if (b.max_batch_tokens > 0)
    out << "layout: " << (plan.layout_rule.empty() ? kv_layout_name(b.kv_layout) : plan.layout_rule)
        << "\nbounds: " << b.max_batch_tokens << " tokens per step, " << b.max_sequences
        << " sequence(s), context " << b.context << " tokens each\n";
  if (!plan.plugin_sources.empty()) {
    out << "plugins:";
    for (const auto& [name, source] : plan.plugin_sources)
      out << " " << name << " (" << source << ")";
    out << "\n";
  }
  for (const auto& f : plan.plugin_failures)
    out << "plugin failed to load: " << f.path << " (stage " << f.stage << "): " << f.reason
        << "\n";
  for (const auto& c : plan.conventions) out << "convention: " << c << "\n";
  for (const auto& p : plan.phases) {
    out << "\nphase " << p.name << ": " << p.ops.size() << " ops\n";
    // Fold layers: one row per (pattern, decision), with the layers it covers.
    struct Row {
      std::string pattern, op, plugin, kernel, device, rule;
      int count = 0;
    };
    std::vector<Row> rows;
    std::map<std::string, size_t> index;
    for (const auto& o : p.ops) {
      std::string pattern = pattern_of(o);
      std::string key = pattern + "|" + o.plugin + "|" + o.kernel + "|" + o.device + "|" + o.rule;
      auto it = index.find(key);
      if (it == index.end()) {
        index[key] = rows.size();
        rows.push_back({pattern, sy_op_kind_name(o.op), o.plugin, o.kernel, o.device, o.rule, 1});
      } else {
        rows[it->second].count++;
      }
    }
    out << "  " << pad("OP", 38) << pad("KIND", 24) << pad("PLUGIN/KERNEL", 36) << pad("DEVICE", 8)
        << "WHY\n";
    for (const auto& r : rows) {
      std::string name = r.pattern + (r.count > 1 ? " (x" + std::to_string(r.count) + ")" : "");
      out << "  " << pad(name, 38) << pad(r.op, 24) << pad(r.plugin + "/" + r.kernel, 36)
          << pad(r.device, 8) << r.rule << "\n";
    }
    std::map<std::string, int> per_device;
    for (const auto& o : p.ops) per_device[o.device]++;
    int64_t copy_bytes = 0;
    for (const auto& c : p.copies) copy_bytes += c.bytes;
    out << "  summary: ";
    for (const auto& [d, n] : per_device) out << n << " ops on " << d << ", ";
    size_t adapted = 0;
    for (const auto& o : p.ops) adapted += o.adaptations.size();
    out << p.copies.size() << " copies (" << bytes_text(copy_bytes) << "), " << p.fallbacks.size()
        << " fallbacks, " << adapted << " adaptations\n";
    out << "  " << numerics_line(plan.policy, p) << "\n";
    out << "  " << segments_line(p) << "\n";
    if (const std::string l = layouts_line(p); !l.empty()) out << "  " << l << "\n";
    std::map<std::string, int> cache_devices;
    for (const auto& [v, d] : p.kv_caches) cache_devices[d]++;
    for (const auto& [d, n] : cache_devices) out << "  kv caches: " << n << " on " << d << "\n";
    if (!p.fusions_used.empty())
      out << "  fused: " << p.fusions_used.size() << " decode attention blocks\n";
    for (size_t i = 0; i < p.fusions_refused.size() && i < 3; ++i)
      out << "  not fused: " << p.fusions_refused[i] << "\n";
    for (size_t i = 0; i < p.copies.size() && i < 5; ++i)
      out << "  copy " << p.copies[i].value << " " << p.copies[i].from << " -> " << p.copies[i].to
          << " (" << bytes_text(p.copies[i].bytes) << ") before " << p.copies[i].before_op << "\n";
    if (p.copies.size() > 5) out << "  ... " << p.copies.size() - 5 << " more copies (--json)\n";
    for (size_t i = 0; i < p.fallbacks.size() && i < 5; ++i)
      out << "  fallback " << p.fallbacks[i].op << ": wanted " << p.fallbacks[i].wanted << ", got "
          << p.fallbacks[i].chosen << " because " << p.fallbacks[i].reason << "\n";
    if (p.fallbacks.size() > 5)
      out << "  ... " << p.fallbacks.size() - 5 << " more fallbacks (--json)\n";
  }
  render_memory(out, plan.memory);
  if (plan.error)
    out << "\nerror " << code_text(plan.error->code) << " (" << error_info(plan.error->code).name
        << "): " << plan.error->message << "\n";
  return out.str();
}

std::string render_explain(const Plan& plan, const std::string& id) {
  std::ostringstream out;
  bool found = false;
  auto reasons = [](const CandidateReport& c) {
    std::string s;
    for (const auto& r : c.reasons)
      s += "\n      - " + r.constraint + ": needs " + r.required + ", offers " + r.offered +
           (r.text.empty() ? "" : " (" + r.text + ")");
    return s;
  };
  for (const auto& p : plan.phases)
    for (const auto& o : p.ops) {
      if (o.id != id) continue;
      found = true;
      out << "phase " << p.name << ", op " << o.id << " (" << sy_op_kind_name(o.op) << ")\n"
          << "  chosen: " << o.plugin << "/" << o.kernel << " on " << o.device << " — " << o.rule
          << "\n";
      for (const auto& a : o.adaptations)
        out << "  adaptation " << adaptation_kind_name(a.kind) << ": completed by " << a.plugin
            << "/" << a.kernel << " on " << a.device << "\n";
      out << "  other candidates:\n";
      for (const auto& c : o.rejected)
        out << "    " << c.plugin << "/" << c.kernel << " [" << c.family << "] on " << c.device
            << (c.accepted ? ": legal, not chosen" : ": refused") << reasons(c) << "\n";
    }
  if (plan.error && plan.failure.op == id) {
    found = true;
    out << "op " << id << " has no legal candidate (" << code_text(plan.error->code) << "):\n";
    for (const auto& c : plan.failure.candidates)
      out << "    " << c.plugin << "/" << c.kernel << " [" << c.family << "] on " << c.device
          << reasons(c) << "\n";
  }
  if (!found) out << "no op '" << id << "' in the plan\n";
  return out.str();
}

}  // namespace sy
