#include "core/conformance/case_buffers.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "switchyard/plugin_api.h"

namespace sy::conformance {
namespace {

double value(const std::vector<uint8_t>& b, sy_dtype dt, size_t i) {
  switch (dt) {
    case SY_DTYPE_F32: {
      float f;
      std::memcpy(&f, b.data() + 4 * i, 4);
      return f;
    }
    case SY_DTYPE_BF16: {
      uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      return sy_bf16_to_f32(h);
    }
    case SY_DTYPE_F16: {
      _Float16 h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      return double(h);
    }
    case SY_DTYPE_I32: {
      int32_t x;
      std::memcpy(&x, b.data() + 4 * i, 4);
      return x;
    }
    case SY_DTYPE_I64: {
      int64_t x;
      std::memcpy(&x, b.data() + 8 * i, 8);
      return double(x);
    }
    default: return std::nan("");
  }
}

void set(std::vector<uint8_t>& b, sy_dtype dt, size_t i, double v) {
  switch (dt) {
    case SY_DTYPE_F32: {
      const float f = float(v);
      std::memcpy(b.data() + 4 * i, &f, 4);
      return;
    }
    case SY_DTYPE_BF16: {
      const uint16_t h = sy_f32_to_bf16(float(v));
      std::memcpy(b.data() + 2 * i, &h, 2);
      return;
    }
    case SY_DTYPE_F16: {
      const _Float16 h = _Float16(v);
      std::memcpy(b.data() + 2 * i, &h, 2);
      return;
    }
    case SY_DTYPE_I32: {
      const int32_t x = int32_t(v);
      std::memcpy(b.data() + 4 * i, &x, 4);
      return;
    }
    case SY_DTYPE_I64: {
      const int64_t x = int64_t(v);
      std::memcpy(b.data() + 8 * i, &x, 8);
      return;
    }
    default: return;
  }
}

// Random block bytes with sane f16 scales (d ~ 0.01, q4_1's and the K-quants' mins small).
void quantized(std::vector<uint8_t>& b, sy_dtype dt, std::mt19937& rng) {
  for (uint8_t& x : b) x = uint8_t(rng());
  const size_t bb = sy_dtype_block_bytes(dt);
  auto half = [&](size_t at, float v) {
    const _Float16 h = _Float16(v);
    std::memcpy(b.data() + at, &h, 2);
  };
  for (size_t blk = 0; blk + bb <= b.size(); blk += bb) {
    const float d = 0.004f * float(1 + rng() % 5);
    switch (dt) {
      case SY_DTYPE_Q6_K: half(blk + 208, d * 0.1f); break;
      case SY_DTYPE_Q3_K: half(blk + 108, d * 0.1f); break;
      case SY_DTYPE_Q2_K: half(blk + 80, d), half(blk + 82, d * 0.5f); break;
      case SY_DTYPE_Q4_1:
      case SY_DTYPE_Q5_1:
      case SY_DTYPE_Q4_K:
      case SY_DTYPE_Q5_K: half(blk, d), half(blk + 2, d * 0.5f); break;
      case SY_DTYPE_MXFP4:
        b[blk] = uint8_t(119 + rng() % 4);
        break;  // 2^-8 .. 2^-5, no 0xFF
      // Sub-block scales d·(ls − 32) over all of ls's 6 bits, of both signs as a trained file's
      // are (half of SmolLM2 IQ4_XS's are negative): the random bytes, under a smaller d.
      case SY_DTYPE_IQ4_XS: half(blk, d * 0.125f); break;
      default: half(blk, d);
    }
  }
}

double tolerance(sy_dtype dt, double want) {
  const double t = dt == SY_DTYPE_F32 ? 1e-4 : dt == SY_DTYPE_F16 ? 2e-3 : 2e-2;
  return t + t * std::abs(want);
}

}  // namespace

Buffers::Buffers(const OpDesc& op, uint32_t seed,
                 const std::vector<std::vector<int64_t>>& actual_inputs,
                 const std::vector<std::vector<int64_t>>& actual_outputs)
    : op_(op) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uni(-1, 1);
  auto make = [](const TensorDesc& d, const std::vector<std::vector<int64_t>>& actual, size_t i) {
    Tensor t;
    t.desc = d;
    t.shape = i < actual.size() ? actual[i] : d.shape;
    const int64_t n = sy_tensor_bytes(d.dtype, int32_t(t.shape.size()), t.shape.data());
    t.bytes.assign(size_t(std::max<int64_t>(n, 0)), 0);
    return t;
  };
  for (size_t i = 0; i < op.inputs.size(); ++i) in_.push_back(make(op.inputs[i], actual_inputs, i));
  for (size_t i = 0; i < op.outputs.size(); ++i)
    out_.push_back(make(op.outputs[i], actual_outputs, i));
  auto count = [](const Tensor& t) {
    size_t n = 1;
    for (int64_t s : t.shape) n *= size_t(s);
    return n;
  };
  auto ints = [&](Tensor& t, int64_t lo, int64_t hi) {  // in [lo, hi]
    for (size_t i = 0; i < count(t); ++i)
      set(t.bytes, t.desc.dtype, i, double(lo + int64_t(rng() % uint64_t(hi - lo + 1))));
  };
  for (size_t i = 0; i < in_.size(); ++i) {
    Tensor& t = in_[i];
    const sy_dtype dt = t.desc.dtype;
    if (sy_dtype_is_blocked(dt)) {
      quantized(t.bytes, dt, rng);
    } else if (dt == SY_DTYPE_I32 || dt == SY_DTYPE_I64) {
      if (op.op == SY_OP_EMBEDDING)
        ints(t, 0, op.inputs[0].shape[0] - 1);
      else if (op.op == SY_OP_ROPE)
        ints(t, 0, 200);
      else if (op.op == SY_OP_KV_CACHE_APPEND)
        ints(t, 0, op.outputs[0].shape[1] - op.inputs[0].shape[1]);
      else if (op.op == SY_OP_FUSED_DECODE_ATTENTION)
        ints(t, 0, op.outputs[1].shape[1] - 1);
      else if (op.op == SY_OP_ATTENTION)
        ints(t, 1, op.inputs[1].shape[1]);
      else if (op.op == SY_OP_MOE_EXPERTS)
        ints(t, 0, op.inputs[3].shape[0] - 1);  // expert ids
      else
        ints(t, 0, 3);
    } else if (op.op == SY_OP_MOE_EXPERTS && i == 0) {
      // Hidden states of a normed layer's scale: two matmuls deep, x in [-1, 1] against
      // quantized weights of magnitude ~10 would test f32's cancellation, not the kernel.
      for (size_t e = 0; e < count(t); ++e) set(t.bytes, dt, e, 0.25 * uni(rng));
    } else if (op.op == SY_OP_MOE_EXPERTS && i == 2) {
      // Routing weights as a router gives them: positive, each token's summing to 1.
      const size_t k = size_t(t.shape.back());
      for (size_t r = 0; r < count(t) / k; ++r) {
        std::vector<double> w(k);
        double sum = 0;
        for (double& v : w) sum += v = 0.1 + (uni(rng) + 1) / 2;
        for (size_t j = 0; j < k; ++j) set(t.bytes, dt, r * k + j, w[j] / sum);
      }
    } else if ((op.op == SY_OP_ROPE && i == 2) ||
               (op.op == SY_OP_FUSED_DECODE_ATTENTION && i == 5)) {
      for (size_t e = 0; e < count(t); ++e)  // a frequency table: decreasing, positive
        set(t.bytes, dt, e,
            std::pow(10000.0, -2.0 * double(e) / double(2 * count(t))) *
                (0.5 + 0.5 * (uni(rng) + 1) / 2));
    } else {
      for (size_t e = 0; e < count(t); ++e) set(t.bytes, dt, e, uni(rng));
    }
  }
  if (op.int_attr(SY_ATTR_PAGED).value_or(0)) paged_metadata(rng);
  for (Tensor& t : out_) {
    if (sy_dtype_is_blocked(t.desc.dtype)) continue;
    for (size_t e = 0; e < count(t); ++e)
      set(t.bytes, t.desc.dtype, e,
          t.desc.dtype == SY_DTYPE_I64 || t.desc.dtype == SY_DTYPE_I32 ? -7 : uni(rng));
  }
  link();
}

