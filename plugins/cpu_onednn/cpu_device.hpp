// The one CPU device this plugin serves: its name, cores and instruction set.
#pragma once

#include <string>

namespace sy::cpu {

struct CpuDevice {
  std::string name;  // /proc/cpuinfo "model name"
  int cores = 1;     // CPUs this process may run on
  // The arch string: the kernels' tier and oneDNN's effective ISA, e.g.
  // "avx512+bf16 tier, oneDNN avx512_core_bf16" or "amx tier, oneDNN avx512_core_amx".
  std::string isa;
  std::string tier;       // cpu_tier.hpp's name of the active tier
  std::string tier_note;  // why a tier was not taken (TierChoice::note); "" if none
  unsigned long long memory_bytes = 0;
};

CpuDevice detect_cpu();

}  // namespace sy::cpu
