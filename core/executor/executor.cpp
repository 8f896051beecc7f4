#include "core/executor/executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include <sys/mman.h>

#include "core/capability/vocabulary.hpp"

namespace sy {
namespace {

constexpr const char* kHost = "host";

// The process's resident anonymous memory (RssAnon of /proc/self/status), in bytes: what it
// holds in RAM that no file backs — allocated and touched, by anyone in the process.
int64_t resident_anonymous_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("RssAnon:", 0) == 0) return std::stoll(line.substr(8)) * 1024;
  return 0;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

float to_float(const void* p, sy_dtype dt, int64_t i) {
  if (dt == SY_DTYPE_F32) return static_cast<const float*>(p)[i];
  return sy_bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
}

sy_memory_kind memory_of(const std::string& location) {
  return location == kHost ? SY_MEMORY_HOST : SY_MEMORY_DEVICE;
}

// `e` with the op it happened in put in front of its message.
Error in_op(const Error& e, const std::string& op, const std::string& what) {
  Error out(e.code, what + ": " + e.message, "op " + op, e.hint);
  if (e.status) out.with_status(*e.status);
  return out;
}

// A plan that names something this session does not have: the planner's fault.
Error plan_bug(const std::string& what) {
  return Error(Errc::kernel_failed, "the plan " + what);
}

}  // namespace

struct Session::Impl {
  struct Buffer {
    void* data = nullptr;
    int64_t bytes = 0;
    std::string location;
    const Plugin* plugin = nullptr;  // device memory: the plugin that allocated it
    uint32_t device_index = 0;
    int64_t allocated = 0;  // bytes this buffer allocated; 0 for a view into an arena
  };
  struct CopyStep {
    Buffer *src, *dst;
    int64_t bytes;
  };
  // One kernel call of a step. An op the planner adapted takes more than one.
  struct PreparedOp {
    std::string id, timing_key;
    std::unique_ptr<PreparedKernel> kernel;
    std::vector<DLTensor> tensors;  // inputs then outputs
    std::vector<const DLTensor*> inputs, outputs;
    std::vector<CopyStep> copies_before;
  };
  struct PhaseRun {
    const Phase* phase = nullptr;
    std::vector<PreparedOp> ops;
    std::map<std::string, Buffer*> host_inputs;  // input values consumed from host memory
    Buffer* logits = nullptr;
    std::string logits_location;  // where this phase's head writes the logits
    StepProfile profile;
    std::map<std::string, std::pair<double, int64_t>> per_kind;
  };
  // What one kernel call reads and writes, and with which kernel.
  struct Call {
    std::string plugin, kernel, device;
    OpDesc op;
    std::vector<std::string> inputs, outputs;                    // value names
    std::vector<std::string> input_locations, output_locations;  // where they are
  };

  const Graph& graph;
  const Registry& registry;
  const Inventory& inventory;
  const MemoryPlan memory;                // the plan's layout: every activation's offset
  std::map<std::string, Buffer> arenas;   // location -> the activations of every phase
  std::map<std::string, Buffer> buffers;  // scope|name@location
  std::map<std::string, PhaseRun> phases;
  std::map<std::string, Value> added_values;  // phase|name: values the plan's adaptations add
  std::set<std::pair<const Plugin*, uint32_t>> devices;  // every (plugin, device) that runs work

  Impl(const Graph& g, const Registry& r, const Inventory& i, const MemoryPlan& m)
      : graph(g), registry(r), inventory(i), memory(m) {}

  ~Impl() {
    synchronize_all(true);
    phases.clear();  // kernels are released before the memory they may reference
    for (auto* owned : {&buffers, &arenas})
      for (auto& [key, b] : *owned) {
        if (!b.allocated) continue;
        if (b.plugin)
          b.plugin->free(b.device_index, b.data);
        else
          std::free(b.data);
      }
  }

  const Value& value(const Phase& phase, const std::string& name) const {
    if (const Value* v = phase.value(name)) return *v;
    auto it = added_values.find(phase.name + "|" + name);
    if (it == added_values.end()) throw plan_bug("names value " + name + ", not in the graph");
    return it->second;
  }

