// Narrowing filters of this plugin's attention kernels: what the envelope cannot say.
#pragma once

#include "switchyard/envelope_check.h"

namespace sy::contracts {

// Head dims the attention blocks serve (a multiple of 16 up to 256): the envelopes declare
// them and the fused decode block, whose envelope filter cannot see D, checks them itself.
inline constexpr int kAttentionHeadDimMultiple = 16;
inline constexpr int kAttentionHeadDimMax = 256;

// The fused decode block's int attribute: 0 = no rotary (SmolLM3's NoPE layers), 1 = rotary.
inline constexpr const char* kFusedDecodeRopeAttr = "rope";

// q [B,Sq,Hq,D], k/v [B,Skv,Hkv,D], optional sinks f32 [Hq]; o [B,Sq,Hq,D], optional
// lse f32 [B,Hq,Sq]. Reports every violation.
int narrow_attention(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add,
                     void* ctx);

// The fused decode block: B = 1, one token. x [1,1,H], wq [Hq·D,H], wk, wv [Hkv·D,H], position
// i64 [1] -> o [1,1,Hq,D], k_cache, v_cache [1,C,Hkv,D], every tensor f32 (position i64);
// D a head dim the attention blocks serve; rope 0|1, rope_style neox, rotary_dim even in
// [2, D] (when rope = 1), rope_theta finite > 0, scale finite, no softcap. Reports every
// violation.
int narrow_fused_decode(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add,
                        void* ctx);

}  // namespace sy::contracts
