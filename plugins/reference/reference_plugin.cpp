// The reference plugin (reference_ops.hpp): one host device, one kernel per vocabulary op,
// every float dtype and every block-quantized weight type. Its envelopes carry a cost far above
// any real kernel's and it is built off the default search path, so a plan uses it only when a
// user names its folder. It never prints and never throws across the ABI (the kit's edge).
//
// Built a second time with SY_REFERENCE_REMOTE as the test plugin "remote_reference": the same
// kernels on an ext_dev device whose memory the host may not touch (host memory underneath),
// with alloc/copy/free and the segments extension, so the suite runs a whole model as one
// segment, uploads included, on machines without a GPU (tests/executor/segment_test.cpp).
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "cxx_edge/plugin_edge.hpp"
#include "cxx_edge/segment_edge.hpp"
#include "reference_ops.hpp"

#ifdef SY_REFERENCE_REMOTE
#define SY_REFERENCE_NAME "remote_reference"
#define SY_REFERENCE_DEVICE kDLExtDev
#else
#define SY_REFERENCE_NAME "reference"
#define SY_REFERENCE_DEVICE kDLCPU
#endif

namespace {

using sy::ref::Kernel;
using sy::ref::OpFn;

constexpr uint64_t bit(sy_dtype d) {
  return SY_DTYPE_BIT(d);
}
constexpr uint64_t kFloats = bit(SY_DTYPE_F32) | bit(SY_DTYPE_F16) | bit(SY_DTYPE_BF16);
constexpr uint64_t kInts = bit(SY_DTYPE_I32) | bit(SY_DTYPE_I64);
constexpr uint64_t kQuantized = bit(SY_DTYPE_Q8_0) | bit(SY_DTYPE_Q4_0) | bit(SY_DTYPE_Q4_1) |
                                bit(SY_DTYPE_Q4_K) | bit(SY_DTYPE_Q5_K) | bit(SY_DTYPE_Q6_K) |
                                bit(SY_DTYPE_Q5_0) | bit(SY_DTYPE_Q5_1) | bit(SY_DTYPE_IQ4_NL) |
                                bit(SY_DTYPE_IQ4_XS) | bit(SY_DTYPE_Q2_K) | bit(SY_DTYPE_Q3_K) |
                                bit(SY_DTYPE_MXFP4);
constexpr double kCost = 1000.0;  // last among any peers

constexpr uint64_t features(std::initializer_list<sy_feature> fs) {
  uint64_t m = 0;
  for (sy_feature f : fs) m |= SY_FEATURE_BIT(f);
  return m;
}

// Every kernel but the fused decode block (one token of a contiguous cache) runs on the actual
// extents of each execute (ABI 1.5 varlen).
constexpr sy_kernel_envelope envelope(const char* kernel, sy_op_kind op, uint64_t dtypes,
                                      uint64_t feats = 0, uint64_t weights = 0,
                                      const char* family = "generic") {
  sy_kernel_envelope e{};
  e.struct_size = sizeof e;
  e.kernel = kernel;
  e.op = op;
  e.family = family;
  e.device_type = SY_REFERENCE_DEVICE;
  e.dtypes = dtypes;
  e.features = feats | (op == SY_OP_FUSED_DECODE_ATTENTION ? 0 : SY_FEATURE_BIT(SY_FEATURE_VARLEN));
  e.default_residency = SY_RESIDENCY_DEVICE;  // its device's memory is host memory
  e.cost_hint = kCost;
  e.weight_dtypes = weights;
  return e;
}

struct Context {};

template <OpFn F>
std::unique_ptr<Kernel> make(const sy::edge::OpCopy& op, const Context&) {
  return std::make_unique<Kernel>(op, F);
}

// One kernel per op: nothing beyond the envelope and the contract, no workspace.
constexpr sy::edge::KernelRow<Kernel, Context> row(sy_kernel_envelope e,
                                                   sy::edge::Factory<Kernel, Context> make) {
  return {e, nullptr, make, nullptr};
}

const sy::edge::KernelRow<Kernel, Context> kRows[] = {
    row(envelope("matmul", SY_OP_MATMUL, kFloats, features({SY_FEATURE_TRANSPOSED_B}), kQuantized),
        make<sy::ref::matmul>),
    row(envelope("embedding", SY_OP_EMBEDDING, kFloats, 0, kQuantized), make<sy::ref::embedding>),
    row(envelope("rms_norm", SY_OP_RMS_NORM, kFloats), make<sy::ref::rms_norm>),
    row(envelope("layer_norm", SY_OP_LAYER_NORM, kFloats), make<sy::ref::layer_norm>),
    row(envelope("rope", SY_OP_ROPE, kFloats,
                 features({SY_FEATURE_ROPE_NEOX, SY_FEATURE_ROPE_INTERLEAVED,
                           SY_FEATURE_PARTIAL_ROTARY, SY_FEATURE_ROPE_SCALED})),
        make<sy::ref::rope>),
    row(envelope("silu", SY_OP_SILU, kFloats), make<sy::ref::unary>),
    row(envelope("gelu", SY_OP_GELU, kFloats), make<sy::ref::unary>),
    row(envelope("softcap", SY_OP_SOFTCAP, kFloats), make<sy::ref::unary>),
    row(envelope("silu_mul", SY_OP_SILU_MUL, kFloats), make<sy::ref::gated>),
    row(envelope("gelu_mul", SY_OP_GELU_MUL, kFloats), make<sy::ref::gated>),
    row(envelope("add", SY_OP_ADD, kFloats), make<sy::ref::binary>),
    row(envelope("mul", SY_OP_MUL, kFloats), make<sy::ref::binary>),
    row(envelope("softmax", SY_OP_SOFTMAX, kFloats), make<sy::ref::softmax>),
    row(envelope("argmax", SY_OP_ARGMAX, kFloats), make<sy::ref::argmax>),
    row(envelope("copy", SY_OP_COPY, kFloats | kInts | kQuantized), make<sy::ref::copy>),
    row(envelope("slice", SY_OP_SLICE, kFloats | kInts), make<sy::ref::slice>),
    row(envelope("kv_cache_append", SY_OP_KV_CACHE_APPEND, kFloats,
                 features({SY_FEATURE_PAGED_KV})),
        make<sy::ref::kv_cache_append>),
    row(envelope("attention", SY_OP_ATTENTION, kFloats,
                 features({SY_FEATURE_CAUSAL, SY_FEATURE_SLIDING_WINDOW, SY_FEATURE_GQA,
                           SY_FEATURE_SINKS, SY_FEATURE_LSE, SY_FEATURE_SOFTCAP, SY_FEATURE_DECODE,
                           SY_FEATURE_BATCH, SY_FEATURE_CUSTOM_SCALE, SY_FEATURE_PAGED_KV}),
                 0, "reference"),
        make<sy::ref::attention>),
    row(envelope("sinks_from_lse", SY_OP_SINKS_FROM_LSE, bit(SY_DTYPE_F32)),
        make<sy::ref::sinks_from_lse>),
    row(envelope("fused_decode_attention", SY_OP_FUSED_DECODE_ATTENTION, kFloats,
                 features({SY_FEATURE_CAUSAL, SY_FEATURE_GQA, SY_FEATURE_DECODE,
                           SY_FEATURE_ROPE_NEOX, SY_FEATURE_SLIDING_WINDOW, SY_FEATURE_CUSTOM_SCALE,
                           SY_FEATURE_ROPE_SCALED, SY_FEATURE_PARTIAL_ROTARY}),
                 kQuantized, "fused_decode"),
        make<sy::ref::fused_decode_attention>),
    row(envelope("moe_router", SY_OP_MOE_ROUTER, kFloats), make<sy::ref::moe_router>),
    row(envelope("moe_experts", SY_OP_MOE_EXPERTS, kFloats, 0, kQuantized),
        make<sy::ref::moe_experts>),
};
constexpr size_t kCount = sizeof kRows / sizeof kRows[0];

}  // namespace

