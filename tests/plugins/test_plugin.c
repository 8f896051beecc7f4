/*
 * A small, complete plugin in plain C, compiled many times with one TEST_* macro each to
 * give the test suite real shared objects that are good, old, new or broken in exactly
 * one way. TEST_PLUGIN_NAME names the build.
 *
 *   (none)                 a good plugin: one host-memory device, an f32 "add" kernel
 *   TEST_NO_ENTRY          exports no sy_plugin_entry
 *   TEST_ABI_MAJOR=N       claims ABI major N
 *   TEST_SMALL_TABLE       claims its minor with a table smaller than even minor 0's
 *   TEST_INIT_FAILS        init returns UNAVAILABLE with a message
 *   TEST_ZERO_DEVICES      no devices, with a reason
 *   TEST_LYING_CHECK       check accepts everything, whatever the envelope says
 *   TEST_MISSING_DEP       calls into a library that is not installed beside it
 *   TEST_ILLEGAL_AT_LOAD   executes ud2 in a static initializer (SIGILL when opened)
 *   TEST_SEGFAULT_IN_ENTRY writes through a bad pointer in sy_plugin_entry (SIGSEGV)
 *
 * and, for `switchyard conformance`, one broken promise each:
 *   TEST_WRONG_NUMBERS     computes a − b
 *   TEST_PREPARE_DISAGREES prepare refuses operators of more than 40 elements that check accepts
 *   TEST_WRITES_STDOUT     prints from execute
 *   TEST_SEGFAULT          writes through a bad pointer (an unmapped low address) in execute
 *   TEST_SHARED_SCRATCH    computes into one static buffer: wrong when two kernels run at once
 *   TEST_TRUSTS_ARGUMENTS  execute checks only for NULL data, not ranks, shapes or strides
 *
 * Built at ABI minors 0 to 9 (SY_ABI_COMPAT_MINOR) for the versioning tests. At minor 2 it
 * also has synchronize and the struct forms destroy / release_kernel / free_device_memory, and
 * logs from init through the host info init received; at minor 3 its envelope declares weight
 * dtypes; at minor 4 its check declares a workspace, and its envelope claims the varlen feature
 * (a claim the host must not believe before 1.5); at minor 5 execute adds the actual extents of
 * dynamic dims. At minors 4 to 7 the envelope also sets bit 17, activation_q8 since 1.8, and
 * at 4 to 8 bit 18, activation_q16 since 1.9: claims the host must drop from a plugin older
 * than the minor that gave the bit its meaning. sy_test_counters() (exported for the
 * tests only) counts which slots the host called.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "switchyard/envelope_check.h"
#include "switchyard/tensor_check.h"

/* What a minor-4 build declares as each kernel's workspace (tests/loader/abi_compat_test.cpp). */
#define TEST_WORKSPACE_BYTES 4096

#ifndef TEST_PLUGIN_NAME
#error "TEST_PLUGIN_NAME must be defined"
#endif

#ifdef TEST_MISSING_DEP
int sy_test_vanished_function(void);
#endif

struct sy_plugin {
  sy_device_desc device;
  const sy_device_desc* device_list[1];
};

struct sy_kernel {
  int64_t elements;
  sy_tensor_desc desc[3]; /* a, b, c as prepared: execute checks its tensors against them */
  int64_t shapes[3][8];
};

static const sy_host_info* g_host;

/* How often the host called each slot whose use the versioning tests check. */
typedef struct sy_test_counters_t {
  int init, shutdown, destroy, release, release_kernel, synchronize;
} sy_test_counters_t;
static sy_test_counters_t g_counters;
SY_EXPORT sy_test_counters_t* sy_test_counters(void) {
  return &g_counters;
}

static void log_to(const sy_host_info* host, sy_log_level level, const char* message) {
  if (host && host->struct_size >= SY_HOST_INFO_SIZE_MINOR_0 && host->log)
    host->log(host->host_context, level, message);
}

static void plugin_log(sy_log_level level, const char* message) {
  log_to(g_host, level, message);
}

#if SY_ABI_COMPAT_MINOR >= 9
#define TEST_ADD_FEATURES SY_FEATURE_BIT(SY_FEATURE_VARLEN)
#elif SY_ABI_COMPAT_MINOR >= 8
#define TEST_ADD_FEATURES (SY_FEATURE_BIT(SY_FEATURE_VARLEN) | SY_FEATURE_BIT(18))
#elif SY_ABI_COMPAT_MINOR >= 4
#define TEST_ADD_FEATURES \
  (SY_FEATURE_BIT(SY_FEATURE_VARLEN) | SY_FEATURE_BIT(17) | SY_FEATURE_BIT(18))
