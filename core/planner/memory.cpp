#include "core/planner/memory.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string_view>

#include "core/planner/planner.hpp"

namespace sy {
namespace {

// One buffer of one phase (or of the session: weights, caches), and the kernel calls that
// touch it: [first, last] in the phase's op order.
struct Use {
  const Value* value = nullptr;
  std::string scope, location;
  int first = 0, last = 0;
  int64_t packed_bytes = -1;  // a weight in a packed layout: its bytes there
};

class Uses {
 public:
  void touch(const Value& v, const std::string& scope, const std::string& location, int step,
             const std::string& layout = "", int64_t packed_bytes = -1) {
    const std::string key = buffer_key(scope, v.name, location, layout);
    auto [it, added] = uses_.try_emplace(key, Use{&v, scope, location, step, step, packed_bytes});
    if (added) order_.push_back(key);
    it->second.first = std::min(it->second.first, step);
    it->second.last = std::max(it->second.last, step);
  }
  Use& at(const std::string& key) { return uses_.at(key); }
  const std::vector<std::string>& order() const { return order_; }  // first touch first

 private:
  std::map<std::string, Use> uses_;
  std::vector<std::string> order_;
};

// Every operand each kernel call of a phase touches, where the plan put it: the ops (their
// adapted and completing kernels included, as the executor runs them) and the copies before
// each op. `added` keeps the values adaptations add alive while `uses` points at them.
void collect_phase(const Phase& phase, const PhasePlan& pp, Uses& uses,
                   std::vector<std::vector<Value>>& added) {
  for (int step = 0; step < int(pp.ops.size()); ++step) {
    const PlannedOp& op = pp.ops[size_t(step)];
    const Node* node = planned_node(phase, op.id);
    if (!node) continue;
    added.emplace_back();
    for (const auto& a : op.adaptations)
      for (auto& v : adaptation_values(a, phase, *node)) added.back().push_back(std::move(v));
    auto touch = [&](const std::string& name, const std::string& loc) {
      const Value* v = phase.value(name);
      for (const auto& extra : added.back())
        if (extra.name == name) v = &extra;
      if (v) uses.touch(*v, buffer_scope(*v, phase.name), loc, step);
    };
    for (const auto& c : pp.copies)
      if (c.before_op == op.id) touch(c.value, c.from), touch(c.value, c.to);
    // Only the op's own, unadapted call carries layouts (call_operands): its indices are the op's.
    for (const AdaptedOperands& call : call_operands(op.adaptations, *node, op.input_locations,
                                                     op.output_locations, layout_tags(op))) {
      for (size_t i = 0; i < call.inputs.size(); ++i)
        if (!call.input_layouts[i].empty())
          uses.touch(*phase.value(call.inputs[i]), "", call.input_locations[i], step,
                     call.input_layouts[i], op.input_layouts[i].bytes);
        else
          touch(call.inputs[i], call.input_locations[i]);
      for (size_t i = 0; i < call.outputs.size(); ++i)
        touch(call.outputs[i], call.output_locations[i]);
    }
  }
}

// Offsets for buffers whose lifetimes may overlap: largest first, each at the lowest offset
// that does not overlap a placed buffer alive at the same time. Returns the arena's size.
int64_t pack(std::vector<std::pair<std::string, Use*>>& items,
             std::map<std::string, ArenaSlot>& slots) {
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    return buffer_bytes(a.second->value->bytes()) > buffer_bytes(b.second->value->bytes());
  });
  struct Placed {
    int64_t offset, bytes;
    int first, last;
  };
  std::vector<Placed> placed;
  int64_t size = 0;
  for (auto& [key, use] : items) {
    const int64_t bytes = buffer_bytes(use->value->bytes());
    std::vector<const Placed*> alive;
    for (const auto& p : placed)
      if (p.first <= use->last && use->first <= p.last) alive.push_back(&p);
    std::sort(alive.begin(), alive.end(),
              [](const Placed* a, const Placed* b) { return a->offset < b->offset; });
    int64_t offset = 0;
    for (const Placed* p : alive) {
      if (offset + bytes <= p->offset) break;
      offset = std::max(offset, p->offset + p->bytes);
    }
    placed.push_back({offset, bytes, use->first, use->last});
    slots[key] = {offset, bytes};
    size = std::max(size, offset + bytes);
  }
  return size;
}

