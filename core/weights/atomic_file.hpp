// A file written whole or not at all: the bytes go to a temporary file beside `path`, which
// commit() flushes and renames over it. A writer destroyed before commit() (an exception while
// the bytes were made) removes the temporary file, so no reader ever sees half a file under
// `path`. write_safetensors and write_gguf write through it.
#pragma once

#include <cstddef>
#include <string>

namespace sy {

class AtomicFile {
 public:
  // Creates the temporary file (mode 0644); std::runtime_error naming `path` when it cannot.
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends [p, p + n); std::runtime_error naming `path`, `what` and the system's reason.
  void write(const void* p, size_t n, const char* what);
  // Flushes, closes and renames the temporary file over `path`.
  void commit();

 private:
  [[noreturn]] void fail(const char* what);

  std::string path_, tmp_;
  int fd_ = -1;
};

}  // namespace sy
