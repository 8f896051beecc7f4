// The portable GEMV tier and the choice of tier.
#include "gemv.hpp"

#include "ops_common.hpp"

namespace sy::cpu {
namespace {

// Σ w[i]·x[i] with 16 independent partial sums, added pairwise at the end.
template <typename W>
float dot16(const W* __restrict w, const float* __restrict x, int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += to_f32(w[i + l]) * x[i + l];
  for (int l = 0; i + l < n; ++l) acc[l] += to_f32(w[i + l]) * x[i + l];
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  return acc[0];
}

template <typename W>
void rows_portable(const GemvArgs& a, int64_t n0, int64_t n1) {
  const W* w = static_cast<const W*>(a.w);
  for (int64_t n = n0; n < n1; ++n)
    for (int m = 0; m < a.M; ++m) gemv_store<W>(a, m, n, dot16(w + n * a.K, a.xf + m * a.K, a.K));
}

void rows_portable_any(const GemvArgs& a, int64_t n0, int64_t n1) {
  if (a.bf16)
    rows_portable<bf16_bits>(a, n0, n1);
  else
    rows_portable<float>(a, n0, n1);
}

const GemvTier kPortable = {"portable", rows_portable_any, gemv_widen_natural};

}  // namespace

void gemv_widen_natural(const uint16_t* x, float* xf, int64_t count, int64_t) {
  for (int64_t i = 0; i < count; ++i) xf[i] = to_f32(x[i]);
}

const GemvTier& gemv_tier(const TierChoice& tier) {
  switch (tier.tier) {
    case CpuTier::avx512: return gemv_avx512(tier.avx512_bf16);
    case CpuTier::avx2: return gemv_avx2();
    default: return kPortable;
  }
}

}  // namespace sy::cpu
