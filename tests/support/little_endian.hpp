// The little-endian bytes of an integer, as GGUF and safetensors store their sizes and counts:
// for tests that write a file's fields by hand (and break them).
#pragma once

#include <cstdint>
#include <string>

namespace sy::test {

inline std::string le_bytes(uint64_t v, int n) {
  std::string s(size_t(n), '\0');
  for (int i = 0; i < n; ++i) s[size_t(i)] = static_cast<char>(v >> (8 * i));
  return s;
}
inline std::string le32(uint32_t v) {
  return le_bytes(v, 4);
}
inline std::string le64(uint64_t v) {
  return le_bytes(v, 8);
}

}  // namespace sy::test
