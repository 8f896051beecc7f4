// Every kernel this plugin declares: its ABI envelope, its limits beyond the operator
// contract, and its factory (the plugin kit's KernelList).
#pragma once

#include "cuda_kernel.hpp"
#include "cxx_edge/plugin_edge.hpp"

namespace sy::cuda {

// The oldest architecture the kernels are built for.
inline constexpr int kMinSmVersion = 80;

using Kernels = sy::edge::KernelList<CudaKernel, CudaContext>;
const Kernels& kernels();

}  // namespace sy::cuda
