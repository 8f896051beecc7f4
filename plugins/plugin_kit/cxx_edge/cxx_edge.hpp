// cxx_edge — header-only helpers for plugins written in C++, at the ABI's edge.
//
// Part of the plugin kit (Switchyard::plugin_kit), installed for third-party plugins.
//
// Offers: guarded(), which turns any C++ exception into a status and message so none crosses
// the ABI (StatusError picks the status); KernelEntry and check_against_table(), the standard
// `check` (the envelope filters, the operator contract, then the kernel's own limits); a logger
// bound to the host's callback; OpCopy (op_copy.hpp), an owned copy of an operator; and the
// whole C++ edge of a plugin (plugin_edge.hpp). Depends on abi/ only (and the operator contract
// library); a plugin never links the core.
#pragma once

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <new>
#include <stdexcept>
#include <string>

#include "switchyard/envelope_check.h"
#include "switchyard/op_contract.h"

namespace sy::edge {

// Thrown inside a plugin to return a specific status (e.g. INVALID_ARGUMENT for a write
// past a cache's capacity); guarded() turns it into that status and message.
struct StatusError : std::runtime_error {
  StatusError(sy_status s, const std::string& message) : std::runtime_error(message), status(s) {}
  sy_status status;
};

template <typename Fn>
sy_status guarded(const char* plugin, sy_error_buffer* err, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const StatusError& e) {
    return sy_fail(err, e.status, "%s: %s", plugin, e.what());
  } catch (const std::bad_alloc&) {
    return sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "%s: out of memory", plugin);
  } catch (const std::exception& e) {
    return sy_fail(err, SY_STATUS_INTERNAL, "%s: %s", plugin, e.what());
  } catch (...) {
    return sy_fail(err, SY_STATUS_INTERNAL, "%s: unknown exception", plugin);
  }
}

using NarrowFn = int (*)(const sy_device_desc*, const sy_op_desc*, sy_refusal_fn, void*);
// Bytes a kernel prepared for `op` holds until release beyond its operands (ABI 1.4's
// sy_check_args.workspace_bytes): what its prepare will allocate, computed from the op alone.
using WorkspaceFn = uint64_t (*)(const sy_device_desc*, const sy_op_desc*);

// The packed layout (ABI 1.10, sy_tensor_desc.layout) a kernel wants for weight input `input`
// of `op`, read from the op's dtypes and shapes only (never from its layouts), with its bytes
// and a static description; 0 keeps the stored layout.
struct WeightLayout {
  uint32_t id = 0;
  uint64_t bytes = 0;
  const char* name = nullptr;
};
using LayoutFn = WeightLayout (*)(const sy_device_desc*, const sy_op_desc*, uint32_t input);

// A kernel's declared envelope, the limits of its own it adds on top of the envelope and the
// operator contract (NULL when none), its workspace (NULL: none) and the layouts it packs its
// weights in (NULL: none; it reads every operand as stored).
struct KernelEntry {
  const sy_kernel_envelope* envelope;
  NarrowFn limits;
  WorkspaceFn workspace = nullptr;
  LayoutFn layout = nullptr;
};

// The rule of sy_tensor_desc.layout: an input in a packed layout is refused unless it is the
// very layout the kernel names for it. Returns the number of refusals.
inline int refuse_foreign_layouts(const KernelEntry& k, const sy_device_desc* device,
                                  const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  int n = 0;
  for (size_t i = 0; i < op->num_inputs; ++i) {
    const uint32_t given = sy_tensor_layout(op->inputs[i]);
    if (given == 0) continue;
    const uint32_t wanted = k.layout ? k.layout(device, op, uint32_t(i)).id : 0;
    if (given == wanted) continue;
    const std::string have = std::to_string(given), own = std::to_string(wanted);
    const std::string text =
        "input " + std::to_string(i) + " comes in packed layout " + have + ", which " +
        k.envelope->kernel + " does not read (" +
        (wanted ? "it packs this input as layout " + own : "it reads this input as stored") + ")";
    n += sy_refuse(add, ctx, "layout", have.c_str(), own.c_str(), text.c_str());
  }
  return n;
}

