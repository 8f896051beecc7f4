// The ABI edge of a plugin written in C++, once: get_devices, get_kernels, check, prepare,
// execute, release and destroy, each guarded (no exception crosses), each validating its
// arguments, prepare applying exactly check's test. A plugin supplies its own `init`, its
// devices and kernels, and gets the rest from Edge<sy_plugin>::fill(api).
//
// The plugin's `struct sy_plugin` provides:
//
//   using Impl = ...;     // its kernel interface; Impl::run(inputs, outputs) may throw
//   using Context = ...;  // what a factory needs besides the operator
//   static constexpr const char* kName;
//   static const KernelList<Impl, Context>& kernels();
//   // Its devices, and why there are none when the list is empty (NULL otherwise).
//   const sy_device_desc* const* device_list(size_t* count, const char** no_devices_reason) const;
//   // OK when device `index` can run kernels now; INVALID_ARGUMENT / UNAVAILABLE otherwise.
//   sy_status ready(uint32_t index, sy_error_buffer* err) const;
//   // Fills the factory's context for kernel `kernel` on device `index` (may load a library).
//   sy_status context(size_t kernel, uint32_t index, Context& ctx, sy_error_buffer* err);
//
// Part of the plugin kit (Switchyard::plugin_kit).
#pragma once

#include <memory>

#include "cxx_edge/cxx_edge.hpp"
#include "cxx_edge/op_copy.hpp"

namespace sy::edge {

// Builds a kernel for an operator that passed the kernel's check. May throw.
template <class Impl, class Context>
using Factory = std::unique_ptr<Impl> (*)(const OpCopy& op, const Context& ctx);

// One kernel of a plugin: its declared envelope, its limits beyond the envelope and the
// operator contract (NULL: none), its factory, and what it holds from prepare to release beyond
// its operands (NULL: nothing). A plugin lists one row per kernel (KernelSet).
template <class Impl, class Context>
struct KernelRow {
  sy_kernel_envelope envelope;
  NarrowFn limits;
  Factory<Impl, Context> make;
  WorkspaceFn workspace;
  LayoutFn layout = nullptr;
};

// A plugin's kernels as check, prepare and get_kernels read them: the entries check uses, the
// envelope pointers get_kernels returns, and one factory each, in the rows' order.
template <class Impl, class Context>
struct KernelList {
  const KernelEntry* entries;
  const sy_kernel_envelope* const* envelopes;
  const Factory<Impl, Context>* factories;
  size_t count;
};

// The KernelList of N rows. The rows must outlive it (a plugin keeps both static).
template <class Impl, class Context, size_t N>
struct KernelSet {
  KernelEntry entries[N];
  const sy_kernel_envelope* envelopes[N];
  Factory<Impl, Context> factories[N];

  explicit KernelSet(const KernelRow<Impl, Context> (&rows)[N]) {
    for (size_t i = 0; i < N; ++i) {
      entries[i] = {&rows[i].envelope, rows[i].limits, rows[i].workspace, rows[i].layout};
      envelopes[i] = &rows[i].envelope;
      factories[i] = rows[i].make;
    }
  }
  KernelList<Impl, Context> list() const { return {entries, envelopes, factories, N}; }
};

template <class P>
class Edge {
  using Impl = typename P::Impl;
  using Context = typename P::Context;

 public:
  static sy_status get_devices(sy_get_devices_args* args, sy_error_buffer* err) {
    if (!args || args->struct_size < SY_GET_DEVICES_ARGS_SIZE_MINOR_0 || !args->plugin)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                     "%s: sy_get_devices_args is NULL or undersized", P::kName);
    args->devices =
        static_cast<P*>(args->plugin)->device_list(&args->num_devices, &args->no_devices_reason);
    return SY_STATUS_OK;
  }