// Where a device's memory is: the host for a CPU, else its own id.
std::string location_of(const Inventory& inv, const std::string& device) {
  const InventoryDevice* d = inv.find(device);
  return !d || d->info.memory_is_host ? kHostLocation : device;
}

void set_capacity(LocationMemory& m, const Inventory& inv, const Policy& pol) {
  const InventoryDevice* dev = nullptr;
  for (const auto& d : inv.devices)
    if (m.location == kHostLocation ? d.info.memory_is_host : d.id == m.location) {
      dev = &d;
      break;
    }
  if (dev && dev->free_bytes) {
    const int64_t free = int64_t(*dev->free_bytes);
    const int64_t reserve = pol.memory_reserve.value_or(default_memory_reserve(free));
    m.capacity = std::max<int64_t>(0, free - reserve);
    m.capacity_rule =
        format_bytes(free) + " (" + dev->free_source + ") - " + format_bytes(reserve) + " reserve";
  }
  if (auto it = pol.max_device_memory.find(m.location); it != pol.max_device_memory.end())
    if (!m.capacity || it->second < *m.capacity) {
      m.capacity = it->second;
      m.capacity_rule = format_bytes(it->second) + " (--max-device-memory)";
    }
  if (!m.capacity) m.capacity_rule = "unknown (no memory_info, no memory_bytes)";
}

// The paged KV pools' bytes at `blocks` blocks each, per location.
std::map<std::string, int64_t> pool_bytes(
    const std::vector<std::pair<const Value*, std::string>>& pools, int64_t blocks) {
  std::map<std::string, int64_t> out;
  for (const auto& [v, loc] : pools)
    out[loc] += pool_allocation_bytes(*v, blocks, loc == kHostLocation);
  return out;
}

// How many blocks each paged pool gets: --kv-blocks as asked; else the graph's bound (every
// sequence at its full context), or as many as the capacity that remains after the weights,
// activations and workspace holds, when that is fewer (the way vLLM sizes its pool from the
// memory left). A pool that cannot hold one sequence's context is left over capacity: the
// binding split or SY011 answer it (memory_fit.cpp).
void budget_kv_blocks(MemoryPlan& out, const Graph& graph,
                      const std::vector<std::pair<const Value*, std::string>>& pools,
                      const Policy& policy) {
  const StepBounds& b = graph.bounds;
  const int64_t bound = pools.front().first->shape[0];
  const int64_t per_sequence =
      (b.context + b.kv_block_size - 1) / std::max<int64_t>(1, b.kv_block_size);
  out.kv_block_tokens = b.kv_block_size;
  int64_t blocks = bound;
  out.kv_blocks_rule = policy.kv_blocks ? "--kv-blocks"
                                        : std::to_string(b.max_sequences) +
                                              " sequences at their full context of " +
                                              std::to_string(b.context) + " tokens";
  const std::map<std::string, int64_t> one = pool_bytes(pools, 1);
  if (!policy.kv_blocks)
    for (const auto& l : out.locations) {
      auto it = one.find(l.location);
      if (it == one.end() || !l.capacity) continue;
      // Rounding makes bytes(n) at most n·(bytes(1) − 64) + a huge page: fit n conservatively.
      const int64_t room = *l.capacity - l.total() - kHostHugePage;
      const int64_t fit = std::max<int64_t>(0, room / std::max<int64_t>(1, it->second - 64));
      if (fit < blocks && fit >= per_sequence) {
        blocks = fit;
        out.kv_blocks_rule = "as many as fit in " + l.location +
                             " after the weights, activations and workspace (" +
                             std::to_string(fit) + " of " + std::to_string(bound) + ")";
      }
    }
  out.kv_blocks = blocks;
  const std::map<std::string, int64_t> bytes = pool_bytes(pools, blocks);
  for (auto& l : out.locations)
    if (auto it = bytes.find(l.location); it != bytes.end()) {
      l.kv_cache += it->second;
      l.kv_bytes_per_block = one.at(l.location);
      if (b.kv_block_size > 0) l.kv_bytes_per_position = l.kv_bytes_per_block / b.kv_block_size;
    }
}

}  // namespace

