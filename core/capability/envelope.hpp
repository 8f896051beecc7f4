// Devices and kernel envelopes as host-side values, and the host's own envelope match.
//
// The match is what makes a plugin's `check` verifiable: `check` may only narrow the
// envelope, so whenever it accepts an operator that envelope_refusals() refuses, the
// plugin has lied about its capability.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/capability/op.hpp"
#include "switchyard/plugin_api.h"

namespace sy {

struct DeviceInfo {
  std::string name;
  DLDeviceType type = kDLCPU;
  int32_t id = 0;
  std::string arch;
  uint64_t memory_bytes = 0;
  int32_t compute_units = 0;
  bool available = true;
  std::string unavailable_reason;
  bool memory_is_host = true;

  static DeviceInfo from_abi(const sy_device_desc& d);
};

// Borrowed ABI view of a DeviceInfo, for check calls.
class AbiDeviceView {
 public:
  explicit AbiDeviceView(const DeviceInfo& d);
  const sy_device_desc* get() const { return &desc_; }

 private:
  sy_device_desc desc_{};
};

struct Envelope {
  std::string kernel;
  sy_op_kind op = SY_OP_COPY;
  std::string family;
  DLDeviceType device_type = kDLCPU;
  uint64_t dtypes = 0;
  uint64_t features = 0;
  std::vector<int32_t> head_dims;
  int32_t head_dim_multiple = 0;
  int32_t head_dim_max = 0;
  int32_t max_gqa_ratio = 0;
  sy_residency default_residency = SY_RESIDENCY_DEVICE;
  std::vector<sy_residency> operand_residency;
  double cost_hint = 1.0;
  uint64_t weight_dtypes = 0;  // since ABI 1.3 (sy_kernel_envelope.weight_dtypes)

  // `minor` is the ABI minor negotiated with the plugin: fields of later minors stay default.
  static Envelope from_abi(const sy_kernel_envelope& e, uint32_t minor);
  sy_residency residency_of(size_t operand) const;
  bool accepts_head_dim(int64_t d) const;
  std::string head_dims_text() const;
};

// The features an envelope of a plugin at ABI minor `minor` may declare: the varlen and paged
// operand forms exist since 1.5, so an older plugin's bits there (paged_kv predates its
// operands) promise nothing the host may rely on.
uint64_t features_at_minor(uint64_t features, uint32_t minor);
// A kernel's declared arithmetic where it is not the op's exact definition (vocabulary.h's
// numerics features, docs/numerics.md): the feature's name and what it does to the numbers.
struct DeclaredNumerics {
  sy_feature bit;
  const char* feature;  // "activation_q16", "activation_q8"
  const char* what;     // "activations quantized to 16-bit blocks"
  int levels;           // a block's largest |q|: d = max|x| / levels, q = round-half-even(x / d)
};
// Every numerics feature, the coarser first.
inline constexpr DeclaredNumerics kDeclaredNumerics[] = {
    {SY_FEATURE_ACTIVATION_Q8, "activation_q8", "activations quantized to 8-bit blocks", 127},
    {SY_FEATURE_ACTIVATION_Q16, "activation_q16", "activations quantized to 16-bit blocks",
     127 * 254},
};
// nullopt for a kernel that declares none (exact). A kernel declaring both is taken at the
// coarser, 8-bit one: the claim that promises less.
std::optional<DeclaredNumerics> declared_numerics(uint64_t features);

// The dtypes (a mask) an envelope of a plugin at ABI minor `minor` may declare: q5_0, q5_1,
// iq4_nl, iq4_xs, q2_k and q3_k are 1.6's, so an older plugin's bits there name nothing it could
// have known.
uint64_t dtypes_at_minor(uint64_t dtypes, uint32_t minor);

struct Refusal {
  std::string constraint;
  std::string required;
  std::string offered;
  std::string text;
};

// Every constraint of `env` (and of `device`'s availability) that `op` violates.
std::vector<Refusal> envelope_refusals(const Envelope& env, const OpDesc& op,
                                       const DeviceInfo& device);

nlohmann::json to_json(const Envelope& env);
nlohmann::json to_json(const DeviceInfo& device);
nlohmann::json to_json(const Refusal& refusal);
// Throws std::runtime_error naming the field when `j` is not a valid envelope.
Envelope envelope_from_json(const nlohmann::json& j);

}  // namespace sy
