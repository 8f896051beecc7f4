// plugin/ — one backend plugin, from a path on disk to a live, validated instance.
//
// Offers: load_plugin() (loader.hpp), which walks the stages open → entry → abi → init →
// manifest → capability and returns either a Plugin or a LoadDiagnostic naming the
// stage and the reason; the Plugin handle (this file), the only way the rest of the core calls
// a plugin: check, prepare/execute/release (kernel.hpp), device memory, synchronize; the
// manifest's JSON form (manifest.hpp). Depends on capability/ and errors/.
#pragma once

#include <boost/dll/shared_library.hpp>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/capability/capability.hpp"
#include "core/errors/error.hpp"
#include "core/plugin/verification.hpp"
#include "switchyard/plugin_api.h"

namespace spdlog {
class logger;
}

namespace sy {

// In catalog order (SY101..SY107); probe runs first but was added last.
enum class LoadStage { open, entry, abi, init, manifest, capability, probe };
const char* load_stage_name(LoadStage stage);

// Why a plugin (or a plugin directory) did not load.
struct LoadDiagnostic {
  std::filesystem::path path;
  LoadStage stage = LoadStage::open;
  std::string reason;
  std::string hint;
  Errc code() const;  // SY101..SY106, by stage
};

struct CheckResult {
  bool accepted = false;
  std::vector<Refusal> refusals;  // every failing constraint the plugin reported
  std::optional<Error> error;     // set when check itself failed (status != OK)
  // Memory the kernel holds from prepare to release for this op (ABI 1.4 check output; 0 from
  // older plugins and from manifest-only plugins, whose check is never called).
  uint64_t workspace_bytes = 0;
};

// Per-plugin state the host hands to the plugin's log callback.
struct PluginHostContext {
  std::string plugin_label;
  // Where the plugin's messages go: the logger of the registry that loaded it (a host API
  // runtime's own callback), or, when null, the core's (loader.hpp's core_logger()).
  std::shared_ptr<spdlog::logger> logger;
};

// What a plugin's entry receives. The ABI promises it stays valid until the library is
// unloaded, and libraries are never unloaded (RTLD_NODELETE), so it lives for the process.
struct HostBinding {
  PluginHostContext context;
  sy_host_info info{};
};

// A loaded, initialised plugin. Destruction calls the plugin's shutdown; the library
// stays mapped for the life of the process (see loader.cpp for why).
class Plugin {
 public:
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  // A plugin known from its manifest alone (manifest-only planning): the library is never
  // opened, it has no devices, check() is the declared envelope plus the operator contract,
  // and it cannot prepare or execute. Throws Error (SY105) for a manifest that is not one.
  static std::unique_ptr<Plugin> from_manifest(const std::filesystem::path& library,
                                               const nlohmann::json& manifest);
  // Where its declaration came from: "live" (the library, opened) or "manifest".
  const char* source() const { return api_ ? "live" : "manifest"; }
  bool opened() const { return api_ != nullptr; }

  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const std::filesystem::path& path() const { return path_; }
  uint32_t abi_major() const { return api_ ? api_->abi_major : manifest_abi_[0]; }
  uint32_t abi_minor() const { return api_ ? api_->abi_minor : manifest_abi_[1]; }
  uint32_t negotiated_minor() const { return negotiated_minor_; }

  const std::vector<DeviceInfo>& devices() const { return devices_; }
  const std::string& no_devices_reason() const { return no_devices_reason_; }
  const std::vector<Envelope>& kernels() const { return kernels_; }
  // What a conformance report beside the library says of each kernel (verification.hpp).
  const PluginVerification& verification() const { return verification_; }

  // Asks the plugin whether kernel `kernel_index` serves `op` on `device` (which may be
  // a described device this machine lacks).
  CheckResult check(size_t kernel_index, const DeviceInfo& device, const OpDesc& op) const;

  // Free and total memory of a device through the minor-1 `memory_info` slot; nullopt
  // when the negotiated minor, the table's size or a NULL slot says it is unsupported.
  struct MemoryInfo {
    uint64_t free_bytes = 0, total_bytes = 0;
  };
  std::optional<MemoryInfo> memory_info(uint32_t device_index) const;

