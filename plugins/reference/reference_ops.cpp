// Every operator but attention, in double (reference_ops.hpp).
#include "reference_ops.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "reference_tensor.hpp"

namespace sy::ref {
namespace {

using sy::edge::OpCopy;
using sy::edge::TensorCopy;

std::vector<double> in_values(const OpCopy& op, Operands in, size_t i) {
  return read(in[i]->data, op.inputs[i].dtype, op.inputs[i].elements());
}

[[noreturn]] void invalid(const std::string& what) {
  throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT, what);
}

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}

double gelu(double x, bool tanh_form) {
  if (!tanh_form) return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  const double c = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

}  // namespace

// c [M, N] = a [M, K] · b, b [K, N] or [N, K] (transpose_b), possibly block-quantized.
void matmul(const OpCopy& op, Operands in, Operands out) {
  const bool tb = op.int_attr(SY_ATTR_TRANSPOSE_B, 0) != 0;
  const TensorCopy& b = op.inputs[1];
  const int64_t K = tb ? b.shape[1] : b.shape[0], N = tb ? b.shape[0] : b.shape[1];
  const int64_t M = op.inputs[0].elements() / K;
  const std::vector<double> av = in_values(op, in, 0), bv = in_values(op, in, 1);
  std::vector<double> c(size_t(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += av[size_t(m * K + k)] * bv[size_t(tb ? n * K + k : k * N + n)];
      c[size_t(m * N + n)] = s;
    }
  write(out[0]->data, op.outputs[0].dtype, c);
}

// rows[i] = table[ids[i]]; every id is checked before a row is written.
void embedding(const OpCopy& op, Operands in, Operands out) {
  const int64_t V = op.inputs[0].shape[0], H = op.inputs[0].shape[1];
  const std::vector<double> ids = in_values(op, in, 1);
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= double(V))
      invalid("embedding: id " + std::to_string(int64_t(ids[i])) + " at position " +
              std::to_string(i) + " is outside the table's [0, " + std::to_string(V) + ")");
  const std::vector<double> table = in_values(op, in, 0);
  std::vector<double> rows(ids.size() * size_t(H));
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t h = 0; h < H; ++h)
      rows[i * size_t(H) + size_t(h)] = table[size_t(int64_t(ids[i]) * H + h)];
  write(out[0]->data, op.outputs[0].dtype, rows);
}

// y = x / sqrt(mean(x²) + eps) · (w + weight_offset), per row of H.
void rms_norm(const OpCopy& op, Operands in, Operands out) {
  const double eps = op.float_attr(SY_ATTR_EPS, 1e-6),
               offset = op.float_attr(SY_ATTR_WEIGHT_OFFSET, 0);
  const std::vector<double> x = in_values(op, in, 0), w = in_values(op, in, 1);
  const size_t H = w.size();
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / H; ++r) {
    double ss = 0;
    for (size_t h = 0; h < H; ++h) ss += x[r * H + h] * x[r * H + h];
    const double inv = 1.0 / std::sqrt(ss / double(H) + eps);
    for (size_t h = 0; h < H; ++h) y[r * H + h] = x[r * H + h] * inv * (w[h] + offset);
  }
  write(out[0]->data, op.outputs[0].dtype, y);
}

// y = (x − mean) / sqrt(var + eps) · w + b, per row of H (biased variance).
void layer_norm(const OpCopy& op, Operands in, Operands out) {
  const double eps = op.float_attr(SY_ATTR_EPS, 1e-5);
  const std::vector<double> x = in_values(op, in, 0), w = in_values(op, in, 1),
                            b = in_values(op, in, 2);
  const size_t H = w.size();
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / H; ++r) {
    double mean = 0, var = 0;
    for (size_t h = 0; h < H; ++h) mean += x[r * H + h];
    mean /= double(H);
    for (size_t h = 0; h < H; ++h) var += (x[r * H + h] - mean) * (x[r * H + h] - mean);
    const double inv = 1.0 / std::sqrt(var / double(H) + eps);
    for (size_t h = 0; h < H; ++h) y[r * H + h] = (x[r * H + h] - mean) * inv * w[h] + b[h];
  }
  write(out[0]->data, op.outputs[0].dtype, y);
}

