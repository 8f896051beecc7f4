// libFuzzer target: the safetensors reader must answer any file with a validated header or an
// Error (SY302), never a crash, a read past the file, a hang or another exception; and every
// tensor it hands out must lie inside the file and match its dtype and shape. The input goes
// through a file because SafetensorsFile::open maps one, as a model load does.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/errors/error.hpp"
#include "core/weights/weights.hpp"

namespace {

std::string input_file() {
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/fuzz_safetensors." +
         std::to_string(::getpid()) + ".safetensors";
}

// Bytes per element of the dtypes the reader supports, from the safetensors names (not from the
// reader's own table).
uint64_t element_bytes(const char* name) {
  const std::string n = name ? name : "";
  if (n == "F32" || n == "I32") return 4;
  if (n == "BF16" || n == "F16") return 2;
  if (n == "I64") return 8;
  if (n == "U8") return 1;
  std::abort();  // a dtype the reader says it does not support
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = input_file();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    sy::SafetensorsFile file = sy::SafetensorsFile::open(path);
    for (const sy::TensorInfo& t : file.tensors()) {
      if (t.offset > size || t.bytes > size - t.offset) std::abort();
      if (file.find(t.name) == nullptr) std::abort();
      unsigned __int128 expect = element_bytes(sy::safetensors_dtype_name(t.dtype));
      for (int64_t d : t.shape) {
        if (d < 0) std::abort();
        expect *= uint64_t(d);
        if (expect > size) std::abort();  // more than the file holds, yet accepted
      }
      if (expect != t.bytes) std::abort();
      const auto* p = static_cast<const uint8_t*>(file.data(t));
      volatile uint8_t sink = t.bytes ? p[t.bytes - 1] : 0;  // ASan checks the last byte
      (void)sink;
    }
  } catch (const sy::Error&) {
  }
  return 0;
}
