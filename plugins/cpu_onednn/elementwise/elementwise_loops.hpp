// The loops of elementwise_tier.hpp, written once; elementwise_portable.cpp,
// elementwise_avx2.cpp and elementwise_avx512.cpp each compile them for their instruction set
// and export the table. Internal linkage throughout (scalar_math.hpp says why).
//
// `omp simd` marks the loops whose output may be their input: each element is read and then
// written in its own iteration only, so vectors are safe, and without the pragma the compiler
// falls back to its scalar loop whenever the pointers overlap (a residual add in place).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "elementwise/elementwise_tier.hpp"
#include "tier/scalar_math.hpp"

namespace sy::cpu {
namespace {

template <Act A>
inline float activate(float x) {
  if constexpr (A == Act::silu) return silu_f32(x);
  if constexpr (A == Act::gelu_erf) return gelu_erf_f32(x);
  if constexpr (A == Act::gelu_tanh) return gelu_tanh_f32(x);
}

template <Bin B>
inline float combine(float a, float b) {
  if constexpr (B == Bin::add) return a + b;
  if constexpr (B == Bin::mul) return a * b;
  if constexpr (B == Bin::silu_mul) return silu_f32(a) * b;
  if constexpr (B == Bin::gelu_erf_mul) return gelu_erf_f32(a) * b;
  if constexpr (B == Bin::gelu_tanh_mul) return gelu_tanh_f32(a) * b;
}

template <typename T, Act A>
void unary_loop(const void* x_, void* y_, int64_t begin, int64_t end) {
  const T* x = static_cast<const T*>(x_);
  T* y = static_cast<T*>(y_);
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) y[i] = from_f32<T>(activate<A>(to_f32(x[i])));
}

template <typename T, Bin B>
void binary_loop(const void* a_, const void* b_, void* c_, int64_t begin, int64_t end) {
  const T* a = static_cast<const T*>(a_);
  const T* b = static_cast<const T*>(b_);
  T* c = static_cast<T*>(c_);
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) c[i] = from_f32<T>(combine<B>(to_f32(a[i]), to_f32(b[i])));
}

template <typename T, Bin B>
void binary_rows_loop(const void* a_, const void* b_, void* c_, int64_t n, int64_t r0, int64_t r1) {
  const T* b = static_cast<const T*>(b_);
  for (int64_t r = r0; r < r1; ++r) {
    const T* a = static_cast<const T*>(a_) + r * n;
    T* c = static_cast<T*>(c_) + r * n;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) c[i] = from_f32<T>(combine<B>(to_f32(a[i]), to_f32(b[i])));
  }
}

template <typename From, typename To>
void convert_loop(const void* x_, void* y_, int64_t begin, int64_t end) {
  const From* x = static_cast<const From*>(x_);
  To* y = static_cast<To*>(y_);
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) y[i] = from_f32<To>(to_f32(x[i]));
}

template <typename T>
void rms_norm_rows(const void* x_, const void* w_, void* y_, int64_t h, double eps, float offset,
                   int64_t r0, int64_t r1) {
  const T* w = static_cast<const T*>(w_);
  for (int64_t r = r0; r < r1; ++r) {
    const T* x = static_cast<const T*>(x_) + r * h;
    T* y = static_cast<T*>(y_) + r * h;
    double ss = 0.0;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < h; ++i) {
      double v = to_f32(x[i]);
      ss += v * v;
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(h) + eps));
#pragma omp simd
    for (int64_t i = 0; i < h; ++i)
      y[i] = from_f32<T>(to_f32(x[i]) * inv * (to_f32(w[i]) + offset));
  }
}

template <typename T>
void layer_norm_rows(const void* x_, const void* w_, const void* b_, void* y_, int64_t h,
                     double eps, int64_t r0, int64_t r1) {
  const T* w = static_cast<const T*>(w_);
  const T* b = static_cast<const T*>(b_);
  for (int64_t r = r0; r < r1; ++r) {
    const T* x = static_cast<const T*>(x_) + r * h;
    T* y = static_cast<T*>(y_) + r * h;
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < h; ++i) sum += to_f32(x[i]);
    const double mean = sum / static_cast<double>(h);
    double var = 0.0;
#pragma omp simd reduction(+ : var)
    for (int64_t i = 0; i < h; ++i) {
      double d = to_f32(x[i]) - mean;
      var += d * d;
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(h) + eps));
    const float m = static_cast<float>(mean);
