// The vnni form of rowdot_q8.hpp, chosen on the avx512 tier of a CPU with AVX512-VNNI.
#include "rowdot/rowdot_q8_vnni.hpp"

namespace sy::cpu {
namespace {

const RowdotQ8Tier kTier = {
    "q8_vnni", q8_quantize<VnniQ8>, q16_columns<VnniQ8, VnniMac>, nullptr, 0, true};

}  // namespace

const RowdotQ8Tier& rowdot_q8_vnni() {
  return kTier;
}

}  // namespace sy::cpu
