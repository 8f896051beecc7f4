// GGUF files (llama.cpp's format), versions 2 and 3: metadata, tensor infos and tensor data,
// read through a read-only memory map. Every field is checked before anything is handed out, so
// no later access reads past the file.
//
// Every problem is an Error with code Errc::bad_weights (SY302) whose `where` is the file and
// whose message names the field or tensor and what is wrong: a file shorter than its header; bad
// magic; a version other than 2 or 3 (1 is the pre-2023 format, above 3 too new); a count, string
// or array larger than the bytes that remain; an unknown value type; a nested array; a duplicate
// key or tensor name; "general.alignment" that is not a u32 power of two; a tensor with no or more
// than 4 dimensions, a negative or overflowing dimension, an unknown GGML type, a first dimension
// that is not a whole number of the type's blocks, an offset not aligned, or bytes outside the data
// section; two tensors that share a byte.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/weights/mapped_file.hpp"

namespace sy {

// The GGUF metadata value types (their numbers are the file's).
enum class GgufType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
const char* gguf_type_name(GgufType type);

// A metadata value. Scalars are widened: signed integers and bool into `i`, unsigned integers
// into `u`, floats into `f`, strings into `s`. An array keeps its element type and its elements
// in the one vector that matches them (arrays of arrays are refused by the reader).
struct GgufValue {
  GgufType type = GgufType::u8;
  GgufType element_type = GgufType::u8;  // arrays only
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  // `{}`: a brace initialiser may leave them out (-Wmissing-field-initializers).
  std::string s{};
  std::vector<int64_t> ints{};
  std::vector<uint64_t> uints{};
  std::vector<double> floats{};
  std::vector<std::string> strings{};

  bool is_array() const { return type == GgufType::array; }
  // The value as an integer when it is an integer scalar (any width or sign) that fits; bool
  // is not an integer here.
  std::optional<int64_t> as_int() const;
  // The value as a number when it is an integer or float scalar.
  std::optional<double> as_number() const;
  // Elements of an array of integers (any width or sign) that fit in int64.
  std::optional<std::vector<int64_t>> as_int_array() const;
  // "u32", "array of string", ... for messages.
  std::string type_text() const;
};

// A GGML tensor type: its number in the file, name, and block layout (elements per block, bytes
// per block; 1 and the element size for the plain types). The table follows the PyPI package
// gguf 0.19.0 (GGML_QUANT_SIZES).
struct GgmlType {
  uint32_t id;
  const char* name;
  int64_t block_elements;
  int64_t block_bytes;
};
// nullptr for a number that is not a GGML type this reader knows.
const GgmlType* ggml_type(uint32_t id);

struct GgufTensor {
  std::string name;
  const GgmlType* type = nullptr;
  std::vector<int64_t> dims;  // GGUF order: dims[0] varies fastest (one row holds dims[0])
  uint64_t offset = 0;        // from the start of the file
  uint64_t bytes = 0;
  int64_t elements() const;
};

class GgufFile {
 public:
  // Maps and validates `path`; throws Error (SY302) naming the file and what is wrong.
  static GgufFile open(const std::string& path);
  // Validates a file image held in memory, which must outlive the result (fuzzing, tests).
  static GgufFile parse(const unsigned char* data, uint64_t size, const std::string& where);

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Every key, sorted.
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const GgufValue* value(const std::string& key) const;
  // Every tensor, in the order of the file's tensor infos.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find(const std::string& name) const;
  // The first byte of one of this file's tensors.
  const void* data(const GgufTensor& tensor) const { return base_ + tensor.offset; }

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

 private:
  GgufFile() = default;

  std::string path_;
  MappedFile file_;
  const unsigned char* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

// A tensor for write_gguf: `dims` in GGUF order (dims[0] is the row length), `type` a GGML type
// number ggml_type() knows, `data` the tensor's `bytes`, read during the call only.
struct GgufTensorData {
  std::string name;
  uint32_t type = 0;
  std::vector<int64_t> dims;
  const void* data = nullptr;
  uint64_t bytes = 0;
};

// Writes a version-3 GGUF file at `path`, atomically (AtomicFile): the metadata in the order
// given (each value as GgufValue holds it: its type picks the field it is written from), then the
// tensor infos, then the tensors, each at a multiple of 32 bytes (GGUF's default alignment; a
// "general.alignment" entry is refused rather than honoured). std::invalid_argument naming the
// key or tensor for what the reader would refuse: a duplicate key or tensor name, a nested array
// or unknown value type, an unknown GGML type, 1 to 4 dims not all positive, a row that is not
// whole blocks, bytes that are not the dims' size; std::runtime_error when the file cannot be
// written.
void write_gguf(const std::string& path,
                const std::vector<std::pair<std::string, GgufValue>>& metadata,
                const std::vector<GgufTensorData>& tensors);

}  // namespace sy
