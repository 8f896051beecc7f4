// libFuzzer target: the graph JSON parser must answer any input with a graph or an
// Error, never a crash, a hang or another exception.
#include <cstdint>
#include <string>

#include "core/graph/graph.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    sy::Graph g = sy::parse_graph(text, "fuzz.json");
    (void)sy::to_json(g).dump();
  } catch (const sy::Error&) {
  }
  return 0;
}
