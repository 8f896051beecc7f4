// Planning one graph: candidates per op, policy, fusion, KV-cache placement, copies.
//
// Three passes per phase, each deterministic: (1) KV caches unplaced, to learn where each
// layer's attention runs; (2) caches placed where their attention runs (or where
// --kv-cache-device says), which fixes every other placement; (3) fusion groups whose fused
// kernel accepts the operands exactly where pass 2 put them replace their ops. A fused kernel
// never receives implicit copies: it stands in for ops that would have run elsewhere.
#include "core/planner/planner.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "core/capability/vocabulary.hpp"
#include "core/planner/candidates.hpp"
#include "core/planner/memory.hpp"
#include "core/planner/memory_fit.hpp"
#include "core/planner/plan_error.hpp"

namespace sy {
namespace {

struct PhaseState {
  std::map<std::string, std::set<std::string>> available;  // value -> memory locations
  std::map<std::string, std::string> home;                 // value -> first location
  std::map<std::string, std::string> fixed;                // value -> location it must have
};

bool is_attention_family_pinned(const Policy& p, const Node& n) {
  return n.op == SY_OP_ATTENTION && p.attention != "any" && p.attention != "fused_decode";
}

std::string summarize(const std::vector<CandidateReport>& cands) {
  std::string out;
  for (const auto& c : cands) {
    if (c.accepted) continue;
    std::string reasons;
    for (const auto& r : c.reasons) reasons += (reasons.empty() ? "" : "; ") + r.text;
    out += (out.empty() ? "" : " | ") + c.plugin + "/" + c.kernel + "@" + c.device + ": " + reasons;
  }
  return out;
}

class PhasePlanner {
 public:
  PhasePlanner(const Phase& phase, const Registry& reg, const Inventory& inv, const Policy& pol)
      : phase_(phase), cands_(reg, inv, pol), inv_(inv), pol_(pol) {}

  // Pass 1: plans with the KV caches unplaced and records where each cache would live: where
  // an attention reads it (`from_attention`), else where it was written (`from_writer`). A
  // failure here is found again, and reported, by run().
  void learn_caches(std::map<std::string, std::string>& from_attention,
                    std::map<std::string, std::string>& from_writer) {
    PhaseState free_state = initial_state();
    std::vector<Decision> first;
    (void)place_all(phase_.nodes, free_state, nullptr, &first);
    fix_caches(first, free_state, from_attention, from_writer);
  }

  // Passes 2 and 3 with the caches where `caches` says (one place for every phase: the decode
  // phase reads what the prefill phase wrote). The plan, or the error with `failure` filled.
  Expected<PhasePlan> run(const std::map<std::string, std::string>& caches, PlanFailure& failure) {
    for (const auto& v : phase_.values)
      if (v.kind == ValueKind::kv_cache && caches.count(v.name))
        cache_fix_[v.name] = caches.at(v.name);
    PhaseState state = initial_state();
    state.fixed = cache_fix_;
    std::vector<Decision> second;
    if (auto e = place_all(phase_.nodes, state, nullptr, &second)) return fail_with(*e, failure);
    Expected<std::vector<Node>> nodes = apply_fusions(second, state);
    if (!nodes) return fail_with(nodes.error(), failure);
    PhaseState final_state = initial_state();
    final_state.fixed = cache_fix_;
    plan_.copies.clear();
    std::vector<Decision> decisions;
    if (auto e = place_all(*nodes, final_state, &plan_.copies, &decisions))
      return fail_with(*e, failure);
    plan_.name = phase_.name;
    for (const auto& d : decisions) plan_.ops.push_back(d.planned);
    for (const auto& [value, loc] : cache_fix_) plan_.kv_caches.emplace_back(value, loc);
    return plan_;
  }

 private:
  struct Decision {
    PlannedOp planned;
    std::vector<std::string> in_locs, out_locs;
  };

  // The candidates a policy step kept, and what it said about them.
  struct Choice {
    std::vector<const Candidate*> accepted;
    std::string rule, wanted, fallback_reason;
  };

  Error fail_with(const Error& e, PlanFailure& failure) const {
    failure = failure_;
    return e;
  }