constexpr uint64_t feature_mask(std::initializer_list<sy_feature> features) {
  uint64_t m = 0;
  for (auto f : features) m |= SY_FEATURE_BIT(f);
  return m;
}

// The envelope filters, the operator contract (switchyard/op_contract.h) and the kernel's own
// limits: the one test `check` and `prepare` both apply. Returns the number of refusals.
inline int apply_entry(const KernelEntry& k, const sy_device_desc* device, const sy_op_desc* op,
                       sy_refusal_fn add, void* ctx) {
  int n = sy_envelope_check(k.envelope, device, op, add, ctx);
  if (op->op != k.envelope->op) return n;
  n += sy_op_contract_check(op, add, ctx);
  if (k.limits) n += k.limits(device, op, add, ctx);
  return n + refuse_foreign_layouts(k, device, op, add, ctx);
}

// `prepare`'s side of the same test: UNSUPPORTED with every reason joined, or OK.
inline sy_status refuse_unless_accepted(const KernelEntry& k, const sy_device_desc* device,
                                        const sy_op_desc* op, sy_error_buffer* err) {
  std::string reasons;
  auto append = [](void* ctx, const sy_refusal* r) {
    auto* text = static_cast<std::string*>(ctx);
    *text += std::string(text->empty() ? "" : "; ") + (r->text ? r->text : r->constraint);
  };
  if (apply_entry(k, device, op, append, &reasons) == 0) return SY_STATUS_OK;
  return sy_fail(err, SY_STATUS_UNSUPPORTED, "%s refuses: %s", k.envelope->kernel, reasons.c_str());
}

// The standard `check`: validates the arguments, then applies apply_entry, reporting every
// refusal. `prepare` must apply the same (refuse_unless_accepted).
inline sy_status check_against_table(const char* plugin, const KernelEntry* table, size_t count,
                                     sy_check_args* args, sy_error_buffer* err) {
  return guarded(plugin, err, [&] {
    if (!args || args->struct_size < SY_CHECK_ARGS_SIZE_MINOR_0 || !args->op || !args->device)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "%s: sy_check_args is NULL or undersized",
                     plugin);
    if (args->kernel_index >= count)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "%s: kernel index %u out of range (%zu)",
                     plugin, args->kernel_index, count);
    const KernelEntry& k = table[args->kernel_index];
    args->accepted =
        apply_entry(k, args->device, args->op, args->add_refusal, args->refusal_context) == 0;
#if SY_ABI_COMPAT_MINOR >= 4
    if (args->struct_size >= SY_CHECK_ARGS_SIZE_MINOR_4)  // an older host's struct has no field
      args->workspace_bytes =
          args->accepted && k.workspace ? k.workspace(args->device, args->op) : 0;
#endif
    return SY_STATUS_OK;
  });
}

// Logging through the host; silent until the host gave a callback. A plugin keeps one per
// instance, bound from sy_init_args.host (ABI 1.2) or, under an older host, from the host info
// its entry received.
class HostLog {
 public:
  void bind(const sy_host_info* host) {
    if (host && host->struct_size >= SY_HOST_INFO_SIZE_MINOR_0 && host->log) host_ = host;
  }
  // The host of init's arguments when they carry one, else `entry_host`.
  void bind(const sy_init_args* args, const sy_host_info* entry_host) {
#if SY_ABI_COMPAT_MINOR >= 2
    if (args && args->struct_size >= SY_INIT_ARGS_SIZE_MINOR_2 && args->host) {
      bind(args->host);
      return;
    }
#endif
    (void)args;
    bind(entry_host);
  }
  void operator()(sy_log_level level, const std::string& message) const {
    if (host_) host_->log(host_->host_context, level, message.c_str());
  }

 private:
  const sy_host_info* host_ = nullptr;
};

// Value of option `key` from init's key/value arrays, or `fallback`.
inline std::string init_option(const sy_init_args* args, const char* key, std::string fallback) {
  for (size_t i = 0; i < args->num_options; ++i)
    if (args->option_keys[i] && args->option_values[i] && std::string(args->option_keys[i]) == key)
      return args->option_values[i];
  return fallback;
}

}  // namespace sy::edge
