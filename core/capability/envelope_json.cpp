// JSON form of envelopes and devices: the manifest's and `caps --json`'s shape.
#include <stdexcept>

#include "core/capability/envelope.hpp"
#include "core/capability/vocabulary.hpp"

namespace sy {
namespace {

using nlohmann::json;

const json& field(const json& j, const char* name) {
  if (!j.is_object() || !j.contains(name))
    throw std::runtime_error(std::string("missing field '") + name + "'");
  return j.at(name);
}

template <typename T, typename Parse>
T parse_named(const json& j, const char* name, Parse parse) {
  const json& v = field(j, name);
  if (!v.is_string()) throw std::runtime_error(std::string("field '") + name + "' is not a string");
  auto parsed = parse(v.get<std::string>());
  if (!parsed)
    throw std::runtime_error(std::string("field '") + name + "' has unknown value '" +
                             v.get<std::string>() + "'");
  return *parsed;
}

template <typename Parse>
uint64_t parse_mask(const json& j, const char* name, Parse parse) {
  const json& v = field(j, name);
  if (!v.is_array()) throw std::runtime_error(std::string("field '") + name + "' is not an array");
  uint64_t mask = 0;
  for (const auto& item : v) {
    auto parsed = item.is_string() ? parse(item.get<std::string>()) : std::nullopt;
    if (!parsed)
      throw std::runtime_error(std::string("field '") + name + "' has unknown value " +
                               item.dump());
    mask |= UINT64_C(1) << static_cast<unsigned>(*parsed);
  }
  return mask;
}

json residency_list(const std::vector<sy_residency>& rs) {
  json out = json::array();
  for (auto r : rs) out.push_back(sy_residency_name(r) ? sy_residency_name(r) : "?");
  return out;
}

}  // namespace

json to_json(const Envelope& e) {
  return json{
      {"kernel", e.kernel},
      {"op", sy_op_kind_name(e.op) ? sy_op_kind_name(e.op) : "?"},
      {"family", e.family},
      {"device_type", device_type_name(e.device_type)},
      {"dtypes", dtype_names(e.dtypes)},
      {"features", feature_names(e.features)},
      {"limits",
       {{"head_dims", e.head_dims},
        {"head_dim_multiple", e.head_dim_multiple},
        {"head_dim_max", e.head_dim_max},
        {"max_gqa_ratio", e.max_gqa_ratio}}},
      {"residency",
       {{"default",
         sy_residency_name(e.default_residency) ? sy_residency_name(e.default_residency) : "?"},
        {"operands", residency_list(e.operand_residency)}}},
      {"cost_hint", e.cost_hint},
      {"weight_dtypes", dtype_names(e.weight_dtypes)},
  };
}

json to_json(const DeviceInfo& d) {
  json j{{"name", d.name},
         {"type", device_type_name(d.type)},
         {"id", d.id},
         {"arch", d.arch},
         {"memory_bytes", d.memory_bytes},
         {"compute_units", d.compute_units},
         {"available", d.available},
         {"memory_is_host", d.memory_is_host}};
  if (!d.available) j["unavailable_reason"] = d.unavailable_reason;
  return j;
}

json to_json(const Refusal& r) {
  return json{{"constraint", r.constraint},
              {"required", r.required},
              {"offered", r.offered},
              {"text", r.text}};
}

Envelope envelope_from_json(const json& j) {
  Envelope e;
  const json& kernel = field(j, "kernel");
  if (!kernel.is_string()) throw std::runtime_error("field 'kernel' is not a string");
  e.kernel = kernel.get<std::string>();
  e.op = parse_named<sy_op_kind>(j, "op", parse_op_kind);
  e.family = field(j, "family").get<std::string>();
  e.device_type = parse_named<DLDeviceType>(j, "device_type", parse_device_type);
  e.dtypes = parse_mask(j, "dtypes", parse_dtype);
  e.features = parse_mask(j, "features", parse_feature);
  const json& limits = field(j, "limits");
  e.head_dims = field(limits, "head_dims").get<std::vector<int32_t>>();
  e.head_dim_multiple = field(limits, "head_dim_multiple").get<int32_t>();
  e.head_dim_max = field(limits, "head_dim_max").get<int32_t>();
  e.max_gqa_ratio = field(limits, "max_gqa_ratio").get<int32_t>();
  const json& res = field(j, "residency");
  e.default_residency = parse_named<sy_residency>(res, "default", parse_residency);
  for (const auto& r : field(res, "operands")) {
    auto parsed = r.is_string() ? parse_residency(r.get<std::string>()) : std::nullopt;
    if (!parsed) throw std::runtime_error("residency operand has unknown value " + r.dump());
    e.operand_residency.push_back(*parsed);
  }
  e.cost_hint = field(j, "cost_hint").get<double>();
  if (j.contains("weight_dtypes"))  // since ABI 1.3; older manifests have none
    e.weight_dtypes = parse_mask(j, "weight_dtypes", parse_dtype);
  return e;
}

}  // namespace sy
