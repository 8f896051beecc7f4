#include "core/plugin/plugin.hpp"

namespace sy {
namespace {

void collect_refusal(void* context, const sy_refusal* r) {
  auto* out = static_cast<std::vector<Refusal>*>(context);
  if (!r || r->struct_size < SY_STRUCT_SIZE_MIN(sy_refusal, text)) {
    out->push_back({"abi", "sy_refusal", "undersized struct", "plugin sent a malformed refusal"});
    return;
  }
  auto s = [](const char* p) { return std::string(p ? p : ""); };
  out->push_back({s(r->constraint), s(r->required), s(r->offered), s(r->text)});
}

}  // namespace

const char* load_stage_name(LoadStage stage) {
  switch (stage) {
    case LoadStage::open: return "open";
    case LoadStage::entry: return "entry";
    case LoadStage::abi: return "abi";
    case LoadStage::init: return "init";
    case LoadStage::manifest: return "manifest";
    case LoadStage::capability: return "capability";
  }
  return "?";
}

std::string describe_status(int status, const ErrorText& err) {
  const char* name = sy_status_name(static_cast<sy_status>(status));
  std::string out = name ? name : "status " + std::to_string(status) + " (outside the ABI's set)";
  std::string text = err.str();
  if (!text.empty()) out += ": " + text;
  return out;
}

Plugin::~Plugin() {
  if (api_ && instance_) api_->shutdown(instance_);
}

CheckResult Plugin::check(size_t kernel_index, const DeviceInfo& device, const OpDesc& op) const {
  CheckResult result;
  AbiOpView view(op);
  AbiDeviceView dev(device);
  sy_check_args args{};
  args.struct_size = sizeof(args);
  args.plugin = instance_;
  args.kernel_index = static_cast<uint32_t>(kernel_index);
  args.device = dev.get();
  args.op = view.get();
  args.refusal_context = &result.refusals;
  args.add_refusal = collect_refusal;
  ErrorText err;
  int status = api_->check(&args, err.buffer());
  if (status != SY_STATUS_OK) {
    result.error = describe_status(status, err);
    return result;
  }
  result.accepted = args.accepted != 0;
  return result;
}

std::optional<Plugin::MemoryInfo> Plugin::memory_info(uint32_t device_index) const {
  // The three conditions of ABI rule 2: never read a field the plugin's table lacks.
  if (negotiated_minor_ < 1 || api_->struct_size < SY_PLUGIN_API_SIZE_MINOR1 || !api_->memory_info)
    return std::nullopt;
  sy_memory_info_args args{};
  args.struct_size = sizeof(args);
  args.plugin = instance_;
  args.device_index = device_index;
  ErrorText err;
  if (api_->memory_info(&args, err.buffer()) != SY_STATUS_OK) return std::nullopt;
  return MemoryInfo{args.free_bytes, args.total_bytes};
}

}  // namespace sy
