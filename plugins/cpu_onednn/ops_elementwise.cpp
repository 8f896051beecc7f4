// Elementwise and last-axis ops: silu, gelu (erf | tanh), softcap, add, mul (b broadcast over
// a's leading dimensions), silu_mul, gelu_mul, copy (f32 <-> bf16 allowed), softmax, argmax.
// f32 math throughout, bf16 rounded to nearest even on store. An output may be its input
// (same data pointer): every loop reads element i before writing element i.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernel_factories.hpp"
#include "ops_common.hpp"

namespace sy::cpu {
namespace {

enum class Act { silu, gelu_erf, gelu_tanh };

template <Act A>
inline float activate(float x) {
  if constexpr (A == Act::silu) return silu_f32(x);
  if constexpr (A == Act::gelu_erf) return gelu_erf_f32(x);
  if constexpr (A == Act::gelu_tanh) return gelu_tanh_f32(x);
}

Act activation(const sy::edge::OpCopy& op) {
  if (op.op == SY_OP_SILU || op.op == SY_OP_SILU_MUL) return Act::silu;
  return op.string_attr(SY_ATTR_GELU_APPROX, "none") == "tanh" ? Act::gelu_tanh : Act::gelu_erf;
}

template <typename T, Act A>
class UnaryKernel final : public CpuKernel {
 public:
  UnaryKernel(int64_t n, const CpuContext& ctx) : n_(n), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const T* x = data_of<const T>(in[0]);
    T* y = data_of<T>(out[0]);
    parallel_chunks(ctx_, n_, [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = from_f32<T>(activate<A>(to_f32(x[i])));
    });
  }

 private:
  int64_t n_;
  CpuContext ctx_;
};

// y = c · tanh(x / c), in double: Gemma's final logit softcap, applied once per logit.
template <typename T>
class SoftcapKernel final : public CpuKernel {
 public:
  SoftcapKernel(int64_t n, double cap, const CpuContext& ctx) : n_(n), cap_(cap), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const T* x = data_of<const T>(in[0]);
    T* y = data_of<T>(out[0]);
    const double cap = cap_;
    parallel_chunks(ctx_, n_, [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        y[i] = from_f32<T>(static_cast<float>(cap * std::tanh(double(to_f32(x[i])) / cap)));
    });
  }

 private:
  int64_t n_;
  double cap_;
  CpuContext ctx_;
};

enum class Bin { add, mul, silu_mul, gelu_erf_mul, gelu_tanh_mul };

template <Bin B>
inline float combine(float a, float b) {
  if constexpr (B == Bin::add) return a + b;
  if constexpr (B == Bin::mul) return a * b;
  if constexpr (B == Bin::silu_mul) return silu_f32(a) * b;
  if constexpr (B == Bin::gelu_erf_mul) return gelu_erf_f32(a) * b;
  if constexpr (B == Bin::gelu_tanh_mul) return gelu_tanh_f32(a) * b;
}

// c = a op b; b has a's last `nb` elements' shape and repeats over a's leading dims.
template <typename T, Bin B>
class BinaryKernel final : public CpuKernel {
 public:
  BinaryKernel(int64_t n, int64_t nb, const CpuContext& ctx) : n_(n), nb_(nb), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const T* a = data_of<const T>(in[0]);
    const T* b = data_of<const T>(in[1]);
    T* c = data_of<T>(out[0]);
    if (nb_ == n_) {
      parallel_chunks(ctx_, n_, [=](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i) c[i] = from_f32<T>(combine<B>(to_f32(a[i]), to_f32(b[i])));
      });
      return;
    }
    const int64_t nb = nb_;
    parallel_for(ctx_, n_ / nb, nb, [=](int64_t row) {
      const T* ar = a + row * nb;
      T* cr = c + row * nb;
      for (int64_t i = 0; i < nb; ++i) cr[i] = from_f32<T>(combine<B>(to_f32(ar[i]), to_f32(b[i])));
    });
  }

 private:
  int64_t n_, nb_;
  CpuContext ctx_;
};

template <typename From, typename To>
class ConvertKernel final : public CpuKernel {
 public:
  ConvertKernel(int64_t n, const CpuContext& ctx) : n_(n), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const From* x = data_of<const From>(in[0]);
    To* y = data_of<To>(out[0]);
    parallel_chunks(ctx_, n_, [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = from_f32<To>(to_f32(x[i]));
    });
  }

 private:
  int64_t n_;
  CpuContext ctx_;
};

class CopyBytesKernel final : public CpuKernel {
 public:
  CopyBytesKernel(int64_t bytes, const CpuContext& ctx) : bytes_(bytes), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const char* x = data_of<const char>(in[0]);
    char* y = data_of<char>(out[0]);
    if (x == y) return;
    parallel_chunks(ctx_, bytes_, [=](int64_t b, int64_t e) { std::memmove(y + b, x + b, e - b); });
  }

 private:
  int64_t bytes_;
  CpuContext ctx_;
};

// Over the last axis: y = e^{x - max} / Σ e^{x - max}.
template <typename T>
class SoftmaxKernel final : public CpuKernel {
 public:
  SoftmaxKernel(int64_t rows, int64_t n, const CpuContext& ctx) : rows_(rows), n_(n), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const T* x = data_of<const T>(in[0]);
    T* y = data_of<T>(out[0]);
    const int64_t n = n_;
    parallel_for(ctx_, rows_, 3 * n, [=](int64_t row) {
      const T* xr = x + row * n;
      T* yr = y + row * n;
      float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
      for (int64_t i = 0; i < n; ++i) m = std::max(m, to_f32(xr[i]));
      double sum = 0.0;  // double: a long row's sum keeps f32 precision
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < n; ++i) sum += exp_f32(to_f32(xr[i]) - m);
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t i = 0; i < n; ++i) yr[i] = from_f32<T>(exp_f32(to_f32(xr[i]) - m) * inv);
    });
  }

 private:
  int64_t rows_, n_;
  CpuContext ctx_;
};

