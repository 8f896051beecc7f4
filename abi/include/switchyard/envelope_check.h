/*
 * The one definition of "inside a kernel envelope", as small named filters.
 *
 * Both sides use it: the host to decide whether an operator is inside a
 * declared envelope (and so to catch a `check` that accepts outside it), a
 * plugin as the first part of its own `check`, before its narrowing filters.
 * Each filter reports every violation it finds through the same
 * `add_refusal` callback as sy_check_args, so a refusal names the
 * constraint, what the operator needs and what the kernel offers.
 *
 * Header-only C99 (static inline), so a plugin needs no library for it.
 */
#ifndef SWITCHYARD_ENVELOPE_CHECK_H_
#define SWITCHYARD_ENVELOPE_CHECK_H_

#include <stdio.h>
#include <string.h>

#include "switchyard/plugin_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*sy_refusal_fn)(void* context, const sy_refusal* refusal);

/* Emits one refusal; returns 1 so filters can count. */
static inline int sy_refuse(sy_refusal_fn add, void* ctx, const char* constraint,
                            const char* required, const char* offered, const char* text) {
  sy_refusal r;
  r.struct_size = sizeof(r);
  r.constraint = constraint;
  r.required = required;
  r.offered = offered;
  r.text = text;
  if (add) add(ctx, &r);
  return 1;
}

/* Appends the names of the set bits of `mask` to `out` as a comma list. */
static inline void sy_mask_names(uint64_t mask, int is_feature, char* out, size_t cap) {
  size_t used = 0;
  unsigned i;
  out[0] = '\0';
  for (i = 0; i < 64; ++i) {
    const char* n;
    if (!(mask & (UINT64_C(1) << i))) continue;
    n = is_feature ? sy_feature_name((sy_feature)i) : sy_dtype_name((sy_dtype)i);
    if (!n) n = "?";
    used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, "%s%s", used ? "," : "", n);
    if (used >= cap) return;
  }
}

/* Stable lower-case name of a DLPack device type ("cpu", "cuda", ...), NULL
 * for values without one. */
static inline const char* sy_device_type_name(DLDeviceType t) {
  switch (t) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda_host";
    case kDLOpenCL: return "opencl";
    case kDLVulkan: return "vulkan";
    case kDLMetal: return "metal";
    case kDLROCM: return "rocm";
    case kDLExtDev: return "ext_dev";
    case kDLCUDAManaged: return "cuda_managed";
    default: return 0;
  }
}

/* Integer attribute `name` of `op`, or `fallback` when absent or of another type. */
static inline int64_t sy_op_int_attr(const sy_op_desc* op, const char* name, int64_t fallback) {
  size_t i;
  for (i = 0; i < op->num_attrs; ++i) {
    const sy_attr* a = op->attrs[i];
    if (a && a->name && strcmp(a->name, name) == 0 && a->type == SY_ATTR_INT) return a->i;
  }
  return fallback;
}

/* 1 when some operand of `op` has a dynamic dim (ABI 1.5 varlen: prepared for bounds, each
 * execute carrying its extents); 0 otherwise, and always for an op from a host before 1.5. */
static inline int sy_op_has_dynamic_dims(const sy_op_desc* op) {
  size_t i;
  for (i = 0; i < op->num_inputs; ++i)
    if (op->inputs && sy_tensor_dynamic_dims(op->inputs[i])) return 1;
  for (i = 0; i < op->num_outputs; ++i)
    if (op->outputs && sy_tensor_dynamic_dims(op->outputs[i])) return 1;
  return 0;
}

static inline int sy_is_attention_op(sy_op_kind op) {
  return op == SY_OP_ATTENTION || op == SY_OP_FUSED_DECODE_ATTENTION;
}

/* --- filters -------------------------------------------------------------- */

