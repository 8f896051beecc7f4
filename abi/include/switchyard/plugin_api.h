/*
 * Switchyard plugin C ABI.
 *
 * Everything a backend plugin author needs. A plugin is a shared object that
 * exports ONE symbol, `sy_plugin_entry` (SY_PLUGIN_ENTRY_SYMBOL). The host
 * calls it with its version range and services; the plugin returns a table of
 * function pointers (sy_plugin_api). Every other interaction goes through
 * that table.
 *
 * Conventions (they hold for every declaration below):
 *
 * - Pure C. No C++ exception, STL type or allocator crosses the boundary. A
 *   plugin written in C++ must catch everything at its edge.
 * - struct_size: every struct that crosses begins with `size_t struct_size`,
 *   set by the side that ALLOCATED the struct to sizeof() as it knows it.
 *   Structs only grow at the end. A callee that receives a struct larger than
 *   it knows (newer caller) uses the prefix it knows; one that receives a
 *   struct smaller than the minimum for the negotiated version returns
 *   SY_STATUS_INVALID_ARGUMENT naming the struct. Compare with the
 *   SY_<STRUCT>_SIZE_MINOR_<n> constant declared after each struct.
 * - Arrays of structs cross as arrays of POINTERS, so each element carries
 *   its own struct_size and a newer element type does not change the stride.
 * - Ownership: memory is freed by the side that allocated it. Strings and
 *   arrays returned by the plugin ("plugin-owned") stay valid until the
 *   plugin's `shutdown`, unless said otherwise. Strings passed by the host
 *   are valid only during the call; copy what you keep.
 * - Errors: functions return a sy_status from a closed set and write a
 *   human-readable message into the host-owned sy_error_buffer (truncated to
 *   its capacity, always NUL-terminated). A NULL buffer means "no message
 *   wanted".
 * - A plugin never prints. It logs through sy_host_info.log.
 * - Versioning: SY_ABI_VERSION_MAJOR changes only on incompatible change;
 *   the host refuses a plugin of another major. SY_ABI_VERSION_MINOR grows
 *   with additive changes (new trailing fields and optional slots). Both
 *   sides use the negotiated minor = min(host minor, plugin minor): an
 *   optional slot is called only if that minor is high enough AND the struct
 *   covers the field AND the pointer is non-NULL. A missing optional slot
 *   means "unsupported", never a crash.
 */
#ifndef SWITCHYARD_PLUGIN_API_H_
#define SWITCHYARD_PLUGIN_API_H_

#include <dlpack/dlpack.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "switchyard/vocabulary.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Versions                                                                  */
/* ------------------------------------------------------------------------ */

#define SY_ABI_VERSION_MAJOR 1
#define SY_ABI_VERSION_MINOR 10

/* A plugin (or host) may be compiled as if against an older minor of this
 * header by defining SY_ABI_COMPAT_MINOR before including it: fields added
 * after that minor disappear from the structs, exactly as in the old header.
 * The test suite uses this to prove old-plugin/new-host and
 * new-plugin/old-host both work. */
#ifndef SY_ABI_COMPAT_MINOR
#define SY_ABI_COMPAT_MINOR SY_ABI_VERSION_MINOR
#endif

/* Minimum struct_size a struct must have to contain `field`. */
#define SY_STRUCT_SIZE_MIN(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))

/* Declares NAME_SIZE_MINOR_<minor>: the struct_size `type` has at ABI minor `minor`, i.e. up
 * to and including `last_field`, the last field that minor defines (as PJRT's
 * PJRT_DEFINE_STRUCT_TRAITS does). Every struct below has one constant per minor that grew it,
 * declared right after it, so no side picks its own "last field": a callee requires
 * NAME_SIZE_MINOR_0 (or the minor that added a field it cannot do without) and reads a field of
 * a later minor only when struct_size >= that minor's constant. */