#else
#define TEST_ADD_FEATURES 0
#endif
/* Fields left out are zero: no head-dim limits, no per-operand residency. */
static const sy_kernel_envelope kAdd = {
    .struct_size = sizeof(sy_kernel_envelope),
    .kernel = "add_f32",
    .op = SY_OP_ADD,
    .family = "generic",
    .device_type = kDLCPU,
    .dtypes = SY_DTYPE_BIT(SY_DTYPE_F32),
    .features = TEST_ADD_FEATURES,
    .default_residency = SY_RESIDENCY_DEVICE,
    .cost_hint = 1.0,
#if SY_ABI_COMPAT_MINOR >= 3
    /* Weight dtypes, read by a host of minor 3 (an add has no weights: the value only proves the
       field crossed); q5_0 is 1.6's and mxfp4 1.7's, and the host drops each from older builds. */
    .weight_dtypes =
        SY_DTYPE_BIT(SY_DTYPE_Q8_0) | SY_DTYPE_BIT(SY_DTYPE_Q5_0) | SY_DTYPE_BIT(SY_DTYPE_MXFP4),
#endif
};
static const sy_kernel_envelope* const kKernels[] = {&kAdd};

static sy_status plugin_init(sy_init_args* args, sy_error_buffer* err) {
  struct sy_plugin* p;
  if (!args || args->struct_size < SY_INIT_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_init_args undersized");
#ifdef TEST_INIT_FAILS
  plugin_log(SY_LOG_ERROR, "test plugin refuses to initialise");
  return sy_fail(err, SY_STATUS_UNAVAILABLE, "test: simulated init failure (device busy)");
#endif
#ifdef TEST_MISSING_DEP
  if (sy_test_vanished_function() != 0) return SY_STATUS_INTERNAL;
#endif
  p = (struct sy_plugin*)calloc(1, sizeof *p);
  if (!p) return sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "calloc");
  ++g_counters.init;
#if SY_ABI_COMPAT_MINOR >= 2
  /* A host of minor 2 passes its info to init; an older one does not, and the entry's serves. */
  log_to(args->struct_size >= SY_INIT_ARGS_SIZE_MINOR_2 && args->host ? args->host : g_host,
         SY_LOG_DEBUG, "test plugin " TEST_PLUGIN_NAME " init");
#else
  plugin_log(SY_LOG_DEBUG, "test plugin " TEST_PLUGIN_NAME " init");
#endif
  p->device.struct_size = sizeof p->device;
  p->device.name = "test host device";
  p->device.device_type = kDLCPU;
  p->device.arch = "test";
  p->device.available = 1;
  p->device.memory_is_host = 1;
  p->device_list[0] = &p->device;
  args->plugin = p;
  return SY_STATUS_OK;
}

static void plugin_shutdown(sy_plugin* p) {
  ++g_counters.shutdown;
  free(p);
}

static sy_status plugin_get_devices(sy_get_devices_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_GET_DEVICES_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_get_devices_args undersized");
#ifdef TEST_ZERO_DEVICES
  args->devices = NULL;
  args->num_devices = 0;
  args->no_devices_reason = "test: no test hardware attached";
#else
  args->devices = args->plugin->device_list;
  args->num_devices = 1;
  args->no_devices_reason = NULL;
#endif
  return SY_STATUS_OK;
}

static sy_status plugin_get_kernels(sy_get_kernels_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_GET_KERNELS_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_get_kernels_args undersized");
  args->kernels = kKernels;
  args->num_kernels = 1;
  return SY_STATUS_OK;
}

/* The add kernel's own narrowing: two inputs and one output of one shape. */
static int narrow_add(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  size_t i;
  if (op->num_inputs != 2 || op->num_outputs != 1)
    return sy_refuse(add, ctx, "arity", "other", "2 inputs, 1 output", "add takes a, b -> c");
  for (i = 0; i < 2; ++i) {
    const sy_tensor_desc* t = i == 0 ? op->inputs[1] : op->outputs[0];
    if (t->ndim != op->inputs[0]->ndim ||
        memcmp(t->shape, op->inputs[0]->shape, sizeof(int64_t) * (size_t)t->ndim) != 0)
      return sy_refuse(add, ctx, "shape", "mismatched shapes", "equal shapes",
                       "add needs equal shapes");
  }
  return 0;
}

static int check_op(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add,
                    void* ctx) {
  int n = sy_envelope_check(&kAdd, device, op, add, ctx);
  if (op->op == SY_OP_ADD) n += narrow_add(op, add, ctx);
  return n;
}

static sy_status plugin_check(sy_check_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_CHECK_ARGS_SIZE_MINOR_0 || !args->op || !args->device)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_check_args undersized or incomplete");
  if (args->kernel_index != 0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "kernel index %u out of range",
                   args->kernel_index);
