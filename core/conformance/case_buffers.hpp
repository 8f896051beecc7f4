// Host buffers for one conformance case: inputs filled by their role (ids inside the table,
// positions inside the cache, valid block scales for quantized weights, for the paged forms
// distinct slots and consistent query starts, lengths and block tables, random floats
// elsewhere), outputs pre-filled with random bytes (so an output left unwritten shows), and the
// comparison of two runs within the dtype's tolerance (conformance.hpp). Internal to
// conformance/.
#pragma once

#include <dlpack/dlpack.h>

#include <random>
#include <string>
#include <vector>

#include "core/capability/op.hpp"

namespace sy::conformance {

class Buffers {
 public:
  // `actual_*`: a varlen case's shapes per execute (GridCase); empty: the op's own.
  Buffers(const OpDesc& op, uint32_t seed,
          const std::vector<std::vector<int64_t>>& actual_inputs = {},
          const std::vector<std::vector<int64_t>>& actual_outputs = {});
  Buffers(const Buffers& other);
  Buffers& operator=(const Buffers&) = delete;

  std::vector<const DLTensor*> inputs() const;
  std::vector<const DLTensor*> outputs() const;
  // Replaces input `index` (f32 or bf16, rows of whole blocks of 32) by the values a kernel
  // that quantizes its activations multiplies (envelope.hpp's DeclaredNumerics::levels: 127
  // for activation_q8, 32258 for activation_q16): per block of 32, d = max|x| / levels and
  // q = round-half-even(x · (1/d)), in f32; the block becomes d·q. An exact reference given these
  // computes what such a kernel should.
  void quantize_input(size_t index, int levels);
  // Copies of the inputs' DLTensors, to break one (bad-argument checks).
  std::vector<DLTensor> input_tensors() const;
  // "" when every output is within the tolerance of `want`'s (bit-identical when `exact`); else
  // the worst element and how many are off.
  std::string differs_from(const Buffers& want, bool exact = false) const;

 private:
  struct Tensor {
    TensorDesc desc;
    std::vector<uint8_t> bytes;
    std::vector<int64_t> shape;
    DLTensor dl{};
  };
  void link();
  void paged_metadata(std::mt19937& rng);
  OpDesc op_;
  std::vector<Tensor> in_, out_;
};

}  // namespace sy::conformance
