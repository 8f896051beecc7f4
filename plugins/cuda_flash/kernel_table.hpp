// Every kernel this plugin declares: its ABI envelope and its narrowing filters.
#pragma once

#include <cstddef>

#include "cuda_kernel.hpp"
#include "cxx_edge/cxx_edge.hpp"

namespace sy::cuda {

// The oldest architecture the kernels are built for.
inline constexpr int kMinSmVersion = 80;

const sy::edge::KernelEntry* kernel_table(size_t* count);
const sy_kernel_envelope* const* kernel_envelopes(size_t* count);
// The factory of kernel `index` (index-aligned with the table), or NULL.
KernelFactory kernel_factory(size_t index);

}  // namespace sy::cuda
