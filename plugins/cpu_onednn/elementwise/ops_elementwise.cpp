// Elementwise and last-axis ops: silu, gelu (erf | tanh), softcap, add, mul (b broadcast over
// a's leading dimensions), silu_mul, gelu_mul, copy (f32 <-> bf16 allowed), softmax, argmax.
// Each run reads its extents from the tensors (varlen: the step's, not the prepared bounds).
// f32 math throughout, bf16 rounded to nearest even on store. An output may be its input
// (same data pointer): every loop reads element i before writing element i.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "elementwise/elementwise_tier.hpp"
#include "kernel_factories.hpp"
#include "ops_common.hpp"

namespace sy::cpu {
namespace {

Act activation(const sy::edge::OpCopy& op) {
  if (op.op == SY_OP_SILU || op.op == SY_OP_SILU_MUL) return Act::silu;
  return op.string_attr(SY_ATTR_GELU_APPROX, "none") == "tanh" ? Act::gelu_tanh : Act::gelu_erf;
}

// A flat loop of the active tier (elementwise_tier.hpp) over n elements, in chunks across the
// threads when n is large.
class UnaryKernel final : public CpuKernel {
 public:
  UnaryKernel(FlatLoop loop, const CpuContext& ctx) : loop_(loop), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const void* x = data_of<const void>(in[0]);
    void* y = data_of<void>(out[0]);
    parallel_chunks(ctx_, elements_of(in[0]),
                    [=, loop = loop_](int64_t b, int64_t e) { loop(x, y, b, e); });
  }

 private:
  FlatLoop loop_;
  CpuContext ctx_;
};

// y = c · tanh(x / c), in double: Gemma's final logit softcap, applied once per logit.
template <typename T>
class SoftcapKernel final : public CpuKernel {
 public:
  SoftcapKernel(double cap, const CpuContext& ctx) : cap_(cap), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const T* x = data_of<const T>(in[0]);
    T* y = data_of<T>(out[0]);
    const double cap = cap_;
    parallel_chunks(ctx_, elements_of(in[0]), [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        y[i] = from_f32<T>(static_cast<float>(cap * std::tanh(double(to_f32(x[i])) / cap)));
    });
  }

 private:
  double cap_;
  CpuContext ctx_;
};

// c = a op b; b has a's last `nb` elements' shape and repeats over a's leading dims.
class BinaryKernel final : public CpuKernel {
 public:
  BinaryKernel(const ElementwiseTier& tier, Bin op, bool bf16, const CpuContext& ctx)
      : flat_(tier.binary[int(op)][bf16]), rows_(tier.binary_rows[int(op)][bf16]), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const void* a = data_of<const void>(in[0]);
    const void* b = data_of<const void>(in[1]);
    void* c = data_of<void>(out[0]);
    const int64_t n = elements_of(in[0]), nb = elements_of(in[1]);
    if (nb == n) {
      parallel_chunks(ctx_, n, [=, f = flat_](int64_t s, int64_t e) { f(a, b, c, s, e); });
      return;
    }
    parallel_for(ctx_, n / nb, nb, [=, f = rows_](int64_t row) { f(a, b, c, nb, row, row + 1); });
  }

 private:
  BinaryLoop flat_;
  BinaryRowsLoop rows_;
  CpuContext ctx_;
};

class CopyBytesKernel final : public CpuKernel {
 public:
  CopyBytesKernel(sy_dtype dtype, const CpuContext& ctx) : dtype_(dtype), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const char* x = data_of<const char>(in[0]);
    char* y = data_of<char>(out[0]);
    if (x == y) return;
    const int64_t bytes = sy_tensor_bytes(dtype_, in[0]->ndim, in[0]->shape);
    parallel_chunks(ctx_, bytes, [=](int64_t b, int64_t e) { std::memmove(y + b, x + b, e - b); });
  }

 private:
  sy_dtype dtype_;
  CpuContext ctx_;
};

// Over the last axis: y = e^{x - max} / Σ e^{x - max}.
class SoftmaxKernel final : public CpuKernel {
 public:
  SoftmaxKernel(const ElementwiseTier& tier, bool bf16, int64_t n, const CpuContext& ctx)
      : loop_(tier.softmax[bf16]), n_(n), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const void* x = data_of<const void>(in[0]);
    void* y = data_of<void>(out[0]);
    const int64_t n = n_;
    parallel_for(ctx_, elements_of(in[0]) / n, 3 * n,
                 [=, f = loop_](int64_t row) { f(x, y, n, row, row + 1); });
  }

 private:
  SoftmaxLoop loop_;
  int64_t n_;
  CpuContext ctx_;
};

// Index of the first maximum of each row; a NaN counts as larger than any number, so the
// first NaN wins (as numpy and PyTorch do).
template <typename T>
class ArgmaxKernel final : public CpuKernel {
 public:
  ArgmaxKernel(int64_t n, const CpuContext& ctx) : n_(n), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const T* x = data_of<const T>(in[0]);
    int64_t* index = data_of<int64_t>(out[0]);
    const int64_t n = n_;
    parallel_for(ctx_, elements_of(in[0]) / n, n, [=](int64_t row) {
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
  int64_t n_;
  CpuContext ctx_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_unary(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, op.op == SY_OP_SILU ? "silu" : "gelu");
  const bool bf16 = op.inputs[0].dtype == SY_DTYPE_BF16;
  return std::make_unique<UnaryKernel>(
      elementwise_tier(active_tier()).unary[int(activation(op))][bf16], ctx);
}

std::unique_ptr<CpuKernel> make_softcap(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "softcap");
  return make_for_dtype<SoftcapKernel>(op.inputs[0].dtype, op.float_attr(SY_ATTR_SOFTCAP, 0.0),
                                       ctx);
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
  return std::make_unique<BinaryKernel>(elementwise_tier(active_tier()), kind,
                                        op.inputs[0].dtype == SY_DTYPE_BF16, ctx);
}

std::unique_ptr<CpuKernel> make_copy(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "copy");
  sy_dtype from = op.inputs[0].dtype, to = op.outputs[0].dtype;
  const ElementwiseTier& tier = elementwise_tier(active_tier());
  if (from == SY_DTYPE_F32 && to == SY_DTYPE_BF16)
    return std::make_unique<UnaryKernel>(tier.convert[0], ctx);
  if (from == SY_DTYPE_BF16 && to == SY_DTYPE_F32)
    return std::make_unique<UnaryKernel>(tier.convert[1], ctx);
  return std::make_unique<CopyBytesKernel>(from, ctx);
}

std::unique_ptr<CpuKernel> make_softmax(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "softmax");
  const auto& shape = op.inputs[0].shape;
  int64_t n = shape.back();
  return std::make_unique<SoftmaxKernel>(elementwise_tier(active_tier()),
                                         op.inputs[0].dtype == SY_DTYPE_BF16, n, ctx);
}

std::unique_ptr<CpuKernel> make_argmax(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "argmax");
  const auto& shape = op.inputs[0].shape;
  int64_t n = shape.back();
  return make_for_dtype<ArgmaxKernel>(op.inputs[0].dtype, n, ctx);
}

}  // namespace sy::cpu
