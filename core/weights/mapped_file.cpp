#include "core/weights/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/errors/error.hpp"

namespace sy {
namespace {

[[noreturn]] void cannot(const std::string& path, const std::string& what, int err) {
  throw Error(Errc::bad_weights, "weights file is invalid: " + what + ": " + std::strerror(err),
              path);
}

}  // namespace

MappedFile MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) cannot(path, "cannot open it", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    cannot(path, "cannot stat it", e);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(Errc::bad_weights, "weights file is invalid: not a regular file", path);
  }
  MappedFile f;
  f.size_ = static_cast<uint64_t>(st.st_size);
  if (f.size_ == 0) {
    ::close(fd);
    return f;
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(f.size_), PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  ::close(fd);
  if (p == MAP_FAILED) cannot(path, "cannot map it", map_errno);
  f.base_ = static_cast<const unsigned char*>(p);
  return f;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  release();
}

void MappedFile::release() noexcept {
  if (base_) ::munmap(const_cast<unsigned char*>(base_), static_cast<size_t>(size_));
  base_ = nullptr;
  size_ = 0;
}

std::optional<std::pair<ByteRange, ByteRange>> first_overlap(std::vector<ByteRange> ranges) {
  std::stable_sort(ranges.begin(), ranges.end(), [](const ByteRange& a, const ByteRange& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.bytes < b.bytes;
  });
  const ByteRange* last = nullptr;  // the non-empty range that ends furthest so far
  for (const ByteRange& r : ranges) {
    if (r.bytes == 0) continue;
    if (last && r.offset < last->offset + last->bytes) return std::make_pair(*last, r);
    if (!last || r.offset + r.bytes > last->offset + last->bytes) last = &r;
  }
  return std::nullopt;
}

}  // namespace sy