  // The plugin and its device index that own inventory device `id`, for allocation/copies.
  std::pair<const Plugin*, uint32_t> device_owner(const std::string& id) const {
    const InventoryDevice* dev = inventory.find(id);
    if (!dev) throw plan_bug("names device " + id + ", which this machine lacks");
    for (const auto& name : dev->plugins) {
      const Plugin* p = registry.find(name);
      if (!p || !p->has_device_memory()) continue;
      for (uint32_t k = 0; k < p->devices().size(); ++k)
        if (p->devices()[k].type == dev->info.type && p->devices()[k].id == dev->info.id)
          return {p, k};
    }
    throw plan_bug("puts a value on " + id + ", but no plugin can allocate memory there");
  }

  // Host memory for a value. Large buffers (weights, KV caches) are 2 MiB aligned, whole 2 MiB
  // pages (host_allocation_bytes, which the plan counts), and asked to be backed by transparent
  // huge pages: a decode step streams every weight once, and on 4 KiB pages that is one TLB
  // miss per page (65k pages per token for a 135M-parameter bf16 model).
  static void* host_alloc(size_t bytes) {
    if (bytes < size_t(kHostHugePage)) return std::aligned_alloc(64, bytes);
    void* p = std::aligned_alloc(size_t(kHostHugePage), bytes);
    if (p) ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: a refusal changes nothing
    return p;
  }

  // `bytes` of new memory at `location`; on the host, zeroed (every page: what the plan counts
  // is resident whether or not huge pages back it).
  Buffer allocate(const std::string& what, int64_t bytes, const std::string& location) {
    Buffer b;
    b.bytes = bytes;
    b.location = location;
    if (location == kHost) {
      const size_t size = size_t(host_allocation_bytes(bytes));
      b.data = host_alloc(size);
      if (!b.data)
        throw Error(Errc::device_out_of_memory,
                    "out of memory on host: " + std::to_string(size) + " bytes for " + what);
      std::memset(b.data, 0, size);
      b.allocated = int64_t(size);
    } else {
      auto [plugin, index] = device_owner(location);
      Expected<void*> data = plugin->alloc(index, uint64_t(bytes));
      if (!data)
        throw in_op(data.error(), what,
                    "allocating " + std::to_string(bytes) + " bytes on " + location);
      b.data = *data;
      b.plugin = plugin;
      b.device_index = index;
      b.allocated = bytes;
    }
    return b;
  }

  // The buffer of value `v` at `location`: its own allocation for a weight or a cache, else a
  // view at the plan's offset into the location's activation arena (planner/memory.hpp).
  Buffer& buffer(const std::string& scope, const Value& v, const std::string& location) {
    const std::string key = buffer_key(scope, v.name, location);
    auto it = buffers.find(key);
    if (it != buffers.end()) return it->second;
    if (scope.empty())
      return buffers.emplace(key, allocate(v.name, buffer_bytes(v.bytes()), location))
          .first->second;
    auto slot = memory.slots.find(key);
    if (slot == memory.slots.end() || slot->second.bytes < buffer_bytes(v.bytes()))
      throw plan_bug("has no activation slot for " + v.name + " in phase " + scope + " on " +
                     location);
    Buffer& arena = arena_at(location);
    if (slot->second.offset + slot->second.bytes > arena.bytes)
      throw plan_bug("puts " + v.name + " past the end of the arena on " + location);
    Buffer view = arena;
    view.data = static_cast<char*>(arena.data) + slot->second.offset;
    view.bytes = v.bytes();
    view.allocated = 0;
    return buffers.emplace(key, view).first->second;
  }

  Buffer& arena_at(const std::string& location) {
    auto it = arenas.find(location);
    if (it != arenas.end()) return it->second;
    const LocationMemory* m = memory.find(location);
    if (!m || m->activations <= 0) throw plan_bug("has no activation arena on " + location);
    return arenas.emplace(location, allocate("activations", m->activations, location))
        .first->second;
  }

