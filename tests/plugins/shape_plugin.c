/*
 * Declaration-only plugins with the capability shapes of the stacks that fail today, for the
 * planner's seed-failure tests. One SHAPE_* macro per build:
 *
 *   SHAPE_CANDLE_FLASH  flash attention on CUDA only, f16/bf16 only, no sinks, no LSE
 *                       (candle-flash-attn)
 *   SHAPE_FLEX          flex attention on the CPU without LSE or sinks (transformers'
 *                       flex_attention on CPU), and on CUDA with LSE
 *   SHAPE_NO_GQA        CPU attention that requires Hq == Hkv ("only kv-repeat = 1")
 *
 * Every shape also declares generic kernels for every other op (on the CPU, and for
 * SHAPE_FLEX on CUDA too), so a whole model can be planned with the shape alone and the
 * attention op is where planning succeeds or fails. prepare/execute are NULL: these plugins
 * only declare, which the ABI allows.
 */
#include <stdlib.h>
#include <string.h>

#include "switchyard/envelope_check.h"

#if defined(SHAPE_CANDLE_FLASH)
#define SHAPE_NAME "candle_flash"
#elif defined(SHAPE_FLEX)
#define SHAPE_NAME "flex_like"
#elif defined(SHAPE_NO_GQA)
#define SHAPE_NAME "no_gqa"
#else
#error "define one SHAPE_*"
#endif

#define MAX_KERNELS (2 * SY_OP_COUNT + 4)

struct sy_plugin {
  sy_device_desc cpu;
  const sy_device_desc* devices[1];
};

static sy_kernel_envelope g_envs[MAX_KERNELS];
static const sy_kernel_envelope* g_env_ptrs[MAX_KERNELS];
static char g_names[MAX_KERNELS][48];
static size_t g_count;
#if defined(SHAPE_CANDLE_FLASH)
static const int32_t kFlashHeadDims[] = {64, 128, 256};
#endif

static uint64_t bit(sy_feature f) {
  return SY_FEATURE_BIT(f);
}

static sy_kernel_envelope* add(const char* name, sy_op_kind op, const char* family,
                               DLDeviceType type, uint64_t dtypes, uint64_t features) {
  sy_kernel_envelope* e = &g_envs[g_count];
  memset(e, 0, sizeof *e);
  strncpy(g_names[g_count], name, sizeof g_names[0] - 1);
  e->struct_size = sizeof *e;
  e->kernel = g_names[g_count];
  e->op = op;
  e->family = family;
  e->device_type = type;
  e->dtypes = dtypes;
  e->features = features;
  e->default_residency = SY_RESIDENCY_DEVICE;
  e->cost_hint = type == kDLCPU ? 1.0 : 0.1;
  g_env_ptrs[g_count] = e;
  ++g_count;
  return e;
}

static void add_generic(DLDeviceType type, const char* suffix) {
  const uint64_t all = SY_DTYPE_BIT(SY_DTYPE_F32) | SY_DTYPE_BIT(SY_DTYPE_F16) |
                       SY_DTYPE_BIT(SY_DTYPE_BF16) | SY_DTYPE_BIT(SY_DTYPE_I32) |
                       SY_DTYPE_BIT(SY_DTYPE_I64);
  const uint64_t features = bit(SY_FEATURE_TRANSPOSED_B) | bit(SY_FEATURE_ROPE_NEOX) |
                            bit(SY_FEATURE_ROPE_INTERLEAVED) | bit(SY_FEATURE_PARTIAL_ROTARY) |
                            bit(SY_FEATURE_ROPE_SCALED);
  int op;
  for (op = 0; op < SY_OP_COUNT; ++op) {
    char name[48];
    if (op == SY_OP_ATTENTION || op == SY_OP_FUSED_DECODE_ATTENTION) continue;
    strcpy(name, sy_op_kind_name((sy_op_kind)op));
    strcat(name, suffix);
    /* gpt-oss's experts are mxfp4, which these stacks (transformers, candle) also serve. */
    add(name, (sy_op_kind)op, "generic", type, all, features)->weight_dtypes =
        SY_DTYPE_BIT(SY_DTYPE_MXFP4);
  }
}

