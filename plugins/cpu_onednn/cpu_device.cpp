#include "cpu_device.hpp"

#include <sched.h>
#include <unistd.h>

#include <dnnl.hpp>
#include <fstream>

#include "tier/cpu_tier.hpp"

namespace sy::cpu {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "CPU";
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "generic";
  }
}

}  // namespace

CpuDevice detect_cpu() {
  CpuDevice d;
  d.name = cpu_model_name();
  cpu_set_t set;
  CPU_ZERO(&set);
  d.cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  TierChoice tier = active_tier();
  // A lowered tier lowers oneDNN too (before its first primitive), so a forced avx2 run on an
  // AVX-512 machine behaves like an AVX2 machine throughout.
  if (tier.tier < best_tier())
    (void)dnnl::set_max_cpu_isa(tier.tier == CpuTier::avx512 ? dnnl::cpu_isa::avx512_core_bf16
                                : tier.tier == CpuTier::avx2 ? dnnl::cpu_isa::avx2
                                                             : dnnl::cpu_isa::sse41);
  d.tier = tier_name(tier.tier);
  d.tier_note = tier.note;
  d.isa = d.tier + (tier.avx512_bf16 && tier.tier != CpuTier::amx ? "+bf16" : "") +
          " tier, oneDNN " + isa_name(dnnl::get_effective_cpu_isa());
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) d.memory_bytes = static_cast<unsigned long long>(pages) * page;
  return d;
}

}  // namespace sy::cpu