  PhaseState initial_state() const {
    PhaseState s;
    for (const auto& v : phase_.values)
      if (v.kind == ValueKind::input)
        s.available[v.name].insert(kHostLocation), s.home[v.name] = kHostLocation;
    return s;
  }

  std::optional<Error> place_all(const std::vector<Node>& nodes, PhaseState& state,
                                 std::vector<Copy>* copies, std::vector<Decision>* out) {
    for (const auto& n : nodes) {
      Expected<Decision> d = place(n, state, copies);
      if (!d) return d.error();
      out->push_back(std::move(*d));
    }
    return std::nullopt;
  }

  // One op: every candidate, the policy's filters in order (attention pin, strict device
  // preference), the best of what is left, and the decision made true in `state`.
  Expected<Decision> place(const Node& n, PhaseState& state, std::vector<Copy>* copies) {
    Placement where{state.available, state.home, state.fixed, pol_.transfers};
    std::vector<Candidate> all = cands_.evaluate(phase_, n, where);
    std::vector<CandidateReport> reports;
    Choice choice;
    for (const auto& c : all) {
      reports.push_back(c.report);
      if (c.report.accepted) choice.accepted.push_back(&c);
    }
    if (auto e = apply_attention_pin(n, all, reports, choice)) return *e;
    if (choice.accepted.empty()) return fail(n, reports, reports, "");
    if (auto e = apply_strict_preference(n, all, reports, choice)) return *e;
    const Candidate& best = best_of(choice);
    explain(best, all, choice);
    if (!choice.wanted.empty())
      plan_fallback(n.id, choice.wanted,
                    best.report.plugin + "/" + best.report.kernel + "@" + best.report.device,
                    choice.fallback_reason, copies != nullptr);
    Decision d = decide(n, best, reports, choice.rule);
    commit(n, d, state, copies);
    return d;
  }

  // --attention FAMILY: only that family's kernels, or (auto) a fallback that says why.
  std::optional<Error> apply_attention_pin(const Node& n, const std::vector<Candidate>& all,
                                           const std::vector<CandidateReport>& reports,
                                           Choice& choice) {
    if (!is_attention_family_pinned(pol_, n)) return std::nullopt;
    std::vector<const Candidate*> pinned;
    std::vector<CandidateReport> pinned_reports;
    for (const auto& c : all)
      if (c.report.family == pol_.attention) {
        pinned_reports.push_back(c.report);
        if (c.report.accepted) pinned.push_back(&c);
      }
    if (!pinned.empty()) {
      choice.accepted = pinned;
      choice.rule = "pinned --attention " + pol_.attention;
      return std::nullopt;
    }
    if (pol_.strict || choice.accepted.empty())
      return fail(n, reports, pinned_reports.empty() ? reports : pinned_reports, pol_.attention);
    choice.wanted = "family " + pol_.attention;
    choice.fallback_reason = pinned_reports.empty()
                                 ? "no plugin has a " + pol_.attention + " kernel for this op"
                                 : summarize(pinned_reports);
    return std::nullopt;
  }

  // --strict with --prefer: only the first preferred device type.
  std::optional<Error> apply_strict_preference(const Node& n, const std::vector<Candidate>& all,
                                               const std::vector<CandidateReport>& reports,
                                               Choice& choice) {
    if (!pol_.strict || !pol_.prefer_given) return std::nullopt;
    std::vector<const Candidate*> first_type;
    std::vector<CandidateReport> first_reports;
    for (const auto& c : all)
      if (c.report.device_type == pol_.prefer.front()) {
        first_reports.push_back(c.report);
        if (c.report.accepted) first_type.push_back(&c);
      }
    if (first_type.empty())
      return fail(n, first_reports.empty() ? reports : first_reports,
                  first_reports.empty() ? reports : first_reports, "",
                  first_reports.empty() ? device_type_name(pol_.prefer.front()) : "");
    choice.accepted = first_type;
    return std::nullopt;
  }

  // Preferred device type first, then the lowest cost; names break ties, so plans are stable.
  static const Candidate& best_of(Choice& choice) {
    std::sort(
        choice.accepted.begin(), choice.accepted.end(), [](const Candidate* a, const Candidate* b) {
          return std::tie(a->pref_rank, a->cost, a->report.plugin, a->report.kernel,
                          a->report.device) < std::tie(b->pref_rank, b->cost, b->report.plugin,
                                                       b->report.kernel, b->report.device);
        });
    return *choice.accepted.front();
  }