bool is_kv_pool(const Value& v) {
  return v.kind == ValueKind::kv_cache && v.dynamic.extent == StepExtent::pool_blocks;
}

int64_t pool_allocation_bytes(const Value& pool, int64_t blocks, bool host) {
  const int64_t bound = pool.shape.empty() ? 1 : pool.shape[0];
  const int64_t per_block = bound > 0 ? pool.bytes() / bound : 0;
  const int64_t b = buffer_bytes(per_block * blocks);
  return host ? host_allocation_bytes(b) : b;
}

const LocationMemory* MemoryPlan::find(const std::string& location) const {
  for (const auto& l : locations)
    if (l.location == location) return &l;
  return nullptr;
}

int64_t buffer_bytes(int64_t value_bytes) {
  return (value_bytes + 63) / 64 * 64 + 64;
}

int64_t host_allocation_bytes(int64_t bytes) {
  return bytes < kHostHugePage ? bytes
                               : (bytes + kHostHugePage - 1) / kHostHugePage * kHostHugePage;
}

std::string buffer_key(const std::string& scope, const std::string& value,
                       const std::string& location, const std::string& layout) {
  return scope + "|" + value + "@" + location + (layout.empty() ? "" : "#" + layout);
}

std::string buffer_scope(const Value& v, const std::string& phase) {
  return v.is_parameter() || v.kind == ValueKind::kv_cache ? "" : phase;
}

const Node* planned_node(const Phase& phase, const std::string& id) {
  if (const Node* n = phase.node(id)) return n;
  for (const auto& f : phase.fusions)
    if (f.fused.id == id) return &f.fused;
  return nullptr;
}

std::set<std::string> parameters_at(const Graph& graph, const Plan& plan,
                                    const std::string& location) {
  std::set<std::string> out;
  for (size_t i = 0; i < graph.phases.size() && i < plan.phases.size(); ++i) {
    const Phase& phase = graph.phases[i];
    for (const PlannedOp& op : plan.phases[i].ops) {
      const Node* node = planned_node(phase, op.id);
      if (!node) continue;
      for (const auto& call : call_operands(op.adaptations, *node, op.input_locations,
                                            op.output_locations, layout_tags(op)))
        for (size_t k = 0; k < call.inputs.size(); ++k)
          if (const Value* v = phase.value(call.inputs[k]); v && v->is_parameter() &&
                                                            call.input_locations[k] == location &&
                                                            call.input_layouts[k].empty())
            out.insert(v->name);
    }
  }
  return out;
}

std::string memory_location(const std::string& name) {
  return name == "cpu" || name.rfind("cpu:", 0) == 0 ? kHostLocation : name;
}

std::string memory_unit(const Phase& phase, const Node& node) {
  if (node.layer >= 0 && node.op == SY_OP_MOE_EXPERTS)
    return "layer " + std::to_string(node.layer) + " experts";
  if (node.layer >= 0) return "layer " + std::to_string(node.layer);
  const Node* in_phase = phase.node(node.id);
  if (!in_phase) return "output";
  for (const auto& n : phase.nodes) {
    if (&n == in_phase) return "input";
    if (n.layer >= 0) return "output";
  }
  return "output";
}

std::string enclosing_unit(const std::string& unit) {
  constexpr std::string_view kExperts = " experts";
  return unit.ends_with(kExperts) ? unit.substr(0, unit.size() - kExperts.size()) : unit;
}

