#include "reference_tensor.hpp"

#include "switchyard/plugin_api.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace sy::ref {
namespace {

double half(const uint8_t* p) {
  _Float16 h;
  std::memcpy(&h, p, 2);
  return double(h);
}

// Element i (0…255) of a q4_k / q5_k block's 6-bit scale (which = 0) or min (which = 1) of
// sub-block j, as ggml's get_scale_min_k4.
int scale_or_min_k4(const uint8_t* scales, int j, int which) {
  if (j < 4) return scales[j + 4 * which] & 63;
  const uint8_t lowbits = which == 0 ? scales[j + 4] & 0x0f : scales[j + 4] >> 4;
  return lowbits | ((scales[j - 4 + 4 * which] >> 6) << 4);
}

// The value of element i of one block.
double block_value(sy_dtype dt, const uint8_t* b, int i) {
  switch (dt) {
    case SY_DTYPE_Q8_0: return half(b) * double(int8_t(b[2 + i]));
    case SY_DTYPE_Q4_0:
    case SY_DTYPE_Q4_1: {
      const uint8_t* qs = b + (dt == SY_DTYPE_Q4_0 ? 2 : 4);
      const int q = i < 16 ? qs[i] & 0x0f : qs[i - 16] >> 4;
      return dt == SY_DTYPE_Q4_0 ? half(b) * double(q - 8) : half(b) * double(q) + half(b + 2);
    }
    case SY_DTYPE_Q5_0:
    case SY_DTYPE_Q5_1: {
      // The fifth bit of element i is bit i of the little-endian word qh.
      const int at = dt == SY_DTYPE_Q5_0 ? 2 : 4;
      const uint32_t qh = uint32_t(b[at]) | uint32_t(b[at + 1]) << 8 | uint32_t(b[at + 2]) << 16 |
                          uint32_t(b[at + 3]) << 24;
      const uint8_t* qs = b + at + 4;
      const int q = (i < 16 ? qs[i] & 0x0f : qs[i - 16] >> 4) | int((qh >> i) & 1) << 4;
      return dt == SY_DTYPE_Q5_0 ? half(b) * double(q - 16) : half(b) * double(q) + half(b + 2);
    }
    case SY_DTYPE_IQ4_NL: {
      const uint8_t* qs = b + 2;
      return half(b) * double(sy_iq4nl_value(i < 16 ? qs[i] & 0x0f : qs[i - 16] >> 4));
    }
    case SY_DTYPE_Q2_K:
    case SY_DTYPE_Q3_K: {
      // Half h = i / 128; within it, shift pair p = (i % 128) / 32 takes bits 2p of byte
      // 32h + (i % 32) of q; the 16-element sub-block is i / 16.
      const int h = i / 128, p = (i % 128) / 32, l = i % 32, sub = i / 16;
      const uint8_t* q = b + (dt == SY_DTYPE_Q2_K ? 16 : 32) + 32 * h;
      const int two = (q[l] >> (2 * p)) & 3;
      if (dt == SY_DTYPE_Q2_K) {
        const double d = half(b + 80) * double(b[sub] & 0x0f);
        const double m = half(b + 82) * double(b[sub] >> 4);
        return d * double(two) - m;
      }
      // q3_k's 16 scales of 6 bits: low 4 from scales[0..7] (nibble by sub / 8), high 2 from
      // scales[8..11] (bits 2·(sub / 4) of byte 8 + sub % 4).
      const uint8_t* s = b + 96;
      const int low = (s[sub % 8] >> (4 * (sub / 8))) & 0x0f;
      const int high = (s[8 + sub % 4] >> (2 * (sub / 4))) & 3;
      const int high_bit = (b[l] >> (4 * h + p)) & 1;  // hmask bit 4h + p of byte l
      return half(b + 108) * double((low | high << 4) - 32) * double(two - (high_bit ? 0 : 4));
    }
    case SY_DTYPE_IQ4_XS: {
      // Sub-block j = i / 32: iq4_nl's nibbles of qs[16j …] under d·(ls − 32).
      const int j = i / 32, l = i % 32;
      const unsigned scales_h = unsigned(b[2]) | unsigned(b[3]) << 8;
      const int ls = ((b[4 + j / 2] >> 4 * (j % 2)) & 0x0f) | int((scales_h >> 2 * j) & 3) << 4;
      const uint8_t* qs = b + 8 + 16 * j;
      const float dl = float(half(b) * double(ls - 32));  // GGUF rounds the scale to f32 first
      return double(dl) * double(sy_iq4nl_value(l < 16 ? qs[l] & 0x0f : qs[l - 16] >> 4));
    }
    case SY_DTYPE_Q4_K:
    case SY_DTYPE_Q5_K: {
      // 8 sub-blocks of 32; pair p = i / 64 holds sub-blocks 2p (low nibbles) and 2p+1 (high).
      const int sub = i / 32, pair = i / 64, l = i % 32;
      const uint8_t* ql = b + (dt == SY_DTYPE_Q4_K ? 16 : 48) + 32 * pair;
      int q = sub % 2 == 0 ? ql[l] & 0x0f : ql[l] >> 4;
      if (dt == SY_DTYPE_Q5_K && (b[16 + l] >> sub) & 1) q += 16;
      const double d = half(b) * scale_or_min_k4(b + 4, sub, 0);
      const double m = half(b + 2) * scale_or_min_k4(b + 4, sub, 1);
      return d * double(q) - m;
    }
    case SY_DTYPE_Q6_K: {
      // Halves of 128: element n·128 + 32·k + l takes ql's low (k even) or high (k odd)
      // nibble of ql[64n + l (+32 for k = 1, 3)] and qh bits 2k of qh[32n + l].
      const int n = i / 128, r = i % 128, k = r / 32, l = r % 32;
      const uint8_t lq = b[64 * n + l + (k % 2 == 1 ? 32 : 0)];
      const int low = k < 2 ? lq & 0x0f : lq >> 4;
      const int q = (low | (((b[128 + 32 * n + l] >> (2 * k)) & 3) << 4)) - 32;
      const int8_t sc = int8_t(b[192 + 8 * n + l / 16 + 2 * k]);
      return half(b + 208) * double(sc) * double(q);
    }
    case SY_DTYPE_MXFP4: {
      // E8M0 scale 2^(e − 127); 0xFF is NaN (OCP MX), which no host hands a kernel.
      const int q = i < 16 ? b[1 + i] & 0x0f : b[1 + i - 16] >> 4;
      if (b[0] == 0xFF) return std::nan("");
      return std::ldexp(double(sy_e2m1_value(unsigned(q))), int(b[0]) - 127);
    }
    default: throw std::logic_error("not a block-quantized dtype");
  }
}

}  // namespace