#pragma omp simd
    for (int64_t i = 0; i < h; ++i)
      y[i] = from_f32<T>((to_f32(x[i]) - m) * inv * to_f32(w[i]) + to_f32(b[i]));
  }
}

template <typename T>
void softmax_rows(const void* x_, void* y_, int64_t n, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* x = static_cast<const T*>(x_) + r * n;
    T* y = static_cast<T*>(y_) + r * n;
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t i = 0; i < n; ++i) m = std::max(m, to_f32(x[i]));
    double sum = 0.0;  // double: a long row's sum keeps f32 precision
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) sum += exp_f32(to_f32(x[i]) - m);
    const float inv = static_cast<float>(1.0 / sum);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = from_f32<T>(exp_f32(to_f32(x[i]) - m) * inv);
  }
}

template <typename T>
void rope_head_loop(const void* x_, void* y_, int64_t d, int64_t rotary, bool interleaved,
                    const float* cs, const float* sn) {
  const T* x = static_cast<const T*>(x_);
  T* y = static_cast<T*>(y_);
  const int64_t half = rotary / 2;
  if (interleaved) {
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      const float x0 = to_f32(x[2 * i]), x1 = to_f32(x[2 * i + 1]);
      y[2 * i] = from_f32<T>(x0 * cs[i] - x1 * sn[i]);
      y[2 * i + 1] = from_f32<T>(x1 * cs[i] + x0 * sn[i]);
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      const float x0 = to_f32(x[i]), x1 = to_f32(x[i + half]);
      y[i] = from_f32<T>(x0 * cs[i] - x1 * sn[i]);
      y[i + half] = from_f32<T>(x1 * cs[i] + x0 * sn[i]);
    }
  }
  if (y != x)
    for (int64_t i = rotary; i < d; ++i) y[i] = x[i];
}

template <typename T>
void fill_elementwise(ElementwiseTier& t) {
  const int d = std::is_same_v<T, float> ? 0 : 1;
  t.unary[int(Act::silu)][d] = unary_loop<T, Act::silu>;
  t.unary[int(Act::gelu_erf)][d] = unary_loop<T, Act::gelu_erf>;
  t.unary[int(Act::gelu_tanh)][d] = unary_loop<T, Act::gelu_tanh>;
  t.binary[int(Bin::add)][d] = binary_loop<T, Bin::add>;
  t.binary[int(Bin::mul)][d] = binary_loop<T, Bin::mul>;
  t.binary[int(Bin::silu_mul)][d] = binary_loop<T, Bin::silu_mul>;
  t.binary[int(Bin::gelu_erf_mul)][d] = binary_loop<T, Bin::gelu_erf_mul>;
  t.binary[int(Bin::gelu_tanh_mul)][d] = binary_loop<T, Bin::gelu_tanh_mul>;
  t.binary_rows[int(Bin::add)][d] = binary_rows_loop<T, Bin::add>;
  t.binary_rows[int(Bin::mul)][d] = binary_rows_loop<T, Bin::mul>;
  t.binary_rows[int(Bin::silu_mul)][d] = binary_rows_loop<T, Bin::silu_mul>;
  t.binary_rows[int(Bin::gelu_erf_mul)][d] = binary_rows_loop<T, Bin::gelu_erf_mul>;
  t.binary_rows[int(Bin::gelu_tanh_mul)][d] = binary_rows_loop<T, Bin::gelu_tanh_mul>;
  t.rms_norm[d] = rms_norm_rows<T>;
  t.layer_norm[d] = layer_norm_rows<T>;
  t.softmax[d] = softmax_rows<T>;
  t.rope_head[d] = rope_head_loop<T>;
}

ElementwiseTier make_elementwise_tier(const char* name) {
  ElementwiseTier t{};
  t.name = name;
  fill_elementwise<float>(t);
  fill_elementwise<bf16_bits>(t);
  t.convert[0] = convert_loop<float, bf16_bits>;
  t.convert[1] = convert_loop<bf16_bits, float>;
  return t;
}

}  // namespace
}  // namespace sy::cpu
