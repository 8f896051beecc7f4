/*
 * Validation of a DLTensor against the sy_tensor_desc a kernel was prepared with.
 *
 * The host runs it before every execute (ABI rule 5); a plugin runs it too, because
 * its execute may be called by any host, and bad input must give INVALID_ARGUMENT
 * with a message, never a crash. Header-only C99.
 */
#ifndef SWITCHYARD_TENSOR_CHECK_H_
#define SWITCHYARD_TENSOR_CHECK_H_

#include <stdio.h>

#include "switchyard/plugin_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns 1 when `t` matches `desc`: non-NULL data, the dtype, the rank and shape (a dimension
 * in desc's dynamic_dims, since ABI 1.5: from 1 to the prepared extent), and compact row-major
 * strides (or NULL strides). Otherwise returns 0 and writes what is wrong, prefixed with
 * `label` (e.g. "input 2"), into `msg`. Residency is not checked here: only the caller knows
 * which device types stand for which memory. Whether the actual extents of several tensors
 * agree is the operator contract's question (sy_op_contract_check on the actual shapes). */
static inline int sy_tensor_matches(const DLTensor* t, const sy_tensor_desc* desc,
                                    const char* label, char* msg, size_t cap) {
  int i;
  int64_t expect = 1;
  if (!t) return snprintf(msg, cap, "%s: tensor is NULL", label), 0;
  if (!t->data) return snprintf(msg, cap, "%s: data pointer is NULL", label), 0;
  if (!sy_dtype_matches_dl(desc->dtype, t->dtype))
    return snprintf(msg, cap, "%s: dtype (code %d, %d bits) does not match the prepared %s", label,
                    (int)t->dtype.code, (int)t->dtype.bits,
                    sy_dtype_name(desc->dtype) ? sy_dtype_name(desc->dtype) : "?"),
           0;
  if (t->ndim != desc->ndim || !t->shape)
    return snprintf(msg, cap, "%s: rank %d, prepared for rank %d", label, t->ndim, desc->ndim), 0;
  for (i = 0; i < t->ndim; ++i) {
    int dynamic = i < 32 && (sy_tensor_dynamic_dims(desc) >> i) & 1u;
    if (dynamic && (t->shape[i] < 1 || t->shape[i] > desc->shape[i]))
      return snprintf(msg, cap, "%s: dimension %d is %lld, prepared for 1 to %lld", label, i,
                      (long long)t->shape[i], (long long)desc->shape[i]),
             0;
    if (!dynamic && t->shape[i] != desc->shape[i])
      return snprintf(msg, cap, "%s: dimension %d is %lld, prepared for %lld", label, i,
                      (long long)t->shape[i], (long long)desc->shape[i]),
             0;
  }
  if (t->strides)
    for (i = t->ndim - 1; i >= 0; --i) {
      if (t->shape[i] != 1 && t->strides[i] != expect)
        return snprintf(msg, cap,
                        "%s: not compact row-major (dimension %d has stride %lld, expected %lld)",
                        label, i, (long long)t->strides[i], (long long)expect),
               0;
      expect *= t->shape[i];
    }
  return 1;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SWITCHYARD_TENSOR_CHECK_H_ */
