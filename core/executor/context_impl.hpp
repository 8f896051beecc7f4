// The inside of a Context (context.hpp), shared by context.cpp (making it, its sequences) and
// context_step.cpp (running a step). Internal to executor/.
#pragma once

#include <chrono>
#include <cstring>
#include <set>
#include <tuple>

#include "core/capability/vocabulary.hpp"
#include "core/executor/context.hpp"
#include "core/plugin/kernel.hpp"
#include "core/plugin/segment.hpp"

namespace sy {
namespace context_detail {

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

inline float to_float(const void* p, sy_dtype dt, int64_t i) {
  if (dt == SY_DTYPE_F32) return static_cast<const float*>(p)[i];
  return sy_bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
}

inline sy_memory_kind memory_of(const std::string& location) {
  return location == kHostLocation ? SY_MEMORY_HOST : SY_MEMORY_DEVICE;
}

// `e` with the op it happened in put in front of its message.
inline Error in_op(const Error& e, const std::string& op, const std::string& what) {
  Error out(e.code, what + ": " + e.message, "op " + op, e.hint);
  if (e.status) out.with_status(*e.status);
  return out;
}

inline Error bad_batch(const std::string& what) {
  return Error(Errc::bad_batch, "batch: " + what);
}

}  // namespace context_detail

struct Context::Impl {
  using clock = std::chrono::steady_clock;
  // One sequence's tokens in a batch: [first, first + count).
  struct Group {
    SeqId seq;
    size_t first, count;
  };
  // A step's scratch, reused: a decode step allocates nothing once these have grown.
  struct StepScratch {
    std::vector<Group> groups;
    std::vector<KvBlocks::Grow> grows;
    KvBlocks::Reservation reservation;
    std::vector<int64_t> tokens, positions, slots, starts, lens, blocks_of, rows;
  } scratch;
  // One kernel call of a step. An op the planner adapted takes more than one.
  struct PreparedOp {
    std::string id, timing_key;
    std::unique_ptr<PreparedKernel> kernel;
    std::vector<DLTensor> tensors;  // inputs then outputs
    std::vector<const DLTensor*> inputs, outputs;
    std::vector<std::tuple<const Buffer*, const Buffer*, const Value*>> copies_before;
  };
  // A segment of the plan handed to its plugin (segment.hpp): the tensor table every step
  // passes, and the copies the host makes before it (those that are not its uploads).
  struct SegmentRun {
    std::string timing_key;
    std::unique_ptr<PreparedSegment> segment;
    std::vector<DLTensor> tensors;
    std::vector<const DLTensor*> table;
    std::vector<std::tuple<const Buffer*, const Buffer*, const Value*>> copies_before;
  };
  // What a phase runs, in the plan's order: one segment, or calls one by one.
  struct Unit {
    std::unique_ptr<SegmentRun> segment;
    std::vector<PreparedOp> ops;
  };
  struct PhaseRun {
    const Phase* phase = nullptr;
    std::vector<Unit> units;
    std::vector<SegmentForm> forms;
    std::map<ValueRole, Buffer*> inputs;  // the host buffers a step writes, by role
    const Value* logits = nullptr;
    Buffer* logits_buffer = nullptr;
    const Value* greedy = nullptr;  // paged: the greedy_ids beside the logits
    Buffer* greedy_buffer = nullptr;
    StepProfile profile;
    std::map<std::string, std::pair<double, int64_t>> per_kind;
  };
  // What one kernel call reads and writes, and with which kernel.
  struct Call {
    std::string plugin, kernel, device;
    OpDesc op;
    std::vector<std::string> inputs, outputs;
    std::vector<std::string> input_locations, output_locations;
    std::vector<std::string> input_layouts;  // "" as stored, else a packed layout's tag
  };

  const Model& model;
  const Memory& memory;
  const int64_t blocks;
  const bool time_each_op;               // ContextOptions::time_each_op: no segment handed over
  std::map<std::string, Buffer> arenas;  // location -> the activations of every phase
  std::map<std::string, Buffer> caches;  // name@location: KV pools or contiguous caches
  std::map<std::string, Buffer> views;   // phase|name@location: activations in the arena
  std::map<std::string, std::vector<int64_t>> shapes;  // scope|name: the extents kernels see
  std::vector<std::pair<int64_t*, StepExtent>> dynamic;
  std::map<std::string, PhaseRun> phases;
  std::map<std::string, Value> added_values;  // phase|name: values the plan's adaptations add
  std::set<std::pair<const Plugin*, uint32_t>> devices;
  std::map<std::string, int64_t> reserved;  // what this context took from the model's memory
  std::vector<float> logits_out;            // [rows, vocab] of the last step
  std::vector<int64_t> greedy_out;          // [rows] of the last step
  std::vector<char> staging;
  // The last paged step's outputs, read when first asked for: its logits rows and greedy ids.
  struct PendingOutputs {
    PhaseRun* run = nullptr;
    int64_t rows = 0;
    bool logits_read = false, ids_read = false;
  } pending;

