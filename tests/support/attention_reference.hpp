// A plain double-precision attention, written from docs/operators.md and nothing else: the
// independent reference every attention kernel is compared with.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace sy::test {

struct AttentionProblem {
  int64_t B, Sq, Skv, Hq, Hkv, D;
  bool causal = false;
  int64_t window = -1;
  double softcap = 0, scale = 0;  // scale 0: 1/sqrt(D)
  // `{}`: a brace initialiser of the sizes may leave the data out (-Wmissing-field-initializers).
  std::vector<double> q{}, k{}, v{};  // [B,S,H,D] row-major
  std::vector<double> sinks{};        // [Hq] or empty
  std::vector<int64_t> kv_len{};      // [B] or empty (= Skv)
};

struct AttentionResult {
  std::vector<double> o;    // [B,Sq,Hq,D]
  std::vector<double> lse;  // [B,Hq,Sq]
};

inline AttentionResult reference_attention(const AttentionProblem& p) {
  AttentionResult r;
  r.o.assign(p.B * p.Sq * p.Hq * p.D, 0.0);
  r.lse.assign(p.B * p.Hq * p.Sq, -std::numeric_limits<double>::infinity());
  double scale = p.scale != 0 ? p.scale : 1.0 / std::sqrt(double(p.D));
  int64_t group = p.Hq / p.Hkv;
  std::vector<double> s(p.Skv);
  for (int64_t b = 0; b < p.B; ++b) {
    int64_t L = p.kv_len.empty() ? p.Skv : p.kv_len[b];
    for (int64_t h = 0; h < p.Hq; ++h)
      for (int64_t i = 0; i < p.Sq; ++i) {
        int64_t hk = h / group, diag = i + L - p.Sq;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < L; ++j) {
          bool ok = (!p.causal || j <= diag) && (p.window < 0 || j >= diag - p.window);
          if (!ok) {
            s[j] = -std::numeric_limits<double>::infinity();
            continue;
          }
          double dot = 0;
          for (int64_t d = 0; d < p.D; ++d)
            dot += p.q[((b * p.Sq + i) * p.Hq + h) * p.D + d] *
                   p.k[((b * p.Skv + j) * p.Hkv + hk) * p.D + d];
          double x = dot * scale;
          if (p.softcap > 0) x = p.softcap * std::tanh(x / p.softcap);
          s[j] = x;
          mx = std::max(mx, x);
        }
        if (mx == -std::numeric_limits<double>::infinity()) continue;  // no valid key: o = 0
        double sum = 0;
        for (int64_t j = 0; j < L; ++j) sum += std::exp(s[j] - mx);
        double denom = sum + (p.sinks.empty() ? 0.0 : std::exp(p.sinks[h] - mx));
        for (int64_t j = 0; j < L; ++j) {
          double w = std::exp(s[j] - mx) / denom;
          if (w == 0) continue;
          for (int64_t d = 0; d < p.D; ++d)
            r.o[((b * p.Sq + i) * p.Hq + h) * p.D + d] +=
                w * p.v[((b * p.Skv + j) * p.Hkv + hk) * p.D + d];
        }
        r.lse[(b * p.Hq + h) * p.Sq + i] = mx + std::log(sum);
      }
  }
  return r;
}

}  // namespace sy::test
