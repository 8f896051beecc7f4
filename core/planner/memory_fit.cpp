#include "core/planner/memory_fit.hpp"

#include <algorithm>
#include <set>

#include "core/planner/candidates.hpp"
#include "core/planner/memory.hpp"

namespace sy {
namespace {

// The units of the model in the order they run: the input ops, the layers, the output ops.
std::vector<std::string> units_of(const Graph& graph) {
  std::set<int> layers;
  bool input = false, output = false;
  for (const auto& phase : graph.phases)
    for (const auto& n : phase.nodes) {
      if (n.layer >= 0)
        layers.insert(n.layer);
      else if (memory_unit(phase, n) == "input")
        input = true;
      else
        output = true;
    }
  std::vector<std::string> units;
  if (input) units.push_back("input");
  for (int l : layers) units.push_back("layer " + std::to_string(l));
  if (output) units.push_back("output");
  return units;
}

// "input, layers 0-13" for units [from, to).
std::string describe(const std::vector<std::string>& units, size_t from, size_t to) {
  std::vector<std::string> parts;
  int first = -1, last = -1;
  auto flush = [&] {
    if (first < 0) return;
    parts.push_back(first == last ? "layer " + std::to_string(first)
                                  : "layers " + std::to_string(first) + "-" + std::to_string(last));
    first = last = -1;
  };
  for (size_t i = from; i < to; ++i) {
    const std::string& u = units[i];
    if (u.rfind("layer ", 0) == 0) {
      int l = std::stoi(u.substr(6));
      if (first < 0) first = l;
      last = l;
      continue;
    }
    flush();
    parts.push_back(u == "input" ? "the input ops (embedding)" : "the output ops (norm, head)");
  }
  flush();
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return out.empty() ? "nothing" : out;
}

const LocationMemory* overfull_device(const MemoryPlan& m) {
  for (const auto& l : m.locations)
    if (l.location != kHostLocation && !l.fits()) return &l;
  return nullptr;
}

// The largest context whose KV caches leave every location within its capacity (paged: every
// one of `sequences` sequences at that context).
std::optional<int64_t> largest_context(const MemoryPlan& m, int64_t sequences) {
  std::optional<int64_t> best;
  for (const auto& l : m.locations) {
    if (!l.capacity) continue;
    const int64_t rest = l.total() - l.kv_cache;
    if (l.kv_bytes_per_position <= 0) {
      if (rest > *l.capacity) return 0;
      continue;
    }
    const int64_t ctx = std::max<int64_t>(
        0, (*l.capacity - rest) / l.kv_bytes_per_position / std::max<int64_t>(1, sequences));
    best = best ? std::min(*best, ctx) : ctx;
  }
  return best;
}

std::string need_text(const LocationMemory& l) {
  std::string s = l.location + " needs " + format_bytes(l.total()) + " (weights " +
                  format_bytes(l.weights) + ", KV cache " + format_bytes(l.kv_cache) +
                  ", activations " + format_bytes(l.activations) + ", copies " +
                  format_bytes(l.copies) + ", workspace " + format_bytes(l.workspace) + ") of ";
  return s + (l.capacity ? format_bytes(*l.capacity) + " = " + l.capacity_rule : l.capacity_rule);
}

// The prompt length a contiguous prefill phase is planned for: no context below it is an
// answer. (A paged plan takes any prompt in chunks.)
int64_t prompt_length(const Graph& graph) {
  return graph.bounds.kv_layout == KvLayout::contiguous ? graph.bounds.max_batch_tokens : 0;
}

Plan does_not_fit(Plan plan, const Graph& graph, const std::string& why) {
  MemoryPlan& m = plan.memory;
  const bool paged = graph.bounds.kv_layout == KvLayout::paged;
  m.max_context = largest_context(m, paged ? graph.bounds.max_sequences : 1);
  if (m.max_context && paged && m.kv_block_tokens > 0)  // whole blocks
    m.max_context = *m.max_context / m.kv_block_tokens * m.kv_block_tokens;
  const int64_t prompt = prompt_length(graph);
  if (m.max_context && *m.max_context < prompt) m.max_context = 0;
  const LocationMemory* over = nullptr;
  for (const auto& l : m.locations)
    if (!l.fits() && !over) over = &l;
  std::string msg =
      "the plan needs more memory than " + (over ? over->location : "a device") + " has: ";
  for (size_t i = 0; i < m.locations.size(); ++i)
    msg += (i ? "; " : "") + need_text(m.locations[i]);
  if (!why.empty()) msg += "; " + why;
  if (m.max_context)
    msg += *m.max_context > 0
               ? "; the largest context that fits is " + std::to_string(*m.max_context) +
                     " tokens (--context)"
               : "; no context fits: the rest of the plan (weights, the activations of a " +
                     std::to_string(graph.bounds.max_batch_tokens) +
                     "-token step) leaves no room for the KV caches";
  plan.error = Error(Errc::does_not_fit, msg);
  plan.failure = {};
  plan.hash = plan_hash(plan);  // a plan's hash covers its error
  return plan;
}

// The fewest leading `units` that, kept off `dev` on top of `pol`, make it fit: a binary search
// in which each trial is a full plan. Moving more units only ever frees `dev`, but may hit an op
// the next device cannot serve: such a trial bounds the search from above, and its error is
// part of the answer (`unplaceable`).
struct Fewest {
  size_t count = 0;  // 0: none fits
  Plan plan;
  std::string unplaceable;
};
Fewest fewest_units(const std::vector<std::string>& units, const std::string& dev,
                    const Policy& pol, const PlaceFn& place) {
  Fewest f;
  size_t lo = 1, hi = units.size();
  while (lo <= hi) {
    const size_t mid = (lo + hi) / 2;
    Policy trial = pol;
    trial.memory_excluded[dev].insert(units.begin(), units.begin() + long(mid));
    Plan t = place(trial);
    if (!t.ok()) {
      f.unplaceable = "moving " + describe(units, 0, mid) + " off " + dev +
                      " fails: " + code_text(t.error->code) + " " + t.error->message;
      hi = mid - 1;
      continue;
    }
    const LocationMemory* m = t.memory.find(dev);
    if (!m || m->fits())
      f.count = mid, f.plan = std::move(t), hi = mid - 1;
    else
      lo = mid + 1;
  }
  return f;
}

// Each layer's experts unit ("layer N experts"), in layer order.
std::vector<std::string> expert_units(const Graph& graph) {
  std::set<int> layers;
  for (const auto& phase : graph.phases)
    for (const auto& n : phase.nodes)
      if (n.op == SY_OP_MOE_EXPERTS && n.layer >= 0) layers.insert(n.layer);
  std::vector<std::string> units;
  for (int l : layers) units.push_back("layer " + std::to_string(l) + " experts");
  return units;
}

}  // namespace

Plan fit_memory(Plan plan, const Graph& graph, const PlaceFn& place, const Policy& policy) {
  const std::vector<std::string> units = units_of(graph), experts = expert_units(graph);
  Policy pol = policy;
  std::string story;
  for (size_t round = 0; round < 8; ++round) {
    const LocationMemory* over = overfull_device(plan.memory);
    if (!over) break;
    if (policy.strict)
      return does_not_fit(std::move(plan), graph,
                          "--strict keeps every op where the preference puts it");
    const std::string dev = over->location;
    const std::string before = need_text(*over);
    // A mixture of experts' stacked weights are most of its bytes and few of its FLOPs per
    // token: its experts leave first, layer by layer (llama.cpp's --n-cpu-moe, chosen here),
    // while attention, norms, router and head stay.
    const bool experts_left = !experts.empty() && !pol.memory_excluded[dev].count(experts.back());
    if (experts_left) {
      Fewest f = fewest_units(experts, dev, pol, place);
      if (f.count > 0) {
        pol.memory_excluded[dev].insert(experts.begin(), experts.begin() + long(f.count));
        plan = std::move(f.plan);
        story += (story.empty() ? "" : "; ") + before + ", so the experts of " +
                 describe(experts, 0, f.count) + " run on the next device in --prefer order, " +
                 "and their attention, norms and router, and every other unit, stay on " + dev;
        continue;
      }
      // Not even every expert off `dev` is enough: they all go, then whole layers.
      Policy trial = pol;
      trial.memory_excluded[dev].insert(experts.begin(), experts.end());
      Plan t = place(trial);
      if (t.ok()) {
        pol = trial;
        plan = std::move(t);
        story += (story.empty() ? "" : "; ") + before + ", so the experts of every layer " +
                 "run on the next device in --prefer order";
        continue;
      }
    }
    Fewest f = fewest_units(units, dev, pol, place);
    if (f.count == 0)
      return does_not_fit(std::move(plan), graph,
                          f.unplaceable.empty()
                              ? "moving layers off " + dev + " does not make it fit"
                              : f.unplaceable);
    pol.memory_excluded[dev].insert(units.begin(), units.begin() + long(f.count));
    plan = std::move(f.plan);
    story += (story.empty() ? "" : "; ") + before + ", so " + describe(units, 0, f.count) +
             " run on the next device in --prefer order and " +
             describe(units, f.count, units.size()) + " stay on " + dev;
  }
  for (const auto& l : plan.memory.locations)
    if (!l.fits()) return does_not_fit(std::move(plan), graph, story);
  plan.memory.split = story;
  return plan;
}

}  // namespace sy
