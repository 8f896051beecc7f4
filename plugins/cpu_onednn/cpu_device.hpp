// The one CPU device this plugin serves: its name, cores and instruction set.
#pragma once

#include <string>

namespace sy::cpu {

struct CpuDevice {
  std::string name;  // /proc/cpuinfo "model name"
  int cores = 1;     // CPUs this process may run on
  std::string isa;   // oneDNN's effective ISA, e.g. "avx512_core_bf16"
  unsigned long long memory_bytes = 0;
};

CpuDevice detect_cpu();

}  // namespace sy::cpu
