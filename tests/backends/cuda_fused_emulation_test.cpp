// cuda_flash's fused segment kernels (plugins/cuda_flash/fused_kernels.cuh) on the CPU model of
// tests/support/cuda_emulation.hpp, against plain double-precision computations written here:
// add + rms_norm (the sum stored exactly as the unfused add rounds it), rope with the paged
// append of its rows (into a NaN-filled pool: a row written where it should not be shows), and
// the few-row matmul, plain and gated. What the model cannot show (timing, the hardware's
// rounding of expf/sincos) is left to the GPU tests.
#define SY_CUDA_EMULATION 1
#include "support/cuda_emulation.hpp"
// The emulation header first: it stands in for the CUDA built-ins the kernel header uses.
#include "cuda_flash/fused_kernels.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace sy {
namespace {

namespace fused = sy::cuda::fused;
using bf16 = __nv_bfloat16;

std::vector<bf16> random_bf16(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<bf16> out(n);
  for (auto& x : out) x = __float2bfloat16_rn(u(rng));
  return out;
}
double f(bf16 x) {
  return double(__bfloat162float(x));
}
// One bf16 rounding of a value of this size, plus a little for f32 sums in another order.
double bf16_tol(double x) {
  return std::abs(x) / 128.0 + 1e-6;
}

TEST(FusedEmulation, AddRmsNormStoresTheRoundedSumAndNormalisesIt) {
  const int rows = 3, hidden = 96;
  const float eps = 1e-5f, offset = 1.0f;  // Gemma's (1 + w)
  auto a = random_bf16(rows * hidden, 1), b = random_bf16(rows * hidden, 2);
  auto w = random_bf16(hidden, 3, -0.5f, 0.5f);
  std::vector<bf16> h(rows * hidden), y(rows * hidden);
  sy_emu::launch(dim3(rows), dim3(256), 32 * sizeof(float), [&] {
    fused::add_rms_norm_kernel<bf16>(a.data(), b.data(), h.data(), w.data(), y.data(), hidden, eps,
                                     offset);
  });
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int c = 0; c < hidden; ++c) {
      const int i = r * hidden + c;
      const bf16 want_h = __float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i]));
      ASSERT_EQ(f(h[i]), f(want_h)) << "sum " << r << "," << c;
      ss += f(want_h) * f(want_h);
    }
    const double inv = 1.0 / std::sqrt(ss / hidden + eps);
    for (int c = 0; c < hidden; ++c) {
      const int i = r * hidden + c;
      const double want = f(h[i]) * inv * (f(w[c]) + offset);
      ASSERT_NEAR(f(y[i]), want, bf16_tol(want)) << "norm " << r << "," << c;
    }
  }
}

// q rotated in place of its own output, k rotated and scattered into its pool, v scattered: the
// three jobs of one decoder layer, in one launch, with a partial rotary dim.
TEST(FusedEmulation, RopeAppendRotatesAndScattersEachJob) {
  const int T = 3, d = 16, rot = 8, hq = 4, hk = 2, pool_rows = 8;
  const double theta = 10000.0;
  auto q = random_bf16(T * hq * d, 4), k = random_bf16(T * hk * d, 5),
       v = random_bf16(T * hk * d, 6);
  std::vector<bf16> qo(q.size()), ko(k.size());
  const bf16 nan = __float2bfloat16_rn(std::numeric_limits<float>::quiet_NaN());
  std::vector<bf16> kpool(pool_rows * hk * d, nan), vpool(pool_rows * hk * d, nan);
  const std::vector<int64_t> pos = {7, 0, 31}, slots = {5, 2, 6};
  fused::RopeAppendParams p{};
  p.jobs[0] = {q.data(), qo.data(), nullptr, hq, 1};
  p.jobs[1] = {k.data(), ko.data(), kpool.data(), hk, 1};
  p.jobs[2] = {v.data(), nullptr, vpool.data(), hk, 0};
  p.num_jobs = 3;
  p.pos = pos.data();
  p.pos64 = 1;
  p.slots = slots.data();
  p.tokens = T;
  p.d = d, p.rot = rot, p.neox = 1;
  p.theta = theta, p.factor = 1.0;
  p.table = nullptr;
  sy_emu::launch(dim3(1, 3), dim3(256), 0, [&] { fused::rope_append_kernel<bf16>(p); });
  // NeoX: pair (i, i + rot/2) of the first rot dims rotated by pos * theta^(-2i/rot).
  auto rope_ref = [&](const std::vector<bf16>& x, int heads, int t, int h, int c) {
    const bf16* row = x.data() + (t * heads + h) * d;
    if (c >= rot) return f(row[c]);
    const int i = c % (rot / 2);
    const double ang = double(pos[size_t(t)]) * std::pow(theta, -2.0 * i / rot);
    const double x1 = f(row[i]), x2 = f(row[i + rot / 2]);
    return c < rot / 2 ? x1 * std::cos(ang) - x2 * std::sin(ang)
                       : x2 * std::cos(ang) + x1 * std::sin(ang);
  };
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < d; ++c) {
      for (int h = 0; h < hq; ++h) {
        const double want = rope_ref(q, hq, t, h, c);
        ASSERT_NEAR(f(qo[(t * hq + h) * d + c]), want, bf16_tol(want)) << t << "," << h << "," << c;
      }
      for (int h = 0; h < hk; ++h) {
        const double want = rope_ref(k, hk, t, h, c);
        const size_t at = size_t((slots[size_t(t)] * hk + h) * d + c);
        ASSERT_NEAR(f(ko[(t * hk + h) * d + c]), want, bf16_tol(want));
        ASSERT_EQ(f(kpool[at]), f(ko[(t * hk + h) * d + c])) << "k pool row of token " << t;
        ASSERT_EQ(f(vpool[at]), f(v[(t * hk + h) * d + c])) << "v pool row of token " << t;
      }
    }
  for (int row = 0; row < pool_rows; ++row) {
    if (row == 5 || row == 2 || row == 6) continue;
    for (int e = 0; e < hk * d; ++e) {
      ASSERT_TRUE(std::isnan(f(kpool[row * hk * d + e]))) << "k pool row " << row << " written";
      ASSERT_TRUE(std::isnan(f(vpool[row * hk * d + e]))) << "v pool row " << row << " written";
    }
  }
}

