#include "core/executor/model.hpp"

#include <malloc.h>

#include <fstream>
#include <vector>

namespace sy {
namespace {

// Host kernels read a mapped weight where the file has it: GGUF aligns tensor data to 32 bytes
// (general.alignment's default), so that is what mapping asks; a file that gives less is copied.
constexpr uintptr_t kMappedAlignment = 32;

std::string key_of(const std::string& name, const std::string& location,
                   const std::string& layout = "") {
  return name + "@" + location + (layout.empty() ? "" : "#" + layout);
}

// A weight some kernel reads packed: who packs it, for which of its devices, into what.
struct PackedWant {
  const Value* value;
  std::string location, plugin, device;
  WeightLayoutChoice layout;
};

// A constant's elements, from the graph, in its dtype.
std::optional<Error> fill_constant(const Value& v, void* dst) {
  for (size_t i = 0; i < v.data.size(); ++i) {
    const float x = static_cast<float>(v.data[i]);
    switch (v.dtype) {
      case SY_DTYPE_F32: static_cast<float*>(dst)[i] = x; break;
      case SY_DTYPE_BF16: static_cast<uint16_t*>(dst)[i] = sy_f32_to_bf16(x); break;
      case SY_DTYPE_F16: static_cast<_Float16*>(dst)[i] = static_cast<_Float16>(x); break;
      default:
        return Error(Errc::bad_graph, "constant " + v.name + " has dtype " +
                                          sy_dtype_name(v.dtype) +
                                          "; constants are f32, f16 or bf16");
    }
  }
  return std::nullopt;
}

}  // namespace

int64_t resident_anonymous_bytes() {
  // Freed heap memory the allocator keeps stays resident, and a later allocation reuses it
  // without the figure growing (the GGUF parse and the tokenizer free megabytes just before
  // the weights are copied): give it back first, so growth counts what was allocated.
  ::malloc_trim(0);
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("RssAnon:", 0) == 0) return std::stoll(line.substr(8)) * 1024;
  return 0;
}

std::map<std::string, int64_t> device_free_memory(const Memory& memory) {
  std::map<std::string, int64_t> out;
  for (const auto& dev : memory.inventory().devices) {
    if (dev.info.memory_is_host) continue;
    for (const auto& name : dev.plugins)
      if (const Plugin* p = memory.registry().find(name))
        if (auto k = p->device_index(dev.info))
          if (auto m = p->memory_info(*k); m && !out.count(dev.id))
            out[dev.id] = int64_t(m->free_bytes);
  }
  return out;
}

Model::Model(const Graph& graph, const Plan& plan, const Registry& registry,
             const Inventory& inventory, const WeightLoader& load)
    : registry_(registry), graph_(graph), plan_(plan), memory_(registry, inventory) {
  if (!plan.ok()) throw *plan.error;
  if (const Value* table = graph.find(ValueRole::token_embedding)) vocab_ = table->shape[0];
  const std::map<std::string, int64_t> free_before = device_free_memory(memory_);
  const int64_t resident_before = resident_anonymous_bytes();
  try {
    load_parameters(load);
  } catch (...) {
    for (auto& [key, b] : parameters_) memory_.free(b);
    throw;
  }
  for (const auto& [loc, after] : device_free_memory(memory_))
    if (auto it = free_before.find(loc); it != free_before.end())
      free_drop_[loc] = it->second - after;
  resident_growth_ = resident_anonymous_bytes() - resident_before;
  for (const auto& l : plan.memory.locations)
    if (l.capacity) left_[l.location] = *l.capacity - l.weights - l.copies;
}

Model::~Model() {
  for (auto& [key, b] : parameters_) memory_.free(b);
}

