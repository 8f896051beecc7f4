// cxx_edge — header-only helpers for plugins written in C++, at the ABI's edge.
//
// Offers: guarded(), which turns any C++ exception into a status and message so none
// crosses the ABI (StatusError picks the status); KernelEntry tables and check_against_table(), the
// standard `check` (the shared envelope filters, then the kernel's own narrowing filters); and a
// logger bound to the host's callback; OpCopy (op_copy.hpp), an owned copy of an operator. Depends
// on abi/ only; a plugin never links the core.
#pragma once

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <new>
#include <stdexcept>
#include <string>

#include "switchyard/envelope_check.h"

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

// A kernel's declared envelope and the filters it adds on top (NULL when none).
struct KernelEntry {
  const sy_kernel_envelope* envelope;
  int (*narrow)(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add, void* ctx);
};

using NarrowFn = int (*)(const sy_device_desc*, const sy_op_desc*, sy_refusal_fn, void*);

constexpr uint64_t feature_mask(std::initializer_list<sy_feature> features) {
  uint64_t m = 0;
  for (auto f : features) m |= SY_FEATURE_BIT(f);
  return m;
}

// A plugin's kernels: entries for check, and the pointer array get_kernels returns.
template <size_t N>
struct KernelTable {
  KernelEntry entries[N];
  const sy_kernel_envelope* pointers[N];
  KernelTable(const sy_kernel_envelope (&envelopes)[N], NarrowFn narrow_all) {
    for (size_t i = 0; i < N; ++i) {
      entries[i] = {&envelopes[i], narrow_all};
      pointers[i] = &envelopes[i];
    }
  }
};

// The envelope filters, then the kernel's narrowing filters: the one test `check` and
// `prepare` both apply. Returns the number of refusals reported.
inline int apply_entry(const KernelEntry& k, const sy_device_desc* device, const sy_op_desc* op,
                       sy_refusal_fn add, void* ctx) {
  int n = sy_envelope_check(k.envelope, device, op, add, ctx);
  if (k.narrow && op->op == k.envelope->op) n += k.narrow(device, op, add, ctx);
  return n;
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

// The standard `check`: validates the arguments, then applies the envelope and the
// kernel's narrowing filters, reporting every refusal. `prepare` must call the same.
inline sy_status check_against_table(const char* plugin, const KernelEntry* table, size_t count,
                                     sy_check_args* args, sy_error_buffer* err) {
  return guarded(plugin, err, [&] {
    if (!args || args->struct_size < SY_STRUCT_SIZE_MIN(sy_check_args, accepted) || !args->op ||
        !args->device)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "%s: sy_check_args is NULL or undersized",
                     plugin);
    if (args->kernel_index >= count)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "%s: kernel index %u out of range (%zu)",
                     plugin, args->kernel_index, count);
    args->accepted = apply_entry(table[args->kernel_index], args->device, args->op,
                                 args->add_refusal, args->refusal_context) == 0;
    return SY_STATUS_OK;
  });
}

// Logging through the host; silent until the host gave a callback.
class HostLog {
 public:
  void bind(const sy_host_info* host) {
    if (host && host->struct_size >= SY_STRUCT_SIZE_MIN(sy_host_info, log)) host_ = host;
  }
  void operator()(sy_log_level level, const std::string& message) const {
    if (host_ && host_->log) host_->log(host_->host_context, level, message.c_str());
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
