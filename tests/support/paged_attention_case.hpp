// One step of the paged attention form (ABI 1.5) with its independent reference: sequences
// packed along T, each with its own keys in a pool of blocks handed out in a shuffled order;
// the pool starts as NaN, so a key read past a sequence's length, or through the wrong table
// entry, shows. Each sequence's expected rows are support/attention_reference.hpp's run on that
// sequence alone, from the values the tensors actually hold (rounded to their dtype).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/capability/op.hpp"
#include "support/attention_reference.hpp"
#include "support/host_tensor.hpp"

namespace sy::test {

struct PagedAttentionCase {
  std::string name;
  sy_dtype dtype = SY_DTYPE_BF16;
  std::vector<int> q_lens, lens;  // per sequence: its queries, the last ones of its keys
  int Hq = 4, Hkv = 2, BS = 16;
  bool causal = true, sinks = false;
  int window = -1;
  double softcap = 0;
};

struct PagedAttentionStep {
  PagedAttentionStep(const PagedAttentionCase& c, int D, unsigned seed) : c_(c), D_(D) {
    std::mt19937 rng(seed);
    S = int(c.q_lens.size());
    int blocks = 0;
    for (int s = 0; s < S; ++s) {
      tokens += c.q_lens[size_t(s)];
      max_q = std::max(max_q, c.q_lens[size_t(s)]);
      max_len = std::max(max_len, c.lens[size_t(s)]);
      MB = std::max(MB, (c.lens[size_t(s)] + c.BS - 1) / c.BS);
      blocks += (c.lens[size_t(s)] + c.BS - 1) / c.BS;
    }
    NB = blocks + 3;
    std::vector<int32_t> order(static_cast<size_t>(NB));
    for (int i = 0; i < NB; ++i) order[size_t(i)] = i;
    std::shuffle(order.begin(), order.end(), rng);
    starts.assign(size_t(S + 1), 0);
    lens.assign(c.lens.begin(), c.lens.end());
    table.assign(size_t(S * MB), -1);
    const size_t kv_row = size_t(c.Hkv) * D;
    std::vector<double> qv(size_t(tokens) * c.Hq * D), kv(size_t(NB) * c.BS * kv_row, NAN),
        vv(kv.size(), NAN);
    refs.resize(size_t(S));
    for (int s = 0, next = 0; s < S; ++s) {
      starts[size_t(s + 1)] = starts[size_t(s)] + c.q_lens[size_t(s)];
      for (int b = 0; b < (c.lens[size_t(s)] + c.BS - 1) / c.BS; ++b)
        table[size_t(s * MB + b)] = order[size_t(next++)];
      AttentionProblem& r = refs[size_t(s)];
      r.B = 1, r.Sq = c.q_lens[size_t(s)], r.Skv = c.lens[size_t(s)], r.Hq = c.Hq, r.Hkv = c.Hkv;
      r.D = D, r.causal = c.causal, r.window = c.window, r.softcap = c.softcap;
      r.q = uniform(size_t(r.Sq) * c.Hq * D, rng, -2, 2);
      r.k = uniform(size_t(r.Skv) * kv_row, rng, -2, 2);
      // Values away from zero mean, so a key weighed wrongly moves the output.
      r.v = uniform(size_t(r.Skv) * kv_row, rng, 0, 2);
      std::copy(r.q.begin(), r.q.end(), qv.begin() + size_t(starts[size_t(s)]) * c.Hq * D);
      for (int j = 0; j < r.Skv; ++j) {
        std::copy_n(r.k.begin() + size_t(j) * kv_row, kv_row, kv.begin() + row_at(s, j));
        std::copy_n(r.v.begin() + size_t(j) * kv_row, kv_row, vv.begin() + row_at(s, j));
      }
    }
    q = std::make_unique<HostTensor>(c.dtype, std::vector<int64_t>{1, tokens, c.Hq, D});
    k_pool = std::make_unique<HostTensor>(c.dtype, std::vector<int64_t>{NB, c.BS, c.Hkv, D});
    v_pool = std::make_unique<HostTensor>(c.dtype, std::vector<int64_t>{NB, c.BS, c.Hkv, D});
    qv = q->set(qv), kv = k_pool->set(kv), vv = v_pool->set(vv);
    if (c.sinks)
      for (double x : uniform(size_t(c.Hq), rng, 2, 6)) sinks.push_back(float(x));
    for (int s = 0; s < S; ++s) {  // the reference sees the stored (rounded) values
      AttentionProblem& r = refs[size_t(s)];
      std::copy_n(qv.begin() + size_t(starts[size_t(s)]) * c.Hq * D, r.q.size(), r.q.begin());
      for (int j = 0; j < r.Skv; ++j) {
        std::copy_n(kv.begin() + row_at(s, j), kv_row, r.k.begin() + size_t(j) * kv_row);
        std::copy_n(vv.begin() + row_at(s, j), kv_row, r.v.begin() + size_t(j) * kv_row);
      }
      r.sinks.assign(sinks.begin(), sinks.end());
    }
  }