  void copy(const Buffer& src, const Buffer& dst, int64_t bytes) {
    if (src.location == kHost && dst.location == kHost) {
      std::memcpy(dst.data, src.data, size_t(bytes));
      return;
    }
    const Buffer& dev = src.location == kHost ? dst : src;
    sy_copy_direction direction = src.location == kHost   ? SY_COPY_HOST_TO_DEVICE
                                  : dst.location == kHost ? SY_COPY_DEVICE_TO_HOST
                                                          : SY_COPY_DEVICE_TO_DEVICE;
    if (auto e = dev.plugin->copy(dev.device_index, direction, dst.data, src.data, uint64_t(bytes)))
      throw Error(e->code, "copy " + src.location + " -> " + dst.location + ": " + e->message)
          .with_status(e->status.value_or(SY_STATUS_INTERNAL));
  }

  // Waits for the enqueued work of every device (ABI 1.2 synchronize; a no-op for plugins whose
  // execute completes its work). `quiet` drops errors, for the destructor.
  void synchronize_all(bool quiet = false) {
    for (const auto& [plugin, index] : devices)
      if (auto e = plugin->synchronize(index); e && !quiet) throw *e;
  }

  DLDevice dl_device(const std::string& location) const {
    if (location == kHost) return {kDLCPU, 0};
    const InventoryDevice* dev = inventory.find(location);
    return {dev->info.type, dev->info.id};
  }

  // Free memory of every non-host device whose plugin reports it (ABI 1.1 memory_info).
  std::map<std::string, int64_t> free_memory() const {
    std::map<std::string, int64_t> out;
    for (const auto& dev : inventory.devices) {
      if (dev.info.memory_is_host) continue;
      for (const auto& name : dev.plugins)
        if (const Plugin* p = registry.find(name))
          for (uint32_t k = 0; k < p->devices().size(); ++k)
            if (p->devices()[k].type == dev.info.type && p->devices()[k].id == dev.info.id)
              if (auto m = p->memory_info(k); m && !out.count(dev.id))
                out[dev.id] = int64_t(m->free_bytes);
    }
    return out;
  }

  // The plugin, kernel index and device index a call names.
  struct Target {
    const Plugin* plugin;
    size_t kernel;
    uint32_t device;
  };
  Target target(const Call& c) const {
    const Plugin* plugin = registry.find(c.plugin);
    if (!plugin) throw plan_bug("names plugin " + c.plugin + ", which is not loaded");
    size_t kernel = 0;
    while (kernel < plugin->kernels().size() && plugin->kernels()[kernel].kernel != c.kernel)
      ++kernel;
    if (kernel == plugin->kernels().size())
      throw plan_bug("names kernel " + c.plugin + "/" + c.kernel + ", which the plugin lacks");
    const InventoryDevice* dev = inventory.find(c.device);
    if (!dev) throw plan_bug("names device " + c.device + ", which this machine lacks");
    uint32_t device = 0;
    while (device < plugin->devices().size() &&
           !(plugin->devices()[device].type == dev->info.type &&
             plugin->devices()[device].id == dev->info.id))
      ++device;
    return {plugin, kernel, device};
  }

