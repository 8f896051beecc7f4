// The mixture-of-experts operators (ABI 1.7, docs/operators.md).
//
// moe_router: per token, the top_k largest logits (a tie goes to the lower expert) and the
// softmax over them, computed in double and rounded once to f32.
//
// moe_experts: the token slots (t, j) are sorted by expert (a counting sort, stable in t), the
// x rows of each expert's slots gathered, and every expert's gate, up and down run through the
// active tier's rowdot kernels (rowdot.hpp) on those rows: every weight dtype the matmul serves,
// on every tier, batch-invariant, since rowdot computes each row alone. gate and up read x as
// stored (bf16 x through the tier's bf16 dots where it has them) and leave f32; biases, the
// activation and down's input stay f32 (never rounded to bf16 in between: the op is one
// operator, and its only rounding is y's). Each token's output is then
// Σ_j weights[t, j] · (down + down_bias) in the order of j, in f32, rounded once to y's dtype:
// a token's result does not depend on which tokens share its step.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernel_factories.hpp"
#include "ops_common.hpp"
#include "rowdot.hpp"

namespace sy::cpu {
namespace {

template <typename T>
class MoeRouterKernel final : public CpuKernel {
 public:
  MoeRouterKernel(int64_t top_k, const CpuContext& ctx) : k_(top_k), ctx_(ctx) {}

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const int64_t tokens = in[0]->shape[0], experts = in[0]->shape[1], k = k_;
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
    H_ = x.shape[1];
    k_ = op.inputs[1].shape[1];
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
    const size_t slots = size_t(x.shape[0] * k_);
    order_.resize(slots);
    position_.resize(slots);
    expert_of_.resize(slots);
    offsets_.resize(size_t(E_ + 1));
    scratch_offsets_.resize(size_t(E_));
    xf_.resize(slots * size_t(H_));
    xb_.resize(slots * size_t(H_));
    gate_.resize(slots * size_t(I_));
    up_.resize(slots * size_t(I_));
    down_.resize(slots * size_t(H_));
  }

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const int64_t tokens = in[0]->shape[0];
    sort_slots(data_of<const int32_t>(in[1]), tokens);
    gather(data_of<const T>(in[0]), tokens);
    for (int64_t e = 0; e < E_; ++e) project(in, e, 0, gate_.data());
    for (int64_t e = 0; e < E_; ++e) project(in, e, 1, up_.data());
    activate(in, tokens);
    for (int64_t e = 0; e < E_; ++e) project(in, e, 2, down_.data());
    combine(in, out, tokens);
  }