  // "" when o [1, T, Hq, D] and lse [Hq, T] are every sequence's reference rows within the
  // tolerances (lse relative above 1); else the first that is not.
  std::string mismatch(const std::vector<double>& o, const std::vector<float>& lse, double o_tol,
                       double lse_tol) const {
    for (int s = 0; s < S; ++s) {
      const AttentionResult want = reference_attention(refs[size_t(s)]);
      const size_t first = size_t(starts[size_t(s)]);
      for (size_t i = 0; i < want.o.size(); ++i) {
        const double got = o[first * size_t(c_.Hq) * size_t(D_) + i];
        if (!(std::abs(got - want.o[i]) <= o_tol)) return say(s, "o", i, got, want.o[i]);
      }
      for (int h = 0; h < c_.Hq; ++h)
        for (int i = 0; i < c_.q_lens[size_t(s)]; ++i) {
          const double w = want.lse[size_t(h * c_.q_lens[size_t(s)] + i)];
          const double g = lse[size_t(h) * size_t(tokens) + first + size_t(i)];
          const bool ok = std::isinf(w) ? (std::isinf(g) && g < 0)
                                        : std::abs(g - w) <= lse_tol * std::max(1.0, std::abs(w));
          if (!ok) return say(s, "lse", size_t(h * c_.q_lens[size_t(s)] + i), g, w);
        }
    }
    return "";
  }

  int S = 0, tokens = 0, MB = 1, NB = 0, max_q = 0, max_len = 0;
  std::vector<int32_t> starts, lens, table;
  std::unique_ptr<HostTensor> q, k_pool, v_pool;
  std::vector<float> sinks;
  std::vector<AttentionProblem> refs;

 private:
  size_t row_at(int s, int j) const {
    return (size_t(table[size_t(s * MB + j / c_.BS)]) * c_.BS + size_t(j % c_.BS)) *
           size_t(c_.Hkv) * size_t(D_);
  }
  static std::string say(int s, const char* what, size_t i, double got, double want) {
    std::ostringstream o;
    o << "sequence " << s << ", " << what << "[" << i << "]: got " << got << ", the reference "
      << want;
    return o.str();
  }
  PagedAttentionCase c_;
  int D_;
};

// A step's paged attention op (causal, c's window, sinks, lse) with its metadata tensors and
// outputs, prepared for `spare_tokens` tokens and `spare_seqs` sequences more than the step has
// (its execute runs on the actual extents).
struct PagedAttentionOp {
  PagedAttentionOp(const PagedAttentionStep& st, const PagedAttentionCase& c, int64_t D,
                   sy_memory_kind memory, int64_t spare_tokens, int64_t spare_seqs)
      : sinks(SY_DTYPE_F32, {c.Hq}),
        starts(SY_DTYPE_I32, {st.S + 1}),
        lens(SY_DTYPE_I32, {st.S}),
        table(SY_DTYPE_I32, {st.S, st.MB}),
        o(c.dtype, {1, st.tokens, c.Hq, D}),
        lse(SY_DTYPE_F32, {1, c.Hq, st.tokens}),
        step(st) {
    sinks.set(std::vector<double>(st.sinks.begin(), st.sinks.end()));
    std::memcpy(starts.bytes(), st.starts.data(), starts.size_bytes());
    std::memcpy(lens.bytes(), st.lens.data(), lens.size_bytes());
    std::memcpy(table.bytes(), st.table.data(), table.size_bytes());
    const int64_t bound_t = st.tokens + spare_tokens, bound_s = st.S + spare_seqs;
    op.op = SY_OP_ATTENTION;
    op.inputs = {{c.dtype, {1, bound_t, c.Hq, D}, memory, 2u},
                 st.k_pool->desc(),
                 st.v_pool->desc(),
                 sinks.desc(),
                 {SY_DTYPE_I32, {bound_s + 1}, memory, 1u},
                 {SY_DTYPE_I32, {bound_s}, memory, 1u},
                 {SY_DTYPE_I32, {bound_s, st.MB}, memory, 1u}};
    op.outputs = {{c.dtype, {1, bound_t, c.Hq, D}, memory, 2u},
                  {SY_DTYPE_F32, {1, c.Hq, bound_t}, memory, 4u}};
    op.set(SY_ATTR_PAGED, int64_t{1});
    op.set(SY_ATTR_CAUSAL, int64_t{1});
    op.set(SY_ATTR_WINDOW_LEFT, int64_t(c.window));
  }
  std::vector<HostTensor*> inputs() {
    return {step.q.get(), step.k_pool.get(), step.v_pool.get(), &sinks, &starts, &lens, &table};
  }
  std::vector<HostTensor*> outputs() { return {&o, &lse}; }
  std::vector<float> lse_values() const {
    std::vector<float> l;
    for (double x : lse.get()) l.push_back(float(x));
    return l;
  }

  HostTensor sinks, starts, lens, table, o, lse;
  OpDesc op;
  const PagedAttentionStep& step;
};

}  // namespace sy::test