  Impl(const Model& m, int64_t pool_blocks, bool each_op)
      : model(m), memory(m.memory()), blocks(pool_blocks), time_each_op(each_op) {}

  ~Impl() {
    synchronize_all(true);
    phases.clear();  // kernels are released before the memory they may reference
    for (auto* owned : {&caches, &arenas})
      for (auto& [key, b] : *owned) memory.free(b);
    model.release(reserved);
  }

  const Graph& graph() const { return model.graph(); }

  const Value& value(const Phase& phase, const std::string& name) const {
    if (const Value* v = phase.value(name)) return *v;
    auto it = added_values.find(phase.name + "|" + name);
    if (it == added_values.end()) throw plan_bug("names value " + name + ", not in the graph");
    return it->second;
  }

  // What this context allocates, per location: the arena, the kernels' workspace and the KV
  // memory (paged: the pools at this context's blocks; contiguous: the plan's caches).
  std::map<std::string, int64_t> needs() const {
    const bool paged = graph().bounds.kv_layout == KvLayout::paged;
    std::map<std::string, int64_t> out;
    for (const auto& l : model.plan().memory.locations)
      out[l.location] += l.activations + l.workspace + (paged ? 0 : l.kv_cache);
    if (paged)
      for (const auto& [loc, bytes] : pool_needs()) out[loc] += bytes;
    return out;
  }
  std::map<std::string, int64_t> pool_needs() const {
    std::map<std::string, int64_t> out;
    std::set<std::string> seen;
    for (const PhasePlan& pp : model.plan().phases)
      for (const auto& [name, loc] : pp.kv_caches) {
        const Value* v = graph().phases.front().value(name);
        if (!v || !is_kv_pool(*v) || !seen.insert(name + "@" + loc).second) continue;
        out[loc] += pool_allocation_bytes(*v, blocks, loc == kHostLocation);
      }
    return out;
  }

  // The buffer of value `v` at `location`: a weight of the model, this context's cache, or a
  // view at the plan's offset into the location's arena (planner/memory.hpp).
  Buffer& buffer(const std::string& phase, const Value& v, const std::string& location,
                 const std::string& layout = "") {
    if (v.is_parameter()) return const_cast<Buffer&>(model.parameter(v.name, location, layout));
    if (v.kind == ValueKind::kv_cache) return cache(v, location);
    const std::string key = buffer_key(phase, v.name, location);
    if (auto it = views.find(key); it != views.end()) return it->second;
    const auto& slots = model.plan().memory.slots;
    auto slot = slots.find(key);
    if (slot == slots.end() || slot->second.bytes < buffer_bytes(v.bytes()))
      throw plan_bug("has no activation slot for " + v.name + " in phase " + phase + " on " +
                     location);
    Buffer& arena = arena_at(location);
    if (slot->second.offset + slot->second.bytes > arena.bytes)
      throw plan_bug("puts " + v.name + " past the end of the arena on " + location);
    Buffer view = arena;
    view.data = static_cast<char*>(arena.data) + slot->second.offset;
    view.bytes = v.bytes();
    view.allocated = 0;
    return views.emplace(key, view).first->second;
  }

  Buffer& cache(const Value& v, const std::string& location) {
    const std::string key = v.name + "@" + location;
    if (auto it = caches.find(key); it != caches.end()) return it->second;
    // A paged pool is never zeroed (attention reads no row past a sequence's length); a
    // contiguous cache is, as before ABI 1.5.
    const bool pool = is_kv_pool(v);
    const int64_t bytes = pool ? pool_allocation_bytes(v, blocks, false) : buffer_bytes(v.bytes());
    Buffer b = memory.allocate(v.name, bytes, location, !pool);
    b.bytes = pool ? v.bytes() / v.shape[0] * blocks : v.bytes();
    return caches.emplace(key, b).first->second;
  }

  Buffer& arena_at(const std::string& location) {
    if (auto it = arenas.find(location); it != arenas.end()) return it->second;
    const LocationMemory* m = model.plan().memory.find(location);
    if (!m || m->activations <= 0) throw plan_bug("has no activation arena on " + location);
    return arenas.emplace(location, memory.allocate("activations", m->activations, location))
        .first->second;
  }