// Index of the first maximum of each row; a NaN counts as larger than any number, so the
// first NaN wins (as numpy and PyTorch do).
template <typename T>
class ArgmaxKernel final : public CpuKernel {
 public:
  ArgmaxKernel(int64_t rows, int64_t n, const CpuContext& ctx) : rows_(rows), n_(n), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const T* x = data_of<const T>(in[0]);
    int64_t* index = data_of<int64_t>(out[0]);
    const int64_t n = n_;
    parallel_for(ctx_, rows_, n, [=](int64_t row) {
      const T* xr = x + row * n;
      float m = -std::numeric_limits<float>::infinity();
      int nan = 0;
#pragma omp simd reduction(max : m) reduction(| : nan)
      for (int64_t i = 0; i < n; ++i) {
        float v = to_f32(xr[i]);
        m = std::max(m, v);
        nan |= v != v;
      }
      int64_t found = 0;
      for (int64_t i = 0; i < n; ++i) {
        float v = to_f32(xr[i]);
        if (nan ? v != v : v == m) {
          found = i;
          break;
        }
      }
      index[row] = found;
    });
  }

 private:
  int64_t rows_, n_;
  CpuContext ctx_;
};

template <typename T>
std::unique_ptr<CpuKernel> unary_for(Act act, int64_t n, const CpuContext& ctx) {
  switch (act) {
    case Act::silu: return std::make_unique<UnaryKernel<T, Act::silu>>(n, ctx);
    case Act::gelu_erf: return std::make_unique<UnaryKernel<T, Act::gelu_erf>>(n, ctx);
    case Act::gelu_tanh: return std::make_unique<UnaryKernel<T, Act::gelu_tanh>>(n, ctx);
  }
  return nullptr;
}

template <typename T>
std::unique_ptr<CpuKernel> binary_for(Bin op, int64_t n, int64_t nb, const CpuContext& ctx) {
  switch (op) {
    case Bin::add: return std::make_unique<BinaryKernel<T, Bin::add>>(n, nb, ctx);
    case Bin::mul: return std::make_unique<BinaryKernel<T, Bin::mul>>(n, nb, ctx);
    case Bin::silu_mul: return std::make_unique<BinaryKernel<T, Bin::silu_mul>>(n, nb, ctx);
    case Bin::gelu_erf_mul: return std::make_unique<BinaryKernel<T, Bin::gelu_erf_mul>>(n, nb, ctx);
    case Bin::gelu_tanh_mul:
      return std::make_unique<BinaryKernel<T, Bin::gelu_tanh_mul>>(n, nb, ctx);
  }
  return nullptr;
}

}  // namespace

std::unique_ptr<CpuKernel> make_unary(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, op.op == SY_OP_SILU ? "silu" : "gelu");
  int64_t n = op.inputs[0].elements();
  if (op.inputs[0].dtype == SY_DTYPE_BF16) return unary_for<bf16_bits>(activation(op), n, ctx);
  return unary_for<float>(activation(op), n, ctx);
}

std::unique_ptr<CpuKernel> make_softcap(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "softcap");
  return make_for_dtype<SoftcapKernel>(op.inputs[0].dtype, op.inputs[0].elements(),
                                       op.float_attr(SY_ATTR_SOFTCAP, 0.0), ctx);
}

std::unique_ptr<CpuKernel> make_binary(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  const char* name = sy_op_kind_name(op.op);
  sy::edge::enforce_contract(op, name ? name : "binary");
  Bin kind = Bin::add;
  switch (op.op) {
    case SY_OP_ADD: kind = Bin::add; break;
    case SY_OP_MUL: kind = Bin::mul; break;
    case SY_OP_SILU_MUL: kind = Bin::silu_mul; break;
    case SY_OP_GELU_MUL:
      kind = activation(op) == Act::gelu_tanh ? Bin::gelu_tanh_mul : Bin::gelu_erf_mul;
      break;
    default:
      throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                  "the binary kernel does not serve this operator");
  }
  int64_t n = op.inputs[0].elements(), nb = op.inputs[1].elements();
  if (op.inputs[0].dtype == SY_DTYPE_BF16) return binary_for<bf16_bits>(kind, n, nb, ctx);
  return binary_for<float>(kind, n, nb, ctx);
}

std::unique_ptr<CpuKernel> make_copy(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "copy");
  sy_dtype from = op.inputs[0].dtype, to = op.outputs[0].dtype;
  int64_t n = op.inputs[0].elements();
  if (from == SY_DTYPE_F32 && to == SY_DTYPE_BF16)
    return std::make_unique<ConvertKernel<float, bf16_bits>>(n, ctx);
  if (from == SY_DTYPE_BF16 && to == SY_DTYPE_F32)
    return std::make_unique<ConvertKernel<bf16_bits, float>>(n, ctx);
  return std::make_unique<CopyBytesKernel>(n * static_cast<int64_t>(sy_dtype_size(from)), ctx);
}

std::unique_ptr<CpuKernel> make_softmax(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "softmax");
  const auto& shape = op.inputs[0].shape;
  int64_t n = shape.back();
  return make_for_dtype<SoftmaxKernel>(op.inputs[0].dtype, op.inputs[0].elements() / n, n, ctx);
}

std::unique_ptr<CpuKernel> make_argmax(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "argmax");
  const auto& shape = op.inputs[0].shape;
  int64_t n = shape.back();
  return make_for_dtype<ArgmaxKernel>(op.inputs[0].dtype, op.inputs[0].elements() / n, n, ctx);
}

}  // namespace sy::cpu