#ifdef TEST_LYING_CHECK
  args->accepted = 1;
#else
  args->accepted = check_op(args->device, args->op, args->add_refusal, args->refusal_context) == 0;
#endif
#if SY_ABI_COMPAT_MINOR >= 4
  /* 1.4: the scratch a kernel would hold, written only into a host struct that has the field. */
  if (args->struct_size >= SY_CHECK_ARGS_SIZE_MINOR_4)
    args->workspace_bytes = args->accepted ? TEST_WORKSPACE_BYTES : 0;
#endif
  return SY_STATUS_OK;
}

static sy_status plugin_prepare(sy_prepare_args* args, sy_error_buffer* err) {
  struct sy_kernel* k;
  int64_t n = 1;
  int i;
  if (!args || args->struct_size < SY_PREPARE_ARGS_SIZE_MINOR_0 || !args->op)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_prepare_args undersized");
  if (check_op(&args->plugin->device, args->op, NULL, NULL) != 0)
    return sy_fail(err, SY_STATUS_UNSUPPORTED, "add_f32 refuses this operator (see check)");
  for (i = 0; i < args->op->inputs[0]->ndim; ++i) n *= args->op->inputs[0]->shape[i];
#ifdef TEST_PREPARE_DISAGREES
  if (n > 40) return sy_fail(err, SY_STATUS_UNSUPPORTED, "test: more than 40 elements");
#endif
  k = (struct sy_kernel*)calloc(1, sizeof *k);
  if (!k) return sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "malloc");
  k->elements = n;
  for (i = 0; i < 3; ++i) {
    const sy_tensor_desc* t = i < 2 ? args->op->inputs[i] : args->op->outputs[0];
    if (t->ndim > 8) {
      free(k);
      return sy_fail(err, SY_STATUS_UNSUPPORTED, "add_f32: rank above 8");
    }
    /* Only the fields the host's struct has: an older host's desc is shorter than ours (1.10
     * added `layout`), and reading past it is the overread the ABI forbids. */
    memset(&k->desc[i], 0, sizeof k->desc[i]);
    memcpy(&k->desc[i], t, t->struct_size < sizeof *t ? t->struct_size : sizeof *t);
    k->desc[i].struct_size = sizeof k->desc[i];
    memcpy(k->shapes[i], t->shape, sizeof(int64_t) * (size_t)t->ndim);
    k->desc[i].shape = k->shapes[i];
  }
  args->kernel = k;
  return SY_STATUS_OK;
}

static sy_status plugin_execute(sy_execute_args* args, sy_error_buffer* err) {
  const float *a, *b;
  float* c;
  int64_t i;
  if (!args || args->struct_size < SY_EXECUTE_ARGS_SIZE_MINOR_0 || args->num_inputs != 2 ||
      args->num_outputs != 1)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "add_f32 takes 2 inputs and 1 output");
#ifdef TEST_TRUSTS_ARGUMENTS
  if (!args->inputs[0]->data || !args->inputs[1]->data || !args->outputs[0]->data)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "NULL data pointer");
#else
  {
    char why[256];
    if (!sy_tensor_matches(args->inputs[0], &args->kernel->desc[0], "a", why, sizeof why) ||
        !sy_tensor_matches(args->inputs[1], &args->kernel->desc[1], "b", why, sizeof why) ||
        !sy_tensor_matches(args->outputs[0], &args->kernel->desc[2], "c", why, sizeof why))
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "add_f32: %s", why);
  }
#endif
  a = (const float*)args->inputs[0]->data;
  b = (const float*)args->inputs[1]->data;
  c = (float*)args->outputs[0]->data;
#if SY_ABI_COMPAT_MINOR >= 5 && !defined(TEST_TRUSTS_ARGUMENTS)
  /* Dynamic dims: this execute's extents, which the checks above bound by the prepared ones. */
  {
    int d;
    int64_t n = 1;
    for (d = 0; d < args->inputs[0]->ndim; ++d) n *= args->inputs[0]->shape[d];
    for (i = 0; i < 3; ++i) {
      const DLTensor* t = i < 2 ? args->inputs[i] : args->outputs[0];
      if (memcmp(t->shape, args->inputs[0]->shape, sizeof(int64_t) * (size_t)t->ndim) != 0)
        return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "add_f32: a, b and c differ in shape");
    }
    args->kernel->elements = n;
  }
#endif
#if defined(TEST_WRONG_NUMBERS)
  for (i = 0; i < args->kernel->elements; ++i) c[i] = a[i] - b[i];
#elif defined(TEST_WRITES_STDOUT)
  printf("add_f32: %lld elements\n", (long long)args->kernel->elements);
  for (i = 0; i < args->kernel->elements; ++i) c[i] = a[i] + b[i];
