// A GGUF file image built field by field, for tests: valid files of any version, alignment and
// tensor types, and deliberately broken ones (every field is written exactly as given).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace sy::test {

class GgufBuilder {
 public:
  std::string bytes;

  GgufBuilder& raw(const void* p, size_t n) {
    bytes.append(static_cast<const char*>(p), n);
    return *this;
  }
  template <typename T>
  GgufBuilder& put(T v) {
    return raw(&v, sizeof v);
  }
  GgufBuilder& u32(uint32_t v) { return put(v); }
  GgufBuilder& u64(uint64_t v) { return put(v); }
  GgufBuilder& str(const std::string& s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  // "GGUF", version, tensor count, metadata count.
  GgufBuilder& header(uint32_t version, uint64_t tensors, uint64_t kvs) {
    raw("GGUF", 4);
    return u32(version).u64(tensors).u64(kvs);
  }
  // A metadata entry: key, value type, then the value's bytes appended by the caller.
  GgufBuilder& key(const std::string& k, uint32_t type) { return str(k).u32(type); }
  GgufBuilder& kv_u32(const std::string& k, uint32_t v) { return key(k, 4).u32(v); }
  GgufBuilder& kv_string(const std::string& k, const std::string& v) { return key(k, 8).str(v); }
  GgufBuilder& tensor_info(const std::string& name, const std::vector<uint64_t>& dims,
                           uint32_t type, uint64_t offset) {
    str(name).u32(uint32_t(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  GgufBuilder& pad_to(size_t alignment, char fill = 0) {
    while (bytes.size() % alignment != 0) bytes.push_back(fill);
    return *this;
  }
  GgufBuilder& fill(size_t n, char c) {
    bytes.append(n, c);
    return *this;
  }
};

}  // namespace sy::test