static inline int sy_filter_op_kind(const sy_kernel_envelope* env, const sy_op_desc* op,
                                    sy_refusal_fn add, void* ctx) {
  const char* need = sy_op_kind_name(op->op);
  const char* have = sy_op_kind_name(env->op);
  if (op->op == env->op) return 0;
  return sy_refuse(add, ctx, "op", need ? need : "?", have ? have : "?",
                   "the kernel serves another operator");
}

static inline int sy_filter_device(const sy_kernel_envelope* env, const sy_device_desc* dev,
                                   sy_refusal_fn add, void* ctx) {
  int n = 0;
  char text[256];
  if (dev->device_type != env->device_type) {
    const char* need = sy_device_type_name(dev->device_type);
    const char* have = sy_device_type_name(env->device_type);
    snprintf(text, sizeof text, "the kernel runs on %s devices only, not %s", have ? have : "?",
             need ? need : "?");
    n += sy_refuse(add, ctx, "device_type", need ? need : "?", have ? have : "?", text);
  }
  if (!dev->available) {
    snprintf(text, sizeof text, "device '%s' is unavailable: %s", dev->name ? dev->name : "?",
             dev->unavailable_reason ? dev->unavailable_reason : "no reason given");
    n += sy_refuse(add, ctx, "device_available", "available", "unavailable", text);
  }
  return n;
}

/* The first input a kernel reads as weights, whose dtype may differ from the op's (since ABI
 * 1.3): matmul's b (input 1), an embedding's table (input 0), the fused decode block's wq (input
 * 1, then wk and wv: sy_weight_input_count), moe_experts' gate (input 3, then up and down, since
 * 1.7); -1 for other kinds. */
static inline int sy_weight_input(sy_op_kind op) {
  return op == SY_OP_MATMUL || op == SY_OP_FUSED_DECODE_ATTENTION ? 1
         : op == SY_OP_EMBEDDING                                  ? 0
         : op == SY_OP_MOE_EXPERTS                                ? 3
                                                                  : -1;
}
/* How many inputs from sy_weight_input on are weights: 3 for the fused decode block and the
 * experts, else 1. */
static inline int sy_weight_input_count(sy_op_kind op) {
  return op == SY_OP_FUSED_DECODE_ATTENTION || op == SY_OP_MOE_EXPERTS ? 3 : 1;
}

/* The op's dtype: its first input's, except an embedding whose table is block-quantized, whose
 * rows (the output) carry the op's dtype. */
static inline sy_dtype sy_op_dtype(const sy_op_desc* op) {
  if (op->num_inputs == 0 || !op->inputs[0]) return SY_DTYPE_COUNT;
  if (op->op == SY_OP_EMBEDDING && sy_dtype_is_blocked(op->inputs[0]->dtype) &&
      op->num_outputs > 0 && op->outputs[0])
    return op->outputs[0]->dtype;
  return op->inputs[0]->dtype;
}

/* The envelope's weight dtypes: 0 when it predates them (a struct of minor < 3). */
static inline uint64_t sy_envelope_weight_dtypes(const sy_kernel_envelope* env) {
#if SY_ABI_COMPAT_MINOR >= 3
  if (env->struct_size >= SY_KERNEL_ENVELOPE_SIZE_MINOR_3) return env->weight_dtypes;
#else
  (void)env;
#endif
  return 0;
}

/* The op's dtype inside env->dtypes, and a block-quantized weight inside the envelope's weight
 * dtypes. */