// x [B, S, H, D] rotated at positions [B, S]: pairs (i, i + R/2) (neox) or (2i, 2i + 1)
// (interleaved) of the first R = rotary_dim dims by position · θ^(−2i/R) (or inv_freq[i]);
// cos and sin times rope_attention_factor.
void rope(const OpCopy& op, Operands in, Operands out) {
  const std::vector<int64_t>& s = op.inputs[0].shape;
  const int64_t B = s[0], S = s[1], H = s[2], D = s[3];
  const int64_t R = op.int_attr(SY_ATTR_ROTARY_DIM, D);
  const double theta = op.float_attr(SY_ATTR_ROPE_THETA, 10000.0);
  const double factor = op.float_attr(SY_ATTR_ROPE_ATTENTION_FACTOR, 1.0);
  const bool interleaved = op.string_attr(SY_ATTR_ROPE_STYLE, "neox") == "interleaved";
  std::vector<double> x = in_values(op, in, 0);
  const std::vector<double> pos = in_values(op, in, 1);
  const std::vector<double> table =
      op.inputs.size() > 2 ? in_values(op, in, 2) : std::vector<double>{};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < S; ++t)
      for (int64_t h = 0; h < H; ++h) {
        double* v = x.data() + ((b * S + t) * H + h) * D;
        for (int64_t i = 0; i < R / 2; ++i) {
          const double freq =
              table.empty() ? std::pow(theta, -2.0 * double(i) / double(R)) : table[size_t(i)];
          const double angle = pos[size_t(b * S + t)] * freq;
          const double c = factor * std::cos(angle), sn = factor * std::sin(angle);
          double& a = v[interleaved ? 2 * i : i];
          double& z = v[interleaved ? 2 * i + 1 : i + R / 2];
          const double x1 = a, x2 = z;
          a = x1 * c - x2 * sn;
          z = x2 * c + x1 * sn;
        }
      }
  write(out[0]->data, op.outputs[0].dtype, x);
}

// silu, gelu (erf or tanh form) and the softcap c·tanh(x/c), element by element.
void unary(const OpCopy& op, Operands in, Operands out) {
  std::vector<double> x = in_values(op, in, 0);
  const bool tanh_form = op.string_attr(SY_ATTR_GELU_APPROX, "none") == "tanh";
  const double cap = op.float_attr(SY_ATTR_SOFTCAP, 0);
  for (double& v : x)
    v = op.op == SY_OP_SILU   ? silu(v)
        : op.op == SY_OP_GELU ? gelu(v, tanh_form)
                              : cap * std::tanh(v / cap);
  write(out[0]->data, op.outputs[0].dtype, x);
}

// act(gate) · up.
void gated(const OpCopy& op, Operands in, Operands out) {
  std::vector<double> g = in_values(op, in, 0);
  const std::vector<double> u = in_values(op, in, 1);
  const bool tanh_form = op.string_attr(SY_ATTR_GELU_APPROX, "none") == "tanh";
  for (size_t i = 0; i < g.size(); ++i)
    g[i] = (op.op == SY_OP_SILU_MUL ? silu(g[i]) : gelu(g[i], tanh_form)) * u[i];
  write(out[0]->data, op.outputs[0].dtype, g);
}

// a + b or a · b, b a suffix of a's shape repeated over a's leading dimensions.
void binary(const OpCopy& op, Operands in, Operands out) {
  std::vector<double> a = in_values(op, in, 0);
  const std::vector<double> b = in_values(op, in, 1);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = op.op == SY_OP_ADD ? a[i] + b[i % b.size()] : a[i] * b[i % b.size()];
  write(out[0]->data, op.outputs[0].dtype, a);
}

// Over the last axis: exp(x − max) / Σ.
void softmax(const OpCopy& op, Operands in, Operands out) {
  std::vector<double> x = in_values(op, in, 0);
  const size_t N = size_t(op.inputs[0].shape.back());
  for (size_t r = 0; r < x.size() / N; ++r) {
    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
    for (size_t i = 0; i < N; ++i) mx = std::max(mx, x[r * N + i]);
    for (size_t i = 0; i < N; ++i) sum += (x[r * N + i] = std::exp(x[r * N + i] - mx));
    for (size_t i = 0; i < N; ++i) x[r * N + i] /= sum;
  }
  write(out[0]->data, op.outputs[0].dtype, x);
}

