// Compiled against switchyard_tokenizer's include view in every build: tokenizer/ depends on
// json/ and errors/, so these headers are visible to it (the counterpart of the forbidden
// probes, which must not compile).
#include "core/errors/error.hpp"
#include "core/json/json_text.hpp"
#include "core/tokenizer/tokenizer.hpp"

int sy_layering_probe_allowed() {
  return static_cast<int>(sy::Errc::bad_tokenizer);
}
