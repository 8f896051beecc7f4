#include "core/executor/executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "core/capability/vocabulary.hpp"

namespace sy {
namespace {

constexpr const char* kHost = "host";
constexpr const char* kSinksViaLse = "sinks applied from the kernel's LSE";

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

float to_float(const void* p, sy_dtype dt, int64_t i) {
  if (dt == SY_DTYPE_F32) return static_cast<const float*>(p)[i];
  return sy_bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
}

// Which values live once for the whole session (weights, caches) and which per phase.
std::string scope_of(const Value& v, const std::string& phase) {
  return v.kind == ValueKind::weight || v.kind == ValueKind::kv_cache ? "" : phase;
}

}  // namespace

struct Session::Impl {
  struct Buffer {
    void* data = nullptr;
    int64_t bytes = 0;
    std::string location;
    const Plugin* plugin = nullptr;  // device memory: the plugin that allocated it
    uint32_t device_index = 0;
  };
  struct CopyStep {
    Buffer *src, *dst;
    int64_t bytes;
  };
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
    StepProfile profile;
    std::map<std::string, std::pair<double, int64_t>> per_kind;
  };

  const Graph& graph;
  const Registry& registry;
  const Inventory& inventory;
  std::map<std::string, Buffer> buffers;  // scope|name@location
  std::map<std::string, PhaseRun> phases;
  std::string logits_location;

  Impl(const Graph& g, const Registry& r, const Inventory& i)
      : graph(g), registry(r), inventory(i) {}

  ~Impl() {
    phases.clear();  // kernels are released before the memory they may reference
    for (auto& [key, b] : buffers) {
      if (b.plugin && b.plugin->api().free_memory)
        b.plugin->api().free_memory(b.plugin->instance(), b.device_index, b.data);
      else
        std::free(b.data);
    }
  }

  // The plugin and its device index that own inventory device `id`, for allocation/copies.
  std::pair<const Plugin*, uint32_t> device_owner(const std::string& id) const {
    const InventoryDevice* dev = inventory.find(id);
    if (!dev) throw RunError("SY301", "the plan names device " + id + ", which this machine lacks");
    for (const auto& name : dev->plugins) {
      const Plugin* p = registry.find(name);
      if (!p || !p->api().alloc || !p->api().copy) continue;
      for (uint32_t k = 0; k < p->devices().size(); ++k)
        if (p->devices()[k].type == dev->info.type && p->devices()[k].id == dev->info.id)
          return {p, k};
    }
    throw RunError("SY301", "no plugin can allocate memory on " + id);
  }

  Buffer& buffer(const std::string& scope, const Value& v, const std::string& location) {
    std::string key = scope + "|" + v.name + "@" + location;
    auto it = buffers.find(key);
    if (it != buffers.end()) return it->second;
    Buffer b;
    b.bytes = v.bytes();
    b.location = location;
    size_t rounded = (size_t(b.bytes) + 63) / 64 * 64 + 64;
    if (location == kHost) {
      b.data = std::aligned_alloc(64, rounded);
      if (!b.data) throw RunError("SY301", "out of host memory for " + v.name);
      std::memset(b.data, 0, rounded);
    } else {
      auto [plugin, index] = device_owner(location);
      sy_alloc_args args{};
      args.struct_size = sizeof(args);
      args.plugin = plugin->instance();
      args.device_index = index;
      args.size_bytes = rounded;
      ErrorText err;
      int status = plugin->api().alloc(&args, err.buffer());
      if (status != SY_STATUS_OK)
        throw RunError("SY301", "allocating " + v.name + " on " + location + ": " +
                                    describe_status(status, err));
      b.data = args.data;
      b.plugin = plugin;
      b.device_index = index;
    }
    return buffers.emplace(key, b).first->second;
  }

  void copy(const Buffer& src, const Buffer& dst, int64_t bytes) {
    if (src.location == kHost && dst.location == kHost) {
      std::memcpy(dst.data, src.data, size_t(bytes));
      return;
    }
    const Buffer& dev = src.location == kHost ? dst : src;
    sy_copy_args args{};
    args.struct_size = sizeof(args);
    args.plugin = dev.plugin->instance();
    args.device_index = dev.device_index;
    args.direction = src.location == kHost   ? SY_COPY_HOST_TO_DEVICE
                     : dst.location == kHost ? SY_COPY_DEVICE_TO_HOST
                                             : SY_COPY_DEVICE_TO_DEVICE;
    args.dst = dst.data;
    args.src = src.data;
    args.size_bytes = uint64_t(bytes);
    ErrorText err;
    int status = dev.plugin->api().copy(&args, err.buffer());
    if (status != SY_STATUS_OK)
      throw RunError("SY301", "copy " + src.location + " -> " + dst.location +
                                  " failed: " + describe_status(status, err));
  }

