// The AMX tile configuration the amx files load (palette 1). Each loads its own at every call:
// another library on the thread (oneDNN's AMX kernels) may have loaded a different one since.
// Internal linkage (scalar_math.hpp says why).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace sy::cpu {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

struct TileShape {
  uint8_t rows;
  uint16_t bytes_per_row;
};

// Tiles 0, 1, … in `shapes` order.
template <int N>
inline void configure_tiles(const TileShape (&shapes)[N]) {
  TileConfig c;
  for (int t = 0; t < N; ++t) c.rows[t] = shapes[t].rows, c.colsb[t] = shapes[t].bytes_per_row;
  _tile_loadconfig(&c);
}

// All eight tiles 16 rows of 64 bytes.
inline void configure_full_tiles() {
  const TileShape full = {16, 64};
  configure_tiles<8>({full, full, full, full, full, full, full, full});
}

}  // namespace
}  // namespace sy::cpu
