// attention, sinks_from_lse and fused_decode_attention, in double (docs/operators.md,
// "Attention semantics").
#include <cmath>
#include <limits>
#include <string>

#include "reference_ops.hpp"
#include "reference_tensor.hpp"

namespace sy::ref {
namespace {

using sy::edge::OpCopy;
constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

[[noreturn]] void invalid(const std::string& what) {
  throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT, what);
}

struct Problem {
  int64_t B, Sq, Skv, Hq, Hkv, D;
  bool causal;
  int64_t window;  // < 0: none
  double scale, softcap;
  std::vector<double> q, k, v, sinks;  // sinks empty: none
  std::vector<int64_t> kv_len;         // per batch
};

// One query row's output and log-sum-exp over its valid keys (the sink joins the denominator
// only).
void attend(const Problem& p, int64_t b, int64_t i, int64_t h, double* o, double* lse) {
  const int64_t hk = h / (p.Hq / p.Hkv), L = p.kv_len[size_t(b)];
  const double* q = p.q.data() + ((b * p.Sq + i) * p.Hq + h) * p.D;
  std::vector<double> s;
  std::vector<int64_t> keys;
  for (int64_t j = 0; j < L; ++j) {
    if (p.causal && j > i + L - p.Sq) continue;
    if (p.window >= 0 && j < i + L - p.Sq - p.window) continue;
    const double* k = p.k.data() + ((b * p.Skv + j) * p.Hkv + hk) * p.D;
    double dot = 0;
    for (int64_t d = 0; d < p.D; ++d) dot += q[d] * k[d];
    dot *= p.scale;
    if (p.softcap > 0) dot = p.softcap * std::tanh(dot / p.softcap);
    s.push_back(dot);
    keys.push_back(j);
  }
  for (int64_t d = 0; d < p.D; ++d) o[d] = 0;
  if (keys.empty()) {
    *lse = kMinusInf;
    return;
  }
  double mx = kMinusInf, sum = 0;
  for (double x : s) mx = std::max(mx, x);
  for (double& x : s) sum += (x = std::exp(x - mx));
  *lse = mx + std::log(sum);
  const double denom = p.sinks.empty() ? sum : sum + std::exp(p.sinks[size_t(h)] - mx);
  for (size_t n = 0; n < keys.size(); ++n) {
    const double* v = p.v.data() + ((b * p.Skv + keys[n]) * p.Hkv + hk) * p.D;
    for (int64_t d = 0; d < p.D; ++d) o[d] += s[n] / denom * v[d];
  }
}

// o [B, Sq, Hq, D] and lse [B, Hq, Sq] of every query row.
void attend_all(const Problem& p, std::vector<double>& o, std::vector<double>& lse) {
  o.assign(size_t(p.B * p.Sq * p.Hq * p.D), 0.0);
  lse.assign(size_t(p.B * p.Hq * p.Sq), 0.0);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t i = 0; i < p.Sq; ++i)
      for (int64_t h = 0; h < p.Hq; ++h)
        attend(p, b, i, h, o.data() + ((b * p.Sq + i) * p.Hq + h) * p.D,
               lse.data() + (b * p.Hq + h) * p.Sq + i);
}

double scale_of(const OpCopy& op, int64_t D) {
  const double s = op.float_attr(SY_ATTR_SCALE, 0);
  return s != 0 ? s : 1.0 / std::sqrt(double(D));
}

// Neox rotation of the first R dims of each of `heads` heads of D in v.
void rope_neox(std::vector<double>& v, int64_t heads, int64_t D, int64_t R, double position,
               double theta, const std::vector<double>& table, double factor) {
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < R / 2; ++i) {
      const double freq =
          table.empty() ? std::pow(theta, -2.0 * double(i) / double(R)) : table[size_t(i)];
      const double c = factor * std::cos(position * freq), s = factor * std::sin(position * freq);
      double& a = v[size_t(h * D + i)];
      double& z = v[size_t(h * D + i + R / 2)];
      const double x1 = a, x2 = z;
      a = x1 * c - x2 * s;
      z = x2 * c + x1 * s;
    }
}

}  // namespace

