/*
 * A third-party-style CPU plugin with one attention kernel that returns the LSE but has no
 * native sinks (the capability shape of kernels such as FlashAttention's varlen forward):
 * family "flex", f32, causal, sliding window, GQA, softcap, decode, batch, custom scale, the
 * kv_len input. A model with sinks can only be served through it by the planner's
 * sinks_via_lse adaptation, which the executor completes with another plugin's sinks_from_lse
 * kernel. Its check is the envelope filters plus the operator contract of the plugin kit
 * (switchyard/op_contract.h). Plain double-precision loops: obviously right, slow.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "switchyard/op_contract.h"

struct sy_plugin {
  sy_device_desc device;
  const sy_device_desc* devices[1];
};

struct sy_kernel {
  int64_t B, Sq, Skv, Hq, Hkv, D;
  int causal, kv_len_input;
  int64_t window; /* keys before the query; < 0 = none */
  double softcap; /* 0 = none */
  double scale;
};

#define FEATURES                                                                   \
  (SY_FEATURE_BIT(SY_FEATURE_CAUSAL) | SY_FEATURE_BIT(SY_FEATURE_SLIDING_WINDOW) | \
   SY_FEATURE_BIT(SY_FEATURE_GQA) | SY_FEATURE_BIT(SY_FEATURE_LSE) |               \
   SY_FEATURE_BIT(SY_FEATURE_SOFTCAP) | SY_FEATURE_BIT(SY_FEATURE_DECODE) |        \
   SY_FEATURE_BIT(SY_FEATURE_BATCH) | SY_FEATURE_BIT(SY_FEATURE_CUSTOM_SCALE))

static const sy_kernel_envelope kAttention = {.struct_size = sizeof(sy_kernel_envelope),
                                              .kernel = "attention_lse",
                                              .op = SY_OP_ATTENTION,
                                              .family = "flex",
                                              .device_type = kDLCPU,
                                              .dtypes = SY_DTYPE_BIT(SY_DTYPE_F32),
                                              .features = FEATURES,
                                              .default_residency = SY_RESIDENCY_DEVICE,
                                              .cost_hint = 2.0};
static const sy_kernel_envelope* const kKernels[] = {&kAttention};

static double float_attr(const sy_op_desc* op, const char* name, double fallback) {
  size_t i;
  for (i = 0; i < op->num_attrs; ++i)
    if (op->attrs[i] && strcmp(op->attrs[i]->name, name) == 0)
      return op->attrs[i]->type == SY_ATTR_FLOAT ? op->attrs[i]->f : (double)op->attrs[i]->i;
  return fallback;
}

static int check_op(const sy_device_desc* dev, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  int n = sy_envelope_check(&kAttention, dev, op, add, ctx);
  if (op->op != SY_OP_ATTENTION) return n;
  return n + sy_op_contract_check(op, add, ctx);
}

static sy_status init(sy_init_args* args, sy_error_buffer* err) {
  struct sy_plugin* p;
  if (!args || args->struct_size < SY_INIT_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_init_args undersized");
  p = (struct sy_plugin*)calloc(1, sizeof *p);
  if (!p) return sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "calloc");
  p->device.struct_size = sizeof p->device;
  p->device.name = "host CPU (lse_attention)";
  p->device.device_type = kDLCPU;
  p->device.arch = "generic";
  p->device.available = 1;
  p->device.memory_is_host = 1;
  p->devices[0] = &p->device;
  args->plugin = p;
  return SY_STATUS_OK;
}

static void shutdown_plugin(sy_plugin* p) {
  free(p);
}

static sy_status get_devices(sy_get_devices_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_GET_DEVICES_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "undersized");
  args->devices = args->plugin->devices;
  args->num_devices = 1;
  return SY_STATUS_OK;
}

static sy_status get_kernels(sy_get_kernels_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_GET_KERNELS_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "undersized");
  args->kernels = kKernels;
  args->num_kernels = 1;
  return SY_STATUS_OK;
}

static sy_status check(sy_check_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_CHECK_ARGS_SIZE_MINOR_0 || !args->op || !args->device ||
      args->kernel_index != 0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "bad sy_check_args");
  args->accepted = check_op(args->device, args->op, args->add_refusal, args->refusal_context) == 0;
  return SY_STATUS_OK;
}

static sy_status prepare(sy_prepare_args* args, sy_error_buffer* err) {
  struct sy_kernel* k;
  const sy_tensor_desc *q, *kk;
  if (!args || args->struct_size < SY_PREPARE_ARGS_SIZE_MINOR_0 || !args->op || !args->plugin)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_prepare_args undersized");
  if (check_op(&args->plugin->device, args->op, NULL, NULL))
    return sy_fail(err, SY_STATUS_UNSUPPORTED, "attention_lse refuses this operator (see check)");
  q = args->op->inputs[0];
  kk = args->op->inputs[1];
  k = (struct sy_kernel*)calloc(1, sizeof *k);
  if (!k) return sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "calloc");
  k->B = q->shape[0];
  k->Sq = q->shape[1];
  k->Hq = q->shape[2];
  k->D = q->shape[3];
  k->Skv = kk->shape[1];
  k->Hkv = kk->shape[2];
  k->causal = sy_op_int_attr(args->op, SY_ATTR_CAUSAL, 0) != 0;
  k->window = sy_op_int_attr(args->op, SY_ATTR_WINDOW_LEFT, -1);
  k->kv_len_input = sy_op_int_attr(args->op, SY_ATTR_KV_LEN_INPUT, 0) != 0;
  k->softcap = float_attr(args->op, SY_ATTR_SOFTCAP, 0.0);
  k->scale = float_attr(args->op, SY_ATTR_SCALE, 0.0);
  if (k->scale == 0.0) k->scale = 1.0 / sqrt((double)k->D);
  args->kernel = k;
  return SY_STATUS_OK;
}

