// The stages of loading a plugin. Each returns a LoadDiagnostic on failure; nothing a
// plugin does wrong is allowed to escape as an exception or to be silently ignored.
#include "core/plugin/loader.hpp"

#include <dlfcn.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <boost/dll/shared_library.hpp>
#include <deque>
#include <mutex>
#include <regex>

#include "core/plugin/capability_probe.hpp"
#include "core/plugin/load_probe.hpp"
#include "core/plugin/manifest.hpp"

namespace sy {
namespace {

namespace fs = std::filesystem;

spdlog::level::level_enum to_spdlog(sy_log_level level) {
  switch (level) {
    case SY_LOG_TRACE: return spdlog::level::trace;
    case SY_LOG_DEBUG: return spdlog::level::debug;
    case SY_LOG_INFO: return spdlog::level::info;
    case SY_LOG_WARN: return spdlog::level::warn;
    default: return spdlog::level::err;
  }
}

void host_log(void* context, sy_log_level level, const char* message) {
  auto* ctx = static_cast<PluginHostContext*>(context);
  (ctx && ctx->logger ? ctx->logger : core_logger())
      ->log(to_spdlog(level), "[{}] {}", ctx ? ctx->plugin_label : "plugin",
            message ? message : "");
}

// Host bindings live for the process (see HostBinding); a deque keeps their addresses
// stable and keeps them reachable, so leak checkers see an owner, not a leak.
HostBinding* new_host_binding() {
  static std::mutex mutex;
  static std::deque<HostBinding> bindings;
  std::lock_guard<std::mutex> lock(mutex);
  return &bindings.emplace_back();
}

// The catalog code of a failure at `stage` (SY101..SY106, in stage order).
Errc stage_code(LoadStage stage) {
  return static_cast<Errc>(static_cast<int>(Errc::plugin_open) + static_cast<int>(stage));
}

}  // namespace

Errc LoadDiagnostic::code() const {
  return stage_code(stage);
}

// Friend of Plugin: fills its private state stage by stage.
class PluginLoader {
 public:
  PluginLoader(const fs::path& path, const LoadOptions& options)
      : path_(path), options_(options), plugin_(new Plugin()) {
    plugin_->path_ = path;
  }

  LoadOutcome run() {
    LoadOutcome out;
    auto fail = run_stages();
    out.name = plugin_->name_;
    if (fail) {
      out.diagnostic = LoadDiagnostic{path_, stage_of(*fail), fail->message, fail->hint};
      return out;
    }
    out.plugin = std::move(plugin_);
    return out;
  }

 private:
  std::optional<Error> run_stages() {
    sha256_ = file_sha256(path_);
    if (options_.probe_load)
      if (auto e = probe_load()) return e;
    if (auto e = open()) return e;
    if (auto e = entry()) return e;
    if (auto e = abi()) return e;
    if (auto e = unique_name()) return e;
    if (auto e = init()) return e;
    if (auto e = declarations()) return e;
    if (options_.require_manifest)
      if (auto e = manifest()) return e;
    if (options_.probe_capabilities)
      if (auto e = probe()) return e;
    std::vector<std::string> names;
    for (const Envelope& k : plugin_->kernels_) names.push_back(k.kernel);
    plugin_->verification_ = read_verification(path_, names, sha256_);
    return std::nullopt;
  }

  // A child opens the library first: a signal there is this plugin's failure, not the host's.
  std::optional<Error> probe_load() {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0 || (st.st_mode & S_IWOTH)) return std::nullopt;  // open's
    const ProbeOutcome p = probe_library_load(path_, sha256_);
    logger_of(options_)->debug("load probe of {}: {} in {:.1f} ms", path_.string(),
                               p.failure  ? "failed"
                               : p.cached ? "remembered pass"
                                          : "passed",
                               p.ms);
    if (!p.failure) return std::nullopt;
    return stage_error(LoadStage::probe, p.failure->reason, p.failure->hint);
  }