struct sy_plugin {
  using Impl = Kernel;
  using Context = ::Context;
  static constexpr const char* kName = SY_REFERENCE_NAME;
#ifdef SY_REFERENCE_REMOTE
  // The simulated device's memory is the host's underneath: entries in order, each a launch.
  using Segment = sy::edge::InOrderSegment<Kernel>;
  std::unique_ptr<Segment> make_segment(sy::edge::SegmentSpec<Kernel>&& spec) {
    const std::string form =
        "in order: " + std::to_string(spec.entries.size()) + " entries, one call each";
    return std::make_unique<Segment>(std::move(spec), form, true);
  }
#endif
  static const sy::edge::KernelList<Impl, Context>& kernels() {
    static const sy::edge::KernelSet<Impl, Context, kCount> set(kRows);
    static const sy::edge::KernelList<Impl, Context> list = set.list();
    return list;
  }
  const sy_device_desc* const* device_list(size_t* count, const char** no_devices_reason) const {
    *count = 1;
    *no_devices_reason = nullptr;
    return devices;
  }
  sy_status ready(uint32_t index, sy_error_buffer* err) const {
    return index == 0 ? SY_STATUS_OK
                      : sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "%s: no device %u", kName, index);
  }
  sy_status context(size_t, uint32_t, Context&, sy_error_buffer*) const {
    return SY_STATUS_OK;
  }

  sy_device_desc device{};
  const sy_device_desc* devices[1] = {&device};
};