#elif defined(TEST_SEGFAULT)
  /* Aligned and not NULL, so the crash is the signal even where UBSan checks stores. */
  *(volatile float*)(uintptr_t)(args->kernel->elements * 16 + 16) = a[0];
  (void)b;
  (void)c;
#elif defined(TEST_SHARED_SCRATCH)
  {
    static float scratch[1 << 16];
    struct timespec pause = {0, 2000000};
    if (args->kernel->elements > (1 << 16))
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "too large for the scratch");
    for (i = 0; i < args->kernel->elements; ++i) scratch[i] = a[i] + b[i];
    nanosleep(&pause, NULL); /* long enough for another thread's call to overwrite it */
    for (i = 0; i < args->kernel->elements; ++i) c[i] = scratch[i];
  }
#else
  for (i = 0; i < args->kernel->elements; ++i) c[i] = a[i] + b[i];
#endif
  return SY_STATUS_OK;
}

static void plugin_release(sy_plugin* p, sy_kernel* k) {
  (void)p;
  ++g_counters.release;
  free(k);
}

#if SY_ABI_COMPAT_MINOR >= 2
static void plugin_destroy(sy_destroy_args* args) {
  if (!args || args->struct_size < SY_DESTROY_ARGS_SIZE_MINOR_2) return;
  ++g_counters.destroy;
  free(args->plugin);
}

static void plugin_release_kernel(sy_release_kernel_args* args) {
  if (!args || args->struct_size < SY_RELEASE_KERNEL_ARGS_SIZE_MINOR_2) return;
  ++g_counters.release_kernel;
  free(args->kernel);
}

/* execute completes its work, so there is nothing to wait for; counted all the same. */
static sy_status plugin_synchronize(sy_synchronize_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_SYNCHRONIZE_ARGS_SIZE_MINOR_2)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_synchronize_args undersized");
  ++g_counters.synchronize;
  return SY_STATUS_OK;
}
#endif

#if SY_ABI_COMPAT_MINOR >= 1
static sy_status plugin_memory_info(sy_memory_info_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_MEMORY_INFO_ARGS_SIZE_MINOR_1)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_memory_info_args undersized");
  args->free_bytes = 1024;
  args->total_bytes = 4096;
  return SY_STATUS_OK;
}
#endif

#ifndef TEST_ABI_MAJOR
#define TEST_ABI_MAJOR SY_ABI_VERSION_MAJOR
#endif

static sy_plugin_api make_api(void) {
  sy_plugin_api api;
  memset(&api, 0, sizeof api);
  api.struct_size = sizeof api;
  api.abi_major = TEST_ABI_MAJOR;
  api.abi_minor = SY_ABI_COMPAT_MINOR;
  api.plugin_name = TEST_PLUGIN_NAME;
  api.plugin_version = "1.0.0";
  api.init = plugin_init;
  api.shutdown = plugin_shutdown;
  api.get_devices = plugin_get_devices;
  api.get_kernels = plugin_get_kernels;
  api.check = plugin_check;
  api.prepare = plugin_prepare;
  api.execute = plugin_execute;
  api.release = plugin_release;
#if SY_ABI_COMPAT_MINOR >= 1
  api.memory_info = plugin_memory_info;
#endif
#if SY_ABI_COMPAT_MINOR >= 2
  api.synchronize = plugin_synchronize;
  api.destroy = plugin_destroy;
  api.release_kernel = plugin_release_kernel;
  api.extensions = NULL;
#endif
#ifdef TEST_SMALL_TABLE
  api.struct_size = SY_PLUGIN_API_SIZE_MINOR_0 - sizeof(void*);
#endif
  return api;
}

static sy_plugin_api g_api;

#ifdef TEST_ILLEGAL_AT_LOAD
/* An instruction no CPU has (ud2), executed by a static initializer when the library is opened:
 * what an AVX-512 initializer does on a CPU without AVX-512. */
__attribute__((constructor)) static void illegal_at_load(void) {
  __builtin_trap();
}
#endif

#ifdef TEST_NO_ENTRY
SY_EXPORT const sy_plugin_api* sy_plugin_entry_misspelled(const sy_host_info* host) {
#else
SY_EXPORT const sy_plugin_api* sy_plugin_entry(const sy_host_info* host) {
#endif
  g_host = host;
#ifdef TEST_SEGFAULT_IN_ENTRY
  { /* a bad pointer, written before the table is returned; through a volatile pointer, so that
       GCC does not read the constant address as an array of no elements */
    volatile int* volatile bad = (volatile int*)(uintptr_t)16;
    *bad = 1;
  }
#endif
  g_api = make_api();
  plugin_log(SY_LOG_DEBUG, "test plugin " TEST_PLUGIN_NAME " entered");
  return &g_api;
}