struct GemvCase {
  int m, k;
  std::vector<int> n;
  bool gated;
};

void run_gemv(const GemvCase& c) {
  auto a = random_bf16(size_t(c.m) * c.k, 7);
  std::vector<std::vector<bf16>> w, out;
  fused::GemvParams p{};
  p.a = a.data();
  p.m = c.m, p.k = c.k;
  int columns = 0;
  for (size_t j = 0; j < c.n.size(); ++j) {
    w.push_back(random_bf16(size_t(c.n[j]) * c.k, 10 + uint32_t(j), -0.2f, 0.2f));
    out.emplace_back(size_t(c.m) * c.n[j]);
    p.w[j] = w[j].data();
    p.c[j] = out[j].data();
    p.n[j] = c.n[j];
    columns += c.n[j];
  }
  p.num_jobs = int(c.n.size());
  std::vector<bf16> g(size_t(c.m) * c.n[0]);
  p.gate = c.gated ? fused::Gate::kSilu : fused::Gate::kNone;
  p.g = g.data();
  if (c.gated) columns = c.n[0];
  const unsigned blocks = unsigned((columns + fused::kGemvWarps - 1) / fused::kGemvWarps);
  sy_emu::launch(dim3(blocks), dim3(fused::kGemvWarps * 32), 0,
                 [&] { fused::gemv_kernel<bf16>(p); });
  for (size_t j = 0; j < c.n.size(); ++j)
    for (int r = 0; r < c.m; ++r)
      for (int n = 0; n < c.n[j]; ++n) {
        double want = 0;
        for (int k = 0; k < c.k; ++k)
          want += f(a[size_t(r) * c.k + k]) * f(w[j][size_t(n) * c.k + k]);
        ASSERT_NEAR(f(out[j][size_t(r) * c.n[j] + n]), want, bf16_tol(want))
            << "job " << j << " row " << r << " column " << n;
      }
  if (!c.gated) return;
  for (size_t i = 0; i < g.size(); ++i) {
    const double gate = f(out[0][i]), up = f(out[1][i]);
    const double want = gate / (1.0 + std::exp(-gate)) * up;
    ASSERT_NEAR(f(g[i]), want, bf16_tol(want)) << "gated " << i;
  }
}

TEST(FusedEmulation, GemvOfThreeWeightsSharingTheActivations) {
  run_gemv({3, 512, {24, 8, 8}, false});  // k past one warp's 256 elements a step
}

TEST(FusedEmulation, GemvOfTheMostRowsItTakes) {
  run_gemv({fused::kMaxGemvRows, 64, {12}, false});
}

TEST(FusedEmulation, GatedGemvWritesGateUpAndTheirProduct) {
  run_gemv({2, 64, {20, 20}, true});
}

}  // namespace
}  // namespace sy