static void declare(void) {
  const uint64_t half = SY_DTYPE_BIT(SY_DTYPE_F16) | SY_DTYPE_BIT(SY_DTYPE_BF16);
  const uint64_t common = bit(SY_FEATURE_CAUSAL) | bit(SY_FEATURE_DECODE) | bit(SY_FEATURE_BATCH) |
                          bit(SY_FEATURE_CUSTOM_SCALE) | bit(SY_FEATURE_SLIDING_WINDOW);
  g_count = 0;
#if defined(SHAPE_CANDLE_FLASH)
  {
    sy_kernel_envelope* e = add("flash_attn", SY_OP_ATTENTION, "flash", kDLCUDA, half,
                                common | bit(SY_FEATURE_GQA) | bit(SY_FEATURE_SOFTCAP));
    e->head_dims = kFlashHeadDims;
    e->num_head_dims = 3;
  }
  add_generic(kDLCPU, "_cpu");
#elif defined(SHAPE_FLEX)
  const uint64_t f32 = SY_DTYPE_BIT(SY_DTYPE_F32);
  add("flex_attention_cpu", SY_OP_ATTENTION, "flex", kDLCPU, f32 | half,
      common | bit(SY_FEATURE_GQA));
  add("flex_attention_cuda", SY_OP_ATTENTION, "flex", kDLCUDA, f32 | half,
      common | bit(SY_FEATURE_GQA) | bit(SY_FEATURE_LSE));
  add_generic(kDLCPU, "_cpu");
  add_generic(kDLCUDA, "_cuda");
#elif defined(SHAPE_NO_GQA)
  {
    const uint64_t f32 = SY_DTYPE_BIT(SY_DTYPE_F32);
    sy_kernel_envelope* e = add("sdpa_no_gqa", SY_OP_ATTENTION, "sdpa", kDLCPU, f32 | half,
                                common | bit(SY_FEATURE_LSE) | bit(SY_FEATURE_SINKS));
    e->max_gqa_ratio = 1;
  }
  add_generic(kDLCPU, "_cpu");
#endif
}

static sy_status init(sy_init_args* args, sy_error_buffer* err) {
  struct sy_plugin* p;
  if (!args || args->struct_size < SY_INIT_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_init_args undersized");
  p = (struct sy_plugin*)calloc(1, sizeof *p);
  if (!p) return sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "calloc");
  declare();
  p->cpu.struct_size = sizeof p->cpu;
  p->cpu.name = "host CPU (" SHAPE_NAME ")";
  p->cpu.device_type = kDLCPU;
  p->cpu.arch = "generic";
  p->cpu.available = 1;
  p->cpu.memory_is_host = 1;
  p->devices[0] = &p->cpu;
  args->plugin = p;
  return SY_STATUS_OK;
}

static void shutdown_plugin(sy_plugin* p) {
  free(p);
}

static sy_status get_devices(sy_get_devices_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_GET_DEVICES_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_get_devices_args undersized");
  args->devices = args->plugin->devices;
  args->num_devices = 1;
  return SY_STATUS_OK;
}

static sy_status get_kernels(sy_get_kernels_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_GET_KERNELS_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_get_kernels_args undersized");
  args->kernels = g_env_ptrs;
  args->num_kernels = g_count;
  return SY_STATUS_OK;
}

static sy_status check(sy_check_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_CHECK_ARGS_SIZE_MINOR_0 || !args->op || !args->device ||
      args->kernel_index >= g_count)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "bad sy_check_args");
  args->accepted = sy_envelope_check(g_env_ptrs[args->kernel_index], args->device, args->op,
                                     args->add_refusal, args->refusal_context) == 0;
  return SY_STATUS_OK;
}

SY_EXPORT const sy_plugin_api* sy_plugin_entry(const sy_host_info* host) {
  static sy_plugin_api api;
  (void)host;
  memset(&api, 0, sizeof api);
  api.struct_size = sizeof api;
  api.abi_major = SY_ABI_VERSION_MAJOR;
  api.abi_minor = SY_ABI_COMPAT_MINOR;
  api.plugin_name = SHAPE_NAME;
  api.plugin_version = "1.0.0";
  api.init = init;
  api.shutdown = shutdown_plugin;
  api.get_devices = get_devices;
  api.get_kernels = get_kernels;
  api.check = check;
  return &api;
}