static inline int sy_filter_dtype(const sy_kernel_envelope* env, const sy_op_desc* op,
                                  sy_refusal_fn add, void* ctx) {
  sy_dtype dt = sy_op_dtype(op);
  int w = sy_weight_input(op->op), n = 0;
  char have[128], text[224];
  const char* need;
  if (dt == SY_DTYPE_COUNT) return 0;
  if (!(env->dtypes & SY_DTYPE_BIT(dt))) {
    need = sy_dtype_name(dt) ? sy_dtype_name(dt) : "?";
    sy_mask_names(env->dtypes, 0, have, sizeof have);
    snprintf(text, sizeof text, "dtype %s is outside the kernel's dtypes (%s)", need, have);
    n += sy_refuse(add, ctx, "dtype", need, have, text);
  }
  /* A weight of another plain dtype breaks the op's contract (dtype_match), not the envelope.
   * Each quantized dtype is refused once. */
  for (int i = 0, reported = 0; w >= 0 && i < sy_weight_input_count(op->op); ++i) {
    size_t in = (size_t)(w + i);
    if (in >= op->num_inputs || !op->inputs[in] || op->inputs[in]->dtype == dt ||
        !sy_dtype_is_blocked(op->inputs[in]->dtype))
      continue;
    sy_dtype wt = op->inputs[in]->dtype;
    uint64_t mask = sy_envelope_weight_dtypes(env);
    if (!(mask & SY_DTYPE_BIT(wt)) && !(reported & (1 << (wt & 31)))) {
      reported |= 1 << (wt & 31);
      need = sy_dtype_name(wt) ? sy_dtype_name(wt) : "?";
      sy_mask_names(mask ? mask : env->dtypes, 0, have, sizeof have);
      snprintf(text, sizeof text,
               "dtype %s of the weights (input %d) is outside the kernel's %s (%s)", need, (int)in,
               mask ? "weight dtypes" : "dtypes", have);
      n += sy_refuse(add, ctx, "dtype", need, have, text);
    }
  }
  return n;
}

/* One refusal per feature the operator uses and the kernel lacks. */
static inline int sy_filter_features(const sy_kernel_envelope* env, const sy_op_desc* op,
                                     sy_refusal_fn add, void* ctx) {
  uint64_t missing = op->required_features & ~env->features;
  char have[512], text[192];
  unsigned i;
  int n = 0;
  if (!missing) return 0;
  sy_mask_names(env->features, 1, have, sizeof have);
  for (i = 0; i < 64; ++i) {
    const char* name;
    if (!(missing & (UINT64_C(1) << i))) continue;
    name = sy_feature_name((sy_feature)i) ? sy_feature_name((sy_feature)i) : "?";
    snprintf(text, sizeof text, "the kernel does not implement %s", name);
    n += sy_refuse(add, ctx, "feature", name, have, text);
  }
  return n;
}

static inline int sy_envelope_accepts_head_dim(const sy_kernel_envelope* env, int64_t d) {
  size_t i;
  if (env->num_head_dims > 0 && env->head_dims) {
    for (i = 0; i < env->num_head_dims; ++i)
      if (env->head_dims[i] == d) return 1;
    return 0;
  }
  if (d <= 0) return 0;
  if (env->head_dim_multiple > 0 && d % env->head_dim_multiple != 0) return 0;
  if (env->head_dim_max > 0 && d > env->head_dim_max) return 0;
  return 1;
}

/* Head dim and GQA ratio of attention operators (q: inputs[0] [B,Sq,Hq,D],
 * k: inputs[1] [B,Skv,Hkv,D]). Shapes that are not attention-shaped are left
 * to the kernel's own filters. */