// The index of the first maximum over the last axis; a NaN is larger than any number.
void argmax(const OpCopy& op, Operands in, Operands out) {
  const std::vector<double> x = in_values(op, in, 0);
  const size_t N = size_t(op.inputs[0].shape.back());
  std::vector<double> idx(x.size() / N);
  for (size_t r = 0; r < idx.size(); ++r) {
    size_t best = 0;
    for (size_t i = 1; i < N && !std::isnan(x[r * N + best]); ++i)
      if (std::isnan(x[r * N + i]) || x[r * N + i] > x[r * N + best]) best = i;
    idx[r] = double(best);
  }
  write(out[0]->data, op.outputs[0].dtype, idx);
}

// The same dtype byte for byte; between float dtypes, the values rounded to the output's.
void copy(const OpCopy& op, Operands in, Operands out) {
  const sy_dtype from = op.inputs[0].dtype, to = op.outputs[0].dtype;
  if (from == to) {
    const int64_t bytes =
        sy_tensor_bytes(from, int32_t(op.inputs[0].shape.size()), op.inputs[0].shape.data());
    std::memcpy(out[0]->data, in[0]->data, size_t(bytes));
    return;
  }
  write(out[0]->data, to, in_values(op, in, 0));
}

// y = x[…, start : start + n, …] along `axis`, the bytes copied.
void slice(const OpCopy& op, Operands in, Operands out) {
  const std::vector<int64_t>& xs = op.inputs[0].shape;
  const int64_t axis = op.int_attr(SY_ATTR_AXIS, 0), start = op.int_attr(SY_ATTR_START, 0);
  const int64_t n = op.outputs[0].shape[size_t(axis)], elem = sy_dtype_size(op.inputs[0].dtype);
  int64_t outer = 1, inner = elem;
  for (int64_t d = 0; d < axis; ++d) outer *= xs[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < xs.size(); ++d) inner *= xs[d];
  const auto* x = static_cast<const uint8_t*>(in[0]->data);
  auto* y = static_cast<uint8_t*>(out[0]->data);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(y + o * n * inner, x + (o * xs[size_t(axis)] + start) * inner, size_t(n * inner));
}

// The cache's rows position … position + T − 1 = rows; past the capacity nothing is written.
// The paged form: row t into pool block slot / BS, offset slot % BS. Every slot is checked
// before any row is written.
void kv_cache_append_paged(const OpCopy& op, Operands in, Operands out) {
  const std::vector<int64_t>& r = op.inputs[0].shape;
  const std::vector<int64_t>& pool = op.outputs[0].shape;
  const int64_t T = r[1], rows = pool[0] * pool[1];
  const std::vector<double> slots = in_values(op, in, 1);
  for (int64_t t = 0; t < T; ++t)
    if (slots[size_t(t)] < 0 || slots[size_t(t)] >= double(rows))
      invalid("kv_cache_append: slot " + std::to_string(int64_t(slots[size_t(t)])) +
              " of row " + std::to_string(t) + " is outside the pool's [0, " +
              std::to_string(rows) + "); nothing was written");
  const int64_t row = r[2] * r[3] * sy_dtype_size(op.inputs[0].dtype);
  const auto* src = static_cast<const uint8_t*>(in[0]->data);
  auto* dst = static_cast<uint8_t*>(out[0]->data);
  for (int64_t t = 0; t < T; ++t)
    std::memcpy(dst + int64_t(slots[size_t(t)]) * row, src + t * row, size_t(row));
}

void kv_cache_append(const OpCopy& op, Operands in, Operands out) {
  if (op.int_attr(SY_ATTR_PAGED, 0)) return kv_cache_append_paged(op, in, out);
  const std::vector<int64_t>& r = op.inputs[0].shape;
  const int64_t B = r[0], T = r[1], C = op.outputs[0].shape[1];
  const int64_t position = int64_t(in_values(op, in, 1)[0]);
  if (position < 0 || position + T > C)
    invalid("kv_cache_append: rows " + std::to_string(position) + " to " +
            std::to_string(position + T - 1) + " are outside the cache's [0, " + std::to_string(C) +
            ")");
  const int64_t row = r[2] * r[3] * sy_dtype_size(op.inputs[0].dtype);
  const auto* src = static_cast<const uint8_t*>(in[0]->data);
  auto* cache = static_cast<uint8_t*>(out[0]->data);
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(cache + (b * C + position) * row, src + b * T * row, size_t(T * row));
}

}  // namespace sy::ref