  static sy_status get_kernels(sy_get_kernels_args* args, sy_error_buffer* err) {
    if (!args || args->struct_size < SY_GET_KERNELS_ARGS_SIZE_MINOR_0)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                     "%s: sy_get_kernels_args is NULL or undersized", P::kName);
    args->kernels = P::kernels().envelopes;
    args->num_kernels = P::kernels().count;
    return SY_STATUS_OK;
  }

  static sy_status check(sy_check_args* args, sy_error_buffer* err) {
    return check_against_table(P::kName, P::kernels().entries, P::kernels().count, args, err);
  }

  // What a sy_kernel* stands for: the operator it was prepared for and its implementation.
  struct Prepared {
    std::unique_ptr<OpCopy> op;
    std::unique_ptr<Impl> impl;
    std::unique_ptr<ActualOpView> actual;  // when some extent varies per execute (ABI 1.5)
  };
  static Prepared* prepared(sy_kernel* k) { return reinterpret_cast<Prepared*>(k); }

  // Prepares kernel `kernel_index` for `op` on device `device_index` after exactly check's
  // test (the dispatcher cannot drift from the declaration): prepare's body, and each kernel
  // entry of a segment's (segment_edge.hpp). Returns the status; `out` is set on OK.
  static sy_status prepare_one(P& p, uint32_t device_index, uint32_t kernel_index,
                               const sy_op_desc* op, std::unique_ptr<Prepared>& out,
                               sy_error_buffer* err) {
    if (sy_status s = p.ready(device_index, err); s != SY_STATUS_OK) return s;
    const auto& kernels = P::kernels();
    if (kernel_index >= kernels.count)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "kernel index %u out of range (%zu)",
                     kernel_index, kernels.count);
    size_t n = 0;
    const char* reason = nullptr;
    const sy_device_desc* device = p.device_list(&n, &reason)[device_index];
    const KernelEntry& k = kernels.entries[kernel_index];
    if (sy_status s = refuse_unless_accepted(k, device, op, err); s != SY_STATUS_OK) return s;
    Context ctx{};
    if (sy_status s = p.context(kernel_index, device_index, ctx, err); s != SY_STATUS_OK) return s;
    auto kernel = std::make_unique<Prepared>();
    kernel->op = std::make_unique<OpCopy>(*op);
    if (kernel->op->dynamic()) kernel->actual = std::make_unique<ActualOpView>(*kernel->op);
    kernel->impl = kernels.factories[kernel_index](*kernel->op, ctx);
    out = std::move(kernel);
    return SY_STATUS_OK;
  }

  static sy_status prepare(sy_prepare_args* args, sy_error_buffer* err) {
    return guarded(P::kName, err, [&] {
      if (!args || args->struct_size < SY_PREPARE_ARGS_SIZE_MINOR_0 || !args->op || !args->plugin)
        return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_prepare_args is NULL or undersized");
      std::unique_ptr<Prepared> kernel;
      if (sy_status s = prepare_one(*static_cast<P*>(args->plugin), args->device_index,
                                    args->kernel_index, args->op, kernel, err);
          s != SY_STATUS_OK)
        return s;
      args->kernel = reinterpret_cast<sy_kernel*>(kernel.release());
      return SY_STATUS_OK;
    });
  }

  static sy_status execute(sy_execute_args* args, sy_error_buffer* err) {
    return guarded(P::kName, err, [&] {
      if (!args || args->struct_size < SY_EXECUTE_ARGS_SIZE_MINOR_0 || !args->kernel)
        return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_execute_args is NULL or undersized");
      Prepared* k = prepared(args->kernel);
      if (sy_status s = validate_execute_args(*k->op, *args, err, k->actual.get());
          s != SY_STATUS_OK)
        return s;
      k->impl->run(args->inputs, args->outputs);
      return SY_STATUS_OK;
    });
  }

  static void release(sy_plugin*, sy_kernel* kernel) { delete prepared(kernel); }
  static void shutdown(sy_plugin* plugin) { delete plugin; }
#if SY_ABI_COMPAT_MINOR >= 2
  static void release_kernel(sy_release_kernel_args* args) {
    if (args && args->struct_size >= SY_RELEASE_KERNEL_ARGS_SIZE_MINOR_2)
      release(args->plugin, args->kernel);
  }
  static void destroy(sy_destroy_args* args) {
    if (args && args->struct_size >= SY_DESTROY_ARGS_SIZE_MINOR_2) shutdown(args->plugin);
  }
#endif

  // Every slot above, into a table whose header and init the plugin fills.
  static constexpr void fill(sy_plugin_api& api) {
    api.shutdown = shutdown;
    api.get_devices = get_devices;
    api.get_kernels = get_kernels;
    api.check = check;
    api.prepare = prepare;
    api.execute = execute;
    api.release = release;
#if SY_ABI_COMPAT_MINOR >= 2
    api.destroy = destroy;
    api.release_kernel = release_kernel;
#endif
  }
};

#if SY_ABI_COMPAT_MINOR >= 10
// The weight-layouts extension (plugin_api.h, ABI 1.10) of a plugin whose kernels name packed
// layouts (KernelRow::layout): weight_layout answers from the chosen kernel's row, pack_weight
// hands the checked arguments to the plugin's
//
//   static sy_status pack_weight(const sy_pack_weight_args& args, sy_error_buffer* err);
//
// which returns INVALID_ARGUMENT for a layout or weight it would not have named.
template <class P>
struct LayoutEdge {
  static sy_status weight_layout(sy_weight_layout_args* args, sy_error_buffer* err) {
    return guarded(P::kName, err, [&] {
      if (!args || args->struct_size < SY_WEIGHT_LAYOUT_ARGS_SIZE_MINOR_10 || !args->plugin ||
          !args->op)
        return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                       "sy_weight_layout_args is NULL or undersized");
      const auto& kernels = P::kernels();
      if (args->kernel_index >= kernels.count || args->input >= args->op->num_inputs)
        return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                       "kernel %u or input %u out of range (%zu kernels, %zu inputs)",
                       args->kernel_index, args->input, kernels.count, args->op->num_inputs);
      size_t n = 0;
      const char* reason = nullptr;
      const sy_device_desc* const* devices =
          static_cast<P*>(args->plugin)->device_list(&n, &reason);
      if (args->device_index >= n)
        return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "device %u does not exist",
                       args->device_index);
      args->layout = 0;
      args->packed_bytes = 0;
      args->name = nullptr;
      const KernelEntry& k = kernels.entries[args->kernel_index];
      if (!k.layout) return SY_STATUS_OK;
      const WeightLayout l = k.layout(devices[args->device_index], args->op, args->input);
      args->layout = l.id;
      args->packed_bytes = l.bytes;
      args->name = l.name;
      return SY_STATUS_OK;
    });
  }

  static sy_status pack_weight(sy_pack_weight_args* args, sy_error_buffer* err) {
    return guarded(P::kName, err, [&] {
      if (!args || args->struct_size < SY_PACK_WEIGHT_ARGS_SIZE_MINOR_10 || !args->plugin ||
          !args->desc || !args->src || !args->dst)
        return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                       "sy_pack_weight_args is NULL, undersized or without data");
      return P::pack_weight(*args, err);
    });
  }

  static constexpr sy_weight_layout_extension extension() {
    sy_weight_layout_extension e{};
    e.header.struct_size = sizeof(e);
    e.header.type = SY_EXTENSION_TYPE_WEIGHT_LAYOUTS;
    e.header.next = nullptr;
    e.weight_layout = weight_layout;
    e.pack_weight = pack_weight;
    return e;
  }
};
#endif

}  // namespace sy::edge
