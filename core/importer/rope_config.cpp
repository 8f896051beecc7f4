// Rotary embeddings as the config declares them, computed as transformers computes them
// (modeling_rope_utils.py): `rope_parameters` (transformers >= 5; for Gemma 3 one dict per layer
// type) or the older `rope_scaling` with a top-level `rope_theta`; types default, linear,
// llama3 and yarn. A scaled type becomes a frequency table (inv_freq, f32 as transformers keeps
// it) and yarn's attention factor on cos and sin; dynamic, longrope and any other type are
// refused by name, as is a key of the dict this importer does not know.
#include <cmath>
#include <set>

#include "core/importer/model_spec.hpp"

namespace sy::importer {
namespace {

using nlohmann::json;

struct RopeParams {
  std::string type = "default";
  double theta = 10000;
  std::optional<double> factor, low_freq_factor, high_freq_factor, attention_factor, mscale,
      mscale_all_dim, beta_fast, beta_slow, partial_rotary_factor;
  std::optional<int64_t> original_max;
  bool truncate = true;
};

// Keys a rope dict may hold, by what reads them.
const std::set<std::string> kRopeKeys = {"rope_type",
                                         "type",
                                         "rope_theta",
                                         "factor",
                                         "low_freq_factor",
                                         "high_freq_factor",
                                         "original_max_position_embeddings",
                                         "attention_factor",
                                         "mscale",
                                         "mscale_all_dim",
                                         "beta_fast",
                                         "beta_slow",
                                         "truncate",
                                         "partial_rotary_factor"};

double positive(const ConfigReader& r, const json& v, const std::string& path) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
    r.fail(path, "must be a positive number, got " + v.dump());
  return v.get<double>();
}

std::optional<double> optional_positive(const ConfigReader& r, const json& d, const char* key,
                                        const std::string& path) {
  auto it = d.find(key);
  if (it == d.end() || it->is_null()) return std::nullopt;
  return positive(r, *it, path + "." + key);
}

RopeParams parse(const ConfigReader& r, const json& d, const std::string& path, double theta) {
  if (!d.is_object()) r.fail(path, "must be an object, got " + d.dump());
  for (const auto& [key, value] : d.items())
    if (!kRopeKeys.count(key))
      r.fail(path + "." + key,
             "is not a rope parameter Switchyard reads (it may change the "
             "rotary embedding), value " +
                 value.dump());
  RopeParams p;
  p.theta = theta;
  for (const char* key : {"rope_type", "type"})
    if (auto it = d.find(key); it != d.end() && !it->is_null()) {
      if (!it->is_string()) r.fail(path + "." + key, "must be a string, got " + it->dump());
      p.type = it->get<std::string>();
      break;
    }
  if (auto it = d.find("rope_theta"); it != d.end() && !it->is_null())
    p.theta = positive(r, *it, path + ".rope_theta");
  p.factor = optional_positive(r, d, "factor", path);
  p.low_freq_factor = optional_positive(r, d, "low_freq_factor", path);
  p.high_freq_factor = optional_positive(r, d, "high_freq_factor", path);
  p.attention_factor = optional_positive(r, d, "attention_factor", path);
  p.mscale = optional_positive(r, d, "mscale", path);
  p.mscale_all_dim = optional_positive(r, d, "mscale_all_dim", path);
  p.beta_fast = optional_positive(r, d, "beta_fast", path);
  p.beta_slow = optional_positive(r, d, "beta_slow", path);
  if (auto it = d.find("partial_rotary_factor"); it != d.end() && !it->is_null())
    p.partial_rotary_factor = positive(r, *it, path + ".partial_rotary_factor");
  if (auto it = d.find("original_max_position_embeddings"); it != d.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1)
      r.fail(path + ".original_max_position_embeddings",
             "must be a positive integer, got " + it->dump());
    p.original_max = it->get<int64_t>();
  }
  if (auto it = d.find("truncate"); it != d.end() && !it->is_null()) {
    if (!it->is_boolean()) r.fail(path + ".truncate", "must be true or false, got " + it->dump());
    p.truncate = it->get<bool>();
  }
  static const std::set<std::string> kTypes = {"default", "linear", "llama3", "yarn"};
  if (!kTypes.count(p.type))
    r.fail(path + ".rope_type", "rope type \"" + p.type +
                                    "\" is not supported (default, linear, llama3, yarn); "
                                    "dynamic and longrope change with the sequence length");
  if (p.type != "default" && !p.factor)
    r.fail(path + ".factor", "rope type \"" + p.type + "\" needs a factor");
  if (p.type == "llama3" && (!p.low_freq_factor || !p.high_freq_factor))
    r.fail(path, "rope type \"llama3\" needs low_freq_factor and high_freq_factor");
  if (p.type == "llama3" && *p.low_freq_factor >= *p.high_freq_factor)
    r.fail(path, "llama3's low_freq_factor must be below its high_freq_factor");
  return p;
}

// transformers' default table, in its f32 arithmetic: 1 / base^(2i / dim).
std::vector<float> default_table(double base, int64_t dim) {
  std::vector<float> f(size_t(dim / 2));
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = 1.0f / std::pow(float(base), float(2 * i) / float(dim));
  return f;
}

std::vector<float> llama3_table(const RopeParams& p, int64_t dim, int64_t original_max) {
  std::vector<float> f = default_table(p.theta, dim);
  const double factor = *p.factor, low = *p.low_freq_factor, high = *p.high_freq_factor;
  const double low_wavelen = double(original_max) / low, high_wavelen = double(original_max) / high;
  for (float& x : f) {
    const float wavelen = float(2 * M_PI) / x;
    const float scaled = wavelen > low_wavelen ? x / float(factor) : x;
    if (wavelen < high_wavelen || wavelen > low_wavelen) {
      x = scaled;
      continue;
    }
    const float smooth = (float(original_max) / wavelen - float(low)) / float(high - low);
    x = (1 - smooth) * scaled / float(factor) + smooth * scaled;
  }
  return f;
}

