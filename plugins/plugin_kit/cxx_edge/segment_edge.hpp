// The segments extension (plugin_api.h, SY_EXTENSION_TYPE_SEGMENTS) for a plugin written with
// the kit: argument validation, every kernel entry prepared through Edge::prepare_one (check's
// own test), the tensor table copied, and every call guarded. The plugin supplies what it does
// with the prepared entries.
//
// Beside what plugin_edge.hpp asks for, the plugin's `struct sy_plugin` provides:
//
//   using Segment = ...;  // a class with
//     //   void run(const DLTensor* const* tensors, const sy_step_info& step,
//     //            SegmentCounters& counters);   // may throw StatusError
//     //   const std::string& form() const;        // one line: what the plugin made of it
//   // Builds a Segment from the prepared spec, or throws StatusError(UNSUPPORTED, why) when it
//   // will not take this one (the host then drives its ops one by one).
//   std::unique_ptr<Segment> make_segment(SegmentSpec<Impl>&& spec);
//
// (InOrderSegment below is such a class for a plugin that runs the entries as they come.)
//
// and its table chains SegmentEdge<sy_plugin>::extension() from `extensions`.
//
// Part of the plugin kit (Switchyard::plugin_kit).
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cxx_edge/plugin_edge.hpp"

namespace sy::edge {

#if SY_ABI_COMPAT_MINOR >= 2

// What one execute_segment did, for the host's profile (sy_execute_segment_args' outputs).
struct SegmentCounters {
  uint32_t blocking_waits = 0;
  uint32_t launches = 0;
  uint32_t graph_launches = 0;
};

// One entry of a prepared segment: a kernel (its operator and implementation) or an upload,
// with its operands as indices into the segment's tensor table.
template <class Impl>
struct SegmentEntry {
  sy_segment_entry_kind kind = SY_SEGMENT_ENTRY_KERNEL;
  uint32_t kernel_index = 0;
  std::unique_ptr<OpCopy> op;  // KERNEL
  std::unique_ptr<Impl> impl;  // KERNEL
  std::vector<uint32_t> inputs, outputs;
};

// The segment as the kit hands it to the plugin's make_segment.
template <class Impl>
struct SegmentSpec {
  uint32_t device_index = 0;
  std::vector<TensorCopy> tensors;  // the table's descriptions (bounds, dtype, memory)
  std::vector<uint32_t> flags;      // SY_SEGMENT_TENSOR_*, index-aligned with tensors
  std::vector<SegmentEntry<Impl>> entries;
};

// A segment run as the host would run its ops one by one, for a plugin whose device memory its
// own process addresses (a CPU; a simulated device): the entries in order, each kernel's
// `Impl::run(inputs, outputs)` on its operands from the step's table, an upload a copy of its
// bytes. Nothing of execute's per-call checks: each kernel was prepared through check's own
// test, and the host checked the step's metadata. The operand arrays are sized here, so a step
// allocates nothing; like its context, a segment runs one step at a time. `count_launches`:
// report each entry as a launch (a simulated device's), or none (work that has run when
// `run` returns). A failing kernel's error names its entry; the entries before it have run.
template <class Impl>
class InOrderSegment {
 public:
  InOrderSegment(SegmentSpec<Impl>&& spec, std::string form, bool count_launches)
      : spec_(std::move(spec)), form_(std::move(form)), count_launches_(count_launches) {
    size_t inputs = 0, outputs = 0;
    for (const auto& e : spec_.entries) {
      inputs = std::max(inputs, e.inputs.size());
      outputs = std::max(outputs, e.outputs.size());
    }
    in_.resize(inputs);
    out_.resize(outputs);
  }

  void run(const DLTensor* const* tensors, size_t count, const sy_step_info&,
           SegmentCounters& counters) {
    if (count != spec_.tensors.size())
      throw StatusError(SY_STATUS_INVALID_ARGUMENT, std::to_string(count) +
                                                        " tensors for a segment of " +
                                                        std::to_string(spec_.tensors.size()));
    for (size_t i = 0; i < spec_.entries.size(); ++i) {
      const SegmentEntry<Impl>& e = spec_.entries[i];
      if (count_launches_) ++counters.launches;
      if (e.kind == SY_SEGMENT_ENTRY_UPLOAD) {
        const DLTensor *from = tensors[e.inputs[0]], *to = tensors[e.outputs[0]];
        std::memcpy(to->data, from->data,
                    sy_tensor_bytes(spec_.tensors[e.inputs[0]].dtype, from->ndim, from->shape));
        continue;
      }
      for (size_t k = 0; k < e.inputs.size(); ++k) in_[k] = tensors[e.inputs[k]];
      for (size_t k = 0; k < e.outputs.size(); ++k) out_[k] = tensors[e.outputs[k]];
      try {
        e.impl->run(in_.data(), out_.data());
      } catch (const StatusError& x) {
        throw StatusError(x.status, "entry " + std::to_string(i) + " (" +
                                        sy_op_kind_name(e.op->op) + "): " + x.what());
      }
    }
  }
  const std::string& form() const { return form_; }

 private:
  SegmentSpec<Impl> spec_;
  std::string form_;
  bool count_launches_;
  std::vector<const DLTensor*> in_, out_;
};

template <class P>
class SegmentEdge {
  using Impl = typename P::Impl;
  using Segment = typename P::Segment;

 public:
  static const sy_extension_header* extension(const sy_extension_header* next = nullptr) {
    static sy_segment_extension ext = [] {
      sy_segment_extension e{};
      e.header.struct_size = sizeof(e);
      e.header.type = SY_EXTENSION_TYPE_SEGMENTS;
      e.prepare_segment = prepare_segment;
      e.execute_segment = execute_segment;
      e.release_segment = release_segment;
      return e;
    }();
    ext.header.next = next;
    return &ext.header;
  }