  std::optional<Error> open() {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0)
      return stage_error(LoadStage::open, "no such file", "check the path");
    if (st.st_mode & S_IWOTH)
      return stage_error(LoadStage::open, "refused: the file is world-writable",
                         "chmod o-w " + path_.string());
    // RTLD_NODELETE: plugins carry static runtimes (CUDA, OpenMP) whose exit handlers
    // must still be mapped when the process ends, so a plugin is never unmapped.
    auto mode = static_cast<boost::dll::load_mode::type>(RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    boost::dll::fs::error_code ec;
    plugin_->library_.load(path_, mode, ec);
    if (ec) {
      // Boost.DLL 1.74 clears dlerror() before reporting, so ask the dynamic linker once
      // more for its own words (missing dependency, wrong ELF class, not an ELF file).
      void* h = ::dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
      std::string reason = h ? ec.message() : std::string(::dlerror());
      if (h) ::dlclose(h);
      return stage_error(LoadStage::open, reason,
                         "is it a shared object built for this machine, with its dependencies "
                         "on the library path?");
    }
    return std::nullopt;
  }

  std::optional<Error> entry() {
    if (!plugin_->library_.has(SY_PLUGIN_ENTRY_SYMBOL))
      return stage_error(LoadStage::entry,
                         std::string("no symbol '") + SY_PLUGIN_ENTRY_SYMBOL + "' exported",
                         "export it with C linkage and default visibility (SY_EXPORT)");
    auto fn =
        plugin_->library_.get<const sy_plugin_api*(const sy_host_info*)>(SY_PLUGIN_ENTRY_SYMBOL);
    HostBinding* binding = new_host_binding();
    binding->context.plugin_label = path_.filename().string();
    binding->context.logger = options_.logger;
    sy_host_info& info = binding->info;
    info.struct_size = sizeof(sy_host_info);
    info.abi_major = kHostAbiMajor;
    info.abi_minor = kHostAbiMinor;
    info.abi_minor_min = kHostAbiMinorMin;
    info.host_version = "switchyard " SWITCHYARD_VERSION;
    info.host_context = &binding->context;
    info.log = host_log;
    plugin_->host_binding_ = binding;
    plugin_->api_ = fn(&binding->info);
    if (!plugin_->api_)
      return stage_error(LoadStage::entry, "sy_plugin_entry returned NULL",
                         "the plugin refused this host; see its log messages");
    return std::nullopt;
  }