  // The rule text, and the fallback when a more preferred device type refused the op.
  void explain(const Candidate& best, const std::vector<Candidate>& all, Choice& choice) const {
    // The best rank any device of this inventory has: "first preferred" is relative to it.
    int top_rank = int(pol_.prefer.size());
    for (const auto& c : all) top_rank = std::min(top_rank, c.pref_rank);
    if (choice.rule.empty())
      choice.rule = best.pref_rank == top_rank
                        ? "first preferred device type present (" +
                              device_type_name(best.report.device_type) + ")" +
                              (choice.accepted.size() > 1
                                   ? ", lowest cost of " + std::to_string(choice.accepted.size())
                                   : "")
                        : "the preferred device type refused it; next in --prefer order";
    if (!best.rule_extra.empty()) choice.rule += "; " + best.rule_extra;
    if (best.numerics)
      choice.rule += std::string("; ") + best.numerics->what + " (--numerics " +
                     numerics_name(pol_.numerics) + ")";
    if (!choice.wanted.empty() || best.pref_rank <= top_rank) return;
    std::vector<CandidateReport> better;
    for (const auto& c : all)
      if (c.pref_rank < best.pref_rank && !c.report.accepted) better.push_back(c.report);
    choice.wanted = device_type_name(pol_.prefer.at(size_t(top_rank)));
    choice.fallback_reason = summarize(better);
  }

  Decision decide(const Node& n, const Candidate& best, const std::vector<CandidateReport>& reports,
                  const std::string& rule) const {
    Decision d;
    PlannedOp& p = d.planned;
    p.id = n.id;
    p.op = n.op;
    p.layer = n.layer;
    p.plugin = best.report.plugin;
    p.kernel = best.report.kernel;
    p.family = best.report.family;
    p.device = best.report.device;
    p.rule = rule;
    p.adaptations = best.adaptations;
    p.workspace_bytes = best.workspace;
    p.numerics = best.numerics ? best.numerics->feature : "exact";
    for (const auto& f : phase_.fusions)
      if (n.op == SY_OP_FUSED_DECODE_ATTENTION && f.fused.id == n.id) p.fused_group = f.group;
    for (const auto& r : reports)
      if (!(r.plugin == p.plugin && r.kernel == p.kernel && r.device == p.device))
        p.rejected.push_back(r);
    d.in_locs = p.input_locations = best.in_locs;
    d.out_locs = p.output_locations = best.out_locs;
    std::string note;
    p.input_layouts = cands_.weight_layouts(phase_, n, best, note);
    if (!note.empty()) p.rule += "; " + note;
    return d;
  }

  // Makes the chosen operand locations true: copies for inputs elsewhere, outputs placed.
  void commit(const Node& n, const Decision& d, PhaseState& state, std::vector<Copy>* copies) {
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const std::string& v = n.inputs[i];
      const std::string& want = d.in_locs[i];
      auto& have = state.available[v];
      if (have.empty()) {  // weights, and caches first touched here: loaded where needed
        have.insert(want);
        state.home[v] = want;
        continue;
      }
      if (have.count(want)) continue;
      if (copies) copies->push_back({v, state.home[v], want, n.id, phase_.value(v)->bytes()});
      have.insert(want);
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const std::string& v = n.outputs[i];
      state.available[v] = {d.out_locs[i]};
      state.home[v] = d.out_locs[i];
    }
  }

  void fix_caches(const std::vector<Decision>& first, const PhaseState& state,
                  std::map<std::string, std::string>& from_attention,
                  std::map<std::string, std::string>& from_writer) {
    for (const auto& v : phase_.values) {
      if (v.kind != ValueKind::kv_cache) continue;
      if (pol_.kv_cache_device) {
        const InventoryDevice* dev = nullptr;
        for (const auto& d : inv_.devices)
          if (d.info.type == *pol_.kv_cache_device) {
            dev = &d;
            break;
          }
        from_attention[v.name] =
            !dev ? std::string("missing:") + device_type_name(*pol_.kv_cache_device)
            : dev->info.memory_is_host ? kHostLocation
                                       : dev->id;
        continue;
      }
      if (state.home.count(v.name)) from_writer.emplace(v.name, state.home.at(v.name));
    }
    if (pol_.kv_cache_device) return;
    for (const auto& d : first) {  // where the attention that reads each cache ran
      if (d.planned.op != SY_OP_ATTENTION) continue;
      const Node* n = phase_.node(d.planned.id);
      for (size_t i = 0; n && i < n->inputs.size(); ++i)
        if (phase_.value(n->inputs[i])->kind == ValueKind::kv_cache)
          from_attention[n->inputs[i]] = d.in_locs[i];
    }
  }

