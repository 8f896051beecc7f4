// GGUF reading: a bounds-checked walk over the header (gguf.hpp lists what is refused).
#include "core/weights/gguf.hpp"

#include <cstring>
#include <limits>

#include "core/errors/error.hpp"
#include "core/weights/quoted_name.hpp"

namespace sy {
namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

// From the PyPI package gguf 0.19.0 (gguf.constants.GGML_QUANT_SIZES).
constexpr GgmlType kGgmlTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 40},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},    {40, "NVFP4", 64, 36},
    {41, "Q1_0", 128, 18},
};

// A cursor over the file image; every read checks that its bytes are there.
class Reader {
 public:
  Reader(const unsigned char* data, uint64_t size, const std::string& where)
      : data_(data), size_(size), where_(where) {}

  [[noreturn]] void fail(const std::string& reason) const {
    throw Error(Errc::bad_weights, "weights file is invalid: " + reason, where_);
  }
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  void need(uint64_t bytes, const std::string& what) const {
    if (bytes > left())
      fail("truncated: " + what + " needs " + std::to_string(bytes) + " bytes at offset " +
           std::to_string(pos_) + ", but the file is " + std::to_string(size_) + " bytes");
  }
  template <typename T>
  T scalar(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // GGUF is little-endian, as are our hosts
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const std::string& what) {
    uint64_t n = scalar<uint64_t>(what + " (its length)");
    need(n, what + " (" + std::to_string(n) + " bytes of text)");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }

 private:
  const unsigned char* data_;
  uint64_t size_, pos_ = 0;
  const std::string& where_;
};

// The fewest bytes one value of `type` takes in the file (a string: its 8-byte length).
uint64_t min_bytes(GgufType type) {
  switch (type) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::boolean: return 1;
    case GgufType::u16:
    case GgufType::i16: return 2;
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::f32: return 4;
    default: return 8;
  }
}

bool known(uint32_t type) {
  return type <= uint32_t(GgufType::f64);
}

// One scalar of `type` into v's scalar fields.
void read_scalar(Reader& r, GgufType type, GgufValue& v, const std::string& what) {
  switch (type) {
    case GgufType::u8: v.u = r.scalar<uint8_t>(what); break;
    case GgufType::u16: v.u = r.scalar<uint16_t>(what); break;
    case GgufType::u32: v.u = r.scalar<uint32_t>(what); break;
    case GgufType::u64: v.u = r.scalar<uint64_t>(what); break;
    case GgufType::i8: v.i = r.scalar<int8_t>(what); break;
    case GgufType::i16: v.i = r.scalar<int16_t>(what); break;
    case GgufType::i32: v.i = r.scalar<int32_t>(what); break;
    case GgufType::i64: v.i = r.scalar<int64_t>(what); break;
    case GgufType::f32: v.f = r.scalar<float>(what); break;
    case GgufType::f64: v.f = r.scalar<double>(what); break;
    case GgufType::boolean: {
      uint8_t b = r.scalar<uint8_t>(what);
      if (b > 1) r.fail(what + " is a bool holding " + std::to_string(b) + ", not 0 or 1");
      v.i = b;
      break;
    }
    case GgufType::string: v.s = r.string(what); break;
    case GgufType::array: r.fail(what + ": arrays of arrays are not supported");
  }
}

void read_array(Reader& r, GgufValue& v, const std::string& what) {
  uint32_t et = r.scalar<uint32_t>(what + " (its element type)");
  if (!known(et)) r.fail(what + ": unknown array element type " + std::to_string(et));
  v.element_type = GgufType(et);
  if (v.element_type == GgufType::array) r.fail(what + ": arrays of arrays are not supported");
  uint64_t n = r.scalar<uint64_t>(what + " (its length)");
  if (n > r.left() / min_bytes(v.element_type))
    r.fail(what + ": an array of " + std::to_string(n) + " " + gguf_type_name(v.element_type) +
           " does not fit in the " + std::to_string(r.left()) + " bytes that remain");
  for (uint64_t k = 0; k < n; ++k) {
    GgufValue e;
    read_scalar(r, v.element_type, e, what + " element " + std::to_string(k));
    switch (v.element_type) {
      case GgufType::u8:
      case GgufType::u16:
      case GgufType::u32:
      case GgufType::u64: v.uints.push_back(e.u); break;
      case GgufType::f32:
      case GgufType::f64: v.floats.push_back(e.f); break;
      case GgufType::string: v.strings.push_back(std::move(e.s)); break;
      default: v.ints.push_back(e.i); break;
    }
  }
}