  std::optional<Error> abi() {
    const sy_plugin_api* api = plugin_->api_;
    std::string host = std::to_string(kHostAbiMajor) + "." + std::to_string(kHostAbiMinorMin) +
                       ".." + std::to_string(kHostAbiMinor);
    if (api->struct_size < SY_STRUCT_SIZE_MIN(sy_plugin_api, plugin_version))
      return stage_error(LoadStage::abi,
                         "function table struct_size " + std::to_string(api->struct_size) +
                             " is too small to hold even the version fields",
                         "set struct_size = sizeof(sy_plugin_api)");
    std::string plugin_ver = std::to_string(api->abi_major) + "." + std::to_string(api->abi_minor);
    if (api->abi_major != kHostAbiMajor)
      return stage_error(LoadStage::abi, "plugin ABI " + plugin_ver + ", host accepts ABI " + host,
                         api->abi_major > kHostAbiMajor
                             ? "upgrade switchyard, or rebuild the plugin against ABI " +
                                   std::to_string(kHostAbiMajor) + ".x headers"
                             : "rebuild the plugin against the ABI " +
                                   std::to_string(kHostAbiMajor) + ".x headers");
    if (api->abi_minor < kHostAbiMinorMin)
      return stage_error(LoadStage::abi, "plugin ABI " + plugin_ver + " is older than " + host,
                         "rebuild the plugin");
    plugin_->negotiated_minor_ = std::min(api->abi_minor, kHostAbiMinor);
    // Minors 3 to 10 added no slot (3: block-quantized dtypes and envelope weight dtypes; 4:
    // the check's workspace_bytes output; 5: dynamic extents, the varlen and paged forms; 6:
    // the dtypes q5_0, q5_1, iq4_nl, iq4_xs, q2_k, q3_k; 7: mxfp4, moe_router, moe_experts;
    // 8: the activation_q8 feature; 9: the activation_q16 feature; 10: sy_tensor_desc.layout
    // and the weight-layouts extension).
    constexpr size_t kTableSize[] = {
        SY_PLUGIN_API_SIZE_MINOR_0, SY_PLUGIN_API_SIZE_MINOR_1, SY_PLUGIN_API_SIZE_MINOR_2,
        SY_PLUGIN_API_SIZE_MINOR_2, SY_PLUGIN_API_SIZE_MINOR_2, SY_PLUGIN_API_SIZE_MINOR_2,
        SY_PLUGIN_API_SIZE_MINOR_2, SY_PLUGIN_API_SIZE_MINOR_2, SY_PLUGIN_API_SIZE_MINOR_2,
        SY_PLUGIN_API_SIZE_MINOR_2, SY_PLUGIN_API_SIZE_MINOR_2};
    static_assert(std::size(kTableSize) == kHostAbiMinor + 1, "one table size per minor");
    const size_t need = kTableSize[plugin_->negotiated_minor_];
    if (api->struct_size < need)
      return stage_error(LoadStage::abi,
                         "function table struct_size " + std::to_string(api->struct_size) +
                             " is smaller than " + std::to_string(need) + " required for ABI " +
                             std::to_string(kHostAbiMajor) + "." +
                             std::to_string(plugin_->negotiated_minor_),
                         "set struct_size = sizeof(sy_plugin_api) from the headers you build with");
    const char* missing = !api->init          ? "init"
                          : !api->shutdown    ? "shutdown"
                          : !api->get_devices ? "get_devices"
                          : !api->get_kernels ? "get_kernels"
                          : !api->check       ? "check"
                                              : nullptr;
    if (missing)
      return stage_error(LoadStage::abi, std::string("required slot '") + missing + "' is NULL",
                         "every minor-0 required slot must be set");
    static const std::regex kName("[a-z0-9_]+");
    if (!api->plugin_name || !std::regex_match(api->plugin_name, kName))
      return stage_error(LoadStage::abi, "plugin_name is missing or not [a-z0-9_]+",
                         "name the plugin in lower case");
    plugin_->name_ = api->plugin_name;
    plugin_->version_ = api->plugin_version ? api->plugin_version : "";
    plugin_->find_extensions();
    plugin_->host_binding_->context.plugin_label = plugin_->name_;
    return std::nullopt;
  }

  // A second plugin of a name already loaded is refused before its init runs: two instances
  // of one plugin would fight over its devices.
  std::optional<Error> unique_name() {
    if (!options_.loaded_from) return std::nullopt;
    std::optional<std::filesystem::path> first = options_.loaded_from(plugin_->name_);
    if (!first) return std::nullopt;
    return stage_error(
        LoadStage::entry,
        "duplicate plugin name '" + plugin_->name_ + "', already loaded from " + first->string(),
        "remove one copy or reorder the search path");
  }

  std::optional<Error> init() {
    std::vector<const char*> keys, values;
    for (const auto& [k, v] : options_.init_options) {
      keys.push_back(k.c_str());
      values.push_back(v.c_str());
    }
    sy_init_args args{};
    args.struct_size = sizeof(args);
    args.option_keys = keys.data();
    args.option_values = values.data();
    args.num_options = keys.size();
    args.host = &plugin_->host_binding_->info;
    ErrorText err;
    int status = plugin_->api_->init(&args, err.buffer());
    if (status != SY_STATUS_OK)
      return stage_error(LoadStage::init, "init failed: " + describe_status(status, err),
                         "see the plugin's log messages (--log-level debug)");
    if (!args.plugin)
      return stage_error(LoadStage::init, "init returned OK but no instance", "set args->plugin");
    plugin_->instance_ = args.plugin;
    return std::nullopt;
  }