  static sy_status prepare_segment(sy_prepare_segment_args* args, sy_error_buffer* err) {
    return guarded(P::kName, err, [&] {
      if (!args || args->struct_size < SY_PREPARE_SEGMENT_ARGS_SIZE_MINOR_2 || !args->plugin ||
          (args->num_tensors && (!args->tensors || !args->tensor_flags)) ||
          (args->num_entries && !args->entries))
        return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                       "sy_prepare_segment_args is NULL, undersized or has NULL arrays");
      P& p = *static_cast<P*>(args->plugin);
      if (sy_status s = p.ready(args->device_index, err); s != SY_STATUS_OK) return s;
      SegmentSpec<Impl> spec;
      spec.device_index = args->device_index;
      if (sy_status s = copy_tensors(*args, spec, err); s != SY_STATUS_OK) return s;
      for (size_t i = 0; i < args->num_entries; ++i)
        if (sy_status s = add_entry(p, *args, i, spec, err); s != SY_STATUS_OK) return s;
      std::unique_ptr<Segment> segment = p.make_segment(std::move(spec));
      args->form = segment->form().c_str();
      args->segment = reinterpret_cast<sy_segment*>(segment.release());
      return SY_STATUS_OK;
    });
  }

  static sy_status execute_segment(sy_execute_segment_args* args, sy_error_buffer* err) {
    return guarded(P::kName, err, [&] {
      if (!args || args->struct_size < SY_EXECUTE_SEGMENT_ARGS_SIZE_MINOR_2 || !args->segment ||
          !args->step || args->step->struct_size < SY_STEP_INFO_SIZE_MINOR_2 ||
          (args->num_tensors && !args->tensors))
        return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                       "sy_execute_segment_args is NULL or undersized, or its step info is");
      SegmentCounters counters;
      reinterpret_cast<Segment*>(args->segment)
          ->run(args->tensors, args->num_tensors, *args->step, counters);
      args->blocking_waits = counters.blocking_waits;
      args->launches = counters.launches;
      args->graph_launches = counters.graph_launches;
      return SY_STATUS_OK;
    });
  }

  static void release_segment(sy_release_segment_args* args) {
    if (args && args->struct_size >= SY_RELEASE_SEGMENT_ARGS_SIZE_MINOR_2)
      delete reinterpret_cast<Segment*>(args->segment);
  }

 private:
  static sy_status copy_tensors(const sy_prepare_segment_args& args, SegmentSpec<Impl>& spec,
                                sy_error_buffer* err) {
    for (size_t i = 0; i < args.num_tensors; ++i) {
      const sy_tensor_desc* t = args.tensors[i];
      if (!t || t->struct_size < SY_TENSOR_DESC_SIZE_MINOR_0 || (t->ndim > 0 && !t->shape))
        return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "segment tensor %zu is NULL or undersized",
                       i);
      TensorCopy c;
      c.dtype = t->dtype;
      if (t->ndim > 0) c.shape.assign(t->shape, t->shape + t->ndim);
      c.memory = t->memory;
      c.dynamic_dims = sy_tensor_dynamic_dims(t);
      spec.tensors.push_back(std::move(c));
      spec.flags.push_back(args.tensor_flags[i]);
    }
    return SY_STATUS_OK;
  }

  static sy_status indices(const uint32_t* list, size_t n, size_t tensors, const char* what,
                           size_t entry, std::vector<uint32_t>& out, sy_error_buffer* err) {
    if (n && !list)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "segment entry %zu: NULL %s", entry, what);
    for (size_t i = 0; i < n; ++i) {
      if (list[i] >= tensors)
        return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                       "segment entry %zu: %s %zu names tensor %u of %zu", entry, what, i, list[i],
                       tensors);
      out.push_back(list[i]);
    }
    return SY_STATUS_OK;
  }

  static sy_status add_entry(P& p, const sy_prepare_segment_args& args, size_t i,
                             SegmentSpec<Impl>& spec, sy_error_buffer* err) {
    const sy_segment_entry* e = args.entries[i];
    if (!e || e->struct_size < SY_SEGMENT_ENTRY_SIZE_MINOR_2)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "segment entry %zu is NULL or undersized", i);
    SegmentEntry<Impl> out;
    out.kind = static_cast<sy_segment_entry_kind>(e->kind);
    if (sy_status s =
            indices(e->inputs, e->num_inputs, args.num_tensors, "input", i, out.inputs, err);
        s != SY_STATUS_OK)
      return s;
    if (sy_status s =
            indices(e->outputs, e->num_outputs, args.num_tensors, "output", i, out.outputs, err);
        s != SY_STATUS_OK)
      return s;
    if (e->kind == SY_SEGMENT_ENTRY_UPLOAD) {
      if (out.inputs.size() != 1 || out.outputs.size() != 1)
        return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                       "segment entry %zu: an upload has one input and one output", i);
    } else if (e->kind == SY_SEGMENT_ENTRY_KERNEL) {
      if (!e->op || e->op->num_inputs != e->num_inputs || e->op->num_outputs != e->num_outputs)
        return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                       "segment entry %zu: no operator, or operands that disagree with it", i);
      std::unique_ptr<typename Edge<P>::Prepared> k;
      if (sy_status s = Edge<P>::prepare_one(p, args.device_index, e->kernel_index, e->op, k, err);
          s != SY_STATUS_OK)
        return s;
      out.kernel_index = e->kernel_index;
      out.op = std::move(k->op);
      out.impl = std::move(k->impl);
    } else {
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "segment entry %zu: unknown kind %u", i,
                     e->kind);
    }
    spec.entries.push_back(std::move(out));
    return SY_STATUS_OK;
  }
};

#endif

}  // namespace sy::edge