GgufValue read_value(Reader& r, const std::string& key) {
  const std::string what = "metadata " + quoted_name(key);
  uint32_t t = r.scalar<uint32_t>(what + " (its value type)");
  if (!known(t)) r.fail(what + ": unknown value type " + std::to_string(t));
  GgufValue v;
  v.type = GgufType(t);
  if (v.is_array())
    read_array(r, v, what);
  else
    read_scalar(r, v.type, v, what);
  return v;
}

// The file's alignment: "general.alignment" (a u32 power of two) or 32.
uint64_t alignment_of(const Reader& r, const std::map<std::string, GgufValue>& metadata) {
  auto it = metadata.find("general.alignment");
  if (it == metadata.end()) return kDefaultAlignment;
  const GgufValue& v = it->second;
  if (v.type != GgufType::u32)
    r.fail("metadata 'general.alignment' is " + v.type_text() + ", not u32");
  if (v.u == 0 || (v.u & (v.u - 1)) != 0)
    r.fail("metadata 'general.alignment' = " + std::to_string(v.u) + " is not a power of two");
  return v.u;
}

// Name, dimensions, type and relative offset of one tensor info; bytes from its type.
GgufTensor read_tensor_info(Reader& r, uint64_t index) {
  GgufTensor t;
  t.name = r.string("tensor info " + std::to_string(index) + " (its name)");
  const std::string what = "tensor " + quoted_name(t.name);
  uint32_t n_dims = r.scalar<uint32_t>(what + " (its number of dimensions)");
  if (n_dims == 0 || n_dims > kMaxDims)
    r.fail(what + " has " + std::to_string(n_dims) + " dimensions (1 to 4 are allowed)");
  uint64_t elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t n = r.scalar<uint64_t>(what + " (dimension " + std::to_string(d) + ")");
    if (n > uint64_t(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(elements, n, &elements) ||
        elements > uint64_t(std::numeric_limits<int64_t>::max()))
      r.fail(what + ": dimension " + std::to_string(d) + " = " + std::to_string(n) +
             " makes the element count overflow");
    t.dims.push_back(int64_t(n));
  }
  uint32_t type = r.scalar<uint32_t>(what + " (its type)");
  t.type = ggml_type(type);
  if (!t.type) r.fail(what + " has GGML type " + std::to_string(type) + ", which is unknown");
  if (t.dims[0] % t.type->block_elements != 0)
    r.fail(what + ": its rows of " + std::to_string(t.dims[0]) + " elements are not whole " +
           t.type->name + " blocks of " + std::to_string(t.type->block_elements));
  uint64_t blocks = elements / uint64_t(t.type->block_elements);
  if (__builtin_mul_overflow(blocks, uint64_t(t.type->block_bytes), &t.bytes))
    r.fail(what + ": its byte count overflows 64 bits");
  t.offset = r.scalar<uint64_t>(what + " (its offset)");
  return t;
}

// Offsets made absolute and checked: aligned, inside the file, no shared bytes.
void place_tensors(const Reader& r, std::vector<GgufTensor>& tensors, uint64_t data_start,
                   uint64_t size, uint64_t alignment) {
  std::vector<ByteRange> ranges;
  for (GgufTensor& t : tensors) {
    const std::string what = "tensor " + quoted_name(t.name);
    if (t.offset % alignment != 0)
      r.fail(what + ": offset " + std::to_string(t.offset) + " is not a multiple of the " +
             std::to_string(alignment) + "-byte alignment");
    if (data_start > size || t.offset > size - data_start || t.bytes > size - data_start - t.offset)
      r.fail(what + ": its " + std::to_string(t.bytes) + " bytes at data offset " +
             std::to_string(t.offset) + " lie outside the file (data section from byte " +
             std::to_string(data_start) + ", file of " + std::to_string(size) + " bytes)");
    t.offset += data_start;
    ranges.push_back({&t.name, t.offset, t.bytes});
  }
  if (auto o = first_overlap(std::move(ranges)))
    r.fail("tensors " + quoted_name(*o->first.name) + " and " + quoted_name(*o->second.name) +
           " share bytes (offsets " + std::to_string(o->first.offset - data_start) + " and " +
           std::to_string(o->second.offset - data_start) + ")");
}

}  // namespace