  Expected<std::vector<Node>> apply_fusions(const std::vector<Decision>& unfused,
                                            const PhaseState& state) {
    std::set<std::string> replaced;
    std::map<std::string, Node> fused_at;  // first replaced op id -> fused node
    bool wanted = pol_.attention == "any" || pol_.attention == "fused_decode";
    std::map<std::string, const Decision*> by_id;
    for (const auto& d : unfused) by_id[d.planned.id] = &d;
    for (const auto& f : phase_.fusions) {
      if (!wanted) continue;
      Placement where{state.available, state.home, state.fixed, false};
      // A fused kernel takes its operands exactly where the unfused plan put them: weights
      // where their projections ran, activations where produced, caches where placed.
      std::map<std::string, std::string> pinned_locs = weight_locations(f, by_id);
      where.pinned = &pinned_locs;
      std::vector<Candidate> cands = cands_.evaluate(phase_, f.fused, where);
      std::vector<CandidateReport> reports;
      bool ok = false;
      for (const auto& c : cands) {
        reports.push_back(c.report);
        ok = ok || c.report.accepted;
      }
      if (ok) {
        for (const auto& id : f.replaces) replaced.insert(id);
        fused_at[f.replaces.front()] = f.fused;
        plan_.fusions_used.push_back(f.group);
        continue;
      }
      std::string why =
          reports.empty() ? "no plugin has a fused_decode_attention kernel" : summarize(reports);
      if (pol_.attention == "fused_decode" && pol_.strict)
        return fail(f.fused, reports, reports, "fused_decode");
      plan_.fusions_refused.push_back(f.group + ": " + why);
      if (pol_.attention == "fused_decode")
        plan_.fallbacks.push_back({f.group, "fused_decode", "unfused ops", why});
    }
    std::vector<Node> nodes;
    for (const auto& n : phase_.nodes) {
      if (auto it = fused_at.find(n.id); it != fused_at.end()) {
        nodes.push_back(it->second);
        continue;
      }
      if (!replaced.count(n.id)) nodes.push_back(n);
    }
    return nodes;
  }

  // Where the unfused plan put the weights of a fusion group's ops.
  std::map<std::string, std::string> weight_locations(
      const Fusion& f, const std::map<std::string, const Decision*>& by_id) const {
    std::map<std::string, std::string> out;
    for (const auto& id : f.replaces)
      if (auto it = by_id.find(id); it != by_id.end()) {
        const Decision& d = *it->second;
        const Node* n = phase_.node(d.planned.id);
        for (size_t i = 0; i < n->inputs.size(); ++i)
          if (phase_.value(n->inputs[i])->is_parameter()) out[n->inputs[i]] = d.in_locs[i];
      }
    return out;
  }

  void plan_fallback(const std::string& op, const std::string& wanted, const std::string& chosen,
                     const std::string& reason, bool final_pass) {
    if (final_pass) plan_.fallbacks.push_back({op, wanted, chosen, reason});
  }

  Error fail(const Node& n, const std::vector<CandidateReport>& all,
             const std::vector<CandidateReport>& considered, const std::string& pinned,
             const std::string& missing_device = "") {
    return plan_error({phase_, n, all, considered, pinned, missing_device, pol_.transfers},
                      failure_);
  }

  const Phase& phase_;
  Candidates cands_;
  const Inventory& inv_;
  const Policy& pol_;
  PhasePlan plan_;
  std::map<std::string, std::string> cache_fix_;
  PlanFailure failure_;  // the op of the last error returned
};

}  // namespace