// The paged forms' metadata, valid for this execute's extents: an append's slots distinct and
// inside the pool; attention's sequences splitting T (each within its blocks), each with its
// own cached keys before its queries, block tables naming pool blocks in a random order.
void Buffers::paged_metadata(std::mt19937& rng) {
  auto put = [](Tensor& t, size_t i, int64_t v) { set(t.bytes, t.desc.dtype, i, double(v)); };
  if (op_.op == SY_OP_KV_CACHE_APPEND) {
    const int64_t slots = op_.outputs[0].shape[0] * op_.outputs[0].shape[1], T = in_[0].shape[1];
    std::vector<int64_t> all(static_cast<size_t>(slots));
    for (int64_t i = 0; i < slots; ++i) all[size_t(i)] = i;
    std::shuffle(all.begin(), all.end(), rng);
    for (int64_t i = 0; i < T; ++i) put(in_[1], size_t(i), all[size_t(i)]);
    return;
  }
  const size_t n = in_.size();
  Tensor &starts = in_[n - 3], &lens = in_[n - 2], &table = in_[n - 1];
  const int64_t T = in_[0].shape[1], S = lens.shape[0], MB = table.shape[1];
  const int64_t NB = in_[1].shape[0], BS = in_[1].shape[1];
  std::vector<int64_t> q_len(size_t(S), 0);
  for (int64_t i = 0; i < T; ++i) ++q_len[size_t(rng() % uint64_t(S))];
  int64_t first = 0;
  put(starts, 0, 0);
  for (int64_t s = 0; s < S; ++s) {
    const int64_t room = MB * BS - q_len[size_t(s)];  // the keys cached before its queries
    const int64_t L = q_len[size_t(s)] + int64_t(rng() % uint64_t(std::max<int64_t>(room, 0) + 1));
    first += q_len[size_t(s)];
    put(starts, size_t(s + 1), first);
    put(lens, size_t(s), L);
    for (int64_t b = 0; b < MB; ++b) put(table, size_t(s * MB + b), int64_t(rng() % uint64_t(NB)));
  }
}