const char* gguf_type_name(GgufType type) {
  static const char* const kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                       "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(type) <= uint32_t(GgufType::f64) ? kNames[uint32_t(type)] : "?";
}

std::optional<int64_t> GgufValue::as_int() const {
  switch (type) {
    case GgufType::i8:
    case GgufType::i16:
    case GgufType::i32:
    case GgufType::i64: return i;
    case GgufType::u8:
    case GgufType::u16:
    case GgufType::u32:
    case GgufType::u64:
      if (u > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return int64_t(u);
    default: return std::nullopt;
  }
}

std::optional<double> GgufValue::as_number() const {
  if (type == GgufType::f32 || type == GgufType::f64) return f;
  if (auto n = as_int()) return double(*n);
  return std::nullopt;
}

std::optional<std::vector<int64_t>> GgufValue::as_int_array() const {
  if (!is_array()) return std::nullopt;
  if (!ints.empty() || element_type == GgufType::i8 || element_type == GgufType::i16 ||
      element_type == GgufType::i32 || element_type == GgufType::i64)
    return ints;
  if (element_type != GgufType::u8 && element_type != GgufType::u16 &&
      element_type != GgufType::u32 && element_type != GgufType::u64)
    return std::nullopt;
  std::vector<int64_t> out;
  for (uint64_t x : uints) {
    if (x > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
    out.push_back(int64_t(x));
  }
  return out;
}

std::string GgufValue::type_text() const {
  if (is_array()) return std::string("array of ") + gguf_type_name(element_type);
  return gguf_type_name(type);
}

const GgmlType* ggml_type(uint32_t id) {
  for (const GgmlType& t : kGgmlTypes)
    if (t.id == id) return &t;
  return nullptr;
}

int64_t GgufTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

GgufFile GgufFile::open(const std::string& path) {
  MappedFile mapped = MappedFile::open(path);
  GgufFile f = parse(mapped.data(), mapped.size(), path);
  f.file_ = std::move(mapped);
  return f;
}

GgufFile GgufFile::parse(const unsigned char* data, uint64_t size, const std::string& where) {
  GgufFile f;
  f.path_ = where;
  f.base_ = data;
  f.size_ = size;
  Reader r(data, size, where);
  r.need(4, "the magic number");
  if (std::memcmp(data, "GGUF", 4) != 0)
    r.fail(std::memcmp(data, "FUGG", 4) == 0
               ? "a big-endian GGUF file; only little-endian files are supported"
               : "does not start with the GGUF magic number (not a GGUF file)");
  r.scalar<uint32_t>("the magic number");
  f.version_ = r.scalar<uint32_t>("the version");
  if (f.version_ == 1)
    r.fail(
        "GGUF version 1 (the format of 2023 before August) is not supported; convert the "
        "model again with a current llama.cpp");
  if (f.version_ == 0 || f.version_ > 3)
    r.fail("GGUF version " + std::to_string(f.version_) +
           " is not one this reader knows (2 and 3)" + (f.version_ > 3 ? ": too new" : ""));
  const uint64_t n_tensors = r.scalar<uint64_t>("the tensor count");
  const uint64_t n_kv = r.scalar<uint64_t>("the metadata count");
  if (n_kv > r.left() / 13)  // a key's length, a type and a byte of value at the least
    r.fail("the metadata count " + std::to_string(n_kv) + " cannot fit in the file");
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = r.string("metadata key " + std::to_string(k));
    GgufValue v = read_value(r, key);
    if (!f.metadata_.emplace(key, std::move(v)).second)
      r.fail("metadata " + quoted_name(key) + " appears twice");
  }
  f.alignment_ = alignment_of(r, f.metadata_);
  if (n_tensors > r.left() / 32)  // name length, one dimension, type, offset at the least
    r.fail("the tensor count " + std::to_string(n_tensors) + " cannot fit in the file");
  for (uint64_t t = 0; t < n_tensors; ++t) {
    f.tensors_.push_back(read_tensor_info(r, t));
    if (!f.index_.emplace(f.tensors_.back().name, t).second)
      r.fail("tensor " + quoted_name(f.tensors_.back().name) + " appears twice");
  }
  const uint64_t data_start = (r.pos() + f.alignment_ - 1) / f.alignment_ * f.alignment_;
  place_tensors(r, f.tensors_, data_start, size, f.alignment_);
  return f;
}

const GgufValue* GgufFile::value(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace sy