// Every op placed, before memory is looked at.
static Plan place_graph(const Graph& graph, const Registry& registry, const Inventory& inventory,
                        const Policy& policy) {
  Plan plan;
  plan.model = graph.name;
  plan.conventions = graph.conventions;
  plan.target = inventory.name;
  plan.policy = policy;
  plan.bounds = graph.bounds;
  for (const auto& r : registry.records()) {
    if (r.loaded()) plan.plugin_sources[r.name] = r.plugin->source();
    if (r.diagnostic)
      plan.plugin_failures.push_back(
          {r.path.string(), load_stage_name(r.diagnostic->stage), r.diagnostic->reason});
  }
  std::map<std::string, std::string> from_attention, from_writer;
  for (const auto& phase : graph.phases)
    PhasePlanner(phase, registry, inventory, policy).learn_caches(from_attention, from_writer);
  std::map<std::string, std::string> caches = from_writer;
  for (const auto& [v, loc] : from_attention) caches[v] = loc;
  for (const auto& phase : graph.phases) {
    Expected<PhasePlan> p =
        PhasePlanner(phase, registry, inventory, policy).run(caches, plan.failure);
    if (!p) {
      plan.error = p.error();
      break;
    }
    plan_segments(*p, registry);
    plan.phases.push_back(std::move(*p));
  }
  plan.hash = plan_hash(plan);
  return plan;
}

Plan plan_graph(const Graph& graph, const Registry& registry, const Inventory& inventory,
                const Policy& policy) {
  auto place = [&](const Policy& p) {
    Plan plan = place_graph(graph, registry, inventory, p);
    if (plan.ok()) plan.memory = plan_memory(graph, plan, inventory, p);
    return plan;
  };
  Plan plan = place(policy);
  if (!plan.ok() || !policy.check_memory) return plan;
  return fit_memory(std::move(plan), graph, place, policy);
}

const char* numerics_name(Numerics n) {
  switch (n) {
    case Numerics::exact: return "exact";
    case Numerics::automatic: return "auto";
    case Numerics::fast: return "fast";
  }
  return "exact";
}

std::optional<Numerics> parse_numerics(const std::string& text) {
  if (text == "exact") return Numerics::exact;
  if (text == "auto") return Numerics::automatic;
  if (text == "fast") return Numerics::fast;
  return std::nullopt;
}

std::string layout_tag(const PlannedOp& op, size_t i) {
  if (i >= op.input_layouts.size() || op.input_layouts[i].id == 0) return "";
  return op.plugin + ":" + std::to_string(op.input_layouts[i].id);
}

std::vector<std::string> layout_tags(const PlannedOp& op) {
  std::vector<std::string> out;
  if (op.input_layouts.empty()) return out;
  for (size_t i = 0; i < op.input_layouts.size(); ++i) out.push_back(layout_tag(op, i));
  return out;
}

bool numerics_allowed(Numerics policy, const DeclaredNumerics& declared) {
  switch (policy) {
    case Numerics::exact: return false;
    case Numerics::automatic: return declared.bit == SY_FEATURE_ACTIVATION_Q16;
    case Numerics::fast: return true;
  }
  return false;
}

}  // namespace sy

