// Per-thread scratch for the tier files (*_avx2, *_avx512, *_amx), kept and grown across calls.
// A tier file must not instantiate a container or any other template of its own: the linker
// keeps one copy of each inline function and template for the whole plugin, and the tier's copy,
// compiled for its instruction set, could become everyone's (docs/cpu-tiers.md, "The rule").
// So the scratch they need comes from this plain function, compiled for the baseline.
#pragma once

#include <cstddef>

namespace sy::cpu {

enum class ScratchSlot {
  panel,
  packed_x,
  tail,
  q8_bytes,
  q8_scale,
  q8_coeff,
  q16_panel,  // rowdot_q8_panel_avx2.hpp's 8 interleaved weight rows
  q16_x,      // matmul_q16's activations as Q16Blocks (and q16_tiles: in a tier's tile layout)
  q16_tiles,
  count
};

// At least `bytes` bytes, 64-byte aligned, of this thread's scratch `slot`; the contents of a
// slot survive until the next call for that slot with more bytes.
void* tier_scratch(ScratchSlot slot, size_t bytes);

}  // namespace sy::cpu
