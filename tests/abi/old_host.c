/*
 * A host written against an older ABI minor (built twice: SY_ABI_COMPAT_MINOR=0 and =1, hosts
 * of ABI 1.0 and 1.1): it knows nothing of the later fields, so its structs are the old, smaller
 * ones. Loading a plugin built for any minor (older, same or newer) must work end to end:
 * negotiate, init (a 1.2 plugin then finds no host info in init's arguments), enumerate, check,
 * prepare, execute, and, at minor 1, memory_info when the plugin has it.
 * Exit 0 on success; otherwise prints what failed and exits 1.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "switchyard/envelope_check.h"

#if SY_ABI_COMPAT_MINOR > 1
#error "old_host must be compiled with SY_ABI_COMPAT_MINOR=0 or 1"
#endif

static int failures = 0;
#define EXPECT(cond, what)                             \
  do {                                                 \
    if (!(cond)) {                                     \
      fprintf(stderr, "old_host: FAILED: %s\n", what); \
      ++failures;                                      \
    }                                                  \
  } while (0)

static void host_log(void* ctx, sy_log_level level, const char* message) {
  (void)ctx;
  (void)level;
  (void)message;
}

static void count_refusal(void* ctx, const sy_refusal* r) {
  (void)r;
  ++*(int*)ctx;
}

int main(int argc, char** argv) {
  void* lib;
  sy_plugin_entry_fn entry;
  const sy_plugin_api* api;
  sy_host_info host;
  char text[256];
  sy_error_buffer err = {sizeof(sy_error_buffer), text, sizeof text};
  sy_init_args init;
  sy_get_devices_args devs;
  sy_get_kernels_args kers;
  int64_t shape[1] = {4};
  sy_tensor_desc t = {sizeof(sy_tensor_desc), SY_DTYPE_F32, 1, shape, SY_MEMORY_HOST};
  const sy_tensor_desc* ins[2] = {&t, &t};
  const sy_tensor_desc* outs[1] = {&t};
  sy_op_desc op = {sizeof(sy_op_desc), SY_OP_ADD, ins, 2, outs, 1, NULL, 0, 0};
  /* The canary after the old struct catches a newer plugin writing a field this host lacks
   * (1.4's workspace_bytes). */
  struct {
    sy_check_args args;
    uint64_t canary;
  } guarded;
  sy_prepare_args prep;
  float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, c[4] = {0};
  DLTensor ta, tb, tc;
  const DLTensor* tin[2] = {&ta, &tb};
  const DLTensor* tout[1] = {&tc};
  sy_execute_args exec;
  int refusals = 0;

  if (argc != 2) return fprintf(stderr, "usage: old_host PLUGIN.so\n"), 2;
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) return fprintf(stderr, "old_host: %s\n", dlerror()), 1;
  entry = (sy_plugin_entry_fn)dlsym(lib, SY_PLUGIN_ENTRY_SYMBOL);
  if (!entry) return fprintf(stderr, "old_host: no entry\n"), 1;

  memset(&host, 0, sizeof host);
  host.struct_size = sizeof host;
  host.abi_major = SY_ABI_VERSION_MAJOR;
  host.abi_minor = SY_ABI_COMPAT_MINOR;
  host.abi_minor_min = 0;
  host.log = host_log;
  api = entry(&host);
  EXPECT(api != NULL, "entry returned a table");
  if (!api) return 1;
  EXPECT(api->abi_major == SY_ABI_VERSION_MAJOR, "same major");
  /* The old host reads only the prefix it knows of a possibly larger table. */
  EXPECT(api->struct_size >= SY_PLUGIN_API_SIZE_MINOR_0, "table covers minor 0");

  memset(&init, 0, sizeof init);
  init.struct_size = sizeof init;
  EXPECT(api->init(&init, &err) == SY_STATUS_OK && init.plugin, "init");

  memset(&devs, 0, sizeof devs);
  devs.struct_size = sizeof devs;
  devs.plugin = init.plugin;
  EXPECT(api->get_devices(&devs, &err) == SY_STATUS_OK && devs.num_devices == 1, "one device");

  memset(&kers, 0, sizeof kers);
  kers.struct_size = sizeof kers;
  kers.plugin = init.plugin;
  EXPECT(api->get_kernels(&kers, &err) == SY_STATUS_OK && kers.num_kernels == 1, "one kernel");

  memset(&guarded, 0, sizeof guarded);
  guarded.canary = 0x5a5a5a5a5a5a5a5aull;
  guarded.args.struct_size = sizeof guarded.args;
  guarded.args.plugin = init.plugin;
  guarded.args.device = devs.devices[0];
  guarded.args.op = &op;
  guarded.args.refusal_context = &refusals;
  guarded.args.add_refusal = count_refusal;
  EXPECT(api->check(&guarded.args, &err) == SY_STATUS_OK && guarded.args.accepted == 1,
         "check accepts add");

  t.dtype = SY_DTYPE_F16; /* outside the envelope: must refuse with a reason */
  EXPECT(api->check(&guarded.args, &err) == SY_STATUS_OK && guarded.args.accepted == 0 &&
             refusals >= 1,
         "check refuses f16 with a reason");
  EXPECT(guarded.canary == 0x5a5a5a5a5a5a5a5aull, "check writes nothing past the host's struct");
  t.dtype = SY_DTYPE_F32;

  memset(&prep, 0, sizeof prep);
  prep.struct_size = sizeof prep;
  prep.plugin = init.plugin;
  prep.op = &op;
  EXPECT(api->prepare && api->prepare(&prep, &err) == SY_STATUS_OK, "prepare");

  memset(&ta, 0, sizeof ta);
  ta.data = a;
  ta.device.device_type = kDLCPU;
  ta.ndim = 1;
  ta.dtype.code = kDLFloat;
  ta.dtype.bits = 32;
  ta.dtype.lanes = 1;
  ta.shape = shape;
  tb = ta;
  tb.data = b;
  tc = ta;
  tc.data = c;
  memset(&exec, 0, sizeof exec);
  exec.struct_size = sizeof exec;
  exec.plugin = init.plugin;
  exec.kernel = prep.kernel;
  exec.inputs = tin;
  exec.num_inputs = 2;
  exec.outputs = tout;
  exec.num_outputs = 1;
  EXPECT(api->execute(&exec, &err) == SY_STATUS_OK, "execute");
  EXPECT(c[0] == 11 && c[3] == 44, "add computed a + b");
#if SY_ABI_COMPAT_MINOR >= 1
  /* The negotiated minor is the smaller of the two; the slot is used only if both reach 1. */
  if (api->abi_minor >= 1 && api->struct_size >= SY_PLUGIN_API_SIZE_MINOR_1 && api->memory_info) {
    sy_memory_info_args mem;
    memset(&mem, 0, sizeof mem);
    mem.struct_size = sizeof mem;
    mem.plugin = init.plugin;
    EXPECT(api->memory_info(&mem, &err) == SY_STATUS_OK && mem.total_bytes == 4096,
           "memory_info of a minor-1+ plugin");
  }
#endif
  api->release(init.plugin, prep.kernel);
  api->shutdown(init.plugin);
  if (failures == 0)
    printf("old_host: %s (ABI 1.%u) works with an ABI 1.%d host\n", argv[1], api->abi_minor,
           SY_ABI_COMPAT_MINOR);
  return failures ? 1 : 0;
}