  // Prepares one kernel call and binds its operands' buffers.
  PreparedOp prepare_call(const Phase& phase, const std::string& id, const Call& c) {
    Target t = target(c);
    Expected<std::unique_ptr<PreparedKernel>> r =
        prepare_kernel(*t.plugin, t.kernel, t.device, c.op);

    if (!r) throw in_op(r.error(), id, "prepare " + c.plugin + "/" + c.kernel);
    devices.insert({t.plugin, t.device});
    PreparedOp out;
    out.id = id;
    out.timing_key = std::string(sy_op_kind_name(c.op.op)) + " @ " + c.plugin;
    out.kernel = std::move(*r);
    const size_t n_in = c.inputs.size(), n = n_in + c.outputs.size();
    out.tensors.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const Value& v = value(phase, i < n_in ? c.inputs[i] : c.outputs[i - n_in]);
      const std::string& loc = i < n_in ? c.input_locations[i] : c.output_locations[i - n_in];
      DLTensor tensor{};
      tensor.data = buffer(buffer_scope(v, phase.name), v, loc).data;
      tensor.device = dl_device(loc);
      tensor.ndim = int(v.shape.size());
      tensor.dtype = sy_dtype_to_dl(v.dtype);
      tensor.shape = const_cast<int64_t*>(v.shape.data());
      out.tensors.push_back(tensor);
    }
    for (size_t i = 0; i < n; ++i) (i < n_in ? out.inputs : out.outputs).push_back(&out.tensors[i]);
    return out;
  }

  static void set_memory(OpDesc& op, const std::vector<std::string>& in,
                         const std::vector<std::string>& out) {
    for (size_t i = 0; i < op.inputs.size(); ++i) op.inputs[i].memory = memory_of(in[i]);
    for (size_t i = 0; i < op.outputs.size(); ++i) op.outputs[i].memory = memory_of(out[i]);
  }

  // The calls of one planned op: the op itself, or its adapted kernel and the kernels that
  // complete it (adaptation.hpp), in order.
  std::vector<Call> calls_of(const Phase& phase, const PlannedOp& planned, const Node& node) {
    const OpDesc op = op_desc(phase, node);
    const std::vector<AdaptedOperands> operands =
        call_operands(planned.adaptations, node, planned.input_locations, planned.output_locations);
    auto call = [](const std::string& plugin, const std::string& kernel, const std::string& device,
                   OpDesc desc, const AdaptedOperands& o) {
      set_memory(desc, o.input_locations, o.output_locations);
      return Call{plugin,
                  kernel,
                  device,
                  std::move(desc),
                  o.inputs,
                  o.outputs,
                  o.input_locations,
                  o.output_locations};
    };
    OpDesc own = op;
    for (const auto& a : planned.adaptations) {
      for (const auto& v : adaptation_values(a, phase, node))
        added_values.emplace(phase.name + "|" + v.name, v);
      own = adapted_op(a.kind, own);
    }
    std::vector<Call> calls{call(planned.plugin, planned.kernel, planned.device, own, operands[0])};
    for (size_t i = 0; i < planned.adaptations.size(); ++i) {
      const Adaptation& a = planned.adaptations[i];
      calls.push_back(
          call(a.plugin, a.kernel, a.device, completing_op(a.kind, op), operands[i + 1]));
    }
    return calls;
  }

  std::vector<PreparedOp> prepare(const Phase& phase, const PhasePlan& pp,
                                  const PlannedOp& planned) {
    const Node* node = planned_node(phase, planned.id);
    if (!node) throw plan_bug("names op " + planned.id + ", not in the graph");
    std::vector<PreparedOp> out;
    for (const Call& c : calls_of(phase, planned, *node))
      out.push_back(prepare_call(phase, planned.id, c));
    for (const auto& c : pp.copies) {  // the plan's copies come before the op's first call
      if (c.before_op != planned.id) continue;
      const Value& v = value(phase, c.value);
      std::string scope = buffer_scope(v, phase.name);
      out.front().copies_before.push_back(
          {&buffer(scope, v, c.from), &buffer(scope, v, c.to), c.bytes});
    }
    return out;
  }

  // A weight from the loader; a constant from the graph's own elements, in its dtype.
  static std::optional<Error> fill(const Value& v, void* dst, const WeightLoader& load) {
    if (v.kind != ValueKind::constant) return load(v, dst);
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

  // Loads every weight and constant buffer once (shared by the phases), wherever it lives.
  void load_weights(const WeightLoader& load) {
    std::map<std::string, const Value*> weights;
    for (const auto& phase : graph.phases)
      for (const auto& v : phase.values)
        if (v.is_parameter()) weights.emplace(v.name, &v);
    for (auto& [key, b] : buffers) {
      if (key[0] != '|') continue;  // phase-scoped: not a weight
      std::string name = key.substr(1, key.rfind('@') - 1);
      auto it = weights.find(name);
      if (it == weights.end()) continue;
      const Value& v = *it->second;
      if (b.location == kHost) {
        if (auto e = fill(v, b.data, load)) throw *e;
        continue;
      }
      std::vector<char> staging(static_cast<size_t>(v.bytes()));
      if (auto e = fill(v, staging.data(), load)) throw *e;
      Buffer host{staging.data(), v.bytes(), kHost, nullptr, 0};
      copy(host, b, v.bytes());
    }
  }

  void run_phase(PhaseRun& run) {
    auto t0 = std::chrono::steady_clock::now();
    double kernels = 0, copies = 0;
    for (auto& op : run.ops) {
      auto c0 = std::chrono::steady_clock::now();
      for (const auto& c : op.copies_before) copy(*c.src, *c.dst, c.bytes);
      copies += ms_since(c0);
      auto k0 = std::chrono::steady_clock::now();
      std::optional<Error> err = op.kernel->execute(op.inputs, op.outputs);
      double ms = ms_since(k0);
      if (err) throw failed(*err, op);
      kernels += ms;
      auto& slot = run.per_kind[op.timing_key];
      slot.first += ms;
      slot.second += 1;
    }
    synchronize_all();
    StepProfile& p = run.profile;
    p.total_ms += ms_since(t0);
    p.kernels_ms += kernels;
    p.copies_ms += copies;
  }

  static Error failed(const Error& e, const PreparedOp& op) {
    std::string what = "kernel failed on " + op.id + " (" + op.timing_key + ")";
    Error out = in_op(e, op.id, what);
    if (e.code == Errc::kernel_failed)
      out.message += " — a bug of the planner or of the plugin's check; please report it";
    return out;
  }

  // Finds, once, the buffers a step writes its inputs into and reads its logits from, so a
  // step allocates nothing.
  void bind_io(PhaseRun& run) {
    for (const auto& v : run.phase->values)
      if (v.kind == ValueKind::input)
        if (auto it = buffers.find(run.phase->name + "|" + v.name + "@" + kHost);
            it != buffers.end())
          run.host_inputs[v.name] = &it->second;
    if (const Value* v = run.phase->value("logits")) {
      run.logits =
          &buffer(run.phase->name, *v, run.logits_location.empty() ? kHost : run.logits_location);
      staging.resize(size_t(v->bytes()));
      logits_out.resize(size_t(v->shape.back()));
    }
  }

  // Writes input `name`; the entries `data` does not cover (another batch row's) are zeroed,
  // since the arena gives the input's bytes to other values between steps.
  void set_input(PhaseRun& run, const char* name, const int64_t* data, size_t n) {
    auto it = run.host_inputs.find(name);
    if (it == run.host_inputs.end()) return;  // not consumed by any op
    const size_t bytes = size_t(it->second->bytes), written = std::min(n * 8, bytes);
    std::memcpy(it->second->data, data, written);
    std::memset(static_cast<char*>(it->second->data) + written, 0, bytes - written);
  }

  // The logits of the step's last position, as float.
  const std::vector<float>& last_logits(PhaseRun& run) {
    if (!run.logits) throw plan_bug("runs a graph that has no 'logits' value");
    const Value* v = run.phase->value("logits");
    Buffer host{staging.data(), v->bytes(), kHost, nullptr, 0};
    copy(*run.logits, host, v->bytes());
    int64_t vocab = v->shape.back(), rows = v->bytes() / sy_dtype_size(v->dtype) / vocab;
    for (int64_t i = 0; i < vocab; ++i)
      logits_out[size_t(i)] = to_float(staging.data(), v->dtype, (rows - 1) * vocab + i);
    staged = v;
    return logits_out;
  }

  std::vector<char> staging;      // logits as stored, host copy
  const Value* staged = nullptr;  // the logits value `staging` holds
  std::vector<float> logits_out;  // the last position's logits, as float
};