  // Reads devices and kernel envelopes into host values, validating every struct.
  std::optional<Error> declarations() {
    auto fail = [this](std::string why) {
      return stage_error(LoadStage::init, std::move(why), "fix the plugin's declarations");
    };
    sy_get_devices_args dev{};
    dev.struct_size = sizeof(dev);
    dev.plugin = plugin_->instance_;
    ErrorText err;
    int status = plugin_->api_->get_devices(&dev, err.buffer());
    if (status != SY_STATUS_OK) return fail("get_devices failed: " + describe_status(status, err));
    for (size_t i = 0; i < dev.num_devices; ++i) {
      const sy_device_desc* d = dev.devices ? dev.devices[i] : nullptr;
      if (!d || d->struct_size < SY_DEVICE_DESC_SIZE_MINOR_0 || !d->name)
        return fail("device #" + std::to_string(i) + " is NULL, unnamed or undersized");
      plugin_->devices_.push_back(DeviceInfo::from_abi(*d));
    }
    if (dev.num_devices == 0)
      plugin_->no_devices_reason_ =
          dev.no_devices_reason ? dev.no_devices_reason : "the plugin gave no reason";

    sy_get_kernels_args ker{};
    ker.struct_size = sizeof(ker);
    ker.plugin = plugin_->instance_;
    status = plugin_->api_->get_kernels(&ker, err.buffer());
    if (status != SY_STATUS_OK) return fail("get_kernels failed: " + describe_status(status, err));
    for (size_t i = 0; i < ker.num_kernels; ++i) {
      const sy_kernel_envelope* e = ker.kernels ? ker.kernels[i] : nullptr;
      if (!e || e->struct_size < SY_KERNEL_ENVELOPE_SIZE_MINOR_0 || !e->kernel || !e->family ||
          !sy_op_kind_name(e->op))
        return fail("kernel envelope #" + std::to_string(i) +
                    " is NULL, undersized, unnamed or of an unknown op");
      // An op kind its ABI minor did not have yet is a value the plugin cannot mean.
      if (e->op >= SY_OP_MOE_ROUTER && plugin_->negotiated_minor_ < 7)
        return fail("kernel envelope #" + std::to_string(i) + " declares " +
                    sy_op_kind_name(e->op) + ", an operator of ABI 1.7, at ABI 1." +
                    std::to_string(plugin_->negotiated_minor_));
      plugin_->kernels_.push_back(Envelope::from_abi(*e, plugin_->negotiated_minor_));
    }
    return std::nullopt;
  }

  std::optional<Error> manifest() {
    fs::path file = manifest_path_for(path_);
    auto on_disk = read_manifest(file);
    if (!on_disk.error.empty())
      return stage_error(
          LoadStage::manifest, on_disk.error,
          "regenerate it: switchyard manifest " + path_.string() + " --output " + file.string());
    auto diffs = manifest_differences(on_disk.json, manifest_json(*plugin_));
    if (!diffs.empty()) {
      std::string reason = "manifest " + file.filename().string() +
                           " disagrees with the plugin's runtime declaration: " + diffs[0];
      if (diffs.size() > 1) reason += " (and " + std::to_string(diffs.size() - 1) + " more)";
      return stage_error(
          LoadStage::manifest, reason,
          "regenerate it: switchyard manifest " + path_.string() + " --output " + file.string());
    }
    return std::nullopt;
  }

  std::optional<Error> probe() {
    auto lie = find_capability_lie(*plugin_);
    if (!lie) return std::nullopt;
    return stage_error(LoadStage::capability, *lie,
                       "check() may only narrow the envelope; make it refuse what the envelope "
                       "excludes");
  }

  Error stage_error(LoadStage stage, std::string reason, std::string hint) const {
    return Error(stage_code(stage), std::move(reason), path_.string(), std::move(hint));
  }
  static LoadStage stage_of(const Error& e) {
    return static_cast<LoadStage>(static_cast<int>(e.code) - static_cast<int>(Errc::plugin_open));
  }

  fs::path path_;
  LoadOptions options_;
  std::unique_ptr<Plugin> plugin_;
  std::string sha256_;  // of the library's bytes: the probe's cache key and the verification's
};

LoadOutcome load_plugin(const fs::path& path, const LoadOptions& options) {
  return PluginLoader(path, options).run();
}

std::shared_ptr<spdlog::logger> logger_of(const LoadOptions& options) {
  return options.logger ? options.logger : core_logger();
}

std::shared_ptr<spdlog::logger> core_logger() {
  auto named = spdlog::get(kCoreLoggerName);
  return named ? named : spdlog::default_logger();
}

}  // namespace sy