#define SY_DEFINE_STRUCT_SIZE(NAME, type, minor, last_field) \
  enum { NAME##_SIZE_MINOR_##minor = SY_STRUCT_SIZE_MIN(type, last_field) }

/* The exported entry symbol's name. */
#define SY_PLUGIN_ENTRY_SYMBOL "sy_plugin_entry"

#if defined(_WIN32)
#define SY_EXPORT __declspec(dllexport)
#else
#define SY_EXPORT __attribute__((visibility("default")))
#endif

/* ------------------------------------------------------------------------ */
/* Status                                                                    */
/* ------------------------------------------------------------------------ */

/* Closed set. A plugin returns nothing else; the host maps an unknown value
 * to SY_STATUS_INTERNAL and reports the plugin. */
typedef enum sy_status {
  SY_STATUS_OK = 0,
  /* The caller passed something malformed: wrong rank, NULL data pointer,
   * mismatched dtypes, undersized struct, write past a cache's capacity. */
  SY_STATUS_INVALID_ARGUMENT = 1,
  /* Permanent: this plugin cannot ever do this (e.g. an operator outside a
   * kernel's envelope). Retrying is pointless. */
  SY_STATUS_UNSUPPORTED = 2,
  /* Not now: the hardware, driver or a library is missing or busy. */
  SY_STATUS_UNAVAILABLE = 3,
  SY_STATUS_OUT_OF_MEMORY = 4,
  /* A bug in the plugin. */
  SY_STATUS_INTERNAL = 5,
  SY_STATUS_COUNT
} sy_status;

static inline const char* sy_status_name(sy_status s) {
  switch (s) {
    case SY_STATUS_OK: return "OK";
    case SY_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case SY_STATUS_UNSUPPORTED: return "UNSUPPORTED";
    case SY_STATUS_UNAVAILABLE: return "UNAVAILABLE";
    case SY_STATUS_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case SY_STATUS_INTERNAL: return "INTERNAL";
    default: return 0;
  }
}

/* Host-owned buffer a callee writes its error message into. */
typedef struct sy_error_buffer {
  size_t struct_size;
  char* text;      /* host-allocated, `capacity` bytes */
  size_t capacity; /* including the terminating NUL */
} sy_error_buffer;
SY_DEFINE_STRUCT_SIZE(SY_ERROR_BUFFER, sy_error_buffer, 0, capacity);

/* Writes a formatted message into `err` (if any) and returns `status`, so a
 * plugin can write `return sy_fail(err, SY_STATUS_UNSUPPORTED, "...", ...)`. */
static inline sy_status sy_fail(sy_error_buffer* err, sy_status status, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static inline sy_status sy_fail(sy_error_buffer* err, sy_status status, const char* fmt, ...) {
  if (err && err->text && err->capacity > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->text, err->capacity, fmt, ap);
    va_end(ap);
  }
  return status;
}

/* ------------------------------------------------------------------------ */
/* DLPack dtype mapping                                                      */
/* ------------------------------------------------------------------------ */

/* The DLDataType of a sy_dtype (lanes = 1). A block-quantized type (since ABI 1.3) has no
 * DLPack code: it crosses as kDLOpaqueHandle, 8 bits, lanes = its sy_dtype value, a use DLPack
 * leaves to the two sides to agree on (docs/abi.md, "Block-quantized tensors"). */
static inline DLDataType sy_dtype_to_dl(sy_dtype d) {
  DLDataType t;
  t.lanes = 1;
  t.bits = (uint8_t)(sy_dtype_size(d) * 8);
  if (sy_dtype_is_blocked(d)) {
    t.code = kDLOpaqueHandle;
    t.bits = 8;
    t.lanes = (uint16_t)d;
    return t;
  }
  switch (d) {
    case SY_DTYPE_F32:
    case SY_DTYPE_F16:
    case SY_DTYPE_F64: t.code = kDLFloat; break;
    case SY_DTYPE_BF16: t.code = kDLBfloat; break;
    case SY_DTYPE_U8: t.code = kDLUInt; break;
    default: t.code = kDLInt; break;
  }
  return t;
}

/* bf16 is the upper half of an f32: widening is exact. */
static inline float sy_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Rounds to nearest even; a NaN stays a (quiet) NaN. */
static inline uint16_t sy_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* 1 if `t` is exactly the DLDataType of `d`. */
static inline int sy_dtype_matches_dl(sy_dtype d, DLDataType t) {
  DLDataType e = sy_dtype_to_dl(d);
  return t.code == e.code && t.bits == e.bits && t.lanes == e.lanes;
}

/* ------------------------------------------------------------------------ */
/* Host side: what the host gives the plugin                                 */
/* ------------------------------------------------------------------------ */

typedef enum sy_log_level {
  SY_LOG_TRACE = 0,
  SY_LOG_DEBUG = 1,
  SY_LOG_INFO = 2,
  SY_LOG_WARN = 3,
  SY_LOG_ERROR = 4
} sy_log_level;

/* Passed to sy_plugin_entry. Host-owned; valid until the plugin's library is
 * unloaded (the plugin may keep the pointer). */
typedef struct sy_host_info {
  size_t struct_size;
  uint32_t abi_major;       /* the host's SY_ABI_VERSION_MAJOR */
  uint32_t abi_minor;       /* the host's highest minor */
  uint32_t abi_minor_min;   /* the oldest minor the host still accepts */
  const char* host_version; /* e.g. "switchyard 0.1.0"; informational */
  /* Opaque, passed back in every call of `log`. It tells the host which
   * plugin is speaking. */
  void* host_context;
  /* Logging. Thread-safe; may be called from any plugin thread at any time
   * between entry and unload. `message` is plugin-owned for the call. Never
   * NULL. */
  void (*log)(void* host_context, sy_log_level level, const char* message);
} sy_host_info;
SY_DEFINE_STRUCT_SIZE(SY_HOST_INFO, sy_host_info, 0, log);

/* ------------------------------------------------------------------------ */
/* Plugin side: what the plugin declares                                     */
/* ------------------------------------------------------------------------ */

/* Opaque plugin instance, created by init, destroyed by shutdown. */
typedef struct sy_plugin sy_plugin;
/* Opaque prepared kernel, created by prepare, destroyed by release. */
typedef struct sy_kernel sy_kernel;

/* One device a plugin can run on. Plugin-owned. */
typedef struct sy_device_desc {
  size_t struct_size;
  const char* name;         /* e.g. "AMD EPYC 9B45", "NVIDIA H200" */
  DLDeviceType device_type; /* kDLCPU, kDLCUDA, ... */
  int32_t device_id;        /* the DLDevice.device_id tensors on it carry */
  const char* arch;         /* e.g. "avx512_core_bf16", "sm_90" */
  uint64_t memory_bytes;    /* total memory it can address; 0 = unknown */
  int32_t compute_units;    /* cores, SMs; 0 = unknown */
  /* 0 if the device is known but cannot be used now (e.g. below the
   * minimum architecture); `unavailable_reason` then says why. */
  int32_t available;
  const char* unavailable_reason; /* NULL when available */
  /* 1 if the device's memory is host memory (a CPU), so tensors on it need
   * no copy to or from the host. */
  int32_t memory_is_host;
} sy_device_desc;
SY_DEFINE_STRUCT_SIZE(SY_DEVICE_DESC, sy_device_desc, 0, memory_is_host);

/* A kernel's declared capability: the set of operators it can serve, as
 * data. `check` may only narrow it. Plugin-owned. */
typedef struct sy_kernel_envelope {
  size_t struct_size;
  const char* kernel; /* unique within the plugin, [a-z0-9_]+ */
  sy_op_kind op;
  const char* family;       /* "flash", "sdpa", "flex", "fused_decode",
                               "generic", ...; what --attention pins */
  DLDeviceType device_type; /* runs on the plugin's devices of this type */
  uint64_t dtypes;          /* mask of SY_DTYPE_BIT() the op's dtype may have:
                               its first input's dtype, except an embedding
                               with a block-quantized table: its output's
                               (sy_op_dtype in envelope_check.h) */
  uint64_t features;        /* mask of SY_FEATURE_BIT() it offers */
  /* Head dims (attention ops): an explicit list, OR any multiple of
   * `head_dim_multiple` up to `head_dim_max`. Empty list and 0 multiple
   * means unrestricted. */
  const int32_t* head_dims;
  size_t num_head_dims;
  int32_t head_dim_multiple;
  int32_t head_dim_max;
  int32_t max_gqa_ratio; /* Hq / Hkv; 0 = unlimited, 1 = no GQA */
  /* Residency per operand, inputs first, then outputs. Operands beyond
   * the array use `default_residency`. */
  sy_residency default_residency;
  const sy_residency* operand_residency;
  size_t num_operand_residency;
  /* Relative cost of this kernel against peers serving the same op; lower
   * is preferred. 1.0 is a plain well-tuned kernel. The planner multiplies it by
   * the op's work (flops, or elements for elementwise ops) and adds the bytes
   * the candidate would copy, to rank the legal candidates of one op on
   * devices of equal preference; it never compares costs across ops. */
  double cost_hint;
#if SY_ABI_COMPAT_MINOR >= 3
  /* Since 1.3. Mask of SY_DTYPE_BIT(): the dtypes the op's WEIGHT operands (matmul's b, an
   * embedding's table, the fused decode block's wq/wk/wv) may have when they differ from the
   * op's dtype, e.g. "weights q4_k, activations f32/bf16". 0 = the weights must have the op's
   * dtype (as before 1.3). */
  uint64_t weight_dtypes;
#endif
} sy_kernel_envelope;
SY_DEFINE_STRUCT_SIZE(SY_KERNEL_ENVELOPE, sy_kernel_envelope, 0, cost_hint);
#if SY_ABI_COMPAT_MINOR >= 3
SY_DEFINE_STRUCT_SIZE(SY_KERNEL_ENVELOPE, sy_kernel_envelope, 3, weight_dtypes);
#endif

/* One attribute of an operator. Host-owned for the call. */
typedef enum sy_attr_type { SY_ATTR_INT = 0, SY_ATTR_FLOAT = 1, SY_ATTR_STRING = 2 } sy_attr_type;

typedef struct sy_attr {
  size_t struct_size;
  const char* name; /* SY_ATTR_* in vocabulary.h */
  sy_attr_type type;
  int64_t i;
  double f;
  const char* s;
} sy_attr;
SY_DEFINE_STRUCT_SIZE(SY_ATTR, sy_attr, 0, s);

/* A tensor as the planner knows it before any data exists. */
typedef struct sy_tensor_desc {
  size_t struct_size;
  sy_dtype dtype;
  int32_t ndim;
  const int64_t* shape;  /* `ndim` extents; upper bounds for the dims in dynamic_dims */
  sy_memory_kind memory; /* where it will live when the kernel runs */
#if SY_ABI_COMPAT_MINOR >= 5
  /* Since 1.5. Bit i set: dimension i is an upper bound. Every execute's DLTensor then
   * carries the step's actual extent there, 1 <= actual <= shape[i] (the other dimensions
   * are exactly shape[]), and the actual shapes of one execute satisfy the operator's
   * contract (op_contract.h) as the prepared ones do. Only an operator whose
   * required_features include SY_FEATURE_VARLEN has dynamic dimensions, and the host gives
   * one only to a kernel whose envelope declares VARLEN: a plugin of an older minor never
   * sees one. A kernel sizes what it holds for the bounds and reads every extent it uses
   * from the DLTensors. Read it only when struct_size >= SY_TENSOR_DESC_SIZE_MINOR_5 (0
   * otherwise: every dimension fixed). */
  uint32_t dynamic_dims;
#endif
#if SY_ABI_COMPAT_MINOR >= 10
  /* Since 1.10. How the tensor's bytes are arranged: 0 is the dtype's stored layout (row-major
   * elements; block-quantized rows as GGUF stores them, block after block). Any other value is
   * a packed layout of the plugin that owns the kernel, which that plugin's weight-layouts
   * extension asked for (sy_weight_layout_extension, below) and produced with pack_weight: the
   * host sets it only on a weight input of an op it prepares with that plugin, after the
   * plugin's weight_layout named it for that very op and input. dtype and shape stay the
   * stored tensor's; only the bytes behind the DLTensor's data differ. A kernel refuses
   * (check) every layout it did not ask for. Read it through sy_tensor_layout(). */
  uint32_t layout;
#endif
} sy_tensor_desc;
SY_DEFINE_STRUCT_SIZE(SY_TENSOR_DESC, sy_tensor_desc, 0, memory);
#if SY_ABI_COMPAT_MINOR >= 5
SY_DEFINE_STRUCT_SIZE(SY_TENSOR_DESC, sy_tensor_desc, 5, dynamic_dims);
#endif
#if SY_ABI_COMPAT_MINOR >= 10
SY_DEFINE_STRUCT_SIZE(SY_TENSOR_DESC, sy_tensor_desc, 10, layout);
#endif

/* The layout of `t` (0, the stored layout, for a struct of a minor before 1.10). */
static inline uint32_t sy_tensor_layout(const sy_tensor_desc* t) {
#if SY_ABI_COMPAT_MINOR >= 10
  if (t && t->struct_size >= SY_TENSOR_DESC_SIZE_MINOR_10) return t->layout;
#else
  (void)t;
#endif
  return 0;
}

/* The dynamic dimensions of `t` (0 for a struct of a minor before 1.5). */
static inline uint32_t sy_tensor_dynamic_dims(const sy_tensor_desc* t) {
#if SY_ABI_COMPAT_MINOR >= 5
  if (t && t->struct_size >= SY_TENSOR_DESC_SIZE_MINOR_5) return t->dynamic_dims;
#else
  (void)t;
#endif
  return 0;
}

/* An operator to check or prepare. Host-owned for the call. */
typedef struct sy_op_desc {
  size_t struct_size;
  sy_op_kind op;
  const sy_tensor_desc* const* inputs;
  size_t num_inputs;
  const sy_tensor_desc* const* outputs;
  size_t num_outputs;
  const sy_attr* const* attrs;
  size_t num_attrs;
  /* The host's derivation of the features this operator uses (mask of
   * SY_FEATURE_BIT), from its attributes and shapes. A kernel must refuse
   * an operator that uses a feature it lacks. */
  uint64_t required_features;
} sy_op_desc;
SY_DEFINE_STRUCT_SIZE(SY_OP_DESC, sy_op_desc, 0, required_features);

/* One reason a kernel refuses an operator. Plugin-owned for the call of
 * `add_refusal` only: the host copies it. */
typedef struct sy_refusal {
  size_t struct_size;
  const char* constraint; /* stable name: "dtype", "head_dim", "feature",
                             "gqa_ratio", "residency", "device", ... */
  const char* required;   /* what the operator needs, e.g. "f32" */
  const char* offered;    /* what the kernel offers, e.g. "f16,bf16" */
  const char* text;       /* one sentence for a person; may be NULL */
} sy_refusal;
SY_DEFINE_STRUCT_SIZE(SY_REFUSAL, sy_refusal, 0, text);

/* ------------------------------------------------------------------------ */
/* Call arguments (host-allocated, PJRT style)                               */
/* ------------------------------------------------------------------------ */

typedef struct sy_init_args {
  size_t struct_size;
  /* Options as parallel key/value arrays, host-owned for the call. Known
   * keys: "num_threads" (decimal; worker threads a CPU plugin may use).
   * Unknown keys are ignored. */
  const char* const* option_keys;
  const char* const* option_values;
  size_t num_options;
  sy_plugin* plugin; /* out: the instance */
#if SY_ABI_COMPAT_MINOR >= 2
  /* Since minor 2: the same host info sy_plugin_entry received, so an instance can keep
   * the logger (and whatever later minors add) instead of a global. Host-owned, valid for
   * the life of the process. Read it only when struct_size >= SY_INIT_ARGS_SIZE_MINOR_2. */
  const sy_host_info* host;
#endif
} sy_init_args;
SY_DEFINE_STRUCT_SIZE(SY_INIT_ARGS, sy_init_args, 0, plugin);
#if SY_ABI_COMPAT_MINOR >= 2
SY_DEFINE_STRUCT_SIZE(SY_INIT_ARGS, sy_init_args, 2, host);
#endif

typedef struct sy_get_devices_args {
  size_t struct_size;
  sy_plugin* plugin;
  /* out, plugin-owned until shutdown */
  const sy_device_desc* const* devices;
  size_t num_devices;
  /* out: when num_devices == 0, why (e.g. "CUDA driver not found:
   * cudaGetDeviceCount returned ..."). NULL otherwise. Zero devices is a
   * normal answer, not an error. */
  const char* no_devices_reason;
} sy_get_devices_args;
SY_DEFINE_STRUCT_SIZE(SY_GET_DEVICES_ARGS, sy_get_devices_args, 0, no_devices_reason);

typedef struct sy_get_kernels_args {
  size_t struct_size;
  sy_plugin* plugin;
  const sy_kernel_envelope* const* kernels; /* out, plugin-owned */
  size_t num_kernels;                       /* out */
} sy_get_kernels_args;
SY_DEFINE_STRUCT_SIZE(SY_GET_KERNELS_ARGS, sy_get_kernels_args, 0, num_kernels);

typedef struct sy_check_args {
  size_t struct_size;
  sy_plugin* plugin;
  uint32_t kernel_index; /* into get_kernels' array */
  /* The device to decide for. Host-owned for the call. It is usually one of
   * the plugin's own devices, but may DESCRIBE a device this machine does not
   * have (planning for a target profile): a plugin must decide from the
   * description alone and must not assume the device exists. */
  const sy_device_desc* device;
  const sy_op_desc* op;
  /* The plugin calls this once per failing constraint, for EVERY failing
   * constraint, not only the first. */
  void* refusal_context;
  void (*add_refusal)(void* refusal_context, const sy_refusal* refusal);
  int32_t accepted; /* out: 1 accepted, 0 refused */
#if SY_ABI_COMPAT_MINOR >= 4
  /* Since 1.4, out (host-initialised to 0). When accepting: the bytes of
   * memory the kernel will hold for this op from prepare to release, beyond
   * its operands (scratch, split-KV partials, flags), in the memory of
   * `device` (host memory for a device with memory_is_host). The planner
   * adds it to the device's need before any weight is loaded, so a kernel
   * that allocates more than it declares can make a plan that "fits" fail
   * with OUT_OF_MEMORY at prepare. 0 = none. A plugin writes it only when
   * struct_size >= SY_CHECK_ARGS_SIZE_MINOR_4 (an older host has no field);
   * a host reads it only when the negotiated minor is >= 4. Memory a kernel
   * takes only during execute and gives back before returning is not held
   * and is not declared. */
  uint64_t workspace_bytes;
#endif
} sy_check_args;
SY_DEFINE_STRUCT_SIZE(SY_CHECK_ARGS, sy_check_args, 0, accepted);
#if SY_ABI_COMPAT_MINOR >= 4
SY_DEFINE_STRUCT_SIZE(SY_CHECK_ARGS, sy_check_args, 4, workspace_bytes);
#endif

typedef struct sy_prepare_args {
  size_t struct_size;
  sy_plugin* plugin;
  uint32_t kernel_index;
  uint32_t device_index;
  const sy_op_desc* op;
  sy_kernel* kernel; /* out; freed with release */
} sy_prepare_args;
SY_DEFINE_STRUCT_SIZE(SY_PREPARE_ARGS, sy_prepare_args, 0, kernel);

typedef struct sy_execute_args {
  size_t struct_size;
  sy_plugin* plugin;
  sy_kernel* kernel;
  /* Host-owned for the call. The host has already validated each tensor
   * against the prepared op: dtype, ndim, shape, compact strides (or
   * NULL), non-NULL data, device. Outputs are written through `data`.
   * Since 1.5, a dimension the prepared op marks dynamic (sy_tensor_desc.
   * dynamic_dims) carries this step's actual extent, at most the prepared
   * one: the kernel computes only that much and reads every extent from
   * the tensors, never from the prepared op. */
  const DLTensor* const* inputs;
  size_t num_inputs;
  const DLTensor* const* outputs;
  size_t num_outputs;
} sy_execute_args;
SY_DEFINE_STRUCT_SIZE(SY_EXECUTE_ARGS, sy_execute_args, 0, num_outputs);

typedef struct sy_alloc_args {
  size_t struct_size;
  sy_plugin* plugin;
  uint32_t device_index;
  uint64_t size_bytes;
  uint64_t alignment; /* power of two; 0 = the plugin's default (>= 64) */
  void* data;         /* out; freed with free_memory by the same plugin */
} sy_alloc_args;
SY_DEFINE_STRUCT_SIZE(SY_ALLOC_ARGS, sy_alloc_args, 0, data);

typedef enum sy_copy_direction {
  SY_COPY_HOST_TO_DEVICE = 0,
  SY_COPY_DEVICE_TO_HOST = 1,
  SY_COPY_DEVICE_TO_DEVICE = 2
} sy_copy_direction;

typedef struct sy_copy_args {
  size_t struct_size;
  sy_plugin* plugin;
  uint32_t device_index;
  sy_copy_direction direction;
  void* dst;
  const void* src;
  uint64_t size_bytes;
} sy_copy_args;
SY_DEFINE_STRUCT_SIZE(SY_COPY_ARGS, sy_copy_args, 0, size_bytes);

#if SY_ABI_COMPAT_MINOR >= 1
/* Since minor 1. */
typedef struct sy_memory_info_args {
  size_t struct_size;
  sy_plugin* plugin;
  uint32_t device_index;
  uint64_t free_bytes;  /* out */
  uint64_t total_bytes; /* out */
} sy_memory_info_args;
SY_DEFINE_STRUCT_SIZE(SY_MEMORY_INFO_ARGS, sy_memory_info_args, 1, total_bytes);
#endif

#if SY_ABI_COMPAT_MINOR >= 2
/* Since minor 2. Arguments of `synchronize`. */
typedef struct sy_synchronize_args {
  size_t struct_size;
  sy_plugin* plugin;
  uint32_t device_index;
} sy_synchronize_args;
SY_DEFINE_STRUCT_SIZE(SY_SYNCHRONIZE_ARGS, sy_synchronize_args, 2, device_index);

/* Since minor 2. Arguments of `destroy` (the struct form of `shutdown`). */
typedef struct sy_destroy_args {
  size_t struct_size;
  sy_plugin* plugin;
} sy_destroy_args;
SY_DEFINE_STRUCT_SIZE(SY_DESTROY_ARGS, sy_destroy_args, 2, plugin);

/* Since minor 2. Arguments of `release_kernel` (the struct form of `release`). */
typedef struct sy_release_kernel_args {
  size_t struct_size;
  sy_plugin* plugin;
  sy_kernel* kernel;
} sy_release_kernel_args;
SY_DEFINE_STRUCT_SIZE(SY_RELEASE_KERNEL_ARGS, sy_release_kernel_args, 2, kernel);

/* Since minor 2. Arguments of `free_device_memory` (the struct form of `free_memory`). */
typedef struct sy_free_memory_args {
  size_t struct_size;
  sy_plugin* plugin;
  uint32_t device_index;
  void* data;
} sy_free_memory_args;
SY_DEFINE_STRUCT_SIZE(SY_FREE_MEMORY_ARGS, sy_free_memory_args, 2, data);

/* Since minor 2. The head of every extension a plugin chains from
 * sy_plugin_api.extensions, as PJRT's PJRT_Extension_Base: later features that are not
 * worth a minor bump of the table, or that only some plugins offer, arrive as extensions.
 * `type` says which struct this header begins (types are assigned in this header; the host walks
 * the list and skips every type it does not know). The header is the first member of the
 * extension's struct, and its struct_size is the size of that whole struct. Plugin-owned,
 * valid until the library is unloaded. */
typedef enum sy_extension_type {
  SY_EXTENSION_TYPE_NONE = 0,
  SY_EXTENSION_TYPE_SEGMENTS = 1,      /* sy_segment_extension, below */
  SY_EXTENSION_TYPE_WEIGHT_LAYOUTS = 2 /* sy_weight_layout_extension (since 1.10), below */
} sy_extension_type;

typedef struct sy_extension_header {
  size_t struct_size;
  uint32_t type;                          /* sy_extension_type */
  const struct sy_extension_header* next; /* NULL ends the list */
} sy_extension_header;
SY_DEFINE_STRUCT_SIZE(SY_EXTENSION_HEADER, sy_extension_header, 2, next);

/* ---- Segments (extension SY_EXTENSION_TYPE_SEGMENTS) -------------------------------------
 *
 * A segment is the run of consecutive ops of one step that the planner gave this plugin on one
 * device (ggml's graph_compute, ONNX Runtime's EP Compile, a PJRT program): prepared once for
 * the plan's bounds, executed once per step with the step's extents. Inside it the plugin may
 * fuse ops, launch on its own stream, and capture and replay the work; between its entries it
 * owes the host nothing but the segment's results. A plugin without this extension is driven
 * op by op through prepare/execute, as before; the plan says which form each segment took.
 *
 * Operands are named by index into the segment's tensor table, so an op's output that a later
 * op reads is one tensor, and the plugin sees the dataflow. Each tensor carries flags saying
 * what the host needs of it after the segment (below); a tensor without LIVE_OUT, PERSISTENT or
 * STEP_INPUT is internal: written and read inside the segment only, so fusion may skip it.
 *
 * Step metadata (token ids, positions, slot mapping, query starts, sequence lengths, block
 * tables, output rows) is validated ONCE per step by the host that built it, before
 * execute_segment: every id inside the table it indexes, every slot and block inside the pool,
 * query_start from 0 to the step's tokens and non-decreasing, each sequence's queries within
 * its length and its length within its block table; sy_step_info's maxima are exact. A segment
 * may therefore use the metadata without reading it back. (The op-by-op form promises none of
 * this: execute there validates what it reads.) */

/* Opaque prepared segment, created by prepare_segment, destroyed by release_segment. */
typedef struct sy_segment sy_segment;

typedef enum sy_segment_entry_kind {
  /* One kernel: kernel_index and op as prepare takes them (the host has checked the op against
   * the kernel; prepare_segment must apply the same check), operands by tensor index. */
  SY_SEGMENT_ENTRY_KERNEL = 0,
  /* One transfer into the segment's device: host tensor inputs[0] to device tensor outputs[0]
   * (same dtype and bounds), the step's actual bytes. The host has written inputs[0] before
   * execute_segment and keeps it unchanged until execute_segment returns (not until the device
   * is done): a plugin that uploads asynchronously stages it first. */
  SY_SEGMENT_ENTRY_UPLOAD = 1
} sy_segment_entry_kind;

/* One entry of a segment, in the order the host would run them. Host-owned for the call. */
typedef struct sy_segment_entry {
  size_t struct_size;
  uint32_t kind;          /* sy_segment_entry_kind */
  uint32_t kernel_index;  /* KERNEL: into get_kernels' array; UPLOAD: 0 */
  const sy_op_desc* op;   /* KERNEL: the operator; UPLOAD: NULL */
  const uint32_t* inputs; /* num_inputs indices into the segment's tensors (op->num_inputs) */
  size_t num_inputs;
  const uint32_t* outputs; /* num_outputs indices (op->num_outputs) */
  size_t num_outputs;
} sy_segment_entry;
SY_DEFINE_STRUCT_SIZE(SY_SEGMENT_ENTRY, sy_segment_entry, 2, num_outputs);

/* Flags of a segment tensor (sy_prepare_segment_args.tensor_flags). */
#define SY_SEGMENT_TENSOR_PERSISTENT 1u /* weights, KV memory: contents outlive every step */
#define SY_SEGMENT_TENSOR_STEP_INPUT 2u /* written by the host before each execute_segment */
#define SY_SEGMENT_TENSOR_LIVE_OUT 4u   /* read after the segment, by the host or another one */

typedef struct sy_prepare_segment_args {
  size_t struct_size;
  sy_plugin* plugin;
  uint32_t device_index;
  /* The tensor table: descriptions (dtype, bounds, dynamic dims, memory) and flags, index-
   * aligned, num_tensors each. Host-owned for the call. */
  const sy_tensor_desc* const* tensors;
  const uint32_t* tensor_flags;
  size_t num_tensors;
  const sy_segment_entry* const* entries;
  size_t num_entries;
  sy_segment* segment; /* out; freed with release_segment */
  /* out, plugin-owned until release_segment: one line saying what the plugin made of the
   * segment (e.g. "stream; CUDA graph per decode batch size; 30 add+rms_norm fused"), shown by
   * the host beside the plan's segment. May stay NULL. */
  const char* form;
} sy_prepare_segment_args;
SY_DEFINE_STRUCT_SIZE(SY_PREPARE_SEGMENT_ARGS, sy_prepare_segment_args, 2, form);

/* The extents of one step, which the host computed while building its metadata. */
typedef struct sy_step_info {
  size_t struct_size;
  int64_t tokens;        /* T: rows of the step's token-major tensors */
  int64_t sequences;     /* S: sequences in the step (1 in a contiguous layout) */
  int64_t outputs;       /* logits rows the step computes */
  int64_t max_query_len; /* the most tokens any one sequence has in this step */
  int64_t max_kv_len;    /* the most keys any one sequence holds after this step's append */
} sy_step_info;
SY_DEFINE_STRUCT_SIZE(SY_STEP_INFO, sy_step_info, 2, max_kv_len);

typedef struct sy_execute_segment_args {
  size_t struct_size;
  sy_plugin* plugin;
  sy_segment* segment;
  /* The tensor table in prepare_segment's order, host-owned for the call; a dynamic dimension
   * carries the step's extent (as execute's tensors do). Data pointers are those of every
   * earlier step unless the host says otherwise by preparing a new segment. */
  const DLTensor* const* tensors;
  size_t num_tensors;
  const sy_step_info* step;
  /* out, host-initialised to 0: what this call did, for the host's profile. blocking_waits
   * counts the times it waited for the device (a blocking copy, a stream or device
   * synchronize); launches the device work it enqueued (kernels, copies; a graph launch is
   * one); graph_launches those that replayed a captured graph. */
  uint32_t blocking_waits;
  uint32_t launches;
  uint32_t graph_launches;
} sy_execute_segment_args;
SY_DEFINE_STRUCT_SIZE(SY_EXECUTE_SEGMENT_ARGS, sy_execute_segment_args, 2, graph_launches);

typedef struct sy_release_segment_args {
  size_t struct_size;
  sy_plugin* plugin;
  sy_segment* segment;
} sy_release_segment_args;
SY_DEFINE_STRUCT_SIZE(SY_RELEASE_SEGMENT_ARGS, sy_release_segment_args, 2, segment);

/* The segments extension. Completion follows execute's rules: the work may be enqueued when
 * execute_segment returns (the plugin has `synchronize`), and runs before any later execute,
 * execute_segment or copy of that device. */
typedef struct sy_segment_extension {
  sy_extension_header header; /* type SY_EXTENSION_TYPE_SEGMENTS */
  /* Prepares the segment. UNSUPPORTED when the plugin will not take this one (then the host
   * drives its ops one by one, and says why); INVALID_ARGUMENT for malformed arguments. */
  sy_status (*prepare_segment)(sy_prepare_segment_args* args, sy_error_buffer* err);
  /* Runs one step. From one thread at a time per segment. */
  sy_status (*execute_segment)(sy_execute_segment_args* args, sy_error_buffer* err);
  /* Frees the segment after its enqueued work. Never fails. */
  void (*release_segment)(sy_release_segment_args* args);
} sy_segment_extension;
SY_DEFINE_STRUCT_SIZE(SY_SEGMENT_EXTENSION, sy_segment_extension, 2, release_segment);
#endif

#if SY_ABI_COMPAT_MINOR >= 10
/* ---- Weight layouts (extension SY_EXTENSION_TYPE_WEIGHT_LAYOUTS, since 1.10) ---------------
 *
 * A kernel may read a weight faster in an arrangement of its own than as the file stores it:
 * the rows of a group interleaved so that one vector load feeds every row of the group, the
 * scales gathered beside them (ggml's CPU "repack" buffers, ONNX Runtime's PrePack). The host
 * asks, per planned op and weight input, which layout the kernel wants; packs each weight once
 * per model and layout, as the model loads (the contexts of a model share it); and prepares the
 * kernel with that input's sy_tensor_desc.layout set. The plan says which weights were packed,
 * into what, and counts the packed bytes in the weights' memory. Packing changes where bytes
 * sit, never a value: a kernel's results on the packed weight equal its results on the stored
 * one, bit for bit (conformance checks it for every layout a plugin names).
 *
 * The host uses this extension only with a plugin whose negotiated minor is at least 10. */

typedef struct sy_weight_layout_args {
  size_t struct_size;
  sy_plugin* plugin;
  uint32_t device_index;
  uint32_t kernel_index; /* into get_kernels' array: the kernel the planner chose */
  const sy_op_desc* op;  /* the op as check accepted it, every input in layout 0 */
  uint32_t input;        /* a weight input of op (sy_weight_input, envelope_check.h) */
  uint32_t layout;       /* out, host-initialised to 0: the layout wanted; 0 = as stored */
  uint64_t packed_bytes; /* out: bytes of the weight in that layout */
  /* out, plugin-owned, valid until unload: a short description for the plan, e.g.
   * "q4_0, 8 rows interleaved". */
  const char* name;
} sy_weight_layout_args;
SY_DEFINE_STRUCT_SIZE(SY_WEIGHT_LAYOUT_ARGS, sy_weight_layout_args, 10, name);

typedef struct sy_pack_weight_args {
  size_t struct_size;
  sy_plugin* plugin;
  uint32_t device_index;
  uint32_t layout;            /* a layout weight_layout named, for a weight like `desc` */
  const sy_tensor_desc* desc; /* the weight: dtype, shape, layout 0. Host-owned for the call */
  const void* src;            /* host memory: the weight as stored, sy_tensor_bytes of desc */
  /* Memory of the device (from alloc; host memory for a device that uses it), dst_bytes =
   * the packed_bytes weight_layout gave. The plugin writes every byte of it. */
  void* dst;
  uint64_t dst_bytes;
} sy_pack_weight_args;
SY_DEFINE_STRUCT_SIZE(SY_PACK_WEIGHT_ARGS, sy_pack_weight_args, 10, dst_bytes);

typedef struct sy_weight_layout_extension {
  sy_extension_header header; /* type SY_EXTENSION_TYPE_WEIGHT_LAYOUTS */
  /* The layout the kernel wants for one weight input of one op it accepted. Pure: the same
   * arguments give the same answer. OK with layout 0 when the stored layout is best. */
  sy_status (*weight_layout)(sy_weight_layout_args* args, sy_error_buffer* err);
  /* Writes the weight at src in `layout` to dst; complete when it returns. INVALID_ARGUMENT
   * for a layout, weight or size weight_layout would not have named. Thread-safe. */
  sy_status (*pack_weight)(sy_pack_weight_args* args, sy_error_buffer* err);
} sy_weight_layout_extension;
SY_DEFINE_STRUCT_SIZE(SY_WEIGHT_LAYOUT_EXTENSION, sy_weight_layout_extension, 10, pack_weight);
#endif

/* ------------------------------------------------------------------------ */
/* The function table                                                        */
/* ------------------------------------------------------------------------ */

/* Returned by sy_plugin_entry. Plugin-owned (normally a static const), valid
 * until the library is unloaded. The first four fields keep their position
 * in every major version so that any host can read them and diagnose a
 * mismatch. */
typedef struct sy_plugin_api {
  size_t struct_size;
  uint32_t abi_major;         /* the SY_ABI_VERSION_MAJOR the plugin was built with */
  uint32_t abi_minor;         /* the plugin's minor (SY_ABI_COMPAT_MINOR) */
  const char* plugin_name;    /* [a-z0-9_]+, e.g. "cpu_onednn" */
  const char* plugin_version; /* free form, e.g. "0.1.0" */

  /* --- minor 0, required (non-NULL) ------------------------------------ */

  /* Creates the plugin instance. Must succeed on a machine without the
   * plugin's hardware (report zero devices instead); fails only when the
   * plugin itself is broken. */
  sy_status (*init)(sy_init_args* args, sy_error_buffer* err);
  /* Destroys the instance and everything it owns. After this, no pointer it
   * returned is valid. Never fails. */
  void (*shutdown)(sy_plugin* plugin);
  sy_status (*get_devices)(sy_get_devices_args* args, sy_error_buffer* err);
  sy_status (*get_kernels)(sy_get_kernels_args* args, sy_error_buffer* err);
  /* Decides whether a kernel can serve `op` on a device. Returns OK with
   * accepted = 0 or 1; INVALID_ARGUMENT only if the arguments themselves are
   * malformed. It may only narrow the envelope: accepting an operator the
   * envelope excludes is a capability lie, and the host reports the plugin.
   * The kernel's own prepare must apply this same check. Thread-safe. */
  sy_status (*check)(sy_check_args* args, sy_error_buffer* err);

  /* --- minor 0, optional (NULL = the plugin only declares) --------------- */

  /* Prepares a kernel for `op`; refuses with UNSUPPORTED exactly when check
   * would refuse. */
  sy_status (*prepare)(sy_prepare_args* args, sy_error_buffer* err);
  /* Runs a prepared kernel. May be called many times, from one thread at a
   * time per kernel; separate kernels may run on separate threads at once.
   *
   * Completion. A plugin WITHOUT a `synchronize` slot (every plugin of minors 0
   * and 1) completes the work before execute returns: the host may then read
   * the outputs, overwrite the inputs and reuse every buffer. A plugin WITH
   * `synchronize` (minor 2) may return once the work is enqueued on the
   * device; then
   *   - work it enqueues for one device runs in the order it was submitted,
   *     execute after execute, and before any later `copy` on that device
   *     (a copy therefore sees the outputs of every earlier execute);
   *   - the host keeps every operand buffer alive and unchanged by anything
   *     but this plugin until `synchronize` of that device returned;
   *   - an error of enqueued work may be reported by a later execute, copy or
   *     synchronize of that device, as its status.
   * The return status always covers at least the arguments and the launch. */
  sy_status (*execute)(sy_execute_args* args, sy_error_buffer* err);
  /* Frees a prepared kernel (waits for its enqueued work first). Never fails. */
  void (*release)(sy_plugin* plugin, sy_kernel* kernel);

  /* Device memory. NULL for plugins whose devices all use host memory. */
  sy_status (*alloc)(sy_alloc_args* args, sy_error_buffer* err);
  /* Frees memory from alloc (waits for enqueued work that uses it). Never fails. */
  void (*free_memory)(sy_plugin* plugin, uint32_t device_index, void* data);
  /* Copies size_bytes from src to dst in the given direction, after every
   * execute enqueued earlier on that device; the copy is complete when this
   * returns, so the host may read or reuse either buffer. */
  sy_status (*copy)(sy_copy_args* args, sy_error_buffer* err);

#if SY_ABI_COMPAT_MINOR >= 1
  /* --- minor 1, optional --------------------------------------------------- */

  /* Current free and total memory of a device. */
  sy_status (*memory_info)(sy_memory_info_args* args, sy_error_buffer* err);
#endif

#if SY_ABI_COMPAT_MINOR >= 2
  /* --- minor 2, optional --------------------------------------------------- */

  /* Waits until every execute and copy enqueued on the device has completed,
   * and returns the first error among them. Present means "execute may be
   * asynchronous" (see execute); NULL means execute completes its work before
   * it returns. The host calls it at the end of every step it times and before
   * it frees or rewrites buffers the device may still be using. */
  sy_status (*synchronize)(sy_synchronize_args* args, sy_error_buffer* err);
  /* The struct forms of shutdown, release and free_memory: same meaning,
   * arguments that can grow. The host calls these instead of the minor-0 slots
   * when they are non-NULL (and the negotiated minor is >= 2); a plugin sets both
   * forms so an older host still finds the minor-0 ones. Never fail. */
  void (*destroy)(sy_destroy_args* args);
  void (*release_kernel)(sy_release_kernel_args* args);
  void (*free_device_memory)(sy_free_memory_args* args);
  /* The first extension of a NULL-terminated list, or NULL (see
   * sy_extension_header). */
  const sy_extension_header* extensions;
#endif
} sy_plugin_api;

/* struct_size a plugin table must at least have at each minor. */
SY_DEFINE_STRUCT_SIZE(SY_PLUGIN_API, sy_plugin_api, 0, copy);
#if SY_ABI_COMPAT_MINOR >= 1
SY_DEFINE_STRUCT_SIZE(SY_PLUGIN_API, sy_plugin_api, 1, memory_info);
#endif
#if SY_ABI_COMPAT_MINOR >= 2
SY_DEFINE_STRUCT_SIZE(SY_PLUGIN_API, sy_plugin_api, 2, extensions);
#endif
/* The names of ABI 1.0 and 1.1, kept for plugins written against them. */
#define SY_PLUGIN_API_SIZE_MINOR0 SY_PLUGIN_API_SIZE_MINOR_0
#if SY_ABI_COMPAT_MINOR >= 1
#define SY_PLUGIN_API_SIZE_MINOR1 SY_PLUGIN_API_SIZE_MINOR_1
#endif

/* The entry point every plugin exports, with C linkage:
 *
 *   SY_EXPORT const sy_plugin_api* sy_plugin_entry(const sy_host_info* host);
 *
 * Called once after loading, before anything else. `host` stays valid until
 * unload. Returns the plugin's table (never freed by the host). A plugin
 * should return its table even when it cannot work with the host's version
 * range, so the host can say why; it returns NULL only when it cannot
 * describe itself at all, after logging the reason. */
typedef const sy_plugin_api* (*sy_plugin_entry_fn)(const sy_host_info* host);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SWITCHYARD_PLUGIN_API_H_ */