// Every (weight or constant, location) some kernel call of the plan reads, loaded once: mapped
// from the file on the host when the loader can, else read (through host memory for a device).
void Model::load_parameters(const WeightLoader& load) {
  std::map<std::string, std::pair<const Value*, std::string>> wanted;  // name@location
  std::map<std::string, PackedWant> packed;                            // name@location#layout
  for (size_t i = 0; i < graph_.phases.size() && i < plan_.phases.size(); ++i) {
    const Phase& phase = graph_.phases[i];
    for (const PlannedOp& op : plan_.phases[i].ops) {
      const Node* node = planned_node(phase, op.id);
      if (!node) throw plan_bug("names op " + op.id + ", not in the graph");
      // Only the op's own, unadapted call carries layouts (call_operands), so its indices are
      // the op's.
      for (const auto& call : call_operands(op.adaptations, *node, op.input_locations,
                                            op.output_locations, layout_tags(op))) {
        for (size_t k = 0; k < call.inputs.size(); ++k) {
          const Value* v = phase.value(call.inputs[k]);
          if (!v || !v->is_parameter()) continue;
          const std::string& loc = call.input_locations[k];
          if (!call.input_layouts[k].empty())
            packed.emplace(key_of(v->name, loc, call.input_layouts[k]),
                           PackedWant{v, loc, op.plugin, op.device, op.input_layouts[k]});
          else
            wanted.emplace(key_of(v->name, loc), std::make_pair(v, loc));
        }
      }
    }
  }
  for (const auto& [key, want] : packed)
    parameters_.emplace(
        key, pack(load, *want.value, want.location, want.plugin, want.device, want.layout));
  for (const auto& [key, want] : wanted) {
    const auto& [v, location] = want;
    auto fill = [&](void* dst) {
      if (auto e = v->kind == ValueKind::constant ? fill_constant(*v, dst) : load(*v, dst))
        throw *e;
    };
    if (location == kHostLocation && v->kind == ValueKind::weight && load.map)
      if (const void* p = load.map(*v);
          p && reinterpret_cast<uintptr_t>(p) % kMappedAlignment == 0) {
        Buffer b;
        b.data = const_cast<void*>(p);  // kernels only read weights
        b.bytes = v->bytes();
        b.location = location;
        b.mapped = true;
        parameters_.emplace(key, b);
        continue;
      }
    Buffer b = memory_.allocate(v->name, buffer_bytes(v->bytes()), location);
    b.bytes = v->bytes();
    parameters_.emplace(key, b);
    if (location == kHostLocation) {
      fill(b.data);
      continue;
    }
    std::vector<char> staging(size_t(v->bytes()));
    fill(staging.data());
    Buffer host{staging.data(), v->bytes(), kHostLocation};
    memory_.copy(host, b, v->bytes());
  }
}

Buffer Model::pack(const WeightLoader& load, const Value& v, const std::string& location,
                   const std::string& plugin_name, const std::string& device,
                   const WeightLayoutChoice& layout) {
  const Plugin* plugin = registry_.find(plugin_name);
  if (!plugin) throw plan_bug("packs " + v.name + " for plugin " + plugin_name + ", not loaded");
  const InventoryDevice* dev = memory_.inventory().find(device);
  if (!dev) throw plan_bug("packs " + v.name + " for device " + device + ", not present");
  const std::optional<uint32_t> index = plugin->device_index(dev->info);
  if (!index)
    throw plan_bug("packs " + v.name + " for " + device + ", not a device of " + plugin_name);
  // The stored bytes in host memory: where the file maps them, else read into staging.
  std::vector<char> staging;
  const void* src = load.map ? load.map(v) : nullptr;
  if (!src) {
    staging.resize(size_t(v.bytes()));
    if (auto e = load(v, staging.data())) throw *e;
    src = staging.data();
  }
  Buffer b =
      memory_.allocate(v.name + " (" + layout.name + ")", buffer_bytes(layout.bytes), location);
  b.bytes = layout.bytes;
  TensorDesc desc{v.dtype, v.shape, SY_MEMORY_HOST, 0};
  if (auto e = plugin->pack_weight(*index, layout.id, desc, src, b.data, uint64_t(layout.bytes))) {
    memory_.free(b);
    Error out = *e;
    out.message = "packing weight " + v.name + " as " + layout.name + ": " + out.message;
    throw out;
  }
  return b;
}

const Buffer& Model::parameter(const std::string& name, const std::string& location,
                               const std::string& layout) const {
  auto it = parameters_.find(key_of(name, location, layout));
  if (it == parameters_.end())
    throw plan_bug("reads weight " + name + " on " + location + ", which was never loaded there");
  return it->second;
}

std::map<std::string, int64_t> Model::allocated_bytes() const {
  std::map<std::string, int64_t> out;
  for (const auto& [key, b] : parameters_) out[b.location] += b.allocated;
  return out;
}

std::map<std::string, int64_t> Model::mapped_bytes() const {
  std::map<std::string, int64_t> out;
  for (const auto& [key, b] : parameters_)
    if (b.mapped) out[b.location] += b.bytes;
  return out;
}

std::map<std::string, int64_t> Model::memory_left() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return left_;
}

void Model::reserve(const std::map<std::string, int64_t>& bytes, const std::string& what) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [loc, need] : bytes) {
    auto it = left_.find(loc);
    if (it == left_.end() || need <= it->second) continue;
    throw Error(Errc::does_not_fit,
                what + " needs " + format_bytes(need) + " on " + loc + ", and " +
                    format_bytes(std::max<int64_t>(0, it->second)) +
                    " are left there (the plan's capacity less the weights and the contexts "
                    "already made)",
                loc);
  }
  for (const auto& [loc, need] : bytes)
    if (auto it = left_.find(loc); it != left_.end()) it->second -= need;
}

void Model::release(const std::map<std::string, int64_t>& bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [loc, n] : bytes)
    if (auto it = left_.find(loc); it != left_.end()) it->second += n;
}

}  // namespace sy