Session::Session(const Graph& graph, const Plan& plan, const Registry& registry,
                 const Inventory& inventory, const WeightLoader& load)
    : impl_(std::make_unique<Impl>(graph, registry, inventory, plan.memory)) {
  if (!plan.ok()) throw *plan.error;
  const std::map<std::string, int64_t> free_before = impl_->free_memory();
  const int64_t resident_before = resident_anonymous_bytes();
  for (size_t i = 0; i < graph.phases.size() && i < plan.phases.size(); ++i) {
    const Phase& phase = graph.phases[i];
    Impl::PhaseRun& run = impl_->phases[phase.name];
    run.phase = &phase;
    for (const auto& planned : plan.phases[i].ops) {
      for (auto& op : impl_->prepare(phase, plan.phases[i], planned))
        run.ops.push_back(std::move(op));
      for (size_t o = 0; o < planned.output_locations.size(); ++o)
        if (const Node* n = planned_node(phase, planned.id); n && n->outputs[o] == "logits")
          run.logits_location = planned.output_locations[o];
    }
    for (const auto& v : phase.values)
      if (v.kind == ValueKind::kv_cache)
        context_ = std::max(context_, v.shape.size() > 1 ? v.shape[1] : 0);
  }
  impl_->load_weights(load);
  for (auto& [name, run] : impl_->phases) impl_->bind_io(run);
  for (const auto& [loc, after] : impl_->free_memory())
    if (auto it = free_before.find(loc); it != free_before.end())
      free_drop_[loc] = it->second - after;
  resident_growth_ = resident_anonymous_bytes() - resident_before;
}