  DLDevice dl_device(const std::string& location) const {
    if (location == kHost) return {kDLCPU, 0};
    const InventoryDevice* dev = inventory.find(location);
    return {dev->info.type, dev->info.id};
  }

  static const Node* node_of(const Phase& phase, const std::string& id) {
    if (const Node* n = phase.node(id)) return n;
    for (const auto& f : phase.fusions)
      if (f.fused.id == id) return &f.fused;
    return nullptr;
  }

  PreparedOp prepare(const Phase& phase, const PhasePlan& pp, const PlannedOp& planned) {
    const Node* node = node_of(phase, planned.id);
    if (!node) throw RunError("SY301", "the plan names op " + planned.id + ", not in the graph");
    if (planned.rule.find(kSinksViaLse) != std::string::npos)
      throw RunError("SY301", "op " + planned.id + ": " + planned.plugin + "/" + planned.kernel +
                                  " serves sinks through LSE, which this executor cannot "
                                  "apply yet; plan with a kernel that has native sinks");
    const Plugin* plugin = registry.find(planned.plugin);
    if (!plugin) throw RunError("SY301", "plugin " + planned.plugin + " is not loaded");
    size_t kernel = 0;
    while (kernel < plugin->kernels().size() && plugin->kernels()[kernel].kernel != planned.kernel)
      ++kernel;
    const InventoryDevice* dev = inventory.find(planned.device);
    uint32_t device_index = 0;
    while (dev && device_index < plugin->devices().size() &&
           !(plugin->devices()[device_index].type == dev->info.type &&
             plugin->devices()[device_index].id == dev->info.id))
      ++device_index;
    OpDesc op = op_desc(phase, *node);
    for (size_t i = 0; i < op.inputs.size(); ++i)
      op.inputs[i].memory = planned.input_locations[i] == kHost ? SY_MEMORY_HOST : SY_MEMORY_DEVICE;
    for (size_t i = 0; i < op.outputs.size(); ++i)
      op.outputs[i].memory =
          planned.output_locations[i] == kHost ? SY_MEMORY_HOST : SY_MEMORY_DEVICE;
    PrepareResult r = prepare_kernel(*plugin, kernel, device_index, op);
    if (!r.kernel)
      throw RunError("SY301", "kernel " + planned.plugin + "/" + planned.kernel + " failed on " +
                                  planned.id + " (prepare): " + r.error);
    PreparedOp out;
    out.id = planned.id;
    out.timing_key = std::string(sy_op_kind_name(node->op)) + " @ " + planned.plugin;
    out.kernel = std::move(r.kernel);
    std::vector<std::pair<const std::string*, const std::string*>> operands;
    for (size_t i = 0; i < node->inputs.size(); ++i)
      operands.emplace_back(&node->inputs[i], &planned.input_locations[i]);
    for (size_t i = 0; i < node->outputs.size(); ++i)
      operands.emplace_back(&node->outputs[i], &planned.output_locations[i]);
    out.tensors.reserve(operands.size());
    for (const auto& [name, loc] : operands) {
      const Value* v = phase.value(*name);
      DLTensor t{};
      t.data = buffer(scope_of(*v, phase.name), *v, *loc).data;
      t.device = dl_device(*loc);
      t.ndim = int(v->shape.size());
      t.dtype = sy_dtype_to_dl(v->dtype);
      t.shape = const_cast<int64_t*>(v->shape.data());
      out.tensors.push_back(t);
    }
    for (size_t i = 0; i < out.tensors.size(); ++i)
      (i < node->inputs.size() ? out.inputs : out.outputs).push_back(&out.tensors[i]);
    for (const auto& c : pp.copies) {
      if (c.before_op != planned.id) continue;
      const Value* v = phase.value(c.value);
      std::string scope = scope_of(*v, phase.name);
      out.copies_before.push_back({&buffer(scope, *v, c.from), &buffer(scope, *v, c.to), c.bytes});
    }
    return out;
  }

