/*
 * A plugin with one device of type ext_dev whose memory the host may not touch directly (it
 * is host memory underneath, but declared as device memory), and one kernel: f32 rms_norm.
 * A plan that puts rms_norm there must copy activations in and out through alloc/copy, which
 * is how the test suite proves mixed plans and the executor's copies without a GPU.
 *
 * Built a second time with FAILING_NORM as "failing_norm": the same kernel on a host-memory CPU
 * device, cheaper than any other rms_norm so the planner picks it, whose execute fails with the
 * status SWITCHYARD_TEST_FAIL_STATUS names (out_of_memory, unavailable, internal; default
 * out_of_memory): how the suite proves that a plugin's run-time answer reaches the user as its
 * own documented code and exit code.
 *
 * remote_norm also keeps books like a device with its own memory: the device has
 * kRemoteMemory bytes, alloc and the kernels' workspace (declared by check, ABI 1.4: one double
 * per row, the row's inverse RMS, held from prepare to release) are counted, and memory_info
 * reports total minus what is held. The memory tests compare the planner's prediction with
 * what this plugin counts.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef FAILING_NORM
#define NORM_NAME "failing_norm"
#define NORM_KERNEL "rms_norm_failing"
#define NORM_DEVICE kDLCPU
#define NORM_COST 0.01
#else
#define NORM_NAME "remote_norm"
#define NORM_KERNEL "rms_norm_remote"
#define NORM_DEVICE kDLExtDev
#define NORM_COST 0.5
#endif

#include "switchyard/envelope_check.h"
#include "switchyard/tensor_check.h"

#define kRemoteMemory ((uint64_t)256 << 20)

struct sy_plugin {
  sy_device_desc device;
  const sy_device_desc* devices[1];
  uint64_t held; /* bytes allocated and not freed (the host allocates from one thread) */
};

struct sy_kernel {
  int64_t rows, cols;
  double eps, offset;
  double* inv_rms; /* workspace, device memory (remote_norm only) */
};

#ifndef FAILING_NORM
/* Device memory with its size in a 64-byte header, so free can count it. */
static void* take(struct sy_plugin* p, uint64_t bytes) {
  unsigned char* raw;
  if (bytes > kRemoteMemory - p->held) return NULL;
  raw = (unsigned char*)calloc(1, (size_t)bytes + 128);
  if (!raw) return NULL;
  memcpy(raw, &bytes, sizeof bytes);
  p->held += bytes;
  return raw + 64;
}

static void give_back(struct sy_plugin* p, void* data) {
  uint64_t bytes;
  if (!data) return;
  memcpy(&bytes, (unsigned char*)data - 64, sizeof bytes);
  p->held -= bytes;
  free((unsigned char*)data - 64);
}
#endif

static int64_t rows_of(const sy_op_desc* op) {
  int64_t rows = 1;
  int i;
  for (i = 0; i + 1 < op->inputs[0]->ndim; ++i) rows *= op->inputs[0]->shape[i];
  return rows;
}

static const sy_kernel_envelope kNorm = {sizeof(sy_kernel_envelope),
                                         NORM_KERNEL,
                                         SY_OP_RMS_NORM,
                                         "generic",
                                         NORM_DEVICE,
                                         SY_DTYPE_BIT(SY_DTYPE_F32),
#if SY_ABI_COMPAT_MINOR >= 5
                                         SY_FEATURE_BIT(SY_FEATURE_VARLEN), /* rows per execute */
#else
                                         0,
#endif
                                         NULL,
                                         0,
                                         0,
                                         0,
                                         0,
                                         SY_RESIDENCY_DEVICE,
                                         NULL,
                                         0,
                                         NORM_COST,
                                         0};
static const sy_kernel_envelope* const kKernels[] = {&kNorm};

static double attr_float(const sy_op_desc* op, const char* name, double fallback) {
  size_t i;
  for (i = 0; i < op->num_attrs; ++i)
    if (op->attrs[i] && strcmp(op->attrs[i]->name, name) == 0)
      return op->attrs[i]->type == SY_ATTR_FLOAT ? op->attrs[i]->f : (double)op->attrs[i]->i;
  return fallback;
}

static int narrow(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  const sy_tensor_desc *x, *w, *y;
  if (op->num_inputs != 2 || op->num_outputs != 1)
    return sy_refuse(add, ctx, "arity", "other", "x, weight -> y", "rms_norm takes x and weight");
  x = op->inputs[0];
  w = op->inputs[1];
  y = op->outputs[0];
  if (x->ndim < 1 || w->ndim != 1 || w->shape[0] != x->shape[x->ndim - 1] || y->ndim != x->ndim)
    return sy_refuse(add, ctx, "shape", "mismatched", "weight [H] of x [..., H]",
                     "rms_norm weight must match x's last dimension");
  return 0;
}

static int check_op(const sy_device_desc* dev, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  int n = sy_envelope_check(&kNorm, dev, op, add, ctx);
  return op->op == SY_OP_RMS_NORM ? n + narrow(op, add, ctx) : n;
}

static sy_status init(sy_init_args* args, sy_error_buffer* err) {
  struct sy_plugin* p;
  if (!args || args->struct_size < SY_INIT_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_init_args undersized");
  p = (struct sy_plugin*)calloc(1, sizeof *p);
  if (!p) return sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "calloc");
  p->device.struct_size = sizeof p->device;
  p->device.name = NORM_NAME " unit";
  p->device.device_type = NORM_DEVICE;
  p->device.arch = "test";
  p->device.available = 1;
  p->device.memory_is_host = NORM_DEVICE == kDLCPU;
  p->device.memory_bytes = NORM_DEVICE == kDLCPU ? 0 : kRemoteMemory;
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
#if SY_ABI_COMPAT_MINOR >= 4 && !defined(FAILING_NORM)
  if (args->struct_size >= SY_CHECK_ARGS_SIZE_MINOR_4 && args->accepted)
    args->workspace_bytes = (uint64_t)rows_of(args->op) * sizeof(double);
#endif
  return SY_STATUS_OK;
}