/* One query row: o = softmax(scores) · v over the valid keys, lse = log Σ e^score. */
static void attend_row(const struct sy_kernel* k, const float* q, const float* kb, const float* vb,
                       int64_t kv_len, int64_t i, int64_t kvh, double* scores, float* o,
                       float* lse /* may be NULL */) {
  const int64_t last = k->causal ? i + kv_len - k->Sq : kv_len - 1;
  const int64_t first = k->window >= 0 ? last - k->window : 0;
  double mx = -INFINITY, sum = 0;
  int64_t j, d;
  for (j = 0; j < kv_len; ++j) {
    double s = 0;
    if (j > last || j < first) {
      scores[j] = -INFINITY;
      continue;
    }
    for (d = 0; d < k->D; ++d) s += (double)q[d] * kb[(j * k->Hkv + kvh) * k->D + d];
    s *= k->scale;
    if (k->softcap > 0) s = k->softcap * tanh(s / k->softcap);
    scores[j] = s;
    if (s > mx) mx = s;
  }
  for (d = 0; d < k->D; ++d) o[d] = 0;
  if (mx == -INFINITY) {
    if (lse) *lse = -INFINITY;
    return;
  }
  for (j = 0; j < kv_len; ++j) sum += scores[j] == -INFINITY ? 0 : exp(scores[j] - mx);
  for (d = 0; d < k->D; ++d) {
    double acc = 0;
    for (j = 0; j < kv_len; ++j)
      if (scores[j] != -INFINITY) acc += exp(scores[j] - mx) * vb[(j * k->Hkv + kvh) * k->D + d];
    o[d] = (float)(acc / sum);
  }
  if (lse) *lse = (float)(mx + log(sum));
}

static sy_status execute(sy_execute_args* args, sy_error_buffer* err) {
  const struct sy_kernel* k;
  const float *q, *kk, *v;
  const int64_t* kv_len;
  float *o, *lse;
  double* scores;
  int64_t b, i, h;
  if (!args || args->struct_size < SY_EXECUTE_ARGS_SIZE_MINOR_0 || !args->kernel ||
      args->num_outputs < 1 || args->num_outputs > 2)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "attention_lse: bad sy_execute_args");
  k = args->kernel;
  if (args->num_inputs != (size_t)(3 + k->kv_len_input))
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "attention_lse: %zu inputs", args->num_inputs);
  q = (const float*)args->inputs[0]->data;
  kk = (const float*)args->inputs[1]->data;
  v = (const float*)args->inputs[2]->data;
  kv_len = k->kv_len_input ? (const int64_t*)args->inputs[3]->data : NULL;
  o = (float*)args->outputs[0]->data;
  lse = args->num_outputs == 2 ? (float*)args->outputs[1]->data : NULL;
  if (!q || !kk || !v || !o || (args->num_outputs == 2 && !lse) || (k->kv_len_input && !kv_len))
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "attention_lse: NULL data pointer");
  for (b = 0; b < k->B; ++b)
    if (kv_len && (kv_len[b] < 0 || kv_len[b] > k->Skv))
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "attention_lse: kv_len[%lld] = %lld",
                     (long long)b, (long long)kv_len[b]);
  scores = (double*)malloc(sizeof(double) * (size_t)(k->Skv > 0 ? k->Skv : 1));
  if (!scores) return sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "attention_lse: scores");
  for (b = 0; b < k->B; ++b) {
    const int64_t n = kv_len ? kv_len[b] : k->Skv;
    const float* kb = kk + b * k->Skv * k->Hkv * k->D;
    const float* vb = v + b * k->Skv * k->Hkv * k->D;
    for (i = 0; i < k->Sq; ++i)
      for (h = 0; h < k->Hq; ++h)
        attend_row(k, q + ((b * k->Sq + i) * k->Hq + h) * k->D, kb, vb, n, i, h / (k->Hq / k->Hkv),
                   scores, o + ((b * k->Sq + i) * k->Hq + h) * k->D,
                   lse ? lse + (b * k->Hq + h) * k->Sq + i : NULL);
  }
  free(scores);
  return SY_STATUS_OK;
}

static void release(sy_plugin* p, sy_kernel* k) {
  (void)p;
  free(k);
}

SY_EXPORT const sy_plugin_api* sy_plugin_entry(const sy_host_info* host) {
  static sy_plugin_api api;
  (void)host;
  memset(&api, 0, sizeof api);
  api.struct_size = sizeof api;
  api.abi_major = SY_ABI_VERSION_MAJOR;
  api.abi_minor = SY_ABI_COMPAT_MINOR;
  api.plugin_name = "lse_attention";
  api.plugin_version = "1.0.0";
  api.init = init;
  api.shutdown = shutdown_plugin;
  api.get_devices = get_devices;
  api.get_kernels = get_kernels;
  api.check = check;
  api.prepare = prepare;
  api.execute = execute;
  api.release = release;
  return &api;
}
