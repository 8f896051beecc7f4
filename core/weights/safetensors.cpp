// Safetensors reading (mmap, every header field checked before use) and atomic writing.
#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "core/weights/atomic_file.hpp"
#include "core/weights/mapped_file.hpp"
#include "core/weights/quoted_name.hpp"
#include "core/weights/weights.hpp"

namespace sy {
namespace {

using nlohmann::json;

constexpr const char* kSupportedDtypes = "F32, BF16, F16, I64, I32, U8";

[[noreturn]] void bad(const std::string& path, const std::string& reason) {
  throw Error(Errc::bad_weights, "weights file is invalid: " + reason, path);
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; the rest is the useful part.
std::string json_reason(const json::exception& e) {
  std::string w = e.what();
  if (!w.empty() && w[0] == '[') {
    size_t close = w.find("] ");
    if (close != std::string::npos) return w.substr(close + 2);
  }
  return w;
}

std::string range_text(uint64_t begin, uint64_t end) {
  std::string s = "[";  // appended piece by piece: GCC 12 warns (-Wrestrict) on "[" + string
  s += std::to_string(begin);
  s += ", ";
  s += std::to_string(end);
  s += ")";
  return s;
}

// elements × element size, or nullopt when either product overflows 64 bits.
std::optional<uint64_t> byte_count(const std::vector<int64_t>& shape, sy_dtype dtype) {
  uint64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return std::nullopt;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(n, uint64_t{sy_dtype_size(dtype)}, &bytes)) return std::nullopt;
  return bytes;
}

// Reads one tensor entry of the header; `data_size` is the size of the data section and
// `data_start` its offset in the file.
TensorInfo read_entry(const std::string& path, const std::string& name, const json& entry,
                      uint64_t data_start, uint64_t data_size) {
  const std::string t = "tensor " + quoted_name(name);
  if (!entry.is_object()) bad(path, t + ": entry is not a JSON object");
  TensorInfo info;
  info.name = name;

  auto dt = entry.find("dtype");
  if (dt == entry.end()) bad(path, t + ": missing field \"dtype\"");
  if (!dt->is_string()) bad(path, t + ": field \"dtype\" is not a string");
  const std::string& dtype_name = dt->get_ref<const std::string&>();
  auto dtype = safetensors_dtype(dtype_name);
  if (!dtype)
    bad(path, t + ": unsupported dtype " + quoted_name(dtype_name) +
                  " (supported: " + kSupportedDtypes + ")");
  info.dtype = *dtype;

  auto sh = entry.find("shape");
  if (sh == entry.end()) bad(path, t + ": missing field \"shape\"");
  if (!sh->is_array()) bad(path, t + ": field \"shape\" is not an array");
  for (size_t i = 0; i < sh->size(); ++i) {
    const json& d = (*sh)[i];
    std::string field = t + ": shape[" + std::to_string(i) + "]";
    if (!d.is_number_integer()) bad(path, field + " is not an integer: " + d.dump());
    if (d.is_number_unsigned()) {
      uint64_t u = d.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        bad(path, field + " = " + std::to_string(u) + " is too large");
      info.shape.push_back(static_cast<int64_t>(u));
    } else {
      int64_t s = d.get<int64_t>();
      if (s < 0) bad(path, field + " = " + std::to_string(s) + " is negative");
      info.shape.push_back(s);
    }
  }
  auto bytes = byte_count(info.shape, info.dtype);
  if (!bytes)
    bad(path, t + ": shape " + shape_text(info.shape) + " of " + dtype_name +
                  " overflows a 64-bit byte count");
  info.bytes = *bytes;

  auto off = entry.find("data_offsets");
  if (off == entry.end()) bad(path, t + ": missing field \"data_offsets\"");
  if (!off->is_array() || off->size() != 2)
    bad(path, t + ": field \"data_offsets\" is not an array of two integers: " + off->dump());
  for (const json& o : *off)
    if (!o.is_number_unsigned())
      bad(path, t + ": field \"data_offsets\" holds " + o.dump() + ", not an unsigned integer");
  uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
  std::string range = t + ": data_offsets " + range_text(begin, end);
  if (end < begin) bad(path, range + " ends before it begins");
  if (end > data_size)
    bad(path, range + " extends past the end of the data section (" + std::to_string(data_size) +
                  " bytes)");
  if (end - begin != info.bytes)
    bad(path, range + " hold " + std::to_string(end - begin) + " bytes, but " + dtype_name +
                  " shape " + shape_text(info.shape) + " needs " + std::to_string(info.bytes));
  info.offset = data_start + begin;
  return info;
}

[[noreturn]] void invalid_argument(const std::string& path, const std::string& what) {
  throw std::invalid_argument("write_safetensors " + path + ": " + what);
}

}  // namespace

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::optional<sy_dtype> safetensors_dtype(std::string_view name) {
  if (name == "F32") return SY_DTYPE_F32;
  if (name == "BF16") return SY_DTYPE_BF16;
  if (name == "F16") return SY_DTYPE_F16;
  if (name == "I64") return SY_DTYPE_I64;
  if (name == "I32") return SY_DTYPE_I32;
  if (name == "U8") return SY_DTYPE_U8;  // MXFP4 checkpoints' blocks and scales
  return std::nullopt;
}

const char* safetensors_dtype_name(sy_dtype dtype) {
  switch (dtype) {
    case SY_DTYPE_F32: return "F32";
    case SY_DTYPE_BF16: return "BF16";
    case SY_DTYPE_F16: return "F16";
    case SY_DTYPE_I64: return "I64";
    case SY_DTYPE_I32: return "I32";
    case SY_DTYPE_U8: return "U8";
    default: return nullptr;
  }
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  f.file_ = MappedFile::open(path);
  f.base_ = f.file_.data();
  f.size_ = f.file_.size();
  const uint64_t size = f.size_;
  if (size < 8)
    bad(path, "the file is " + std::to_string(size) +
                  " bytes, shorter than the 8-byte header length that starts a safetensors file");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | f.base_[i];
  if (n > size - 8)
    bad(path, "header length " + std::to_string(n) + " is larger than the " +
                  std::to_string(size - 8) +
                  " bytes that follow it (file truncated or not safetensors)");
  if (n > kSafetensorsMaxHeader)
    bad(path, "header length " + std::to_string(n) + " exceeds the limit of " +
                  std::to_string(kSafetensorsMaxHeader) + " bytes (100 MiB)");
  const uint64_t data_start = 8 + n, data_size = size - data_start;

  json header;
  try {
    const char* h = reinterpret_cast<const char*>(f.base_ + 8);
    header = json::parse(h, h + n);
  } catch (const json::exception& e) {
    bad(path, "header is not valid JSON: " + json_reason(e));
  }
  if (!header.is_object())
    bad(path, std::string("header is a JSON ") + header.type_name() + ", not an object");

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        bad(path, std::string("\"__metadata__\" is a JSON ") + entry.type_name() +
                      ", not an object of strings");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          bad(path, "\"__metadata__\" entry " + quoted_name(key) + " is a JSON " +
                        value.type_name() + ", not a string");
        f.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    f.tensors_.push_back(read_entry(path, name, entry, data_start, data_size));
  }

