/*
 * The smallest useful Switchyard plugin, in C: one CPU device, one kernel (f32 elementwise mul,
 * b broadcast over a's leading dimensions), a check built from the envelope filters and the
 * operator contract that the plugin kit installs (switchyard/op_contract.h, linked through
 * Switchyard::plugin_kit), a prepare that applies exactly check's test, and an execute that
 * validates its tensors against what was prepared (switchyard/tensor_check.h) before touching
 * them. skeleton_cxx.cpp is the same plugin in C++ on the kit's shared edge. Both pass
 * `switchyard conformance` (docs/plugin-guide.md).
 */
#include <stdlib.h>
#include <string.h>

#include "switchyard/op_contract.h"
#include "switchyard/tensor_check.h"

struct sy_plugin {
  sy_device_desc device;
  const sy_device_desc* devices[1];
};

/* A prepared mul: the operand descriptions execute checks its tensors against, and sizes. */
struct sy_kernel {
  sy_tensor_desc desc[3]; /* a, b, c */
  int64_t shapes[3][8];
  int64_t n, nb; /* elements of a (and c), of b */
};

static const sy_kernel_envelope kMul = {sizeof(sy_kernel_envelope),
                                        "mul_f32",
                                        SY_OP_MUL,
                                        "generic",
                                        kDLCPU,
                                        SY_DTYPE_BIT(SY_DTYPE_F32),
                                        0,
                                        NULL,
                                        0,
                                        0,
                                        0,
                                        0,
                                        SY_RESIDENCY_DEVICE,
                                        NULL,
                                        0,
                                        1.0};
static const sy_kernel_envelope* const kKernels[] = {&kMul};

static sy_status init(sy_init_args* args, sy_error_buffer* err) {
  struct sy_plugin* p;
  if (!args || args->struct_size < SY_INIT_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_init_args undersized");
  p = (struct sy_plugin*)calloc(1, sizeof *p);
  if (!p) return sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "out of memory");
  p->device.struct_size = sizeof p->device;
  p->device.name = "skeleton cpu";
  p->device.device_type = kDLCPU;
  p->device.arch = "generic";
  p->device.available = 1;
  p->device.memory_is_host = 1;
  p->devices[0] = &p->device;
  args->plugin = p;
  return SY_STATUS_OK;
}

static void shutdown(sy_plugin* p) {
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
  args->kernels = kKernels;
  args->num_kernels = 1;
  return SY_STATUS_OK;
}

/* Every refusal counts: the envelope's, then the operator contract's (shapes, dtypes). */
static int refusals(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add,
                    void* ctx) {
  return sy_envelope_check(&kMul, device, op, add, ctx) +
         (op->op == SY_OP_MUL ? sy_op_contract_check(op, add, ctx) : 0);
}

static sy_status check(sy_check_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_CHECK_ARGS_SIZE_MINOR_0 || !args->op || !args->device ||
      args->kernel_index != 0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "bad sy_check_args");
  args->accepted = refusals(args->device, args->op, args->add_refusal, args->refusal_context) == 0;
  return SY_STATUS_OK;
}

static int64_t elements(const sy_tensor_desc* t) {
  int64_t n = 1;
  int32_t i;
  for (i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

/* The same test as check: prepare never serves what check refuses, nor refuses what it
 * accepts. */
static sy_status prepare(sy_prepare_args* args, sy_error_buffer* err) {
  struct sy_kernel* k;
  const sy_tensor_desc* t[3];
  int i;
  if (!args || args->struct_size < SY_PREPARE_ARGS_SIZE_MINOR_0 || !args->op || !args->plugin ||
      args->kernel_index != 0 || args->device_index != 0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "bad sy_prepare_args");
  if (refusals(&args->plugin->device, args->op, NULL, NULL) != 0)
    return sy_fail(err, SY_STATUS_UNSUPPORTED, "mul_f32 refuses this operator (see check)");
  t[0] = args->op->inputs[0];
  t[1] = args->op->inputs[1];
  t[2] = args->op->outputs[0];
  for (i = 0; i < 3; ++i)
    if (t[i]->ndim > 8) return sy_fail(err, SY_STATUS_UNSUPPORTED, "mul_f32: rank above 8");
  k = (struct sy_kernel*)calloc(1, sizeof *k);
  if (!k) return sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "out of memory");
  for (i = 0; i < 3; ++i) {
    k->desc[i] = *t[i];
    memcpy(k->shapes[i], t[i]->shape, sizeof(int64_t) * (size_t)t[i]->ndim);
    k->desc[i].shape = k->shapes[i];
  }
  k->n = elements(t[0]);
  k->nb = elements(t[1]);
  args->kernel = k;
  return SY_STATUS_OK;
}

/* c = a · b; the tensors must be what was prepared (dtype, shape, compact, non-NULL). */
static sy_status execute(sy_execute_args* args, sy_error_buffer* err) {
  const struct sy_kernel* k;
  const float *a, *b;
  float* c;
  int64_t i;
  char why[256];
  if (!args || args->struct_size < SY_EXECUTE_ARGS_SIZE_MINOR_0 || !args->kernel ||
      args->num_inputs != 2 || args->num_outputs != 1 || !args->inputs || !args->outputs)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "mul_f32 takes 2 inputs and 1 output");
  k = args->kernel;
  if (!sy_tensor_matches(args->inputs[0], &k->desc[0], "a", why, sizeof why) ||
      !sy_tensor_matches(args->inputs[1], &k->desc[1], "b", why, sizeof why) ||
      !sy_tensor_matches(args->outputs[0], &k->desc[2], "c", why, sizeof why))
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "mul_f32: %s", why);
  a = (const float*)args->inputs[0]->data;
  b = (const float*)args->inputs[1]->data;
  c = (float*)args->outputs[0]->data;
  for (i = 0; i < k->n; ++i) c[i] = a[i] * b[i % k->nb];
  return SY_STATUS_OK;
}

static void release(sy_plugin* p, sy_kernel* k) {
  (void)p;
  free(k);
}

SY_EXPORT const sy_plugin_api* sy_plugin_entry(const sy_host_info* host) {
  static sy_plugin_api api;
  (void)host;
  api.struct_size = sizeof api;
  api.abi_major = SY_ABI_VERSION_MAJOR;
  api.abi_minor = SY_ABI_COMPAT_MINOR;
  api.plugin_name = "skeleton";
  api.plugin_version = "1.0.0";
  api.init = init;
  api.shutdown = shutdown;
  api.get_devices = get_devices;
  api.get_kernels = get_kernels;
  api.check = check;
  api.prepare = prepare;
  api.execute = execute;
  api.release = release;
  return &api;
}