  // Device memory through the plugin's alloc / copy / free slots (the 1.2 struct form of free
  // when the plugin has it). Errors carry the plugin's status: SY305 for OUT_OF_MEMORY, SY306
  // for UNAVAILABLE, SY307 for INTERNAL, SY301 otherwise. A plugin without the slots (every
  // device of it is host memory) answers alloc and copy with SY301 UNSUPPORTED.
  bool has_device_memory() const { return api_ && api_->alloc && api_->copy && api_->free_memory; }
  Expected<void*> alloc(uint32_t device_index, uint64_t bytes, uint64_t alignment = 0) const;
  std::optional<Error> copy(uint32_t device_index, sy_copy_direction direction, void* dst,
                            const void* src, uint64_t bytes) const;
  void free(uint32_t device_index, void* data) const;
  // Waits for the device's enqueued work (1.2 `synchronize`); nullopt at once for a plugin
  // whose execute completes its work before returning (no slot).
  std::optional<Error> synchronize(uint32_t device_index) const;
  // The extensions it offers (plugin_api.h sy_extension_type), by name: "segments". Live: the
  // known types on its list that the negotiated minor allows, sized and with every slot set;
  // manifest-only: the manifest's "extensions".
  const std::vector<std::string>& extensions() const { return extensions_; }
  bool takes_segments() const { return segment_extension() || has_extension("segments"); }
  bool has_extension(const std::string& name) const;
  // The segments extension of a live plugin, or NULL (segment.hpp calls it).
  const sy_segment_extension* segment_extension() const { return segments_; }
  // The index among devices() of the device `d` names (by type and id), or nullopt.
  std::optional<uint32_t> device_index(const DeviceInfo& d) const {
    for (uint32_t i = 0; i < devices_.size(); ++i)
      if (devices_[i].type == d.type && devices_[i].id == d.id) return i;
    return std::nullopt;
  }
  // The weight-layouts extension (ABI 1.10) of a live plugin, or NULL.
  const sy_weight_layout_extension* weight_layouts() const { return layouts_; }
  // The layout kernel `kernel_index` wants for weight input `input` of `op` (which its check
  // accepted) on device `device_index`: id 0 when it keeps the stored one or the plugin has no
  // such extension. Errors carry the plugin's status, as alloc's do.
  struct WeightLayout {
    uint32_t id = 0;
    std::string name;
    int64_t bytes = 0;
  };
  Expected<WeightLayout> weight_layout(size_t kernel_index, uint32_t device_index, const OpDesc& op,
                                       size_t input) const;
  // Writes weight `desc` (stored, at host memory src) in layout `layout` to dst (dst_bytes of
  // the device's memory).
  std::optional<Error> pack_weight(uint32_t device_index, uint32_t layout, const TensorDesc& desc,
                                   const void* src, void* dst, uint64_t dst_bytes) const;
  // Releases a kernel from prepare (the 1.2 struct form when the plugin has it).
  void release(sy_kernel* kernel) const;
  // Whether optional slot `field_end` (its table offset + size) is callable: the negotiated
  // minor reaches `minor`, the table covers it, and (checked by the caller) it is non-NULL.
  bool slot_in_table(uint32_t minor, size_t field_end) const {
    return api_ && negotiated_minor_ >= minor && api_->struct_size >= field_end;
  }

  const sy_plugin_api& api() const { return *api_; }
  sy_plugin* instance() const { return instance_; }

 private:
  friend class PluginLoader;
  Plugin() = default;

  boost::dll::shared_library library_;
  HostBinding* host_binding_ = nullptr;  // owned by the loader for the process
  const sy_plugin_api* api_ = nullptr;
  sy_plugin* instance_ = nullptr;
  uint32_t negotiated_minor_ = 0;
  std::string name_, version_;
  std::filesystem::path path_;
  std::vector<DeviceInfo> devices_;
  std::string no_devices_reason_;
  std::vector<Envelope> kernels_;
  PluginVerification verification_;
  uint32_t manifest_abi_[2] = {0, 0};  // a manifest-declared plugin's abi_version
  std::vector<std::string> extensions_;
  const sy_segment_extension* segments_ = nullptr;
  const sy_weight_layout_extension* layouts_ = nullptr;
  void find_extensions();  // from a live plugin's list (plugin.cpp)
};

// A host-owned error buffer for one call into a plugin.
class ErrorText {
 public:
  ErrorText() {
    buffer_.struct_size = sizeof(buffer_);
    buffer_.text = text_;
    buffer_.capacity = sizeof(text_);
  }
  sy_error_buffer* buffer() { return &buffer_; }
  std::string str() const { return text_; }

 private:
  char text_[1024] = {};
  sy_error_buffer buffer_{};
};

// "UNSUPPORTED: message" for a status a plugin returned, robust to values outside the set.
std::string describe_status(int status, const ErrorText& err);

// The Error of a plugin's non-OK answer at run time: the catalog code its status maps to
// (errc_for_plugin_status), the status, "STATUS: message", where = the plugin's name.
Error plugin_error(const Plugin& plugin, int status, const ErrorText& err);

}  // namespace sy