  // Data order; then no two tensors may share a byte (empty tensors hold none).
  std::stable_sort(f.tensors_.begin(), f.tensors_.end(), [](const auto& a, const auto& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.bytes < b.bytes;
  });
  std::vector<ByteRange> ranges;
  for (const TensorInfo& t : f.tensors_) ranges.push_back({&t.name, t.offset, t.bytes});
  if (auto o = first_overlap(std::move(ranges)))
    bad(path, "tensors " + quoted_name(*o->first.name) + " and " + quoted_name(*o->second.name) +
                  " overlap: data_offsets " +
                  range_text(o->first.offset - data_start,
                             o->first.offset + o->first.bytes - data_start) +
                  " and " +
                  range_text(o->second.offset - data_start,
                             o->second.offset + o->second.bytes - data_start));
  for (size_t i = 0; i < f.tensors_.size(); ++i) f.index_.emplace(f.tensors_[i].name, i);
  return f;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      file_(std::move(other.file_)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      tensors_(std::move(other.tensors_)),
      index_(std::move(other.index_)),
      metadata_(std::move(other.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    path_ = std::move(other.path_);
    file_ = std::move(other.file_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    tensors_ = std::move(other.tensors_);
    index_ = std::move(other.index_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() = default;

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const void* SafetensorsFile::data(const TensorInfo& info) const {
  if (!base_ || info.offset > size_ || info.bytes > size_ - info.offset)
    throw std::out_of_range(path_ + ": tensor " + quoted_name(info.name) + " at offset " +
                            std::to_string(info.offset) + " (" + std::to_string(info.bytes) +
                            " bytes) is not within this file");
  return base_ + info.offset;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<TensorInfo, const void*>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  for (const auto& [t, p] : tensors) {
    std::string tn = "tensor " + quoted_name(t.name);
    if (t.name == "__metadata__") invalid_argument(path, tn + ": the name is reserved");
    if (!names.insert(t.name).second) invalid_argument(path, tn + ": the name appears twice");
    const char* dn = safetensors_dtype_name(t.dtype);
    if (!dn)
      invalid_argument(path, tn + ": dtype " + std::to_string(static_cast<int>(t.dtype)) +
                                 " is not supported (supported: " + kSupportedDtypes + ")");
    auto bytes = byte_count(t.shape, t.dtype);
    if (!bytes)
      invalid_argument(path, tn + ": shape " + shape_text(t.shape) + " is negative or overflows");
    if (*bytes != t.bytes)
      invalid_argument(path, tn + ": bytes = " + std::to_string(t.bytes) + ", but " + dn +
                                 " shape " + shape_text(t.shape) + " needs " +
                                 std::to_string(*bytes));
    if (t.bytes > 0 && !p) invalid_argument(path, tn + ": no data");
  }

  // Sizes that are multiples of 8 first (each then starts 8-byte aligned), then the rest by
  // decreasing element size (each aligned to its element); stable, so otherwise as given.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto tail = std::stable_partition(order.begin(), order.end(),
                                    [&](size_t i) { return tensors[i].first.bytes % 8 == 0; });
  std::stable_sort(tail, order.end(), [&](size_t a, size_t b) {
    return sy_dtype_size(tensors[a].first.dtype) > sy_dtype_size(tensors[b].first.dtype);
  });

  json header = json::object();
  uint64_t pos = 0;
  for (size_t i : order) {
    const TensorInfo& t = tensors[i].first;
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {pos, pos + t.bytes}}};
    pos += t.bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    invalid_argument(
        path, "a tensor name or metadata string is not valid UTF-8 (" + json_reason(e) + ")");
  }
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));

  AtomicFile out(path);
  out.write(len, sizeof len, "cannot write the header");
  out.write(text.data(), text.size(), "cannot write the header");
  for (size_t i : order)
    if (tensors[i].first.bytes > 0)
      out.write(tensors[i].second, static_cast<size_t>(tensors[i].first.bytes),
                "cannot write tensor data");
  out.commit();
}

}  // namespace sy
