// write_gguf: the inverse of GgufFile's reader, for tools (make-test-model --format gguf).
#include <cstring>
#include <set>
#include <stdexcept>

#include "core/weights/atomic_file.hpp"
#include "core/weights/gguf.hpp"

namespace sy {
namespace {

constexpr uint64_t kAlignment = 32;

[[noreturn]] void invalid(const std::string& path, const std::string& what) {
  throw std::invalid_argument("write_gguf " + path + ": " + what);
}

// Little-endian field encoding (x86-64 and every target of the build are little-endian).
struct Encoder {
  std::string bytes;
  template <class T>
  void put(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(const std::string& s) {
    put(uint64_t(s.size()));
    bytes += s;
  }
};

// One scalar of `type` from the field GgufValue keeps it in; false for a type that is no scalar.
bool put_scalar(Encoder& e, GgufType type, int64_t i, uint64_t u, double f, const std::string& s) {
  switch (type) {
    case GgufType::u8: e.put(uint8_t(u)); return true;
    case GgufType::i8: e.put(int8_t(i)); return true;
    case GgufType::u16: e.put(uint16_t(u)); return true;
    case GgufType::i16: e.put(int16_t(i)); return true;
    case GgufType::u32: e.put(uint32_t(u)); return true;
    case GgufType::i32: e.put(int32_t(i)); return true;
    case GgufType::f32: e.put(float(f)); return true;
    case GgufType::boolean: e.put(uint8_t(i != 0)); return true;
    case GgufType::string: e.str(s); return true;
    case GgufType::u64: e.put(u); return true;
    case GgufType::i64: e.put(i); return true;
    case GgufType::f64: e.put(f); return true;
    case GgufType::array: return false;
  }
  return false;
}

bool is_signed(GgufType t) {
  return t == GgufType::i8 || t == GgufType::i16 || t == GgufType::i32 || t == GgufType::i64 ||
         t == GgufType::boolean;
}
bool is_float(GgufType t) {
  return t == GgufType::f32 || t == GgufType::f64;
}

void put_value(Encoder& e, const std::string& path, const std::string& key, const GgufValue& v) {
  e.put(uint32_t(v.type));
  if (!v.is_array()) {
    if (!put_scalar(e, v.type, v.i, v.u, v.f, v.s))
      invalid(path, "metadata '" + key + "' has an unknown value type");
    return;
  }
  const GgufType t = v.element_type;
  if (t == GgufType::array || uint32_t(t) > uint32_t(GgufType::f64))
    invalid(path, "metadata '" + key + "' is an array of arrays or of an unknown type");
  const size_t n = t == GgufType::string ? v.strings.size()
                   : is_float(t)         ? v.floats.size()
                   : is_signed(t)        ? v.ints.size()
                                         : v.uints.size();
  e.put(uint32_t(t));
  e.put(uint64_t(n));
  for (size_t k = 0; k < n; ++k) {
    const bool ok = t == GgufType::string ? put_scalar(e, t, 0, 0, 0, v.strings[k])
                    : is_float(t)         ? put_scalar(e, t, 0, 0, v.floats[k], {})
                    : is_signed(t)        ? put_scalar(e, t, v.ints[k], 0, 0, {})
                                          : put_scalar(e, t, 0, v.uints[k], 0, {});
    if (!ok) invalid(path, "metadata '" + key + "' is an array of arrays or of an unknown type");
  }
}

// The tensor's byte size by its type and dims; invalid_argument for what the reader refuses.
uint64_t checked_bytes(const std::string& path, const GgufTensorData& t) {
  const std::string name = "tensor '" + t.name + "'";
  const GgmlType* type = ggml_type(t.type);
  if (!type) invalid(path, name + " has GGML type " + std::to_string(t.type) + ", unknown");
  if (t.dims.empty() || t.dims.size() > 4) invalid(path, name + " has no or more than 4 dims");
  uint64_t elements = 1;
  for (int64_t d : t.dims) {
    if (d <= 0) invalid(path, name + " has a dimension that is not positive");
    elements *= uint64_t(d);
  }
  if (t.dims[0] % type->block_elements != 0)
    invalid(path, name + "'s rows are not whole " + type->name + " blocks");
  const uint64_t bytes = elements / uint64_t(type->block_elements) * uint64_t(type->block_bytes);
  if (bytes != t.bytes || (bytes > 0 && !t.data))
    invalid(path, name + " holds " + std::to_string(t.bytes) + " bytes, its dims make " +
                      std::to_string(bytes));
  return bytes;
}

uint64_t aligned(uint64_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

}  // namespace

void write_gguf(const std::string& path,
                const std::vector<std::pair<std::string, GgufValue>>& metadata,
                const std::vector<GgufTensorData>& tensors) {
  Encoder e;
  e.bytes = "GGUF";
  e.put(uint32_t(3));
  e.put(uint64_t(tensors.size()));
  e.put(uint64_t(metadata.size()));
  std::set<std::string> seen;
  for (const auto& [key, value] : metadata) {
    if (key == "general.alignment") invalid(path, "metadata 'general.alignment' is not written");
    if (!seen.insert(key).second) invalid(path, "metadata '" + key + "' appears twice");
    e.str(key);
    put_value(e, path, key, value);
  }
  seen.clear();
  uint64_t offset = 0;
  for (const GgufTensorData& t : tensors) {
    if (!seen.insert(t.name).second) invalid(path, "tensor '" + t.name + "' appears twice");
    const uint64_t bytes = checked_bytes(path, t);
    e.str(t.name);
    e.put(uint32_t(t.dims.size()));
    for (int64_t d : t.dims) e.put(uint64_t(d));
    e.put(t.type);
    e.put(offset);
    offset = aligned(offset + bytes);
  }
  e.bytes.resize(aligned(e.bytes.size()), '\0');
  AtomicFile out(path);
  out.write(e.bytes.data(), e.bytes.size(), "cannot write the header");
  static const char kZeros[kAlignment] = {};
  for (const GgufTensorData& t : tensors) {
    out.write(t.data, size_t(t.bytes), "cannot write tensor data");
    out.write(kZeros, size_t(aligned(t.bytes) - t.bytes), "cannot write tensor data");
  }
  out.commit();
}

}  // namespace sy