std::vector<double> read(const void* data, sy_dtype dt, int64_t count) {
  const auto* p = static_cast<const uint8_t*>(data);
  std::vector<double> v(static_cast<size_t>(count));
  if (sy_dtype_is_blocked(dt)) {
    const int64_t be = sy_dtype_block_elements(dt), bb = sy_dtype_block_bytes(dt);
    for (int64_t i = 0; i < count; ++i)
      v[size_t(i)] = block_value(dt, p + (i / be) * bb, int(i % be));
    return v;
  }
  for (int64_t i = 0; i < count; ++i) {
    switch (dt) {
      case SY_DTYPE_F32: {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        v[size_t(i)] = f;
        break;
      }
      case SY_DTYPE_F16: v[size_t(i)] = half(p + 2 * i); break;
      case SY_DTYPE_BF16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        v[size_t(i)] = sy_bf16_to_f32(h);
        break;
      }
      case SY_DTYPE_I32: {
        int32_t x;
        std::memcpy(&x, p + 4 * i, 4);
        v[size_t(i)] = x;
        break;
      }
      case SY_DTYPE_I64: {
        int64_t x;
        std::memcpy(&x, p + 8 * i, 8);
        v[size_t(i)] = double(x);
        break;
      }
      default: throw std::logic_error("reference: no reader for this dtype");
    }
  }
  return v;
}

void write_one(void* data, sy_dtype dt, int64_t i, double value) {
  auto* p = static_cast<uint8_t*>(data);
  switch (dt) {
    case SY_DTYPE_F32: {
      const float f = float(value);
      std::memcpy(p + 4 * i, &f, 4);
      return;
    }
    case SY_DTYPE_F16: {
      const _Float16 h = _Float16(value);
      std::memcpy(p + 2 * i, &h, 2);
      return;
    }
    case SY_DTYPE_BF16: {
      const uint16_t h = sy_f32_to_bf16(float(value));
      std::memcpy(p + 2 * i, &h, 2);
      return;
    }
    case SY_DTYPE_I32: {
      const int32_t x = int32_t(value);
      std::memcpy(p + 4 * i, &x, 4);
      return;
    }
    case SY_DTYPE_I64: {
      const int64_t x = int64_t(value);
      std::memcpy(p + 8 * i, &x, 8);
      return;
    }
    default: throw std::logic_error("reference: no writer for this dtype");
  }
}

void write(void* data, sy_dtype dt, const std::vector<double>& values) {
  for (size_t i = 0; i < values.size(); ++i) write_one(data, dt, int64_t(i), values[i]);
}

}  // namespace sy::ref
