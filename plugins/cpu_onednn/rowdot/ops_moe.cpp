// The mixture-of-experts operators (ABI 1.7, docs/operators.md).
//
// moe_router: per token, the top_k largest logits (a tie goes to the lower expert) and the
// softmax over them, computed in double and rounded once to f32.
//
// moe_experts: the token slots (t, j) are sorted by expert (a counting sort, stable in the
// slot); expert by expert, in chunks of at most 64 of its slots, the x rows are gathered and the
// expert's gate, up and down run through the active tier's rowdot kernels (rowdot.hpp): every
// weight dtype the matmul serves, on every tier, each row computed alone (batch-invariant).
// gate and up read x as stored (bf16 x through the tier's bf16 dots where it has them) and
// leave f32; biases, the activation and down's input stay f32 (never rounded to bf16 in
// between: the op's only rounding is y's). Each token's y is the f32 sum, over its experts in
// increasing id, of weights[t, j] · (down + down_bias), rounded once to y's dtype: a token's
// result does not depend on which tokens share its step.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernel_factories.hpp"
#include "ops_common.hpp"
#include "rowdot/rowdot.hpp"

namespace sy::cpu {
namespace {

// Rows an expert computes at once: the scratch is sized by it, not by the step's tokens.
constexpr int64_t kChunkRows = 64;

template <typename T>
class MoeRouterKernel final : public CpuKernel {
 public:
  MoeRouterKernel(int64_t top_k, const CpuContext& ctx) : k_(top_k), ctx_(ctx) {}

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const int64_t experts = in[0]->shape[in[0]->ndim - 1], k = k_;
    const int64_t tokens = elements_of(in[0]) / experts;
    const T* logits = data_of<const T>(in[0]);
    int32_t* ids = data_of<int32_t>(out[0]);
    float* weights = data_of<float>(out[1]);
    parallel_for(ctx_, tokens, experts * k, [=](int64_t t) {
      const T* row = logits + t * experts;
      int32_t* id = ids + t * k;
      for (int64_t j = 0; j < k; ++j) {
        int64_t best = -1;
        for (int64_t e = 0; e < experts; ++e) {
          bool taken = false;
          for (int64_t i = 0; i < j; ++i) taken = taken || id[i] == e;
          if (!taken && (best < 0 || to_f32(row[e]) > to_f32(row[best]))) best = e;
        }
        id[j] = int32_t(best);
      }
      const double top = to_f32(row[id[0]]);
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += std::exp(double(to_f32(row[id[j]])) - top);
      for (int64_t j = 0; j < k; ++j)
        weights[t * k + j] = float(std::exp(double(to_f32(row[id[j]])) - top) / sum);
    });
  }

 private:
  int64_t k_;
  CpuContext ctx_;
};

// The gpt-oss clamped SwiGLU, or silu(g)·u.
struct ExpertActivation {
  bool swiglu_limit = false;
  float alpha = 0, limit = 0;

