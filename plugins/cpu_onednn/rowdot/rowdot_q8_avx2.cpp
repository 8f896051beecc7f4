// The avx2 tier of rowdot_q8.hpp: pmaddwd on 16-bit weights and Q, 8 weight rows per pass for
// decode-sized steps (rowdot_q8_rows8_avx2.hpp), and 8 weight rows interleaved into a panel for
// many rows of x (rowdot_q8_panel_avx2.hpp).
#include "rowdot/rowdot_q8_panel_avx2.hpp"

namespace sy::cpu {

// A function-local static, built on the first call from inside the tier: a namespace-scope one
// is built with VEX code when the plugin loads, on every CPU (docs/cpu-tiers.md).
const RowdotQ8Tier& rowdot_q8_avx2() {
  static const RowdotQ8Tier tier = {
      "q8_avx2", q8_quantize<Avx2Q8>, q16_columns<Avx2Q8, Avx2Mac>, nullptr, 0, true};
  return tier;
}

}  // namespace sy::cpu