static inline int sy_filter_attention_limits(const sy_kernel_envelope* env, const sy_op_desc* op,
                                             sy_refusal_fn add, void* ctx) {
  const sy_tensor_desc *q, *k;
  int n = 0;
  char need[64], have[64], text[192];
  if (!sy_is_attention_op(op->op) || op->num_inputs < 2) return 0;
  q = op->inputs[0];
  k = op->inputs[1];
  if (!q || !k || q->ndim != 4 || k->ndim != 4 || !q->shape || !k->shape) return 0;
  if (!sy_envelope_accepts_head_dim(env, q->shape[3])) {
    snprintf(need, sizeof need, "%lld", (long long)q->shape[3]);
    if (env->num_head_dims > 0) {
      size_t i, used = 0;
      have[0] = '\0';
      for (i = 0; i < env->num_head_dims && used < sizeof have; ++i)
        used += (size_t)snprintf(have + used, sizeof have - used, "%s%d", i ? "," : "",
                                 (int)env->head_dims[i]);
    } else {
      snprintf(have, sizeof have, "multiple of %d up to %d", (int)env->head_dim_multiple,
               (int)env->head_dim_max);
    }
    snprintf(text, sizeof text, "head dim %s is outside the kernel's set (%s)", need, have);
    n += sy_refuse(add, ctx, "head_dim", need, have, text);
  }
  if (env->max_gqa_ratio > 0 && k->shape[2] > 0 && q->shape[2] % k->shape[2] == 0) {
    int64_t ratio = q->shape[2] / k->shape[2];
    if (ratio > env->max_gqa_ratio) {
      snprintf(need, sizeof need, "%lld", (long long)ratio);
      snprintf(have, sizeof have, "<=%d", (int)env->max_gqa_ratio);
      snprintf(text, sizeof text, "%lld query heads per KV head exceed the kernel's limit %d",
               (long long)ratio, (int)env->max_gqa_ratio);
      n += sy_refuse(add, ctx, "gqa_ratio", need, have, text);
    }
  }
  return n;
}

/* Whether memory `m` satisfies residency `r` for a kernel running on `dev`
 * (a CPU's device memory is host memory). */
static inline int sy_residency_allows(sy_residency r, sy_memory_kind m, const sy_device_desc* dev) {
  switch (r) {
    case SY_RESIDENCY_ANY: return 1;
    case SY_RESIDENCY_HOST: return m == SY_MEMORY_HOST;
    case SY_RESIDENCY_DEVICE:
      return dev->memory_is_host ? m == SY_MEMORY_HOST : m == SY_MEMORY_DEVICE;
    default: return 0;
  }
}

static inline sy_residency sy_envelope_residency(const sy_kernel_envelope* env, size_t operand) {
  if (env->operand_residency && operand < env->num_operand_residency)
    return env->operand_residency[operand];
  return env->default_residency;
}

static inline int sy_filter_residency(const sy_kernel_envelope* env, const sy_device_desc* dev,
                                      const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  size_t i, total = op->num_inputs + op->num_outputs;
  int n = 0;
  for (i = 0; i < total; ++i) {
    int is_in = i < op->num_inputs;
    size_t idx = is_in ? i : i - op->num_inputs;
    const sy_tensor_desc* t = is_in ? op->inputs[idx] : op->outputs[idx];
    sy_residency r = sy_envelope_residency(env, i);
    char need[64], have[64], text[192];
    const char* mem;
    const char* res;
    if (!t || sy_residency_allows(r, t->memory, dev)) continue;
    mem = sy_memory_kind_name(t->memory) ? sy_memory_kind_name(t->memory) : "?";
    res = r == SY_RESIDENCY_DEVICE ? (dev->memory_is_host ? "host" : "device")
                                   : (sy_residency_name(r) ? sy_residency_name(r) : "?");
    snprintf(need, sizeof need, "%s %zu in %s memory", is_in ? "input" : "output", idx, mem);
    snprintf(have, sizeof have, "%s %zu in %s memory", is_in ? "input" : "output", idx, res);
    snprintf(text, sizeof text, "the kernel %s %s %zu in %s memory only, it is in %s memory",
             is_in ? "reads" : "writes", is_in ? "input" : "output", idx, res, mem);
    n += sy_refuse(add, ctx, "residency", need, have, text);
  }
  return n;
}

/* All filters. Returns the number of refusals emitted (0 = inside). */
static inline int sy_envelope_check(const sy_kernel_envelope* env, const sy_device_desc* dev,
                                    const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  int n = 0;
  n += sy_filter_op_kind(env, op, add, ctx);
  n += sy_filter_device(env, dev, add, ctx);
  n += sy_filter_dtype(env, op, add, ctx);
  n += sy_filter_features(env, op, add, ctx);
  n += sy_filter_attention_limits(env, op, add, ctx);
  n += sy_filter_residency(env, dev, op, add, ctx);
  return n;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SWITCHYARD_ENVELOPE_CHECK_H_ */
