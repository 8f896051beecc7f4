// A tensor in host memory for kernel tests: owned bytes, a DLTensor view, and conversion
// from and to double (bf16 rounded to nearest even, as kernels store it). A block-quantized
// tensor holds its blocks' bytes (bytes(); set() quantizes q8_0 and q4_1 with GGUF's quantizers,
// get() is for the plain dtypes).
#pragma once

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/capability/op.hpp"
#include "support/gguf_writer.hpp"

namespace sy::test {

// to_f16 / from_f16 (IEEE half) come from support/gguf_writer.hpp.

class HostTensor {
 public:
  HostTensor(sy_dtype dtype, std::vector<int64_t> shape)
      : dtype_(dtype),
        shape_(std::move(shape)),
        bytes_(size_t(
            std::max<int64_t>(0, sy_tensor_bytes(dtype, int32_t(shape_.size()), shape_.data())))) {
    t_.data = bytes_.data();
    t_.device = {kDLCPU, 0};
    t_.ndim = int(shape_.size());
    t_.dtype = sy_dtype_to_dl(dtype_);
    t_.shape = shape_.data();
  }
  HostTensor(const HostTensor&) = delete;
  HostTensor& operator=(const HostTensor&) = delete;

  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : shape_) n *= d;
    return n;
  }
  DLTensor* dl() { return &t_; }
  void* bytes() { return bytes_.data(); }
  size_t size_bytes() const { return bytes_.size(); }
  sy_dtype dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  TensorDesc desc() const { return {dtype_, shape_, SY_MEMORY_HOST}; }

  // Stores `values` in the tensor's dtype (q8_0 and q4_1 by GGUF's quantizers, in whole
  // blocks); returns what was actually stored, as double.
  std::vector<double> set(const std::vector<double>& values) {
    if (dtype_ == SY_DTYPE_Q8_0 || dtype_ == SY_DTYPE_Q4_1) {
      const std::vector<float> f(values.begin(), values.end());
      const std::string q = dtype_ == SY_DTYPE_Q8_0 ? quantize_q8_0(f) : quantize_q4_1(f);
      if (q.size() != bytes_.size()) throw std::runtime_error("HostTensor: not whole blocks");
      std::memcpy(bytes_.data(), q.data(), q.size());
      return dtype_ == SY_DTYPE_Q8_0 ? dequantize_q8_0(q) : dequantize_q4_1(q);
    }
    std::vector<double> stored(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      switch (dtype_) {
        case SY_DTYPE_F32: {
          float f = float(values[i]);
          std::memcpy(bytes_.data() + 4 * i, &f, 4);
          stored[i] = f;
          break;
        }
        case SY_DTYPE_BF16: {
          uint16_t h = sy_f32_to_bf16(float(values[i]));
          std::memcpy(bytes_.data() + 2 * i, &h, 2);
          stored[i] = sy_bf16_to_f32(h);
          break;
        }
        case SY_DTYPE_F16: {
          uint16_t h = to_f16(float(values[i]));
          std::memcpy(bytes_.data() + 2 * i, &h, 2);
          stored[i] = from_f16(h);
          break;
        }
        case SY_DTYPE_I64: {
          int64_t x = int64_t(values[i]);
          std::memcpy(bytes_.data() + 8 * i, &x, 8);
          stored[i] = double(x);
          break;
        }
        case SY_DTYPE_I32: {
          int32_t x = int32_t(values[i]);
          std::memcpy(bytes_.data() + 4 * i, &x, 4);
          stored[i] = double(x);
          break;
        }
        default: throw std::runtime_error("HostTensor: unsupported dtype");
      }
    }
    return stored;
  }

  std::vector<double> get() const {
    std::vector<double> out(static_cast<size_t>(elements()));
    for (size_t i = 0; i < out.size(); ++i) {
      if (dtype_ == SY_DTYPE_F32) {
        float f;
        std::memcpy(&f, bytes_.data() + 4 * i, 4);
        out[i] = f;
      } else if (dtype_ == SY_DTYPE_BF16) {
        uint16_t h;
        std::memcpy(&h, bytes_.data() + 2 * i, 2);
        out[i] = sy_bf16_to_f32(h);
      } else if (dtype_ == SY_DTYPE_F16) {
        uint16_t h;
        std::memcpy(&h, bytes_.data() + 2 * i, 2);
        out[i] = from_f16(h);
      } else if (dtype_ == SY_DTYPE_I32) {
        int32_t x;
        std::memcpy(&x, bytes_.data() + 4 * i, 4);
        out[i] = double(x);
      } else if (dtype_ == SY_DTYPE_I64) {
        int64_t x;
        std::memcpy(&x, bytes_.data() + 8 * i, 8);
        out[i] = double(x);
      } else {
        throw std::runtime_error("HostTensor: unsupported dtype");
      }
    }
    return out;
  }

 private:
  sy_dtype dtype_;
  std::vector<int64_t> shape_;
  std::vector<uint8_t> bytes_;
  DLTensor t_{};
};

inline std::vector<double> uniform(size_t n, std::mt19937& rng, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace sy::test
