// libFuzzer target: the GGUF reader must answer any bytes with a validated file or an Error,
// never a crash, a read past the input, a hang or another exception; and every tensor it hands
// out must lie inside the input.
#include <cstdint>
#include <cstdlib>

#include "core/errors/error.hpp"
#include "core/weights/gguf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    sy::GgufFile f = sy::GgufFile::parse(data, size, "fuzz.gguf");
    for (const sy::GgufTensor& t : f.tensors())
      if (t.offset > size || t.bytes > size - t.offset) std::abort();
  } catch (const sy::Error&) {
  }
  return 0;
}