void Buffers::quantize_input(size_t index, int levels) {
  Tensor& t = in_[index];
  const sy_dtype dt = t.desc.dtype;
  const size_t n = t.bytes.size() / (dt == SY_DTYPE_F32 ? 4 : 2);
  for (size_t b0 = 0; b0 + 32 <= n; b0 += 32) {
    float x[32], amax = 0.f;
    for (int i = 0; i < 32; ++i) {
      x[i] = float(value(t.bytes, dt, b0 + i));
      amax = std::max(amax, std::fabs(x[i]));
    }
    const float d = amax / float(levels), id = d != 0.f ? 1.f / d : 0.f;
    for (int i = 0; i < 32; ++i) set(t.bytes, dt, b0 + i, double(d) * std::nearbyint(x[i] * id));
  }
}

Buffers::Buffers(const Buffers& other) : op_(other.op_), in_(other.in_), out_(other.out_) {
  link();
}

void Buffers::link() {
  for (auto* list : {&in_, &out_})
    for (Tensor& t : *list) {
      t.dl = DLTensor{};
      t.dl.data = t.bytes.data();
      t.dl.device = {kDLCPU, 0};
      t.dl.ndim = int32_t(t.shape.size());
      t.dl.dtype = sy_dtype_to_dl(t.desc.dtype);
      t.dl.shape = t.shape.data();
    }
}

std::vector<const DLTensor*> Buffers::inputs() const {
  std::vector<const DLTensor*> v;
  for (const Tensor& t : in_) v.push_back(&t.dl);
  return v;
}
std::vector<const DLTensor*> Buffers::outputs() const {
  std::vector<const DLTensor*> v;
  for (const Tensor& t : out_) v.push_back(&t.dl);
  return v;
}
std::vector<DLTensor> Buffers::input_tensors() const {
  std::vector<DLTensor> v;
  for (const Tensor& t : in_) v.push_back(t.dl);
  return v;
}

std::string Buffers::differs_from(const Buffers& want, bool exact) const {
  for (size_t o = 0; o < out_.size(); ++o) {
    const Tensor &g = out_[o], &w = want.out_[o];
    if (exact || sy_dtype_is_blocked(g.desc.dtype)) {
      if (g.bytes != w.bytes) return "output " + std::to_string(o) + " differs bit for bit";
      continue;
    }
    const sy_dtype dt = g.desc.dtype;
    const bool integer = dt == SY_DTYPE_I32 || dt == SY_DTYPE_I64;
    size_t off = 0, worst_at = 0;
    double worst = 0;
    const size_t n = g.bytes.size() / std::max<size_t>(1, sy_dtype_size(dt));
    for (size_t i = 0; i < n; ++i) {
      const double a = value(g.bytes, dt, i), b = value(w.bytes, dt, i);
      if (std::isinf(b) && a == b) continue;
      const double err = std::abs(a - b);
      const bool bad = integer ? a != b : !(err <= tolerance(dt, b));
      if (bad && (++off == 1 || err > worst))
        worst = std::isnan(err) ? INFINITY : err, worst_at = i;
    }
    if (off) {
      std::ostringstream s;
      s << "output " << o << " [" << worst_at << "]: got " << value(g.bytes, dt, worst_at)
        << ", the reference " << value(w.bytes, dt, worst_at) << " (tolerance "
        << (integer ? 0.0 : tolerance(dt, value(w.bytes, dt, worst_at))) << "); " << off << " of "
        << n << " elements off";
      return s.str();
    }
  }
  return "";
}

}  // namespace sy::conformance