 private:
  // order_[p] = the slot (t·k + j) at sorted position p; position_ its inverse; offsets_[e] the
  // first position of expert e.
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
    std::vector<int64_t>& next = scratch_offsets_;  // sized at prepare: run never allocates
    std::copy(offsets_.begin(), offsets_.end() - 1, next.begin());
    for (int64_t s = 0; s < slots; ++s) {
      const int64_t p = next[size_t(ids[s])]++;
      order_[size_t(p)] = s;
      position_[size_t(s)] = p;
    }
    for (int64_t e = 0; e < E_; ++e)
      for (int64_t p = offsets_[size_t(e)]; p < offsets_[size_t(e + 1)]; ++p)
        expert_of_[size_t(p)] = e;
  }

  // Sorted position p's x row, as f32 and (where a weight is read so) bf16.
  void gather(const T* x, int64_t tokens) {
    const int64_t H = H_, k = k_;
    const bool want_b = std::is_same_v<T, bf16_bits> && (w_[0].reads_bf16 || w_[1].reads_bf16);
    const int64_t* order = order_.data();
    float* xf = xf_.data();
    bf16_bits* xb = xb_.data();
    parallel_for(ctx_, tokens * k, H, [=](int64_t p) {
      const T* row = x + order[p] / k * H;
      for (int64_t h = 0; h < H; ++h) xf[p * H + h] = to_f32(row[h]);
      if constexpr (std::is_same_v<T, bf16_bits>)
        if (want_b) std::memcpy(xb + p * H, row, size_t(H) * sizeof(bf16_bits));
    });
  }

  // Weight `which` (0 gate, 1 up, 2 down) of expert e over its rows, into y (f32, [slots, N]).
  void project(const DLTensor* const* in, int64_t e, int which, float* y) {
    const int64_t p0 = offsets_[size_t(e)], rows = offsets_[size_t(e + 1)] - p0;
    if (rows == 0) return;
    const ExpertWeight& w = w_[which];
    RowdotArgs a{};
    a.wtype = w.dtype;
    a.w = data_of<const uint8_t>(in[3 + which]) + e * w.expert_bytes;
    a.M = rows;
    a.K = w.K;
    a.N = w.rows;
    if (which == 2)
      a.xf = gate_.data() + p0 * w.K;  // the activation
    else if (w.reads_bf16)
      a.xb = xb_.data() + p0 * w.K;
    else
      a.xf = xf_.data() + p0 * w.K;
    a.y = y + p0 * w.rows;
    a.y_bf16 = false;
    rowdot_run(tier_, a, ctx_.num_threads);
  }

  // gate_ ← act(gate + gate_bias, up + up_bias), per sorted position.
  void activate(const DLTensor* const* in, int64_t tokens) {
    const int64_t I = I_;
    const T* gb = biased_ ? data_of<const T>(in[6]) : nullptr;
    const T* ub = biased_ ? data_of<const T>(in[7]) : nullptr;
    const int64_t* expert = expert_of_.data();
    float *g = gate_.data(), *u = up_.data();
    const ExpertActivation act = act_;
    parallel_for(ctx_, tokens * k_, I, [=](int64_t p) {
      const int64_t e = expert[p];
      for (int64_t i = 0; i < I; ++i) {
        float gv = g[p * I + i], uv = u[p * I + i];
        if (gb) gv += to_f32(gb[e * I + i]), uv += to_f32(ub[e * I + i]);
        g[p * I + i] = act(gv, uv);
      }
    });
  }

  // y[t] = Σ_j weights[t, j] · (down of slot (t, j) + down_bias), j in order.
  void combine(const DLTensor* const* in, const DLTensor* const* out, int64_t tokens) {
    const int64_t H = H_, k = k_;
    const float* weights = data_of<const float>(in[2]);
    const int32_t* ids = data_of<const int32_t>(in[1]);
    const T* db = biased_ ? data_of<const T>(in[8]) : nullptr;
    const int64_t* position = position_.data();
    const float* down = down_.data();
    T* y = data_of<T>(out[0]);
    parallel_for(ctx_, tokens, H * k, [=](int64_t t) {
      for (int64_t h = 0; h < H; ++h) {
        float sum = 0;
        for (int64_t j = 0; j < k; ++j) {
          float d = down[position[t * k + j] * H + h];
          if (db) d += to_f32(db[int64_t(ids[t * k + j]) * H + h]);
          sum += weights[t * k + j] * d;
        }
        y[t * H + h] = from_f32<T>(sum);
      }
    });
  }

  const RowdotTier& tier_;
  CpuContext ctx_;
  int64_t H_ = 0, k_ = 0, E_ = 0, I_ = 0;
  bool biased_ = false;
  ExpertWeight w_[3]{};
  ExpertActivation act_;
  std::vector<int64_t> order_, position_, offsets_, scratch_offsets_, expert_of_;
  std::vector<float> xf_, gate_, up_, down_;
  std::vector<bf16_bits> xb_;
};

}  // namespace

uint64_t moe_experts_workspace_bytes(const sy_op_desc* op) {
  if (op->num_inputs < 4 || !op->inputs[0] || !op->inputs[1] || !op->inputs[3] ||
      op->inputs[0]->ndim != 2 || op->inputs[1]->ndim != 2 || op->inputs[3]->ndim != 3)
    return 0;
  const uint64_t slots = uint64_t(op->inputs[0]->shape[0] * op->inputs[1]->shape[1]);
  const uint64_t H = uint64_t(op->inputs[0]->shape[1]), I = uint64_t(op->inputs[3]->shape[1]);
  const uint64_t E = uint64_t(op->inputs[3]->shape[0]);
  return slots * (H * (4 + 2 + 4) + I * (4 + 4) + 3 * 8) + (2 * E + 1) * 8;
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