namespace {

sy_status init(sy_init_args* args, sy_error_buffer* err) {
  return sy::edge::guarded(sy_plugin::kName, err, [&] {
    if (!args || args->struct_size < SY_INIT_ARGS_SIZE_MINOR_0)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_init_args is NULL or undersized");
    auto* p = new sy_plugin();
    p->device.struct_size = sizeof p->device;
    p->device.device_type = SY_REFERENCE_DEVICE;
    p->device.arch = "generic";
    p->device.available = 1;
#ifdef SY_REFERENCE_REMOTE
    p->device.name = "remote reference (double precision, its own memory)";
    p->device.memory_is_host = 0;
#else
    p->device.name = "reference (double precision, host)";
    p->device.memory_is_host = 1;
#endif
    args->plugin = p;
    return SY_STATUS_OK;
  });
}

#ifdef SY_REFERENCE_REMOTE
// Device memory that is host memory underneath: the host must still go through copy.
sy_status alloc(sy_alloc_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_ALLOC_ARGS_SIZE_MINOR_0 || args->device_index != 0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                   "sy_alloc_args is NULL, undersized or not device 0");
  args->data = std::aligned_alloc(256, (args->size_bytes + 255) / 256 * 256 + 256);
  return args->data ? SY_STATUS_OK
                    : sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "remote_reference: out of memory");
}
void free_memory(sy_plugin*, uint32_t, void* data) {
  std::free(data);
}
sy_status copy(sy_copy_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_COPY_ARGS_SIZE_MINOR_0 ||
      (args->size_bytes && (!args->dst || !args->src)))
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                   "sy_copy_args is NULL, undersized or has NULL pointers");
  if (args->size_bytes) std::memmove(args->dst, args->src, args->size_bytes);
  return SY_STATUS_OK;
}
#endif

constexpr sy_plugin_api make_api() {
  sy_plugin_api api{};
  api.struct_size = sizeof api;
  api.abi_major = SY_ABI_VERSION_MAJOR;
  api.abi_minor = SY_ABI_COMPAT_MINOR;
  api.plugin_name = sy_plugin::kName;
  api.plugin_version = "1.0.0";
  api.init = init;
  sy::edge::Edge<sy_plugin>::fill(api);
#ifdef SY_REFERENCE_REMOTE
  api.alloc = alloc;
  api.free_memory = free_memory;
  api.copy = copy;
#endif
  return api;
}

#ifdef SY_REFERENCE_REMOTE
const sy_plugin_api kApi = [] {
  sy_plugin_api api = make_api();
  api.extensions = sy::edge::SegmentEdge<sy_plugin>::extension();
  return api;
}();
#else
constexpr sy_plugin_api kApi = make_api();
#endif

}  // namespace

extern "C" SY_EXPORT const sy_plugin_api* sy_plugin_entry(const sy_host_info*) {
  return &kApi;
}
