// The portable tier of rowdot.hpp (rowdot_lanes.hpp on 8 f32 lanes the compiler vectorises for
// baseline x86-64: a multiply, then an add), and the choice of tier.
#include "rowdot/rowdot_lanes.hpp"
#include "tier/simd_lanes.hpp"

namespace sy::cpu {
namespace {

void columns(const RowdotArgs& a, int64_t n0, int64_t n1) {
  lane_columns<PortableLanes>(a, quant_portable(), n0, n1);
}

const RowdotTier kTier = {"portable", columns, lane_reads_bf16, kLanePanelRows};

}  // namespace

const RowdotTier& rowdot_portable() {
  return kTier;
}

const RowdotTier& rowdot_tier(const TierChoice& tier) {
  switch (tier.tier) {
    case CpuTier::amx: return rowdot_amx();
    case CpuTier::avx512: return rowdot_avx512(tier.avx512_bf16);
    case CpuTier::avx2: return rowdot_avx2();
    default: return rowdot_portable();
  }
}

}  // namespace sy::cpu
