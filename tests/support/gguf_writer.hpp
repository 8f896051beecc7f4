// A small GGUF writer for tests: metadata and tensors in, a valid version-3 file image out (on top
// of GgufBuilder's field encoding), plus GGUF's Q8_0 and Q4_1 quantizers and their dequantizers,
// written from the format's block definitions (llama.cpp ggml-quants.c, gguf-py quants.py).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "support/gguf_builder.hpp"

namespace sy::test {

// GGML type numbers of the file format.
enum GgmlTypeId : uint32_t {
  kGgmlF32 = 0,
  kGgmlF16 = 1,
  kGgmlQ4_1 = 3,
  kGgmlQ5_0 = 6,
  kGgmlQ8_0 = 8,
  kGgmlIq2Xxs = 16
};

class GgufWriter {
 public:
  GgufWriter& u32(const std::string& k, uint32_t v) { return add(k, 4, enc().u32(v)); }
  GgufWriter& f32(const std::string& k, float v) { return add(k, 6, enc().put(v)); }
  GgufWriter& boolean(const std::string& k, bool v) { return add(k, 7, enc().put(uint8_t(v))); }
  GgufWriter& string(const std::string& k, const std::string& v) { return add(k, 8, enc().str(v)); }
  GgufWriter& strings(const std::string& k, const std::vector<std::string>& v) {
    GgufBuilder b = enc().u32(8).u64(v.size());
    for (const auto& s : v) b.str(s);
    return add(k, 9, b);
  }
  GgufWriter& f32s(const std::string& k, const std::vector<float>& v) {
    GgufBuilder b = enc().u32(6).u64(v.size());
    for (float x : v) b.put(x);
    return add(k, 9, b);
  }
  GgufWriter& i32s(const std::string& k, const std::vector<int32_t>& v) {
    GgufBuilder b = enc().u32(5).u64(v.size());
    for (int32_t x : v) b.put(x);
    return add(k, 9, b);
  }
  // Removes a key written earlier (to test files that lack it).
  GgufWriter& erase(const std::string& k) {
    kvs_.erase(
        std::remove_if(kvs_.begin(), kvs_.end(), [&](const auto& e) { return e.first == k; }),
        kvs_.end());
    return *this;
  }
  // `dims` in GGUF order (dims[0] is the row length); `data` the tensor's bytes. A tensor of
  // the same name written earlier is replaced in place.
  GgufWriter& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                     std::string data) {
    Tensor t{name, std::move(dims), type, std::move(data)};
    for (Tensor& old : tensors_)
      if (old.name == name) return old = std::move(t), *this;
    tensors_.push_back(std::move(t));
    return *this;
  }

  std::string bytes(uint32_t alignment = 32) const {
    GgufBuilder b;
    b.header(3, tensors_.size(), kvs_.size());
    for (const auto& [key, value] : kvs_) b.str(key).raw(value.data(), value.size());
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
      b.tensor_info(t.name, t.dims, t.type, offset);
      offset = (offset + t.data.size() + alignment - 1) / alignment * alignment;
    }
    b.pad_to(alignment);
    for (const auto& t : tensors_) b.raw(t.data.data(), t.data.size()).pad_to(alignment);
    return b.bytes;
  }

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::string data;
  };
  static GgufBuilder enc() { return {}; }
  GgufWriter& add(const std::string& k, uint32_t type, const GgufBuilder& value) {
    erase(k);
    kvs_.emplace_back(k, GgufBuilder().u32(type).bytes + value.bytes);
    return *this;
  }
  std::vector<std::pair<std::string, std::string>> kvs_;  // key -> type + value bytes
  std::vector<Tensor> tensors_;
};

inline std::string f32_bytes(const std::vector<float>& x) {
  return std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4);
}

// IEEE half through the compiler's _Float16 (rounded to nearest even).
inline uint16_t to_f16(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
inline float from_f16(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return static_cast<float>(h);
}

// Q8_0: per 32 values, d = max|x| / 127 (stored f16) and qs = round(x / d) as int8.
inline std::string quantize_q8_0(const std::vector<float>& x) {
  std::string out;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b + i]));
    const float d = amax / 127.f, id = d != 0 ? 1.f / d : 0.f;
    const uint16_t dh = to_f16(d);
    out.append(reinterpret_cast<const char*>(&dh), 2);
    for (size_t i = 0; i < 32; ++i) out.push_back(char(int8_t(std::lround(x[b + i] * id))));
  }
  return out;
}
inline std::vector<double> dequantize_q8_0(const std::string& q) {
  std::vector<double> x;
  for (size_t b = 0; b < q.size(); b += 34) {
    uint16_t dh;
    std::memcpy(&dh, q.data() + b, 2);
    for (size_t i = 0; i < 32; ++i) x.push_back(double(from_f16(dh)) * int8_t(q[b + 2 + i]));
  }
  return x;
}

// Q4_1: per 32 values, d = (max - min) / 15 and m = min (both f16), 4-bit q = round((x - m) / d)
// with element j in the low nibble of byte j and element j + 16 in its high nibble.
inline std::string quantize_q4_1(const std::vector<float>& x) {
  std::string out;
  for (size_t b = 0; b < x.size(); b += 32) {
    const auto [lo, hi] = std::minmax_element(x.begin() + long(b), x.begin() + long(b) + 32);
    const float d = (*hi - *lo) / 15.f, id = d != 0 ? 1.f / d : 0.f;
    const uint16_t dh = to_f16(d), mh = to_f16(*lo);
    out.append(reinterpret_cast<const char*>(&dh), 2);
    out.append(reinterpret_cast<const char*>(&mh), 2);
    auto q = [&](size_t i) {
      return uint8_t(std::clamp<long>(std::lround((x[b + i] - *lo) * id), 0, 15));
    };
    for (size_t j = 0; j < 16; ++j) out.push_back(char(q(j) | (q(j + 16) << 4)));
  }
  return out;
}
inline std::vector<double> dequantize_q4_1(const std::string& q) {
  std::vector<double> x(q.size() / 20 * 32);
  for (size_t b = 0, o = 0; b < q.size(); b += 20, o += 32) {
    uint16_t dh, mh;
    std::memcpy(&dh, q.data() + b, 2);
    std::memcpy(&mh, q.data() + b + 2, 2);
    const double d = from_f16(dh), m = from_f16(mh);
    for (size_t j = 0; j < 16; ++j) {
      const uint8_t byte = uint8_t(q[b + 4 + j]);
      x[o + j] = d * (byte & 15) + m;
      x[o + j + 16] = d * (byte >> 4) + m;
    }
  }
  return x;
}

}  // namespace sy::test