static sy_status prepare(sy_prepare_args* args, sy_error_buffer* err) {
  struct sy_kernel* k;
  if (!args || args->struct_size < SY_PREPARE_ARGS_SIZE_MINOR_0 || !args->op)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_prepare_args undersized");
  if (check_op(&args->plugin->device, args->op, NULL, NULL))
    return sy_fail(err, SY_STATUS_UNSUPPORTED, "rms_norm_remote refuses this operator");
  k = (struct sy_kernel*)calloc(1, sizeof *k);
  if (!k) return sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "calloc");
  k->cols = args->op->inputs[0]->shape[args->op->inputs[0]->ndim - 1];
  k->rows = rows_of(args->op);
#ifndef FAILING_NORM
  k->inv_rms = (double*)take(args->plugin, (uint64_t)k->rows * sizeof(double));
  if (!k->inv_rms) {
    free(k);
    return sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "rms_norm_remote: no room for the workspace");
  }
#endif
  k->eps = attr_float(args->op, SY_ATTR_EPS, 1e-6);
  k->offset = attr_float(args->op, SY_ATTR_WEIGHT_OFFSET, 0.0);
  args->kernel = k;
  return SY_STATUS_OK;
}

static sy_status execute(sy_execute_args* args, sy_error_buffer* err) {
  const struct sy_kernel* k;
  const float *x, *w;
  float* y;
  int64_t r, c, rows;
  if (!args || args->struct_size < SY_EXECUTE_ARGS_SIZE_MINOR_0 || args->num_inputs != 2 ||
      args->num_outputs != 1)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "rms_norm takes 2 inputs, 1 output");
  k = args->kernel;
  x = (const float*)args->inputs[0]->data;
  w = (const float*)args->inputs[1]->data;
  y = (float*)args->outputs[0]->data;
  if (!x || !w || !y) return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "NULL data pointer");
  if (args->inputs[0]->device.device_type != NORM_DEVICE)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "x is not in this device's memory");
#ifdef FAILING_NORM
  {
    const char* want = getenv("SWITCHYARD_TEST_FAIL_STATUS");
    if (want && strcmp(want, "unavailable") == 0)
      return sy_fail(err, SY_STATUS_UNAVAILABLE, "failing_norm: the test device went away");
    if (want && strcmp(want, "internal") == 0)
      return sy_fail(err, SY_STATUS_INTERNAL, "failing_norm: a simulated bug");
    return sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "failing_norm: no scratch memory left (test)");
  }
#endif
  rows = 1; /* this execute's (varlen): at most the prepared k->rows */
  for (r = 0; r + 1 < args->inputs[0]->ndim; ++r) rows *= args->inputs[0]->shape[r];
  for (r = 0; r < rows && r < k->rows; ++r) {
    double ss = 0;
    for (c = 0; c < k->cols; ++c) ss += (double)x[r * k->cols + c] * x[r * k->cols + c];
    double inv = 1.0 / sqrt(ss / (double)k->cols + k->eps);
    if (k->inv_rms) k->inv_rms[r] = inv;
    for (c = 0; c < k->cols; ++c)
      y[r * k->cols + c] = (float)(x[r * k->cols + c] * inv * (w[c] + k->offset));
  }
  return SY_STATUS_OK;
}

static void release(sy_plugin* p, sy_kernel* k) {
#ifndef FAILING_NORM
  give_back(p, k->inv_rms);
#endif
  (void)p;
  free(k);
}

#ifndef FAILING_NORM
static sy_status alloc_memory(sy_alloc_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_ALLOC_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_alloc_args undersized");
  args->data = take(args->plugin, args->size_bytes);
  return args->data ? SY_STATUS_OK : sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "out of device memory");
}

static void free_memory(sy_plugin* p, uint32_t device, void* data) {
  (void)device;
  give_back(p, data);
}

static sy_status memory_info(sy_memory_info_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_MEMORY_INFO_ARGS_SIZE_MINOR_1 || !args->plugin)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_memory_info_args undersized");
  args->total_bytes = kRemoteMemory;
  args->free_bytes = kRemoteMemory - args->plugin->held;
  return SY_STATUS_OK;
}

static sy_status copy(sy_copy_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_COPY_ARGS_SIZE_MINOR_0 || !args->dst || !args->src)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "bad sy_copy_args");
  memcpy(args->dst, args->src, (size_t)args->size_bytes);
  return SY_STATUS_OK;
}
#endif

SY_EXPORT const sy_plugin_api* sy_plugin_entry(const sy_host_info* host) {
  static sy_plugin_api api;
  (void)host;
  memset(&api, 0, sizeof api);
  api.struct_size = sizeof api;
  api.abi_major = SY_ABI_VERSION_MAJOR;
  api.abi_minor = SY_ABI_COMPAT_MINOR;
  api.plugin_name = NORM_NAME;
  api.plugin_version = "1.0.0";
  api.init = init;
  api.shutdown = shutdown_plugin;
  api.get_devices = get_devices;
  api.get_kernels = get_kernels;
  api.check = check;
  api.prepare = prepare;
  api.execute = execute;
  api.release = release;
#ifndef FAILING_NORM
  api.alloc = alloc_memory;
  api.free_memory = free_memory;
  api.copy = copy;
  api.memory_info = memory_info;
#endif
  return &api;
}
