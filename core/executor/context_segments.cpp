// A phase's units: each segment of the plan handed to its plugin as one (plugin_api.h, the
// segments extension) — its tensor table, kernel entries, uploads and the flags that say what
// outlives it — or, when the plan says op by op or the plugin declines, its calls one by one.
#include <set>

#include "core/executor/context_impl.hpp"

namespace sy {
namespace {

std::string ops_text(size_t n) {
  return std::to_string(n) + (n == 1 ? " op" : " ops");
}

}  // namespace

void Context::Impl::prepare_phase(const Phase& phase, const PhasePlan& pp, PhaseRun& run) {
  const std::vector<std::vector<Call>> calls = phase_calls(phase, pp);
  std::vector<PlannedSegment> segments = pp.segments;
  if (segments.empty() && !pp.ops.empty())  // a plan made without segments: all op by op
    segments.push_back({pp.ops.front().plugin, pp.ops.front().device, 0, pp.ops.size(), false,
                        "the plan has no segments: op by op"});
  for (const PlannedSegment& sg : segments) {
    SegmentForm form{phase.name, sg.plugin, sg.device, sg.count, false, sg.reason};
    if (sg.segment && time_each_op) {
      form.form = sg.plugin + " takes segments, but each op is timed (--profile): op by op";
    } else if (sg.segment) {
      std::string refused;
      if (auto run_one = prepare_segment_run(phase, pp, sg, calls, refused)) {
        form.segment = true;
        form.form = run_one->segment->form().empty() ? sg.reason : run_one->segment->form();
        run.units.push_back(Unit{std::move(run_one), {}});
        run.forms.push_back(form);
        continue;
      }
      form.form = sg.plugin + " declined the segment (" + refused + "): op by op";
    }
    Unit unit;
    for (size_t i = sg.first; i < sg.first + sg.count; ++i)
      for (auto& op : prepare(phase, pp, i, calls[i])) unit.ops.push_back(std::move(op));
    run.units.push_back(std::move(unit));
    run.forms.push_back(form);
  }
}

// The segment's table: one tensor per (value, location) its calls and uploads name, flagged
// with what outlives the segment. nullptr with `refused` set when the plugin answers
// UNSUPPORTED; any other failure throws.
std::unique_ptr<Context::Impl::SegmentRun> Context::Impl::prepare_segment_run(
    const Phase& phase, const PhasePlan& pp, const PlannedSegment& sg,
    const std::vector<std::vector<Call>>& calls, std::string& refused) {
  auto out = std::make_unique<SegmentRun>();
  std::map<std::pair<std::string, std::string>, uint32_t> index;  // (value, location)
  std::vector<SegmentTensor> tensors;
  // A weight packed for a kernel is a tensor of its own (tag: layout_tag's "plugin:id"; layout:
  // the id the call's op carries for it).
  auto slot = [&](const std::string& name, const std::string& loc, const std::string& tag = "",
                  uint32_t layout = 0) {
    auto [it, added] =
        index.try_emplace({name, tag.empty() ? loc : loc + "#" + tag}, uint32_t(tensors.size()));
    if (added) {
      const Value& v = value(phase, name);
      TensorDesc d{v.dtype, v.shape, context_detail::memory_of(loc), v.dynamic_dims()};
      d.layout = layout;
      uint32_t flags = 0;
      if (v.is_parameter() || v.kind == ValueKind::kv_cache) flags |= SY_SEGMENT_TENSOR_PERSISTENT;
      if (v.kind == ValueKind::input) flags |= SY_SEGMENT_TENSOR_STEP_INPUT;
      if (v.role == ValueRole::logits || v.role == ValueRole::greedy_ids)
        flags |= SY_SEGMENT_TENSOR_LIVE_OUT;
      tensors.push_back({d, flags});
      out->tensors.push_back(tensor(phase, name, loc, tag));
    }
    return it->second;
  };
  std::set<std::string> in_segment;
  for (size_t i = sg.first; i < sg.first + sg.count; ++i) in_segment.insert(pp.ops[i].id);
  std::vector<SegmentEntryDesc> entries;
  std::optional<Target> where;
  for (size_t i = sg.first; i < sg.first + sg.count; ++i) {
    for (const auto& c : pp.copies) {
      if (c.before_op != pp.ops[i].id) continue;
      if (c.from == kHostLocation && c.to == sg.device) {
        entries.push_back(
            {SY_SEGMENT_ENTRY_UPLOAD, 0, {}, {slot(c.value, c.from)}, {slot(c.value, c.to)}});
      } else if (i == sg.first) {  // the host's, before the segment (segments.cpp allows no other)
        const Value& v = value(phase, c.value);
        out->copies_before.emplace_back(&buffer(phase.name, v, c.from),
                                        &buffer(phase.name, v, c.to), &v);
      } else {
        throw plan_bug("puts a copy of " + c.value + " from " + c.from + " inside a segment on " +
                       sg.device);
      }
    }
    for (const Call& c : calls[i]) {
      Target t = target(c);
      if (where && (where->plugin != t.plugin || where->device != t.device))
        throw plan_bug("puts calls of two plugins or devices in one segment at op " + pp.ops[i].id);
      where = t;
      SegmentEntryDesc e{SY_SEGMENT_ENTRY_KERNEL, t.kernel, c.op, {}, {}};
      for (size_t k = 0; k < c.inputs.size(); ++k)
        e.inputs.push_back(
            slot(c.inputs[k], c.input_locations[k], c.input_layouts[k], c.op.inputs[k].layout));
      for (size_t k = 0; k < c.outputs.size(); ++k)
        e.outputs.push_back(slot(c.outputs[k], c.output_locations[k]));
      entries.push_back(std::move(e));
    }
  }
  if (!where) return nullptr;
  // What is read after the segment: by a call of another op, or copied away by the host.
  for (size_t i = 0; i < pp.ops.size(); ++i) {
    if (in_segment.count(pp.ops[i].id)) continue;
    for (const Call& c : calls[i])
      for (size_t k = 0; k < c.inputs.size(); ++k)
        if (auto it = index.find({c.inputs[k], c.input_locations[k]}); it != index.end())
          tensors[it->second].flags |= SY_SEGMENT_TENSOR_LIVE_OUT;
  }
  for (const auto& c : pp.copies)
    if (!(in_segment.count(c.before_op) && c.from == kHostLocation && c.to == sg.device))
      if (auto it = index.find({c.value, c.from}); it != index.end())
        tensors[it->second].flags |= SY_SEGMENT_TENSOR_LIVE_OUT;
  Expected<std::unique_ptr<PreparedSegment>> r =
      prepare_segment(*where->plugin, where->device, tensors, entries);
  if (!r) {
    if (r.error().status && *r.error().status == SY_STATUS_UNSUPPORTED) {
      refused = r.error().message;
      return nullptr;
    }
    throw context_detail::in_op(r.error(), pp.ops[sg.first].id,
                                "prepare segment of " + ops_text(sg.count) + " on " + sg.plugin);
  }
  devices.insert({where->plugin, where->device});
  out->segment = std::move(*r);
  out->timing_key = "segment @ " + sg.plugin;
  for (const DLTensor& t : out->tensors) out->table.push_back(&t);
  return out;
}

void Context::Impl::run_segment(PhaseRun& run, SegmentRun& sg, const sy_step_info& step) {
  StepProfile& p = run.profile;
  auto c0 = std::chrono::steady_clock::now();
  for (const auto& [src, dst, v] : sg.copies_before)
    memory.copy(*src, *dst, actual_bytes(run.phase->name, *v));
  p.copies_ms += context_detail::ms_since(c0);
  auto k0 = std::chrono::steady_clock::now();
  SegmentCounts counts;
  std::optional<Error> err = sg.segment->execute(sg.table, step, counts);
  const double ms = context_detail::ms_since(k0);
  if (err) {
    Error out(err->code, "segment on " + sg.segment->plugin().name() + " failed: " + err->message,
              err->where, err->hint);
    if (err->status) out.with_status(*err->status);
    throw out;
  }
  p.kernels_ms += ms;
  ++p.kernel_calls;
  p.launches += counts.launches;
  p.graph_launches += counts.graph_launches;
  p.blocking_waits += counts.blocking_waits;
  auto& slot = run.per_kind[sg.timing_key];
  slot.first += ms;
  slot.second += 1;
}

}  // namespace sy
