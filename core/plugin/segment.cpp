#include "core/plugin/segment.hpp"

namespace sy {
namespace {

Error refused(const Plugin& plugin, const std::string& what) {
  return Error(Errc::kernel_failed, "UNSUPPORTED: " + what, plugin.name())
      .with_status(SY_STATUS_UNSUPPORTED);
}

}  // namespace

PreparedSegment::PreparedSegment(const Plugin& plugin, sy_segment* segment, std::string form,
                                 size_t num_tensors)
    : plugin_(plugin), segment_(segment), form_(std::move(form)), num_tensors_(num_tensors) {}

PreparedSegment::~PreparedSegment() {
  sy_release_segment_args args{};
  args.struct_size = sizeof(args);
  args.plugin = plugin_.instance();
  args.segment = segment_;
  plugin_.segment_extension()->release_segment(&args);
}

std::optional<Error> PreparedSegment::execute(std::span<const DLTensor* const> tensors,
                                              const sy_step_info& step, SegmentCounts& counts) {
  if (tensors.size() != num_tensors_)
    return Error(Errc::kernel_failed,
                 "INVALID_ARGUMENT: " + std::to_string(tensors.size()) +
                     " tensors for a segment prepared with " + std::to_string(num_tensors_),
                 plugin_.name())
        .with_status(SY_STATUS_INVALID_ARGUMENT);
  sy_execute_segment_args args{};
  args.struct_size = sizeof(args);
  args.plugin = plugin_.instance();
  args.segment = segment_;
  args.tensors = tensors.data();
  args.num_tensors = tensors.size();
  args.step = &step;
  ErrorText err;
  int status = plugin_.segment_extension()->execute_segment(&args, err.buffer());
  counts.blocking_waits += args.blocking_waits;
  counts.launches += args.launches;
  counts.graph_launches += args.graph_launches;
  if (status == SY_STATUS_OK) return std::nullopt;
  return plugin_error(plugin_, status, err);
}

Expected<std::unique_ptr<PreparedSegment>> prepare_segment(
    const Plugin& plugin, uint32_t device_index, const std::vector<SegmentTensor>& tensors,
    const std::vector<SegmentEntryDesc>& entries) {
  const sy_segment_extension* ext = plugin.segment_extension();
  if (!ext) return refused(plugin, "the plugin does not take segments");
  if (device_index >= plugin.devices().size())
    return refused(plugin, "no device " + std::to_string(device_index));
  // The ABI views: tensor descriptions pointing into `tensors`, operators into their AbiOpViews.
  std::vector<sy_tensor_desc> descs(tensors.size());
  std::vector<const sy_tensor_desc*> desc_ptrs;
  std::vector<uint32_t> flags;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorDesc& t = tensors[i].desc;
    descs[i].struct_size = sizeof(sy_tensor_desc);
    descs[i].dtype = t.dtype;
    descs[i].ndim = int32_t(t.shape.size());
    descs[i].shape = t.shape.data();
    descs[i].memory = t.memory;
    descs[i].dynamic_dims = t.dynamic_dims;
    desc_ptrs.push_back(&descs[i]);
    flags.push_back(tensors[i].flags);
  }
  std::vector<std::unique_ptr<AbiOpView>> views;
  std::vector<sy_segment_entry> abi(entries.size());
  std::vector<const sy_segment_entry*> abi_ptrs;
  for (size_t i = 0; i < entries.size(); ++i) {
    const SegmentEntryDesc& e = entries[i];
    sy_segment_entry& a = abi[i];
    a.struct_size = sizeof(a);
    a.kind = e.kind;
    a.kernel_index = uint32_t(e.kernel_index);
    if (e.kind == SY_SEGMENT_ENTRY_KERNEL) {
      views.push_back(std::make_unique<AbiOpView>(e.op));
      a.op = views.back()->get();
    }
    a.inputs = e.inputs.data();
    a.num_inputs = e.inputs.size();
    a.outputs = e.outputs.data();
    a.num_outputs = e.outputs.size();
    abi_ptrs.push_back(&a);
  }
  sy_prepare_segment_args args{};
  args.struct_size = sizeof(args);
  args.plugin = plugin.instance();
  args.device_index = device_index;
  args.tensors = desc_ptrs.data();
  args.tensor_flags = flags.data();
  args.num_tensors = tensors.size();
  args.entries = abi_ptrs.data();
  args.num_entries = abi_ptrs.size();
  ErrorText err;
  int status = ext->prepare_segment(&args, err.buffer());
  if (status != SY_STATUS_OK) return plugin_error(plugin, status, err);
  if (!args.segment)
    return Error(Errc::plugin_internal, "INTERNAL: prepare_segment returned OK without a segment",
                 plugin.name())
        .with_status(SY_STATUS_INTERNAL);
  return std::make_unique<PreparedSegment>(plugin, args.segment, args.form ? args.form : "",
                                           tensors.size());
}

}  // namespace sy