  // The extents kernels see for `v`: one array per value, which each step updates where the
  // value varies (every DLTensor of the value points at it).
  int64_t* shape_of(const std::string& phase, const Value& v) {
    const std::string key = buffer_scope(v, phase) + "|" + v.name;
    auto [it, added] = shapes.try_emplace(key, v.shape);
    if (added && v.dynamic.axis >= 0) {
      int64_t* extent = &it->second[size_t(v.dynamic.axis)];
      if (v.dynamic.extent == StepExtent::pool_blocks)
        *extent = blocks;
      else
        dynamic.emplace_back(extent, v.dynamic.extent);
    }
    return it->second.data();
  }

  void set_extents(int64_t tokens, int64_t sequences, int64_t outputs) {
    for (auto& [extent, kind] : dynamic) switch (kind) {
        case StepExtent::tokens: *extent = tokens; break;
        case StepExtent::sequences: *extent = sequences; break;
        case StepExtent::sequences_plus_one: *extent = sequences + 1; break;
        case StepExtent::outputs: *extent = outputs; break;
        default: break;
      }
  }

  // The plugin, kernel index and device index a call names.
  struct Target {
    const Plugin* plugin;
    size_t kernel;
    uint32_t device;
  };
  Target target(const Call& c) const {
    const Plugin* plugin = memory.registry().find(c.plugin);
    if (!plugin) throw plan_bug("names plugin " + c.plugin + ", which is not loaded");
    size_t kernel = 0;
    while (kernel < plugin->kernels().size() && plugin->kernels()[kernel].kernel != c.kernel)
      ++kernel;
    if (kernel == plugin->kernels().size())
      throw plan_bug("names kernel " + c.plugin + "/" + c.kernel + ", which the plugin lacks");
    const InventoryDevice* dev = memory.inventory().find(c.device);
    if (!dev) throw plan_bug("names device " + c.device + ", which this machine lacks");
    // Not a device of the plugin: an index past its devices, which prepare refuses.
    const uint32_t device =
        plugin->device_index(dev->info).value_or(uint32_t(plugin->devices().size()));
    return {plugin, kernel, device};
  }

  // The DLTensor of value `name` at `location`: its buffer, and the extents every step sets.
  DLTensor tensor(const Phase& phase, const std::string& name, const std::string& location,
                  const std::string& layout = "") {
    const Value& v = value(phase, name);
    DLTensor t{};
    t.data = buffer(phase.name, v, location, layout).data;
    t.device = memory.dl_device(location);
    t.ndim = int(v.shape.size());
    t.dtype = sy_dtype_to_dl(v.dtype);
    t.shape = shape_of(phase.name, v);
    return t;
  }

  // Prepares one kernel call and binds its operands' buffers.
  PreparedOp prepare_call(const Phase& phase, const std::string& id, const Call& c) {
    Target t = target(c);
    Expected<std::unique_ptr<PreparedKernel>> r =
        prepare_kernel(*t.plugin, t.kernel, t.device, c.op);
    if (!r) throw context_detail::in_op(r.error(), id, "prepare " + c.plugin + "/" + c.kernel);
    devices.insert({t.plugin, t.device});
    PreparedOp out;
    out.id = id;
    out.timing_key = std::string(sy_op_kind_name(c.op.op)) + " @ " + c.plugin;
    out.kernel = std::move(*r);
    const size_t n_in = c.inputs.size(), n = n_in + c.outputs.size();
    out.tensors.reserve(n);
    for (size_t i = 0; i < n; ++i)
      out.tensors.push_back(
          i < n_in ? tensor(phase, c.inputs[i], c.input_locations[i], c.input_layouts[i])
                   : tensor(phase, c.outputs[i - n_in], c.output_locations[i - n_in]));
    for (size_t i = 0; i < n; ++i) (i < n_in ? out.inputs : out.outputs).push_back(&out.tensors[i]);
    return out;
  }

  static void set_memory(OpDesc& op, const std::vector<std::string>& in,
                         const std::vector<std::string>& out) {
    for (size_t i = 0; i < op.inputs.size(); ++i)
      op.inputs[i].memory = context_detail::memory_of(in[i]);
    for (size_t i = 0; i < op.outputs.size(); ++i)
      op.outputs[i].memory = context_detail::memory_of(out[i]);
  }