std::string format_bytes(int64_t bytes) {
  char buf[32];
  const double b = double(bytes);
  if (bytes >= kGiB)
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(kGiB));
  else if (bytes >= (int64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1 << 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else
    std::snprintf(buf, sizeof buf, "%lld B", (long long)bytes);
  return buf;
}

MemoryPlan plan_memory(const Graph& graph, const Plan& plan, const Inventory& inventory,
                       const Policy& policy) {
  MemoryPlan out;
  std::map<std::string, LocationMemory> per;
  per[kHostLocation].location = kHostLocation;
  for (const auto& d : inventory.devices)
    if (!d.info.memory_is_host) per[d.id].location = d.id;
  std::map<std::string, std::string> home;  // weight or cache -> where it was first put
  std::map<std::string, int64_t> arena;     // location -> largest phase's arena
  std::vector<std::pair<const Value*, std::string>> pools;  // paged KV pools, where they live
  int64_t context = 0;
  for (size_t i = 0; i < graph.phases.size() && i < plan.phases.size(); ++i) {
    const Phase& phase = graph.phases[i];
    const PhasePlan& pp = plan.phases[i];
    Uses uses;
    std::vector<std::vector<Value>> added;
    collect_phase(phase, pp, uses, added);
    std::map<std::string, std::vector<std::pair<std::string, Use*>>> by_location;
    const int end = int(pp.ops.size());
    for (const auto& key : uses.order()) {
      Use& u = uses.at(key);
      const Value& v = *u.value;
      if (!u.scope.empty()) {
        if (v.kind == ValueKind::input) u.first = 0;  // written before the step's first call
        if (v.role == ValueRole::logits || v.role == ValueRole::greedy_ids)
          u.last = end;  // read after its last
        by_location[u.location].push_back({key, &u});
        continue;
      }
      LocationMemory& m = per[u.location];
      if (v.kind == ValueKind::kv_cache && v.shape.size() > 1 && !is_kv_pool(v))
        context = std::max(context, v.shape[1]);
      auto [it, first_home] = home.try_emplace(key.substr(0, key.rfind('@')), u.location);
      if (out.slots.count(key)) continue;
      const int64_t bytes = u.packed_bytes >= 0 ? u.packed_bytes : v.bytes();
      out.slots[key] = {0, buffer_bytes(bytes)};  // session-scoped: its own allocation
      if (is_kv_pool(v)) {                        // sized below, once the blocks are budgeted
        pools.push_back({&v, u.location});
        continue;
      }
      int64_t& slot = !first_home && it->second != u.location ? m.copies
                      : v.kind == ValueKind::kv_cache         ? m.kv_cache
                                                              : m.weights;
      const int64_t b = buffer_bytes(bytes),
                    taken = u.location == kHostLocation ? host_allocation_bytes(b) : b;
      slot += taken;
      if (u.packed_bytes >= 0 && &slot == &m.weights) m.weights_packed += taken;
    }
    for (auto& [loc, items] : by_location) {
      std::map<std::string, ArenaSlot> slots;
      const int64_t size = pack(items, slots);
      arena[loc] = std::max(arena[loc], size);
      out.slots.insert(slots.begin(), slots.end());
    }
    // Every phase's kernels are prepared together and held for the session.
    for (const auto& op : pp.ops) {
      per[location_of(inventory, op.device)].workspace += op.workspace_bytes;
      for (const auto& a : op.adaptations)  // the completing kernel is prepared too
        per[location_of(inventory, a.device)].workspace += a.workspace_bytes;
    }
    if (pp.name == "decode")
      for (const auto& c : pp.copies) ++out.copies_per_token, out.copy_bytes_per_token += c.bytes;
  }
  for (auto& [loc, m] : per) {
    m.location = loc;
    m.activations = loc == kHostLocation ? host_allocation_bytes(arena[loc]) : arena[loc];
    if (context > 0) m.kv_bytes_per_position = m.kv_cache / context;
    set_capacity(m, inventory, policy);
    out.locations.push_back(m);
  }
  if (!pools.empty()) budget_kv_blocks(out, graph, pools, policy);
  std::stable_partition(out.locations.begin(), out.locations.end(),
                        [](const LocationMemory& m) { return m.location == kHostLocation; });
  return out;
}

}  // namespace sy
