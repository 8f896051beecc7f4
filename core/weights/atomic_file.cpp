#include "core/weights/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace sy {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp-XXXXXX") {
  fd_ = ::mkstemp(tmp_.data());
  if (fd_ < 0)
    throw std::runtime_error(path_ +
                             ": cannot create a temporary file beside it: " + std::strerror(errno));
  if (::fchmod(fd_, 0644) != 0) fail("cannot set permissions");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::fail(const char* what) {
  const int e = errno;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  tmp_.clear();
  throw std::runtime_error(path_ + ": " + what + ": " + std::strerror(e));
}

void AtomicFile::write(const void* p, size_t n, const char* what) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd_, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail(what);
    }
    c += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail("cannot flush");
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("cannot close");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("cannot rename the temporary file over it");
  tmp_.clear();
}

}  // namespace sy