Session::~Session() = default;

const std::vector<float>& Session::prefill(const std::vector<int64_t>& tokens) {
  Impl::PhaseRun& run = impl_->phases.at("prefill");
  const Value* planned = run.phase->value("tokens");
  const size_t length = planned ? size_t(planned->bytes() / 8) : tokens.size();
  if (tokens.empty() || tokens.size() > length)
    throw Error(Errc::prompt_too_long, "the prompt has " + std::to_string(tokens.size()) +
                                           " tokens; the plan's prefill takes 1 to " +
                                           std::to_string(length));
  if (tokens.size() < length) {
    // The prefill phase's shapes are the plan's (and its head reads the last row only): a
    // shorter prompt goes through the decode phase, one token at a time, from position 0.
    position_ = 0;
    const std::vector<float>* logits = nullptr;
    for (int64_t t : tokens) logits = &decode(t);
    return *logits;
  }
  std::vector<int64_t> positions(length);
  for (size_t i = 0; i < length; ++i) positions[i] = int64_t(i);
  const int64_t zero = 0;
  impl_->set_input(run, "tokens", tokens.data(), tokens.size());
  impl_->set_input(run, "positions", positions.data(), positions.size());
  impl_->set_input(run, "cache_position", &zero, 1);
  impl_->run_phase(run);
  position_ = int64_t(tokens.size());
  return impl_->last_logits(run);
}

const std::vector<float>& Session::decode(int64_t token) {
  if (position_ >= context_)
    throw Error(Errc::prompt_too_long,
                "the context of " + std::to_string(context_) + " tokens is full");
  Impl::PhaseRun& run = impl_->phases.at("decode");  // short key: no allocation
  const int64_t kv_len = position_ + 1;
  impl_->set_input(run, "tokens", &token, 1);
  impl_->set_input(run, "positions", &position_, 1);
  impl_->set_input(run, "cache_position", &position_, 1);
  impl_->set_input(run, "kv_len", &kv_len, 1);
  impl_->run_phase(run);
  ++position_;
  return impl_->last_logits(run);
}

void Session::rewind(int64_t position) {
  if (position < 0 || position > position_)
    throw Error(Errc::prompt_too_long, "cannot rewind to position " + std::to_string(position) +
                                           ": the session holds positions 0 to " +
                                           std::to_string(position_));
  position_ = position;
}

std::vector<float> Session::every_position_logits() const {
  const Value* v = impl_->staged;
  if (!v) return {};
  std::vector<float> out(size_t(v->bytes() / sy_dtype_size(v->dtype)));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = to_float(impl_->staging.data(), v->dtype, int64_t(i));
  return out;
}

const StepProfile& Session::profile(const std::string& phase) const {
  Impl::PhaseRun& run = impl_->phases.at(phase);
  run.profile.per_kind.clear();
  for (const auto& [key, v] : run.per_kind)
    run.profile.per_kind.push_back({key, v.first, v.second});
  return run.profile;
}

std::map<std::string, int64_t> Session::memory_bytes() const {
  std::map<std::string, int64_t> out;
  for (const auto* owned : {&impl_->buffers, &impl_->arenas})
    for (const auto& [key, b] : *owned) out[b.location] += b.allocated;
  return out;
}

}  // namespace sy