// The paged form: each sequence's query rows against the keys its block table names, gathered
// into one contiguous problem per sequence. Every metadata entry is checked before anything is
// written (o and lse are written only after).
void attention_paged(const OpCopy& op, Operands in, Operands out) {
  const std::vector<int64_t>& qs = op.inputs[0].shape;
  const std::vector<int64_t>& pool = op.inputs[1].shape;
  const int64_t T = qs[1], Hq = qs[2], D = qs[3], NB = pool[0], BS = pool[1], Hkv = pool[2];
  const size_t n = op.inputs.size();
  auto values = [&](size_t i) {
    return read(in[i]->data, op.inputs[i].dtype, op.inputs[i].elements());
  };
  const std::vector<double> starts = values(n - 3), lens = values(n - 2), table = values(n - 1);
  const int64_t S = op.inputs[n - 2].shape[0], MB = op.inputs[n - 1].shape[1];
  if (starts[0] != 0 || starts[size_t(S)] != double(T))
    invalid("attention: query_start must begin at 0 and end at T = " + std::to_string(T));
  for (int64_t s = 0; s < S; ++s) {
    const double q_len = starts[size_t(s + 1)] - starts[size_t(s)], L = lens[size_t(s)];
    if (q_len < 0 || q_len > L || L > double(MB * BS))
      invalid("attention: sequence " + std::to_string(s) + " has " +
              std::to_string(int64_t(q_len)) + " query tokens and length " +
              std::to_string(int64_t(L)) + "; queries must fit its length, and its length its " +
              std::to_string(MB) + " blocks of " + std::to_string(BS));
    for (int64_t j = 0; j < (int64_t(L) + BS - 1) / BS; ++j)
      if (table[size_t(s * MB + j)] < 0 || table[size_t(s * MB + j)] >= double(NB))
        invalid("attention: block table entry " + std::to_string(j) + " of sequence " +
                std::to_string(s) + " names block " +
                std::to_string(int64_t(table[size_t(s * MB + j)])) + " of a pool of " +
                std::to_string(NB));
  }
  const std::vector<double> q = values(0), k = values(1), v = values(2);
  const std::vector<double> sinks = n == 7 ? values(3) : std::vector<double>{};
  std::vector<double> o(size_t(T * Hq * D), 0.0), lse(size_t(Hq * T), 0.0);
  const int64_t row = Hkv * D;
  for (int64_t s = 0; s < S; ++s) {
    const int64_t first = int64_t(starts[size_t(s)]), q_len = int64_t(starts[size_t(s + 1)]) - first;
    const int64_t L = int64_t(lens[size_t(s)]);
    if (q_len == 0) continue;
    Problem p{};
    p.B = 1, p.Sq = q_len, p.Skv = L, p.Hq = Hq, p.Hkv = Hkv, p.D = D;
    p.causal = op.int_attr(SY_ATTR_CAUSAL, 0) != 0;
    p.window = op.int_attr(SY_ATTR_WINDOW_LEFT, -1);
    p.scale = scale_of(op, D);
    p.softcap = op.float_attr(SY_ATTR_SOFTCAP, 0);
    p.q.assign(q.begin() + first * Hq * D, q.begin() + (first + q_len) * Hq * D);
    for (int64_t j = 0; j < L; ++j) {
      const int64_t at = (int64_t(table[size_t(s * MB + j / BS)]) * BS + j % BS) * row;
      p.k.insert(p.k.end(), k.begin() + at, k.begin() + at + row);
      p.v.insert(p.v.end(), v.begin() + at, v.begin() + at + row);
    }
    p.sinks = sinks;
    p.kv_len = {L};
    std::vector<double> po, plse;
    attend_all(p, po, plse);
    std::copy(po.begin(), po.end(), o.begin() + first * Hq * D);
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < q_len; ++i) lse[size_t(h * T + first + i)] = plse[size_t(h * q_len + i)];
  }
  write(out[0]->data, op.outputs[0].dtype, o);
  if (op.outputs.size() > 1) write(out[1]->data, op.outputs[1].dtype, lse);
}

void attention(const OpCopy& op, Operands in, Operands out) {
  if (op.int_attr(SY_ATTR_PAGED, 0)) return attention_paged(op, in, out);
  const std::vector<int64_t>& qs = op.inputs[0].shape;
  Problem p{};
  p.B = qs[0];
  p.Sq = qs[1];
  p.Hq = qs[2];
  p.D = qs[3];
  p.Skv = op.inputs[1].shape[1];
  p.Hkv = op.inputs[1].shape[2];
  p.causal = op.int_attr(SY_ATTR_CAUSAL, 0) != 0;
  p.window = op.int_attr(SY_ATTR_WINDOW_LEFT, -1);
  p.scale = scale_of(op, p.D);
  p.softcap = op.float_attr(SY_ATTR_SOFTCAP, 0);
  const bool has_len = op.int_attr(SY_ATTR_KV_LEN_INPUT, 0) != 0;
  const size_t extra = op.inputs.size() - 3 - (has_len ? 1 : 0);
  auto values = [&](size_t i) {
    return read(in[i]->data, op.inputs[i].dtype, op.inputs[i].elements());
  };
  p.q = values(0);
  p.k = values(1);
  p.v = values(2);
  if (extra == 1) p.sinks = values(3);
  p.kv_len.assign(size_t(p.B), p.Skv);
  if (has_len) {
    const std::vector<double> len = values(op.inputs.size() - 1);
    for (int64_t b = 0; b < p.B; ++b) {
      if (len[size_t(b)] < 0 || len[size_t(b)] > double(p.Skv))
        invalid("attention: kv_len " + std::to_string(int64_t(len[size_t(b)])) + " of batch " +
                std::to_string(b) + " is outside [0, " + std::to_string(p.Skv) + "]");
      p.kv_len[size_t(b)] = int64_t(len[size_t(b)]);
    }
  }
  std::vector<double> o, lse;
  attend_all(p, o, lse);
  write(out[0]->data, op.outputs[0].dtype, o);
  if (op.outputs.size() > 1) write(out[1]->data, op.outputs[1].dtype, lse);
}

