// The mixture-of-experts operators (ABI 1.7), in double: the router's top-k and softmax, and
// every routed expert's gate/up, activation, down and weighted sum (docs/operators.md).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "reference_ops.hpp"
#include "reference_tensor.hpp"

namespace sy::ref {
namespace {

using sy::edge::OpCopy;

std::vector<double> in_values(const OpCopy& op, Operands in, size_t i) {
  return read(in[i]->data, op.inputs[i].dtype, op.inputs[i].elements());
}

// The expert activation of one (gate, up) pair.
struct Activation {
  bool swiglu_limit = false;
  double alpha = 0, limit = 0;

  double operator()(double g, double u) const {
    if (!swiglu_limit) return g / (1.0 + std::exp(-g)) * u;
    g = std::min(g, limit);
    u = std::clamp(u, -limit, limit);
    return (u + 1.0) * g / (1.0 + std::exp(-alpha * g));
  }
};

// Row `row` of expert `e` of a stacked weight [E, rows, K] times x (K values).
double expert_dot(const std::vector<double>& w, int64_t e, int64_t rows, int64_t row, int64_t K,
                  const double* x) {
  const double* r = w.data() + (e * rows + row) * K;
  double s = 0;
  for (int64_t k = 0; k < K; ++k) s += r[k] * x[k];
  return s;
}

}  // namespace

// Per token: the k largest logits (ties to the lower index), then their softmax.
void moe_router(const OpCopy& op, Operands in, Operands out) {
  const int64_t E = op.inputs[0].shape.back(), T = op.inputs[0].elements() / E;
  const int64_t k = op.int_attr(SY_ATTR_TOP_K, 0);
  const std::vector<double> logits = in_values(op, in, 0);
  std::vector<double> ids(size_t(T * k)), weights(size_t(T * k));
  std::vector<int64_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const double* row = logits.data() + t * E;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [row](int64_t a, int64_t b) { return row[a] > row[b]; });
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(row[order[size_t(j)]] - row[order[0]]);
    for (int64_t j = 0; j < k; ++j) {
      ids[size_t(t * k + j)] = double(order[size_t(j)]);
      weights[size_t(t * k + j)] = std::exp(row[order[size_t(j)]] - row[order[0]]) / sum;
    }
  }
  write(out[0]->data, op.outputs[0].dtype, ids);
  write(out[1]->data, op.outputs[1].dtype, weights);
}

// y[t] = Σ_j weights[t, j] · (down[e] · act(gate[e] · x[t] + gb[e], up[e] · x[t] + ub[e]) +
// db[e]), e = ids[t, j]; every id is checked before anything is written.
void moe_experts(const OpCopy& op, Operands in, Operands out) {
  const int64_t H = op.inputs[0].shape.back(), T = op.inputs[0].elements() / H;
  const int64_t k = op.inputs[1].shape.back(), E = op.inputs[3].shape[0], I = op.inputs[3].shape[1];
  const bool biased = op.inputs.size() == 9;
  const std::vector<double> ids = in_values(op, in, 1);
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= double(E))
      throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                  "moe_experts: expert id " + std::to_string(int64_t(ids[i])) +
                                      " at " + std::to_string(i) + " is outside [0, " +
                                      std::to_string(E) + ")");
  Activation act;
  act.swiglu_limit = op.string_attr(SY_ATTR_EXPERT_ACTIVATION, "") == "swiglu_limit";
  act.alpha = op.float_attr(SY_ATTR_SWIGLU_ALPHA, 0);
  act.limit = op.float_attr(SY_ATTR_SWIGLU_LIMIT, 0);
  const std::vector<double> x = in_values(op, in, 0), weights = in_values(op, in, 2);
  const std::vector<double> gate = in_values(op, in, 3), up = in_values(op, in, 4),
                            down = in_values(op, in, 5);
  std::vector<double> gb, ub, db;
  if (biased) gb = in_values(op, in, 6), ub = in_values(op, in, 7), db = in_values(op, in, 8);
  std::vector<double> y(static_cast<size_t>(T * H), 0.0), a(static_cast<size_t>(I));
  for (int64_t t = 0; t < T; ++t) {
    const double* xt = x.data() + t * H;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = int64_t(ids[size_t(t * k + j)]);
      const double w = weights[size_t(t * k + j)];
      for (int64_t i = 0; i < I; ++i) {
        const double g = expert_dot(gate, e, I, i, H, xt) + (biased ? gb[size_t(e * I + i)] : 0);
        const double u = expert_dot(up, e, I, i, H, xt) + (biased ? ub[size_t(e * I + i)] : 0);
        a[size_t(i)] = act(g, u);
      }
      for (int64_t h = 0; h < H; ++h)
        y[size_t(t * H + h)] +=
            w * (expert_dot(down, e, H, h, I, a.data()) + (biased ? db[size_t(e * H + h)] : 0));
    }
  }
  write(out[0]->data, op.outputs[0].dtype, y);
}

}  // namespace sy::ref
