// Every kernel this plugin declares: its ABI envelope and its narrowing filters.
#pragma once

#include <cstddef>

#include "cpu_kernel.hpp"
#include "cxx_edge/cxx_edge.hpp"

namespace sy::cpu {

const sy::edge::KernelEntry* kernel_table(size_t* count);
const sy_kernel_envelope* const* kernel_envelopes(size_t* count);
KernelFactory kernel_factory(size_t index);

}  // namespace sy::cpu
