// Envelopes of the CUDA kernels. Every operand lives in device memory.
#include "kernel_table.hpp"

#include <cstdio>

#include "cuda_devices.hpp"
#include "cuda_kernel.hpp"
#include "flash_shape.hpp"

namespace sy::cuda {
namespace {

constexpr uint64_t F32 = SY_DTYPE_BIT(SY_DTYPE_F32);
constexpr uint64_t F16 = SY_DTYPE_BIT(SY_DTYPE_F16);
constexpr uint64_t BF16 = SY_DTYPE_BIT(SY_DTYPE_BF16);
constexpr uint64_t I32 = SY_DTYPE_BIT(SY_DTYPE_I32);
constexpr uint64_t I64 = SY_DTYPE_BIT(SY_DTYPE_I64);
constexpr uint64_t kFloat = F32 | F16 | BF16;

using sy::edge::feature_mask;

constexpr int32_t kFlashHeadDims[] = {64, 128, 256};

// Every kernel runs on the actual extents of each execute (ABI 1.5 varlen).
constexpr sy_kernel_envelope envelope(const char* kernel, sy_op_kind op, const char* family,
                                      uint64_t dtypes, uint64_t features = 0) {
  sy_kernel_envelope e{};
  e.struct_size = sizeof(sy_kernel_envelope);
  e.kernel = kernel;
  e.op = op;
  e.family = family;
  e.device_type = kDLCUDA;
  e.dtypes = dtypes;
  e.features = features | SY_FEATURE_BIT(SY_FEATURE_VARLEN);
  e.default_residency = SY_RESIDENCY_DEVICE;
  e.cost_hint = 0.1;  // a GPU kernel against a CPU peer
  return e;
}

constexpr sy_kernel_envelope flash_envelope() {
  sy_kernel_envelope e = envelope(
      "flash_attention", SY_OP_ATTENTION, "flash", F16 | BF16,
      feature_mask({SY_FEATURE_CAUSAL, SY_FEATURE_SLIDING_WINDOW, SY_FEATURE_GQA, SY_FEATURE_SINKS,
                    SY_FEATURE_LSE, SY_FEATURE_SOFTCAP, SY_FEATURE_DECODE, SY_FEATURE_BATCH,
                    SY_FEATURE_CUSTOM_SCALE, SY_FEATURE_PAGED_KV}));
  e.head_dims = kFlashHeadDims;
  e.num_head_dims = sizeof(kFlashHeadDims) / sizeof(kFlashHeadDims[0]);
  e.cost_hint = 0.05;
  return e;
}

// Every kernel is built for sm_80 and newer: an older device is listed but refused.
int narrow_arch(const sy_device_desc* device, const sy_op_desc*, sy_refusal_fn add, void* ctx) {
  int sm = sm_version(device->arch);
  if (sm >= kMinSmVersion) return 0;
  char text[128];
  std::snprintf(text, sizeof text, "kernels are built for sm_%d and newer; device is %s",
                kMinSmVersion, device->arch ? device->arch : "of unknown architecture");
  return sy_refuse(add, ctx, "arch", device->arch ? device->arch : "?", ">=sm_80", text);
}

// The architecture, and: the contiguous form runs on the shapes it was prepared for (its grid
// and split-KV workspace are cut for them); a step of varying length is the paged form's.
int narrow_flash(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  if (int n = narrow_arch(device, op, add, ctx)) return n;
  if (sy_op_int_attr(op, SY_ATTR_PAGED, 0) == 1) return 0;
  if (!sy_op_has_dynamic_dims(op)) return 0;
  return sy_refuse(add, ctx, "varlen", "contiguous attention with dynamic extents",
                   "dynamic extents with paged=1 only",
                   "flash_attention runs dynamic extents in its paged form only; the contiguous "
                   "form is prepared for fixed shapes");
}

// flash_attention: the most split-KV workspace its prepare can allocate for this op on this
// device: its multiprocessors from the description (none given: as many as the splits can use),
// and the kernels' form and occupancy bound of its architecture (flash_limits), which prepare's
// occupancy API answer never passes.
uint64_t flash_workspace(const sy_device_desc* device, const sy_op_desc* op) {
  if (op->num_inputs < 2 || !op->inputs[0] || !op->inputs[1] || op->inputs[0]->ndim != 4 ||
      op->inputs[1]->ndim != 4 || op->inputs[1]->shape[2] <= 0)
    return 0;
  const int64_t* q = op->inputs[0]->shape;  // [B, Sq, Hq, D]; paged [1, T, Hq, D]
  const int64_t* k = op->inputs[1]->shape;  // [B, Skv, Hkv, D]; paged the pool [NB, BS, Hkv, D]
  const int sms = device && device->compute_units > 0 ? device->compute_units : 1 << 20;
  const int d = int(q[3]);
  const flash::FlashLimits limits =
      flash::flash_limits(flash::smem_limits(device ? sm_version(device->arch) : 0), d);
  if (sy_op_int_attr(op, SY_ATTR_PAGED, 0) == 1) {
    // As PagedFlashAttention sizes it: T rows per head, the splits of one sequence's decode
    // over the longest keys its block table holds.
    const sy_tensor_desc* table = op->inputs[op->num_inputs - 1];
    if (!table || table->ndim != 2) return 0;
    const int splits =
        flash::flash_splits(q[2] / k[2], 1, k[2], table->shape[1] * k[1], d, sms, limits);
    return flash::flash_workspace_bytes(1, q[2], q[1], splits, d);
  }
  const int splits = flash::flash_splits(q[1] * (q[2] / k[2]), q[0], k[2], k[1], d, sms, limits);
  return flash::flash_workspace_bytes(q[0], q[2], q[1], splits, d);
}
using Row = sy::edge::KernelRow<CudaKernel, CudaContext>;

// One row per kernel. Every kernel's limit beyond the operator contract is the architecture
// (flash's, also its forms).
const Row kRows[] = {
    {flash_envelope(), narrow_flash, make_flash_attention, flash_workspace},
    {envelope("kv_cache_append", SY_OP_KV_CACHE_APPEND, "generic", kFloat,
              feature_mask({SY_FEATURE_PAGED_KV})),
     narrow_arch, make_kv_cache_append, nullptr},
    {envelope("matmul", SY_OP_MATMUL, "generic", kFloat, feature_mask({SY_FEATURE_TRANSPOSED_B})),
     narrow_arch, make_matmul, nullptr},
    {envelope("embedding", SY_OP_EMBEDDING, "generic", kFloat), narrow_arch, make_embedding,
     nullptr},
    {envelope("rms_norm", SY_OP_RMS_NORM, "generic", kFloat), narrow_arch, make_rms_norm, nullptr},
    {envelope("rope", SY_OP_ROPE, "generic", kFloat,
              feature_mask({SY_FEATURE_ROPE_NEOX, SY_FEATURE_ROPE_INTERLEAVED,
                            SY_FEATURE_PARTIAL_ROTARY, SY_FEATURE_ROPE_SCALED})),
     narrow_arch, make_rope, nullptr},
    {envelope("silu_mul", SY_OP_SILU_MUL, "generic", kFloat), narrow_arch, make_gated, nullptr},
    {envelope("gelu_mul", SY_OP_GELU_MUL, "generic", kFloat), narrow_arch, make_gated, nullptr},
    {envelope("add", SY_OP_ADD, "generic", kFloat), narrow_arch, make_add, nullptr},
    {envelope("softmax", SY_OP_SOFTMAX, "generic", kFloat), narrow_arch, make_softmax, nullptr},
    {envelope("argmax", SY_OP_ARGMAX, "generic", kFloat), narrow_arch, make_argmax, nullptr},
    {envelope("copy", SY_OP_COPY, "generic", kFloat | I32 | I64), narrow_arch, make_copy, nullptr},
    {envelope("softcap", SY_OP_SOFTCAP, "generic", kFloat), narrow_arch, make_softcap, nullptr},
    {envelope("slice", SY_OP_SLICE, "generic", kFloat | I32 | I64), narrow_arch, make_slice,
     nullptr},
};
constexpr size_t kCount = sizeof(kRows) / sizeof(kRows[0]);

}  // namespace

const Kernels& kernels() {
  static const sy::edge::KernelSet<CudaKernel, CudaContext, kCount> set(kRows);
  static const Kernels list = set.list();
  return list;
}

}  // namespace sy::cuda