  float operator()(float g, float u) const {
    if (!swiglu_limit) return silu_f32(g) * u;
    g = std::min(g, limit);
    u = std::min(std::max(u, -limit), limit);
    return (u + 1.0f) * (g / (1.0f + exp_f32(-alpha * g)));
  }
};

// One stacked expert weight [E, rows, K]: its dtype, bytes per expert, and how the tier reads x.
struct ExpertWeight {
  sy_dtype dtype;
  int64_t rows, K, expert_bytes;
  bool reads_bf16;
};

template <typename T>
class MoeExpertsKernel final : public CpuKernel {
 public:
  MoeExpertsKernel(const sy::edge::OpCopy& op, const CpuContext& ctx)
      : tier_(rowdot_tier(active_tier())), ctx_(ctx) {
    const auto& x = op.inputs[0];
    H_ = x.shape.back();
    k_ = op.inputs[1].shape.back();
    E_ = op.inputs[3].shape[0];
    I_ = op.inputs[3].shape[1];
    biased_ = op.inputs.size() == 9;
    for (int i = 0; i < 3; ++i) {
      const auto& w = op.inputs[size_t(3 + i)];
      const int64_t shape[2] = {w.shape[1], w.shape[2]};
      const bool bf16_x = std::is_same_v<T, bf16_bits> && i < 2;  // down reads the f32 activation
      w_[i] = {w.dtype, w.shape[1], w.shape[2], sy_tensor_bytes(w.dtype, 2, shape),
               tier_.reads_bf16_x(w.dtype, bf16_x)};
    }
    act_.swiglu_limit = op.string_attr(SY_ATTR_EXPERT_ACTIVATION, "") == "swiglu_limit";
    act_.alpha = float(op.float_attr(SY_ATTR_SWIGLU_ALPHA, 0));
    act_.limit = float(op.float_attr(SY_ATTR_SWIGLU_LIMIT, 0));
    const int64_t tokens = x.elements() / H_;
    order_.resize(size_t(tokens * k_));
    offsets_.resize(size_t(E_ + 1));
    next_.resize(size_t(E_));
    const size_t chunk = size_t(std::min(tokens * k_, kChunkRows));
    // bf16 x as stored where gate or up reads it so (the tier's bf16 dots), f32 where one reads
    // f32; both only when the two differ.
    gather_b_ = std::is_same_v<T, bf16_bits> && (w_[0].reads_bf16 || w_[1].reads_bf16);
    gather_f_ = !w_[0].reads_bf16 || !w_[1].reads_bf16;
    if (gather_f_) xf_.resize(chunk * size_t(H_));
    if (gather_b_) xb_.resize(chunk * size_t(H_));
    if (std::is_same_v<T, bf16_bits>) {
      acc_.resize(size_t(tokens * H_));  // f32 sums before y's one rounding
    }
    gate_.resize(chunk * size_t(I_));
    up_.resize(chunk * size_t(I_));
    down_.resize(chunk * size_t(H_));
  }

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const int64_t tokens = elements_of(in[0]) / H_;
    sort_slots(data_of<const int32_t>(in[1]), tokens);
    float* acc =
        std::is_same_v<T, float> ? reinterpret_cast<float*>(data_of<T>(out[0])) : acc_.data();
    std::fill(acc, acc + tokens * H_, 0.0f);
    for (int64_t e = 0; e < E_; ++e)
      for (int64_t p = offsets_[size_t(e)]; p < offsets_[size_t(e + 1)]; p += kChunkRows) {
        const int64_t rows = std::min(kChunkRows, offsets_[size_t(e + 1)] - p);
        gather(data_of<const T>(in[0]), p, rows);
        project(in, e, 0, rows, gate_.data());
        project(in, e, 1, rows, up_.data());
        activate(in, e, rows);
        project(in, e, 2, rows, down_.data());
        accumulate(in, e, p, rows, acc);
      }
    if constexpr (std::is_same_v<T, bf16_bits>) {
      T* y = data_of<T>(out[0]);
      parallel_chunks(ctx_, tokens * H_, [=](int64_t s, int64_t end) {
        for (int64_t i = s; i < end; ++i) y[i] = from_f32<T>(acc[i]);
      });
    }
  }