namespace sy {
namespace {

// Per phase, so that a contiguous plan's two phases (prefill, decode) and a paged plan's one
// (step) compare.
double fallbacks_of(const Plan& plan) {
  size_t n = 0;
  for (const auto& p : plan.phases) n += p.fallbacks.size();
  return plan.phases.empty() ? 0.0 : double(n) / double(plan.phases.size());
}

// How far the plan's ops sit from the policy's device order: the sum over ops of their device
// type's rank in `prefer` (a type not listed ranks after every listed one), per phase.
double preference_rank(const Plan& plan, const Inventory& inventory, const Policy& policy) {
  size_t rank = 0;
  for (const auto& p : plan.phases)
    for (const auto& op : p.ops) {
      const InventoryDevice* d = inventory.find(op.device);
      size_t r = policy.prefer.size();
      for (size_t i = 0; d && i < policy.prefer.size(); ++i)
        if (policy.prefer[i] == d->info.type) {
          r = i;
          break;
        }
      rank += r;
    }
  return plan.phases.empty() ? 0.0 : double(rank) / double(plan.phases.size());
}

// Ops of the plan's last phase (its decode step) on a device type other than the first the
// policy prefers.
size_t ops_off_preferred(const Plan& plan, const Inventory& inventory, const Policy& policy) {
  size_t n = 0;
  if (plan.phases.empty()) return 0;
  for (const auto& op : plan.phases.back().ops) {
    const InventoryDevice* d = inventory.find(op.device);
    n += !policy.prefer.empty() && (!d || d->info.type != policy.prefer.front());
  }
  return n;
}

std::string first_fallback(const Plan& plan) {
  for (const auto& p : plan.phases)
    for (const auto& f : p.fallbacks)
      return f.op + ": wanted " + f.wanted + ", got " + f.chosen + " because " + f.reason;
  return "";
}

}  // namespace

LayoutPlan plan_layouts(const GraphForLayout& import, int64_t max_sequences,
                        const Registry& registry, const Inventory& inventory,
                        const Policy& policy) {
  auto plan_of = [&](KvLayout layout) {
    LayoutPlan lp{import(layout), {}};
    lp.plan = plan_graph(lp.graph, registry, inventory, policy);
    return lp;
  };
  auto capped = [](const LayoutPlan& lp) -> std::string {
    const StepBounds& b = lp.graph.bounds;
    if (b.max_batch_tokens_asked == 0) return "";
    return "; a step takes at most the context's " + std::to_string(b.context) +
           " tokens, not the " + std::to_string(b.max_batch_tokens_asked) + " asked for";
  };
  if (policy.attention == "fused_decode" && max_sequences == 1) {
    LayoutPlan lp = plan_of(KvLayout::contiguous);
    lp.plan.layout_rule =
        "contiguous: --attention fused_decode asks for the fused decode block, which serves one "
        "sequence of a contiguous cache" +
        capped(lp);
    return lp;
  }
  LayoutPlan paged = plan_of(KvLayout::paged);
  const double paged_fallbacks = fallbacks_of(paged.plan);
  if (max_sequences > 1 || (paged.plan.ok() && paged_fallbacks == 0)) {
    paged.plan.layout_rule = paged.plan.ok() ? "paged: every kernel serves the varlen, paged forms"
                                             : "paged (" + std::to_string(max_sequences) +
                                                   " sequences need the varlen, paged forms)";
    return paged;
  }
  // One sequence: the contiguous layout asks less of the kernels (no varlen, no paged KV). It
  // is taken when the paged plan fails, falls back from what the policy pinned or preferred
  // and the contiguous one does not, or puts ops on less preferred devices (a GPU whose
  // kernels lack the paged forms must not be left idle for them).
  LayoutPlan contiguous = plan_of(KvLayout::contiguous);
  const bool further = paged.plan.ok() && contiguous.plan.ok() &&
                       preference_rank(contiguous.plan, inventory, policy) <
                           preference_rank(paged.plan, inventory, policy);
  // --strict: a paged plan that only stands by falling back does not hide the contiguous
  // plan's own error (SY011 for a model that does not fit the preferred device, say).
  const bool strict_error = !contiguous.plan.ok() && policy.strict && paged_fallbacks > 0;
  if (paged.plan.ok() && !further && !strict_error &&
      (!contiguous.plan.ok() || fallbacks_of(contiguous.plan) >= paged_fallbacks)) {
    paged.plan.layout_rule = "paged: every kernel serves the varlen, paged forms";
    return paged;
  }
  const std::string why =
      !paged.plan.ok()
          ? "it failed: " + code_text(paged.plan.error->code) + " " + paged.plan.error->message
      : further ? std::to_string(ops_off_preferred(paged.plan, inventory, policy)) +
                      " op(s) would run off the preferred device (the kernels there lack the "
                      "varlen, paged forms), against " +
                      std::to_string(ops_off_preferred(contiguous.plan, inventory, policy)) +
                      " contiguous"
                : std::to_string(paged.plan.phases.back().fallbacks.size()) +
                      " op(s) would fall back from what the policy asks (" +
                      first_fallback(paged.plan) + ")";
  contiguous.plan.layout_rule =
      "contiguous, one sequence: in the paged layout " + why + capped(contiguous);
  return contiguous;
}

}  // namespace sy
