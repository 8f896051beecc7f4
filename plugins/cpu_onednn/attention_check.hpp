// Narrowing filters of this plugin's attention kernels: what the envelope cannot say.
#pragma once

#include "switchyard/envelope_check.h"

namespace sy::cpu {

// q [B,Sq,Hq,D], k/v [B,Skv,Hkv,D], optional sinks f32 [Hq]; o [B,Sq,Hq,D], optional
// lse f32 [B,Hq,Sq]. Reports every violation.
int narrow_attention(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add,
                     void* ctx);

// The fused decode block: B = 1, one token.
int narrow_fused_decode(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add,
                        void* ctx);

}  // namespace sy::cpu