double yarn_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

std::vector<float> yarn_table(const RopeParams& p, int64_t dim, int64_t original_max,
                              double& attention_factor) {
  const double base = p.theta, factor = *p.factor;
  if (p.attention_factor)
    attention_factor = *p.attention_factor;
  else if (p.mscale && p.mscale_all_dim)
    attention_factor = yarn_mscale(factor, *p.mscale) / yarn_mscale(factor, *p.mscale_all_dim);
  else
    attention_factor = yarn_mscale(factor, 1);
  const double beta_fast = p.beta_fast.value_or(32), beta_slow = p.beta_slow.value_or(1);
  auto correction_dim = [&](double rotations) {
    return double(dim) * std::log(double(original_max) / (rotations * 2 * M_PI)) /
           (2 * std::log(base));
  };
  double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
  if (p.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
  std::vector<float> f(size_t(dim / 2));
  for (size_t i = 0; i < f.size(); ++i) {
    const float pos_freq = std::pow(float(base), float(2 * i) / float(dim));
    const float extrapolation = 1.0f / pos_freq, interpolation = 1.0f / (float(factor) * pos_freq);
    const float ramp = std::clamp((float(i) - float(low)) / float(high - low), 0.0f, 1.0f);
    const float extrapolation_factor = 1 - ramp;
    f[i] = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return f;
}

// The rotary dims (head_dim × partial_rotary_factor, even and >= 2), and `spec`'s table.
void apply(const ConfigReader& r, const RopeParams& p, const std::string& path, ModelSpec& m,
           RopeSpec& spec, const std::string& table_name) {
  spec.theta = p.theta;
  if (p.type == "default") return;
  int64_t original_max =
      p.original_max.value_or(r.size("original_max_position_embeddings", 1, int64_t(1) << 40,
                                     r.size("max_position_embeddings", 1, int64_t(1) << 40, 2048)));
  if (p.type == "linear") {
    spec.inv_freq = default_table(p.theta, m.rotary_dim);
    for (float& x : spec.inv_freq) x /= float(*p.factor);
  } else if (p.type == "llama3") {
    spec.inv_freq = llama3_table(p, m.rotary_dim, original_max);
  } else {
    spec.inv_freq = yarn_table(p, m.rotary_dim, original_max, spec.attention_factor);
  }
  spec.table = table_name;
  (void)path;
}

// The dict the rope of this config is described by (rope_parameters, else rope_scaling), and
// its path for errors; nullptr when the config has neither.
const json* rope_dict(const ConfigReader& r, std::string& path) {
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (const json* d = r.raw(key)) {
      path = key;
      return d;
    }
  return nullptr;
}

}  // namespace

void read_rope(const ConfigReader& r, double default_theta, ModelSpec& m) {
  const double theta = r.number("rope_theta", 0, 1e12, default_theta);
  if (theta <= 0) r.fail("rope_theta", "must be positive");
  std::string path;
  const json* d = rope_dict(r, path);
  RopeParams p = d ? parse(r, *d, path, theta) : RopeParams{};
  if (!d) p.theta = theta;
  read_rotary_dim(r, p.partial_rotary_factor, m);
  RopeSpec spec;
  apply(r, p, path, m, spec, "rope_inv_freq");
  for (auto& l : m.layer) l.rope_spec = spec;
}

void read_rope_by_layer_type(const ConfigReader& r, double full_theta, double sliding_theta,
                             ModelSpec& m) {
  const json* nested = r.raw("rope_parameters");
  const bool by_type =
      nested && nested->is_object() &&
      (nested->contains("full_attention") || nested->contains("sliding_attention"));
  if (!by_type) {
    // Older configs: rope_theta and rope_scaling for the global layers, rope_local_base_freq
    // (rope_theta's sliding counterpart) unscaled for the sliding ones.
    read_rope(r, full_theta, m);
    RopeSpec local;
    local.theta = r.number("rope_local_base_freq", 0, 1e12, sliding_theta);
    if (local.theta <= 0) r.fail("rope_local_base_freq", "must be positive");
    for (auto& l : m.layer)
      if (l.window_left >= 0) l.rope_spec = local;
    return;
  }
  for (const auto& [key, value] : nested->items())
    if (key != "full_attention" && key != "sliding_attention")
      r.fail("rope_parameters." + key,
             "per-layer-type rope parameters are keyed full_attention / sliding_attention");
  RopeParams full, sliding;
  full.theta = full_theta;
  sliding.theta = sliding_theta;
  if (auto it = nested->find("full_attention"); it != nested->end() && !it->is_null())
    full = parse(r, *it, "rope_parameters.full_attention", full_theta);
  if (auto it = nested->find("sliding_attention"); it != nested->end() && !it->is_null())
    sliding = parse(r, *it, "rope_parameters.sliding_attention", sliding_theta);
  if (full.partial_rotary_factor != sliding.partial_rotary_factor)
    r.fail("rope_parameters", "the layer types give different partial_rotary_factor values");
  read_rotary_dim(r, full.partial_rotary_factor, m);
  RopeSpec global_spec, local_spec;
  apply(r, full, "rope_parameters.full_attention", m, global_spec, "rope_inv_freq");
  apply(r, sliding, "rope_parameters.sliding_attention", m, local_spec, "rope_inv_freq_local");
  for (auto& l : m.layer) l.rope_spec = l.window_left >= 0 ? local_spec : global_spec;
}

}  // namespace sy::importer
