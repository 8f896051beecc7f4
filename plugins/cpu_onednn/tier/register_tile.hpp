// Register tiles: a kernel keeps a small array of vector accumulators (acc[R][NV]) in registers
// across a loop over keys or K. GCC replaces such an array by registers only when the loops over
// its rows and vectors are fully unrolled before its scalar replacement runs; otherwise it keeps
// a copy in memory and stores every accumulator on every iteration (seen in attention_avx2's
// pv_tile<6, 2>: 12 stack stores per key, half the kernel's time). SY_TILE_LOOP, placed before
// each loop over a tile dimension (a compile-time bound), forces the unrolling.
#pragma once

#define SY_TILE_LOOP _Pragma("GCC unroll 16")