  // The calls of one planned op: the op itself, or its adapted kernel and the kernels that
  // complete it (adaptation.hpp), in order.
  std::vector<Call> calls_of(const Phase& phase, const PlannedOp& planned, const Node& node) {
    const OpDesc op = op_desc(phase, node);
    const std::vector<AdaptedOperands> operands =
        call_operands(planned.adaptations, node, planned.input_locations, planned.output_locations,
                      layout_tags(planned));
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
                  o.output_locations,
                  o.input_layouts};
    };
    OpDesc own = op;  // the own kernel reads its packed weights as the plan says
    for (size_t i = 0; i < planned.input_layouts.size() && i < own.inputs.size(); ++i)
      own.inputs[i].layout = planned.input_layouts[i].id;
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

  // The calls of every planned op of a phase, index-aligned with its ops.
  std::vector<std::vector<Call>> phase_calls(const Phase& phase, const PhasePlan& pp) {
    std::vector<std::vector<Call>> out;
    for (const PlannedOp& planned : pp.ops) {
      const Node* node = planned_node(phase, planned.id);
      if (!node) throw plan_bug("names op " + planned.id + ", not in the graph");
      out.push_back(calls_of(phase, planned, *node));
    }
    return out;
  }

  // Planned op `i` called op by op: its calls prepared, the plan's copies before the first.
  std::vector<PreparedOp> prepare(const Phase& phase, const PhasePlan& pp, size_t i,
                                  const std::vector<Call>& calls) {
    const PlannedOp& planned = pp.ops[i];
    std::vector<PreparedOp> out;
    for (const Call& c : calls) out.push_back(prepare_call(phase, planned.id, c));
    for (const auto& c : pp.copies) {  // the plan's copies come before the op's first call
      if (c.before_op != planned.id) continue;
      const Value& v = value(phase, c.value);
      out.front().copies_before.emplace_back(&buffer(phase.name, v, c.from),
                                             &buffer(phase.name, v, c.to), &v);
    }
    return out;
  }

  // Every unit of a phase (context_segments.cpp): its segments handed over, the rest op by op.
  void prepare_phase(const Phase& phase, const PhasePlan& pp, PhaseRun& run);
  std::unique_ptr<SegmentRun> prepare_segment_run(const Phase& phase, const PhasePlan& pp,
                                                  const PlannedSegment& sg,
                                                  const std::vector<std::vector<Call>>& calls,
                                                  std::string& refused);
  void run_segment(PhaseRun& run, SegmentRun& sg, const sy_step_info& step);

  // Waits for the enqueued work of every device (ABI 1.2 synchronize). `quiet` drops errors.
  void synchronize_all(bool quiet = false) {
    for (const auto& [plugin, index] : devices)
      if (auto e = plugin->synchronize(index); e && !quiet) throw *e;
  }

  // Bytes of `v` at this step's extents (a compact prefix of its buffer).
  int64_t actual_bytes(const std::string& phase, const Value& v) {
    if (v.dynamic.axis < 0) return v.bytes();
    const int64_t* s = shape_of(phase, v);
    return sy_tensor_bytes(v.dtype, int32_t(v.shape.size()), s);
  }

  // Runs every unit of the phase on the step's extents (already set), then waits for the
  // devices.
  void run_phase(PhaseRun& run, const sy_step_info& step) {
    auto t0 = std::chrono::steady_clock::now();
    StepProfile& p = run.profile;
    for (auto& unit : run.units) {
      if (unit.segment) {
        run_segment(run, *unit.segment, step);
        continue;
      }
      for (auto& op : unit.ops) {
        auto c0 = std::chrono::steady_clock::now();
        for (const auto& [src, dst, v] : op.copies_before)
          memory.copy(*src, *dst, actual_bytes(run.phase->name, *v));
        p.copies_ms += context_detail::ms_since(c0);
        auto k0 = std::chrono::steady_clock::now();
        std::optional<Error> err = op.kernel->execute(op.inputs, op.outputs);
        double ms = context_detail::ms_since(k0);
        if (err) throw failed(*err, op);
        p.kernels_ms += ms;
        ++p.kernel_calls;
        auto& slot = run.per_kind[op.timing_key];
        slot.first += ms;
        slot.second += 1;
      }
    }
    synchronize_all();
    p.total_ms += context_detail::ms_since(t0);
    ++p.steps;
  }

  static Error failed(const Error& e, const PreparedOp& op) {
    std::string what = "kernel failed on " + op.id + " (" + op.timing_key + ")";
    Error out = context_detail::in_op(e, op.id, what);
    if (e.code == Errc::kernel_failed)
      out.message += " — a bug of the planner or of the plugin's check; please report it";
    return out;
  }

