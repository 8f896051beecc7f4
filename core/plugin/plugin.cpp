#include "core/plugin/plugin.hpp"

#include <algorithm>
#include <cstdio>

#include "core/plugin/manifest.hpp"
#include "switchyard/op_contract.h"

namespace sy {
namespace {

void collect_refusal(void* context, const sy_refusal* r) {
  auto* out = static_cast<std::vector<Refusal>*>(context);
  if (!r || r->struct_size < SY_REFUSAL_SIZE_MINOR_0) {
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
    case LoadStage::probe: return "probe";
  }
  return "?";
}

Error plugin_error(const Plugin& plugin, int status, const ErrorText& err) {
  return Error(errc_for_plugin_status(status), describe_status(status, err), plugin.name())
      .with_status(status);
}

std::string describe_status(int status, const ErrorText& err) {
  const char* name = sy_status_name(static_cast<sy_status>(status));
  std::string out = name ? name : "status " + std::to_string(status) + " (outside the ABI's set)";
  std::string text = err.str();
  if (!text.empty()) out += ": " + text;
  return out;
}

Plugin::~Plugin() {
  if (!api_ || !instance_) return;
#if SY_ABI_COMPAT_MINOR >= 2
  if (slot_in_table(2, SY_STRUCT_SIZE_MIN(sy_plugin_api, destroy)) && api_->destroy) {
    sy_destroy_args args{};
    args.struct_size = sizeof(args);
    args.plugin = instance_;
    api_->destroy(&args);
    return;
  }
#endif
  api_->shutdown(instance_);
}

std::unique_ptr<Plugin> Plugin::from_manifest(const std::filesystem::path& library,
                                              const nlohmann::json& m) {
  auto bad = [&](const std::string& what) {
    return Error(Errc::plugin_manifest, "manifest of " + library.filename().string() + ": " + what,
                 manifest_path_for(library).string());
  };
  if (!m.is_object() || m.value("schema", "") != kManifestSchema)
    throw bad(std::string("not a ") + kManifestSchema + " document");
  std::unique_ptr<Plugin> p(new Plugin());
  p->name_ = m.value("name", "");
  p->version_ = m.value("plugin_version", "");
  p->path_ = library;
  const std::string abi = m.value("abi_version", "");
  if (p->name_.empty() ||
      std::sscanf(abi.c_str(), "%u.%u", &p->manifest_abi_[0], &p->manifest_abi_[1]) != 2)
    throw bad("no name or abi_version");
  p->negotiated_minor_ = std::min<uint32_t>(p->manifest_abi_[1], SY_ABI_VERSION_MINOR);
  try {
    for (const auto& k : m.at("kernels")) {
      Envelope e = envelope_from_json(k);
      e.features = features_at_minor(e.features, p->negotiated_minor_);
      e.dtypes = dtypes_at_minor(e.dtypes, p->negotiated_minor_);
      e.weight_dtypes = dtypes_at_minor(e.weight_dtypes, p->negotiated_minor_);
      p->kernels_.push_back(std::move(e));
    }
  } catch (const std::exception& e) {
    throw bad(std::string("kernels: ") + e.what());
  }
  if (m.contains("extensions")) {
    if (!m["extensions"].is_array()) throw bad("extensions is not an array of names");
    for (const auto& e : m["extensions"])
      if (e.is_string()) p->extensions_.push_back(e.get<std::string>());
  }
  p->no_devices_reason_ = "declared by its manifest only: the library was not opened";
  std::vector<std::string> names;
  for (const Envelope& k : p->kernels_) names.push_back(k.kernel);
  p->verification_ = read_verification(library, names);
  return p;
}

bool Plugin::has_extension(const std::string& name) const {
  for (const auto& e : extensions_)
    if (e == name) return true;
  return false;
}

void Plugin::find_extensions() {
  extensions_.clear();
  segments_ = nullptr;
  layouts_ = nullptr;
#if SY_ABI_COMPAT_MINOR >= 2
  if (!slot_in_table(2, SY_PLUGIN_API_SIZE_MINOR_2)) return;
  // A bounded walk: a list that loops is a plugin bug, not a reason to hang.
  const sy_extension_header* e = api_->extensions;
  for (int n = 0; e && n < 64; e = e->next, ++n) {
    if (e->struct_size < SY_EXTENSION_HEADER_SIZE_MINOR_2) break;
    if (e->type == SY_EXTENSION_TYPE_SEGMENTS && !segments_) {
      auto* s = reinterpret_cast<const sy_segment_extension*>(e);
      if (e->struct_size < SY_SEGMENT_EXTENSION_SIZE_MINOR_2 || !s->prepare_segment ||
          !s->execute_segment || !s->release_segment)
        continue;
      segments_ = s;
      extensions_.push_back("segments");
    }
#if SY_ABI_COMPAT_MINOR >= 10
    if (e->type == SY_EXTENSION_TYPE_WEIGHT_LAYOUTS && !layouts_ && negotiated_minor_ >= 10) {
      auto* w = reinterpret_cast<const sy_weight_layout_extension*>(e);
      if (e->struct_size < SY_WEIGHT_LAYOUT_EXTENSION_SIZE_MINOR_10 || !w->weight_layout ||
          !w->pack_weight)
        continue;
      layouts_ = w;
      extensions_.push_back("weight_layouts");
    }
#endif
  }
#endif
}

CheckResult Plugin::check(size_t kernel_index, const DeviceInfo& device, const OpDesc& op) const {
  CheckResult result;
  if (!api_) {  // declared by the manifest: its envelope and the operator contract
    result.refusals = envelope_refusals(kernels_.at(kernel_index), op, device);
    AbiOpView view(op);
    sy_op_contract_check(view.get(), collect_refusal, &result.refusals);
    result.accepted = result.refusals.empty();
    return result;
  }
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
    result.error = plugin_error(*this, status, err);
    return result;
  }
  result.accepted = args.accepted != 0;
  if (result.accepted && negotiated_minor_ >= 4) result.workspace_bytes = args.workspace_bytes;
  return result;
}

std::optional<Plugin::MemoryInfo> Plugin::memory_info(uint32_t device_index) const {
  // The three conditions of ABI rule 2: never read a field the plugin's table lacks.
  if (!slot_in_table(1, SY_PLUGIN_API_SIZE_MINOR_1) || !api_->memory_info) return std::nullopt;
  sy_memory_info_args args{};
  args.struct_size = sizeof(args);
  args.plugin = instance_;
  args.device_index = device_index;
  ErrorText err;
  if (api_->memory_info(&args, err.buffer()) != SY_STATUS_OK) return std::nullopt;
  return MemoryInfo{args.free_bytes, args.total_bytes};
}

Expected<Plugin::WeightLayout> Plugin::weight_layout(size_t kernel_index, uint32_t device_index,
                                                     const OpDesc& op, size_t input) const {
  WeightLayout out;
#if SY_ABI_COMPAT_MINOR >= 10
  if (!layouts_) return out;
  AbiOpView view(op);
  sy_weight_layout_args args{};
  args.struct_size = sizeof(args);
  args.plugin = instance_;
  args.device_index = device_index;
  args.kernel_index = static_cast<uint32_t>(kernel_index);
  args.op = view.get();
  args.input = static_cast<uint32_t>(input);
  ErrorText err;
  int status = layouts_->weight_layout(&args, err.buffer());
  if (status != SY_STATUS_OK) return plugin_error(*this, status, err);
  out.id = args.layout;
  if (out.id == 0) return out;
  out.name = args.name ? args.name : "layout " + std::to_string(out.id);
  out.bytes = static_cast<int64_t>(args.packed_bytes);
  if (out.bytes <= 0)
    return Error(Errc::plugin_internal,
                 "INTERNAL: weight_layout named layout " + std::to_string(out.id) + " of 0 bytes",
                 name_)
        .with_status(SY_STATUS_INTERNAL);
#else
  (void)kernel_index, (void)device_index, (void)op, (void)input;
#endif
  return out;
}

std::optional<Error> Plugin::pack_weight(uint32_t device_index, uint32_t layout,
                                         const TensorDesc& desc, const void* src, void* dst,
                                         uint64_t dst_bytes) const {
#if SY_ABI_COMPAT_MINOR >= 10
  if (!layouts_)
    return Error(Errc::plugin_internal, "UNSUPPORTED: the plugin packs no weights", name_)
        .with_status(SY_STATUS_UNSUPPORTED);
  OpDesc holder;
  holder.inputs = {desc};
  AbiOpView view(holder);
  sy_pack_weight_args args{};
  args.struct_size = sizeof(args);
  args.plugin = instance_;
  args.device_index = device_index;
  args.layout = layout;
  args.desc = view.get()->inputs[0];
  args.src = src;
  args.dst = dst;
  args.dst_bytes = dst_bytes;
  ErrorText err;
  int status = layouts_->pack_weight(&args, err.buffer());
  if (status != SY_STATUS_OK) return plugin_error(*this, status, err);
  return std::nullopt;
#else
  (void)device_index, (void)layout, (void)desc, (void)src, (void)dst, (void)dst_bytes;
  return Error(Errc::plugin_internal, "UNSUPPORTED: built without ABI 1.10", name_);
#endif
}

Expected<void*> Plugin::alloc(uint32_t device_index, uint64_t bytes, uint64_t alignment) const {
  if (!has_device_memory())
    return Error(Errc::kernel_failed, "UNSUPPORTED: the plugin has no device memory", name_)
        .with_status(SY_STATUS_UNSUPPORTED);
  sy_alloc_args args{};
  args.struct_size = sizeof(args);
  args.plugin = instance_;
  args.device_index = device_index;
  args.size_bytes = bytes;
  args.alignment = alignment;
  ErrorText err;
  int status = api_->alloc(&args, err.buffer());
  if (status != SY_STATUS_OK) return plugin_error(*this, status, err);
  if (!args.data && bytes > 0)
    return Error(Errc::plugin_internal, "INTERNAL: alloc returned OK without memory", name_)
        .with_status(SY_STATUS_INTERNAL);
  return args.data;
}

std::optional<Error> Plugin::copy(uint32_t device_index, sy_copy_direction direction, void* dst,
                                  const void* src, uint64_t bytes) const {
  if (!has_device_memory())
    return Error(Errc::kernel_failed, "UNSUPPORTED: the plugin has no device memory", name_)
        .with_status(SY_STATUS_UNSUPPORTED);
  sy_copy_args args{};
  args.struct_size = sizeof(args);
  args.plugin = instance_;
  args.device_index = device_index;
  args.direction = direction;
  args.dst = dst;
  args.src = src;
  args.size_bytes = bytes;
  ErrorText err;
  int status = api_->copy(&args, err.buffer());
  if (status != SY_STATUS_OK) return plugin_error(*this, status, err);
  return std::nullopt;
}

void Plugin::free(uint32_t device_index, void* data) const {
  if (!data || !api_) return;
#if SY_ABI_COMPAT_MINOR >= 2
  if (slot_in_table(2, SY_STRUCT_SIZE_MIN(sy_plugin_api, free_device_memory)) &&
      api_->free_device_memory) {
    sy_free_memory_args args{};
    args.struct_size = sizeof(args);
    args.plugin = instance_;
    args.device_index = device_index;
    args.data = data;
    api_->free_device_memory(&args);
    return;
  }
#endif
  if (api_->free_memory) api_->free_memory(instance_, device_index, data);
}

std::optional<Error> Plugin::synchronize(uint32_t device_index) const {
#if SY_ABI_COMPAT_MINOR >= 2
  if (slot_in_table(2, SY_STRUCT_SIZE_MIN(sy_plugin_api, synchronize)) && api_->synchronize) {
    sy_synchronize_args args{};
    args.struct_size = sizeof(args);
    args.plugin = instance_;
    args.device_index = device_index;
    ErrorText err;
    int status = api_->synchronize(&args, err.buffer());
    if (status != SY_STATUS_OK) return plugin_error(*this, status, err);
  }
#endif
  (void)device_index;
  return std::nullopt;
}

void Plugin::release(sy_kernel* kernel) const {
  if (!api_) return;
#if SY_ABI_COMPAT_MINOR >= 2
  if (slot_in_table(2, SY_STRUCT_SIZE_MIN(sy_plugin_api, release_kernel)) && api_->release_kernel) {
    sy_release_kernel_args args{};
    args.struct_size = sizeof(args);
    args.plugin = instance_;
    args.kernel = kernel;
    api_->release_kernel(&args);
    return;
  }
#endif
  if (api_->release) api_->release(instance_, kernel);
}

}  // namespace sy
