// What every weights-file reader of this folder needs from its file: a read-only memory map,
// and the check that no two tensors share a byte.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sy {

// A whole file mapped PROT_READ / MAP_PRIVATE, unmapped by the destructor. Movable.
class MappedFile {
 public:
  MappedFile() = default;
  // Throws Error (SY302, bad_weights) naming `path` when it cannot be opened, is not a regular
  // file or cannot be mapped. An empty file maps to no bytes (data() is null).
  static MappedFile open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const unsigned char* data() const { return base_; }
  uint64_t size() const { return size_; }

 private:
  void release() noexcept;
  const unsigned char* base_ = nullptr;
  uint64_t size_ = 0;
};

// A tensor's bytes [offset, offset + bytes) in a file, with its name for messages.
struct ByteRange {
  const std::string* name;
  uint64_t offset, bytes;
};

// The first two ranges (by offset) that share a byte, or nullopt; empty ranges share none.
std::optional<std::pair<ByteRange, ByteRange>> first_overlap(std::vector<ByteRange> ranges);

}  // namespace sy