  // Loads every weight buffer once (weights are shared by the phases), wherever it lives.
  void load_weights(const WeightLoader& load) {
    std::map<std::string, const Value*> weights;
    for (const auto& phase : graph.phases)
      for (const auto& v : phase.values)
        if (v.kind == ValueKind::weight) weights.emplace(v.name, &v);
    for (auto& [key, b] : buffers) {
      if (key[0] != '|') continue;  // phase-scoped: not a weight
      std::string name = key.substr(1, key.rfind('@') - 1);
      auto it = weights.find(name);
      if (it == weights.end()) continue;
      const Value& v = *it->second;
      if (b.location == kHost) {
        if (std::string err = load(v, b.data); !err.empty()) throw RunError("SY302", err);
        continue;
      }
      std::vector<char> staging(static_cast<size_t>(v.bytes()));
      if (std::string err = load(v, staging.data()); !err.empty()) throw RunError("SY302", err);
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
      std::string err = op.kernel->execute(op.inputs, op.outputs);
      double ms = ms_since(k0);
      if (!err.empty())
        throw RunError("SY301", "kernel failed on " + op.id + " (" + op.timing_key + "): " + err +
                                    " — a bug of the planner or of the plugin's check; please "
                                    "report it");
      kernels += ms;
      auto& slot = run.per_kind[op.timing_key];
      slot.first += ms;
      slot.second += 1;
    }
    StepProfile& p = run.profile;
    p.total_ms += ms_since(t0);
    p.kernels_ms += kernels;
    p.copies_ms += copies;
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
      run.logits = &buffer(run.phase->name, *v, logits_location.empty() ? kHost : logits_location);
      staging.resize(size_t(v->bytes()));
      logits_out.resize(size_t(v->shape.back()));
    }
  }

  void set_input(PhaseRun& run, const char* name, const int64_t* data, size_t n) {
    auto it = run.host_inputs.find(name);
    if (it == run.host_inputs.end()) return;  // not consumed by any op
    std::memcpy(it->second->data, data, std::min(n * 8, size_t(it->second->bytes)));
  }

  const std::vector<float>& last_logits(PhaseRun& run) {
    if (!run.logits) throw RunError("SY301", "the graph has no 'logits' value");
    const Value* v = run.phase->value("logits");
    Buffer host{staging.data(), v->bytes(), kHost, nullptr, 0};
    copy(*run.logits, host, v->bytes());
    int64_t vocab = v->shape.back(), rows = v->bytes() / sy_dtype_size(v->dtype) / vocab;
    for (int64_t i = 0; i < vocab; ++i)
      logits_out[size_t(i)] = to_float(staging.data(), v->dtype, (rows - 1) * vocab + i);
    return logits_out;
  }

  std::vector<char> staging;      // logits as stored, host copy
  std::vector<float> logits_out;  // the last position's logits, as float
};

Session::Session(const Graph& graph, const Plan& plan, const Registry& registry,
                 const Inventory& inventory, const WeightLoader& load)
    : impl_(std::make_unique<Impl>(graph, registry, inventory)) {
  if (!plan.ok()) throw RunError(plan.error->code, plan.error->message);
  for (size_t i = 0; i < graph.phases.size() && i < plan.phases.size(); ++i) {
    const Phase& phase = graph.phases[i];
    Impl::PhaseRun& run = impl_->phases[phase.name];
    run.phase = &phase;
    for (const auto& planned : plan.phases[i].ops) {
      run.ops.push_back(impl_->prepare(phase, plan.phases[i], planned));
      for (size_t o = 0; o < planned.output_locations.size(); ++o)
        if (const Node* n = Impl::node_of(phase, planned.id); n && n->outputs[o] == "logits")
          impl_->logits_location = planned.output_locations[o];
    }
    for (const auto& v : phase.values)
      if (v.kind == ValueKind::kv_cache)
        context_ = std::max(context_, v.shape.size() > 1 ? v.shape[1] : 0);
  }
  impl_->load_weights(load);
  for (auto& [name, run] : impl_->phases) impl_->bind_io(run);
}

Session::~Session() = default;

const std::vector<float>& Session::prefill(const std::vector<int64_t>& tokens) {
  Impl::PhaseRun& run = impl_->phases.at("prefill");
  std::vector<int64_t> positions(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) positions[i] = int64_t(i);
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
    throw RunError("SY304", "the context of " + std::to_string(context_) + " tokens is full");
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

const StepProfile& Session::profile(const std::string& phase) const {
  Impl::PhaseRun& run = impl_->phases.at(phase);
  run.profile.per_kind.clear();
  for (const auto& [key, v] : run.per_kind)
    run.profile.per_kind.push_back({key, v.first, v.second});
  return run.profile;
}

std::map<std::string, int64_t> Session::memory_bytes() const {
  std::map<std::string, int64_t> out;
  for (const auto& [key, b] : impl_->buffers) out[b.location] += b.bytes;
  return out;
}

}  // namespace sy