 private:
  // order_[p] = the slot (t·k + j) at sorted position p (by expert, stable in the slot);
  // offsets_[e] the first position of expert e. Every id is checked before anything is written.
  void sort_slots(const int32_t* ids, int64_t tokens) {
    const int64_t slots = tokens * k_;
    for (int64_t s = 0; s < slots; ++s)
      if (ids[s] < 0 || ids[s] >= E_)
        throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                    "moe_experts: expert id " + std::to_string(ids[s]) + " at " +
                                        std::to_string(s) + " is outside [0, " +
                                        std::to_string(E_) + ")");
    std::fill(offsets_.begin(), offsets_.end(), 0);
    for (int64_t s = 0; s < slots; ++s) ++offsets_[size_t(ids[s] + 1)];
    for (int64_t e = 0; e < E_; ++e) offsets_[size_t(e + 1)] += offsets_[size_t(e)];
    std::copy(offsets_.begin(), offsets_.end() - 1, next_.begin());
    for (int64_t s = 0; s < slots; ++s) order_[size_t(next_[size_t(ids[s])]++)] = s;
  }

  // The x rows of sorted positions [p, p + rows), in the forms gate and up read.
  void gather(const T* x, int64_t p, int64_t rows) {
    const int64_t H = H_, k = k_;
    const bool want_f = gather_f_, want_b = gather_b_;
    const int64_t* order = order_.data() + p;
    float* xf = xf_.data();
    bf16_bits* xb = xb_.data();
    parallel_for(ctx_, rows, H, [=](int64_t r) {
      const T* row = x + order[r] / k * H;
      if (want_f)
        for (int64_t h = 0; h < H; ++h) xf[r * H + h] = to_f32(row[h]);
      if constexpr (std::is_same_v<T, bf16_bits>)
        if (want_b) std::memcpy(xb + r * H, row, size_t(H) * sizeof(bf16_bits));
    });
  }

  // Weight `which` (0 gate, 1 up, 2 down) of expert e over `rows` gathered rows, into y (f32).
  void project(const DLTensor* const* in, int64_t e, int which, int64_t rows, float* y) {
    const ExpertWeight& w = w_[which];
    RowdotArgs a{};
    a.wtype = w.dtype;
    a.w = data_of<const uint8_t>(in[3 + which]) + e * w.expert_bytes;
    a.M = rows;
    a.K = w.K;
    a.N = w.rows;
    if (which == 2)
      a.xf = gate_.data();  // the activation
    else if (w.reads_bf16)
      a.xb = xb_.data();
    else
      a.xf = xf_.data();
    a.y = y;
    a.y_bf16 = false;
    rowdot_run(tier_, a, ctx_.num_threads);
  }

  // gate_ ← act(gate + gate_bias, up + up_bias) of expert e.
  void activate(const DLTensor* const* in, int64_t e, int64_t rows) {
    const int64_t I = I_;
    const T* gb = biased_ ? data_of<const T>(in[6]) + e * I : nullptr;
    const T* ub = biased_ ? data_of<const T>(in[7]) + e * I : nullptr;
    float *g = gate_.data(), *u = up_.data();
    const ExpertActivation act = act_;
    parallel_for(ctx_, rows, I, [=](int64_t r) {
      for (int64_t i = 0; i < I; ++i) {
        float gv = g[r * I + i], uv = u[r * I + i];
        if (gb) gv += to_f32(gb[i]), uv += to_f32(ub[i]);
        g[r * I + i] = act(gv, uv);
      }
    });
  }

  // acc[t] += weights[slot] · (down + down_bias) for each gathered slot of expert e. A token
  // picks distinct experts, so within one expert's rows every token appears once (a repeated
  // id, which no router gives, lands in the next chunk or row in slot order); its sum runs
  // over its experts in increasing id, whatever else shares the step.
  void accumulate(const DLTensor* const* in, int64_t e, int64_t p, int64_t rows, float* acc) {
    const int64_t H = H_, k = k_;
    const float* weights = data_of<const float>(in[2]);
    const T* db = biased_ ? data_of<const T>(in[8]) + e * H : nullptr;
    const int64_t* order = order_.data() + p;
    const float* down = down_.data();
    for (int64_t r = 0; r < rows; ++r) {
      const float w = weights[order[r]];
      float* y = acc + order[r] / k * H;
      const float* d = down + r * H;
      if (db)
        for (int64_t h = 0; h < H; ++h) y[h] += w * (d[h] + to_f32(db[h]));
      else
        for (int64_t h = 0; h < H; ++h) y[h] += w * d[h];
    }
  }

  const RowdotTier& tier_;
  CpuContext ctx_;
  int64_t H_ = 0, k_ = 0, E_ = 0, I_ = 0;
  bool biased_ = false, gather_f_ = true, gather_b_ = false;
  ExpertWeight w_[3]{};
  ExpertActivation act_;
  std::vector<int64_t> order_, offsets_, next_;
  std::vector<float> xf_, gate_, up_, down_, acc_;
  std::vector<bf16_bits> xb_;
};

}  // namespace

uint64_t moe_experts_workspace_bytes(const sy_op_desc* op) {
  const sy_tensor_desc *x = op->num_inputs >= 4 ? op->inputs[0] : nullptr,
                       *ids = x ? op->inputs[1] : nullptr, *gate = x ? op->inputs[3] : nullptr;
  if (!x || !ids || !gate || x->ndim < 2 || ids->ndim < 1 || gate->ndim != 3) return 0;
  uint64_t elements = 1;
  for (int i = 0; i < x->ndim; ++i) elements *= uint64_t(x->shape[i]);
  const uint64_t H = uint64_t(x->shape[x->ndim - 1]), I = uint64_t(gate->shape[1]);
  const uint64_t slots = elements / H * uint64_t(ids->shape[ids->ndim - 1]);
  const uint64_t E = uint64_t(gate->shape[0]);
  const uint64_t chunk = std::min<uint64_t>(slots, uint64_t(kChunkRows));
  const bool bf16 = x->dtype == SY_DTYPE_BF16;
  return chunk * (H * (4 + 4 + (bf16 ? 2 : 0)) + I * 8) + (bf16 ? elements * 4 : 0) + slots * 8 +
         (2 * E + 1) * 8;
}

std::unique_ptr<CpuKernel> make_moe_router(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "moe_router");
  return make_for_dtype<MoeRouterKernel>(op.inputs[0].dtype, op.int_attr(SY_ATTR_TOP_K, 1), ctx);
}

std::unique_ptr<CpuKernel> make_moe_experts(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "moe_experts");
  return make_for_dtype<MoeExpertsKernel>(op.inputs[0].dtype, op, ctx);
}

}  // namespace sy::cpu
