// Portable attention blocks: plain loops the compiler vectorises for the baseline ISA. They
// define the numerics the AVX2 and AVX-512 blocks must match, and serve CPUs without AVX2; and
// the choice of blocks per tier.
#include <cmath>
#include <cstring>
#include <limits>

#include "attention/attention_blocks.hpp"
#include "switchyard/plugin_api.h"

namespace sy::cpu {
namespace {

template <typename T>
float load(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, float>)
    return p[i];
  else
    return sy_bf16_to_f32(p[i]);
}

template <typename T>
void pack_q(const void* const* rows, int M, int Mp, int D, void* out) {
  auto* qt = static_cast<float*>(out);
  std::memset(qt, 0, sizeof(float) * size_t(Mp) * D);
  for (int r = 0; r < M; ++r) {
    const T* q = static_cast<const T*>(rows[r]);
    for (int d = 0; d < D; ++d) qt[size_t(d) * Mp + r] = load(q, d);
  }
}

template <typename T>
void scores(const void* qt_, const void* k0_, int64_t k_stride, int n, int, int Mp, int D,
            float* s) {
  const float* qt = static_cast<const float*>(qt_);
  const T* k0 = static_cast<const T*>(k0_);
  for (int j = 0; j < n; ++j) {
    float* sj = s + size_t(j) * Mp;
    std::memset(sj, 0, sizeof(float) * Mp);
    const T* k = k0 + j * k_stride;
    for (int d = 0; d < D; ++d) {
      float kd = load(k, d);
      const float* q = qt + size_t(d) * Mp;
      for (int r = 0; r < Mp; ++r) sj[r] += kd * q[r];
    }
  }
}

void softmax(const SoftmaxBlock& b) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < b.Mp; ++r) {
    float mx = b.m[r];
    for (int j = 0; j < b.n; ++j) {
      float& x = b.s[size_t(j) * b.Mp + r];
      float v = x * b.scale;
      if (b.softcap > 0) v = b.softcap * std::tanh(v / b.softcap);
      v *= kLog2e;
      int key = b.j0 + j;
      if (b.masked && (key < b.lo[r] || key > b.hi[r])) v = kNegInf;
      x = v;
      mx = std::max(mx, v);
    }
    float base = mx == kNegInf ? 0.f : mx;  // a row with no valid key yet keeps p = 0
    float alpha = std::exp2(b.m[r] - base);
    float sum = b.l[r] * alpha;
    for (int j = 0; j < b.n; ++j) {
      float& x = b.s[size_t(j) * b.Mp + r];
      x = std::exp2(x - base);
      sum += x;
    }
    b.m[r] = mx;
    b.l[r] = sum;
    b.alpha[r] = alpha;
  }
}

template <typename T>
void pv(const float* p, const void* v0_, int64_t v_stride, int n, int M, int Mp, int D,
        const float* alpha, float* o, void*) {
  const T* v0 = static_cast<const T*>(v0_);
  for (int r = 0; r < M; ++r) {
    float* orow = o + size_t(r) * D;
    for (int d = 0; d < D; ++d) orow[d] *= alpha[r];
    for (int j = 0; j < n; ++j) {
      float pj = p[size_t(j) * Mp + r];
      if (pj == 0.f) continue;
      const T* v = v0 + j * v_stride;
      for (int d = 0; d < D; ++d) orow[d] += pj * load(v, d);
    }
  }
}

size_t qt_bytes(int Mp, int D) {
  return sizeof(float) * size_t(Mp) * D;
}
size_t no_scratch(int, int) {
  return 0;
}

// Decode blocks (attention_blocks.hpp's DecodeBlock) as plain loops.
template <typename T>
void decode_scores(const DecodeBlock& b) {
  for (int j = 0; j < b.n; ++j)
    for (int h = 0; h < b.H; ++h) {
      const T* k = static_cast<const T*>(b.k) + j * b.stride + int64_t(h) * b.D;
      for (int r = 0; r < b.R; ++r) {
        const float* q = b.q + (size_t(h) * b.R + r) * b.D;
        float acc = 0.f;
        for (int d = 0; d < b.D; ++d) acc += q[d] * load(k, d);
        b.s[size_t(j) * b.lanes + h * b.R + r] = acc;
      }
    }
}

template <typename T>
void decode_pv(const DecodeBlock& b) {
  for (int h = 0; h < b.H; ++h)
    for (int r = 0; r < b.R; ++r) {
      const int lane = h * b.R + r;
      float* o = b.o + size_t(lane) * b.D;
      for (int d = 0; d < b.D; ++d) o[d] *= b.alpha[lane];
      for (int j = 0; j < b.n; ++j) {
        const float p = b.s[size_t(j) * b.lanes + lane];
        const T* v = static_cast<const T*>(b.v) + j * b.stride + int64_t(h) * b.D;
        for (int d = 0; d < b.D; ++d) o[d] += p * load(v, d);
      }
    }
}

const DecodeKernels kDecodeF32 = {"generic_decode_f32", decode_scores<float>, decode_pv<float>, 0};
const DecodeKernels kDecodeBf16 = {"generic_decode_bf16", decode_scores<uint16_t>,
                                   decode_pv<uint16_t>, 0};

const BlockKernels kF32 = {"generic_f32", kVectorBlockKeys, true,     pack_q<float>, scores<float>,
                           softmax,       pv<float>,        qt_bytes, no_scratch};
const BlockKernels kBf16 = {"generic_bf16",   kVectorBlockKeys, true,
                            pack_q<uint16_t>, scores<uint16_t>, softmax,
                            pv<uint16_t>,     qt_bytes,         no_scratch};

}  // namespace

const BlockKernels& generic_kernels(bool bf16) {
  return bf16 ? kBf16 : kF32;
}

const DecodeKernels& generic_decode_kernels(bool bf16) {
  return bf16 ? kDecodeBf16 : kDecodeF32;
}

// Decode blocks widen bf16 in registers on both vector tiers, so they need no AVX512-BF16.
const DecodeKernels& decode_kernels(const TierChoice& tier, bool bf16) {
  if (has_avx512(tier.tier)) return avx512_decode_kernels(bf16);
  if (tier.tier == CpuTier::avx2) return avx2_decode_kernels(bf16);
  return generic_decode_kernels(bf16);
}

const BlockKernels& block_kernels(const TierChoice& tier, bool bf16) {
  if (tier.tier == CpuTier::amx) return amx_block_kernels(bf16);
  if (tier.tier == CpuTier::avx512 && (!bf16 || tier.avx512_bf16))
    return avx512_block_kernels(bf16);
  if (has_avx512(tier.tier) || tier.tier == CpuTier::avx2) return avx2_block_kernels(bf16);
  return generic_kernels(bf16);
}

}  // namespace sy::cpu