// o ← o · exp(lse − logaddexp(lse, s_h)), in place.
void sinks_from_lse(const OpCopy& op, Operands in, Operands out) {
  const std::vector<int64_t>& os = op.outputs[0].shape;
  const int64_t B = os[0], Sq = os[1], Hq = os[2], D = os[3];
  const std::vector<double> lse = read(in[0]->data, op.inputs[0].dtype, op.inputs[0].elements());
  const std::vector<double> sinks = read(in[1]->data, op.inputs[1].dtype, op.inputs[1].elements());
  std::vector<double> o = read(out[0]->data, op.outputs[0].dtype, op.outputs[0].elements());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Sq; ++i)
      for (int64_t h = 0; h < Hq; ++h) {
        const double l = lse[size_t((b * Hq + h) * Sq + i)], s = sinks[size_t(h)];
        const double both = std::max(l, s) + std::log1p(std::exp(-std::abs(l - s)));
        const double f = l == kMinusInf ? 0.0 : std::exp(l - both);
        for (int64_t d = 0; d < D; ++d) o[size_t(((b * Sq + i) * Hq + h) * D + d)] *= f;
      }
  write(out[0]->data, op.outputs[0].dtype, o);
}

// q, k, v = W·x; rope on q and k; k and v into the caches at `position`; attention of q over
// keys 0 … position of the caches as stored.
void fused_decode_attention(const OpCopy& op, Operands in, Operands out) {
  const int64_t H = op.inputs[0].shape[2], Hq = op.outputs[0].shape[2], D = op.outputs[0].shape[3];
  const int64_t C = op.outputs[1].shape[1], Hkv = op.outputs[1].shape[2];
  auto values = [&](size_t i) {
    return read(in[i]->data, op.inputs[i].dtype, op.inputs[i].elements());
  };
  const int64_t position = int64_t(values(4)[0]);
  if (position < 0 || position >= C)
    invalid("fused_decode_attention: position " + std::to_string(position) +
            " is outside the caches' [0, " + std::to_string(C) + "); nothing was written");
  const std::vector<double> x = values(0);
  auto project = [&](size_t w, int64_t rows) {
    const std::vector<double> m = values(w);
    std::vector<double> y(size_t(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < H; ++i) y[size_t(r)] += m[size_t(r * H + i)] * x[size_t(i)];
    return y;
  };
  std::vector<double> q = project(1, Hq * D), k = project(2, Hkv * D), v = project(3, Hkv * D);
  if (op.int_attr(SY_ATTR_ROPE, 1) != 0) {
    const int64_t R = op.int_attr(SY_ATTR_ROTARY_DIM, D);
    const double theta = op.float_attr(SY_ATTR_ROPE_THETA, 10000.0);
    const double factor = op.float_attr(SY_ATTR_ROPE_ATTENTION_FACTOR, 1.0);
    const std::vector<double> table = op.inputs.size() > 5 ? values(5) : std::vector<double>{};
    rope_neox(q, Hq, D, R, double(position), theta, table, factor);
    rope_neox(k, Hkv, D, R, double(position), theta, table, factor);
  }
  for (size_t c = 0; c < 2; ++c) {
    const std::vector<double>& row = c == 0 ? k : v;
    for (int64_t e = 0; e < Hkv * D; ++e)
      write_one(out[1 + c]->data, op.outputs[1 + c].dtype, position * Hkv * D + e, row[size_t(e)]);
  }
  Problem p{};
  p.B = 1;
  p.Sq = 1;
  p.Skv = C;
  p.Hq = Hq;
  p.Hkv = Hkv;
  p.D = D;
  p.causal = true;
  p.window = op.int_attr(SY_ATTR_WINDOW_LEFT, -1);
  p.scale = scale_of(op, D);
  p.q = q;
  p.k = read(out[1]->data, op.outputs[1].dtype, op.outputs[1].elements());
  p.v = read(out[2]->data, op.outputs[2].dtype, op.outputs[2].elements());
  p.kv_len = {position + 1};
  std::vector<double> o, lse;
  attend_all(p, o, lse);
  write(out[0]->data, op.outputs[0].dtype, o);
}

}  // namespace sy::ref