  // A step (context_step.cpp): the paged layout's, and the contiguous layout's.
  void check_batch(const Batch& batch, const KvBlocks& kv, const StepBounds& b, int64_t vocab);
  sy_step_info check_metadata(int64_t T, int64_t MB, int64_t BS, int64_t NB, int64_t outputs) const;
  static sy_step_info step_of(int64_t tokens, int64_t outputs, int64_t keys);
  void run_paged(const Batch& batch, const KvBlocks::Reservation& r, const KvBlocks& kv,
                 size_t& logits_rows);
  void run_contiguous(const Batch& batch, int64_t length, size_t& logits_rows);
  void copy_blocks(const std::vector<KvBlocks::BlockCopy>& copies, int64_t block_tokens);

  // Finds, once, the buffers a step writes its inputs into and reads its logits (and greedy ids)
  // from: each output at the location the plan computes it (`locations` by role; host if none).
  void bind_io(PhaseRun& run, const std::map<ValueRole, std::string>& locations) {
    const auto at = [&](ValueRole role) {
      auto it = locations.find(role);
      return it == locations.end() || it->second.empty() ? std::string(kHostLocation) : it->second;
    };
    for (const auto& v : run.phase->values) {
      if (v.kind != ValueKind::input || v.role == ValueRole::none) continue;
      const std::string key = buffer_key(run.phase->name, v.name, kHostLocation);
      if (auto it = views.find(key); it != views.end()) run.inputs[v.role] = &it->second;
    }
    for (const auto& v : run.phase->values) {
      if (v.role == ValueRole::logits) run.logits = &v;
      if (v.role == ValueRole::greedy_ids) run.greedy = &v;
    }
    if (!run.logits)
      throw plan_bug("runs a graph whose phase " + run.phase->name + " has no logits");
    run.logits_buffer = &buffer(run.phase->name, *run.logits, at(ValueRole::logits));
    if (run.greedy)
      run.greedy_buffer = &buffer(run.phase->name, *run.greedy, at(ValueRole::greedy_ids));
  }

  // The pending step's logits rows into logits_out, once.
  void read_pending_logits() {
    if (!pending.run || pending.logits_read) return;
    read_logits(*pending.run, 0, pending.rows, logits_out, 0);
    pending.logits_read = true;
  }

  // The pending step's greedy ids into greedy_out, once; false when its graph has none.
  bool read_pending_ids() {
    if (!pending.run || !pending.run->greedy) return false;
    if (pending.ids_read) return true;
    greedy_out.resize(size_t(pending.rows));
    const int64_t bytes = pending.rows * int64_t(sizeof(int64_t));
    Buffer host{greedy_out.data(), bytes, kHostLocation};
    memory.copy(*pending.run->greedy_buffer, host, bytes);
    pending.run->profile.readback_bytes += bytes;
    pending.ids_read = true;
    return true;
  }

  // Writes input `role` of the step: `data` (int64 values, written as the input's dtype).
  void set_input(PhaseRun& run, ValueRole role, std::span<const int64_t> data) {
    auto it = run.inputs.find(role);
    if (it == run.inputs.end()) return;  // not consumed by any op
    const Value* v = graph().find(*run.phase, role);
    if (v->dtype == SY_DTYPE_I32) {
      auto* d = static_cast<int32_t*>(it->second->data);
      for (size_t i = 0; i < data.size(); ++i) d[i] = int32_t(data[i]);
    } else {
      std::memcpy(it->second->data, data.data(), data.size() * 8);
    }
  }

  // The first `rows` logits rows of the phase's output, as float, into logits_out.
  void read_logits(PhaseRun& run, int64_t first_row, int64_t rows, std::vector<float>& out,
                   size_t at) {
    const Value& v = *run.logits;
    const int64_t vocab = v.shape.back(), esize = sy_dtype_size(v.dtype);
    const int64_t bytes = (first_row + rows) * vocab * esize;
    staging.resize(size_t(bytes));
    Buffer host{staging.data(), bytes, kHostLocation};
    memory.copy(*run.logits_buffer, host, bytes);
    run.profile.readback_bytes += bytes;
    out.resize(std::max(out.size(), (at + size_t(rows)) * size_t(vocab)));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < vocab; ++i)
        out[(at + size_t(r)) * size_t(vocab) + size_t(i)] =
            context_detail::to_float(staging.data(), v.dtype, (first_row + r) * vocab + i);
  }
};

}  // namespace sy
