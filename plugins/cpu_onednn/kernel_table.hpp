// Every kernel this plugin declares: its ABI envelope, its limits beyond the operator
// contract, and its factory (the plugin kit's KernelList).
#pragma once

#include "cpu_kernel.hpp"
#include "cxx_edge/plugin_edge.hpp"

namespace sy::cpu {

using Kernels = sy::edge::KernelList<CpuKernel, CpuContext>;
const Kernels& kernels();

}  // namespace sy::cpu
